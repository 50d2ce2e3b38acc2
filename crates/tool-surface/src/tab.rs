//! One tab as the tools see it: a [`Supervisor`] (dialogs, frames, routing,
//! console errors), an [`Engine`] (budgeted evaluate) and an
//! [`AxSnapshotter`] with the [`RefMap`] of the latest snapshot.
//!
//! This module owns no browser state of its own: every fact is read from the
//! supervisor's lock-free view or the latest ref map, and converted to the
//! JSON views of [`crate::types`]. The waiting it does, always under the
//! caller's budget: [`Tab::race_dialog`], which ends a renderer-bound call as
//! soon as the supervisor reports a dialog (unless an auto policy owns the
//! dialogs); [`Tab::ready`], which rebuilds the engine and the snapshotter
//! after the supervisor reconnected and lets an auto policy answer the
//! dialogs pending when a call starts.

use crate::error::{ErrorCode, ToolError};
use crate::types::{
    ClosedDialogView, ConsoleEntry, DialogView, FrameNode, FrameTreeView, SupervisorView,
};
use cdp_transport::{Budget, Connection, FrameId, SessionCloseReason, TargetId};
use evaluate::refs::{AxSnapshotter, RefMap};
use evaluate::{Engine, EngineConfig, EvalTarget};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use supervisor::{
    ClosedDialog, DialogEvent, DialogPolicy, FrameView, PendingDialog, Supervisor, SupervisorConfig,
};
use tokio::sync::broadcast::error::RecvError;

/// Bound on closing the engine's and snapshotter's sessions of a connection
/// the supervisor left (in the background; the old socket is usually gone).
const RETIRE_BUDGET: Duration = Duration::from_secs(2);
/// Most of a call's budget spent confirming with the supervisor that a
/// session the engine lost belonged to a closed tab (see [`Tab::closed_or`]).
const CLOSE_CONFIRM: Duration = Duration::from_millis(500);

/// Bound on `Page.bringToFront` before input events (see [`Tab::to_front`]).
const FRONT_BUDGET: Duration = Duration::from_millis(1000);

/// Bound on the live `Accessibility.getPartialAXTree` check of a ref the
/// latest snapshot showed disabled (see [`Tab::refuse_disabled`]).
const DISABLED_CHECK: Duration = Duration::from_millis(1000);

/// Chromium 156 cuts a dialog's message to this many UTF-16 code units
/// before `Page.javascriptDialogOpening` carries it (measured: a 20,000
/// character `alert` arrives with 10,240; 6,000 emoji arrive as 5,120).
pub(crate) const CHROMIUM_DIALOG_MESSAGE_CAP: usize = 10_240;

/// What the latest snapshot of a tab left out or marked, kept beside its
/// ref map for the errors of the ref tools.
#[derive(Debug, Default, Clone)]
pub(crate) struct SnapshotFacts {
    /// Refs of the whole AX tree that the rendered text left out (cut by the
    /// size cap, or not interactive under `interactive_only`).
    pub left_out: HashSet<String>,
    /// True when the text was cut at its size cap.
    pub truncated: bool,
    /// True when the snapshot was taken with `interactive_only`.
    pub interactive_only: bool,
    /// Refs whose AX node was disabled when the snapshot was taken.
    pub disabled: HashSet<String>,
}
/// The engine and the snapshotter of a tab, on the connection of one
/// supervisor generation (see [`supervisor::SupervisorView::generation`]).
struct Parts {
    engine: Engine,
    ax: AxSnapshotter,
    /// The supervisor's view generation they were built for.
    generation: u64,
}

/// One supervised page target and what the tools keep for it.
pub(crate) struct Tab {
    pub target_id: TargetId,
    pub sup: Supervisor,
    /// Rebuilt by [`Tab::ready`] after the supervisor reconnected.
    parts: Mutex<Arc<Parts>>,
    engine_config: EngineConfig,
    /// Held while the parts are rebuilt (one rebuild at a time).
    rebuild: tokio::sync::Mutex<()>,
    /// The ref map of the latest snapshot; `None` before the first one.
    refs: Mutex<Option<RefMap>>,
    /// What the latest snapshot left out or marked (with `refs`).
    facts: Mutex<SnapshotFacts>,
    /// Set when the ref map was dropped because the parts were rebuilt.
    refs_dropped: Mutex<Option<String>>,
}

impl std::fmt::Debug for Tab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tab")
            .field("target_id", &self.target_id)
            .finish_non_exhaustive()
    }
}

/// Result of a call raced against a dialog opening.
pub(crate) enum Raced<T> {
    /// The call finished first.
    Done(T),
    /// A dialog opened (or was already pending) first.
    Dialog(DialogView),
}

impl Tab {
    /// Builds the tab around a running supervisor: an engine for its target
    /// and a snapshotter on a session of its own.
    ///
    /// # Errors
    /// The snapshotter's attach failing (`browser_closed`, `timeout`, ...).
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped future may leave a session attached.
    pub async fn from_supervisor(
        sup: Supervisor,
        engine_config: EngineConfig,
        budget: &Budget,
    ) -> Result<Arc<Tab>, ToolError> {
        let target_id = sup.target_id().clone();
        let parts = Self::build(&sup, &target_id, &engine_config, budget).await?;
        Ok(Arc::new(Tab {
            target_id,
            sup,
            parts: Mutex::new(Arc::new(parts)),
            engine_config,
            rebuild: tokio::sync::Mutex::new(()),
            refs: Mutex::new(None),
            facts: Mutex::new(SnapshotFacts::default()),
            refs_dropped: Mutex::new(None),
        }))
    }

    /// An engine and a snapshotter on the supervisor's current connection.
    async fn build(
        sup: &Supervisor,
        target_id: &TargetId,
        engine_config: &EngineConfig,
        budget: &Budget,
    ) -> Result<Parts, ToolError> {
        // The generation first: if a reconnect lands in between, the next
        // call sees a newer generation and builds again.
        let generation = sup.snapshot().generation;
        let conn = sup.connection();
        // A renderer busy with its page's own script is stopped through the
        // supervisor's sessions: bound in the renderer before any script
        // ran, they reach it where a session attached later cannot.
        let route = terminate_route(sup);
        let engine = Engine::new(conn.clone(), target_id.clone(), engine_config.clone());
        engine.set_terminate_route(route.clone());
        let ax = AxSnapshotter::attach(&conn, target_id, budget.clone())
            .await
            .map_err(|e| map_eval(&e, "attaching the snapshotter"))?
            .with_terminate_route(route)
            .with_engine(&engine)
            .with_facts(Arc::new(SupervisorFacts(sup.clone())));
        Ok(Parts {
            engine,
            ax,
            generation,
        })
    }

    fn parts(&self) -> Arc<Parts> {
        self.parts.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The tab's evaluate engine (on the supervisor's connection as of the
    /// last [`Tab::ready`]).
    pub fn engine(&self) -> Engine {
        self.parts().engine.clone()
    }

    /// The tab's AX snapshotter (same connection as [`Tab::engine`]).
    pub fn ax(&self) -> AxSnapshotter {
        self.parts().ax.clone()
    }

    /// True under `auto_dismiss` / `auto_accept`: every dialog is the
    /// policy's to answer, so none gates or ends a call.
    pub fn auto_policy(&self) -> bool {
        self.sup.dialog_policy() != DialogPolicy::MustRespond
    }

    /// Gets the tab ready for a call to `tool`, within `budget`:
    ///
    /// 1. after the supervisor reconnected (a newer view generation, active
    ///    again), rebuilds the engine and the snapshotter on its new
    ///    connection (the ref map is dropped: its sessions were on the old one);
    /// 2. under an auto policy, waits for the policy to answer the dialogs
    ///    pending now (new ones opening meanwhile are the policy's too);
    /// 3. [`Tab::gate`].
    ///
    /// # Errors
    /// As [`Tab::gate`]; an attach failing during the rebuild; under an auto
    /// policy, `dialog_pending` when the policy has not answered a dialog
    /// within the budget.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped rebuild leaves the old parts in place.
    pub async fn ready(&self, tool: &str, budget: &Budget) -> Result<(), ToolError> {
        self.refresh(budget).await?;
        if self.auto_policy() {
            let ids: Vec<String> = self
                .sup
                .snapshot()
                .pending_dialogs
                .iter()
                .map(|d| d.id.clone())
                .collect();
            if !ids.is_empty() {
                let r = self
                    .sup
                    .wait_until(budget.clone(), |v| {
                        !v.active || !v.pending_dialogs.iter().any(|d| ids.contains(&d.id))
                    })
                    .await;
                if r.is_err() {
                    if let Some(d) = self
                        .sup
                        .snapshot()
                        .pending_dialogs
                        .iter()
                        .find(|d| ids.contains(&d.id))
                    {
                        let mut e = ToolError::dialog_pending(dialog_view(d), tool);
                        e.message = format!(
                            "{}; the {} policy did not answer it within timeout_ms={}",
                            e.message,
                            self.sup.dialog_policy().as_str(),
                            budget.total().as_millis()
                        );
                        return Err(e);
                    }
                }
            }
        }
        self.gate(tool)
    }

    /// Makes the tab the front tab of its window (`Page.bringToFront`)
    /// before real input events and screenshots: Chromium renders only the
    /// front tab of a window; a tab behind it is `hidden`, delivers a mouse
    /// or key event only after ~5 s and produces no frame for
    /// `Page.captureScreenshot` (measured on Chromium 156 with two tabs in
    /// one window, no dialog involved). Tabs the supervisor opens have a
    /// window of their own (`newWindow`) and stay visible; popups and tabs
    /// of a browser given by URL may share one. At most
    /// [`FRONT_BUDGET`] of `budget`; a failure is logged and the action
    /// goes ahead (it reports its own error).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn to_front(&self, budget: &Budget) {
        let r = self
            .sup
            .page_session()
            .call(
                "Page.bringToFront",
                serde_json::json!({}),
                budget.child(FRONT_BUDGET),
            )
            .await;
        if let Err(e) = r {
            tracing::debug!(target_id = %self.target_id, error = %e, "Page.bringToFront failed; acting anyway");
        }
    }

    /// Rebuilds the parts when the supervisor is active on a newer
    /// generation than they were built for.
    pub async fn refresh(&self, budget: &Budget) -> Result<(), ToolError> {
        let stale = |t: &Tab| {
            let v = t.sup.snapshot();
            v.active && v.generation != t.parts().generation
        };
        if !stale(self) {
            return Ok(());
        }
        let deadline = budget.deadline();
        let Ok(_guard) = tokio::time::timeout_at(deadline, self.rebuild.lock()).await else {
            return Err(ToolError::timeout(
                "re-attaching to the tab after a reconnect",
                budget.total().as_millis() as u64,
            ));
        };
        if !stale(self) {
            return Ok(());
        }
        let fresh = Self::build(&self.sup, &self.target_id, &self.engine_config, budget).await?;
        tracing::info!(
            target_id = %self.target_id,
            generation = fresh.generation,
            "the supervisor reconnected: engine and snapshotter rebuilt on its new connection"
        );
        let old = std::mem::replace(
            &mut *self.parts.lock().unwrap_or_else(|p| p.into_inner()),
            Arc::new(fresh),
        );
        if self
            .refs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .is_some()
        {
            *self.refs_dropped.lock().unwrap_or_else(|p| p.into_inner()) =
                Some("the browser connection was re-established since the last snapshot".into());
        }
        tokio::spawn(async move {
            let b = Budget::new(RETIRE_BUDGET);
            old.engine.close(&b).await;
            old.ax.close(b).await;
        });
        Ok(())
    }

    /// Supervises `target_id` (an existing page or popup) and builds the tab.
    ///
    /// # Errors
    /// As [`Supervisor::attach`] and [`Tab::from_supervisor`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped future may leave the target attached.
    pub async fn attach(
        conn: Connection,
        target_id: TargetId,
        config: SupervisorConfig,
        engine_config: EngineConfig,
        budget: &Budget,
    ) -> Result<Arc<Tab>, ToolError> {
        let sup = Supervisor::attach(conn, target_id, config)
            .await
            .map_err(|e| map_supervisor(&e, "attaching to the tab"))?;
        Self::from_supervisor(sup, engine_config, budget).await
    }

    /// Opens a new blank tab and supervises it.
    ///
    /// # Errors
    /// As [`Supervisor::new_tab`] and [`Tab::from_supervisor`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped future may leave a tab open.
    pub async fn open(
        conn: Connection,
        config: SupervisorConfig,
        engine_config: EngineConfig,
        budget: &Budget,
    ) -> Result<Arc<Tab>, ToolError> {
        let sup = Supervisor::new_tab(conn, config)
            .await
            .map_err(|e| map_supervisor(&e, "opening a tab"))?;
        Self::from_supervisor(sup, engine_config, budget).await
    }

    /// Stops the supervisor and detaches the engine's and snapshotter's
    /// sessions (the tab itself is closed by the caller when wanted).
    ///
    /// # Cancel safety
    /// Cancel safe: each step stops its own work before awaiting.
    pub async fn shutdown(&self, budget: &Budget) {
        let parts = self.parts();
        parts.engine.close(budget).await;
        parts.ax.close(budget.clone()).await;
        self.sup.stop(budget.clone()).await;
    }

    /// The ref map of the latest snapshot.
    pub fn refs(&self) -> Option<RefMap> {
        self.refs.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the ref map (a new snapshot was rendered) and what that
    /// snapshot left out or marked.
    pub fn store_refs(&self, refs: RefMap, facts: SnapshotFacts) {
        *self.refs.lock().unwrap_or_else(|p| p.into_inner()) = Some(refs);
        *self.facts.lock().unwrap_or_else(|p| p.into_inner()) = facts;
        *self.refs_dropped.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn facts(&self) -> SnapshotFacts {
        self.facts.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The ref map holding `ref_id`. Errors:
    /// * `unknown_ref` when no snapshot was taken yet;
    /// * `stale_ref` when the map was dropped after a reconnect;
    /// * `unknown_ref` saying so when the latest snapshot left the ref out
    ///   (its text was cut at the size cap, or `interactive_only` dropped
    ///   the node), with a next step that gets a usable ref;
    /// * `unknown_ref` when the latest snapshot has no such ref.
    pub fn refs_for(&self, ref_id: &str) -> Result<RefMap, ToolError> {
        let map = self.refs_map_for(ref_id)?;
        if map.get(ref_id).is_some() {
            return Ok(map);
        }
        let facts = self.facts();
        if facts.left_out.contains(ref_id) {
            let (why, next) = if facts.truncated && !facts.interactive_only {
                (
                    format!("the latest snapshot's text was cut at its {} KiB cap and ref {ref_id:?} was past the cut, so it was left out", crate::tools::MAX_SNAPSHOT_BYTES / 1024),
                    "call browser_snapshot with {\"interactive_only\": true}: a shorter text that keeps the refs of buttons, links and form fields".to_string(),
                )
            } else if facts.truncated {
                (
                    format!("the latest snapshot (interactive_only) was still cut at its {} KiB cap and ref {ref_id:?} was past the cut", crate::tools::MAX_SNAPSHOT_BYTES / 1024),
                    "the page is too large for one snapshot: reach the element with browser_evaluate (document.querySelector) or browser_cdp (DOM.querySelector), or navigate to a smaller part of the site".to_string(),
                )
            } else {
                (
                    format!("the latest snapshot was taken with interactive_only, which leaves out ref {ref_id:?} (not an interactive element)"),
                    "call browser_snapshot without interactive_only to get the refs of every node".to_string(),
                )
            };
            return Err(ToolError::new(
                ErrorCode::UnknownRef,
                format!("ref {ref_id:?} is not usable: {why}"),
            )
            .next(next));
        }
        Err(ToolError::new(
            ErrorCode::UnknownRef,
            format!("no ref {ref_id:?} in the latest snapshot"),
        )
        .next("call browser_snapshot and use a ref from it (refs look like e3)"))
    }

    /// Refuses a ref the latest snapshot showed disabled (AX `disabled`)
    /// when it is still disabled now: one `Accessibility.getPartialAXTree`
    /// on the ref's session (at most [`DISABLED_CHECK`] of `budget`), sent
    /// only for refs the snapshot marked. A control enabled since the
    /// snapshot, a ref without a backend node, or a check that fails goes
    /// ahead (the action reports its own errors).
    ///
    /// # Errors
    /// `not_interactable` naming the ref and saying it is disabled.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn refuse_disabled(
        &self,
        refs: &RefMap,
        ref_id: &str,
        tool: &str,
        budget: &Budget,
    ) -> Result<(), ToolError> {
        if !self.facts().disabled.contains(ref_id) {
            return Ok(());
        }
        let Some(entry) = refs.get(ref_id) else {
            return Ok(());
        };
        let Some(backend) = entry.backend_node_id else {
            return Ok(());
        };
        let r = entry
            .session()
            .call(
                "Accessibility.getPartialAXTree",
                serde_json::json!({"backendNodeId": backend.0, "fetchRelatives": false}),
                budget.child(DISABLED_CHECK),
            )
            .await;
        let Ok(v) = r else {
            return Ok(());
        };
        let nodes = v["nodes"].as_array().cloned().unwrap_or_default();
        let node = nodes
            .iter()
            .find(|n| n["backendDOMNodeId"].as_i64() == Some(backend.0))
            .or_else(|| nodes.first());
        let disabled = node
            .and_then(|n| n["properties"].as_array())
            .is_some_and(|props| {
                props
                    .iter()
                    .any(|p| p["name"] == "disabled" && p["value"]["value"].as_bool() == Some(true))
            });
        if !disabled {
            return Ok(());
        }
        Err(ToolError::new(
            ErrorCode::NotInteractable,
            format!(
                "ref {ref_id} ({} {:?}) is disabled, so {tool} would have no effect",
                entry.role, entry.name
            ),
        )
        .next("do what enables it first (fill the form fields it needs, tick a checkbox), call browser_snapshot, then retry; or pick another ref"))
    }

    /// The ref map, or the error for a tab without one (see [`Tab::refs_for`]).
    fn refs_map_for(&self, ref_id: &str) -> Result<RefMap, ToolError> {
        self.refs().ok_or_else(|| {
            match self
                .refs_dropped
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
            {
                Some(why) => ToolError::new(
                    ErrorCode::StaleRef,
                    format!("ref {ref_id:?} is from an older snapshot: {why}"),
                )
                .next("call browser_snapshot for fresh refs"),
                None => ToolError::new(
                    ErrorCode::UnknownRef,
                    format!("no ref {ref_id:?}: no snapshot has been taken in this tab yet"),
                )
                .next("call browser_snapshot and use a ref from it (refs look like e3)"),
            }
        })
    }

    pub fn pending(&self) -> Vec<DialogView> {
        self.sup
            .snapshot()
            .pending_dialogs
            .iter()
            .map(dialog_view)
            .collect()
    }

    pub fn first_pending(&self) -> Option<DialogView> {
        self.sup.snapshot().pending_dialogs.first().map(dialog_view)
    }

    /// `Err(dialog_pending)` when a dialog blocks the page (not under an
    /// auto policy: its dialogs never gate a call); `browser_closed` when the
    /// connection is gone or the supervisor is inactive for any reason but a
    /// crash (the tab was closed, its target destroyed, …); `target_crashed`
    /// after a renderer crash.
    pub fn gate(&self, tool: &str) -> Result<(), ToolError> {
        let v = self.sup.snapshot();
        if !self.auto_policy() {
            if let Some(d) = v.pending_dialogs.first() {
                return Err(ToolError::dialog_pending(dialog_view(d), tool));
            }
        }
        // The engine and the snapshotter live on the connection of the
        // supervisor generation they were built for (see `Tab::ready`).
        let ours = self.parts().ax.page_session().connection().clone();
        if let Some(r) = ours
            .closed_reason()
            .or_else(|| self.sup.connection().closed_reason())
        {
            return Err(ToolError::browser_closed(r));
        }
        if self.sup.page_session().is_crashed() {
            return Err(ToolError::crashed());
        }
        if !v.active {
            return Err(inactive_error(v.reason.as_deref()));
        }
        Ok(())
    }

    /// The error of a call that failed because the tab went away under it:
    /// `browser_closed` (connection gone, or the supervisor inactive: tab
    /// closed, target destroyed) or `target_crashed`; `None` while the tab is
    /// fine.
    fn gone(&self) -> Option<ToolError> {
        let parts = self.parts();
        if let Some(r) = parts.ax.page_session().connection().closed_reason() {
            return Some(ToolError::browser_closed(r));
        }
        if self.sup.page_session().is_crashed() || parts.ax.page_session().is_crashed() {
            return Some(ToolError::crashed());
        }
        let v = self.sup.snapshot();
        (!v.active).then(|| inactive_error(v.reason.as_deref()))
    }

    /// `target_crashed` or `browser_closed` instead of `err` when the
    /// tab's renderer crashed, the tab was closed or the connection closed
    /// under the call: the lower crates report that as a destroyed context
    /// or a closed session.
    pub fn crashed_or(&self, err: ToolError) -> ToolError {
        self.gone().unwrap_or(err)
    }

    /// As [`Tab::crashed_or`], for an error the engine reports as
    /// `navigated` / `context_destroyed`: the engine says that also when its
    /// session went away, which is what a tab closed by another client looks
    /// like. When the tab's own sessions were detached or destroyed, waits
    /// (at most [`CLOSE_CONFIRM`] of `budget`) for the supervisor to
    /// confirm it is inactive, and reports `browser_closed` then.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn closed_or(&self, err: ToolError, budget: &Budget) -> ToolError {
        if err.code != ErrorCode::Navigated {
            return self.crashed_or(err);
        }
        if let Some(e) = self.gone() {
            return e;
        }
        let parts = self.parts();
        let lost = |r: Option<SessionCloseReason>| {
            matches!(
                r,
                Some(SessionCloseReason::Detached | SessionCloseReason::TargetDestroyed)
            )
        };
        if lost(self.sup.page_session().closed_reason())
            || lost(parts.ax.page_session().closed_reason())
        {
            let _ = self
                .sup
                .wait_until(budget.child(CLOSE_CONFIRM), |v| !v.active)
                .await;
            if let Some(e) = self.gone() {
                return e;
            }
        }
        err
    }

    /// `{active, reason?}` for the agent. A crash the transport already
    /// saw on the page session (`Inspector.targetCrashed`) but the
    /// supervisor's event loop has not applied yet shows as
    /// `{active: false, reason: "target crashed"}`, as the calls report it.
    pub fn supervisor_view(&self) -> SupervisorView {
        let v = self.sup.snapshot();
        if v.active && self.sup.page_session().is_crashed() {
            return SupervisorView {
                active: false,
                reason: Some("target crashed".into()),
            };
        }
        SupervisorView {
            active: v.active,
            reason: v.reason.clone(),
        }
    }

    pub fn recent(&self) -> Vec<ClosedDialogView> {
        self.sup
            .snapshot()
            .recent_dialogs
            .iter()
            .map(closed_view)
            .collect()
    }

    /// Console errors seen since the tab was supervised (the ring keeps the last 50).
    pub fn console_total(&self) -> usize {
        usize::try_from(self.sup.snapshot().console_errors_total).unwrap_or(usize::MAX)
    }

    /// The console-error ring (newest last).
    pub fn console(&self) -> Vec<ConsoleEntry> {
        self.sup
            .snapshot()
            .console_errors
            .iter()
            .map(|c| ConsoleEntry {
                kind: c.kind.clone(),
                text: c.text.clone(),
                url: c.url.clone(),
            })
            .collect()
    }

    pub fn main_url(&self) -> String {
        self.sup
            .snapshot()
            .frame_tree
            .top
            .as_ref()
            .map(|t| t.url.clone())
            .unwrap_or_default()
    }

    /// The supervisor's flat frame list, nested for the agent.
    pub fn frame_tree(&self) -> FrameTreeView {
        let v = self.sup.snapshot();
        let ft = &v.frame_tree;
        fn node(f: &FrameView, all: &[FrameView], depth: usize) -> FrameNode {
            let children = if depth > all.len() {
                Vec::new()
            } else {
                all.iter()
                    .filter(|c| c.parent_frame_id.as_ref() == Some(&f.frame_id))
                    .map(|c| node(c, all, depth + 1))
                    .collect()
            };
            FrameNode {
                frame_id: f.frame_id.as_str().to_string(),
                url: f.url.clone(),
                name: f.name.clone().filter(|n| !n.is_empty()),
                oopif: f.is_oopif,
                children,
            }
        }
        let top = match &ft.top {
            Some(t) => node(t, &ft.children, 0),
            None => FrameNode {
                frame_id: self.target_id.as_str().to_string(),
                url: String::new(),
                name: None,
                oopif: false,
                children: Vec::new(),
            },
        };
        FrameTreeView {
            top,
            truncated: ft.truncated,
        }
    }

    /// Where `browser_evaluate {frame_id}` runs, from the supervisor's routing:
    /// the top frame → the main frame; an OOPIF → its own target; a
    /// same-process frame → that frame in the target that owns it.
    pub fn eval_target(&self, frame_id: &str) -> Result<EvalTarget, ToolError> {
        let fid = FrameId::new(frame_id);
        match self.sup.route(&fid) {
            Ok(r) if r.is_oopif => Ok(EvalTarget::Oopif {
                target_id: r
                    .session
                    .target_id()
                    .cloned()
                    .unwrap_or_else(|| TargetId::new(frame_id)),
                frame_id: None,
            }),
            Ok(_) => Ok(EvalTarget::MainFrame),
            Err(supervisor::Error::SameProcessFrame { .. }) => {
                let ctx = self
                    .sup
                    .frame_context(&fid)
                    .map_err(|e| map_supervisor(&e, "browser_evaluate"))?;
                match ctx.session.target_id() {
                    Some(t) if t != &self.target_id => Ok(EvalTarget::Oopif {
                        target_id: t.clone(),
                        frame_id: Some(fid),
                    }),
                    _ => Ok(EvalTarget::Frame(fid)),
                }
            }
            Err(e) => Err(map_supervisor(&e, "browser_evaluate")),
        }
    }

    /// Runs `fut`, but returns as soon as the supervisor reports a dialog
    /// (or at once when one is already pending).
    ///
    /// Under an auto policy (`auto_dismiss` / `auto_accept`) every dialog is
    /// the policy's: it is answered within moments, the renderer moves on,
    /// and `fut` (bounded by its own budget) simply runs to its end.
    ///
    /// Watches both `Supervisor::dialog_events` and `Supervisor::changes`
    /// (the view is stored before the event is sent, so either suffices; the
    /// view change also covers a lagged event receiver).
    ///
    /// # Cancel safety
    /// Cancel safe as far as this tab goes; `fut` is dropped with it.
    pub async fn race_dialog<T>(&self, fut: impl std::future::Future<Output = T>) -> Raced<T> {
        if self.auto_policy() {
            return Raced::Done(fut.await);
        }
        let mut rx = self.sup.dialog_events();
        let mut views = self.sup.changes();
        let mut views_open = true;
        if let Some(d) = self.first_pending() {
            return Raced::Dialog(d);
        }
        tokio::pin!(fut);
        loop {
            tokio::select! {
                biased;
                v = &mut fut => return Raced::Done(v),
                ev = rx.recv() => match ev {
                    Ok(DialogEvent::Opened(d)) => return Raced::Dialog(dialog_view(&d)),
                    Ok(_) => {}
                    Err(RecvError::Lagged(_)) => {
                        if let Some(d) = self.first_pending() {
                            return Raced::Dialog(d);
                        }
                    }
                    Err(RecvError::Closed) => return Raced::Done(fut.await),
                },
                r = views.changed(), if views_open => match r {
                    Ok(()) => {
                        if let Some(d) = self.first_pending() {
                            return Raced::Dialog(d);
                        }
                    }
                    Err(_) => views_open = false,
                },
            }
        }
    }

    /// The supervisor's record of a dialog the engine saw open: the first
    /// pending one, or, when a policy, the watchdog or the browser already
    /// closed it, the one of the same kind and message closed since
    /// `since_ms` (wall clock, ms since the Unix epoch). Both sessions get
    /// Chromium's `Page.javascriptDialogOpening` over the same socket, but
    /// the supervisor may record it a moment after the engine ends its
    /// evaluate, so this waits within `budget`.
    ///
    /// # Errors
    /// `internal` when the supervisor has no record of it within `budget`
    /// (its event stream is behind or lost; the error names the dialog).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn dialog_seen_by_engine(
        &self,
        info: &evaluate::DialogInfo,
        since_ms: u64,
        budget: &Budget,
    ) -> Result<DialogView, ToolError> {
        let closed_match = |v: &supervisor::SupervisorView| {
            v.recent_dialogs
                .iter()
                .rev()
                .find(|c| {
                    c.closed_at_ms >= since_ms
                        && c.dialog.kind == info.dialog_type
                        && c.dialog.message == info.message
                })
                .map(|c| dialog_view(&c.dialog))
        };
        let seen = self
            .sup
            .wait_until(budget.clone(), |v| {
                !v.pending_dialogs.is_empty() || closed_match(v).is_some()
            })
            .await;
        match seen {
            Ok(v) => match v.pending_dialogs.first() {
                Some(d) => Ok(dialog_view(d)),
                None => closed_match(&v).ok_or_else(|| {
                    ToolError::internal("the supervisor's dialog record changed while read")
                }),
            },
            Err(_) => Err(ToolError::internal(format!(
                "a {} dialog ({:?}) ended the evaluate, but the tab's supervisor has no record of it after {} ms",
                info.dialog_type,
                info.message,
                budget.total().as_millis()
            ))
            .next("call browser_snapshot: it lists pending and recent dialogs")),
        }
    }
}

/// The error of a call on a tab whose supervisor is inactive: a crash is
/// `target_crashed`; a lost connection is `browser_closed` naming it;
/// anything else (target destroyed, closed by another client, page session
/// gone for good) is `browser_closed` "the tab was closed".
pub(crate) fn inactive_error(reason: Option<&str>) -> ToolError {
    let reason = reason.unwrap_or("no reason given");
    if reason.contains("crash") {
        return ToolError::crashed();
    }
    match reason.strip_prefix("connection closed: ") {
        Some(r) => ToolError::browser_closed(r),
        None => ToolError::tab_closed(reason),
    }
}

pub(crate) fn dialog_view(d: &PendingDialog) -> DialogView {
    DialogView {
        id: d.id.clone(),
        kind: d.kind.clone(),
        message: d.message.clone(),
        default_prompt: d.default_prompt.clone(),
        frame_id: d.frame_id.as_ref().map(|f| f.as_str().to_string()),
        url: Some(d.url.clone()).filter(|u| !u.is_empty()),
        message_truncated: message_at_cap(&d.message),
    }
}

/// True when a dialog message is at [`CHROMIUM_DIALOG_MESSAGE_CAP`] (so
/// Chromium probably cut it).
pub(crate) fn message_at_cap(message: &str) -> bool {
    message.encode_utf16().count() >= CHROMIUM_DIALOG_MESSAGE_CAP
}

pub(crate) fn closed_view(c: &ClosedDialog) -> ClosedDialogView {
    ClosedDialogView {
        id: c.dialog.id.clone(),
        kind: c.dialog.kind.clone(),
        message: c.dialog.message.clone(),
        closed_by: c.closed_by.as_str().into(),
        accepted: c.accepted,
        user_input: c.user_input.clone(),
    }
}

/// Maps a transport error to the agent's error.
pub(crate) fn map_transport(e: &cdp_transport::Error, what: &str) -> ToolError {
    use cdp_transport::Error as E;
    match e {
        E::Timeout { budget, .. } => ToolError::timeout(what, budget.as_millis() as u64),
        E::ConnectionClosed { reason } => ToolError::browser_closed(reason),
        E::TargetCrashed { .. } => ToolError::crashed(),
        E::SessionClosed { .. } => ToolError::new(ErrorCode::BrowserClosed, format!("{what}: {e}"))
            .next("call browser_snapshot (the frame or tab may be gone), or browser_tabs to pick another tab"),
        E::Protocol { .. } => ToolError::new(ErrorCode::CdpError, format!("{what}: {e}")),
        _ => ToolError::internal(format!("{what}: {e}")),
    }
}

/// Maps a supervisor error (by its `code()`) to the agent's error.
pub(crate) fn map_supervisor(e: &supervisor::Error, what: &str) -> ToolError {
    match e.code() {
        // The supervisor's text starts with its code ("no_dialog: …"); the
        // agent sees the code in `code` already.
        "no_dialog" | "unknown_dialog" => ToolError::new(
            ErrorCode::NoDialog,
            e.to_string()
                .strip_prefix("no_dialog: ")
                .map(str::to_string)
                .unwrap_or_else(|| e.to_string()),
        )
            .next("call browser_snapshot: pending_dialogs lists what can be answered, recent_dialogs what was closed already"),
        // `candidates` is filled by the caller from the view (it has the whole dialogs).
        "ambiguous_dialog" => ToolError::new(ErrorCode::AmbiguousDialog, e.to_string())
            .next("call browser_dialog again with dialog_id set to one of candidates[].id"),
        "unknown_frame" => {
            let msg = match e {
                supervisor::Error::UnknownFrame { frame_id } => format!(
                    "{what}: frame {frame_id} is not in the frame tree (it was removed, or its page navigated)"
                ),
                _ => format!("{what}: {e}"),
            };
            ToolError::new(ErrorCode::UnknownFrame, msg)
                .next("call browser_snapshot and use a frame_id from its frame_tree")
        }
        "same_process_frame" => ToolError::new(
            ErrorCode::NotOopif,
            format!("{what}: {e}"),
        )
        .next("use browser_evaluate with this frame_id, or browser_cdp without frame_id and pass frameId in params"),
        "inactive" => {
            if e.to_string().contains("crash") {
                ToolError::crashed()
            } else {
                ToolError::new(ErrorCode::BrowserClosed, format!("{what}: {e}"))
                    .next("call browser_tabs to pick another tab, or restart the tabwarden server")
            }
        }
        "timeout" => ToolError::new(ErrorCode::Timeout, format!("{what}: {e}"))
            .next("call browser_snapshot to see the page state, then retry with a larger timeout_ms (max 120000)"),
        _ => match e {
            supervisor::Error::Answer { source, .. } | supervisor::Error::Cdp { source, .. } => {
                let mut t = map_transport(source, what);
                t.message = format!("{what}: {e}");
                t
            }
            _ => ToolError::internal(format!("{what}: {e}")),
        },
    }
}

/// The supervisor's frame state, as the facts the refs check on each
/// action (a frame's current loader), with no CDP call.
struct SupervisorFacts(Supervisor);

impl evaluate::PageFacts for SupervisorFacts {
    fn loader_of(&self, frame: &FrameId) -> Option<cdp_transport::LoaderId> {
        self.0.frame_loader(frame)
    }
}

/// The supervisor's session of a target (the tab's page session, or its
/// session of a cross-site iframe, whose target id is its frame id); none
/// while a dialog is pending (a dialog, not a script, holds the renderer,
/// and a termination would end the page's script once it is answered).
fn terminate_route(sup: &Supervisor) -> evaluate::TerminateRoute {
    let sup = sup.clone();
    Arc::new(move |target: &TargetId| {
        if !sup.snapshot().pending_dialogs.is_empty() {
            return None;
        }
        if target == sup.target_id() {
            return Some(sup.page_session());
        }
        sup.route(&FrameId::new(target.as_str()))
            .ok()
            .filter(|r| r.is_oopif)
            .map(|r| r.session)
    })
}

/// Maps an evaluate-crate error (by its `code()`) to the agent's error.
/// `dialog_opened` is handled by the callers (they need the supervisor's dialog id).
pub(crate) fn map_eval(e: &evaluate::Error, what: &str) -> ToolError {
    const FRESH: &str = "call browser_snapshot for fresh refs";
    match e.code() {
        "unknown_ref" => ToolError::new(ErrorCode::UnknownRef, e.to_string())
            .next("call browser_snapshot and use a ref from it (refs look like e3)"),
        "stale_ref" => ToolError::new(ErrorCode::StaleRef, e.to_string()).next(FRESH),
        "not_interactable" => ToolError::new(ErrorCode::NotInteractable, e.to_string())
            .next("call browser_snapshot: the element may be hidden or have no size; pick another ref"),
        // No code of its own in this schema version: the element takes no text.
        "not_editable" => ToolError::new(ErrorCode::NotInteractable, format!("{what}: {e}"))
            .next("browser_type takes a text field, a text area, a contenteditable element, or a select (it picks the option with that text); use browser_click for buttons, links and checkboxes, or call browser_snapshot for the right ref"),
        "invalid_key" => ToolError::invalid("key", e.to_string())
            .next("use a KeyboardEvent.key name: Enter, Tab, Escape, Backspace, Delete, ArrowUp/Down/Left/Right, Home, End, PageUp, PageDown, Space, or one character"),
        "timeout" => ToolError::new(ErrorCode::Timeout, match e {
            evaluate::Error::Timeout { budget, .. } => format!(
                "{what} did not finish within timeout_ms={}: {e}",
                budget.as_millis()
            ),
            _ => format!("{what}: {e}"),
        })
            .next(match e {
                // The script never ran: nothing in it to fix.
                evaluate::Error::Timeout { kind: evaluate::TimeoutKind::Setup, .. } => {
                    "call browser_snapshot to see the page state, then call again (with a larger timeout_ms if the page is slow)"
                }
                _ => "fix the script (an endless loop or a promise that never settles?) or raise timeout_ms (max 120000)",
            }),
        // No code of its own in this schema version: a timeout whose
        // message says what kept the page busy and what was done about it.
        "page_busy" => ToolError::new(ErrorCode::Timeout, format!("{what}: {e}")).next(match e {
            evaluate::Error::PageBusy { stopped: true, .. } => format!(
                "call {what} again: the page's script was stopped; if the page starts it again, leave the page with browser_navigate"
            ),
            _ => "call browser_snapshot to see the page state, then call again; if the page stays busy, leave it with browser_navigate".into(),
        }),
        "cancelled" => ToolError::internal(format!("{what}: {e}")),
        "navigated" | "context_destroyed" => ToolError::new(ErrorCode::Navigated, format!("{what}: {e}"))
            .next("call browser_snapshot to see the new page, then decide whether to run it again"),
        "invalid_source" => ToolError::new(ErrorCode::ScriptError, format!("{what}: {e}"))
            .next("fix the syntax: pass an expression, a function such as el => el.textContent, or statements (the value of the last expression statement is returned; with await, use return)"),
        "js_exception" => ToolError::new(ErrorCode::ScriptError, format!("{what}: {e}"))
            .next("fix the expression and call browser_evaluate again"),
        "evaluate_disabled" => evaluate_disabled(what),
        "unknown_frame" => ToolError::new(
            ErrorCode::UnknownFrame,
            match e {
                evaluate::Error::UnknownFrame { frame_id, .. } => format!(
                    "{what}: frame {frame_id} is not in the frame tree (it was removed, or its page navigated)"
                ),
                _ => format!("{what}: {e}"),
            },
        )
        .next("call browser_snapshot and use a frame_id from its frame_tree"),
        "dialog_opened" => ToolError::new(ErrorCode::DialogPending, format!("{what}: {e}"))
            .next("call browser_snapshot to see pending_dialogs, answer with browser_dialog"),
        _ => match e {
            evaluate::Error::Transport { source, .. } => {
                let mut t = map_transport(source, what);
                t.message = format!("{what}: {e}");
                t
            }
            _ => ToolError::internal(format!("{what}: {e}")),
        },
    }
}

pub(crate) fn evaluate_disabled(what: &str) -> ToolError {
    ToolError::new(
        ErrorCode::EvaluateDisabled,
        format!(
            "{what} runs page script, and this server runs with evaluate disabled (--no-evaluate)"
        ),
    )
    .next("use browser_snapshot, browser_click, browser_type and browser_press_key instead")
}

#[cfg(test)]
mod tests {
    use super::{map_eval, map_supervisor, message_at_cap};
    use crate::ErrorCode;
    use std::time::Duration;

    #[test]
    fn dialog_messages_at_chromiums_cap_count_utf16_units() {
        assert!(message_at_cap(&"x".repeat(10_240)));
        assert!(!message_at_cap(&"x".repeat(10_239)));
        // 5,120 emoji are 10,240 UTF-16 code units: what Chromium cuts 6,000 to.
        assert!(message_at_cap(&"\u{1F600}".repeat(5_120)));
        assert!(!message_at_cap("short"));
    }

    #[test]
    fn messages_do_not_repeat_the_code_or_name_internal_calls() {
        let t = map_supervisor(
            &supervisor::Error::NoDialog { recent: vec![] },
            "browser_dialog",
        );
        assert!(
            t.message.starts_with("no dialog is pending"),
            "{}",
            t.message
        );
        let t = map_supervisor(
            &supervisor::Error::UnknownFrame {
                frame_id: "NOPE".into(),
            },
            "browser_cdp",
        );
        assert!(!t.message.contains("snapshot()"), "{}", t.message);
        assert!(t.message.contains("NOPE"), "{}", t.message);
        let a = crate::error::ToolError::dialog_pending(
            crate::types::DialogView {
                id: "d-1".into(),
                kind: "alert".into(),
                message: "m".into(),
                default_prompt: None,
                frame_id: None,
                url: None,
                message_truncated: false,
            },
            "browser_click",
        );
        assert!(
            a.message.starts_with("an alert dialog (d-1)"),
            "{}",
            a.message
        );
        assert_eq!(crate::error::a_dialog_kind("confirm"), "a confirm");
        assert_eq!(crate::error::a_dialog_kind("unknown"), "an unknown");
    }

    #[test]
    fn evaluate_errors_keep_the_tool_codes_and_say_what_next() {
        let cases = [
            (
                evaluate::Error::UnknownRef {
                    ref_id: "e9".into(),
                },
                ErrorCode::UnknownRef,
            ),
            (
                evaluate::Error::StaleRef {
                    ref_id: "e1".into(),
                    role: "button".into(),
                    name: "OK".into(),
                    reason: "frame loaded a new document".into(),
                },
                ErrorCode::StaleRef,
            ),
            (
                evaluate::Error::InvalidKey { key: "Nope".into() },
                ErrorCode::InvalidArgument,
            ),
            (
                evaluate::Error::Timeout {
                    kind: evaluate::TimeoutKind::Script,
                    budget: Duration::from_millis(500),
                    elapsed: Duration::from_millis(510),
                    terminated: true,
                },
                ErrorCode::Timeout,
            ),
            (
                evaluate::Error::JsException {
                    name: "Error".into(),
                    message: "boom".into(),
                    location: None,
                },
                ErrorCode::ScriptError,
            ),
            (
                evaluate::Error::InvalidSource {
                    message: "SyntaxError".into(),
                    line: Some(0),
                    column: Some(3),
                },
                ErrorCode::ScriptError,
            ),
            (
                evaluate::Error::EvaluateDisabled,
                ErrorCode::EvaluateDisabled,
            ),
            (
                evaluate::Error::PageBusy {
                    method: "Runtime.enable".into(),
                    budget: Duration::from_millis(2000),
                    elapsed: Duration::from_millis(2001),
                    stopped: true,
                    consequence: "the script never ran".into(),
                },
                ErrorCode::Timeout,
            ),
            (
                evaluate::Error::NotEditable {
                    ref_id: "e2".into(),
                    role: "button".into(),
                    name: "B1".into(),
                    reason: "it is a <button> element that is not contenteditable".into(),
                },
                ErrorCode::NotInteractable,
            ),
            (
                evaluate::Error::Navigated {
                    frame_id: "F".into(),
                    message: "context gone".into(),
                },
                ErrorCode::Navigated,
            ),
        ];
        for (e, code) in cases {
            let t = map_eval(&e, "browser_evaluate");
            assert_eq!(t.code, code, "{e}");
            assert!(t.next_step.is_some(), "{e}: no next step");
            // No word said twice in a row ("the script threw: script threw").
            let words: Vec<&str> = t.message.split_whitespace().collect();
            assert!(
                !words
                    .windows(4)
                    .any(|w| w[0] == w[2] && w[1].trim_end_matches(':') == w[3]),
                "{}",
                t.message
            );
        }
        let thrown = map_eval(
            &evaluate::Error::JsException {
                name: "Error".into(),
                message: "boom".into(),
                location: None,
            },
            "browser_evaluate",
        );
        assert_eq!(
            thrown.message,
            "browser_evaluate: the script threw Error: boom"
        );
        let never_ran = map_eval(
            &evaluate::Error::Timeout {
                kind: evaluate::TimeoutKind::Setup,
                budget: Duration::from_millis(500),
                elapsed: Duration::from_millis(510),
                terminated: false,
            },
            "browser_evaluate",
        );
        assert!(
            !never_ran
                .next_step
                .as_deref()
                .unwrap_or("")
                .contains("fix the script"),
            "{never_ran:?}"
        );
        let key = map_eval(
            &evaluate::Error::InvalidKey { key: "Nope".into() },
            "browser_press_key",
        );
        assert_eq!(key.field.as_deref(), Some("key"));
        let stale = map_eval(
            &evaluate::Error::StaleRef {
                ref_id: "e1".into(),
                role: "button".into(),
                name: "OK".into(),
                reason: "gone".into(),
            },
            "browser_click",
        );
        assert!(stale
            .next_step
            .is_some_and(|s| s.contains("browser_snapshot")));
    }

    #[test]
    fn supervisor_errors_keep_the_tool_codes() {
        let cases = [
            (
                supervisor::Error::NoDialog { recent: vec![] },
                ErrorCode::NoDialog,
            ),
            (
                supervisor::Error::UnknownDialog {
                    id: "d-42".into(),
                    closed_by: None,
                    pending: vec![],
                },
                ErrorCode::NoDialog,
            ),
            (
                supervisor::Error::AmbiguousDialog {
                    candidates: vec!["d-1".into(), "d-2".into()],
                },
                ErrorCode::AmbiguousDialog,
            ),
            (
                supervisor::Error::UnknownFrame {
                    frame_id: "NOPE".into(),
                },
                ErrorCode::UnknownFrame,
            ),
            (
                supervisor::Error::SameProcessFrame {
                    frame_id: "F".into(),
                    parent_frame_id: None,
                    execution_context_id: None,
                },
                ErrorCode::NotOopif,
            ),
        ];
        for (e, code) in cases {
            let t = map_supervisor(&e, "browser_cdp");
            assert_eq!(t.code, code, "{e}");
            assert!(t.next_step.is_some(), "{e}: no next step");
        }
    }
}
