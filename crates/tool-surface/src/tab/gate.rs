//! Whether a call may run on the tab ([`Tab::ready`], [`Tab::gate`]), the
//! tab brought to the front before input ([`Tab::to_front`]), and the error
//! of a call whose tab went away under it ([`Tab::crashed_or`],
//! [`Tab::closed_or`]).

use super::{dialog_view, Tab};
use crate::error::{inactive_error, ErrorCode, ToolError};
use cdp_transport::{Budget, SessionCloseReason};
use std::time::Duration;

/// Most of a call's budget spent confirming with the supervisor that a
/// session the engine lost belonged to a closed tab (see [`Tab::closed_or`]).
const CLOSE_CONFIRM: Duration = Duration::from_millis(500);

/// Bound on `Page.bringToFront` before input events (see [`Tab::to_front`]).
const FRONT_BUDGET: Duration = Duration::from_millis(1000);

impl Tab {
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
}
