//! Dialogs as the tools see them: the views of the supervisor's pending and
//! closed dialogs, the race of a renderer-bound call against a dialog
//! opening, and the supervisor's record of a dialog the engine saw.

use super::Tab;
use crate::error::ToolError;
use crate::types::{ClosedDialogView, DialogView};
use supervisor::{ClosedDialog, DialogEvent, DialogPolicy, PendingDialog};
use tokio::sync::broadcast::error::RecvError;

/// Chromium 156 cuts a dialog's message to this many UTF-16 code units
/// before `Page.javascriptDialogOpening` carries it (measured: a 20,000
/// character `alert` arrives with 10,240; 6,000 emoji arrive as 5,120).
pub(crate) const CHROMIUM_DIALOG_MESSAGE_CAP: usize = 10_240;

/// Result of a call raced against a dialog opening.
pub(crate) enum Raced<T> {
    /// The call finished first.
    Done(T),
    /// A dialog opened (or was already pending) first.
    Dialog(DialogView),
}

impl Tab {
    /// True under `auto_dismiss` / `auto_accept`: every dialog is the
    /// policy's to answer, so none gates or ends a call.
    pub fn auto_policy(&self) -> bool {
        self.sup.dialog_policy() != DialogPolicy::MustRespond
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

    pub fn recent(&self) -> Vec<ClosedDialogView> {
        self.sup
            .snapshot()
            .recent_dialogs
            .iter()
            .map(closed_view)
            .collect()
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

    /// The supervisor's record of the dialog that ended an evaluate, by
    /// the id the engine took from the supervisor's own record (the page
    /// facts): pending, or closed since (by a policy, the watchdog, the
    /// browser).
    ///
    /// # Errors
    /// `internal` when the dialog carries no id or the supervisor no longer
    /// holds it (more dialogs closed since than its recent list keeps).
    pub fn recorded_dialog(&self, info: &evaluate::DialogInfo) -> Result<DialogView, ToolError> {
        let v = self.sup.snapshot();
        let id = info.id.as_deref().unwrap_or_default();
        v.dialog(id)
            .map(dialog_view)
            .ok_or_else(|| {
                ToolError::internal(format!(
                    "a {} dialog ({:?}, id {id:?}) ended the evaluate, but the tab's supervisor holds no dialog of that id",
                    info.dialog_type, info.message
                ))
                .next("call browser_snapshot: it lists pending and recent dialogs")
            })
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

#[cfg(test)]
mod tests;
