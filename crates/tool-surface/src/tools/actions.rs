//! `browser_click`, `browser_type` and `browser_press_key`: real input on a
//! ref of the latest snapshot, through one ref-action path (the tab made
//! ready and brought to the front, the ref checked, the action raced against
//! a dialog, a timed-out action's script terminated).

use super::{budget_of, cleanup_grace, Tools};
use crate::error::{map_eval, ErrorCode, ToolError};
use crate::tab::{Raced, Tab};
use crate::types::*;
use cdp_transport::Budget;
use evaluate::refs::{RefMap, SnapshotOptions};
use serde_json::json;
use std::future::Future;
use std::sync::Arc;

impl Tools {
    fn action(target: Option<String>, dialog: Option<DialogView>) -> ActionResponse {
        ActionResponse {
            status: if dialog.is_some() {
                "dialog_opened".into()
            } else {
                "done".into()
            },
            target,
            dialog,
        }
    }

    /// The error of a failed ref action. A call that ran out of budget while
    /// the page's script kept running (the input event handler never
    /// returned) gets `Runtime.terminateExecution` on the ref's session, so
    /// the tab stays usable.
    async fn action_error(
        tool: &str,
        tab: &Tab,
        ref_id: Option<&str>,
        e: evaluate::Error,
        budget: &Budget,
    ) -> ToolError {
        let timed_out =
            matches!(&e, evaluate::Error::Transport { source, .. } if source.is_timeout());
        if !timed_out {
            return tab.crashed_or(map_eval(&e, tool));
        }
        let session = ref_id
            .and_then(|r| {
                tab.refs()
                    .and_then(|m| m.get(r).map(|x| x.session().clone()))
            })
            .unwrap_or_else(|| tab.ax().page_session().clone());
        // The answer is waited for only a short grace, so a stalled browser
        // does not stretch the call far past its timeout_ms.
        // Through the engine: the next evaluate waits until this
        // termination can no longer end it.
        let terminated = tab
            .engine()
            .terminate(&session)
            .acknowledged(cleanup_grace(budget))
            .await;
        // What is known: nothing answered within the budget; not whether the
        // page was busy or the connection stalled. An acknowledged
        // termination shows that the browser answers.
        ToolError::new(
            ErrorCode::Timeout,
            format!(
                "{tool}: no answer within timeout_ms {} (the page is busy or the browser connection is not answering){}",
                budget.total().as_millis(),
                if terminated {
                    "; the browser acknowledged Runtime.terminateExecution, so a script still running was stopped and the tab is usable"
                } else {
                    ""
                }
            ),
        )
        .next("call browser_snapshot to see the page state")
    }

    /// The start of every ref action: the call's budget, and the current
    /// tab made ready for `tool` ([`Tab::ready`]: no dialog blocks it, its
    /// engine is on the live connection) and brought to the front of its
    /// window ([`Tab::to_front`]: a hidden tab takes input only late).
    async fn action_start(
        &self,
        tool: &str,
        timeout_ms: Option<u64>,
    ) -> std::result::Result<(Budget, Arc<Tab>), ToolError> {
        let budget = budget_of(timeout_ms)?;
        let tab = self.tab();
        tab.ready(tool, &budget).await?;
        tab.to_front(&budget).await;
        Ok((budget, tab))
    }

    /// The ref map to act on `ref_id` with ([`Tab::refs_for`]), after
    /// refusing a ref the latest snapshot showed disabled and that still is
    /// ([`Tab::refuse_disabled`]).
    async fn action_refs(
        tab: &Tab,
        ref_id: &str,
        tool: &str,
        budget: &Budget,
    ) -> std::result::Result<RefMap, ToolError> {
        let refs = tab.refs_for(ref_id)?;
        tab.refuse_disabled(&refs, ref_id, tool, budget).await?;
        Ok(refs)
    }

    /// Runs the action `work` on `target` raced against a dialog opening:
    /// `done`, `dialog_opened` with the dialog, or the action's error
    /// ([`Tools::action_error`]).
    async fn act<T>(
        tool: &str,
        tab: &Tab,
        target: Option<&str>,
        work: impl Future<Output = std::result::Result<T, evaluate::Error>>,
        budget: &Budget,
    ) -> std::result::Result<ActionResponse, ToolError> {
        match tab.race_dialog(work).await {
            Raced::Dialog(d) => Ok(Self::action(target.map(String::from), Some(d))),
            Raced::Done(Ok(_)) => Ok(Self::action(target.map(String::from), None)),
            Raced::Done(Err(e)) => Err(Self::action_error(tool, tab, target, e, budget).await),
        }
    }

    /// `browser_click`: a real mouse click (`Input.dispatchMouseEvent`) on the
    /// ref's element through [`evaluate::refs::RefMap::click`], raced against
    /// a dialog opening.
    ///
    /// # Errors
    /// `dialog_pending`, `unknown_ref`, `stale_ref`, `not_interactable`,
    /// `timeout`, `browser_closed`.
    ///
    /// # Cancel safety
    /// Not cancel safe: a drop between press and release leaves the mouse
    /// button pressed in the page.
    pub async fn click(&self, req: ClickRequest) -> std::result::Result<ActionResponse, ToolError> {
        const TOOL: &str = "browser_click";
        let (budget, tab) = self.action_start(TOOL, req.timeout_ms).await?;
        let refs = Self::action_refs(&tab, &req.target, TOOL, &budget).await?;
        let clicking = refs.click(&req.target, budget.clone());
        Self::act(TOOL, &tab, Some(&req.target), clicking, &budget).await
    }

    /// `browser_type`: focus and `Input.insertText` (and Enter when `submit`)
    /// through [`evaluate::refs::RefMap::type_text`].
    ///
    /// # Errors
    /// As [`Tools::click`].
    ///
    /// # Cancel safety
    /// Not cancel safe: part of the text may have been typed.
    pub async fn type_text(
        &self,
        req: TypeRequest,
    ) -> std::result::Result<ActionResponse, ToolError> {
        const TOOL: &str = "browser_type";
        let (budget, tab) = self.action_start(TOOL, req.timeout_ms).await?;
        let refs = Self::action_refs(&tab, &req.target, TOOL, &budget).await?;
        let typing = refs.type_text(&req.target, &req.text, req.submit, budget.clone());
        Self::act(TOOL, &tab, Some(&req.target), typing, &budget).await
    }

    /// `browser_press_key`: `Input.dispatchKeyEvent` through
    /// [`evaluate::refs::RefMap::press_key`], after focusing `ref` when given.
    ///
    /// # Errors
    /// As [`Tools::click`], and `invalid_argument` (`key`) for an unknown key.
    ///
    /// # Cancel safety
    /// Not cancel safe: a drop between keyDown and keyUp leaves the key down.
    pub async fn press_key(
        &self,
        req: PressKeyRequest,
    ) -> std::result::Result<ActionResponse, ToolError> {
        const TOOL: &str = "browser_press_key";
        let (budget, tab) = self.action_start(TOOL, req.timeout_ms).await?;
        let refs = match &req.target {
            Some(r) => Self::action_refs(&tab, r, TOOL, &budget).await?,
            None => match tab.refs() {
                Some(m) => m,
                // No snapshot yet: a main-frame-only walk gives a ref map whose
                // page session the key goes to (nothing is stored).
                None => {
                    let opts = SnapshotOptions {
                        max_frame_depth: 0,
                        max_frames: 1,
                    };
                    match tab
                        .race_dialog(tab.ax().snapshot(&opts, budget.clone()))
                        .await
                    {
                        Raced::Dialog(d) => return Ok(Self::action(None, Some(d))),
                        Raced::Done(Ok(s)) => s.refs().clone(),
                        Raced::Done(Err(e)) => return Err(map_eval(&e, TOOL)),
                    }
                }
            },
        };
        let target = req.target.clone();
        let work = async {
            if let Some(r) = &target {
                let resolved = refs.resolve(r, budget.clone()).await?;
                resolved
                    .session
                    .call(
                        "DOM.focus",
                        json!({"backendNodeId": resolved.backend_node_id.0}),
                        budget.clone(),
                    )
                    .await
                    .map_err(|e| evaluate::Error::NotInteractable {
                        ref_id: r.clone(),
                        role: resolved.entry.role.clone(),
                        name: resolved.entry.name.clone(),
                        reason: format!("cannot focus: {e}"),
                    })?;
            }
            refs.press_key(&req.key, budget.clone()).await
        };
        Self::act(TOOL, &tab, req.target.as_deref(), work, &budget).await
    }
}
