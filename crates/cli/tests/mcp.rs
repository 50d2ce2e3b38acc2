//! `tabwarden mcp` as a child process, driven by the rmcp client over stdio.

use rmcp::model::CallToolRequestParams;
use rmcp::service::{RoleClient, RunningService};
use rmcp::transport::{ConfigureCommandExt, TokioChildProcess};
use rmcp::ServiceExt;
use serde_json::{json, Value};

const PAGE: &str = r#"<!doctype html><title>MCP page</title>
<p id="out">start</p>
<script>document.getElementById('out').textContent = 'name=' + prompt('Name?', 'x');</script>
<button onclick="document.getElementById('out').textContent='pressed'">Press me</button>"#;

async fn start(extra: &[&str]) -> RunningService<RoleClient, ()> {
    let ws =
        cdp_transport::launcher::shared_chrome().unwrap_or_else(|e| panic!("no Chromium: {e}"));
    let mut args = vec!["mcp".to_string(), "--cdp-url".to_string(), ws];
    args.extend(extra.iter().map(|s| s.to_string()));
    let cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_tabwarden")).configure(|c| {
        c.args(&args);
    });
    let transport =
        TokioChildProcess::new(cmd).unwrap_or_else(|e| panic!("spawn tabwarden mcp: {e}"));
    ().serve(transport)
        .await
        .unwrap_or_else(|e| panic!("MCP initialize: {e}"))
}

async fn call(client: &RunningService<RoleClient, ()>, tool: &str, args: Value) -> Value {
    let Value::Object(obj) = args else {
        panic!("args must be an object")
    };
    let r = client
        .call_tool(CallToolRequestParams::new(tool.to_string()).with_arguments(obj))
        .await
        .unwrap_or_else(|e| panic!("{tool}: MCP error {e}"));
    let out = r.structured_content.clone().unwrap_or(Value::Null);
    assert_eq!(
        r.is_error.unwrap_or(false),
        out.get("error").is_some(),
        "{tool}: is_error must match the JSON: {out}"
    );
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_list_and_a_dialog_session() {
    let fx = cdp_mock::FixtureServer::start().await;
    fx.page("/p.html", PAGE);
    let client = start(&[]).await;

    let info = client
        .peer_info()
        .unwrap_or_else(|| panic!("no server info after initialize"));
    assert_eq!(
        info.server_info.as_ref().map(|s| s.name.as_str()),
        Some("tabwarden")
    );
    assert!(info.capabilities.tools.is_some());

    let tools = client
        .list_all_tools()
        .await
        .unwrap_or_else(|e| panic!("tools/list: {e}"));
    let names: Vec<_> = tools.iter().map(|t| t.name.to_string()).collect();
    assert_eq!(names, tool_surface::TOOL_NAMES.to_vec());
    for (t, ours) in tools.iter().zip(tool_surface::list()) {
        assert_eq!(
            t.input_schema.get("type"),
            Some(&json!("object")),
            "{}",
            t.name
        );
        assert_eq!(
            Value::Object((*t.input_schema).clone()),
            ours.input_schema,
            "{}",
            t.name
        );
        assert!(
            t.description.as_deref().is_some_and(|d| d.len() > 20),
            "{}",
            t.name
        );
    }

    let nav = call(
        &client,
        "browser_navigate",
        json!({"url": fx.url("localhost", "/p.html")}),
    )
    .await;
    assert_eq!(nav["status"], "dialog_opened", "{nav}");
    assert_eq!(nav["dialog"]["message"], "Name?");

    let snap = call(&client, "browser_snapshot", json!({})).await;
    assert_eq!(snap["schema_version"], 1);
    assert_eq!(snap["pending_dialogs"][0]["type"], "prompt", "{snap}");
    assert_eq!(snap["supervisor"]["active"], true);
    let id = snap["pending_dialogs"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();

    let blocked = call(&client, "browser_screenshot", json!({})).await;
    assert_eq!(blocked["error"]["code"], "dialog_pending", "{blocked}");
    assert_eq!(blocked["error"]["dialog"]["id"], id.as_str());

    let d = call(
        &client,
        "browser_dialog",
        json!({"action": "accept", "prompt_text": "Grace", "dialog_id": id}),
    )
    .await;
    assert_eq!(d["dialog"]["type"], "prompt", "{d}");
    assert_eq!(d["pending_dialogs"], json!([]));

    let e = call(
        &client,
        "browser_evaluate",
        json!({"expression": "document.getElementById('out').textContent"}),
    )
    .await;
    assert_eq!(e["value"], "name=Grace", "{e}");
    assert_eq!(e["type"], "string");

    let snap = call(&client, "browser_snapshot", json!({})).await;
    let text = snap["snapshot"].as_str().unwrap_or_default();
    assert!(text.contains("button \"Press me\" [ref="), "{text}");
    assert_eq!(snap["recent_dialogs"][0]["user_input"], "Grace", "{snap}");
    client
        .cancel()
        .await
        .unwrap_or_else(|e| panic!("close: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_at_every_tool_gives_a_typed_error_and_the_server_keeps_serving() {
    let fx = cdp_mock::FixtureServer::start().await;
    fx.page(
        "/b.html",
        "<!doctype html><title>B</title><button>One</button><iframe src='/f.html'></iframe>",
    );
    fx.page("/f.html", "<p>frame</p>");
    let client = start(&[]).await;
    let nav = call(
        &client,
        "browser_navigate",
        json!({"url": fx.url("127.0.0.1", "/b.html")}),
    )
    .await;
    assert_eq!(nav["status"], "loaded", "{nav}");
    let snap = call(&client, "browser_snapshot", json!({})).await;
    let button_ref = {
        let text = snap["snapshot"].as_str().unwrap_or_default();
        let line = text
            .lines()
            .find(|l| l.contains("\"One\""))
            .unwrap_or_else(|| panic!("{text}"));
        line[line.find("[ref=").unwrap_or(0) + 5..line.len() - 1].to_string()
    };

    // A same-process frame is not routable by session.
    let frame = snap["frame_tree"]["top"]["children"][0]["frame_id"].clone();
    let n = call(
        &client,
        "browser_cdp",
        json!({"method": "DOM.getDocument", "frame_id": frame}),
    )
    .await;
    assert_eq!(n["error"]["code"], "not_oopif", "{n}");
    assert!(
        n["error"]["next_step"]
            .as_str()
            .is_some_and(|s| s.contains("browser_evaluate")),
        "{n}"
    );

    let cases: Vec<(&str, Value, &str, Option<&str>)> = vec![
        (
            "browser_navigate",
            json!({}),
            "invalid_argument",
            Some("url"),
        ),
        (
            "browser_navigate",
            json!({"url": 5}),
            "invalid_argument",
            Some("url"),
        ),
        (
            "browser_navigate",
            json!({"url": "nope"}),
            "invalid_argument",
            Some("url"),
        ),
        (
            "browser_navigate",
            json!({"url": "http://127.0.0.1:9/x", "timeout_ms": 0}),
            "invalid_argument",
            Some("timeout_ms"),
        ),
        (
            "browser_navigate",
            json!({"url": "http://127.0.0.1:1/unreachable"}),
            "navigation_failed",
            None,
        ),
        (
            "browser_snapshot",
            json!({"timeout_ms": 120001}),
            "invalid_argument",
            Some("timeout_ms"),
        ),
        (
            "browser_snapshot",
            json!({"timeoutMs": 5}),
            "invalid_argument",
            Some("timeoutMs"),
        ),
        ("browser_click", json!({}), "invalid_argument", Some("ref")),
        (
            "browser_click",
            json!({"ref": 3}),
            "invalid_argument",
            Some("ref"),
        ),
        ("browser_click", json!({"ref": "e999"}), "unknown_ref", None),
        (
            "browser_type",
            json!({"ref": "e1"}),
            "invalid_argument",
            Some("text"),
        ),
        (
            "browser_type",
            json!({"ref": "e999", "text": "x"}),
            "unknown_ref",
            None,
        ),
        (
            "browser_press_key",
            json!({}),
            "invalid_argument",
            Some("key"),
        ),
        (
            "browser_press_key",
            json!({"key": "NoSuchKey"}),
            "invalid_argument",
            Some("key"),
        ),
        (
            "browser_press_key",
            json!({"key": "a", "ref": "e999"}),
            "unknown_ref",
            None,
        ),
        (
            "browser_evaluate",
            json!({}),
            "invalid_argument",
            Some("expression"),
        ),
        (
            "browser_evaluate",
            json!({"expression": 1}),
            "invalid_argument",
            Some("expression"),
        ),
        (
            "browser_evaluate",
            json!({"expression": "1", "timeout_ms": -1}),
            "invalid_argument",
            Some("timeout_ms"),
        ),
        (
            "browser_evaluate",
            json!({"expression": "1", "timeout_ms": 500000}),
            "invalid_argument",
            Some("timeout_ms"),
        ),
        (
            "browser_evaluate",
            json!({"expression": "1", "frame_id": "NOPE"}),
            "unknown_frame",
            None,
        ),
        (
            "browser_evaluate",
            json!({"expression": "el => 1", "ref": "e999"}),
            "unknown_ref",
            None,
        ),
        (
            "browser_evaluate",
            json!({"expression": "throw new Error('boom')"}),
            "script_error",
            None,
        ),
        (
            "browser_dialog",
            json!({}),
            "invalid_argument",
            Some("action"),
        ),
        (
            "browser_dialog",
            json!({"action": "maybe"}),
            "invalid_argument",
            Some("action"),
        ),
        (
            "browser_dialog",
            json!({"action": "accept"}),
            "no_dialog",
            None,
        ),
        (
            "browser_dialog",
            json!({"action": "dismiss", "dialog_id": "d-42"}),
            "no_dialog",
            None,
        ),
        ("browser_cdp", json!({}), "invalid_argument", Some("method")),
        (
            "browser_cdp",
            json!({"method": "DOM.getDocument", "params": "x"}),
            "invalid_argument",
            Some("params"),
        ),
        (
            "browser_cdp",
            json!({"method": "Nope.nothing"}),
            "cdp_error",
            None,
        ),
        (
            "browser_cdp",
            json!({"method": "DOM.getDocument", "frame_id": "NOPE"}),
            "unknown_frame",
            None,
        ),
        (
            "browser_screenshot",
            json!({"format": "gif"}),
            "invalid_argument",
            Some("format"),
        ),
        (
            "browser_screenshot",
            json!({"timeout_ms": 0}),
            "invalid_argument",
            Some("timeout_ms"),
        ),
        (
            "browser_console",
            json!({"limit": "x"}),
            "invalid_argument",
            Some("limit"),
        ),
        (
            "browser_tabs",
            json!({"action": "fly"}),
            "invalid_argument",
            Some("action"),
        ),
        (
            "browser_tabs",
            json!({"action": "select"}),
            "invalid_argument",
            Some("tab_id"),
        ),
        (
            "browser_tabs",
            json!({"action": "close", "tab_id": "NOPE"}),
            "unknown_tab",
            None,
        ),
        ("browser_fly", json!({}), "unknown_tool", None),
    ];
    let mut seen_tools = std::collections::BTreeSet::new();
    for (tool, args, code, field) in cases {
        let out = call(&client, tool, args.clone()).await;
        assert_eq!(out["error"]["code"], code, "{tool} {args}: {out}");
        assert!(
            out["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty()),
            "{out}"
        );
        if let Some(f) = field {
            assert_eq!(out["error"]["field"], f, "{tool} {args}: {out}");
        }
        seen_tools.insert(tool);
    }
    for t in tool_surface::TOOL_NAMES {
        assert!(seen_tools.contains(t), "no bad-input case for {t}");
    }

    // Refs of an older document are stale after a navigation.
    let nav = call(
        &client,
        "browser_navigate",
        json!({"url": fx.url("127.0.0.1", "/f.html")}),
    )
    .await;
    assert_eq!(nav["status"], "loaded", "{nav}");
    let stale = call(&client, "browser_click", json!({"ref": button_ref})).await;
    assert_eq!(stale["error"]["code"], "stale_ref", "{stale}");

    // Still serving.
    let ok = call(&client, "browser_evaluate", json!({"expression": "6 * 7"})).await;
    assert_eq!(ok["value"], 42, "{ok}");
    let tabs = call(&client, "browser_tabs", json!({})).await;
    assert!(
        tabs["tabs"]
            .as_array()
            .is_some_and(|t| t.iter().any(|t| t["current"] == true)),
        "{tabs}"
    );
    let shot = call(&client, "browser_screenshot", json!({})).await;
    assert_eq!(shot["mime_type"], "image/png", "{shot}");
    // The base64 is sent once, in the image block only.
    assert!(shot.get("data").is_none(), "{shot}");
    let raw = client
        .call_tool(CallToolRequestParams::new("browser_screenshot".to_string()))
        .await
        .unwrap_or_else(|e| panic!("browser_screenshot: {e}"));
    let dump = serde_json::to_value(&raw.content).unwrap_or_default();
    let blocks = dump.as_array().cloned().unwrap_or_default();
    assert_eq!(blocks.len(), 2, "{dump}");
    assert_eq!(blocks[1]["type"], "image", "{dump}");
    assert!(blocks[1]["data"].as_str().is_some_and(|d| d.len() > 100));
    assert!(
        !blocks[0]["text"]
            .as_str()
            .unwrap_or_default()
            .contains("\"data\""),
        "{dump}"
    );
    let console = call(&client, "browser_console", json!({})).await;
    assert!(console["total"].is_u64(), "{console}");
    client
        .cancel()
        .await
        .unwrap_or_else(|e| panic!("close: {e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_evaluate_refuses_script() {
    let client = start(&["--no-evaluate"]).await;
    let e = call(&client, "browser_evaluate", json!({"expression": "1"})).await;
    assert_eq!(e["error"]["code"], "evaluate_disabled", "{e}");
    for m in [
        "Runtime.evaluate",
        "Runtime.callFunctionOn",
        "Page.addScriptToEvaluateOnNewDocument",
    ] {
        let c = call(
            &client,
            "browser_cdp",
            json!({"method": m, "params": {"expression": "1"}}),
        )
        .await;
        assert_eq!(c["error"]["code"], "evaluate_disabled", "{m}: {c}");
    }
    let ok = call(
        &client,
        "browser_cdp",
        json!({"method": "Page.getFrameTree"}),
    )
    .await;
    assert!(ok["result"]["frameTree"].is_object(), "{ok}");
    client
        .cancel()
        .await
        .unwrap_or_else(|e| panic!("close: {e}"));
}
