//! The tools against real headless Chromium on loopback fixture pages.

use serde_json::{json, Value};
use tool_surface::{Tools, ToolsConfig};

const TOP: &str = r#"<!doctype html><title>Story</title>
<h1>Story</h1>
<p id="who">nobody</p>
<script>document.getElementById('who').textContent = 'hello ' + prompt('Your name?', 'guest');</script>
<button onclick="document.getElementById('who').textContent='clicked'">Say clicked</button>
<button onclick="window.spin()">Spin forever</button>
<script>window.spin = () => { for(;;){} };</script>
<iframe name="same" src="/same.html"></iframe>
<iframe name="cross" src="http://127.0.0.1:PORT/cross.html"></iframe>"#;

const SAME: &str = r#"<!doctype html><title>Same</title><p>same-process frame</p>"#;
const CROSS: &str = r#"<!doctype html><title>Cross</title>
<button onclick="document.body.dataset.answer = String(confirm('Really?'))">Confirm it</button>
<script>window.whereami = () => location.host;</script>"#;

async fn setup() -> (cdp_mock::FixtureServer, Tools) {
    let fx = cdp_mock::FixtureServer::start().await;
    fx.page("/top.html", &TOP.replace("PORT", &fx.port().to_string()));
    fx.page("/same.html", SAME);
    fx.page("/cross.html", CROSS);
    let ws =
        cdp_transport::launcher::shared_chrome().unwrap_or_else(|e| panic!("no Chromium: {e}"));
    let tools = Tools::connect(&ws, ToolsConfig::default())
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    (fx, tools)
}

fn find_ref(snapshot: &str, needle: &str) -> String {
    let line = snapshot
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no {needle:?} in\n{snapshot}"));
    let start = line
        .find("[ref=")
        .unwrap_or_else(|| panic!("no ref in {line}"))
        + 5;
    line[start
        ..line[start..]
            .find(']')
            .map(|i| start + i)
            .unwrap_or(line.len())]
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_whole_story() {
    let (fx, tools) = setup().await;
    let url = fx.url("localhost", "/top.html");
    let nav = tools.call("browser_navigate", json!({"url": url})).await;
    assert_eq!(nav["status"], "dialog_opened", "{nav:#}");
    assert_eq!(nav["dialog"]["type"], "prompt");

    let snap = tools.call("browser_snapshot", json!({})).await;
    assert_eq!(
        snap["pending_dialogs"][0]["message"], "Your name?",
        "{snap:#}"
    );
    assert!(snap.get("snapshot").is_none());
    let click = tools.call("browser_click", json!({"ref": "e1"})).await;
    assert_eq!(click["error"]["code"], "dialog_pending", "{click:#}");

    let ans = tools
        .call(
            "browser_dialog",
            json!({"action": "accept", "prompt_text": "Ada"}),
        )
        .await;
    assert_eq!(ans["dialog"]["type"], "prompt", "{ans:#}");

    // The OOPIF attaches a moment after the load; poll the snapshot briefly.
    let mut snap = Value::Null;
    for _ in 0..50 {
        snap = tools.call("browser_snapshot", json!({})).await;
        let text = snap["snapshot"].as_str().unwrap_or_default();
        if text.contains("Confirm it") && text.contains("hello Ada") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let text = snap["snapshot"].as_str().unwrap_or_default().to_string();
    eprintln!(
        "{}",
        serde_json::to_string_pretty(&snap).unwrap_or_default()
    );
    assert!(text.contains("hello Ada"), "{text}");
    let children = snap["frame_tree"]["top"]["children"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let oopif = children
        .iter()
        .find(|c| c["oopif"] == true)
        .unwrap_or_else(|| panic!("no OOPIF in {snap:#}"));
    let same = children
        .iter()
        .find(|c| c.get("oopif").is_none())
        .unwrap_or_else(|| panic!("no same-process frame in {snap:#}"));

    let confirm = find_ref(&text, "Confirm it");
    let c = tools.call("browser_click", json!({"ref": confirm})).await;
    assert_eq!(c["status"], "dialog_opened", "{c:#}");
    assert_eq!(c["dialog"]["frame_id"], oopif["frame_id"]);
    let a = tools
        .call("browser_dialog", json!({"action": "accept"}))
        .await;
    assert_eq!(a["action"], "accept", "{a:#}");

    let e = tools.call("browser_evaluate", json!({"expression": "document.body.dataset.answer + ' ' + whereami()", "frame_id": oopif["frame_id"]})).await;
    assert_eq!(e["value"], format!("true 127.0.0.1:{}", fx.port()), "{e:#}");
    let e = tools
        .call(
            "browser_evaluate",
            json!({"expression": "document.title", "frame_id": same["frame_id"]}),
        )
        .await;
    assert_eq!(e["value"], "Same", "{e:#}");
    let n = tools.call("browser_cdp", json!({"method": "Runtime.evaluate", "params": {"expression": "1+1"}, "frame_id": same["frame_id"]})).await;
    assert_eq!(n["error"]["code"], "not_oopif", "{n:#}");
    let r = tools.call("browser_cdp", json!({"method": "Runtime.evaluate", "params": {"expression": "location.port"}, "frame_id": oopif["frame_id"]})).await;
    assert_eq!(
        r["result"]["result"]["value"],
        fx.port().to_string(),
        "{r:#}"
    );

    let spin = find_ref(&text, "Spin forever");
    let t0 = std::time::Instant::now();
    let h = tools
        .call("browser_click", json!({"ref": spin, "timeout_ms": 1000}))
        .await;
    assert_eq!(h["error"]["code"], "timeout", "{h:#}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(4));
    let h = tools
        .call(
            "browser_evaluate",
            json!({"expression": "while(true){}", "timeout_ms": 500}),
        )
        .await;
    assert_eq!(h["error"]["code"], "timeout", "{h:#}");
    let say = find_ref(&text, "Say clicked");
    let ok = tools.call("browser_click", json!({"ref": say})).await;
    assert_eq!(ok["status"], "done", "{ok:#}");
    let v = tools
        .call(
            "browser_evaluate",
            json!({"expression": "document.getElementById('who').textContent"}),
        )
        .await;
    assert_eq!(v["value"], "clicked", "{v:#}");
}

const FORM: &str = r#"<!doctype html><title>Form</title>
<input id="q" aria-label="Query">
<p id="out">none</p>
<button onclick="document.getElementById('out').textContent = 'typed ' + document.getElementById('q').value">Show</button>
<script>
document.getElementById('q').addEventListener('keydown', e => { if (e.key === 'Enter') document.getElementById('out').textContent = 'enter ' + e.target.value; });
document.addEventListener('click', e => { window.lastClickTrusted = e.isTrusted; });
</script>"#;

/// Type, press a key, click, element evaluate and tabs, each through the lower
/// crates: real input events (`isTrusted`), refs kept across calls until the
/// next snapshot, a ref of an older snapshot's document is stale.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refs_drive_real_input_and_tabs_are_supervised() {
    let (fx, tools) = setup().await;
    fx.page("/form.html", FORM);
    let nav = tools
        .call(
            "browser_navigate",
            json!({"url": fx.url("localhost", "/form.html")}),
        )
        .await;
    assert_eq!(nav["status"], "loaded", "{nav:#}");
    assert_eq!(nav["title"], "Form", "{nav:#}");
    let snap = tools.call("browser_snapshot", json!({})).await;
    let text = snap["snapshot"].as_str().unwrap_or_default().to_string();
    let query = find_ref(&text, "Query");
    let show = find_ref(&text, "\"Show\"");

    let t = tools
        .call("browser_type", json!({"ref": query, "text": "abc"}))
        .await;
    assert_eq!(t["status"], "done", "{t:#}");
    // The same refs still work on the next call (no new snapshot in between).
    let k = tools
        .call("browser_press_key", json!({"key": "Enter", "ref": query}))
        .await;
    assert_eq!(k["status"], "done", "{k:#}");
    let v = tools
        .call(
            "browser_evaluate",
            json!({"expression": "document.getElementById('out').textContent"}),
        )
        .await;
    assert_eq!(v["value"], "enter abc", "{v:#}");

    let c = tools.call("browser_click", json!({"ref": show})).await;
    assert_eq!(c["status"], "done", "{c:#}");
    let v = tools
        .call("browser_evaluate", json!({"expression": "[document.getElementById('out').textContent, window.lastClickTrusted]"}))
        .await;
    assert_eq!(
        v["value"],
        json!(["typed abc", true]),
        "a real input event: {v:#}"
    );

    let el = tools
        .call(
            "browser_evaluate",
            json!({"expression": "el => el.value.toUpperCase()", "ref": query}),
        )
        .await;
    assert_eq!(el["value"], "ABC", "{el:#}");
    let u = tools
        .call("browser_evaluate", json!({"expression": "undefined"}))
        .await;
    assert_eq!(
        (u["value"].clone(), u["type"].clone()),
        (json!("undefined"), json!("undefined")),
        "{u:#}"
    );

    // A new tab becomes current and has its own supervisor; closing it goes back.
    let first = tools.call("browser_tabs", json!({})).await;
    let first_id = first["tabs"][0]["tab_id"].clone();
    let n = tools
        .call(
            "browser_tabs",
            json!({"action": "new", "url": fx.url("localhost", "/same.html")}),
        )
        .await;
    let tabs = n["tabs"].as_array().cloned().unwrap_or_default();
    assert_eq!(tabs.len(), 2, "{n:#}");
    let new_id = tabs
        .iter()
        .find(|t| t["current"] == true)
        .map(|t| t["tab_id"].clone())
        .unwrap_or_default();
    assert_ne!(new_id, first_id, "{n:#}");
    let stale_here = tools.call("browser_click", json!({"ref": show})).await;
    assert_eq!(
        stale_here["error"]["code"], "unknown_ref",
        "the new tab has no refs yet: {stale_here:#}"
    );
    let closed = tools
        .call("browser_tabs", json!({"action": "close", "tab_id": new_id}))
        .await;
    assert_eq!(
        closed["tabs"].as_array().map(Vec::len),
        Some(1),
        "{closed:#}"
    );
    assert_eq!(closed["tabs"][0]["tab_id"], first_id, "{closed:#}");
    assert_eq!(closed["tabs"][0]["current"], true, "{closed:#}");

    // Back on the first tab its refs still work until the document changes.
    let again = tools.call("browser_click", json!({"ref": show})).await;
    assert_eq!(again["status"], "done", "{again:#}");
    let nav = tools
        .call(
            "browser_navigate",
            json!({"url": fx.url("localhost", "/same.html")}),
        )
        .await;
    assert_eq!(nav["status"], "loaded", "{nav:#}");
    let stale = tools.call("browser_click", json!({"ref": show})).await;
    assert_eq!(stale["error"]["code"], "stale_ref", "{stale:#}");
    assert!(
        stale["error"]["next_step"]
            .as_str()
            .is_some_and(|s| s.contains("browser_snapshot")),
        "{stale:#}"
    );
}
