//! The routing table: pending calls by id, sessions by `sessionId`, event
//! fan-out. [`Core::on_text`] applies one decoded incoming message
//! ([`crate::envelope`]) to it; the socket task ([`crate::socket`]) feeds it,
//! and [`Core::close_all`] fails everything when the socket ends.

use crate::connection::{ConnWeak, ConnectOptions};
use crate::endpoint::Endpoint;
use crate::envelope::{decode_envelope, Incoming, ReplyError};
use crate::error::{Error, Result, SessionCloseReason};
use crate::event::Event;
use crate::ids::{SessionId, TargetId};
use crate::session::{AttachedTarget, Session};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{broadcast, oneshot, watch};
use tracing::{debug, warn};

/// Close reason when [`Connection::close`](crate::Connection::close) was called.
pub(crate) const CLOSED_BY_CLIENT: &str = "closed by client";
/// Close reason when the last handle was dropped.
pub(crate) const ALL_HANDLES_DROPPED: &str = "all handles dropped";

/// Methods a crashed target's session still routes (they may revive it).
const CRASH_EXEMPT: [&str; 4] = [
    "Page.navigate",
    "Page.reload",
    "Page.close",
    "Runtime.runIfWaitingForDebugger",
];

/// Source of [`Connection::id`](crate::Connection::id).
static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

/// A call waiting for its reply.
pub(crate) struct Pending {
    pub(crate) method: String,
    pub(crate) session: Option<SessionId>,
    pub(crate) tx: oneshot::Sender<Result<Value>>,
}

pub(crate) struct SessionEntry {
    pub(crate) target_id: Option<TargetId>,
    pub(crate) target_type: String,
    /// Named by a `Target.attachToTarget` reply on this connection (not auto-attach).
    pub(crate) by_call: bool,
    pub(crate) events: Option<broadcast::Sender<Arc<Event>>>,
    pub(crate) closed: Option<SessionCloseReason>,
    pub(crate) crashed: bool,
}

pub(crate) struct State {
    pub(crate) pending: HashMap<u64, Pending>,
    pub(crate) sessions: HashMap<SessionId, SessionEntry>,
    pub(crate) browser_events: Option<broadcast::Sender<Arc<Event>>>,
    pub(crate) all_events: Option<broadcast::Sender<Arc<Event>>>,
    pub(crate) attached: Option<broadcast::Sender<AttachedTarget>>,
    pub(crate) closed: Option<String>,
    closed_count: usize,
}

/// What every handle of one connection shares: the routing table and the
/// connection's fixed facts.
pub(crate) struct Core {
    pub(crate) id: u64,
    pub(crate) endpoint: Endpoint,
    pub(crate) options: ConnectOptions,
    state: Mutex<State>,
    pub(crate) next_id: AtomicU64,
    pub(crate) closed_tx: watch::Sender<Option<String>>,
}

/// Removes call `id` from the pending table when the call ends, however it
/// ends (reply, deadline, cancellation, a dropped future).
pub(crate) struct PendingGuard<'a> {
    pub(crate) core: &'a Core,
    pub(crate) id: u64,
}
impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.core.lock().pending.remove(&self.id);
    }
}

impl Core {
    pub(crate) fn new(endpoint: Endpoint, options: ConnectOptions) -> Self {
        let cap = options.event_capacity;
        let (closed_tx, _) = watch::channel(None);
        Core {
            id: NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed),
            endpoint,
            options,
            state: Mutex::new(State {
                pending: HashMap::new(),
                sessions: HashMap::new(),
                browser_events: Some(broadcast::channel(cap).0),
                all_events: Some(broadcast::channel(cap).0),
                attached: Some(broadcast::channel(256).0),
                closed: None,
                closed_count: 0,
            }),
            next_id: AtomicU64::new(1),
            closed_tx,
        }
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means another thread panicked mid-update; the
        // table is still consistent enough to fail calls, so keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Enters call `id` (`method` on `session`, `None`: the browser session)
    /// into the pending table, unless the connection is closed, the session
    /// is closed, or its target crashed (`CRASH_EXEMPT` methods pass a crash).
    pub(crate) fn insert_pending(
        &self,
        id: u64,
        session: Option<&SessionId>,
        method: &str,
        tx: oneshot::Sender<Result<Value>>,
    ) -> Result<()> {
        let mut st = self.lock();
        if let Some(reason) = &st.closed {
            return Err(Error::ConnectionClosed {
                reason: reason.clone(),
            });
        }
        if let Some(sid) = session {
            if let Some(e) = st.sessions.get(sid) {
                if let Some(r) = &e.closed {
                    return Err(Error::SessionClosed {
                        method: method.into(),
                        session_id: sid.clone(),
                        reason: r.clone(),
                    });
                }
                if e.crashed && !CRASH_EXEMPT.contains(&method) {
                    return Err(Error::TargetCrashed {
                        method: method.into(),
                        session_id: sid.clone(),
                        target_id: e.target_id.clone().unwrap_or_else(|| TargetId::new("")),
                    });
                }
            }
        }
        st.pending.insert(
            id,
            Pending {
                method: method.into(),
                session: session.cloned(),
                tx,
            },
        );
        Ok(())
    }

    pub(crate) fn register_session(
        &self,
        sid: &SessionId,
        target_id: Option<TargetId>,
        target_type: &str,
    ) {
        let mut st = self.lock();
        if st.closed.is_some() {
            return;
        }
        let cap = self.options.event_capacity;
        let e = st
            .sessions
            .entry(sid.clone())
            .or_insert_with(|| SessionEntry {
                target_id: None,
                target_type: String::new(),
                by_call: false,
                events: Some(broadcast::channel(cap).0),
                closed: None,
                crashed: false,
            });
        if e.target_id.is_none() {
            e.target_id = target_id;
        }
        if e.target_type.is_empty() {
            e.target_type = target_type.into();
        }
    }

    pub(crate) fn close_session(&self, sid: &SessionId, reason: SessionCloseReason) {
        let mut st = self.lock();
        let Some(e) = st.sessions.get_mut(sid) else {
            return;
        };
        if e.closed.is_some() {
            return;
        }
        e.closed = Some(reason.clone());
        e.events = None;
        st.closed_count += 1;
        let ids: Vec<u64> = st
            .pending
            .iter()
            .filter(|(_, p)| p.session.as_ref() == Some(sid))
            .map(|(k, _)| *k)
            .collect();
        for id in ids {
            if let Some(p) = st.pending.remove(&id) {
                let _ = p.tx.send(Err(Error::SessionClosed {
                    method: p.method,
                    session_id: sid.clone(),
                    reason: reason.clone(),
                }));
            }
        }
        // Keep closed entries so later calls get a precise error, but bound them.
        if st.closed_count > 4096 {
            st.sessions.retain(|_, e| e.closed.is_none());
            st.closed_count = 0;
        }
    }

    fn mark_crashed(&self, sid: Option<&SessionId>, target: Option<&TargetId>, crashed: bool) {
        let mut st = self.lock();
        let target = target.cloned().or_else(|| {
            sid.and_then(|s| st.sessions.get(s))
                .and_then(|e| e.target_id.clone())
        });
        let mut hit: Vec<(SessionId, Option<TargetId>)> = Vec::new();
        for (k, e) in st.sessions.iter_mut() {
            let same = Some(k) == sid || (target.is_some() && e.target_id == target);
            if same && e.closed.is_none() {
                e.crashed = crashed;
                hit.push((k.clone(), e.target_id.clone()));
            }
        }
        if !crashed {
            return;
        }
        for (sid, tid) in hit {
            let ids: Vec<u64> = st
                .pending
                .iter()
                .filter(|(_, p)| {
                    p.session.as_ref() == Some(&sid) && !CRASH_EXEMPT.contains(&p.method.as_str())
                })
                .map(|(k, _)| *k)
                .collect();
            for id in ids {
                if let Some(p) = st.pending.remove(&id) {
                    let _ = p.tx.send(Err(Error::TargetCrashed {
                        method: p.method,
                        session_id: sid.clone(),
                        target_id: tid.clone().unwrap_or_else(|| TargetId::new("")),
                    }));
                }
            }
        }
    }

    pub(crate) fn close_all(&self, cause: Error) {
        let mut st = self.lock();
        if st.closed.is_some() {
            return;
        }
        let reason = match &cause {
            Error::ConnectionClosed { reason } => reason.clone(),
            other => other.to_string(),
        };
        // Our own close (explicit, or the last handle dropped) is routine;
        // anything else (peer gone, I/O error, size limit) is worth a warning.
        if matches!(reason.as_str(), CLOSED_BY_CLIENT | ALL_HANDLES_DROPPED) {
            debug!(endpoint = %self.endpoint, %reason, "cdp connection closed");
        } else {
            warn!(endpoint = %self.endpoint, %reason, "cdp connection closed");
        }
        st.closed = Some(reason.clone());
        for (_, p) in st.pending.drain() {
            let _ = p.tx.send(Err(cause.duplicate()));
        }
        for e in st.sessions.values_mut() {
            if e.closed.is_none() {
                e.closed = Some(SessionCloseReason::ConnectionClosed);
            }
            e.events = None;
        }
        st.browser_events = None;
        st.all_events = None;
        st.attached = None;
        drop(st);
        // `send` would drop the value when no receiver exists yet; `send_replace`
        // stores it so a later `Connection::closed` sees it.
        self.closed_tx.send_replace(Some(reason));
    }

    pub(crate) fn on_text(self: &Arc<Self>, conn_weak: &ConnWeak, text: &str) {
        let ev = match decode_envelope(text) {
            Incoming::Malformed { reason } => {
                warn!(error = %reason, len = text.len(), "skipping malformed CDP message");
                return;
            }
            Incoming::Reply { id, outcome } => {
                let p = self.lock().pending.remove(&id);
                let Some(p) = p else {
                    debug!(id, "reply for a caller that went away");
                    return;
                };
                let r = outcome.map_err(|e| match e {
                    ReplyError::Protocol(code, message) => Error::Protocol {
                        method: p.method.clone(),
                        code,
                        message,
                    },
                    ReplyError::Malformed(source) => {
                        warn!(id, error = %source, "malformed CDP reply fails its call");
                        Error::Decode {
                            method: p.method.clone(),
                            source,
                        }
                    }
                });
                if r.is_ok() && (p.method == "Page.navigate" || p.method == "Page.reload") {
                    self.mark_crashed(p.session.as_ref(), None, false);
                }
                if let (Ok(v), "Target.attachToTarget") = (&r, p.method.as_str()) {
                    // In arrival order, so a reader that got any later reply
                    // sees it (`Connection::attached_by_call`).
                    if let Some(sid) = v.get("sessionId").and_then(Value::as_str) {
                        let sid = SessionId::new(sid);
                        self.register_session(&sid, None, "");
                        if let Some(e) = self.lock().sessions.get_mut(&sid) {
                            e.by_call = true;
                        }
                    }
                }
                let _ = p.tx.send(r);
                return;
            }
            Incoming::Event(ev) => Arc::new(ev),
        };
        self.route_special(conn_weak, &ev);
        let st = self.lock();
        let target = match &ev.session_id {
            None => st.browser_events.as_ref(),
            Some(sid) => st.sessions.get(sid).and_then(|e| e.events.as_ref()),
        };
        if let Some(tx) = target {
            let _ = tx.send(ev.clone());
        }
        if let Some(all) = &st.all_events {
            let _ = all.send(ev);
        }
    }

    fn route_special(self: &Arc<Self>, conn_weak: &ConnWeak, ev: &Event) {
        match ev.method.as_str() {
            "Target.attachedToTarget" => {
                let Some(sid) = ev.str_param("sessionId") else {
                    return;
                };
                let sid = SessionId::new(sid);
                let info = ev.params.get("targetInfo").cloned().unwrap_or(Value::Null);
                let tid = info
                    .get("targetId")
                    .and_then(Value::as_str)
                    .map(TargetId::new);
                let ttype = info.get("type").and_then(Value::as_str).unwrap_or("");
                self.register_session(&sid, tid.clone(), ttype);
                let Some(conn) = conn_weak.upgrade() else {
                    return;
                };
                let at = AttachedTarget {
                    session: Session::new(conn, Some(sid), tid),
                    target_info: info,
                    parent_session_id: ev.session_id.clone(),
                    waiting_for_debugger: ev
                        .params
                        .get("waitingForDebugger")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                };
                if let Some(tx) = self.lock().attached.as_ref() {
                    let _ = tx.send(at);
                }
            }
            "Target.detachedFromTarget" => {
                if let Some(sid) = ev.str_param("sessionId") {
                    self.close_session(&SessionId::new(sid), SessionCloseReason::Detached);
                }
            }
            "Target.targetDestroyed" => {
                if let Some(tid) = ev.str_param("targetId") {
                    let tid = TargetId::new(tid);
                    let sids: Vec<SessionId> = self
                        .lock()
                        .sessions
                        .iter()
                        .filter(|(_, e)| e.target_id.as_ref() == Some(&tid))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for s in sids {
                        self.close_session(&s, SessionCloseReason::TargetDestroyed);
                    }
                }
            }
            "Inspector.targetCrashed" => self.mark_crashed(ev.session_id.as_ref(), None, true),
            "Target.targetCrashed" => {
                if let Some(tid) = ev.str_param("targetId") {
                    self.mark_crashed(None, Some(&TargetId::new(tid)), true);
                }
            }
            "Inspector.targetReloadedAfterCrash" => {
                self.mark_crashed(ev.session_id.as_ref(), None, false)
            }
            _ => {}
        }
    }
}
