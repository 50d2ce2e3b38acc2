//! End-to-end: the transport against real headless Chromium.

use cdp_mock::FixtureServer;
use cdp_transport::launcher::shared_chrome;
use cdp_transport::{ConnectOptions, Connection, Session, TargetId};
use serde_json::{json, Value};
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

async fn connect() -> Connection {
    let ws = shared_chrome().unwrap_or_else(|e| panic!("Chromium is needed for this test: {e}"));
    Connection::connect(&ws, ConnectOptions::default()).await.expect("connect")
}

async fn new_page(conn: &Connection) -> Session {
    let v = conn.browser().call("Target.createTarget", json!({"url": "about:blank"}), T).await.expect("createTarget");
    let tid = TargetId::new(v["targetId"].as_str().expect("targetId"));
    conn.attach(&tid, T).await.expect("attach")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oopif_auto_attach_routes_events_per_session() {
    let site = FixtureServer::start().await;
    let child = site.url("127.0.0.1", "/child.html");
    site.page("/top.html", &format!("<title>top</title><iframe src='{child}'></iframe>"));
    site.page("/child.html", "<title>child</title><script>console.log('hello from child')</script>");
    let conn = connect().await;
    let page = new_page(&conn).await;
    let mut attached = conn.attached_targets();
    page.call("Page.enable", json!({}), T).await.expect("Page.enable");
    page.call("Target.setAutoAttach", json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}), T)
        .await
        .expect("setAutoAttach");
    let mut page_events = page.subscribe();
    page.call("Page.navigate", json!({"url": site.url("localhost", "/top.html")}), T).await.expect("navigate");
    let at = tokio::time::timeout(T, async {
        loop {
            let a = attached.recv().await.expect("attached stream");
            if a.target_type() == "iframe" {
                return a;
            }
        }
    })
    .await
    .expect("an OOPIF attaches");
    assert_eq!(at.parent_session_id.as_ref(), page.id());
    assert!(at.waiting_for_debugger);
    let child_s = at.session.clone();
    let mut child_events = child_s.subscribe();
    child_s.call("Runtime.enable", json!({}), T).await.expect("Runtime.enable on child");
    child_s.call("Runtime.runIfWaitingForDebugger", json!({}), T).await.expect("resume");
    let ev = tokio::time::timeout(T, child_events.next_method("Runtime.consoleAPICalled")).await.expect("console event").expect("stream");
    assert_eq!(ev.session_id.as_ref(), child_s.id());
    assert_eq!(ev.params["args"][0]["value"], "hello from child");
    let load = tokio::time::timeout(T, page_events.next_method("Page.loadEventFired")).await.expect("load").expect("stream");
    assert_eq!(load.session_id.as_ref(), page.id());
    let title = child_s.call("Runtime.evaluate", json!({"expression": "document.title", "returnByValue": true}), T).await.expect("eval");
    assert_eq!(title["result"]["value"], "child");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_megabyte_result_arrives() {
    let conn = connect().await;
    let page = new_page(&conn).await;
    let v: Value = page
        .call("Runtime.evaluate", json!({"expression": "'x'.repeat(50*1024*1024)", "returnByValue": true}), Duration::from_secs(60))
        .await
        .expect("50 MB evaluate");
    assert_eq!(v["result"]["value"].as_str().map(str::len), Some(50 * 1024 * 1024));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_limit_message_fails_with_a_typed_error_naming_the_limit() {
    let ws = shared_chrome().expect("chromium");
    let conn = Connection::connect(&ws, ConnectOptions::default().max_message_size(1024 * 1024)).await.expect("connect");
    let page = new_page(&conn).await;
    let err = page
        .call("Runtime.evaluate", json!({"expression": "'x'.repeat(2*1024*1024)", "returnByValue": true}), T)
        .await
        .expect_err("over the limit");
    let text = err.to_string();
    assert!(text.contains("1048576"), "{text}");
    assert!(conn.is_closed(), "the socket cannot survive an over-limit frame");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_chromium_fails_a_pending_call_within_a_second() {
    let mut chrome = cdp_transport::LaunchedChrome::launch(cdp_transport::LaunchOptions::default().offline(true)).await.expect("launch");
    let conn = Connection::connect(chrome.ws_url(), ConnectOptions::default()).await.expect("connect");
    let page = new_page(&conn).await;
    let call = tokio::spawn({
        let page = page.clone();
        async move {
            page.call("Runtime.evaluate", json!({"expression": "new Promise(()=>{})", "awaitPromise": true}), Duration::from_secs(30)).await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t0 = std::time::Instant::now();
    chrome.kill();
    let r = tokio::time::timeout(Duration::from_secs(5), call).await.expect("call ends").expect("join");
    let err = r.expect_err("killed");
    assert!(err.is_connection_closed(), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(1), "took {:?}", t0.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_endpoint_resolves_through_json_version() {
    let ws = shared_chrome().expect("chromium");
    let port = url::Url::parse(&ws).expect("url").port().expect("port");
    let conn = Connection::connect(&format!("http://127.0.0.1:{port}"), ConnectOptions::default()).await.expect("connect");
    let v = conn.browser().call("Browser.getVersion", json!({}), T).await.expect("getVersion");
    assert!(v["product"].as_str().unwrap_or("").contains("Chrome"), "{v}");
}
