//! `tabwarden demo`: an agent session played through the tools on the built-in site.

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tool_surface::Tools;

struct Player<'a> {
    tools: &'a Tools,
    jsonl: bool,
    step: usize,
    ok: bool,
}

impl Player<'_> {
    /// Calls a tool, prints the call and its JSON, checks `expect`.
    async fn call(
        &mut self,
        title: &str,
        tool: &str,
        args: Value,
        expect: impl FnOnce(&Value) -> Result<(), String>,
    ) -> Value {
        self.step += 1;
        let start = Instant::now();
        let out = self.tools.call(tool, args.clone()).await;
        let elapsed = start.elapsed();
        let verdict = expect(&out);
        if self.jsonl {
            let line = json!({"step": self.step, "title": title, "tool": tool, "args": args, "result": out, "ok": verdict.is_ok(), "problem": verdict.as_ref().err()});
            println!("{line}");
        } else {
            println!("\n── step {}: {title}", self.step);
            println!("→ {tool} {args}");
            let mut shown = out.clone();
            if let Some(o) = shown.as_object_mut() {
                if o.contains_key("snapshot") {
                    o.insert("snapshot".into(), json!("<AX text, below>"));
                }
            }
            let pretty = serde_json::to_string_pretty(&shown).unwrap_or_default();
            for line in pretty.lines() {
                println!("  {line}");
            }
            if let Some(text) = out.get("snapshot").and_then(Value::as_str) {
                println!("  snapshot text:");
                for line in text.lines() {
                    println!("    {line}");
                }
            }
            match &verdict {
                Ok(()) => println!("✓ ({} ms)", elapsed.as_millis()),
                Err(why) => println!("✗ {why}"),
            }
        }
        if let Err(why) = verdict {
            tracing::error!(step = self.step, %why, "demo expectation failed");
            self.ok = false;
        }
        out
    }
}

fn eq(v: &Value, path: &str, want: &str) -> Result<(), String> {
    let got = v.pointer(path).cloned().unwrap_or(Value::Null);
    if got.as_str() == Some(want) {
        Ok(())
    } else {
        Err(format!("expected {path} = {want:?}, got {got}"))
    }
}

fn find_ref(snapshot: &Value, needle: &str) -> Option<String> {
    let text = snapshot["snapshot"].as_str()?;
    let line = text.lines().find(|l| l.contains(needle))?;
    let start = line.find("[ref=")? + 5;
    let end = start + line[start..].find(']')?;
    Some(line[start..end].to_string())
}

fn oopif(snapshot: &Value) -> Option<Value> {
    snapshot["frame_tree"]["top"]["children"]
        .as_array()?
        .iter()
        .find(|c| c["oopif"] == true)
        .cloned()
}

/// Plays the session against the site on `port`; true when every expectation held.
pub async fn play(tools: &Tools, port: u16, jsonl: bool) -> bool {
    let mut p = Player {
        tools,
        jsonl,
        step: 0,
        ok: true,
    };
    let url = format!("http://localhost:{port}/index.html");

    p.call(
        "open the page: a prompt blocks the load, navigate returns at once",
        "browser_navigate",
        json!({"url": url}),
        |v| {
            eq(v, "/status", "dialog_opened")?;
            eq(v, "/dialog/type", "prompt")
        },
    )
    .await;

    let snap = p
        .call(
            "snapshot: the pending prompt and the frame tree, no AX text while blocked",
            "browser_snapshot",
            json!({}),
            |v| {
                eq(v, "/pending_dialogs/0/type", "prompt")?;
                if v.get("snapshot").is_some() {
                    return Err("AX text should be absent while a dialog is pending".into());
                }
                Ok(())
            },
        )
        .await;
    let _ = snap;

    p.call(
        "a renderer-bound tool refuses at once instead of hanging",
        "browser_evaluate",
        json!({"expression": "1 + 1"}),
        |v| eq(v, "/error/code", "dialog_pending"),
    )
    .await;

    p.call(
        "answer the prompt",
        "browser_dialog",
        json!({"action": "accept", "prompt_text": "Ada"}),
        |v| {
            eq(v, "/dialog/type", "prompt")?;
            eq(v, "/action", "accept")
        },
    )
    .await;

    // The cross-site iframe attaches after the load; wait (bounded) until its button shows.
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut snap = tools.call("browser_snapshot", json!({})).await;
    while (find_ref(&snap, "Delete everything").is_none() || oopif(&snap).is_none())
        && Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
        snap = tools.call("browser_snapshot", json!({})).await;
    }
    let snap = p
        .call("snapshot: the page with refs, the OOPIF's content inlined, the answered prompt in recent_dialogs", "browser_snapshot", json!({}), |v| {
            let text = v["snapshot"].as_str().unwrap_or_default();
            if !text.contains("Hello, Ada!") {
                return Err("the greeting should show the prompt's answer".into());
            }
            if find_ref(v, "Delete everything").is_none() {
                return Err("the cross-site iframe's button should be in the snapshot".into());
            }
            if oopif(v).is_none() {
                return Err("frame_tree should list the cross-site iframe with oopif: true".into());
            }
            eq(v, "/recent_dialogs/0/closed_by", "agent")
        })
        .await;
    let oopif_id = oopif(&snap)
        .and_then(|f| f["frame_id"].as_str().map(String::from))
        .unwrap_or_default();
    let delete = find_ref(&snap, "Delete everything").unwrap_or_else(|| "e0".into());
    let spin = find_ref(&snap, "Start endless script").unwrap_or_else(|| "e0".into());
    let check = find_ref(&snap, "Check responsiveness").unwrap_or_else(|| "e0".into());

    let oid = oopif_id.clone();
    p.call(
        "click the OOPIF's button: it opens a confirm, the click returns with it",
        "browser_click",
        json!({"ref": delete}),
        move |v| {
            eq(v, "/status", "dialog_opened")?;
            eq(v, "/dialog/type", "confirm")?;
            eq(v, "/dialog/frame_id", &oid)
        },
    )
    .await;

    p.call(
        "answer the confirm (raised in the OOPIF, answered on the page session)",
        "browser_dialog",
        json!({"action": "accept"}),
        |v| eq(v, "/dialog/type", "confirm"),
    )
    .await;

    let want = format!("true from 127.0.0.1:{port}");
    p.call(
        "evaluate inside the OOPIF by frame id",
        "browser_evaluate",
        json!({"expression": "document.body.dataset.answer + ' from ' + location.host", "frame_id": oopif_id}),
        move |v| eq(v, "/value", &want),
    )
    .await;

    let started = Instant::now();
    p.call(
        "start the endless script: terminated within its 2000 ms budget",
        "browser_click",
        json!({"ref": spin, "timeout_ms": 2000}),
        move |v| {
            eq(v, "/error/code", "timeout")?;
            if started.elapsed() > Duration::from_secs(5) {
                return Err(format!("took {:?}, budget was 2 s", started.elapsed()));
            }
            Ok(())
        },
    )
    .await;

    p.call(
        "the tab still works: click",
        "browser_click",
        json!({"ref": check}),
        |v| eq(v, "/status", "done"),
    )
    .await;

    p.call(
        "and the click took effect",
        "browser_evaluate",
        json!({"expression": "document.getElementById('greeting').textContent"}),
        |v| eq(v, "/value", "Still responsive"),
    )
    .await;

    if !jsonl {
        println!(
            "\n{}",
            if p.ok {
                "demo: every step behaved as expected"
            } else {
                "demo: some steps FAILED (see ✗ above)"
            }
        );
    }
    p.ok
}
