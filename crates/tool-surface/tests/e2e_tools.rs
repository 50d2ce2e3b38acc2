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
