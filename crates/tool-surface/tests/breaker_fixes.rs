//! Defects a tester found in the tool surface, each pinned end to end
//! against real Chromium and loopback fixture pages:
//!
//! 1. a navigation to a server that accepts and never answers, given up at
//!    its timeout (or cancelled), left the tab holding every later call;
//! 2. a page whose load event never fires because a subresource never
//!    loads was a `timeout` claiming a script had been stopped;
//! 3. accepting a `beforeunload` and navigating at once raced the released
//!    navigation (a second dialog, `net::ERR_ABORTED`, the wrong title);
//! 4. `--no-evaluate` could be bypassed through `browser_tabs new`,
//!    `browser_cdp` and `data:` URLs;
//! 5. `browser_tabs new` did not report a dialog its page opened;
//! 6. `browser_tabs new` did not check its URL as `browser_navigate` does;
//! 7. wording of several messages, a click on a disabled button reported
//!    `done`, a ref cut off by a truncated snapshot, dialog messages cut by
//!    Chromium;
//! 8. `browser_snapshot` and `browser_tabs` answered with stale data after
//!    the browser was gone;
//! 9. a same-site navigation away from a page whose own script spins left
//!    the tab answering nothing, for good.
//!
//! Timings are printed (`--nocapture`); bounds are loose (this 2-core
//! machine is shared).

use cdp_mock::fixtures::Resource;
use cdp_mock::FixtureServer;
use cdp_transport::{LaunchOptions, LaunchedChrome};
use serde_json::{json, Value};
use std::future::Future;
use std::time::{Duration, Instant};
use tool_surface::{Tools, ToolsConfig};

/// Hang guard around each test body.
const GUARD: Duration = Duration::from_secs(90);

async fn guarded(name: &str, body: impl Future<Output = ()>) {
    if tokio::time::timeout(GUARD, body).await.is_err() {
        panic!("{name}: the test hung for {GUARD:?}");
    }
}

async fn tools(config: ToolsConfig) -> Tools {
    let ws =
        cdp_transport::launcher::shared_chrome().unwrap_or_else(|e| panic!("no Chromium: {e}"));
    Tools::connect(&ws, config.new_tab(true))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"))
}

async fn call(t: &Tools, name: &str, args: Value) -> (Value, Duration) {
    let t0 = Instant::now();
    let v = t.call(name, args).await;
    (v, t0.elapsed())
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or_default()
}

fn message(v: &Value) -> &str {
    v["error"]["message"].as_str().unwrap_or_default()
}

/// A loopback TCP listener that accepts connections and never answers
/// (the sockets are held open for as long as the task lives).
async fn silent_server() -> (u16, tokio::task::JoinHandle<()>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("bind: {e}"));
    let port = l
        .local_addr()
        .unwrap_or_else(|e| panic!("addr: {e}"))
        .port();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((s, _)) = l.accept().await {
            held.push(s);
        }
    });
    (port, task)
}

/// The ref of the first snapshot line containing `needle`.
fn ref_of(snapshot: &str, needle: &str) -> String {
    let line = snapshot
        .lines()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no {needle:?} in\n{snapshot}"));
    let start = line
        .find("[ref=")
        .unwrap_or_else(|| panic!("no ref in {line}"))
        + 5;
    let end = line[start..]
        .find(']')
        .map(|i| start + i)
        .unwrap_or(line.len());
    line[start..end].to_string()
}

async fn snapshot_text(t: &Tools, args: Value) -> (String, Value) {
    let (snap, _) = call(t, "browser_snapshot", args).await;
    (
        snap["snapshot"]
            .as_str()
            .unwrap_or_else(|| panic!("no snapshot text: {snap:#}"))
            .to_string(),
        snap,
    )
}

/// Asserts `browser_evaluate location.href` answers `want` within `within`.
async fn href_within(t: &Tools, want: &str, within: Duration, label: &str) {
    let (v, took) = call(
        t,
        "browser_evaluate",
        json!({"expression": "location.href", "timeout_ms": 5000}),
    )
    .await;
    eprintln!("[{label}] evaluate location.href: {took:?} {}", v["value"]);
    assert_eq!(v["value"], want, "[{label}] {v:#}");
    assert!(took < within, "[{label}] evaluate took {took:?}");
}

// ------------------------------------------------------------------ 1

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_navigation_to_a_silent_server_is_stopped_and_the_tab_answers_at_once() {
    guarded("silent server", async {
        let fx = FixtureServer::start().await;
        fx.page("/a.html", "<!doctype html><title>A</title><p>a</p>");
        let (port, _hole) = silent_server().await;
        let t = tools(ToolsConfig::default()).await;
        let a = fx.url("127.0.0.1", "/a.html");
        let (nav, _) = call(&t, "browser_navigate", json!({"url": a})).await;
        assert_eq!(nav["status"], "loaded", "{nav:#}");

        let hole = format!("http://127.0.0.1:{port}/");
        let (v, took) = call(
            &t,
            "browser_navigate",
            json!({"url": hole, "timeout_ms": 2000}),
        )
        .await;
        eprintln!("[silent server] navigate: {took:?} {}", v["error"]);
        assert_eq!(code(&v), "timeout", "{v:#}");
        let msg = message(&v);
        assert!(msg.contains("timeout_ms=2000"), "{v:#}");
        assert!(msg.contains("Page.stopLoading"), "{v:#}");
        assert!(
            msg.contains(&a),
            "the message names the page the tab stays on: {v:#}"
        );
        assert!(!msg.contains("terminateExecution"), "{v:#}");
        assert!(
            v["error"]["next_step"]
                .as_str()
                .is_some_and(|s| s.contains(&hole)),
            "{v:#}"
        );
        assert!(took < Duration::from_secs(5), "navigate took {took:?}");

        // The tab answers at once, on its previous page.
        href_within(&t, &a, Duration::from_secs(1), "after timeout").await;
        let (ft, took) = call(
            &t,
            "browser_cdp",
            json!({"method": "Page.getFrameTree", "timeout_ms": 3000}),
        )
        .await;
        assert!(ft["result"]["frameTree"].is_object(), "{ft:#}");
        assert!(
            took < Duration::from_secs(1),
            "Page.getFrameTree took {took:?}"
        );
        let (snap, took) = call(&t, "browser_snapshot", json!({"timeout_ms": 3000})).await;
        assert!(
            snap["snapshot"].as_str().unwrap_or_default().contains('a'),
            "{snap:#}"
        );
        assert!(took < Duration::from_secs(2), "snapshot took {took:?}");

        // A navigation dropped before its commit (the agent cancelled the
        // call) is stopped too, in the background.
        let dropped = tokio::time::timeout(
            Duration::from_millis(700),
            t.call(
                "browser_navigate",
                json!({"url": hole, "timeout_ms": 10_000}),
            ),
        )
        .await;
        assert!(
            dropped.is_err(),
            "the navigation to the silent server finished: {dropped:?}"
        );
        href_within(&t, &a, Duration::from_secs(2), "after a cancelled navigate").await;

        // And the tab navigates normally afterwards.
        let (nav, _) = call(&t, "browser_navigate", json!({"url": a})).await;
        assert_eq!(nav["status"], "loaded", "{nav:#}");
        assert_eq!(nav["title"], "A", "{nav:#}");
    })
    .await;
}

// ------------------------------------------------------------------ 2

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subresource_that_never_loads_gives_loaded_with_a_note() {
    guarded("subresource never loads", async {
        let fx = FixtureServer::start().await;
        let (port, _hole) = silent_server().await;
        fx.page(
            "/img.html",
            &format!(
                "<!doctype html><title>Img</title><p>text</p><img alt=never src=\"http://127.0.0.1:{port}/never.png\">"
            ),
        );
        let t = tools(ToolsConfig::default()).await;
        let url = fx.url("127.0.0.1", "/img.html");
        let (v, took) = call(
            &t,
            "browser_navigate",
            json!({"url": url, "timeout_ms": 2000}),
        )
        .await;
        eprintln!("[subresource] navigate: {took:?} {v}");
        assert_eq!(v["status"], "loaded", "{v:#}");
        assert_eq!(v["url"], url, "{v:#}");
        assert_eq!(v["title"], "Img", "{v:#}");
        let note = v["note"].as_str().unwrap_or_default();
        assert!(
            note.contains("load event did not fire within timeout_ms=2000"),
            "{v:#}"
        );
        assert!(note.contains("subresource"), "{v:#}");
        assert!(!note.contains("script"), "no script ran: {v:#}");
        assert!(took < Duration::from_secs(5), "navigate took {took:?}");
        let (r, took) = call(
            &t,
            "browser_evaluate",
            json!({"expression": "document.readyState", "timeout_ms": 5000}),
        )
        .await;
        assert_eq!(r["value"], "interactive", "{r:#}");
        assert!(took < Duration::from_secs(1), "evaluate took {took:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parser_blocking_script_that_never_arrives_is_a_neutral_timeout() {
    guarded("parser blocked", async {
        let fx = FixtureServer::start().await;
        let (port, _hole) = silent_server().await;
        fx.page(
            "/blocked.html",
            &format!(
                "<!doctype html><title>Blocked</title><p>before</p><script src=\"http://127.0.0.1:{port}/never.js\"></script><p>after</p>"
            ),
        );
        let t = tools(ToolsConfig::default()).await;
        let url = fx.url("127.0.0.1", "/blocked.html");
        let (v, took) = call(
            &t,
            "browser_navigate",
            json!({"url": url, "timeout_ms": 2000}),
        )
        .await;
        eprintln!("[parser blocked] navigate: {took:?} {}", v["error"]);
        assert_eq!(code(&v), "timeout", "{v:#}");
        let msg = message(&v);
        assert!(msg.contains("still being parsed"), "{v:#}");
        assert!(msg.contains("no page script was running"), "{v:#}");
        assert!(
            !msg.contains("stopped") && !msg.contains("terminateExecution"),
            "nothing was stopped: {v:#}"
        );
        assert!(took < Duration::from_secs(5), "navigate took {took:?}");
        let (r, took) = call(
            &t,
            "browser_evaluate",
            json!({"expression": "document.readyState", "timeout_ms": 5000}),
        )
        .await;
        assert_eq!(r["value"], "loading", "{r:#}");
        assert!(took < Duration::from_secs(1), "evaluate took {took:?}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_spinning_during_the_parse_is_stopped_and_said_so() {
    guarded("spinning parse", async {
        let fx = FixtureServer::start().await;
        fx.page(
            "/spin.html",
            "<!doctype html><title>Spin</title><script>while(true){}</script><p>after</p>",
        );
        let t = tools(ToolsConfig::default()).await;
        let (v, took) = call(
            &t,
            "browser_navigate",
            json!({"url": fx.url("127.0.0.1", "/spin.html"), "timeout_ms": 2000}),
        )
        .await;
        eprintln!("[spinning parse] navigate: {took:?} {}", v["error"]);
        assert_eq!(code(&v), "timeout", "{v:#}");
        let msg = message(&v);
        assert!(
            msg.contains("script")
                && msg.contains("stopped")
                && msg.contains("Runtime.terminateExecution"),
            "{v:#}"
        );
        assert!(took < Duration::from_secs(5), "navigate took {took:?}");
        let (r, took) = call(
            &t,
            "browser_evaluate",
            json!({"expression": "1 + 1", "timeout_ms": 5000}),
        )
        .await;
        assert_eq!(r["value"], 2, "{r:#}");
        assert!(took < Duration::from_secs(2), "evaluate took {took:?}");
    })
    .await;
}

// ------------------------------------------------------------------ 3

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accepting_a_beforeunload_then_navigating_at_once_never_races() {
    guarded("beforeunload race", async {
        let fx = FixtureServer::start().await;
        fx.page(
            "/bu.html",
            "<!doctype html><title>Guarded</title><script>window.addEventListener('beforeunload', e => { e.preventDefault(); e.returnValue = ''; });</script><input aria-label=field>",
        );
        // The page the dialog releases answers late, which widens the
        // window in which a navigation sent right after the answer races it.
        fx.resource(
            "/two.html",
            Resource {
                body: b"<!doctype html><title>Two</title><p>two</p>".to_vec(),
                content_type: "text/html; charset=utf-8".into(),
                headers: vec![],
                delay: Some(Duration::from_millis(300)),
            },
        );
        fx.page("/three.html", "<!doctype html><title>Three</title><p>three</p>");
        let t = tools(ToolsConfig::default()).await;
        let (bu, two, three) = (
            fx.url("127.0.0.1", "/bu.html"),
            fx.url("127.0.0.1", "/two.html"),
            fx.url("127.0.0.1", "/three.html"),
        );
        for i in 0..10 {
            let (nav, _) = call(&t, "browser_navigate", json!({"url": bu})).await;
            assert_eq!(nav["status"], "loaded", "#{i}: {nav:#}");
            assert_eq!(nav["title"], "Guarded", "#{i}: {nav:#}");
            // Typing gives the page the user activation beforeunload needs.
            let (text, _) = snapshot_text(&t, json!({})).await;
            let field = ref_of(&text, "textbox");
            let (ty, _) = call(&t, "browser_type", json!({"ref": field, "text": "unsaved"})).await;
            assert_eq!(ty["status"], "done", "#{i}: {ty:#}");

            let (nav, _) = call(&t, "browser_navigate", json!({"url": two})).await;
            assert_eq!(nav["status"], "dialog_opened", "#{i}: {nav:#}");
            assert_eq!(nav["dialog"]["type"], "beforeunload", "#{i}: {nav:#}");
            let (ans, took) = call(&t, "browser_dialog", json!({"action": "accept"})).await;
            eprintln!("[beforeunload #{i}] accept: {took:?} url={}", ans["url"]);
            assert_eq!(ans["dialog"]["type"], "beforeunload", "#{i}: {ans:#}");
            assert_eq!(ans["url"], two, "#{i}: the released navigation's URL: {ans:#}");
            assert!(ans.get("note").is_none(), "#{i}: {ans:#}");

            let (nav, took) = call(&t, "browser_navigate", json!({"url": three})).await;
            eprintln!("[beforeunload #{i}] navigate three: {took:?} {nav}");
            assert_eq!(nav["status"], "loaded", "#{i}: {nav:#}");
            assert_eq!(nav["url"], three, "#{i}: {nav:#}");
            assert_eq!(nav["title"], "Three", "#{i}: {nav:#}");
        }
        let (snap, _) = call(&t, "browser_snapshot", json!({})).await;
        assert_eq!(snap["pending_dialogs"], json!([]), "{snap:#}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dismissing_a_beforeunload_reports_no_navigation() {
    guarded("beforeunload dismissed", async {
        let fx = FixtureServer::start().await;
        fx.page(
            "/bu.html",
            "<!doctype html><title>Guarded</title><script>window.addEventListener('beforeunload', e => { e.preventDefault(); e.returnValue = ''; });</script><input aria-label=field>",
        );
        fx.page("/two.html", "<!doctype html><title>Two</title>");
        let t = tools(ToolsConfig::default()).await;
        let bu = fx.url("127.0.0.1", "/bu.html");
        let (nav, _) = call(&t, "browser_navigate", json!({"url": bu})).await;
        assert_eq!(nav["status"], "loaded", "{nav:#}");
        let (text, _) = snapshot_text(&t, json!({})).await;
        let field = ref_of(&text, "textbox");
        call(&t, "browser_type", json!({"ref": field, "text": "x"})).await;
        let (nav, _) = call(
            &t,
            "browser_navigate",
            json!({"url": fx.url("127.0.0.1", "/two.html")}),
        )
        .await;
        assert_eq!(nav["status"], "dialog_opened", "{nav:#}");
        let (ans, took) = call(&t, "browser_dialog", json!({"action": "dismiss"})).await;
        assert!(ans.get("url").is_none(), "{ans:#}");
        assert!(took < Duration::from_secs(2), "dismiss took {took:?}");
        href_within(&t, &bu, Duration::from_secs(2), "after dismiss").await;
    })
    .await;
}

// ------------------------------------------------------------------ 4

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_evaluate_cannot_be_bypassed() {
    guarded("no-evaluate bypasses", async {
        let fx = FixtureServer::start().await;
        fx.page(
            "/plain.html",
            "<!doctype html><title>Plain</title><p id=p>plain</p>",
        );
        let t = tools(ToolsConfig::default().evaluate_enabled(false)).await;
        let plain = fx.url("127.0.0.1", "/plain.html");
        let (nav, _) = call(&t, "browser_navigate", json!({"url": plain})).await;
        assert_eq!(nav["status"], "loaded", "{nav:#}");
        let tabs_before = call(&t, "browser_tabs", json!({})).await.0["tabs"]
            .as_array()
            .map(Vec::len)
            .unwrap_or_default();

        // (a) tabs new refuses javascript: URLs, as navigate does.
        let (v, _) = call(
            &t,
            "browser_tabs",
            json!({"action": "new", "url": "javascript:document.title='pwned'"}),
        )
        .await;
        assert_eq!(code(&v), "invalid_argument", "{v:#}");
        assert_eq!(v["error"]["field"], "url", "{v:#}");

        // (c) data: and blob: URLs are author-written documents: refused by
        // navigate and tabs new while evaluate is disabled.
        for url in [
            "data:text/html,<script>document.title='pwned'</script>",
            " DATA:text/html,x",
            "blob:http://127.0.0.1/0d5e3c1a-1111-2222-3333-444444444444",
        ] {
            let (v, _) = call(&t, "browser_navigate", json!({"url": url})).await;
            assert_eq!(code(&v), "invalid_argument", "navigate {url}: {v:#}");
            assert_eq!(v["error"]["field"], "url", "{v:#}");
            assert!(message(&v).contains("evaluate is disabled"), "{v:#}");
            let (v, _) = call(&t, "browser_tabs", json!({"action": "new", "url": url})).await;
            assert_eq!(code(&v), "invalid_argument", "tabs new {url}: {v:#}");
        }
        let tabs_after = call(&t, "browser_tabs", json!({})).await.0["tabs"]
            .as_array()
            .map(Vec::len)
            .unwrap_or_default();
        assert_eq!(tabs_before, tabs_after, "a refused URL opened a tab");

        // (b) browser_cdp takes only methods that cannot run script.
        for (method, params) in [
            ("Runtime.evaluate", json!({"expression": "document.title='pwned'"})),
            (
                "Runtime.callFunctionOn",
                json!({"functionDeclaration": "function(){document.title='pwned'}", "executionContextId": 1}),
            ),
            (
                "DOM.setOuterHTML",
                json!({"nodeId": 1, "outerHTML": "<img src=x onerror=\"document.title='pwned'\">"}),
            ),
            (
                "Page.addScriptToEvaluateOnNewDocument",
                json!({"source": "document.title='pwned'"}),
            ),
            ("Page.reload", json!({"scriptToEvaluateOnLoad": "document.title='pwned'"})),
            ("Page.navigate", json!({"url": "javascript:document.title='pwned'"})),
            ("Page.navigate", json!({"url": "data:text/html,<script>1</script>"})),
            ("Target.createTarget", json!({"url": "javascript:1"})),
            ("Input.insertText", json!({"text": "x"})),
            ("Debugger.enable", json!({})),
            ("Emulation.setScriptExecutionDisabled", json!({"value": false})),
        ] {
            let (v, _) = call(&t, "browser_cdp", json!({"method": method, "params": params})).await;
            assert_eq!(code(&v), "evaluate_disabled", "{method}: {v:#}");
            assert!(message(&v).contains("--no-evaluate"), "{method}: {v:#}");
        }
        // Reads still work, and so does navigating to an ordinary URL.
        for (method, params) in [
            ("Page.getFrameTree", json!({})),
            ("DOM.getDocument", json!({})),
            ("Browser.getVersion", json!({})),
            ("Page.navigate", json!({"url": plain})),
        ] {
            let (v, _) = call(&t, "browser_cdp", json!({"method": method, "params": params})).await;
            assert!(v.get("error").is_none(), "{method}: {v:#}");
        }
        // Nothing above ran: the title is the page's own.
        tokio::time::sleep(Duration::from_millis(300)).await;
        let (tabs, _) = call(&t, "browser_tabs", json!({})).await;
        let titles: Vec<&str> = tabs["tabs"]
            .as_array()
            .map(|a| a.iter().filter_map(|t| t["title"].as_str()).collect())
            .unwrap_or_default();
        assert!(!titles.contains(&"pwned"), "{tabs:#}");
        let cur = tabs["tabs"]
            .as_array()
            .and_then(|a| a.iter().find(|t| t["current"] == true))
            .cloned()
            .unwrap_or_default();
        assert_eq!(cur["title"], "Plain", "{tabs:#}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_evaluate_on_data_urls_load_and_tabs_new_refuses_javascript() {
    guarded("evaluate on", async {
        let t = tools(ToolsConfig::default()).await;
        let (v, _) = call(
            &t,
            "browser_navigate",
            json!({"url": "data:text/html,<title>D</title><p>d</p>"}),
        )
        .await;
        assert_eq!(v["status"], "loaded", "{v:#}");
        assert_eq!(v["title"], "D", "{v:#}");
        let (v, _) = call(
            &t,
            "browser_tabs",
            json!({"action": "new", "url": "javascript:alert(1)"}),
        )
        .await;
        assert_eq!(code(&v), "invalid_argument", "{v:#}");
        assert!(
            v["error"]["next_step"]
                .as_str()
                .is_some_and(|s| s.contains("browser_evaluate")),
            "{v:#}"
        );
    })
    .await;
}

// ------------------------------------------------------------------ 5 and 6

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tabs_new_reports_the_dialog_its_page_opens_and_checks_its_url() {
    guarded("tabs new", async {
        let fx = FixtureServer::start().await;
        fx.page(
            "/alert.html",
            "<!doctype html><title>Alerting</title><script>alert('on load')</script><p>after</p>",
        );
        fx.page(
            "/calm.html",
            "<!doctype html><title>Calm</title><p>calm</p>",
        );
        let t = tools(ToolsConfig::default()).await;
        let count = |v: &Value| v["tabs"].as_array().map(Vec::len).unwrap_or_default();
        let before = count(&call(&t, "browser_tabs", json!({})).await.0);

        // 6: an invalid URL is invalid_argument naming the field, with a
        // next step, and opens no tab.
        for url in ["notaurl", "has space:x", ""] {
            let (v, _) = call(&t, "browser_tabs", json!({"action": "new", "url": url})).await;
            if url.is_empty() {
                // An empty url means about:blank.
                assert!(v.get("error").is_none(), "{v:#}");
                assert!(v.get("status").is_none(), "{v:#}");
                let id = v["tabs"]
                    .as_array()
                    .and_then(|a| a.iter().find(|t| t["current"] == true))
                    .and_then(|t| t["tab_id"].as_str())
                    .unwrap_or_default()
                    .to_string();
                let (c, _) =
                    call(&t, "browser_tabs", json!({"action": "close", "tab_id": id})).await;
                assert!(c.get("error").is_none(), "{c:#}");
                continue;
            }
            assert_eq!(code(&v), "invalid_argument", "{url}: {v:#}");
            assert_eq!(v["error"]["field"], "url", "{v:#}");
            assert!(v["error"]["next_step"].is_string(), "{v:#}");
        }
        assert_eq!(before, count(&call(&t, "browser_tabs", json!({})).await.0));

        // 5: a dialog opened by the new tab's page is reported like navigate does.
        let (v, took) = call(
            &t,
            "browser_tabs",
            json!({"action": "new", "url": fx.url("127.0.0.1", "/alert.html")}),
        )
        .await;
        eprintln!("[tabs new] alerting page: {took:?} {v}");
        assert_eq!(v["status"], "dialog_opened", "{v:#}");
        assert_eq!(v["dialog"]["type"], "alert", "{v:#}");
        assert_eq!(v["dialog"]["message"], "on load", "{v:#}");
        assert_eq!(count(&v), before + 1, "{v:#}");
        assert!(took < Duration::from_secs(5), "tabs new took {took:?}");
        let (ans, _) = call(&t, "browser_dialog", json!({"action": "accept"})).await;
        assert!(ans.get("error").is_none(), "{ans:#}");

        // A calm page: status loaded, and the new tab is current.
        let calm = fx.url("127.0.0.1", "/calm.html");
        let (v, _) = call(&t, "browser_tabs", json!({"action": "new", "url": calm})).await;
        assert_eq!(v["status"], "loaded", "{v:#}");
        assert!(v.get("dialog").is_none(), "{v:#}");
        let cur = v["tabs"]
            .as_array()
            .and_then(|a| a.iter().find(|t| t["current"] == true))
            .cloned()
            .unwrap_or_default();
        assert_eq!(cur["url"], calm, "{v:#}");
        assert_eq!(cur["title"], "Calm", "{v:#}");
    })
    .await;
}

// ------------------------------------------------------------------ 7

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_read_well() {
    guarded("wording", async {
        let fx = FixtureServer::start().await;
        fx.page(
            "/alert.html",
            "<!doctype html><title>A</title><button>B</button><script>alert('hello')</script>",
        );
        let t = tools(ToolsConfig::default()).await;
        let (nav, _) = call(
            &t,
            "browser_navigate",
            json!({"url": fx.url("127.0.0.1", "/alert.html")}),
        )
        .await;
        assert_eq!(nav["status"], "dialog_opened", "{nav:#}");
        let (v, _) = call(&t, "browser_click", json!({"ref": "e1"})).await;
        assert_eq!(code(&v), "dialog_pending", "{v:#}");
        assert!(message(&v).starts_with("an alert dialog"), "{v:#}");
        call(&t, "browser_dialog", json!({"action": "accept"})).await;

        let (v, _) = call(&t, "browser_dialog", json!({"action": "accept"})).await;
        assert_eq!(code(&v), "no_dialog", "{v:#}");
        assert!(!message(&v).starts_with("no_dialog"), "{v:#}");
        assert!(message(&v).starts_with("no dialog is pending"), "{v:#}");

        for (tool, args) in [
            (
                "browser_evaluate",
                json!({"expression": "1", "frame_id": "NOPE"}),
            ),
            (
                "browser_cdp",
                json!({"method": "DOM.getDocument", "frame_id": "NOPE"}),
            ),
        ] {
            let (v, _) = call(&t, tool, args).await;
            assert_eq!(code(&v), "unknown_frame", "{tool}: {v:#}");
            assert!(!message(&v).contains("snapshot()"), "{tool}: {v:#}");
            assert!(message(&v).contains("NOPE"), "{tool}: {v:#}");
            assert!(
                v["error"]["next_step"]
                    .as_str()
                    .is_some_and(|s| s.contains("browser_snapshot")),
                "{tool}: {v:#}"
            );
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ref_cut_off_by_a_truncated_snapshot_says_so_and_interactive_only_reaches_it() {
    guarded("truncated snapshot", async {
        let fx = FixtureServer::start().await;
        // 600 paragraphs (their lines are cut at 70 characters), each with a
        // button: the full text is past the 48 KiB cap, the interactive-only
        // one is not.
        let mut html = String::from("<!doctype html><title>Long</title><p id=out>none</p>");
        for i in 0..600 {
            html.push_str(&format!(
                "<p>{}</p><button onclick=\"document.getElementById('out').textContent='clicked {i}'\">Button {i}</button>",
                format!("Paragraph {i} ").repeat(14)
            ));
        }
        fx.page("/long.html", &html);
        let t = tools(ToolsConfig::default()).await;
        let (nav, _) = call(
            &t,
            "browser_navigate",
            json!({"url": fx.url("127.0.0.1", "/long.html")}),
        )
        .await;
        assert_eq!(nav["status"], "loaded", "{nav:#}");
        let (text, snap) = snapshot_text(&t, json!({})).await;
        assert!(text.contains("(truncated:"), "the page is not past the cap");
        let note = snap["note"].as_str().unwrap_or_default();
        assert!(note.contains("interactive_only"), "{note}");
        // Refs are numbered over the whole tree: the one after the last
        // shown was cut.
        let last_shown = text
            .match_indices("[ref=e")
            .filter_map(|(i, _)| {
                let rest = &text[i + 6..];
                rest[..rest.find(']').unwrap_or(0)].parse::<u32>().ok()
            })
            .max()
            .unwrap_or_else(|| panic!("no refs in the snapshot"));
        let cut = format!("e{}", last_shown + 1);
        let (v, _) = call(&t, "browser_click", json!({"ref": cut})).await;
        assert_eq!(code(&v), "unknown_ref", "{v:#}");
        assert!(message(&v).contains("cut"), "{v:#}");
        assert!(
            v["error"]["next_step"]
                .as_str()
                .is_some_and(|s| s.contains("interactive_only")),
            "{v:#}"
        );
        // A ref that no snapshot had is still a plain unknown_ref.
        let (v, _) = call(&t, "browser_click", json!({"ref": "e999999"})).await;
        assert_eq!(code(&v), "unknown_ref", "{v:#}");
        assert!(!message(&v).contains("cut"), "{v:#}");

        let (short, snap) = snapshot_text(&t, json!({"interactive_only": true})).await;
        eprintln!(
            "[truncated] full {} bytes, interactive_only {} bytes",
            text.len(),
            short.len()
        );
        assert!(!short.contains("(truncated:"), "{snap:#}");
        assert!(short.contains("Button 599"), "{short}");
        let last = ref_of(&short, "Button 599");
        let (c, _) = call(&t, "browser_click", json!({"ref": last})).await;
        assert_eq!(c["status"], "done", "{c:#}");
        let (e, _) = call(
            &t,
            "browser_evaluate",
            json!({"expression": "document.getElementById('out').textContent"}),
        )
        .await;
        assert_eq!(e["value"], "clicked 599", "{e:#}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disabled_control_is_not_interactable_until_enabled() {
    guarded("disabled", async {
        let fx = FixtureServer::start().await;
        fx.page(
            "/disabled.html",
            "<!doctype html><title>D</title><p id=out>none</p>\
             <button disabled onclick=\"out.textContent='never'\">Never</button>\
             <button id=later disabled onclick=\"out.textContent='later'\">Later</button>\
             <input disabled aria-label=locked>",
        );
        let t = tools(ToolsConfig::default()).await;
        let (nav, _) = call(
            &t,
            "browser_navigate",
            json!({"url": fx.url("127.0.0.1", "/disabled.html")}),
        )
        .await;
        assert_eq!(nav["status"], "loaded", "{nav:#}");
        let (text, _) = snapshot_text(&t, json!({})).await;
        let never = ref_of(&text, "Never");
        let later = ref_of(&text, "Later");
        let locked = ref_of(&text, "locked");
        assert!(text.contains("[disabled]"), "{text}");

        let (v, _) = call(&t, "browser_click", json!({"ref": never})).await;
        assert_eq!(code(&v), "not_interactable", "{v:#}");
        assert!(message(&v).contains("disabled"), "{v:#}");
        let (v, _) = call(&t, "browser_type", json!({"ref": locked, "text": "x"})).await;
        assert_eq!(code(&v), "not_interactable", "{v:#}");

        // Enabled after the snapshot: the live check lets the click through.
        let (e, _) = call(
            &t,
            "browser_evaluate",
            json!({"expression": "document.getElementById('later').disabled = false"}),
        )
        .await;
        assert!(e.get("error").is_none(), "{e:#}");
        let (v, _) = call(&t, "browser_click", json!({"ref": later})).await;
        assert_eq!(v["status"], "done", "{v:#}");
        let (e, _) = call(
            &t,
            "browser_evaluate",
            json!({"expression": "document.getElementById('out').textContent"}),
        )
        .await;
        assert_eq!(e["value"], "later", "{e:#}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dialog_message_at_chromiums_cap_is_flagged() {
    guarded("dialog cap", async {
        let fx = FixtureServer::start().await;
        fx.page(
            "/big.html",
            "<!doctype html><title>Big</title><button onclick=\"alert('x'.repeat(20000))\">Big</button><button onclick=\"alert('short')\">Short</button>",
        );
        let t = tools(ToolsConfig::default()).await;
        let (nav, _) = call(
            &t,
            "browser_navigate",
            json!({"url": fx.url("127.0.0.1", "/big.html")}),
        )
        .await;
        assert_eq!(nav["status"], "loaded", "{nav:#}");
        let (text, _) = snapshot_text(&t, json!({})).await;
        let big = ref_of(&text, "\"Big\"");
        let short = ref_of(&text, "Short");
        let (v, _) = call(&t, "browser_click", json!({"ref": big})).await;
        assert_eq!(v["status"], "dialog_opened", "{v:#}");
        let msg = v["dialog"]["message"].as_str().unwrap_or_default();
        eprintln!("[dialog cap] message arrived with {} characters", msg.len());
        assert_eq!(msg.len(), 10_240, "Chromium's cap moved");
        assert_eq!(v["dialog"]["message_truncated"], true, "{}", v["dialog"]["message_truncated"]);
        let (ans, _) = call(&t, "browser_dialog", json!({"action": "accept"})).await;
        assert_eq!(ans["dialog"]["message_truncated"], true);
        let (v, _) = call(&t, "browser_click", json!({"ref": short})).await;
        assert_eq!(v["status"], "dialog_opened", "{v:#}");
        assert!(v["dialog"].get("message_truncated").is_none(), "{v:#}");
        call(&t, "browser_dialog", json!({"action": "accept"})).await;
    })
    .await;
}

// ------------------------------------------------------------------ 8

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_browser_is_gone_snapshot_and_tabs_are_browser_closed() {
    guarded("browser gone", async {
        let mut chrome = LaunchedChrome::launch(LaunchOptions::default().offline(true))
            .await
            .unwrap_or_else(|e| panic!("cannot launch a private Chromium: {e}"));
        let t = Tools::connect(
            chrome.ws_url(),
            ToolsConfig::default().reconnect_attempts(0),
        )
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
        let (nav, _) = call(
            &t,
            "browser_navigate",
            json!({"url": "data:text/html,<title>k</title><button>B</button>"}),
        )
        .await;
        assert_eq!(nav["status"], "loaded", "{nav:#}");
        let (snap, _) = call(&t, "browser_snapshot", json!({})).await;
        assert!(snap["snapshot"].is_string(), "{snap:#}");
        chrome.kill();
        tokio::time::sleep(Duration::from_millis(500)).await;
        for (tool, args) in [
            ("browser_snapshot", json!({})),
            ("browser_tabs", json!({})),
            ("browser_tabs", json!({"action": "new"})),
            ("browser_snapshot", json!({"timeout_ms": 5000})),
        ] {
            let (v, took) = call(&t, tool, args.clone()).await;
            eprintln!("[browser gone] {tool} {args}: {took:?} {}", v["error"]);
            assert_eq!(code(&v), "browser_closed", "{tool}: {v:#}");
            assert!(
                v.get("tabs").is_none() && v.get("snapshot").is_none(),
                "{v:#}"
            );
            assert!(took < Duration::from_secs(1), "{tool} took {took:?}");
        }
    })
    .await;
}

// ------------------------------------------------------------------ 9

/// A same-site navigation commits in the renderer process of the page it
/// leaves; while that page's own script spins, Chromium holds every command
/// of the tab's sessions (even `Runtime.terminateExecution`) behind the
/// navigation, which never commits. The navigation must first stop the
/// script, and say so.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn navigating_same_site_away_from_a_spinning_page_loads_the_new_page() {
    guarded("same-site away from a spinning page", async {
        let fx = FixtureServer::start().await;
        fx.page(
            "/self-spin.html",
            "<!doctype html><title>Self</title><script>setTimeout(() => { while (true) {} }, 200)</script><p>spins soon</p>",
        );
        fx.page("/calm.html", "<!doctype html><title>Calm</title><p>calm</p>");
        fx.page("/two.html", "<!doctype html><title>Two</title><p>two</p>");
        let t = tools(ToolsConfig::default()).await;
        let two = fx.url("127.0.0.1", "/two.html");

        // The page's own timer starts the loop after its load.
        let (nav, _) = call(
            &t,
            "browser_navigate",
            json!({"url": fx.url("127.0.0.1", "/self-spin.html")}),
        )
        .await;
        assert_eq!(nav["status"], "loaded", "{nav:#}");
        tokio::time::sleep(Duration::from_millis(600)).await;
        let (nav, took) = call(&t, "browser_navigate", json!({"url": two, "timeout_ms": 10000})).await;
        eprintln!("[spin away] page's own loop: {took:?} {nav}");
        assert_eq!(nav["status"], "loaded", "{nav:#}");
        assert_eq!(nav["url"], two, "{nav:#}");
        assert_eq!(nav["title"], "Two", "{nav:#}");
        let note = nav["note"].as_str().unwrap_or_default();
        assert!(
            note.contains("Runtime.terminateExecution") && note.contains("stopped"),
            "{nav:#}"
        );
        assert!(took < Duration::from_secs(5), "navigate took {took:?}");

        // A loop an earlier evaluate left behind, three times over.
        for i in 0..3 {
            let (nav, _) =
                call(&t, "browser_navigate", json!({"url": fx.url("127.0.0.1", "/calm.html")})).await;
            assert_eq!(nav["status"], "loaded", "#{i}: {nav:#}");
            assert!(nav.get("note").is_none(), "#{i}: a calm page has no note: {nav:#}");
            let (r, _) = call(
                &t,
                "browser_evaluate",
                json!({"expression": "setTimeout(() => { while (true) {} }, 0); 1"}),
            )
            .await;
            assert_eq!(r["value"], 1, "#{i}: {r:#}");
            let (nav, took) = call(&t, "browser_navigate", json!({"url": two, "timeout_ms": 10000})).await;
            eprintln!("[spin away] #{i}: {took:?} {nav}");
            assert_eq!(nav["status"], "loaded", "#{i}: {nav:#}");
            assert_eq!(nav["title"], "Two", "#{i}: {nav:#}");
            assert!(took < Duration::from_secs(5), "#{i}: navigate took {took:?}");
            let (r, took) = call(
                &t,
                "browser_evaluate",
                json!({"expression": "document.title", "timeout_ms": 5000}),
            )
            .await;
            assert_eq!(r["value"], "Two", "#{i}: {r:#}");
            assert!(took < Duration::from_secs(2), "#{i}: evaluate took {took:?}");
        }
    })
    .await;
}

/// A renderer busy with its page's own script produces no frame: the
/// screenshot stops the script after half its budget (at most 2 s) and
/// says so, instead of waiting its whole budget out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_screenshot_of_a_spinning_page_stops_the_script_and_says_so() {
    guarded("screenshot of a spinning page", async {
        let fx = FixtureServer::start().await;
        fx.page(
            "/calm.html",
            "<!doctype html><title>Calm</title><p>calm</p>",
        );
        let t = tools(ToolsConfig::default()).await;
        let (nav, _) = call(
            &t,
            "browser_navigate",
            json!({"url": fx.url("127.0.0.1", "/calm.html")}),
        )
        .await;
        assert_eq!(nav["status"], "loaded", "{nav:#}");
        let (shot, _) = call(&t, "browser_screenshot", json!({})).await;
        assert!(shot["bytes"].as_u64().unwrap_or(0) > 0, "{shot:#}");
        assert!(
            shot.get("note").is_none(),
            "a calm page has no note: {shot:#}"
        );
        let (r, _) = call(
            &t,
            "browser_evaluate",
            json!({"expression": "setTimeout(() => { while (true) {} }, 0); 1"}),
        )
        .await;
        assert_eq!(r["value"], 1, "{r:#}");
        let (shot, took) = call(&t, "browser_screenshot", json!({"timeout_ms": 8000})).await;
        eprintln!("[spinning screenshot] {took:?} note={}", shot["note"]);
        assert!(shot["bytes"].as_u64().unwrap_or(0) > 0, "{shot:#}");
        let note = shot["note"].as_str().unwrap_or_default();
        assert!(
            note.contains("stopped") && note.contains("Runtime.terminateExecution"),
            "{shot:#}"
        );
        assert!(took < Duration::from_secs(6), "screenshot took {took:?}");
        let (r, took) = call(
            &t,
            "browser_evaluate",
            json!({"expression": "document.title"}),
        )
        .await;
        assert_eq!(r["value"], "Calm", "{r:#}");
        assert!(took < Duration::from_secs(2), "evaluate took {took:?}");
    })
    .await;
}
