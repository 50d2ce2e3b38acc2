//! insta snapshots: the `Display` of every error, and events as subscribers
//! receive them (envelope decoded, payload raw).

use cdp_mock::{Action, MockServer};
use cdp_transport::{
    BudgetRangeError, ConnectOptions, Connection, Error, EventDecodeError, RecvError,
    SessionCloseReason, SessionId, TargetId,
};
use serde_json::{json, Value};
use std::time::Duration;

const T: Duration = Duration::from_secs(5);

fn json_error() -> serde_json::Error {
    serde_json::from_str::<u8>("\"x\"").expect_err("not a number")
}

/// One of each `Error` variant, with realistic context.
fn every_error() -> Vec<(&'static str, Error)> {
    let sid = SessionId::new("S1");
    vec![
        (
            "InvalidEndpoint",
            Error::InvalidEndpoint {
                endpoint: "ftp://***@host/?token=***".into(),
                reason: "scheme \"ftp\" is not one of ws, wss, http, https".into(),
            },
        ),
        (
            "Connect",
            Error::Connect {
                endpoint: "ws://127.0.0.1:9222/devtools/browser/x".into(),
                reason: "IO error: Connection refused (os error 111)".into(),
            },
        ),
        (
            "ConnectTimeout",
            Error::ConnectTimeout {
                endpoint: "http://127.0.0.1:9222/".into(),
                timeout: Duration::from_secs(10),
            },
        ),
        (
            "Protocol",
            Error::Protocol {
                method: "DOM.getDocument".into(),
                code: -32000,
                message: "Not allowed".into(),
            },
        ),
        (
            "Timeout",
            Error::Timeout {
                method: "Runtime.evaluate".into(),
                elapsed: Duration::from_millis(1500),
                budget: Duration::from_millis(1500),
            },
        ),
        (
            "Cancelled",
            Error::Cancelled {
                method: "Runtime.evaluate".into(),
                elapsed: Duration::from_millis(20),
            },
        ),
        (
            "SessionClosed/detached",
            Error::SessionClosed {
                method: "Page.enable".into(),
                session_id: sid.clone(),
                reason: SessionCloseReason::Detached,
            },
        ),
        (
            "SessionClosed/target_destroyed",
            Error::SessionClosed {
                method: "Page.enable".into(),
                session_id: sid.clone(),
                reason: SessionCloseReason::TargetDestroyed,
            },
        ),
        (
            "SessionClosed/connection_closed",
            Error::SessionClosed {
                method: "Page.enable".into(),
                session_id: sid.clone(),
                reason: SessionCloseReason::ConnectionClosed,
            },
        ),
        (
            "TargetCrashed",
            Error::TargetCrashed {
                method: "Runtime.evaluate".into(),
                session_id: sid,
                target_id: TargetId::new("T1"),
            },
        ),
        (
            "ConnectionClosed",
            Error::ConnectionClosed {
                reason: "peer closed the socket".into(),
            },
        ),
        (
            "MessageTooLarge",
            Error::MessageTooLarge {
                size: 2_097_183,
                limit: 1_048_576,
            },
        ),
        (
            "Decode",
            Error::Decode {
                method: "Browser.getVersion".into(),
                source: json_error(),
            },
        ),
        (
            "Encode",
            Error::Encode {
                method: "Runtime.evaluate".into(),
                source: json_error(),
            },
        ),
        (
            "ChromeNotFound",
            Error::ChromeNotFound {
                tried: "TABWARDEN_CHROME=/nope, chromium, chromium-browser, google-chrome".into(),
            },
        ),
        (
            "Launch",
            Error::Launch {
                reason: "no DevToolsActivePort after 20s".into(),
            },
        ),
    ]
}

#[test]
fn error_display() {
    let shown: Vec<Value> = every_error()
        .iter()
        .map(|(name, e)| json!({ "variant": name, "display": e.to_string() }))
        .collect();
    insta::assert_yaml_snapshot!(shown);
}

#[test]
fn other_error_display() {
    let decode = EventDecodeError {
        method: "Page.javascriptDialogOpening".into(),
        type_name: "EventJavascriptDialogOpening",
        source: json_error(),
    };
    let range = BudgetRangeError {
        value: 0,
        min: 1,
        max: 120_000,
        default: 20_000,
    };
    let shown = json!({
        "EventDecodeError": decode.to_string(),
        "BudgetRangeError": range.to_string(),
        "RecvError::Lagged": RecvError::Lagged(42).to_string(),
        "RecvError::Closed": RecvError::Closed.to_string(),
    });
    insta::assert_yaml_snapshot!(shown);
}

fn event_json(ev: &cdp_transport::Event) -> Value {
    json!({ "method": ev.method, "session_id": ev.session_id, "params": ev.params })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decoded_envelopes() {
    let mock = MockServer::start().await;
    let conn = Connection::connect(&mock.ws_url(), ConnectOptions::default())
        .await
        .expect("connect");
    let mut all = conn.subscribe_all();
    let mut announced = conn.attached_targets();
    let attached = json!({
        "sessionId": "S1",
        "targetInfo": { "targetId": "F1", "type": "iframe", "title": "", "url": "http://127.0.0.1:1/child.html", "attached": true, "canAccessOpener": false },
        "waitingForDebugger": true,
    });
    mock.event("Target.attachedToTarget", attached, Some("S0"));
    mock.event("Runtime.consoleAPICalled", json!({ "type": "log", "args": [{ "type": "string", "value": "hi" }], "executionContextId": 3, "timestamp": 1.5 }), Some("S1"));
    mock.send_raw(r#"{"method":"Page.frameStartedLoading"}"#);
    mock.send_raw(r#"{"method":"Page.javascriptDialogOpening","sessionId":"S0","params":{"type":"teleport","message":"m","url":"u","frameId":"F1","hasBrowserHandler":false,"defaultPrompt":"","somethingNew":{"x":1}}}"#);
    mock.event("Vendor.unknownEvent", json!([1, "two", null]), None);
    mock.send_raw(r#"{"method":"Target.detachedFromTarget","params":{"sessionId":"S1","targetId":"F1"},"extra":"ignored"}"#);
    mock.once("Browser.getVersion", Action::Reply(json!({})));
    conn.browser()
        .call("Browser.getVersion", json!({}), T)
        .await
        .expect("sync");

    let mut events = Vec::new();
    while let Some(ev) = all.try_recv() {
        events.push(event_json(&ev.expect("no lag")));
    }
    let at = announced.try_recv().expect("announced");
    let announcement = json!({
        "session": at.session.id(),
        "target_id": at.target_id(),
        "target_type": at.target_type(),
        "parent_session_id": at.parent_session_id,
        "waiting_for_debugger": at.waiting_for_debugger,
    });
    insta::assert_yaml_snapshot!(json!({ "events": events, "attached_target": announcement }));
}

/// `every_error` must keep up with `Error`: read the variants from the source.
#[test]
fn every_error_variant_is_snapshotted() {
    let src = include_str!("../src/error.rs");
    let body = src
        .split("pub enum Error {")
        .nth(1)
        .and_then(|r| r.split("\n}\n").next())
        .expect("enum Error in error.rs");
    let variants: Vec<&str> = body
        .lines()
        .filter_map(|l| l.strip_prefix("    "))
        .filter(|l| l.starts_with(|c: char| c.is_ascii_uppercase()))
        .filter_map(|l| l.split([' ', '{', '(', ',']).next())
        .collect();
    assert!(variants.len() >= 14, "parsed {variants:?}");
    let covered: Vec<&str> = every_error()
        .iter()
        .map(|(n, _)| n.split('/').next().unwrap_or(n))
        .collect();
    for v in &variants {
        assert!(
            covered.contains(v),
            "Error::{v} has no snapshot in every_error()"
        );
    }
}
