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

// ------------------------------------------------------- JSON-RPC errors

/// `tabwarden mcp` on raw stdio: lines in, lines out.
struct RawMcp {
    child: tokio::process::Child,
    stdin: tokio::process::ChildStdin,
    stdout: tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
}

impl RawMcp {
    /// `tabwarden mcp` on the shared Chromium.
    async fn start() -> RawMcp {
        let ws =
            cdp_transport::launcher::shared_chrome().unwrap_or_else(|e| panic!("no Chromium: {e}"));
        RawMcp::spawn(&["mcp", "--cdp-url", &ws])
    }

    /// `tabwarden ARGS` with piped stdin/stdout.
    fn spawn(args: &[&str]) -> RawMcp {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_tabwarden"))
            .env_remove("TABWARDEN_CDP_URL")
            .args(args)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn tabwarden mcp: {e}"));
        let stdin = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
        use tokio::io::AsyncBufReadExt;
        RawMcp {
            child,
            stdin,
            stdout: tokio::io::BufReader::new(stdout).lines(),
        }
    }

    async fn send(&mut self, line: &str) {
        use tokio::io::AsyncWriteExt;
        self.stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap_or_else(|e| panic!("write {line}: {e}"));
        self.stdin.flush().await.unwrap_or_else(|e| panic!("{e}"));
    }

    /// The next line the server writes, as JSON (bounded wait).
    async fn recv(&mut self) -> Value {
        let line =
            tokio::time::timeout(std::time::Duration::from_secs(20), self.stdout.next_line())
                .await
                .unwrap_or_else(|_| panic!("no reply within 20 s"))
                .unwrap_or_else(|e| panic!("read stdout: {e}"))
                .unwrap_or_else(|| panic!("stdout closed"));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("reply is not JSON ({e}): {line}"))
    }

    /// `initialize` (id 1) and `notifications/initialized`.
    async fn initialize(&mut self) {
        self.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#).await;
        let init = self.recv_id(json!(1)).await;
        assert_eq!(init["result"]["serverInfo"]["name"], "tabwarden", "{init}");
        self.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
    }

    /// Closes stdin and waits (bounded) for the exit; returns the status,
    /// how long it took and the lines written after the last `recv`.
    async fn close(mut self) -> (std::process::ExitStatus, std::time::Duration, Vec<String>) {
        drop(self.stdin);
        let t0 = std::time::Instant::now();
        let status = tokio::time::timeout(std::time::Duration::from_secs(20), self.child.wait())
            .await
            .unwrap_or_else(|_| panic!("tabwarden mcp did not exit within 20 s of stdin EOF"))
            .unwrap_or_else(|e| panic!("{e}"));
        let took = t0.elapsed();
        let mut rest = Vec::new();
        while let Ok(Ok(Some(l))) =
            tokio::time::timeout(std::time::Duration::from_secs(5), self.stdout.next_line()).await
        {
            rest.push(l);
        }
        (status, took, rest)
    }

    /// The next reply, which must answer `id`.
    async fn recv_id(&mut self, id: Value) -> Value {
        let v = self.recv().await;
        assert_eq!(
            v.get("id"),
            Some(&id),
            "expected the reply to id {id}, got {v}"
        );
        v
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_line_that_is_not_json_gets_32700_and_bad_tools_call_params_get_32602() {
    let mut mcp = RawMcp::start().await;
    mcp.send(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}}"#).await;
    let init = mcp.recv_id(json!(1)).await;
    assert_eq!(init["result"]["serverInfo"]["name"], "tabwarden", "{init}");
    mcp.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
        .await;

    // Not JSON: -32700 with id null (JSON-RPC 2.0 §5.1), one reply per line.
    for garbage in ["this is not json", "{\"jsonrpc\":\"2.0\",\"id\":", "[1,2"] {
        mcp.send(garbage).await;
        let e = mcp.recv().await;
        assert_eq!(e["jsonrpc"], "2.0", "{e}");
        assert_eq!(e["id"], Value::Null, "{e}");
        assert_eq!(e["error"]["code"], -32700, "{garbage}: {e}");
        assert!(
            e["error"]["message"]
                .as_str()
                .is_some_and(|m| m.starts_with("Parse error")),
            "{e}"
        );
    }
    // An empty line is no message and gets no reply: the next reply is ping's.
    mcp.send("").await;
    mcp.send(r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
        .await;
    let pong = mcp.recv_id(json!("p")).await;
    assert!(pong.get("result").is_some(), "{pong}");

    // tools/call whose params do not decode: -32602 naming the problem.
    let cases = [
        (r#"{"name":5}"#, "expected a string"),
        (r#"{}"#, "missing field `name`"),
        (
            r#"{"name":"browser_console","arguments":"x"}"#,
            "expected a map",
        ),
    ];
    for (i, (params, why)) in cases.iter().enumerate() {
        let id = 10 + i as u64;
        mcp.send(&format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{params}}}"#
        ))
        .await;
        let e = mcp.recv_id(json!(id)).await;
        assert_eq!(e["error"]["code"], -32602, "{params}: {e}");
        let m = e["error"]["message"].as_str().unwrap_or_default();
        assert!(m.contains("tools/call") && m.contains(why), "{params}: {e}");
    }
    mcp.send(r#"{"jsonrpc":"2.0","id":20,"method":"tools/call"}"#)
        .await;
    let e = mcp.recv_id(json!(20)).await;
    assert_eq!(e["error"]["code"], -32602, "{e}");
    // An unknown method is still -32601; JSON of the wrong shape is -32600 (rmcp's own).
    mcp.send(r#"{"jsonrpc":"2.0","id":21,"method":"nope/nope","params":{}}"#)
        .await;
    let e = mcp.recv_id(json!(21)).await;
    assert_eq!(e["error"]["code"], -32601, "{e}");
    mcp.send(r#"{"foo":1}"#).await;
    let e = mcp.recv().await;
    assert_eq!(e["error"]["code"], -32600, "{e}");

    // Still serving.
    mcp.send(r#"{"jsonrpc":"2.0","id":30,"method":"tools/call","params":{"name":"browser_evaluate","arguments":{"expression":"6 * 7"}}}"#).await;
    let ok = mcp.recv_id(json!(30)).await;
    assert_eq!(ok["result"]["structuredContent"]["value"], 42, "{ok}");

    // stdin EOF ends the server.
    drop(mcp.stdin);
    let status = tokio::time::timeout(std::time::Duration::from_secs(10), mcp.child.wait())
        .await
        .unwrap_or_else(|_| panic!("tabwarden mcp did not exit on stdin EOF"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(status.success(), "{status}");
}

/// The `-32600`/`-32602` reply to `line`, which must carry `id`.
async fn error_reply(mcp: &mut RawMcp, line: &str, code: i64, id: Value) -> Value {
    mcp.send(line).await;
    let e = mcp.recv().await;
    assert_eq!(e["jsonrpc"], "2.0", "{line}: {e}");
    assert_eq!(
        e.get("id"),
        Some(&id),
        "{line}: the reply must carry id {id}: {e}"
    );
    assert_eq!(e["error"]["code"], code, "{line}: {e}");
    assert!(
        e["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{e}"
    );
    e
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_that_is_no_valid_request_gets_an_error_carrying_its_id() {
    let mut mcp = RawMcp::start().await;
    // Before initialize: an initialize whose params do not decode.
    let e = error_reply(
        &mut mcp,
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#,
        -32602,
        json!(0),
    )
    .await;
    let m = e["error"]["message"].as_str().unwrap_or_default();
    assert!(
        m.contains("initialize") && m.contains("missing field"),
        "{e}"
    );
    mcp.initialize().await;

    // Found by a tester: rmcp answered these without an id.
    let e = error_reply(
        &mut mcp,
        r#"{"jsonrpc":"2.0","id":36,"method":"tools/call","params":"str"}"#,
        -32602,
        json!(36),
    )
    .await;
    assert!(
        e["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("tools/call") && m.contains("must be an object")),
        "{e}"
    );
    error_reply(
        &mut mcp,
        r#"{"jsonrpc":"2.0","id":100}"#,
        -32600,
        json!(100),
    )
    .await;
    let e = error_reply(
        &mut mcp,
        r#"{"jsonrpc":"1.0","id":37,"method":"ping"}"#,
        -32600,
        json!(37),
    )
    .await;
    assert!(
        e["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("\"2.0\"")),
        "{e}"
    );
    // After initialize, an initialize with bad params: -32602, not -32601.
    error_reply(
        &mut mcp,
        r#"{"jsonrpc":"2.0","id":38,"method":"initialize","params":{}}"#,
        -32602,
        json!(38),
    )
    .await;
    error_reply(
        &mut mcp,
        r#"{"jsonrpc":"2.0","id":"s","method":"ping","params":5}"#,
        -32602,
        json!("s"),
    )
    .await;
    error_reply(
        &mut mcp,
        r#"{"jsonrpc":"2.0","id":39,"method":["tools/list"]}"#,
        -32600,
        json!(39),
    )
    .await;
    error_reply(
        &mut mcp,
        r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
        -32600,
        json!(1.5),
    )
    .await;
    // Ids that cannot be read (or that MCP forbids): id null.
    for line in [
        r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
        r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
        r#"{"foo":1}"#,
        r#"42"#,
        r#"[]"#,
    ] {
        error_reply(&mut mcp, line, -32600, Value::Null).await;
    }
    // A batch: one -32600 per request, with its id; the notification gets none.
    mcp.send(r#"[{"jsonrpc":"2.0","id":40,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"b","method":"tools/list"}]"#).await;
    let b = mcp.recv().await;
    let items = b.as_array().cloned().unwrap_or_default();
    assert_eq!(items.len(), 2, "{b}");
    assert_eq!(
        (items[0]["id"].clone(), items[1]["id"].clone()),
        (json!(40), json!("b")),
        "{b}"
    );
    for i in &items {
        assert_eq!(i["error"]["code"], -32600, "{b}");
        assert!(
            i["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("batches are not supported")),
            "{b}"
        );
    }
    // A notification that does not decode gets no reply: the next reply is ping's.
    mcp.send(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":5}"#)
        .await;
    mcp.send(r#"{"jsonrpc":"2.0","id":41,"method":"ping"}"#)
        .await;
    let pong = mcp.recv_id(json!(41)).await;
    assert!(pong.get("result").is_some(), "{pong}");
    // Still serving tools.
    mcp.send(r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"browser_evaluate","arguments":{"expression":"6 * 7"}}}"#).await;
    let ok = mcp.recv_id(json!(42)).await;
    assert_eq!(ok["result"]["structuredContent"]["value"], 42, "{ok}");
    let (status, _, _) = mcp.close().await;
    assert!(status.success(), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_eof_stops_a_running_call_and_the_server_exits_promptly() {
    let mut mcp = RawMcp::start().await;
    mcp.initialize().await;
    mcp.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"browser_navigate","arguments":{"url":"data:text/html,<title>eof</title>"}}}"#).await;
    let nav = mcp.recv_id(json!(2)).await;
    assert_eq!(
        nav["result"]["structuredContent"]["status"], "loaded",
        "{nav}"
    );
    mcp.send(r#"{"jsonrpc":"2.0","id":50,"method":"tools/call","params":{"name":"browser_evaluate","arguments":{"expression":"new Promise(() => {})","timeout_ms":60000}}}"#).await;
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    // The hung call answers "stopped" once stdin closes; the server exits
    // without rmcp's 5 s drain (it took 5.1 s before).
    let (status, took, rest) = mcp.close().await;
    println!("stdin EOF during a hung evaluate: exit after {took:?}");
    assert!(status.success(), "{status}");
    assert!(took < std::time::Duration::from_secs(4), "{took:?}");
    let reply: Value = rest
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|v| v["id"] == 50)
        .unwrap_or_else(|| panic!("no reply to the running call: {rest:?}"));
    let err = &reply["result"]["structuredContent"]["error"];
    assert_eq!(reply["result"]["isError"], true, "{reply}");
    assert!(
        err["message"]
            .as_str()
            .is_some_and(|m| m.contains("stopped") && m.contains("stdin")),
        "{reply}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_cdp_url_still_answers_initialize_and_connects_when_it_comes_up() {
    // A loopback port with nothing behind it (yet).
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .unwrap_or_else(|e| panic!("{e}"))
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let t0 = std::time::Instant::now();
    let mut mcp = RawMcp::spawn(&["mcp", "--cdp-url", &url, "--connect-timeout-ms", "3000"]);
    mcp.initialize().await;
    println!(
        "initialize answered {:?} after start with an unreachable --cdp-url",
        t0.elapsed()
    );
    mcp.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"browser_tabs","arguments":{}}}"#).await;
    let r = mcp.recv_id(json!(2)).await;
    let err = &r["result"]["structuredContent"]["error"];
    assert_eq!(r["result"]["isError"], true, "{r}");
    assert_eq!(err["code"], "browser_closed", "{r}");
    assert!(
        err["message"]
            .as_str()
            .is_some_and(|m| m.contains("--cdp-url")),
        "{r}"
    );
    assert!(
        err["next_step"]
            .as_str()
            .is_some_and(|m| m.contains("tries to connect again")),
        "{r}"
    );

    // The browser comes up on that port (a forwarder to the shared Chromium):
    // the next call connects.
    let ws =
        cdp_transport::launcher::shared_chrome().unwrap_or_else(|e| panic!("no Chromium: {e}"));
    let chrome_port: u16 = ws
        .split(':')
        .nth(2)
        .and_then(|p| p.split('/').next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no port in {ws}"));
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap_or_else(|e| panic!("bind {port}: {e}"));
    let forwarder = tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            tokio::spawn(async move {
                if let Ok(mut out) =
                    tokio::net::TcpStream::connect(("127.0.0.1", chrome_port)).await
                {
                    let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                }
            });
        }
    });
    mcp.send(r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"browser_evaluate","arguments":{"expression":"6 * 7"}}}"#).await;
    let ok = mcp.recv_id(json!(3)).await;
    assert_eq!(ok["result"]["structuredContent"]["value"], 42, "{ok}");
    let (status, took, _) = mcp.close().await;
    println!("exit after stdin EOF (its tab closed first): {took:?}");
    assert!(status.success(), "{status}");
    forwarder.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_does_not_wait_for_a_cdp_url_that_never_answers() {
    // Bound, never accepted: the kernel completes TCP handshakes into the
    // backlog and nothing ever answers the WebSocket upgrade.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("{e}"));
    let port = silent.local_addr().unwrap_or_else(|e| panic!("{e}")).port();
    let url = format!("ws://127.0.0.1:{port}/devtools/browser/silent");
    let t0 = std::time::Instant::now();
    let mut mcp = RawMcp::spawn(&["mcp", "--cdp-url", &url]);
    mcp.initialize().await;
    let took = t0.elapsed();
    println!("initialize answered {took:?} after start; the connect (10 s bound) still runs");
    // The connect's bound is 10 s; initialize came without it.
    assert!(took < std::time::Duration::from_secs(7), "{took:?}");
    let (status, took, _) = mcp.close().await;
    println!("exit {status} {took:?} after stdin EOF with the connect still running");
    assert!(status.success(), "{status}");
    drop(silent);
}

// ------------------------------------------------------- relaunch

/// Pid of the main Chromium process (its process group id) whose parent is
/// `parent`, with its `--user-data-dir`.
fn chromium_child_of(parent: u32) -> Option<(u32, String)> {
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut f = rest.split_whitespace();
        let state = f.next().unwrap_or_default();
        let ppid: u32 = f.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        if ppid != parent || state == "Z" {
            continue;
        }
        let cmd = std::fs::read(e.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        if let Some(profile) = cmd
            .split_whitespace()
            .find_map(|a| a.strip_prefix("--user-data-dir="))
        {
            return Some((pid, profile.to_string()));
        }
    }
    None
}

/// SIGKILLs Chromium's whole process group and waits until its main
/// process has exited (a zombie until tabwarden reaps it).
async fn kill_chromium_group(pid: u32) {
    let st = std::process::Command::new("kill")
        .args(["-KILL", "--", &format!("-{pid}")])
        .status()
        .unwrap_or_else(|e| panic!("kill: {e}"));
    assert!(st.success(), "kill -KILL -{pid}: {st}");
    let t0 = std::time::Instant::now();
    loop {
        let state = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .and_then(|s| {
                s.rfind(')')
                    .and_then(|i| s[i + 1..].split_whitespace().next().map(String::from))
            });
        if state.as_deref().is_none_or(|s| s == "Z") {
            return;
        }
        assert!(
            t0.elapsed() < std::time::Duration::from_secs(10),
            "Chromium {pid} still runs after SIGKILL"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_chromium_it_launched_is_relaunched_on_the_next_call_after_it_died() {
    let fx = cdp_mock::FixtureServer::start().await;
    fx.page("/r.html", "<!doctype html><title>R</title><p>relaunch</p>");
    let cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_tabwarden")).configure(|c| {
        c.args(["mcp", "--offline", "--max-relaunches", "1"]);
        c.env_remove("TABWARDEN_CDP_URL");
    });
    let transport =
        TokioChildProcess::new(cmd).unwrap_or_else(|e| panic!("spawn tabwarden mcp: {e}"));
    let server_pid = transport.id().unwrap_or_else(|| panic!("no pid"));
    let client = ().serve(transport).await.unwrap_or_else(|e| panic!("MCP initialize: {e}"));
    let url = fx.url("127.0.0.1", "/r.html");

    let nav = call(&client, "browser_navigate", json!({"url": url})).await;
    assert_eq!(nav["status"], "loaded", "{nav}");
    assert!(nav.get("browser_relaunched").is_none(), "{nav}");
    let (first, first_profile) =
        chromium_child_of(server_pid).unwrap_or_else(|| panic!("no Chromium under {server_pid}"));

    kill_chromium_group(first).await;
    let t0 = std::time::Instant::now();
    let nav = call(&client, "browser_navigate", json!({"url": url})).await;
    let took = t0.elapsed();
    println!(
        "navigate after SIGKILL of Chromium (relaunch included): {took:?}; {}",
        nav["browser_relaunched"]
    );
    assert_eq!(nav["status"], "loaded", "{nav}");
    assert_eq!(nav["browser_relaunched"]["relaunch"], 1, "{nav}");
    assert_eq!(nav["browser_relaunched"]["max_relaunches"], 1, "{nav}");
    assert!(nav["browser_relaunched"]["elapsed_ms"].is_u64(), "{nav}");
    let e = call(
        &client,
        "browser_evaluate",
        json!({"expression": "document.title + 6 * 7"}),
    )
    .await;
    assert_eq!(e["value"], "R42", "{e}");
    assert!(
        e.get("browser_relaunched").is_none(),
        "only the relaunching call says so: {e}"
    );
    let (second, _) = chromium_child_of(server_pid)
        .unwrap_or_else(|| panic!("no new Chromium under {server_pid}"));
    assert_ne!(first, second);
    // The dead Chromium's profile is removed.
    let t1 = std::time::Instant::now();
    while std::path::Path::new(&first_profile).exists() {
        assert!(
            t1.elapsed() < std::time::Duration::from_secs(10),
            "{first_profile} left behind"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }

    // The one relaunch allowed is spent: the next death is browser_closed, saying so.
    kill_chromium_group(second).await;
    let e = call(&client, "browser_evaluate", json!({"expression": "1"})).await;
    assert_eq!(e["error"]["code"], "browser_closed", "{e}");
    assert!(
        e["error"]["next_step"]
            .as_str()
            .is_some_and(|s| s.contains("--max-relaunches") && s.contains("restart")),
        "{e}"
    );
    assert!(
        chromium_child_of(server_pid).is_none(),
        "no relaunch past the limit"
    );
    // The dead Chromium is reaped while the server runs on (it stayed a
    // zombie until the server exited).
    let t2 = std::time::Instant::now();
    while std::path::Path::new(&format!("/proc/{second}")).exists() {
        assert!(
            t2.elapsed() < std::time::Duration::from_secs(10),
            "Chromium {second} is still a zombie 10 s after browser_closed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    println!(
        "dead Chromium reaped {:?} after browser_closed",
        t2.elapsed()
    );
    client
        .cancel()
        .await
        .unwrap_or_else(|e| panic!("close: {e}"));
}
