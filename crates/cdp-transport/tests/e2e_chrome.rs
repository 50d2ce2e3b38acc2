//! End-to-end: the transport against real headless Chromium.

use cdp_mock::FixtureServer;
use cdp_transport::launcher::shared_chrome;
use cdp_transport::{ConnectOptions, Connection, Session, TargetId};
use serde_json::{json, Value};
use std::time::Duration;

const T: Duration = Duration::from_secs(10);

async fn connect() -> Connection {
    let ws = shared_chrome().unwrap_or_else(|e| panic!("Chromium is needed for this test: {e}"));
    Connection::connect(&ws, ConnectOptions::default())
        .await
        .expect("connect")
}

async fn new_page(conn: &Connection) -> Session {
    let v = conn
        .browser()
        .call("Target.createTarget", json!({"url": "about:blank"}), T)
        .await
        .expect("createTarget");
    let tid = TargetId::new(v["targetId"].as_str().expect("targetId"));
    conn.attach(&tid, T).await.expect("attach")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oopif_auto_attach_routes_events_per_session() {
    let site = FixtureServer::start().await;
    let child = site.url("127.0.0.1", "/child.html");
    site.page(
        "/top.html",
        &format!("<title>top</title><iframe src='{child}'></iframe>"),
    );
    site.page(
        "/child.html",
        "<title>child</title><script>console.log('hello from child')</script>",
    );
    let conn = connect().await;
    let page = new_page(&conn).await;
    let mut attached = conn.attached_targets();
    page.call("Page.enable", json!({}), T)
        .await
        .expect("Page.enable");
    page.call(
        "Target.setAutoAttach",
        json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
        T,
    )
    .await
    .expect("setAutoAttach");
    let mut page_events = page.subscribe();
    page.call(
        "Page.navigate",
        json!({"url": site.url("localhost", "/top.html")}),
        T,
    )
    .await
    .expect("navigate");
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
    child_s
        .call("Runtime.enable", json!({}), T)
        .await
        .expect("Runtime.enable on child");
    child_s
        .call("Runtime.runIfWaitingForDebugger", json!({}), T)
        .await
        .expect("resume");
    let ev = tokio::time::timeout(T, child_events.next_method("Runtime.consoleAPICalled"))
        .await
        .expect("console event")
        .expect("stream");
    assert_eq!(ev.session_id.as_ref(), child_s.id());
    assert_eq!(ev.params["args"][0]["value"], "hello from child");
    let load = tokio::time::timeout(T, page_events.next_method("Page.loadEventFired"))
        .await
        .expect("load")
        .expect("stream");
    assert_eq!(load.session_id.as_ref(), page.id());
    let title = child_s
        .call(
            "Runtime.evaluate",
            json!({"expression": "document.title", "returnByValue": true}),
            T,
        )
        .await
        .expect("eval");
    assert_eq!(title["result"]["value"], "child");
    close_page(&conn, &page).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_megabyte_result_arrives() {
    let conn = connect().await;
    let page = new_page(&conn).await;
    let v: Value = page
        .call(
            "Runtime.evaluate",
            json!({"expression": "'x'.repeat(50*1024*1024)", "returnByValue": true}),
            Duration::from_secs(60),
        )
        .await
        .expect("50 MB evaluate");
    assert_eq!(
        v["result"]["value"].as_str().map(str::len),
        Some(50 * 1024 * 1024)
    );
    close_page(&conn, &page).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_limit_message_fails_with_a_typed_error_naming_the_limit() {
    let ws = shared_chrome().expect("chromium");
    let conn = Connection::connect(&ws, ConnectOptions::default().max_message_size(1024 * 1024))
        .await
        .expect("connect");
    let page = new_page(&conn).await;
    let err = page
        .call(
            "Runtime.evaluate",
            json!({"expression": "'x'.repeat(2*1024*1024)", "returnByValue": true}),
            T,
        )
        .await
        .expect_err("over the limit");
    assert!(
        matches!(
            err,
            cdp_transport::Error::MessageTooLarge {
                limit: 1_048_576,
                ..
            }
        ),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(text.contains("1048576"), "{text}");
    assert!(
        conn.is_closed(),
        "the socket cannot survive an over-limit frame"
    );
    let later = page
        .call("Runtime.evaluate", json!({"expression": "1"}), T)
        .await
        .expect_err("closed");
    assert!(later.is_connection_closed(), "{later:?}");
    // This connection is gone; close the tab through a fresh one.
    close_page(&connect().await, &page).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_chromium_fails_a_pending_call_within_a_second() {
    let mut chrome = cdp_transport::LaunchedChrome::launch(
        cdp_transport::LaunchOptions::default().offline(true),
    )
    .await
    .expect("launch");
    let conn = Connection::connect(chrome.ws_url(), ConnectOptions::default())
        .await
        .expect("connect");
    let page = new_page(&conn).await;
    let call = tokio::spawn({
        let page = page.clone();
        async move {
            page.call(
                "Runtime.evaluate",
                json!({"expression": "new Promise(()=>{})", "awaitPromise": true}),
                Duration::from_secs(30),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let t0 = std::time::Instant::now();
    chrome.kill();
    let r = tokio::time::timeout(Duration::from_secs(5), call)
        .await
        .expect("call ends")
        .expect("join");
    let err = r.expect_err("killed");
    eprintln!("kill -> pending call failed after {:?}", t0.elapsed());
    assert!(err.is_connection_closed(), "{err}");
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "took {:?}",
        t0.elapsed()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_endpoint_resolves_through_json_version() {
    let ws = shared_chrome().expect("chromium");
    let port = url::Url::parse(&ws).expect("url").port().expect("port");
    let conn = Connection::connect(
        &format!("http://127.0.0.1:{port}"),
        ConnectOptions::default(),
    )
    .await
    .expect("connect");
    let v = conn
        .browser()
        .call("Browser.getVersion", json!({}), T)
        .await
        .expect("getVersion");
    assert!(
        v["product"].as_str().unwrap_or("").contains("Chrome"),
        "{v}"
    );
}

async fn close_page(conn: &Connection, page: &Session) {
    if let Some(t) = page.target_id() {
        let _ = conn
            .browser()
            .call("Target.closeTarget", json!({"targetId": t.as_str()}), T)
            .await;
    }
}

/// A pending evaluate that never settles (an awaited promise).
fn hang(page: &Session) -> tokio::task::JoinHandle<cdp_transport::Result<Value>> {
    let page = page.clone();
    tokio::spawn(async move {
        page.call(
            "Runtime.evaluate",
            json!({"expression": "new Promise(()=>{})", "awaitPromise": true}),
            Duration::from_secs(30),
        )
        .await
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn renderer_crash_fails_pending_and_new_calls_until_navigation() {
    let site = FixtureServer::start().await;
    site.page("/p.html", "<title>p</title>");
    let conn = connect().await;
    let page = new_page(&conn).await;
    page.call("Page.enable", json!({}), T)
        .await
        .expect("Page.enable");
    page.call("Runtime.evaluate", json!({"expression": "1"}), T)
        .await
        .expect("renderer is up");
    let pending = hang(&page);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t0 = std::time::Instant::now();
    // Page.crash itself never gets a reply: the renderer is gone (C24).
    let crash = page
        .call("Page.crash", json!({}), T)
        .await
        .expect_err("Page.crash does not answer");
    assert!(
        matches!(crash, cdp_transport::Error::TargetCrashed { .. }),
        "{crash:?}"
    );
    let err = tokio::time::timeout(T, pending)
        .await
        .expect("the pending call ends")
        .expect("join")
        .expect_err("crashed");
    eprintln!(
        "renderer crash -> pending evaluate failed after {:?}",
        t0.elapsed()
    );
    assert!(
        matches!(err, cdp_transport::Error::TargetCrashed { .. }),
        "{err:?}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "took {:?}",
        t0.elapsed()
    );
    assert!(page.is_crashed());
    let t1 = std::time::Instant::now();
    let err = page
        .call("Runtime.evaluate", json!({"expression": "1"}), T)
        .await
        .expect_err("fails fast");
    assert!(
        matches!(err, cdp_transport::Error::TargetCrashed { .. }),
        "{err:?}"
    );
    assert!(
        t1.elapsed() < Duration::from_millis(50),
        "took {:?}",
        t1.elapsed()
    );
    page.call(
        "Page.navigate",
        json!({"url": site.url("127.0.0.1", "/p.html")}),
        T,
    )
    .await
    .expect("navigate after crash");
    assert!(!page.is_crashed());
    let v = tokio::time::timeout(T, async {
        loop {
            let r = page
                .call(
                    "Runtime.evaluate",
                    json!({"expression": "document.title", "returnByValue": true}),
                    T,
                )
                .await;
            match r {
                Ok(v) if v["result"]["value"] == "p" => return v,
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    })
    .await
    .expect("the tab works again after navigation");
    assert_eq!(v["result"]["value"], "p");
    close_page(&conn, &page).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detached_from_target_event_fails_the_pending_call_at_once() {
    let conn = connect().await;
    let page = new_page(&conn).await;
    let pending = hang(&page);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let sid = page.id().expect("session id").as_str().to_string();
    // A raw Target.detachFromTarget, not Session::detach: the transport learns of
    // the detach only from Chromium's Target.detachedFromTarget event.
    let t0 = std::time::Instant::now();
    conn.browser()
        .call("Target.detachFromTarget", json!({"sessionId": sid}), T)
        .await
        .expect("detach");
    let err = tokio::time::timeout(T, pending)
        .await
        .expect("ends")
        .expect("join")
        .expect_err("detached");
    eprintln!(
        "Target.detachedFromTarget -> pending evaluate failed after {:?}",
        t0.elapsed()
    );
    assert!(
        matches!(
            err,
            cdp_transport::Error::SessionClosed {
                reason: cdp_transport::SessionCloseReason::Detached,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(
        t0.elapsed() < Duration::from_secs(1),
        "took {:?}",
        t0.elapsed()
    );
    let err = page
        .call("Runtime.evaluate", json!({"expression": "1"}), T)
        .await
        .expect_err("closed");
    assert!(err.is_session_gone(), "{err:?}");
    close_page(&conn, &page).await;
}

/// A lone surrogate in a result (`String.fromCharCode(0xD800)`) comes back as
/// U+FFFD at once instead of the reply being lost (new-user report).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lone_surrogate_results_arrive_as_replacement_characters() {
    let conn = connect().await;
    let page = new_page(&conn).await;
    let t0 = std::time::Instant::now();
    let v = page
        .call(
            "Runtime.evaluate",
            json!({"expression": "'a' + String.fromCharCode(0xD800) + 'b'", "returnByValue": true}),
            T,
        )
        .await
        .expect("the reply decodes");
    assert_eq!(v["result"]["value"], "a\u{FFFD}b");
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    let _ = conn
        .browser()
        .call(
            "Target.closeTarget",
            json!({"targetId": page.target_id().map(|t| t.as_str()).unwrap_or("")}),
            T,
        )
        .await;
}
