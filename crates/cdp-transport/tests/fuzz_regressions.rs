//! Replays the committed inputs of the `transport_envelope` fuzz target
//! (`fuzz/regressions/transport_envelope/`, one WebSocket text frame per
//! line, as the fuzz target splits them): through the same hook the fuzzer
//! drives (`fuzz_decode_envelope`: the real `on_text` on a connection with no
//! socket, with its invariants), and through a real socket from `cdp-mock`,
//! after which the connection must still answer a call.

use cdp_mock::{Action, MockServer};
use cdp_transport::{ConnectOptions, Connection, Error};
use serde_json::json;
use std::path::PathBuf;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(5);

/// Every committed input as (file name, frames).
fn inputs() -> Vec<(String, Vec<String>)> {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions/transport_envelope");
    let mut out = Vec::new();
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        let bytes = std::fs::read(&path).expect("readable regression file");
        // The fuzz target skips non-UTF-8 input (the socket task drops such frames).
        let Ok(text) = String::from_utf8(bytes) else {
            continue;
        };
        let frames = text.split('\n').take(64).map(str::to_string).collect();
        out.push((path.display().to_string(), frames));
    }
    out.sort();
    assert!(!out.is_empty(), "no regression inputs in {}", dir.display());
    out
}

#[test]
fn committed_inputs_keep_the_invariants() {
    for (name, frames) in inputs() {
        let frames: Vec<&str> = frames.iter().map(String::as_str).collect();
        if let Err(e) = cdp_transport::fuzz_decode_envelope(&frames) {
            panic!("{name}: {e}");
        }
    }
}

#[tokio::test]
async fn committed_inputs_over_a_real_socket_leave_the_connection_working() {
    for (name, frames) in inputs() {
        let mock = MockServer::start().await;
        mock.on("Browser.getVersion", json!({"product": "Mock/1.0"}));
        let conn = Connection::connect(&mock.ws_url(), ConnectOptions::default())
            .await
            .expect("connect to mock");
        let mut all = conn.subscribe_all();
        for f in &frames {
            mock.send_raw(f);
        }
        // Frames are handled in order: once this event is seen, every replayed
        // frame was, so none can answer the call below (ids start at 1).
        mock.event("Fuzz.barrier", json!({}), None);
        let barrier = tokio::time::timeout(T, all.next_method("Fuzz.barrier")).await;
        assert!(
            matches!(barrier, Ok(Ok(_))),
            "{name}: barrier event lost: {barrier:?}"
        );
        let v = conn
            .browser()
            .call("Browser.getVersion", json!({}), T)
            .await
            .unwrap_or_else(|e| panic!("{name}: the next call failed: {e}"));
        assert_eq!(v["product"], "Mock/1.0", "{name}");
        assert!(!conn.is_closed(), "{name}");
    }
}

/// The bug `transport_envelope` found (`lost_reply_*`): a reply whose envelope
/// does not decode (here a duplicate `sessionId`) was skipped, so its call
/// waited out the whole budget. It now fails at once with `Decode`.
#[tokio::test]
async fn a_malformed_reply_fails_its_call_at_once() {
    let mock = MockServer::start().await;
    mock.on_action("Runtime.evaluate", Action::Never);
    let conn = Connection::connect(&mock.ws_url(), ConnectOptions::default())
        .await
        .expect("connect to mock");
    let start = Instant::now();
    let call = {
        let conn = conn.clone();
        tokio::spawn(async move {
            conn.browser()
                .call("Runtime.evaluate", json!({"expression": "1"}), T)
                .await
        })
    };
    let req = mock.wait_for("Runtime.evaluate", 1, T).await;
    let id = req.first().expect("the call reached the mock").id;
    mock.send_raw(&format!(
        r#"{{"id":{id},"sessionId":"S0","sessionId":"S0","result":{{}}}}"#
    ));
    let r = call.await.expect("call task");
    assert!(
        matches!(&r, Err(Error::Decode { method, .. }) if method == "Runtime.evaluate"),
        "{r:?}"
    );
    assert!(
        start.elapsed() < T / 2,
        "failed only after {:?}",
        start.elapsed()
    );
    assert_eq!(conn.pending_calls(), 0);
    let v = conn
        .browser()
        .call("Browser.getVersion", json!({}), T)
        .await;
    assert!(v.is_ok(), "the connection still works: {v:?}");
}
