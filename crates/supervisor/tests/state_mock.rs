//! The supervisor's state machine against the scripted CDP server: event
//! orders, swap and transient detaches, dialogs, crashes and reconnects.

use cdp_mock::{Action, MockServer};
use cdp_transport::{ConnectOptions, Connection, TargetId};
use serde_json::{json, Value};
use std::time::Duration;
use supervisor::{
    BridgeMode, ClosedBy, DialogAction, DialogPolicy, Error, ReconnectPolicy, Supervisor,
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
    start_with(config, |_| {}).await
}

/// [`start`], with `prep` scripting the mock before the supervisor connects.
async fn start_with(
    config: SupervisorConfig,
    prep: impl FnOnce(&MockServer),
) -> (MockServer, Supervisor) {
    let mock = MockServer::start().await;
    prep(&mock);
    mock.on("Target.attachToTarget", json!({"sessionId": "PAGE"}));
    mock.on(
        "Target.getTargets",
        json!({"targetInfos": [{"targetId": "T1", "type": "page"}]}),
    );
    mock.on_session(
        "Page.getFrameTree",
        Some("PAGE"),
        Action::Reply(json!({"frameTree": {"frame": frame("MAIN", None, "http://a.test/"), "childFrames": [{"frame": frame("SAME", Some("MAIN"), "http://a.test/same")}]}})),
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

fn page_event(mock: &MockServer, method: &str, params: Value) {
    mock.event(method, params, Some("PAGE"));
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

#[tokio::test]
async fn page_setup_enables_domains_and_recursive_paused_auto_attach() {
    let (mock, sup) = start(SupervisorConfig::default()).await;
    let got: Vec<(String, Option<String>)> = mock
        .received()
        .into_iter()
        .map(|r| (r.method, r.session_id))
        .collect();
    for m in [
        "Inspector.enable",
        "Page.enable",
        "Runtime.enable",
        "Target.setAutoAttach",
        "Page.getFrameTree",
    ] {
        assert!(
            got.contains(&(m.to_string(), Some("PAGE".into()))),
            "{m} on the page session: {got:?}"
        );
    }
    assert!(got.contains(&("Target.setDiscoverTargets".into(), None)));
    let aa = mock.received_method("Target.setAutoAttach");
    assert_eq!(
        aa[0].params,
        json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true})
    );
    snap("bootstrap", &sup.snapshot());
}

#[tokio::test]
async fn oopif_swap_attach_then_transient_detach_keeps_the_frame() {
    let (mock, sup) = start(SupervisorConfig::default()).await;
    mock.on_session(
        "Page.getFrameTree",
        Some("SX"),
        Action::Reply(json!({"frameTree": {"frame": frame("X", Some("MAIN"), "http://b.test/x"), "childFrames": [{"frame": frame("XIN", Some("X"), "http://b.test/in")}]}})),
    );
    page_event(
        &mock,
        "Page.frameAttached",
        json!({"frameId": "X", "parentFrameId": "MAIN"}),
    );
    page_event(
        &mock,
        "Page.frameDetached",
        json!({"frameId": "X", "reason": "swap"}),
    );
    page_event(
        &mock,
        "Target.attachedToTarget",
        json!({"sessionId": "SX", "targetInfo": {"targetId": "X", "type": "iframe", "url": "http://b.test/x", "attached": true}, "waitingForDebugger": true}),
    );
    let v = sup
        .wait_until(T, |v| {
            v.frame_tree
                .children
                .iter()
                .any(|f| f.frame_id.as_str() == "XIN")
        })
        .await
        .expect("OOPIF and its inner frame");
    let resumed = mock.wait_for("Runtime.runIfWaitingForDebugger", 1, T).await;
    assert_eq!(resumed[0].session_id.as_deref(), Some("SX"));
    let order: Vec<String> = mock
        .received()
        .into_iter()
        .filter(|r| r.session_id.as_deref() == Some("SX"))
        .map(|r| r.method)
        .collect();
    let pos = |m: &str| order.iter().position(|x| x == m).unwrap_or(usize::MAX);
    assert!(
        pos("Page.enable") < pos("Runtime.runIfWaitingForDebugger"),
        "set up before resume: {order:?}"
    );
    assert!(
        pos("Target.setAutoAttach") < pos("Runtime.runIfWaitingForDebugger"),
        "recursive: {order:?}"
    );
    snap("oopif_attached", &v);
    assert!(sup.route(&"X".into()).expect("route").is_oopif);
    let err = sup.route(&"SAME".into()).expect_err("same-process");
    assert_eq!(err.code(), "same_process_frame");

    // A transient detach: the frame stays, without a session; its inner frames go.
    page_event(
        &mock,
        "Target.detachedFromTarget",
        json!({"sessionId": "SX", "targetId": "X"}),
    );
    let v = sup
        .wait_until(T, |v| {
            v.frame_tree
                .children
                .iter()
                .any(|f| f.frame_id.as_str() == "X" && !f.is_oopif)
        })
        .await
        .expect("kept");
    snap("oopif_transient_detach", &v);
    // A real removal.
    page_event(
        &mock,
        "Page.frameDetached",
        json!({"frameId": "X", "reason": "remove"}),
    );
    let v = sup
        .wait_until(T, |v| {
            !v.frame_tree
                .children
                .iter()
                .any(|f| f.frame_id.as_str() == "X")
        })
        .await
        .expect("removed");
    assert_eq!(v.frame_tree.children.len(), 1);
}

#[tokio::test]
async fn attach_before_swap_order_gives_the_same_tree() {
    let (mock, sup) = start(SupervisorConfig::default()).await;
    mock.on_session(
        "Page.getFrameTree",
        Some("SX"),
        Action::Reply(json!({"frameTree": {"frame": frame("X", Some("MAIN"), "http://b.test/x")}})),
    );
    page_event(
        &mock,
        "Page.frameAttached",
        json!({"frameId": "X", "parentFrameId": "MAIN"}),
    );
    page_event(
        &mock,
        "Target.attachedToTarget",
        json!({"sessionId": "SX", "targetInfo": {"targetId": "X", "type": "iframe", "url": "http://b.test/x"}, "waitingForDebugger": true}),
    );
    page_event(
        &mock,
        "Page.frameDetached",
        json!({"frameId": "X", "reason": "swap"}),
    );
    let v = sup
        .wait_until(T, |v| {
            v.frame_tree
                .children
                .iter()
                .any(|f| f.is_oopif && f.url == "http://b.test/x" && f.origin == "http://b.test")
        })
        .await
        .expect("oopif");
    snap("attach_before_swap", &v);
}

#[tokio::test]
async fn every_paused_target_is_resumed_even_when_setup_hangs() {
    let mut config = SupervisorConfig::default();
    config.setup_timeout = Duration::from_millis(300);
    let (mock, _sup) = start(config).await;
    mock.on_session("Page.enable", Some("SHANG"), Action::Never);
    mock.on_session(
        "Runtime.enable",
        Some("SFAIL"),
        Action::Error {
            code: -32000,
            message: "nope".into(),
        },
    );
    for (sid, ty) in [
        ("SHANG", "iframe"),
        ("SFAIL", "iframe"),
        ("SW", "service_worker"),
        ("WK", "worker"),
        ("PP", "page"),
    ] {
        page_event(
            &mock,
            "Target.attachedToTarget",
            json!({"sessionId": sid, "targetInfo": {"targetId": format!("t-{sid}"), "type": ty, "url": ""}, "waitingForDebugger": true}),
        );
    }
    let got = mock
        .wait_for("Runtime.runIfWaitingForDebugger", 5, Duration::from_secs(3))
        .await;
    let mut sids: Vec<String> = got.into_iter().filter_map(|r| r.session_id).collect();
    sids.sort();
    assert_eq!(sids, ["PP", "SFAIL", "SHANG", "SW", "WK"]);
}

#[tokio::test]
async fn dialog_orders_remote_close_ambiguity_and_unknown_ids() {
    let (mock, sup) = start(SupervisorConfig::default()).await;
    page_event(
        &mock,
        "Page.javascriptDialogOpening",
        json!({"type": "alert", "message": "one", "url": "http://a.test/", "frameId": "MAIN", "hasBrowserHandler": true}),
    );
    sup.wait_for_dialog(T).await.expect("d-1");
    // Closed by nobody here: remote.
    page_event(
        &mock,
        "Page.javascriptDialogClosed",
        json!({"result": true, "userInput": ""}),
    );
    sup.wait_until(T, |v| v.recent_dialogs.len() == 1)
        .await
        .expect("closed");
    let err = sup
        .respond(DialogAction::Accept, None, None, T)
        .await
        .expect_err("nothing pending");
    assert!(matches!(err, Error::NoDialog { .. }), "{err}");
    assert!(err.to_string().starts_with("no_dialog"), "{err}");

    page_event(
        &mock,
        "Page.javascriptDialogOpening",
        json!({"type": "confirm", "message": "two", "url": "http://a.test/", "frameId": "SAME"}),
    );
    page_event(
        &mock,
        "Page.javascriptDialogOpening",
        json!({"type": "prompt", "message": "three", "defaultPrompt": "dflt", "url": "http://a.test/"}),
    );
    sup.wait_until(T, |v| v.pending_dialogs.len() == 2)
        .await
        .expect("two pending");
    let err = sup
        .respond(DialogAction::Accept, None, None, T)
        .await
        .expect_err("ambiguous");
    assert!(
        matches!(&err, Error::AmbiguousDialog { candidates } if candidates == &["d-2", "d-3"]),
        "{err}"
    );
    assert!(err.to_string().contains("d-2, d-3"), "{err}");
    let err = sup
        .respond(DialogAction::Accept, None, Some("d-1"), T)
        .await
        .expect_err("old id");
    assert!(
        matches!(
            &err,
            Error::UnknownDialog {
                closed_by: Some(ClosedBy::Remote),
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("d-2, d-3"),
        "names the known ids: {err}"
    );
    let err = sup
        .respond(DialogAction::Accept, None, Some("d-77"), T)
        .await
        .expect_err("unknown id");
    assert_eq!(err.code(), "unknown_dialog");

    let c = sup
        .respond(DialogAction::Accept, Some("typed"), Some("d-3"), T)
        .await
        .expect("answer d-3");
    assert_eq!(
        (c.closed_by, c.user_input.as_deref()),
        (ClosedBy::Agent, Some("typed"))
    );
    let h = mock.received_method("Page.handleJavaScriptDialog");
    assert_eq!(h[0].params, json!({"accept": true, "promptText": "typed"}));
    assert_eq!(h[0].session_id.as_deref(), Some("PAGE"));
    // The close event that follows our answer does not close the other dialog.
    page_event(
        &mock,
        "Page.javascriptDialogClosed",
        json!({"result": true, "userInput": "typed"}),
    );
    tokio::time::sleep(Duration::from_millis(100)).await;
    let v = sup.snapshot();
    assert_eq!(v.pending_dialogs.len(), 1, "d-2 still pending");
    snap("dialogs", &v);
}

#[tokio::test]
async fn oopif_dialog_is_answered_on_the_page_session() {
    let (mock, sup) = start(SupervisorConfig::default()).await;
    page_event(
        &mock,
        "Target.attachedToTarget",
        json!({"sessionId": "SX", "targetInfo": {"targetId": "X", "type": "iframe", "url": "http://b.test/"}, "waitingForDebugger": false}),
    );
    sup.wait_until(T, |v| v.frame_tree.children.iter().any(|f| f.is_oopif))
        .await
        .expect("oopif");
    mock.event(
        "Page.javascriptDialogOpening",
        json!({"type": "confirm", "message": "from X", "url": "http://b.test/", "frameId": "X"}),
        Some("SX"),
    );
    let d = sup.wait_for_dialog(T).await.expect("dialog");
    assert_eq!(d.frame_id.as_ref().map(|f| f.as_str()), Some("X"));
    sup.respond(DialogAction::Dismiss, None, None, T)
        .await
        .expect("answer");
    let h = mock.received_method("Page.handleJavaScriptDialog");
    assert_eq!(h[0].session_id.as_deref(), Some("PAGE"));
    assert_eq!(h[0].params, json!({"accept": false}));
}

#[tokio::test]
async fn no_dialog_is_showing_reply_retires_the_dialog_as_remote() {
    let (mock, sup) = start(SupervisorConfig::default()).await;
    mock.on_action(
        "Page.handleJavaScriptDialog",
        Action::Error {
            code: -32602,
            message: "No dialog is showing".into(),
        },
    );
    page_event(
        &mock,
        "Page.javascriptDialogOpening",
        json!({"type": "alert", "message": "gone", "url": "http://a.test/"}),
    );
    sup.wait_for_dialog(T).await.expect("dialog");
    let err = sup
        .respond(DialogAction::Accept, None, None, T)
        .await
        .expect_err("no dialog showing");
    assert!(err.to_string().contains("No dialog is showing"), "{err}");
    let v = sup.snapshot();
    assert!(v.pending_dialogs.is_empty());
    assert_eq!(v.recent_dialogs[0].closed_by, ClosedBy::Remote);
}

#[tokio::test]
async fn auto_policies_and_watchdog_answer_with_their_attribution() {
    for (policy, accept) in [
        (DialogPolicy::AutoDismiss, false),
        (DialogPolicy::AutoAccept, true),
    ] {
        let (mock, sup) = start(SupervisorConfig::default().policy(policy)).await;
        page_event(
            &mock,
            "Page.javascriptDialogOpening",
            json!({"type": "prompt", "message": "p", "defaultPrompt": "dflt", "url": "http://a.test/"}),
        );
        let v = sup
            .wait_until(T, |v| v.recent_dialogs.len() == 1)
            .await
            .expect("answered");
        assert_eq!(v.recent_dialogs[0].closed_by, ClosedBy::AutoPolicy);
        let h = mock.received_method("Page.handleJavaScriptDialog");
        assert_eq!(h[0].params["accept"], json!(accept));
        if accept {
            assert_eq!(h[0].params["promptText"], "dflt");
        }
    }
    let (mock, sup) =
        start(SupervisorConfig::default().dialog_timeout(Duration::from_millis(200))).await;
    page_event(
        &mock,
        "Page.javascriptDialogOpening",
        json!({"type": "alert", "message": "a", "url": "http://a.test/"}),
    );
    let v = sup
        .wait_until(T, |v| v.recent_dialogs.len() == 1)
        .await
        .expect("watchdog");
    assert_eq!(v.recent_dialogs[0].closed_by, ClosedBy::Watchdog);
    assert_eq!(
        mock.received_method("Page.handleJavaScriptDialog")[0].params,
        json!({"accept": false})
    );
}

#[tokio::test]
async fn crash_marks_inactive_retires_dialogs_and_navigation_revives() {
    let (mock, sup) = start(SupervisorConfig::default()).await;
    page_event(
        &mock,
        "Page.javascriptDialogOpening",
        json!({"type": "alert", "message": "a", "url": "http://a.test/"}),
    );
    sup.wait_for_dialog(T).await.expect("dialog");
    page_event(&mock, "Inspector.targetCrashed", json!({}));
    let v = sup.wait_until(T, |v| !v.active).await.expect("inactive");
    snap("crashed", &v);
    page_event(
        &mock,
        "Page.frameNavigated",
        json!({"frame": frame("MAIN", None, "http://a.test/again"), "type": "Navigation"}),
    );
    let v = sup.wait_until(T, |v| v.active).await.expect("revived");
    assert_eq!(
        v.frame_tree.top.as_ref().map(|t| t.url.as_str()),
        Some("http://a.test/again")
    );
    assert!(
        v.frame_tree.children.is_empty(),
        "the old document's subframes are gone"
    );
}

#[tokio::test]
async fn socket_loss_retires_dialogs_and_reconnects_to_the_same_target() {
    let mut config = SupervisorConfig::default();
    config.reconnect = ReconnectPolicy::default().initial_backoff(Duration::from_millis(20));
    let (mock, sup) = start(config).await;
    page_event(
        &mock,
        "Page.javascriptDialogOpening",
        json!({"type": "alert", "message": "lost", "url": "http://a.test/"}),
    );
    sup.wait_for_dialog(T).await.expect("dialog");
    let mut changes = sup.changes();
    mock.drop_connections();
    let mut saw_inactive = None;
    let v = tokio::time::timeout(T, async {
        loop {
            let v = changes.borrow_and_update().clone();
            if !v.active && saw_inactive.is_none() {
                saw_inactive = Some(v.clone());
            }
            if v.active && v.generation == 2 && v.frame_tree.top.is_some() {
                return v;
            }
            changes.changed().await.expect("changes");
        }
    })
    .await
    .expect("reconnected");
    let inactive = saw_inactive.expect("inactive seen between");
    assert!(
        inactive
            .reason
            .as_deref()
            .is_some_and(|r| r.starts_with("connection closed")),
        "{:?}",
        inactive.reason
    );
    assert_eq!(
        mock.handshakes().len(),
        2,
        "a new connection to the same endpoint"
    );
    assert_eq!(
        mock.received_method("Target.attachToTarget")
            .last()
            .map(|r| r.params["targetId"].clone()),
        Some(json!("T1"))
    );
    snap("reconnected", &v);
}

#[tokio::test]
async fn reconnect_gives_up_after_bounded_consecutive_failures() {
    let mut config = SupervisorConfig::default();
    config.reconnect = ReconnectPolicy::default()
        .initial_backoff(Duration::from_millis(10))
        .max_consecutive_failures(3);
    let (mock, sup) = start(config).await;
    mock.on("Target.getTargets", json!({"targetInfos": []}));
    mock.on_action(
        "Target.attachToTarget",
        Action::Error {
            code: -32000,
            message: "no target".into(),
        },
    );
    mock.drop_connections();
    let v = sup
        .wait_until(T, |v| {
            v.reason
                .as_deref()
                .is_some_and(|r| r.contains("no longer exists"))
        })
        .await
        .expect("gave up");
    assert!(!v.active);

    let (mock, sup) = start(config_failing()).await;
    drop(mock); // nothing accepts any more: every reconnect attempt fails
    let v = sup
        .wait_until(T, |v| {
            v.reason
                .as_deref()
                .is_some_and(|r| r.contains("gave up after 2"))
        })
        .await;
    assert!(v.is_ok(), "{:?}", sup.snapshot().reason);
}

fn config_failing() -> SupervisorConfig {
    let mut config = SupervisorConfig::default();
    config.reconnect = ReconnectPolicy::default()
        .initial_backoff(Duration::from_millis(10))
        .max_consecutive_failures(2);
    config.connect_options = ConnectOptions::default().connect_timeout(Duration::from_millis(500));
    config
}

#[tokio::test]
async fn target_destroyed_is_final() {
    let (mock, sup) = start(SupervisorConfig::default()).await;
    mock.event("Target.targetDestroyed", json!({"targetId": "T1"}), None);
    let v = sup.wait_until(T, |v| !v.active).await.expect("inactive");
    assert_eq!(v.reason.as_deref(), Some("target destroyed"));
}

/// Without the target gate (a browser that refuses browser-level
/// `Target.setAutoAttach`), popups are found by `Target.targetCreated` and
/// attached after creation. The gate's own cases are in `gate_mock.rs`.
#[tokio::test]
async fn without_the_gate_a_popup_opened_by_the_tab_is_attached_and_its_dialogs_handled() {
    let (mock, sup) = start_with(SupervisorConfig::default(), |mock| {
        mock.on_session(
            "Target.setAutoAttach",
            None,
            Action::Error {
                code: -32000,
                message: "Not allowed".into(),
            },
        );
    })
    .await;
    mock.on_fn("Target.attachToTarget", |r| {
        (r.params["targetId"] == "POP").then(|| {
            Action::EventsThenReply(
                vec![(
                    "Target.attachedToTarget".into(),
                    json!({"sessionId": "SPOP", "targetInfo": {"targetId": "POP", "type": "page", "url": "http://a.test/pop", "openerId": "T1"}, "waitingForDebugger": false}),
                    None,
                )],
                json!({"sessionId": "SPOP"}),
            )
        })
    });
    mock.event(
        "Target.targetCreated",
        json!({"targetInfo": {"targetId": "OTHER", "type": "page", "url": "", "attached": false}}),
        None,
    );
    mock.event("Target.targetCreated", json!({"targetInfo": {"targetId": "POP", "type": "page", "url": "", "openerId": "T1", "attached": false}}), None);
    sup.wait_until(T, |v| v.popups.len() == 1)
        .await
        .expect("popup attached");
    assert_eq!(
        mock.received_method("Target.attachToTarget")
            .iter()
            .filter(|r| r.params["targetId"] == "OTHER")
            .count(),
        0
    );
    mock.wait_for("Page.enable", 2, T).await;
    mock.event(
        "Page.javascriptDialogOpening",
        json!({"type": "alert", "message": "pop", "url": "http://a.test/pop"}),
        Some("SPOP"),
    );
    let d = sup.wait_for_dialog(T).await.expect("popup dialog");
    assert_eq!(d.target_id.as_str(), "POP");
    sup.respond(DialogAction::Accept, None, None, T)
        .await
        .expect("answer");
    assert_eq!(
        mock.received_method("Page.handleJavaScriptDialog")[0]
            .session_id
            .as_deref(),
        Some("SPOP")
    );
    mock.event(
        "Target.detachedFromTarget",
        json!({"sessionId": "SPOP", "targetId": "POP"}),
        None,
    );
    sup.wait_until(T, |v| v.popups.is_empty())
        .await
        .expect("popup gone");
}

#[tokio::test]
async fn console_ring_keeps_the_last_fifty() {
    let (mock, sup) = start(SupervisorConfig::default()).await;
    for i in 0..120 {
        page_event(
            &mock,
            "Runtime.consoleAPICalled",
            json!({"type": "error", "args": [{"type": "string", "value": format!("e{i}")}], "executionContextId": 1, "timestamp": 1.0}),
        );
    }
    page_event(
        &mock,
        "Runtime.consoleAPICalled",
        json!({"type": "log", "args": [{"type": "string", "value": "not an error"}]}),
    );
    page_event(
        &mock,
        "Runtime.exceptionThrown",
        json!({"timestamp": 1.0, "exceptionDetails": {"text": "Uncaught", "exception": {"description": "TypeError: x"}}}),
    );
    let v = sup
        .wait_until(T, |v| {
            v.console_errors
                .last()
                .is_some_and(|e| e.kind == "exception")
        })
        .await
        .expect("errors");
    assert_eq!(v.console_errors.len(), 50);
    assert_eq!(v.console_errors[0].text, "e71");
    assert_eq!(v.console_errors[49].text, "TypeError: x");
}

#[test]
fn bad_names_are_typed_errors() {
    let e = "sometimes".parse::<DialogPolicy>().expect_err("policy");
    assert!(matches!(&e, Error::InvalidPolicy { given } if given == "sometimes"));
    assert!(e.to_string().contains("must_respond"), "{e}");
    assert!(SupervisorConfig::default()
        .with_policy_name("auto_dismis")
        .is_err());
    assert_eq!(
        "auto_accept".parse::<DialogPolicy>().expect("ok"),
        DialogPolicy::AutoAccept
    );
    let e = "maybe".parse::<DialogAction>().expect_err("action");
    assert_eq!(e.code(), "invalid_action");
    assert!(e.to_string().contains("accept or dismiss"), "{e}");
    assert!("always".parse::<BridgeMode>().is_err());
    assert_eq!("auto".parse::<BridgeMode>().expect("ok"), BridgeMode::Auto);
}

/// A waker that, when woken, reads the supervisor's view at that very
/// moment: a broadcast `send` wakes a waiting receiver inline, so this sees
/// the view as it was when the event went out.
struct ViewAtWake {
    sup: Supervisor,
    pending_seen: std::sync::Mutex<Vec<usize>>,
}

impl std::task::Wake for ViewAtWake {
    fn wake(self: std::sync::Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &std::sync::Arc<Self>) {
        let n = self.sup.snapshot().pending_dialogs.len();
        self.pending_seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(n);
    }
}

#[tokio::test]
async fn a_dialog_event_is_sent_only_once_the_view_holds_the_dialog() {
    // A caller woken by `DialogEvent::Opened` must find the dialog in
    // `snapshot()`: the view is stored before the event is broadcast.
    use std::future::Future;
    let (mock, sup) = start(SupervisorConfig::default()).await;
    let probe = std::sync::Arc::new(ViewAtWake {
        sup: sup.clone(),
        pending_seen: Default::default(),
    });
    let waker = std::task::Waker::from(probe.clone());
    let mut cx = std::task::Context::from_waker(&waker);
    let mut rx = sup.dialog_events();
    let mut recv = Box::pin(rx.recv());
    assert!(recv.as_mut().poll(&mut cx).is_pending());
    page_event(
        &mock,
        "Page.javascriptDialogOpening",
        json!({"type": "alert", "message": "m", "url": "http://a.test/"}),
    );
    sup.wait_for_dialog(T).await.expect("dialog");
    let seen = probe
        .pending_seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    assert_eq!(
        seen.first(),
        Some(&1),
        "when Opened went out the view held {seen:?} pending dialogs"
    );
    match recv.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(Ok(supervisor::DialogEvent::Opened(d))) => assert_eq!(d.id, "d-1"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn console_errors_total_counts_every_error_seen_past_the_ring() {
    let (mock, sup) = start(SupervisorConfig::default()).await;
    assert_eq!(sup.snapshot().console_errors_total, 0);
    for i in 0..75 {
        page_event(
            &mock,
            "Runtime.consoleAPICalled",
            json!({"type": "error", "args": [{"type": "string", "value": format!("e{i}")}]}),
        );
    }
    page_event(
        &mock,
        "Runtime.consoleAPICalled",
        json!({"type": "warning", "args": [{"type": "string", "value": "not counted"}]}),
    );
    page_event(
        &mock,
        "Runtime.exceptionThrown",
        json!({"timestamp": 1.0, "exceptionDetails": {"text": "Uncaught"}}),
    );
    let v = sup
        .wait_until(T, |v| v.console_errors_total == 76)
        .await
        .unwrap_or_else(|_| panic!("total: {}", sup.snapshot().console_errors_total));
    assert_eq!(v.console_errors.len(), 50, "the ring stays bounded");
}

/// A backlog that keeps the event loop busy for a while: every frame
/// attached makes the next view bigger to build.
fn flood_frames(mock: &MockServer, n: usize) {
    for i in 0..n {
        page_event(
            mock,
            "Page.frameAttached",
            json!({"frameId": format!("BACKLOG{i}"), "parentFrameId": "MAIN"}),
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_connection_retires_pending_dialogs_before_anyone_can_read_them() {
    // No reconnect, so the view stays as the loss left it.
    let mut config = SupervisorConfig::default();
    config.reconnect = ReconnectPolicy::default().max_consecutive_failures(0);
    let (mock, sup) = start(config).await;
    mock.on_action("Page.handleJavaScriptDialog", Action::Never);
    page_event(
        &mock,
        "Page.javascriptDialogOpening",
        json!({"type": "alert", "message": "lost", "url": "http://a.test/"}),
    );
    sup.wait_for_dialog(T).await.expect("dialog");
    // The answer is in flight when the socket goes: it fails, and the very
    // next read of the view has no dialog waiting on the dead connection.
    let answering = sup.respond(DialogAction::Accept, None, None, T);
    let drop_soon = async {
        mock.wait_for("Page.handleJavaScriptDialog", 1, T).await;
        flood_frames(&mock, 3000);
        mock.drop_connections();
    };
    let (r, ()) = tokio::join!(answering, drop_soon);
    let err = r.expect_err("the answer cannot succeed");
    assert!(err.to_string().contains("closed"), "{err}");
    let v = sup.snapshot();
    assert!(v.pending_dialogs.is_empty(), "{:?}", v.pending_dialogs);
    assert!(!v.active, "inactive once the connection is known closed");
    assert!(
        v.reason
            .as_deref()
            .is_some_and(|r| r.starts_with("connection closed")),
        "{:?}",
        v.reason
    );
    assert_eq!(
        v.recent_dialogs.last().map(|d| d.closed_by),
        Some(ClosedBy::Remote)
    );
    // And when nobody answers: the closed socket alone is enough.
    let (mock, sup) = start({
        let mut c = SupervisorConfig::default();
        c.reconnect = ReconnectPolicy::default().max_consecutive_failures(0);
        c
    })
    .await;
    page_event(
        &mock,
        "Page.javascriptDialogOpening",
        json!({"type": "alert", "message": "lost too", "url": "http://a.test/"}),
    );
    sup.wait_for_dialog(T).await.expect("dialog");
    // A backlog of events keeps the event loop busy past the socket's end:
    // the view must not wait for the loop to reach the end of the stream.
    flood_frames(&mock, 3000);
    let conn = sup.connection();
    mock.drop_connections();
    conn.closed().await;
    let v = sup.snapshot();
    assert!(v.pending_dialogs.is_empty(), "{:?}", v.pending_dialogs);
    assert!(!v.active);
}

#[tokio::test]
async fn a_dialog_event_without_a_known_type_is_recorded_as_unknown_and_answerable() {
    let (mock, sup) = start(SupervisorConfig::default()).await;
    mock.send_raw("{\"method\": \"Page.javascriptDialogOpening\", \"params\": {\"type\": \"telepathy\", \"message\": 5, \"url\": []}, \"sessionId\": \"PAGE\"}");
    mock.send_raw("{\"method\": \"Page.javascriptDialogOpening\", \"params\": {\"message\": \"no type\"}, \"sessionId\": \"PAGE\"}");
    let v = sup
        .wait_until(T, |v| v.pending_dialogs.len() == 2)
        .await
        .expect("both recorded");
    let kinds: Vec<&str> = v.pending_dialogs.iter().map(|d| d.kind.as_str()).collect();
    assert_eq!(kinds, ["unknown", "unknown"]);
    assert_eq!(v.pending_dialogs[1].message, "no type");
    sup.respond(DialogAction::Dismiss, None, Some("d-1"), T)
        .await
        .expect("an unknown dialog can be answered");
    assert_eq!(
        mock.received_method("Page.handleJavaScriptDialog")[0].params,
        json!({"accept": false})
    );
}
