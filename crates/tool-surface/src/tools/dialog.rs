//! `browser_dialog`: answering a dialog through the supervisor, and waiting
//! for the navigation an accepted `beforeunload` released.

use super::Tools;
use crate::error::{map_supervisor, ErrorCode, ToolError};
use crate::tab::Tab;
use crate::types::*;
use cdp_transport::Budget;
use serde_json::Value;
use std::time::Duration;

/// Budget of a `browser_dialog` call (it has no `timeout_ms`).
const DIALOG_BUDGET: Duration = Duration::from_secs(10);

/// After an accepted `beforeunload`, how long a main frame that stopped
/// loading may still commit before the released navigation is taken to
/// have ended without a new document.
const NO_COMMIT_GRACE: Duration = Duration::from_millis(500);

impl Tools {
    /// `browser_dialog` through [`supervisor::Supervisor::respond`]. An
    /// accepted prompt without `prompt_text` returns its default text.
    ///
    /// Accepting a `beforeunload` dialog of the tab releases the navigation
    /// it held: the call then waits (within its budget) for the main frame to
    /// commit the new document (`Page.frameNavigated`) and reports its URL
    /// in `url`, or says in `note` that it did not commit (still pending,
    /// or ended without a new document). Without that wait a navigation
    /// sent right after would race the released one (a second
    /// `beforeunload`, `net::ERR_ABORTED`, the wrong page's title).
    ///
    /// # Errors
    /// `no_dialog`, `ambiguous_dialog` (with `candidates`), `browser_closed`.
    ///
    /// # Cancel safety
    /// Not cancel safe: the answer may be sent; the supervisor's view stays consistent.
    pub async fn dialog(
        &self,
        req: DialogRequest,
    ) -> std::result::Result<DialogResponse, ToolError> {
        let budget = Budget::new(DIALOG_BUDGET);
        let tab = self.tab();
        let pending = tab.pending();
        let chosen = match &req.dialog_id {
            Some(id) => pending.iter().find(|d| &d.id == id),
            None if pending.len() == 1 => pending.first(),
            None => None,
        };
        let (action, prompt_text) = match req.action {
            DialogAction::Accept => (
                supervisor::DialogAction::Accept,
                req.prompt_text.clone().or_else(|| {
                    chosen
                        .filter(|d| d.kind == "prompt")
                        .map(|d| d.default_prompt.clone().unwrap_or_default())
                }),
            ),
            DialogAction::Dismiss => (supervisor::DialogAction::Dismiss, None),
        };
        // Subscribed before the answer, so the commit it releases cannot be
        // missed.
        let unloading = req.action == DialogAction::Accept
            && tab
                .sup
                .snapshot()
                .pending_dialogs
                .iter()
                .any(|d| d.kind == "beforeunload" && d.target_id == tab.target_id);
        let events = unloading.then(|| tab.sup.page_session().subscribe());
        let closed = tab
            .sup
            .respond(
                action,
                prompt_text.as_deref(),
                req.dialog_id.as_deref(),
                budget.clone(),
            )
            .await
            .map_err(|e| {
                let mut t = map_supervisor(&e, "browser_dialog");
                if t.code == ErrorCode::AmbiguousDialog {
                    t.candidates = tab.pending();
                }
                t
            })?;
        let released = closed.dialog.kind == "beforeunload"
            && closed.dialog.target_id == tab.target_id
            && closed.accepted != Some(false);
        let (url, note) = match events {
            Some(ev) if released => Self::released_navigation(&tab, ev, &budget).await,
            _ => (None, None),
        };
        Ok(DialogResponse {
            dialog: crate::tab::dialog_view(&closed.dialog),
            action: req.action,
            pending_dialogs: tab.pending(),
            url,
            note,
        })
    }

    /// After an accepted `beforeunload`: waits, until `budget` ends, for
    /// the main frame to commit the navigation the dialog held
    /// (`Page.frameNavigated` without `parentId`). Returns `(url, note)`:
    /// the committed URL (an error page's `unreachableUrl`, with a note), or
    /// a note saying the navigation has not committed yet, ended without a
    /// new document (`Page.frameStoppedLoading` and no commit within
    /// [`NO_COMMIT_GRACE`]: a download, a 204, a cancelled navigation), or
    /// that the tab closed (a `beforeunload` of closing the tab).
    async fn released_navigation(
        tab: &Tab,
        mut events: cdp_transport::EventStream,
        budget: &Budget,
    ) -> (Option<String>, Option<String>) {
        let deadline = budget.deadline();
        let mut stopped: Option<tokio::time::Instant> = None;
        loop {
            let grace_end = stopped.map(|t| t + NO_COMMIT_GRACE);
            tokio::select! {
                ev = events.recv() => match ev {
                    Ok(ev) if ev.method == "Page.frameNavigated" => {
                        let f = &ev.params["frame"];
                        if f.get("parentId").and_then(Value::as_str).is_some() {
                            continue;
                        }
                        if let Some(bad) = f["unreachableUrl"].as_str().filter(|u| !u.is_empty()) {
                            return (
                                Some(bad.to_string()),
                                Some(format!("the navigation the dialog released failed: Chromium shows its error page for {bad}")),
                            );
                        }
                        let url = f["url"].as_str().unwrap_or_default();
                        let fragment = f["urlFragment"].as_str().unwrap_or_default();
                        return (Some(format!("{url}{fragment}")), None);
                    }
                    Ok(ev) if ev.method == "Page.frameStoppedLoading" => {
                        let main = ev.str_param("frameId") == Some(tab.target_id.as_str())
                            || tab.frame_tree().top.frame_id == ev.str_param("frameId").unwrap_or_default();
                        if main && stopped.is_none() {
                            stopped = Some(tokio::time::Instant::now());
                        }
                    }
                    Ok(_) | Err(cdp_transport::RecvError::Lagged(_)) => {}
                    Err(_) => {
                        return (None, Some("the tab's page session ended after the answer (the beforeunload was for closing the tab?); call browser_tabs".into()));
                    }
                },
                _ = tokio::time::sleep_until(grace_end.unwrap_or(deadline)), if grace_end.is_some() => {
                    return (None, Some("the navigation the dialog released ended without a new page (cancelled, a download or an empty response); the tab stays on its page".into()));
                }
                _ = tokio::time::sleep_until(deadline) => {
                    return (None, Some(format!(
                        "the navigation the dialog released has not committed a new page within {} ms; until it does, calls on this tab wait for it: call browser_navigate again (to give it more time, or to go elsewhere) or browser_cdp Page.stopLoading to give up on it",
                        budget.total().as_millis()
                    )));
                }
            }
        }
    }
}
