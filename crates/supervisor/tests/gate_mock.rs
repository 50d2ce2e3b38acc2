//! The target gate's decisions against the scripted CDP server: which
//! browser-level page attaches a supervisor claims (set up, then resumed),
//! which the gate resumes and detaches at once, which it only detaches, and
//! that no paused target is ever left paused (stop, a lost resume, a
//! reconnect). The CDP calls sent are pinned with insta snapshots.
//!
//! Openers and decisions are process-wide (keyed by target id, as one
//! resume from any client releases a target), so each test uses target ids
//! of its own (`id`), as a real browser's random ids would be; snapshots show
//! them without the test's prefix.

use cdp_mock::{Action, MockServer};
use cdp_transport::{ConnectOptions, Connection, TargetId};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use supervisor::{BridgeMode, ReconnectPolicy, Supervisor, SupervisorConfig};

const T: Duration = Duration::from_secs(5);
/// How long to keep watching for calls that must NOT come.
const QUIET: Duration = Duration::from_millis(400);
const RESUME: &str = "Runtime.runIfWaitingForDebugger";

/// This test's target ids: `<test>.<x>`.
fn id(test: &str, x: &str) -> String {
    format!("{test}.{x}")
}

/// A mock whose `Target.attachToTarget` answers `S-<x>` for target `<test>.<x>`.
async fn mock(test: &'static str) -> MockServer {
    let mock = MockServer::start().await;
    mock.on_fn("Target.attachToTarget", move |r| {
        let t = r.params["targetId"].as_str().unwrap_or("");
        let x = t.strip_prefix(&format!("{test}.")).unwrap_or(t);
        Some(Action::Reply(json!({"sessionId": format!("S-{x}")})))
    });
    mock.on(
        "Target.getTargets",
        json!({"targetInfos": [{"targetId": id(test, "T1"), "type": "page"}, {"targetId": id(test, "T2"), "type": "page"}]}),
    );
    mock
}

async fn connect(mock: &MockServer) -> Connection {
    Connection::connect(&mock.ws_url(), ConnectOptions::default())
        .await
        .expect("connect")
}

async fn supervise(
    conn: &Connection,
    test: &str,
    target: &str,
    config: SupervisorConfig,
) -> Supervisor {
    Supervisor::attach(conn.clone(), TargetId::new(id(test, target)), config)
        .await
        .expect("attach")
}

/// A browser-level `Target.attachedToTarget` for page target `<test>.<target>`.
fn attached(
    mock: &MockServer,
    test: &str,
    sid: &str,
    target: &str,
    opener: Option<&str>,
    paused: bool,
) {
    let mut info =
        json!({"targetId": id(test, target), "type": "page", "url": "", "attached": true});
    if let Some(o) = opener {
        info["openerId"] = json!(id(test, o));
        info["openerFrameId"] = json!(id(test, o));
        info["canAccessOpener"] = json!(true);
    }
    mock.event(
        "Target.attachedToTarget",
        json!({"sessionId": sid, "targetInfo": info, "waitingForDebugger": paused}),
        None,
    );
}

/// The calls sent on `session` (`None`: the browser session), in order, with
/// the bridge's params (random token, script text) and the test's id prefix
/// left out.
fn calls(mock: &MockServer, test: &str, session: Option<&str>) -> Vec<Value> {
    mock.received()
        .into_iter()
        .filter(|r| r.session_id.as_deref() == session)
        .map(|r| {
            let params = if r.method.starts_with("Fetch.")
                || r.method == "Page.addScriptToEvaluateOnNewDocument"
            {
                json!("[bridge]")
            } else {
                let text = r.params.to_string().replace(&format!("{test}."), "");
                serde_json::from_str(&text).unwrap_or(r.params)
            };
            json!({"method": r.method, "params": params})
        })
        .collect()
}

fn methods(mock: &MockServer, session: &str) -> Vec<String> {
    mock.received()
        .into_iter()
        .filter(|r| r.session_id.as_deref() == Some(session))
        .map(|r| r.method)
        .collect()
}

/// Browser-session `Target.detachFromTarget` calls, by session id, sorted.
fn detached(mock: &MockServer) -> Vec<String> {
    let mut v: Vec<String> = mock
        .received_method("Target.detachFromTarget")
        .into_iter()
        .filter_map(|r| r.params["sessionId"].as_str().map(String::from))
        .collect();
    v.sort();
    v
}

fn resumes_on(mock: &MockServer, sid: &str) -> usize {
    mock.received_method(RESUME)
        .iter()
        .filter(|r| r.session_id.as_deref() == Some(sid))
        .count()
}

/// Waits until `pred` holds for what the mock received.
async fn until(mock: &MockServer, what: &str, pred: impl Fn(&MockServer) -> bool) {
    let t0 = Instant::now();
    while !pred(mock) {
        assert!(
            t0.elapsed() < T,
            "never: {what}; got {:#?}",
            mock.received()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn the_gate_is_switched_on_once_per_connection_at_browser_level_filtered_to_pages() {
    const TEST: &str = "once";
    let mock = mock(TEST).await;
    let conn = connect(&mock).await;
    let _a = supervise(&conn, TEST, "T1", SupervisorConfig::default()).await;
    let _b = supervise(&conn, TEST, "T2", SupervisorConfig::default()).await;
    let browser: Vec<Value> = calls(&mock, TEST, None);
    insta::assert_yaml_snapshot!(
        "browser_calls_of_two_supervisors_on_one_connection",
        browser
    );
}

#[tokio::test]
async fn a_paused_popup_of_ours_is_set_up_with_the_bridge_before_it_is_resumed() {
    const TEST: &str = "claimed";
    let mock = mock(TEST).await;
    let conn = connect(&mock).await;
    let sup = supervise(
        &conn,
        TEST,
        "T1",
        SupervisorConfig::default().bridge(BridgeMode::On),
    )
    .await;
    attached(&mock, TEST, "SPOP", "POP", Some("T1"), true);
    sup.wait_until(T, |v| {
        v.popups
            .iter()
            .any(|p| p.target_id.as_str() == id(TEST, "POP"))
    })
    .await
    .expect("the popup is ours");
    mock.wait_for("Page.getFrameTree", 2, T).await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(resumes_on(&mock, "SPOP"), 1, "resumed once, by its owner");
    assert!(detached(&mock).is_empty(), "{:?}", detached(&mock));
    insta::assert_yaml_snapshot!("claimed_popup_calls", calls(&mock, TEST, Some("SPOP")));
}

#[tokio::test]
async fn a_paused_page_target_nobody_claims_is_resumed_and_detached_at_once() {
    const TEST: &str = "unclaimed";
    let mock = mock(TEST).await;
    let conn = connect(&mock).await;
    let sup = supervise(&conn, TEST, "T1", SupervisorConfig::default()).await;
    // A tab someone else created, and a popup of a tab nobody here supervises.
    attached(&mock, TEST, "SNEW", "NEW", None, true);
    attached(&mock, TEST, "SFOREIGN", "FOREIGN", Some("T9"), true);
    until(&mock, "both released", |m| detached(m).len() == 2).await;
    tokio::time::sleep(QUIET).await;
    let got = json!({
        "SNEW": calls(&mock, TEST, Some("SNEW")),
        "SFOREIGN": calls(&mock, TEST, Some("SFOREIGN")),
        "detached": detached(&mock),
    });
    insta::assert_yaml_snapshot!("unclaimed_calls", got);
    assert!(sup.snapshot().popups.is_empty());
}

#[tokio::test]
async fn existing_tabs_get_their_extra_session_detached_and_never_enabled() {
    const TEST: &str = "existing";
    let mock = mock(TEST).await;
    // Chromium attaches every page that exists when browser-level auto-attach
    // is switched on, before it replies: our own tab (a second session on
    // it), another tab, and here also our own explicit session's event.
    let extra = |sid: &str, target: &str| {
        (
            "Target.attachedToTarget".to_string(),
            json!({"sessionId": sid, "targetInfo": {"targetId": id(TEST, target), "type": "page", "url": "about:blank", "attached": true}, "waitingForDebugger": false}),
            None,
        )
    };
    mock.on_session(
        "Target.setAutoAttach",
        None,
        Action::EventsThenReply(
            vec![
                extra("S-T1", "T1"),
                extra("EXTRA-T1", "T1"),
                extra("EXTRA-T5", "T5"),
            ],
            json!({}),
        ),
    );
    let conn = connect(&mock).await;
    let sup = supervise(&conn, TEST, "T1", SupervisorConfig::default()).await;
    until(&mock, "extra sessions detached", |m| detached(m).len() == 2).await;
    tokio::time::sleep(QUIET).await;
    let got = json!({
        "detached": detached(&mock),
        "EXTRA-T1": calls(&mock, TEST, Some("EXTRA-T1")),
        "EXTRA-T5": calls(&mock, TEST, Some("EXTRA-T5")),
    });
    insta::assert_yaml_snapshot!("existing_tabs", got);
    // Our own explicit session is untouched and still works.
    assert!(sup.snapshot().active);
    sup.page_session()
        .call("Runtime.evaluate", json!({"expression": "1"}), T)
        .await
        .expect("our page session still routes");
}

#[tokio::test]
async fn popups_of_popups_are_ours_and_a_second_session_on_a_popup_is_released() {
    const TEST: &str = "nested";
    let mock = mock(TEST).await;
    let conn = connect(&mock).await;
    let sup = supervise(&conn, TEST, "T1", SupervisorConfig::default()).await;
    attached(&mock, TEST, "SPOP", "POP", Some("T1"), true);
    sup.wait_until(T, |v| v.popups.len() == 1)
        .await
        .expect("popup");
    attached(&mock, TEST, "SPOP2", "POP2", Some("POP"), true);
    sup.wait_until(T, |v| v.popups.len() == 2)
        .await
        .expect("the popup's popup is ours too");
    // The same popup target again through another paused session.
    attached(&mock, TEST, "SPOP-B", "POP", Some("T1"), true);
    until(&mock, "the duplicate released", |m| {
        detached(m) == ["SPOP-B"] && resumes_on(m, "SPOP-B") == 1
    })
    .await;
    tokio::time::sleep(QUIET).await;
    let v = sup.snapshot();
    let popups: Vec<(String, &str)> = v
        .popups
        .iter()
        .map(|p| (p.target_id.to_string(), p.session_id.as_str()))
        .collect();
    assert_eq!(
        popups,
        [(id(TEST, "POP"), "SPOP"), (id(TEST, "POP2"), "SPOP2")]
    );
    assert_eq!(methods(&mock, "SPOP-B"), [RESUME], "never enabled");
    assert_eq!(resumes_on(&mock, "SPOP2"), 1);
}

#[tokio::test]
async fn two_supervisors_on_one_connection_each_claim_only_their_own_popups() {
    const TEST: &str = "two";
    let mock = mock(TEST).await;
    let conn = connect(&mock).await;
    let a = supervise(&conn, TEST, "T1", SupervisorConfig::default()).await;
    let b = supervise(&conn, TEST, "T2", SupervisorConfig::default()).await;
    attached(&mock, TEST, "SPA", "PA", Some("T1"), true);
    attached(&mock, TEST, "SPB", "PB", Some("T2"), true);
    let va = a
        .wait_until(T, |v| !v.popups.is_empty())
        .await
        .expect("A's popup");
    let vb = b
        .wait_until(T, |v| !v.popups.is_empty())
        .await
        .expect("B's popup");
    until(&mock, "both resumed", |m| {
        resumes_on(m, "SPA") == 1 && resumes_on(m, "SPB") == 1
    })
    .await;
    tokio::time::sleep(QUIET).await;
    assert_eq!(va.popups.len(), 1);
    assert_eq!(va.popups[0].target_id.as_str(), id(TEST, "PA"));
    assert_eq!(a.snapshot().popups.len(), 1);
    assert_eq!(vb.popups[0].target_id.as_str(), id(TEST, "PB"));
    assert_eq!(b.snapshot().popups.len(), 1);
    assert_eq!(resumes_on(&mock, "SPA") + resumes_on(&mock, "SPB"), 2);
    assert_eq!(
        mock.received_method("Page.enable")
            .iter()
            .filter(|r| matches!(r.session_id.as_deref(), Some("SPA" | "SPB")))
            .count(),
        2,
        "each popup set up once, by its own supervisor"
    );
    assert!(detached(&mock).is_empty());
}

#[tokio::test]
async fn a_stopping_owner_never_leaves_its_popup_paused() {
    const TEST: &str = "stopping";
    let mock = mock(TEST).await;
    // Setup of the popup hangs; the owner's own bound is long.
    mock.on_session("Page.enable", Some("SPOP"), Action::Never);
    let conn = connect(&mock).await;
    let mut config = SupervisorConfig::default();
    config.setup_timeout = Duration::from_secs(60);
    let sup = supervise(&conn, TEST, "T1", config).await;
    attached(&mock, TEST, "SPOP", "POP", Some("T1"), true);
    mock.wait_for("Page.enable", 2, T).await;
    assert_eq!(resumes_on(&mock, "SPOP"), 0, "still being set up");
    let t0 = Instant::now();
    sup.stop(T).await;
    until(&mock, "resumed after stop", |m| resumes_on(m, "SPOP") >= 1).await;
    let after = t0.elapsed();
    assert!(
        after < Duration::from_secs(3),
        "resumed {after:?} after stop"
    );
    // Popups opened after the stop are not claimed: the gate lets them run.
    attached(&mock, TEST, "SLATE", "LATE", Some("T1"), true);
    until(&mock, "late popup released", |m| {
        resumes_on(m, "SLATE") == 1 && detached(m).contains(&"SLATE".to_string())
    })
    .await;
    assert_eq!(methods(&mock, "SLATE"), [RESUME]);
}

#[tokio::test]
async fn a_dropped_supervisor_is_out_of_the_gate() {
    const TEST: &str = "dropped";
    let mock = mock(TEST).await;
    let conn = connect(&mock).await;
    let sup = supervise(&conn, TEST, "T1", SupervisorConfig::default()).await;
    drop(sup);
    attached(&mock, TEST, "SPOP", "POP", Some("T1"), true);
    until(&mock, "released by the gate", |m| {
        resumes_on(m, "SPOP") == 1 && detached(m) == ["SPOP"]
    })
    .await;
    assert_eq!(methods(&mock, "SPOP"), [RESUME]);
}

#[tokio::test]
async fn the_gate_resumes_a_claimed_popup_whose_owner_could_not() {
    const TEST: &str = "hold";
    let mock = mock(TEST).await;
    let conn = connect(&mock).await;
    let mut config = SupervisorConfig::default();
    config.setup_timeout = Duration::from_millis(200);
    let sup = supervise(&conn, TEST, "T1", config).await;
    // The owner's resume gets no reply (it gives up after 2 s); the gate's
    // hold (setup 0.2 s + resume 2 s + 1 s) then resumes it again.
    mock.once(RESUME, Action::Never);
    let t0 = Instant::now();
    attached(&mock, TEST, "SPOP", "POP", Some("T1"), true);
    until(&mock, "a second resume", |m| resumes_on(m, "SPOP") == 2).await;
    let after = t0.elapsed();
    assert!(
        after >= Duration::from_millis(3000) && after < Duration::from_secs(5),
        "the gate resumed after {after:?}"
    );
    assert!(detached(&mock).is_empty(), "the owner keeps its popup");
    assert_eq!(sup.snapshot().popups.len(), 1);
}

#[tokio::test]
async fn a_browser_that_refuses_the_gate_gets_the_old_path_and_nothing_is_claimed() {
    const TEST: &str = "refused";
    let mock = mock(TEST).await;
    mock.on_session(
        "Target.setAutoAttach",
        None,
        Action::Error {
            code: -32000,
            message: "Not allowed".into(),
        },
    );
    let conn = connect(&mock).await;
    let sup = supervise(&conn, TEST, "T1", SupervisorConfig::default()).await;
    assert_eq!(
        mock.received_method("Target.setDiscoverTargets").len(),
        1,
        "the fallback"
    );
    // Should a paused attach come anyway, it is not claimed and not left paused.
    attached(&mock, TEST, "SPOP", "POP", Some("T1"), true);
    until(&mock, "released", |m| detached(m) == ["SPOP"]).await;
    assert_eq!(methods(&mock, "SPOP"), [RESUME]);
    assert!(sup.snapshot().popups.is_empty());
    // A second supervisor on the connection does not ask again.
    let _b = supervise(&conn, TEST, "T2", SupervisorConfig::default()).await;
    assert_eq!(
        mock.received()
            .iter()
            .filter(|r| r.method == "Target.setAutoAttach" && r.session_id.is_none())
            .count(),
        1
    );
}

#[tokio::test]
async fn after_a_reconnect_the_gate_is_on_for_the_new_connection() {
    const TEST: &str = "reconnect";
    let mock = mock(TEST).await;
    let conn = connect(&mock).await;
    let mut config = SupervisorConfig::default();
    config.reconnect = ReconnectPolicy::default().initial_backoff(Duration::from_millis(20));
    let sup = supervise(&conn, TEST, "T1", config).await;
    drop(conn);
    mock.drop_connections();
    sup.wait_until(T, |v| v.active && v.generation == 2)
        .await
        .expect("reconnected");
    until(&mock, "the gate on the new connection", |m| {
        m.received()
            .iter()
            .filter(|r| r.method == "Target.setAutoAttach" && r.session_id.is_none())
            .count()
            == 2
    })
    .await;
    sup.wait_until(T, |v| v.frame_tree.top.is_some() || v.active)
        .await
        .expect("active");
    // Give the new connection's setup time to register our page as an opener.
    until(&mock, "set up again", |m| {
        m.received_method("Target.setDiscoverTargets").len() == 2
    })
    .await;
    attached(&mock, TEST, "SPOP", "POP", Some("T1"), true);
    sup.wait_until(T, |v| v.popups.len() == 1)
        .await
        .expect("claimed on the new connection");
    until(&mock, "resumed by its owner", |m| {
        resumes_on(m, "SPOP") == 1
    })
    .await;
    assert!(detached(&mock).is_empty());
}

#[tokio::test]
async fn another_connections_gate_waits_for_the_owner_instead_of_resuming_its_popup() {
    const TEST: &str = "cross";
    // One resume from any client releases a target that several clients
    // auto-attached paused: the gate of a second connection must not let
    // our popup run before we have set it up.
    let mock = mock(TEST).await;
    mock.on_session(
        "Page.enable",
        Some("SPOP"),
        Action::ReplyAfter(Duration::from_millis(500), json!({})),
    );
    let (c1, c2) = (connect(&mock).await, connect(&mock).await);
    let a = supervise(&c1, TEST, "T1", SupervisorConfig::default()).await;
    let _b = supervise(&c2, TEST, "T2", SupervisorConfig::default()).await;
    // Both connections get the paused attach (the mock sends to every client).
    attached(&mock, TEST, "SPOP", "POP", Some("T1"), true);
    a.wait_until(T, |v| v.popups.len() == 1)
        .await
        .expect("A's popup");
    until(&mock, "the second gate lets go", |m| {
        detached(m) == ["SPOP"]
    })
    .await;
    tokio::time::sleep(QUIET).await;
    let order: Vec<String> = mock
        .received()
        .into_iter()
        .filter(|r| {
            r.session_id.as_deref() == Some("SPOP")
                || r.params["sessionId"].as_str() == Some("SPOP")
        })
        .map(|r| r.method)
        .collect();
    let pos = |m: &str| order.iter().position(|x| x == m).unwrap_or(usize::MAX);
    assert_eq!(
        order[..5],
        [
            "Inspector.enable",
            "Page.enable",
            "Runtime.enable",
            "Target.setAutoAttach",
            RESUME,
        ],
        "set up, then resumed, by its owner on connection 1: {order:?}"
    );
    assert_eq!(
        order.iter().filter(|m| *m == RESUME).count(),
        1,
        "{order:?}"
    );
    assert!(
        pos("Target.detachFromTarget") > pos(RESUME),
        "connection 2's gate lets go only after the owner resumed: {order:?}"
    );
}
