//! The dialog bridge in the supervisor against the scripted CDP server: what
//! is installed where and when, the paused-request state machine, caps,
//! policies, `auto` mode and reconnects.

use bridge_script::{Bridge, MAX_PENDING_DIALOGS};
use cdp_mock::{Action, MockServer};
use cdp_transport::{ConnectOptions, Connection, TargetId};
use serde_json::{json, Value};
use std::time::Duration;
use supervisor::{
    BridgeMode, ClosedBy, DialogAction, DialogPath, DialogPolicy, ReconnectPolicy, Supervisor,
    SupervisorConfig, SupervisorView,
};

const T: Duration = Duration::from_secs(5);

fn frame(id: &str, parent: Option<&str>, url: &str) -> Value {
    let origin = url.split('/').take(3).collect::<Vec<_>>().join("/");
    let mut f = json!({"id": id, "loaderId": "L", "url": url, "securityOrigin": origin, "mimeType": "text/html"});
    if let Some(p) = parent {
        f["parentId"] = json!(p);
    }
    f
}

async fn start(config: SupervisorConfig) -> (MockServer, Supervisor) {
    let mock = MockServer::start().await;
    mock.on("Target.attachToTarget", json!({"sessionId": "PAGE"}));
    mock.on(
        "Target.getTargets",
        json!({"targetInfos": [{"targetId": "T1", "type": "page"}]}),
    );
    mock.on_session(
        "Page.getFrameTree",
        Some("PAGE"),
        Action::Reply(json!({"frameTree": {"frame": frame("MAIN", None, "http://a.test/")}})),
    );
    let conn = Connection::connect(&mock.ws_url(), ConnectOptions::default())
        .await
        .expect("connect");
    let sup = Supervisor::attach(conn, TargetId::new("T1"), config)
        .await
        .expect("attach");
    sup.wait_until(T, |v| v.frame_tree.top.is_some())
        .await
        .expect("frame tree bootstrapped");
    (mock, sup)
}

fn bridged() -> SupervisorConfig {
    SupervisorConfig::default().bridge(BridgeMode::On)
}

/// The supervisor's bridge, rebuilt from the token in the script it installed.
fn bridge_of(mock: &MockServer) -> Bridge {
    let sent = mock.received_method(bridge_script::ADD_SCRIPT_METHOD);
    let source = sent
        .first()
        .and_then(|r| r.params["source"].as_str())
        .expect("the script was installed")
        .to_string();
    let tail = source.rsplit("})('").next().expect("the call at the end");
    let token = tail.split('\'').next().expect("token literal");
    Bridge::with_token(token).expect("valid token")
}

fn paused(bridge: &Bridge, rid: &str, query: &str, frame_id: &str) -> Value {
    json!({
        "requestId": rid,
        "frameId": frame_id,
        "resourceType": "XHR",
        "request": {"url": format!("{}{query}", bridge.url_prefix()), "method": "GET", "headers": {}},
    })
}

fn snap(name: &str, v: &SupervisorView) {
    insta::with_settings!({sort_maps => true}, {
        insta::assert_yaml_snapshot!(name, v, {
            ".**.opened_at_ms" => "[ms]",
            ".**.closed_at_ms" => "[ms]",
            ".**.at_ms" => "[ms]",
        });
    });
}

fn methods_on(mock: &MockServer, sid: &str) -> Vec<String> {
    mock.received()
        .into_iter()
        .filter(|r| r.session_id.as_deref() == Some(sid))
        .map(|r| r.method)
        .collect()
}

fn attach_oopif(mock: &MockServer, sid: &str, tid: &str, paused: bool) {
    mock.event(
        "Target.attachedToTarget",
        json!({"sessionId": sid, "targetInfo": {"targetId": tid, "type": "iframe", "url": "http://b.test/x", "attached": true}, "waitingForDebugger": paused}),
        Some("PAGE"),
    );
}

#[tokio::test]
async fn bridge_off_installs_nothing_and_on_installs_on_page_and_oopif_before_resume() {
    let (mock, sup) = start(SupervisorConfig::default()).await;
    attach_oopif(&mock, "SX", "X", true);
    mock.wait_for("Runtime.runIfWaitingForDebugger", 1, T).await;
    for m in [
        bridge_script::FETCH_ENABLE_METHOD,
        bridge_script::ADD_SCRIPT_METHOD,
    ] {
        assert!(mock.received_method(m).is_empty(), "{m} with bridge off");
    }
    assert!(!sup.snapshot().bridge_active);

    let (mock, sup) = start(bridged()).await;
    assert!(sup.snapshot().bridge_active);
    let bridge = bridge_of(&mock);
    let page = methods_on(&mock, "PAGE");
    let pos = |v: &[String], m: &str| v.iter().position(|x| x == m).unwrap_or(usize::MAX);
    assert!(pos(&page, "Fetch.enable") < pos(&page, "Page.addScriptToEvaluateOnNewDocument"));
    let fe = mock.received_method("Fetch.enable");
    assert_eq!(
        fe[0].params,
        bridge.fetch_enable_params(),
        "only the bridge patterns"
    );
    assert_eq!(
        mock.received_method("Page.addScriptToEvaluateOnNewDocument")[0].params,
        bridge.add_script_params()
    );
    let evals = mock.received_method("Runtime.evaluate");
    assert_eq!(evals.len(), 1, "into the page's loaded document");
    assert_eq!(evals[0].params, bridge.evaluate_params());

    attach_oopif(&mock, "SX", "X", true);
    mock.wait_for("Runtime.runIfWaitingForDebugger", 1, T).await;
    let child = methods_on(&mock, "SX");
    let resume = pos(&child, "Runtime.runIfWaitingForDebugger");
    assert!(pos(&child, "Fetch.enable") < resume, "{child:?}");
    assert!(
        pos(&child, "Page.addScriptToEvaluateOnNewDocument") < resume,
        "{child:?}"
    );
    assert!(
        !child.contains(&"Runtime.evaluate".to_string()),
        "a paused target has no document to evaluate into: {child:?}"
    );
    // A worker gets no bridge (no Page domain), and is still resumed.
    mock.event(
        "Target.attachedToTarget",
        json!({"sessionId": "WK", "targetInfo": {"targetId": "W", "type": "worker", "url": ""}, "waitingForDebugger": true}),
        Some("PAGE"),
    );
    mock.wait_for("Runtime.runIfWaitingForDebugger", 2, T).await;
    assert_eq!(methods_on(&mock, "WK"), ["Runtime.runIfWaitingForDebugger"]);
}

#[tokio::test]
async fn paused_requests_become_dialogs_403s_preflights_or_continues() {
    let (mock, sup) = start(bridged()).await;
    let bridge = bridge_of(&mock);
    mock.event(
        "Fetch.requestPaused",
        paused(
            &bridge,
            "interception-1",
            "kind=prompt&message=Your%20name%3F&default=Ann",
            "MAIN",
        ),
        Some("PAGE"),
    );
    let d = sup.wait_for_dialog(T).await.expect("a bridge dialog");
    assert_eq!(
        (
            d.kind.as_str(),
            d.message.as_str(),
            d.default_prompt.as_deref()
        ),
        ("prompt", "Your name?", Some("Ann"))
    );
    assert_eq!(d.opened_via, DialogPath::Bridge);
    assert_eq!(d.url, "http://a.test/", "the frame's document URL");
    snap("bridge_dialog_pending", &sup.snapshot());

    // Forged (no token), a preflight with our token, not ours, malformed.
    let mut forged = paused(&bridge, "interception-2", "kind=alert&message=x", "MAIN");
    forged["request"]["url"] = json!(format!(
        "https://{}/dialog?kind=alert&message=x",
        bridge_script::BRIDGE_HOST
    ));
    let mut preflight = paused(&bridge, "interception-3", "kind=alert&message=x", "MAIN");
    preflight["request"]["method"] = json!("OPTIONS");
    let mut other = paused(&bridge, "interception-4", "", "MAIN");
    other["request"]["url"] = json!("http://a.test/app.js");
    for ev in [
        forged,
        preflight,
        other,
        json!({"requestId": "interception-5"}),
    ] {
        mock.event("Fetch.requestPaused", ev, Some("PAGE"));
    }
    let fulfils = mock.wait_for("Fetch.fulfillRequest", 2, T).await;
    let continues = mock.wait_for("Fetch.continueRequest", 2, T).await;
    assert_eq!(
        fulfils[0].params,
        bridge.fulfill_forbidden("interception-2")
    );
    assert_eq!(
        fulfils[1].params,
        bridge.fulfill_preflight("interception-3")
    );
    assert_eq!(
        continues
            .iter()
            .map(|r| r.params.clone())
            .collect::<Vec<_>>(),
        [
            json!({"requestId": "interception-4"}),
            json!({"requestId": "interception-5"})
        ]
    );
    let v = sup.snapshot();
    assert_eq!((v.pending_dialogs.len(), v.bridge_refused), (1, 1));

    // A native close event does not close a bridge dialog.
    mock.event(
        "Page.javascriptDialogClosed",
        json!({"result": false, "userInput": ""}),
        Some("PAGE"),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(sup.snapshot().pending_dialogs.len(), 1);

    let c = sup
        .respond(DialogAction::Accept, Some("Bob"), None, T)
        .await
        .expect("answer");
    assert_eq!(
        (c.closed_by, c.accepted, c.user_input.as_deref()),
        (ClosedBy::Agent, Some(true), Some("Bob"))
    );
    let f = mock.wait_for("Fetch.fulfillRequest", 3, T).await;
    assert_eq!(f[2].session_id.as_deref(), Some("PAGE"));
    assert_eq!(
        f[2].params,
        bridge.fulfill_answer("interception-1", true, Some("Bob"))
    );
    assert!(
        mock.received_method("Page.handleJavaScriptDialog")
            .is_empty(),
        "never answered natively"
    );
    snap("bridge_dialog_answered", &sup.snapshot());
}

#[tokio::test]
async fn an_oopif_bridge_dialog_is_answered_on_the_oopif_session() {
    let (mock, sup) = start(bridged()).await;
    let bridge = bridge_of(&mock);
    attach_oopif(&mock, "SX", "X", false);
    sup.wait_until(T, |v| v.frame_tree.children.iter().any(|f| f.is_oopif))
        .await
        .expect("oopif");
    mock.event(
        "Fetch.requestPaused",
        paused(&bridge, "ix-1", "kind=confirm&message=ok%3F", "X"),
        Some("SX"),
    );
    let d = sup.wait_for_dialog(T).await.expect("dialog");
    assert_eq!(d.frame_id.as_ref().map(|f| f.as_str()), Some("X"));
    assert_eq!(d.session_id.as_ref().map(|s| s.as_str()), Some("SX"));
    assert_eq!(d.target_id.as_str(), "T1");
    sup.respond(DialogAction::Dismiss, None, None, T)
        .await
        .expect("answer");
    let f = mock.wait_for("Fetch.fulfillRequest", 1, T).await;
    assert_eq!(f[0].session_id.as_deref(), Some("SX"));
    assert_eq!(f[0].params, bridge.fulfill_answer("ix-1", false, None));

    // The OOPIF session goes away with a dialog pending: its request is dead.
    mock.event(
        "Fetch.requestPaused",
        paused(&bridge, "ix-2", "kind=alert&message=bye", "X"),
        Some("SX"),
    );
    sup.wait_for_dialog(T).await.expect("second");
    mock.event(
        "Target.detachedFromTarget",
        json!({"sessionId": "SX", "targetId": "X"}),
        Some("PAGE"),
    );
    let v = sup
        .wait_until(T, |v| v.pending_dialogs.is_empty())
        .await
        .expect("retired");
    assert_eq!(
        v.recent_dialogs.last().map(|r| r.closed_by),
        Some(ClosedBy::Remote)
    );
}

#[tokio::test]
async fn over_the_cap_bridge_dialogs_are_dismissed_at_once_and_recorded() {
    let (mock, sup) = start(bridged()).await;
    let bridge = bridge_of(&mock);
    let extra = 8;
    for i in 0..MAX_PENDING_DIALOGS + extra {
        mock.event(
            "Fetch.requestPaused",
            paused(
                &bridge,
                &format!("r-{i}"),
                &format!("kind=alert&message=m{i}"),
                "MAIN",
            ),
            Some("PAGE"),
        );
    }
    let f = mock.wait_for("Fetch.fulfillRequest", extra, T).await;
    let v = sup.snapshot();
    assert_eq!(v.pending_dialogs.len(), MAX_PENDING_DIALOGS);
    for (i, r) in f.iter().enumerate() {
        let rid = format!("r-{}", MAX_PENDING_DIALOGS + i);
        assert_eq!(r.params, bridge.fulfill_answer(&rid, false, None));
    }
    assert_eq!(v.recent_dialogs.len(), extra);
    assert!(v
        .recent_dialogs
        .iter()
        .all(|r| r.closed_by == ClosedBy::AutoPolicy && r.accepted == Some(false)));
    // Native dialogs do not count against the bridge cap.
    mock.event(
        "Page.javascriptDialogOpening",
        json!({"type": "alert", "message": "native", "url": "http://a.test/"}),
        Some("PAGE"),
    );
    sup.wait_until(T, |v| v.pending_dialogs.len() == MAX_PENDING_DIALOGS + 1)
        .await
        .expect("native one pending too");
}

#[tokio::test]
async fn policies_and_the_watchdog_answer_bridge_dialogs() {
    for (policy, accept, text) in [
        (DialogPolicy::AutoDismiss, false, None),
        (DialogPolicy::AutoAccept, true, Some("dflt")),
    ] {
        let (mock, sup) = start(bridged().policy(policy)).await;
        let bridge = bridge_of(&mock);
        mock.event(
            "Fetch.requestPaused",
            paused(&bridge, "p-1", "kind=prompt&message=p&default=dflt", "MAIN"),
            Some("PAGE"),
        );
        let v = sup
            .wait_until(T, |v| v.recent_dialogs.len() == 1)
            .await
            .expect("answered");
        assert_eq!(v.recent_dialogs[0].closed_by, ClosedBy::AutoPolicy);
        let f = mock.wait_for("Fetch.fulfillRequest", 1, T).await;
        assert_eq!(f[0].params, bridge.fulfill_answer("p-1", accept, text));
    }
    let (mock, sup) = start(bridged().dialog_timeout(Duration::from_millis(200))).await;
    let bridge = bridge_of(&mock);
    mock.event(
        "Fetch.requestPaused",
        paused(&bridge, "w-1", "kind=confirm&message=c", "MAIN"),
        Some("PAGE"),
    );
    let v = sup
        .wait_until(T, |v| v.recent_dialogs.len() == 1)
        .await
        .expect("watchdog");
    assert_eq!(v.recent_dialogs[0].closed_by, ClosedBy::Watchdog);
    let f = mock.wait_for("Fetch.fulfillRequest", 1, T).await;
    assert_eq!(f[0].params, bridge.fulfill_answer("w-1", false, None));
}

#[tokio::test]
async fn a_dead_interception_id_retires_the_dialog_as_remote() {
    let (mock, sup) = start(bridged()).await;
    let bridge = bridge_of(&mock);
    mock.on_action(
        "Fetch.fulfillRequest",
        Action::Error {
            code: -32602,
            message: "Invalid InterceptionId.".into(),
        },
    );
    mock.event(
        "Fetch.requestPaused",
        paused(&bridge, "gone-1", "kind=alert&message=a", "MAIN"),
        Some("PAGE"),
    );
    sup.wait_for_dialog(T).await.expect("dialog");
    let err = sup
        .respond(DialogAction::Accept, None, None, T)
        .await
        .expect_err("dead request");
    assert_eq!(err.code(), "answer_failed");
    let v = sup.snapshot();
    assert!(v.pending_dialogs.is_empty());
    assert_eq!(v.recent_dialogs[0].closed_by, ClosedBy::Remote);
}

#[tokio::test]
async fn after_a_reconnect_old_paused_requests_are_dropped_as_remote_never_answered() {
    let mut config = bridged();
    config.reconnect = ReconnectPolicy::default().initial_backoff(Duration::from_millis(20));
    let (mock, sup) = start(config).await;
    let bridge = bridge_of(&mock);
    mock.event(
        "Fetch.requestPaused",
        paused(&bridge, "old-1", "kind=prompt&message=lost", "MAIN"),
        Some("PAGE"),
    );
    let d = sup.wait_for_dialog(T).await.expect("dialog");
    mock.drop_connections();
    let v = sup
        .wait_until(T, |v| {
            v.active && v.generation == 2 && v.bridge_active && v.frame_tree.top.is_some()
        })
        .await
        .expect("reconnected, bridge re-installed");
    let r = v
        .recent_dialogs
        .iter()
        .find(|r| r.dialog.id == d.id)
        .expect("recorded");
    assert_eq!((r.closed_by, r.accepted), (ClosedBy::Remote, None));
    assert!(v.pending_dialogs.is_empty());
    let err = sup
        .respond(DialogAction::Accept, Some("late"), Some(&d.id), T)
        .await
        .expect_err("no longer pending");
    assert_eq!(err.code(), "unknown_dialog");
    assert!(
        mock.received_method("Fetch.fulfillRequest").is_empty(),
        "the dead request was never answered"
    );
    assert_eq!(mock.received_method("Fetch.enable").len(), 2);
    snap("bridge_reconnected", &v);
}

#[tokio::test]
async fn auto_switches_on_only_for_a_quick_remote_close() {
    let config = SupervisorConfig::default().bridge(BridgeMode::Auto);
    let (mock, sup) = start(config).await;
    attach_oopif(&mock, "SX", "X", false);
    sup.wait_until(T, |v| v.frame_tree.children.iter().any(|f| f.is_oopif))
        .await
        .expect("oopif");
    assert!(mock.received_method("Fetch.enable").is_empty());
    // Closed by someone else, but slowly (a person, another tool): stays off.
    mock.event(
        "Page.javascriptDialogOpening",
        json!({"type": "alert", "message": "slow", "url": "http://a.test/"}),
        Some("PAGE"),
    );
    sup.wait_for_dialog(T).await.expect("dialog");
    tokio::time::sleep(Duration::from_millis(150)).await;
    mock.event(
        "Page.javascriptDialogClosed",
        json!({"result": false, "userInput": ""}),
        Some("PAGE"),
    );
    sup.wait_until(T, |v| v.recent_dialogs.len() == 1)
        .await
        .expect("closed");
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(mock.received_method("Fetch.enable").is_empty());
    assert!(!sup.snapshot().bridge_active);
    // Answered by us: not a proxy, stays off.
    mock.event(
        "Page.javascriptDialogOpening",
        json!({"type": "alert", "message": "ours", "url": "http://a.test/"}),
        Some("PAGE"),
    );
    sup.wait_for_dialog(T).await.expect("dialog");
    sup.respond(DialogAction::Accept, None, None, T)
        .await
        .expect("answer");
    mock.event(
        "Page.javascriptDialogClosed",
        json!({"result": true, "userInput": ""}),
        Some("PAGE"),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(mock.received_method("Fetch.enable").is_empty());
    // Closed by someone else at once: a dismissing proxy. On for every session.
    mock.event(
        "Page.javascriptDialogOpening",
        json!({"type": "prompt", "message": "quick", "url": "http://a.test/"}),
        Some("PAGE"),
    );
    mock.event(
        "Page.javascriptDialogClosed",
        json!({"result": false, "userInput": ""}),
        Some("PAGE"),
    );
    sup.wait_until(T, |v| v.bridge_active)
        .await
        .expect("switched on");
    let fe = mock.wait_for("Fetch.enable", 2, T).await;
    let mut sids: Vec<_> = fe.iter().filter_map(|r| r.session_id.clone()).collect();
    sids.sort();
    assert_eq!(sids, ["PAGE", "SX"]);
    mock.wait_for("Runtime.evaluate", 2, T).await;
    // A session attached later gets it during its setup.
    attach_oopif(&mock, "SY", "Y", true);
    mock.wait_for("Runtime.runIfWaitingForDebugger", 1, T).await;
    let y = methods_on(&mock, "SY");
    assert!(y.contains(&"Fetch.enable".to_string()), "{y:?}");
}
