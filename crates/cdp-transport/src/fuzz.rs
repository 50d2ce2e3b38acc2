//! The fuzz and regression hook (feature `fuzz`, not in the shipped
//! library): the `transport_envelope` fuzz target and
//! `tests/fuzz_regressions.rs` drive it.

use crate::connection::{ConnWeak, ConnectOptions, Connection, Handle};
use crate::endpoint::Endpoint;
use crate::ids::{SessionId, TargetId};
use crate::routing::{Core, Pending};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

/// Fuzzing and regression hook, not API: runs `frames`, in order, through the
/// real incoming path (`Core::on_text`: envelope decoding, reply routing,
/// session bookkeeping, event fan-out) of a connection that has no socket.
///
/// The routing table starts with sessions `S1` (target `T1`, page) and `S2`
/// (target `T2`, iframe) and pending calls 1..=6 on the browser session, `S1`,
/// `S2` and the unknown `S3`. Checked after every frame: a frame that is a
/// JSON object whose `id` is a pending call's resolves that call (a reply is
/// never lost, whatever else the envelope holds). Checked at the end: the
/// connection is not closed, a fresh call still gets its reply, and a fresh
/// event still reaches `subscribe_all`.
///
/// # Errors
/// The first broken invariant, as text.
///
/// # Panics
/// Never (a panic is what the fuzzer looks for).
#[doc(hidden)]
pub fn fuzz_decode_envelope(frames: &[&str]) -> std::result::Result<(), String> {
    let endpoint = Endpoint::parse("ws://127.0.0.1:9/devtools/browser/fuzz")
        .map_err(|e| format!("fixed endpoint: {e}"))?;
    let core = Arc::new(Core::new(
        endpoint,
        ConnectOptions::default().event_capacity(8),
    ));
    let (out_tx, _out_rx) = mpsc::channel(1);
    let handle = Arc::new(Handle {
        core: core.clone(),
        out_tx,
        shutdown: tokio_util::sync::CancellationToken::new(),
    });
    let weak = ConnWeak(Arc::downgrade(&handle));
    let mut all = Connection { h: handle.clone() }.subscribe_all();
    let mut attached = Connection { h: handle.clone() }.attached_targets();
    core.register_session(&SessionId::new("S1"), Some(TargetId::new("T1")), "page");
    core.register_session(&SessionId::new("S2"), Some(TargetId::new("T2")), "iframe");
    let calls = [
        (None, "Browser.getVersion"),
        (Some("S1"), "Page.navigate"),
        (Some("S1"), "Runtime.evaluate"),
        (Some("S2"), "DOM.getDocument"),
        (Some("S2"), "Page.reload"),
        (Some("S3"), "Target.getTargets"),
    ];
    let mut replies = Vec::new();
    for (n, (session, method)) in (1u64..).zip(calls) {
        let (tx, rx) = oneshot::channel();
        core.lock().pending.insert(
            n,
            Pending {
                method: method.into(),
                session: session.map(SessionId::new),
                tx,
            },
        );
        replies.push(rx);
    }
    for text in frames {
        let id = serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|v| v.get("id").and_then(Value::as_u64));
        let was_pending = id.is_some_and(|id| core.lock().pending.contains_key(&id));
        core.on_text(&weak, text);
        if let Some(id) = id.filter(|_| was_pending) {
            if core.lock().pending.contains_key(&id) {
                return Err(format!("the reply to pending call {id} was lost: {text:?}"));
            }
        }
        while attached.try_recv().is_ok() {}
    }
    if let Some(reason) = core.lock().closed.clone() {
        return Err(format!("connection closed by incoming text: {reason}"));
    }
    let probe = 1u64 << 62;
    let (tx, mut rx) = oneshot::channel();
    core.lock().pending.insert(
        probe,
        Pending {
            method: "Browser.getVersion".into(),
            session: None,
            tx,
        },
    );
    core.on_text(
        &weak,
        &format!(r#"{{"id":{probe},"result":{{"probe":true}}}}"#),
    );
    match rx.try_recv() {
        Ok(Ok(v)) if v == json!({"probe": true}) => {}
        other => return Err(format!("a fresh call got {other:?} instead of its reply")),
    }
    core.on_text(&weak, r#"{"method":"Fuzz.probe","params":{"n":1}}"#);
    let mut seen = false;
    while let Some(r) = all.try_recv() {
        if let Ok(ev) = r {
            seen |= ev.method == "Fuzz.probe" && ev.session_id.is_none();
        }
    }
    if !seen {
        return Err("a fresh event did not reach subscribe_all".into());
    }
    // Break the Session -> Connection -> Core cycle an undrained
    // `attached_targets` buffer would keep.
    while attached.try_recv().is_ok() {}
    core.lock().attached = None;
    drop(replies);
    Ok(())
}
