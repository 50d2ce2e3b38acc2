//! Warm sessions: the engine's own session per target, attached once
//! (`Target.attachToTarget`, `Runtime` and `Page` enabled) and kept; the
//! tracker task that keeps each one's frame → main-world execution context
//! table, the helper state per context and the open dialog, from the
//! session's events; routing an [`EvalTarget`] to a session and frame; and
//! waiting for a frame's context.

use super::reply::{cancelled_setup, setup_err, timeout_err};
use super::{lock, Engine, EvalTarget, CLEANUP_BUDGET};
use crate::busy::Unstick;
use crate::error::{DialogInfo, Error, Result, TimeoutKind};
use cdp_transport::{Budget, Command, Event, EventStream, FrameId, RecvError, Session, TargetId};
use chromiumoxide_cdp::cdp::browser_protocol::page::{
    self, EventJavascriptDialogClosed, EventJavascriptDialogOpening, GetFrameTreeParams,
};
use chromiumoxide_cdp::cdp::browser_protocol::target::{self, GetTargetInfoParams};
use chromiumoxide_cdp::cdp::js_protocol::runtime::{
    self, EventExecutionContextCreated, EventExecutionContextDestroyed,
    EventExecutionContextsCleared,
};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;
use tokio::sync::watch;
use tracing::{debug, warn};

/// A frame's main-world execution context on one session.
#[derive(Debug, Clone)]
pub(super) struct Ctx {
    pub(super) id: i64,
    pub(super) unique_id: Option<String>,
}

/// Whether the page-side helper ([`js`](super::js)) is in an execution context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HelperState {
    /// Installed: send the short wrapper.
    Installed,
    /// Installing does not stick (a frozen global object): always send the installing wrapper.
    Unstickable,
}

#[derive(Default)]
pub(super) struct WarmState {
    pub(super) contexts: HashMap<FrameId, Ctx>,
    pub(super) by_id: HashMap<i64, FrameId>,
    pub(super) dialog: Option<DialogInfo>,
    /// When `dialog` was seen opening, and a count of openings (so a check
    /// clears only the dialog it checked).
    pub(super) dialog_at: Option<(Instant, u64)>,
    pub(super) dialog_seq: u64,
    /// Helper state by execution context id (absent: not installed yet).
    pub(super) helpers: HashMap<i64, HelperState>,
}

/// One attached engine session with its tracker task.
pub(super) struct Warm {
    pub(super) session: Session,
    pub(super) target_id: TargetId,
    state: Arc<Mutex<WarmState>>,
    changed: watch::Receiver<u64>,
    tracker: tokio::task::JoinHandle<()>,
}

impl Drop for Warm {
    fn drop(&mut self) {
        self.tracker.abort();
    }
}

impl Warm {
    pub(super) fn lock(&self) -> MutexGuard<'_, WarmState> {
        lock(&self.state)
    }
    pub(super) fn forget_context(&self, id: i64) {
        let mut st = self.lock();
        st.helpers.remove(&id);
        if let Some(frame) = st.by_id.remove(&id) {
            if st.contexts.get(&frame).is_some_and(|c| c.id == id) {
                st.contexts.remove(&frame);
            }
        }
    }
}

/// The per-session tracker: main-world contexts by frame, and the open dialog.
async fn track(mut events: EventStream, state: Arc<Mutex<WarmState>>, tx: watch::Sender<u64>) {
    loop {
        match events.recv().await {
            Ok(ev) => {
                if apply(&state, &ev) {
                    tx.send_modify(|n| *n += 1);
                }
            }
            Err(RecvError::Lagged(n)) => warn!(
                n,
                "engine tracker lagged; execution context table may be stale"
            ),
            Err(_) => {
                tx.send_modify(|n| *n += 1);
                return;
            }
        }
    }
}

/// Applies one event to the tracked state; true when contexts changed.
fn apply(state: &Mutex<WarmState>, ev: &Event) -> bool {
    let mut st = lock(state);
    match ev.method.as_str() {
        EventExecutionContextCreated::IDENTIFIER => {
            let c = &ev.params["context"];
            let aux = &c["auxData"];
            let (Some(id), Some(frame)) = (c["id"].as_i64(), aux["frameId"].as_str()) else {
                return false;
            };
            if aux["isDefault"].as_bool() != Some(true) {
                return false;
            }
            let frame = FrameId::new(frame);
            st.by_id.insert(id, frame.clone());
            st.contexts.insert(
                frame,
                Ctx {
                    id,
                    unique_id: c["uniqueId"].as_str().map(str::to_string),
                },
            );
            true
        }
        EventExecutionContextDestroyed::IDENTIFIER => {
            let Some(id) = ev.params["executionContextId"].as_i64() else {
                return false;
            };
            st.helpers.remove(&id);
            if let Some(frame) = st.by_id.remove(&id) {
                if st.contexts.get(&frame).is_some_and(|c| c.id == id) {
                    st.contexts.remove(&frame);
                }
            }
            true
        }
        EventExecutionContextsCleared::IDENTIFIER => {
            st.contexts.clear();
            st.by_id.clear();
            st.helpers.clear();
            true
        }
        EventJavascriptDialogOpening::IDENTIFIER => {
            st.dialog = Some(parse_dialog(&ev.params));
            st.dialog_seq += 1;
            st.dialog_at = Some((Instant::now(), st.dialog_seq));
            false
        }
        EventJavascriptDialogClosed::IDENTIFIER => {
            st.dialog = None;
            st.dialog_at = None;
            false
        }
        _ => false,
    }
}

pub(super) fn parse_dialog(p: &Value) -> DialogInfo {
    let s = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_string);
    DialogInfo {
        dialog_type: s("type").unwrap_or_else(|| "unknown".into()),
        message: s("message").unwrap_or_default(),
        default_prompt: s("defaultPrompt"),
        frame_id: s("frameId").map(FrameId::new),
        url: s("url"),
        id: None,
    }
}

fn frame_in_tree(node: &Value, frame: &str) -> bool {
    if node["frame"]["id"].as_str() == Some(frame) {
        return true;
    }
    node["childFrames"]
        .as_array()
        .is_some_and(|c| c.iter().any(|n| frame_in_tree(n, frame)))
}

impl Engine {
    /// The warm session on `target`, attaching (and enabling Runtime/Page) if needed.
    pub(super) async fn warm_session(
        &self,
        target: &TargetId,
        budget: &Budget,
        start: Instant,
        unstick: Option<&Unstick>,
    ) -> Result<Arc<Warm>> {
        if let Some(w) = self.cached(target) {
            return Ok(w);
        }
        let _guard = tokio::select! {
            g = self.inner.attach_lock.lock() => g,
            _ = budget.cancel_token().cancelled() => return Err(cancelled_setup(budget, start)),
            _ = tokio::time::sleep_until(budget.deadline()) => {
                return Err(timeout_err(TimeoutKind::Setup, budget, start, false));
            }
        };
        if let Some(w) = self.cached(target) {
            return Ok(w);
        }
        let is_page = *target == self.inner.page_target;
        let session = self
            .inner
            .conn
            .attach(target, budget.clone())
            .await
            .map_err(|e| {
                if e.protocol_message().is_some() && !is_page {
                    Error::UnknownFrame {
                        frame_id: FrameId::new(target.as_str()),
                        target_id: self.inner.page_target.clone(),
                    }
                } else {
                    setup_err(e, budget, start, &format!("attaching to target {target}"))
                }
            })?;
        let events = session.subscribe();
        let state = Arc::new(Mutex::new(WarmState::default()));
        let (tx, rx) = watch::channel(0u64);
        let tracker = tokio::spawn(track(events, state.clone(), tx));
        let warm = Arc::new(Warm {
            session: session.clone(),
            target_id: target.clone(),
            state,
            changed: rx,
            tracker,
        });
        // `Runtime.enable` and `Page.enable` are renderer-bound: the page's
        // own script can hold them (then `unstick` terminates it).
        let enable = async {
            let rt = setup_call(&session, runtime::EnableParams::default(), budget, unstick);
            if is_page {
                let pg = setup_call(&session, page::EnableParams::default(), budget, unstick);
                let (a, b) = tokio::join!(rt, pg);
                a.map(drop).and(b.map(drop))
            } else {
                rt.await.map(drop)
            }
        };
        if let Err(e) = enable.await {
            let s = session.clone();
            let settling = unstick.cloned();
            tokio::spawn(async move {
                // A termination sent on it goes first.
                if let Some(u) = settling {
                    u.settled(CLEANUP_BUDGET).await;
                }
                s.detach(CLEANUP_BUDGET).await
            });
            return Err(setup_err(
                e,
                budget,
                start,
                &format!("enabling Runtime on target {target}"),
            ));
        }
        debug!(target_id = target.as_str(), session = ?session.id(), "engine session attached");
        lock(&self.inner.warm).insert(target.clone(), warm.clone());
        Ok(warm)
    }

    pub(super) fn cached(&self, target: &TargetId) -> Option<Arc<Warm>> {
        let mut map = lock(&self.inner.warm);
        match map.get(target) {
            Some(w) if w.session.closed_reason().is_none() => Some(w.clone()),
            Some(_) => {
                map.remove(target);
                None
            }
            None => None,
        }
    }

    /// Picks the session and frame for `target`.
    pub(super) async fn route(
        &self,
        page: &Arc<Warm>,
        target: &EvalTarget,
        budget: &Budget,
        start: Instant,
        unstick: &Unstick,
    ) -> Result<(Arc<Warm>, FrameId)> {
        let page_frame = FrameId::new(self.inner.page_target.as_str());
        match target {
            EvalTarget::MainFrame => Ok((page.clone(), page_frame)),
            EvalTarget::Frame(f) if *f == page_frame => Ok((page.clone(), page_frame)),
            EvalTarget::Frame(f) => {
                if page.lock().contexts.contains_key(f) {
                    return Ok((page.clone(), f.clone()));
                }
                // raw: the typed `page::Frame` has closed enums (secureContextType, crossOriginIsolatedContextType, gatedAPIFeatures, adFrameStatus) a newer Chromium extends; only frame ids are read
                let tree = unstick
                    .call(
                        &page.session,
                        GetFrameTreeParams::IDENTIFIER,
                        json!({}),
                        budget,
                    )
                    .await
                    .map_err(|e| setup_err(e, budget, start, "reading the frame tree"))?;
                if frame_in_tree(&tree["frameTree"], f.as_str()) {
                    return Ok((page.clone(), f.clone()));
                }
                // An OOPIF's target id equals its frame id.
                let info = self
                    .inner
                    .conn
                    .browser()
                    .execute(
                        GetTargetInfoParams {
                            target_id: Some(target::TargetId::new(f.as_str())),
                        },
                        budget.clone(),
                    )
                    .await;
                match info {
                    Ok(v) if v.target_info.r#type == "iframe" => {
                        let tid = TargetId::new(f.as_str());
                        let w = self
                            .warm_session(&tid, budget, start, Some(unstick))
                            .await?;
                        Ok((w, f.clone()))
                    }
                    Ok(_) => Err(Error::UnknownFrame {
                        frame_id: f.clone(),
                        target_id: self.inner.page_target.clone(),
                    }),
                    Err(e) if e.protocol_message().is_some() => Err(Error::UnknownFrame {
                        frame_id: f.clone(),
                        target_id: self.inner.page_target.clone(),
                    }),
                    Err(e) => Err(setup_err(e, budget, start, "looking up the frame's target")),
                }
            }
            EvalTarget::Oopif {
                target_id,
                frame_id,
            } => {
                let w = self
                    .warm_session(target_id, budget, start, Some(unstick))
                    .await?;
                let f = frame_id
                    .clone()
                    .unwrap_or_else(|| FrameId::new(target_id.as_str()));
                Ok((w, f))
            }
        }
    }

    /// Waits (under the budget) for the main-world context of `frame` on `warm`.
    pub(super) async fn context_for(
        &self,
        warm: &Warm,
        frame: &FrameId,
        not: Option<i64>,
    ) -> Result<Ctx> {
        let mut rx = warm.changed.clone();
        loop {
            if let Some(c) = warm
                .lock()
                .contexts
                .get(frame)
                .filter(|c| Some(c.id) != not)
                .cloned()
            {
                return Ok(c);
            }
            if let Some(reason) = warm.session.closed_reason() {
                return Err(Error::ContextDestroyed {
                    frame_id: frame.clone(),
                    message: format!("the engine session closed ({reason})"),
                });
            }
            // The outer select ends this wait at the deadline.
            if rx.changed().await.is_err() {
                return Err(Error::ContextDestroyed {
                    frame_id: frame.clone(),
                    message: "the engine session closed".into(),
                });
            }
        }
    }
}

/// Sends a renderer-bound setup command: through `unstick` (its watchdog
/// terminates the page's own script when the command is held) when there is
/// one, else on `session` alone.
async fn setup_call<C: Command>(
    session: &Session,
    cmd: C,
    budget: &Budget,
    unstick: Option<&Unstick>,
) -> cdp_transport::Result<C::Response> {
    match unstick {
        Some(u) => u.execute(session, cmd, budget).await,
        None => session.execute(cmd, budget.clone()).await,
    }
}
