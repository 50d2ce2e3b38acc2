//! Session handles: [`Session`] (calls, subscriptions, detach on one
//! flattened session or the browser session) and [`AttachedTarget`], the
//! announcement of a new one.

use crate::budget::Budget;
use crate::connection::Connection;
use crate::error::{Error, Result, SessionCloseReason};
use crate::event::EventStream;
use crate::ids::{SessionId, TargetId};
use crate::routing::PendingGuard;
use chromiumoxide_types::Command;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;
use tracing::{debug, Instrument};

/// A target attached with `flatten: true`, announced by `Target.attachedToTarget`.
#[derive(Debug, Clone)]
pub struct AttachedTarget {
    /// The new session.
    pub session: Session,
    /// `targetInfo` as sent (raw JSON: `targetId`, `type`, `url`, `openerId`, ...).
    pub target_info: Value,
    /// The session on which the event arrived (`None`: browser session).
    pub parent_session_id: Option<SessionId>,
    /// True when the target is paused until `Runtime.runIfWaitingForDebugger`.
    pub waiting_for_debugger: bool,
}

impl AttachedTarget {
    /// `targetInfo.type` (`page`, `iframe`, `worker`, `service_worker`, ...).
    pub fn target_type(&self) -> &str {
        self.target_info
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
    /// `targetInfo.targetId`.
    pub fn target_id(&self) -> TargetId {
        TargetId::new(
            self.target_info
                .get("targetId")
                .and_then(Value::as_str)
                .unwrap_or(""),
        )
    }
}

/// A handle to one CDP session: the browser session or a flattened child.
#[derive(Clone)]
pub struct Session {
    conn: Connection,
    id: Option<SessionId>,
    target_id: Option<TargetId>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("target_id", &self.target_id)
            .finish()
    }
}

impl Session {
    /// A handle for session `id` (`None`: the browser session) on `conn`.
    pub(crate) fn new(
        conn: Connection,
        id: Option<SessionId>,
        target_id: Option<TargetId>,
    ) -> Self {
        Session {
            conn,
            id,
            target_id,
        }
    }

    /// The `sessionId`; `None` for the browser session.
    pub fn id(&self) -> Option<&SessionId> {
        self.id.as_ref()
    }
    /// The target this session is attached to, when known.
    pub fn target_id(&self) -> Option<&TargetId> {
        self.target_id.as_ref()
    }
    /// The connection this session lives on.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Sends a typed `chromiumoxide_cdp` command and decodes its reply.
    ///
    /// # Errors
    /// `Protocol` (CDP error object), `Timeout`/`Cancelled` (budget),
    /// `SessionClosed`, `TargetCrashed`, `ConnectionClosed`, `Decode`, `Encode`.
    /// A gone peer fails the call at once, not at the deadline.
    ///
    /// # Cancel safety
    /// Cancel safe with respect to the transport: a dropped future removes its
    /// pending entry and a late reply is discarded. The command itself may
    /// still have been sent and run in the browser.
    pub async fn execute<C: Command>(
        &self,
        cmd: C,
        budget: impl Into<Budget>,
    ) -> Result<C::Response> {
        let method = cmd.identifier().to_string();
        let params = serde_json::to_value(&cmd).map_err(|source| Error::Encode {
            method: method.clone(),
            source,
        })?;
        let v = self.call(&method, params, budget).await?;
        C::response_from_value(v).map_err(|source| Error::Decode { method, source })
    }

    /// Sends `method` with raw JSON `params` and returns the raw `result`.
    ///
    /// # Errors
    /// As [`Session::execute`], without `Decode`/`Encode`.
    ///
    /// # Cancel safety
    /// As [`Session::execute`].
    pub async fn call(
        &self,
        method: &str,
        params: Value,
        budget: impl Into<Budget>,
    ) -> Result<Value> {
        let budget = budget.into();
        let span = tracing::debug_span!(
            "cdp.call",
            method,
            session = self.id.as_ref().map(|s| s.as_str()),
            id = tracing::field::Empty,
            elapsed_us = tracing::field::Empty,
            ok = tracing::field::Empty,
        );
        let params = if params.is_null() { json!({}) } else { params };
        self.call_raw(method, params, budget).instrument(span).await
    }

    /// Events of this session only (the browser session gets events with no `sessionId`).
    pub fn subscribe(&self) -> EventStream {
        let st = self.conn.h.core.lock();
        let rx = match &self.id {
            None => st.browser_events.as_ref().map(|s| s.subscribe()),
            Some(id) => st
                .sessions
                .get(id)
                .and_then(|e| e.events.as_ref())
                .map(|s| s.subscribe()),
        };
        EventStream { rx }
    }

    /// Detaches this session (`Target.detachFromTarget`) and fails its pending calls.
    ///
    /// # Errors
    /// The call's error, except that an already closed session is `Ok`.
    ///
    /// # Cancel safety
    /// Cancel safe: the routing entry is closed before any await.
    pub async fn detach(&self, budget: impl Into<Budget>) -> Result<()> {
        let Some(id) = &self.id else { return Ok(()) };
        let r = self
            .conn
            .browser()
            .call(
                "Target.detachFromTarget",
                json!({"sessionId": id.as_str()}),
                budget,
            )
            .await;
        self.conn
            .h
            .core
            .close_session(id, SessionCloseReason::Detached);
        match r {
            Ok(_) => Ok(()),
            Err(e) if e.protocol_message().is_some() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `Some(reason)` when this session no longer routes calls.
    pub fn closed_reason(&self) -> Option<SessionCloseReason> {
        let st = self.conn.h.core.lock();
        if st.closed.is_some() {
            return Some(SessionCloseReason::ConnectionClosed);
        }
        self.id
            .as_ref()
            .and_then(|id| st.sessions.get(id))
            .and_then(|e| e.closed.clone())
    }

    /// True after `Inspector.targetCrashed` and before the next successful navigation.
    pub fn is_crashed(&self) -> bool {
        let st = self.conn.h.core.lock();
        self.id
            .as_ref()
            .and_then(|id| st.sessions.get(id))
            .is_some_and(|e| e.crashed)
    }

    /// `targetInfo.type` as announced at attach (empty when unknown).
    pub fn target_type(&self) -> String {
        let st = self.conn.h.core.lock();
        self.id
            .as_ref()
            .and_then(|id| st.sessions.get(id))
            .map(|e| e.target_type.clone())
            .unwrap_or_default()
    }

    /// Sends one call and waits for its reply, the budget's deadline or its
    /// cancellation, whichever comes first.
    async fn call_raw(&self, method: &str, params: Value, budget: Budget) -> Result<Value> {
        let session = self.id.as_ref();
        let core = &self.conn.h.core;
        let start = Instant::now();
        // A budget already spent sends nothing: the browser never sees the call.
        if budget.is_cancelled() {
            return Err(Error::Cancelled {
                method: method.into(),
                elapsed: Duration::ZERO,
            });
        }
        if budget.is_expired() {
            return Err(Error::Timeout {
                method: method.into(),
                elapsed: Duration::ZERO,
                budget: budget.total(),
            });
        }
        let id = core.next_id.fetch_add(1, Ordering::Relaxed);
        tracing::Span::current().record("id", id);
        let (tx, rx) = oneshot::channel();
        core.insert_pending(id, session, method, tx)?;
        let _guard = PendingGuard { core, id };
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(sid) = session {
            msg["sessionId"] = Value::String(sid.as_str().into());
        }
        let text = msg.to_string();
        let timeout = |elapsed| Error::Timeout {
            method: method.into(),
            elapsed,
            budget: budget.total(),
        };
        let deadline = budget.deadline();
        tokio::select! {
            biased;
            r = self.conn.h.out_tx.send(text) => {
                if r.is_err() {
                    return Err(Error::ConnectionClosed { reason: core.lock().closed.clone().unwrap_or_else(|| "socket task ended".into()) });
                }
            }
            _ = budget.cancel_token().cancelled() => return Err(Error::Cancelled { method: method.into(), elapsed: start.elapsed() }),
            _ = tokio::time::sleep_until(deadline) => return Err(timeout(start.elapsed())),
        }
        let r = tokio::select! {
            biased;
            r = rx => match r {
                Ok(r) => r,
                Err(_) => Err(Error::ConnectionClosed { reason: core.lock().closed.clone().unwrap_or_else(|| "socket task ended".into()) }),
            },
            _ = budget.cancel_token().cancelled() => Err(Error::Cancelled { method: method.into(), elapsed: start.elapsed() }),
            _ = tokio::time::sleep_until(deadline) => Err(timeout(start.elapsed())),
        };
        let elapsed_us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        let span = tracing::Span::current();
        span.record("elapsed_us", elapsed_us);
        span.record("ok", r.is_ok());
        debug!(
            method,
            session = session.map(|s| s.as_str()),
            id,
            elapsed_us,
            ok = r.is_ok(),
            "cdp.call done"
        );
        r
    }
}
