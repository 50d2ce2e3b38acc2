//! The supervisor: one event loop per tab, a lock-free view, respond and route.
//!
//! By job: [`open`] (attaching or opening the tab, setting up sessions, the
//! target gate), [`pump`] (the event loop and the effects it spawns),
//! [`answer`] (answering dialogs: the agent's, the policy's),
//! [`watchdog`] (the `must_respond` watchdog), [`reconnect`] (recovery
//! after a lost socket or page session); this file holds the handle, its
//! shared state and the read side (views, routes).

mod answer;
mod open;
mod pump;
mod reconnect;
mod watchdog;

use crate::config::{BridgeMode, DialogPolicy, SupervisorConfig};
use crate::error::{Error, Result};
use crate::state::{Now, State};
use crate::view::{ClosedDialog, PendingDialog, SupervisorView};
use arc_swap::ArcSwap;
use cdp_transport::{Budget, Connection, ExecutionContextId, FrameId, LoaderId, Session, TargetId};
use serde_json::json;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// A change in the dialog set, for callers that must react at once (the tool
/// layer returns `dialog_pending` while navigating or evaluating).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum DialogEvent {
    /// A dialog opened.
    Opened(PendingDialog),
    /// A dialog closed.
    Closed(ClosedDialog),
}

/// Where a frame can be reached.
#[derive(Debug, Clone)]
pub struct Route {
    /// The frame.
    pub frame_id: FrameId,
    /// The session to send frame-scoped commands on: the OOPIF's own session,
    /// or the page session for the top frame.
    pub session: Session,
    /// True for an OOPIF.
    pub is_oopif: bool,
    /// The frame's main-world execution context on `session`, when reported.
    pub execution_context_id: Option<ExecutionContextId>,
}

/// A same-process frame's execution context (see [`Supervisor::frame_context`]).
#[derive(Debug, Clone)]
pub struct FrameContext {
    /// The session that owns the frame (the page or an OOPIF that contains it).
    pub session: Session,
    /// The frame's main-world execution context; `None` until Chromium reports it.
    pub execution_context_id: Option<ExecutionContextId>,
}

struct Shared {
    state: Mutex<State>,
    view: ArcSwap<SupervisorView>,
    /// The current connection (as `State::conn`), readable without the state
    /// lock so that [`Supervisor::snapshot`] can notice a closed socket.
    conn: ArcSwap<Connection>,
    view_tx: watch::Sender<Arc<SupervisorView>>,
    dialog_tx: broadcast::Sender<DialogEvent>,
    config: SupervisorConfig,
    endpoint: String,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    owns_target: bool,
    target_id: TargetId,
}

struct StopOnDrop(CancellationToken);
impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Supervises one tab: dialogs, frames, OOPIF sessions, popups, console errors.
///
/// A cheap, cloneable handle. One event-loop task per supervisor applies CDP
/// events to the state and publishes an immutable [`SupervisorView`] after
/// every change; [`Supervisor::snapshot`] reads it without waiting for the
/// loop. When the last handle drops, the loop stops (the tab is left open
/// unless [`Supervisor::stop`] is called on a tab the supervisor created).
#[derive(Clone)]
pub struct Supervisor {
    shared: Arc<Shared>,
    _guard: Arc<StopOnDrop>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("target_id", &self.shared.target_id)
            .finish_non_exhaustive()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Publishes the state as a new view, then announces dialog changes and
    /// the new view: the view is stored first, so a caller woken by a
    /// [`DialogEvent`] or by [`Supervisor::changes`] finds the change in
    /// [`Supervisor::snapshot`].
    fn commit(&self, st: &State) {
        let old = self.view.load_full();
        let new = Arc::new(st.view());
        if *new == *old {
            return;
        }
        self.view.store(new.clone());
        for d in &new.pending_dialogs {
            if !old.pending_dialogs.iter().any(|o| o.id == d.id) {
                let _ = self.dialog_tx.send(DialogEvent::Opened(d.clone()));
            }
        }
        for d in &new.recent_dialogs {
            if !old
                .recent_dialogs
                .iter()
                .any(|o| o.dialog.id == d.dialog.id)
            {
                let _ = self.dialog_tx.send(DialogEvent::Closed(d.clone()));
            }
        }
        self.view_tx.send_replace(new);
    }

    /// When the state's connection has closed but the state is still
    /// active, marks it inactive now (pending dialogs retired as `remote`),
    /// without waiting for the event loop to reach the end of its stream
    /// (it may be busy with a backlog). The event loop then reconnects as usual.
    fn retire_if_closed(&self, st: &mut State) -> bool {
        if !st.active {
            return false;
        }
        let Some(r) = st.conn.closed_reason() else {
            return false;
        };
        st.set_inactive(closed_reason_text(Some(r)), Now::system());
        true
    }
    fn budget(&self, d: Duration) -> Budget {
        Budget::new(d).with_parent(&self.shutdown)
    }
}

impl Supervisor {
    /// The current view. Never waits for the event loop.
    ///
    /// Lock-free, except once: the first read after the connection closed
    /// (while the event loop may still be busy with earlier events) marks the
    /// view inactive (`connection closed: …`) and retires pending dialogs as
    /// `remote` right away, under the state lock, so no reader sees a dialog
    /// waiting on a dead connection.
    ///
    /// # Panics
    /// Never.
    pub fn snapshot(&self) -> Arc<SupervisorView> {
        let v = self.shared.view.load_full();
        if v.active && self.shared.conn.load().is_closed() {
            let mut st = self.shared.lock();
            if self.shared.retire_if_closed(&mut st) {
                self.shared.commit(&st);
            }
            return self.shared.view.load_full();
        }
        v
    }

    /// A receiver that sees every new view (the latest is always available;
    /// intermediate ones may be skipped).
    pub fn changes(&self) -> watch::Receiver<Arc<SupervisorView>> {
        self.shared.view_tx.subscribe()
    }

    /// Dialog open/close notifications (bounded: a slow receiver lags).
    pub fn dialog_events(&self) -> broadcast::Receiver<DialogEvent> {
        self.shared.dialog_tx.subscribe()
    }

    /// The supervised tab's target id.
    pub fn target_id(&self) -> &TargetId {
        &self.shared.target_id
    }

    /// The dialog policy this supervisor answers dialogs with.
    pub fn dialog_policy(&self) -> DialogPolicy {
        self.shared.config.policy
    }

    /// The dialog bridge mode this supervisor was configured with (whether
    /// `auto` has switched on shows as [`SupervisorView::bridge_active`]).
    pub fn bridge_mode(&self) -> BridgeMode {
        self.shared.config.bridge
    }

    /// The tab's page session (on the current connection; it changes after a reconnect).
    pub fn page_session(&self) -> Session {
        self.shared.lock().page.clone()
    }

    /// The current connection (it changes after a reconnect).
    pub fn connection(&self) -> Connection {
        self.shared.lock().conn.clone()
    }

    /// Waits until `pred` holds for the view, and returns that view.
    ///
    /// # Errors
    /// [`Error::WaitTimeout`] when the budget runs out or is cancelled.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_until(
        &self,
        budget: impl Into<Budget>,
        pred: impl Fn(&SupervisorView) -> bool,
    ) -> Result<Arc<SupervisorView>> {
        let budget = budget.into();
        let mut rx = self.changes();
        let deadline = budget.deadline();
        loop {
            let v = rx.borrow_and_update().clone();
            if pred(&v) {
                return Ok(v);
            }
            tokio::select! {
                r = rx.changed() => if r.is_err() { return Err(Error::WaitTimeout { budget: budget.total() }) },
                _ = tokio::time::sleep_until(deadline) => return Err(Error::WaitTimeout { budget: budget.total() }),
                _ = budget.cancel_token().cancelled() => return Err(Error::WaitTimeout { budget: budget.total() }),
            }
        }
    }

    /// Waits for the first pending dialog (returns at once if one is pending).
    ///
    /// # Errors
    /// [`Error::WaitTimeout`] when none opens within the budget.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_for_dialog(&self, budget: impl Into<Budget>) -> Result<PendingDialog> {
        let v = self
            .wait_until(budget, |v| !v.pending_dialogs.is_empty())
            .await?;
        v.pending_dialogs
            .first()
            .cloned()
            .ok_or(Error::WaitTimeout {
                budget: Duration::ZERO,
            })
    }
    /// Where to send frame-scoped commands for `frame_id`.
    ///
    /// # Errors
    /// [`Error::UnknownFrame`] for a frame not in the tree;
    /// [`Error::SameProcessFrame`] for a frame in its parent's process: the
    /// error says how to reach it and carries its execution context id (see
    /// also [`Supervisor::frame_context`]).
    pub fn route(&self, frame_id: &FrameId) -> Result<Route> {
        let st = self.shared.lock();
        let r = st
            .frame_route(frame_id)
            .ok_or_else(|| Error::UnknownFrame {
                frame_id: frame_id.clone(),
            })?;
        match (&r.session, r.oopif || r.top) {
            (Some(session), true) => Ok(Route {
                frame_id: frame_id.clone(),
                session: session.clone(),
                is_oopif: r.oopif,
                execution_context_id: r.ctx,
            }),
            _ => Err(Error::SameProcessFrame {
                frame_id: frame_id.clone(),
                parent_frame_id: r.parent,
                execution_context_id: r.ctx,
            }),
        }
    }

    /// The loader (`Network.LoaderId`) of the document frame `frame_id`
    /// shows now, from the `Page.frameNavigated` events of the session that
    /// owns the frame; `None` when the frame is unknown here or has not
    /// committed a document yet. An event still in flight is not seen: a
    /// document that committed a moment ago may still report the old loader.
    pub fn frame_loader(&self, frame_id: &FrameId) -> Option<LoaderId> {
        self.shared.lock().frame_loader(frame_id)
    }

    /// The session that owns a frame (OOPIF, page, or the OOPIF that contains
    /// a same-process frame) and the frame's main-world execution context.
    ///
    /// # Errors
    /// [`Error::UnknownFrame`].
    pub fn frame_context(&self, frame_id: &FrameId) -> Result<FrameContext> {
        let st = self.shared.lock();
        let r = st
            .frame_route(frame_id)
            .ok_or_else(|| Error::UnknownFrame {
                frame_id: frame_id.clone(),
            })?;
        let session = r.session.ok_or_else(|| Error::UnknownFrame {
            frame_id: frame_id.clone(),
        })?;
        Ok(FrameContext {
            session,
            execution_context_id: r.ctx,
        })
    }

    /// Stops the event loop, marks the view inactive (`stopped`), and closes
    /// the tab if this supervisor created it ([`Supervisor::new_tab`]).
    ///
    /// # Cancel safety
    /// Cancel safe: the loop is stopped before any await.
    pub async fn stop(&self, budget: impl Into<Budget>) {
        let budget = budget.into();
        self.shared.shutdown.cancel();
        let conn = {
            let mut st = self.shared.lock();
            st.set_inactive("stopped", Now::system());
            // Leave the target gate: new popups are resumed by it at once.
            st.gate = None;
            self.shared.commit(&st);
            st.conn.clone()
        };
        if self.shared.owns_target && !conn.is_closed() {
            let _ = conn
                .browser()
                .call(
                    "Target.closeTarget",
                    json!({"targetId": self.shared.target_id.as_str()}),
                    budget.child(Duration::from_secs(5)),
                )
                .await;
        }
        self.shared.tracker.close();
        let _ = tokio::time::timeout(budget.remaining(), self.shared.tracker.wait()).await;
    }
}

/// The inactive reason for a lost connection.
fn closed_reason_text(reason: Option<String>) -> String {
    format!(
        "connection closed: {}",
        reason.unwrap_or_else(|| "socket ended".into())
    )
}
