//! The transport against `cdp-mock`: routing, failure semantics, tolerance,
//! back-pressure and budgets. Timings are measured with real (short) clocks
//! because the mock runs on real sockets; bounds are loose for a loaded box.

use cdp_mock::{Action, MockServer};
use cdp_transport::cdp::browser_protocol::page::{DialogType, EventJavascriptDialogOpening};
use cdp_transport::{
    Budget, ConnectOptions, Connection, Error, RecvError, Session, SessionCloseReason, TargetId,
};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(5);
/// How fast a gone peer must fail pending calls (issue 2).
const FAIL_FAST: Duration = Duration::from_millis(50);

async fn setup() -> (MockServer, Connection) {
    setup_with(ConnectOptions::default()).await
}

async fn setup_with(opts: ConnectOptions) -> (MockServer, Connection) {
    let mock = MockServer::start().await;
    let conn = Connection::connect(&mock.ws_url(), opts)
        .await
        .expect("connect to mock");
    (mock, conn)
}

/// Attaches to `target` and gets session `sid` (the mock answers `Target.attachToTarget` with it).
async fn attach(mock: &MockServer, conn: &Connection, target: &str, sid: &str) -> Session {
    mock.once(
        "Target.attachToTarget",
        Action::Reply(json!({ "sessionId": sid })),
    );
    conn.attach(&TargetId::new(target), T)
        .await
        .expect("attach")
}

/// Spawns a call that the mock never answers and waits until the mock has it.
async fn pending_call(
    mock: &MockServer,
    s: &Session,
    method: &str,
) -> tokio::task::JoinHandle<cdp_transport::Result<Value>> {
    let before = mock.received_method(method).len();
    let s = s.clone();
    let m = method.to_string();
    let h = tokio::spawn(async move { s.call(&m, json!({}), Duration::from_secs(30)).await });
    let got = mock.wait_for(method, before + 1, T).await;
    assert_eq!(got.len(), before + 1, "the mock received {method}");
    h
}

/// Awaits a spawned call and returns its error and how long it took from `t0`.
async fn fails(
    h: tokio::task::JoinHandle<cdp_transport::Result<Value>>,
    t0: Instant,
) -> (Error, Duration) {
    let r = tokio::time::timeout(T, h)
        .await
        .expect("the call ends")
        .expect("join");
    let took = t0.elapsed();
    (r.expect_err("the call fails"), took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousand_concurrent_calls_answered_out_of_order_reach_their_callers() {
    let (mock, conn) = setup().await;
    mock.on_action("Test.echo", Action::Never);
    let mut tasks = Vec::new();
    for n in 0..1000u64 {
        let b = conn.browser();
        tasks.push(tokio::spawn(async move {
            let v = b
                .call("Test.echo", json!({ "n": n }), Duration::from_secs(20))
                .await
                .expect("echo");
            (n, v)
        }));
    }
    let reqs = mock
        .wait_for("Test.echo", 1000, Duration::from_secs(20))
        .await;
    assert_eq!(reqs.len(), 1000);
    assert_eq!(conn.pending_calls(), 1000);
    // A fixed permutation of the ids: far from both arrival order and its reverse.
    let mut order: Vec<_> = reqs
        .iter()
        .map(|r| (r.id.wrapping_mul(2_654_435_761) % 4_294_967_291, r))
        .collect();
    order.sort_by_key(|(k, _)| *k);
    let first_ids: Vec<u64> = order.iter().take(5).map(|(_, r)| r.id).collect();
    assert_ne!(first_ids, vec![1, 2, 3, 4, 5]);
    for (_, r) in &order {
        mock.reply(r.id, json!({ "echo": r.params["n"], "id": r.id }), None);
    }
    for t in tasks {
        let (n, v) = t.await.expect("join");
        assert_eq!(v["echo"], n, "caller {n} got {v}");
    }
    assert_eq!(conn.pending_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn detached_from_target_fails_pending_calls_at_once_and_later_calls_too() {
    let (mock, conn) = setup().await;
    mock.on_action("Runtime.evaluate", Action::Never);
    let s = attach(&mock, &conn, "T1", "S1").await;
    let other = attach(&mock, &conn, "T2", "S2").await;
    let h = pending_call(&mock, &s, "Runtime.evaluate").await;
    let h_other = pending_call(&mock, &other, "Runtime.evaluate").await;
    let t0 = Instant::now();
    mock.event(
        "Target.detachedFromTarget",
        json!({ "sessionId": "S1", "targetId": "T1" }),
        None,
    );
    let (err, took) = fails(h, t0).await;
    eprintln!("detach -> pending call failed after {took:?}");
    assert!(
        matches!(&err, Error::SessionClosed { session_id, reason: SessionCloseReason::Detached, method }
            if session_id.as_str() == "S1" && method == "Runtime.evaluate"),
        "{err:?}"
    );
    assert!(err.is_session_gone());
    assert!(took < FAIL_FAST, "took {took:?}");
    assert_eq!(s.closed_reason(), Some(SessionCloseReason::Detached));

    // A later call fails at once without reaching the browser.
    let sent = mock.received().len();
    let t1 = Instant::now();
    let err = s
        .call("Page.enable", json!({}), T)
        .await
        .expect_err("session closed");
    assert!(
        matches!(
            err,
            Error::SessionClosed {
                reason: SessionCloseReason::Detached,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(t1.elapsed() < FAIL_FAST);
    assert_eq!(
        mock.received().len(),
        sent,
        "nothing was sent for a closed session"
    );

    // The other session is untouched.
    assert!(!h_other.is_finished());
    assert_eq!(other.closed_reason(), None);
    mock.event("Target.targetDestroyed", json!({ "targetId": "T2" }), None);
    let (err, _) = fails(h_other, Instant::now()).await;
    assert!(
        matches!(
            err,
            Error::SessionClosed {
                reason: SessionCloseReason::TargetDestroyed,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(conn.pending_calls(), 0);
    assert_eq!(conn.live_sessions(), 0);
    // The browser session still works.
    conn.browser()
        .call("Browser.getVersion", json!({}), T)
        .await
        .expect("browser session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_own_detach_closes_the_session() {
    let (mock, conn) = setup().await;
    let s = attach(&mock, &conn, "T1", "S1").await;
    s.detach(T).await.expect("detach");
    let d = mock.received_method("Target.detachFromTarget");
    assert_eq!(d[0].params, json!({ "sessionId": "S1" }));
    let err = s
        .call("Runtime.enable", json!({}), T)
        .await
        .expect_err("detached");
    assert!(
        matches!(
            err,
            Error::SessionClosed {
                reason: SessionCloseReason::Detached,
                ..
            }
        ),
        "{err:?}"
    );
    // Detaching twice is fine.
    s.detach(T).await.expect("second detach");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn target_crashed_fails_pending_calls_of_every_session_on_the_target_until_navigation() {
    let (mock, conn) = setup().await;
    mock.on_action("Runtime.evaluate", Action::Never);
    mock.on(
        "Page.navigate",
        json!({ "frameId": "T1", "loaderId": "L2" }),
    );
    let mut announced = conn.attached_targets();
    // The page session comes from auto-attach; a second session (say, evaluate's own) from attach.
    mock.event(
        "Target.attachedToTarget",
        json!({ "sessionId": "S1", "targetInfo": { "targetId": "T1", "type": "page", "url": "about:blank" }, "waitingForDebugger": false }),
        None,
    );
    let page = tokio::time::timeout(T, announced.recv())
        .await
        .expect("announced")
        .expect("stream")
        .session;
    let second = attach(&mock, &conn, "T1", "S2").await;
    let unrelated = attach(&mock, &conn, "T9", "S9").await;
    let h1 = pending_call(&mock, &page, "Runtime.evaluate").await;
    let h2 = pending_call(&mock, &second, "Runtime.evaluate").await;
    let h9 = pending_call(&mock, &unrelated, "Runtime.evaluate").await;

    let t0 = Instant::now();
    mock.event("Inspector.targetCrashed", json!({}), Some("S1"));
    let (e1, took1) = fails(h1, t0).await;
    let (e2, took2) = fails(h2, t0).await;
    eprintln!("crash -> pending calls failed after {took1:?} and {took2:?}");
    for (e, sid) in [(&e1, "S1"), (&e2, "S2")] {
        assert!(
            matches!(e, Error::TargetCrashed { session_id, target_id, .. } if session_id.as_str() == sid && target_id.as_str() == "T1"),
            "{e:?}"
        );
    }
    assert!(took1.max(took2) < FAIL_FAST, "took {took1:?} / {took2:?}");
    assert!(page.is_crashed() && second.is_crashed());
    assert!(!unrelated.is_crashed() && !h9.is_finished());

    // New calls fail fast, without reaching the browser (Chromium would hang them, C24).
    let sent = mock.received().len();
    let t1 = Instant::now();
    let err = page
        .call("DOM.getDocument", json!({}), T)
        .await
        .expect_err("crashed");
    assert!(matches!(err, Error::TargetCrashed { .. }), "{err:?}");
    assert!(t1.elapsed() < FAIL_FAST);
    assert_eq!(mock.received().len(), sent);

    // Page.navigate is let through; once it succeeds the session works again.
    page.call("Page.navigate", json!({ "url": "about:blank" }), T)
        .await
        .expect("navigate after crash");
    assert!(!page.is_crashed() && !second.is_crashed());
    page.call("DOM.getDocument", json!({}), T)
        .await
        .expect("works after navigation");
    second
        .call("DOM.getDocument", json!({}), T)
        .await
        .expect("the other session works too");
    h9.abort();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_drop_fails_every_pending_call_at_once() {
    let (mock, conn) = setup().await;
    mock.on_action("Runtime.evaluate", Action::Never);
    mock.on_action("Browser.getVersion", Action::Never);
    let s = attach(&mock, &conn, "T1", "S1").await;
    let mut events = s.subscribe();
    let h_page = pending_call(&mock, &s, "Runtime.evaluate").await;
    let h_browser = pending_call(&mock, &conn.browser(), "Browser.getVersion").await;
    assert_eq!(conn.pending_calls(), 2);
    let t0 = Instant::now();
    mock.drop_connections();
    let (e1, took1) = fails(h_page, t0).await;
    let (e2, took2) = fails(h_browser, t0).await;
    eprintln!("socket drop -> pending calls failed after {took1:?} and {took2:?}");
    assert!(
        e1.is_connection_closed() && e2.is_connection_closed(),
        "{e1:?} / {e2:?}"
    );
    assert!(took1.max(took2) < FAIL_FAST, "took {took1:?} / {took2:?}");
    assert!(conn.is_closed());
    assert_eq!(conn.pending_calls(), 0);
    assert_eq!(
        tokio::time::timeout(T, events.recv())
            .await
            .expect("stream ends"),
        Err(RecvError::Closed)
    );
    assert_eq!(
        s.closed_reason(),
        Some(SessionCloseReason::ConnectionClosed)
    );
    let t1 = Instant::now();
    let err = s
        .call("Page.enable", json!({}), T)
        .await
        .expect_err("closed");
    assert!(err.is_connection_closed(), "{err:?}");
    assert!(t1.elapsed() < FAIL_FAST);
    let reason = tokio::time::timeout(T, conn.closed())
        .await
        .expect("closed resolves");
    assert_eq!(Some(reason), conn.closed_reason());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn action_drop_socket_mid_call_fails_it() {
    let (mock, conn) = setup().await;
    mock.on_action("Page.crashTheSocket", Action::DropSocket);
    let err = conn
        .browser()
        .call("Page.crashTheSocket", json!({}), T)
        .await
        .expect_err("dropped");
    assert!(err.is_connection_closed(), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_from_the_endpoint_leaves_the_connection_working() {
    let (mock, conn) = setup().await;
    let mut all = conn.subscribe_all();
    mock.event(
        "Totally.unknownEvent",
        json!({ "whatever": [1, 2, 3] }),
        None,
    );
    let dialog = |ty: &str| {
        json!({
            "url": "http://localhost/", "frameId": "F1", "message": "hi", "type": ty,
            "hasBrowserHandler": false, "defaultPrompt": ""
        })
    };
    mock.event(
        "Page.javascriptDialogOpening",
        dialog("teleport"),
        Some("S1"),
    );
    mock.send_raw("this is not JSON {");
    mock.send_raw("");
    mock.send_raw("[1, 2, 3]");
    mock.send_raw(r#"{"id": 999999, "result": {}}"#);
    mock.send_raw(r#"{"id": 999998, "error": {"code": -32000, "message": "late"}}"#);
    mock.send_raw(r#"{"neither": "id nor method"}"#);
    mock.send_raw(r#"{"method": 42}"#);
    mock.event("Page.javascriptDialogOpening", dialog("alert"), None);

    let v = conn
        .browser()
        .call("Browser.getVersion", json!({}), T)
        .await
        .expect("still working");
    assert_eq!(v, json!({}));
    assert!(!conn.is_closed());
    assert_eq!(conn.pending_calls(), 0);

    let unknown = all.recv().await.expect("unknown event delivered");
    assert_eq!(unknown.method, "Totally.unknownEvent");
    assert_eq!(unknown.params["whatever"], json!([1, 2, 3]));
    let odd = all.recv().await.expect("unknown enum value delivered");
    let err = odd
        .decode::<EventJavascriptDialogOpening>()
        .expect_err("unknown enum value");
    assert_eq!(err.method, "Page.javascriptDialogOpening");
    assert_eq!(
        odd.params["type"], "teleport",
        "the raw params stay for the fallback"
    );
    let ok = all.recv().await.expect("the next event");
    let typed = ok
        .decode::<EventJavascriptDialogOpening>()
        .expect("a known enum value decodes");
    assert_eq!(typed.r#type, DialogType::Alert);
    assert!(all.try_recv().is_none(), "garbage produced no events");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_call_future_leaves_no_pending_entry_and_its_late_reply_is_dropped() {
    let (mock, conn) = setup().await;
    mock.on_action("Runtime.evaluate", Action::Never);
    let h = pending_call(&mock, &conn.browser(), "Runtime.evaluate").await;
    assert_eq!(conn.pending_calls(), 1);
    h.abort();
    assert!(h.await.expect_err("aborted").is_cancelled());
    assert_eq!(conn.pending_calls(), 0);

    // Same for a future dropped by a select, without a task.
    let b = conn.browser();
    tokio::select! {
        _ = b.call("Runtime.evaluate", json!({}), T) => panic!("the mock never replies"),
        _ = mock.wait_for("Runtime.evaluate", 2, T) => {}
    }
    assert_eq!(conn.pending_calls(), 0);

    for r in mock.received_method("Runtime.evaluate") {
        mock.reply(r.id, json!({ "late": true }), None);
    }
    let v = conn
        .browser()
        .call("Browser.getVersion", json!({}), T)
        .await
        .expect("still working");
    assert_eq!(v, json!({}));
    assert_eq!(conn.pending_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_subscriber_lags_while_calls_keep_working() {
    let (mock, conn) = setup_with(ConnectOptions::default().event_capacity(8)).await;
    let mut slow = conn.browser().subscribe();
    let mut slow_all = conn.subscribe_all();
    for i in 0..50 {
        mock.event("Test.tick", json!({ "i": i }), None);
    }
    // The reply comes after the 50 events on the same socket: once it is here, they were all routed.
    let t0 = Instant::now();
    conn.browser()
        .call("Browser.getVersion", json!({}), T)
        .await
        .expect("calls work while a subscriber lags");
    eprintln!("call with a lagging subscriber took {:?}", t0.elapsed());
    for s in [&mut slow, &mut slow_all] {
        assert_eq!(s.recv().await, Err(RecvError::Lagged(42)));
        for i in 42..50 {
            assert_eq!(s.recv().await.expect("buffered").params["i"], i);
        }
        assert!(s.try_recv().is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn budget_timeout_and_cancellation_end_calls_promptly() {
    let (mock, conn) = setup().await;
    mock.on_action("Runtime.evaluate", Action::Never);
    let b = conn.browser();

    let t0 = Instant::now();
    let err = b
        .call("Runtime.evaluate", json!({}), Duration::from_millis(100))
        .await
        .expect_err("times out");
    let took = t0.elapsed();
    eprintln!("100 ms budget -> Timeout after {took:?}");
    assert!(
        matches!(&err, Error::Timeout { method, budget, .. } if method == "Runtime.evaluate" && *budget == Duration::from_millis(100)),
        "{err:?}"
    );
    assert!(err.is_timeout());
    assert!(
        took >= Duration::from_millis(100) && took < Duration::from_millis(600),
        "took {took:?}"
    );

    let budget = Budget::new(Duration::from_secs(30));
    let h = tokio::spawn({
        let (b, budget) = (b.clone(), budget.clone());
        async move { b.call("Runtime.evaluate", json!({}), budget).await }
    });
    mock.wait_for("Runtime.evaluate", 2, T).await;
    let t1 = Instant::now();
    budget.cancel();
    let (err, took) = fails(h, t1).await;
    eprintln!("cancel -> Cancelled after {took:?}");
    assert!(err.is_cancelled(), "{err:?}");
    assert!(took < FAIL_FAST, "took {took:?}");

    // A spent budget sends nothing.
    let sent = mock.received().len();
    let err = b
        .call("Runtime.evaluate", json!({}), &budget)
        .await
        .expect_err("already cancelled");
    assert!(err.is_cancelled(), "{err:?}");
    let err = b
        .call("Runtime.evaluate", json!({}), Duration::ZERO)
        .await
        .expect_err("already expired");
    assert!(err.is_timeout(), "{err:?}");
    assert_eq!(mock.received().len(), sent);

    // A child budget is cancelled with its parent.
    let parent = Budget::new(Duration::from_secs(30));
    let child = parent.child(Duration::from_secs(10));
    parent.cancel();
    assert!(b
        .call("Runtime.evaluate", json!({}), child)
        .await
        .expect_err("cancelled")
        .is_cancelled());
    assert_eq!(conn.pending_calls(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_errors_and_typed_commands() {
    use cdp_transport::cdp::browser_protocol::browser::GetVersionParams;
    let (mock, conn) = setup().await;
    mock.on_action(
        "DOM.getDocument",
        Action::Error {
            code: -32000,
            message: "Not allowed".into(),
        },
    );
    mock.on(
        "Browser.getVersion",
        json!({ "protocolVersion": "1.3", "product": "Mock/1.0", "revision": "r", "userAgent": "ua", "jsVersion": "12" }),
    );
    let err = conn
        .browser()
        .call("DOM.getDocument", json!({}), T)
        .await
        .expect_err("protocol error");
    assert!(
        matches!(&err, Error::Protocol { code: -32000, method, .. } if method == "DOM.getDocument"),
        "{err:?}"
    );
    assert_eq!(err.protocol_message(), Some("Not allowed"));
    let v = conn
        .browser()
        .execute(GetVersionParams::default(), T)
        .await
        .expect("typed call");
    assert_eq!(v.product, "Mock/1.0");
    mock.on("Browser.getVersion", json!({ "product": 7 }));
    let err = conn
        .browser()
        .execute(GetVersionParams::default(), T)
        .await
        .expect_err("bad reply shape");
    assert!(
        matches!(&err, Error::Decode { method, .. } if method == "Browser.getVersion"),
        "{err:?}"
    );
    // Null params are sent as {} (CDP rejects a missing params object on some methods).
    conn.browser()
        .call("Page.enable", Value::Null, T)
        .await
        .expect("null params");
    assert_eq!(mock.received_method("Page.enable")[0].params, json!({}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_are_routed_to_their_session_only() {
    let (mock, conn) = setup().await;
    let s1 = attach(&mock, &conn, "T1", "S1").await;
    let s2 = attach(&mock, &conn, "T2", "S2").await;
    let (mut e1, mut e2, mut eb) = (s1.subscribe(), s2.subscribe(), conn.browser().subscribe());
    mock.event(
        "Page.loadEventFired",
        json!({ "timestamp": 1.0 }),
        Some("S1"),
    );
    mock.event(
        "Page.loadEventFired",
        json!({ "timestamp": 2.0 }),
        Some("S2"),
    );
    mock.event("Target.targetCreated", json!({ "targetInfo": {} }), None);
    conn.browser()
        .call("Browser.getVersion", json!({}), T)
        .await
        .expect("sync");
    assert_eq!(e1.recv().await.expect("s1").params["timestamp"], 1.0);
    assert_eq!(e2.recv().await.expect("s2").params["timestamp"], 2.0);
    assert_eq!(
        eb.recv().await.expect("browser").method,
        "Target.targetCreated"
    );
    assert!(e1.try_recv().is_none() && e2.try_recv().is_none() && eb.try_recv().is_none());
    // Calls carry the sessionId on the wire.
    s2.call("Runtime.enable", json!({}), T).await.expect("call");
    assert_eq!(
        mock.received_method("Runtime.enable")[0]
            .session_id
            .as_deref(),
        Some("S2")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_over_limit_message_fails_every_pending_call_with_the_limit_and_closes() {
    let (mock, conn) = setup_with(ConnectOptions::default().max_message_size(64 * 1024)).await;
    mock.on_action("Runtime.evaluate", Action::Never);
    mock.on("Big.reply", json!({ "s": "x".repeat(100 * 1024) }));
    let other = pending_call(&mock, &conn.browser(), "Runtime.evaluate").await;
    let t0 = Instant::now();
    let err = conn
        .browser()
        .call("Big.reply", json!({}), T)
        .await
        .expect_err("over the limit");
    assert!(
        matches!(err, Error::MessageTooLarge { limit: 65_536, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("65536"), "{err}");
    let (err, took) = fails(other, t0).await;
    eprintln!("over-limit message -> other pending call failed after {took:?}");
    assert!(
        matches!(err, Error::MessageTooLarge { limit: 65_536, .. }),
        "{err:?}"
    );
    assert!(took < FAIL_FAST, "took {took:?}");
    assert!(conn.is_closed(), "the connection reports itself closed");
    assert!(
        conn.closed_reason().is_some_and(|r| r.contains("65536")),
        "{:?}",
        conn.closed_reason()
    );
    // Just under the limit works on a fresh connection.
    let conn = Connection::connect(
        &mock.ws_url(),
        ConnectOptions::default().max_message_size(64 * 1024),
    )
    .await
    .expect("connect");
    mock.on("Big.reply", json!({ "s": "x".repeat(60 * 1024) }));
    conn.browser()
        .call("Big.reply", json!({}), T)
        .await
        .expect("under the limit");
}

/// Chromium sends JavaScript strings as they are: a lone UTF-16 surrogate
/// arrives as an unpaired `\uD800` escape, which strict JSON decoding refuses.
/// The reply must still reach its caller (as U+FFFD), and events too, instead
/// of being skipped and leaving the call to wait out its budget.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lone_surrogates_in_replies_and_events_decode_as_replacement_characters() {
    let (mock, conn) = setup().await;
    mock.on_action("Runtime.evaluate", Action::Never);
    let mut events = conn.browser().subscribe();
    let call = tokio::spawn({
        let b = conn.browser();
        async move {
            b.call("Runtime.evaluate", json!({}), Duration::from_secs(5))
                .await
        }
    });
    let req = mock
        .wait_for("Runtime.evaluate", 1, Duration::from_secs(5))
        .await;
    let id = req[0].id;
    let t0 = Instant::now();
    mock.send_raw(&format!(
        r#"{{"id":{id},"result":{{"lone_high":"a\uD800b","lone_low":"\udc00","pair":"\ud83d\ude00","escaped":"\\uD800","end":"x\uDBFF"}}}}"#
    ));
    let v = call.await.expect("join").expect("the reply decodes");
    assert!(t0.elapsed() < Duration::from_secs(1));
    assert_eq!(v["lone_high"], "a\u{FFFD}b");
    assert_eq!(v["lone_low"], "\u{FFFD}");
    assert_eq!(v["pair"], "\u{1F600}");
    assert_eq!(
        v["escaped"], "\\uD800",
        "an escaped backslash is not an escape"
    );
    assert_eq!(v["end"], "x\u{FFFD}");
    mock.send_raw(r#"{"method":"Runtime.consoleAPICalled","params":{"type":"error","args":[{"type":"string","value":"err \ud800"}]}}"#);
    let ev = tokio::time::timeout(
        Duration::from_secs(2),
        events.next_method("Runtime.consoleAPICalled"),
    )
    .await
    .expect("event arrives")
    .expect("stream open");
    assert_eq!(ev.params["args"][0]["value"], "err \u{FFFD}");
}
