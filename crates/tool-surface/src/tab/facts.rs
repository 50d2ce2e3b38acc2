//! The supervisor's record of the tab, as the page facts `evaluate` asks
//! for ([`evaluate::PageFacts`]): frame loaders, the session on which a
//! termination reaches a target's renderer, and the tab's dialogs with
//! their ids. Every answer is read from the supervisor's view; none makes
//! a CDP call.

use cdp_transport::{FrameId, TargetId};
use evaluate::facts::Changed;
use evaluate::{DialogInfo, DialogRecord, TerminateVia};
use supervisor::{DialogPolicy, PendingDialog, Supervisor};

pub(super) struct SupervisorFacts(pub(super) Supervisor);

fn info(d: &PendingDialog) -> DialogInfo {
    DialogInfo {
        dialog_type: d.kind.clone(),
        message: d.message.clone(),
        default_prompt: d.default_prompt.clone(),
        frame_id: d.frame_id.clone(),
        url: Some(d.url.clone()),
        id: Some(d.id.clone()),
    }
}

impl evaluate::PageFacts for SupervisorFacts {
    fn loader_of(&self, frame: &FrameId) -> Option<cdp_transport::LoaderId> {
        self.0.frame_loader(frame)
    }

    /// The supervisor's session of a target (the tab's page session, or
    /// its session of a cross-site iframe, whose target id is its frame
    /// id): bound in the renderer before any script ran, it reaches a
    /// renderer busy with script where a session attached later cannot.
    /// None while a dialog is pending (a dialog, not a script, holds the
    /// renderer, and a termination would end the page's script once it is
    /// answered), nor for a target the supervisor does not own.
    fn terminate_via(&self, target: &TargetId) -> Option<TerminateVia> {
        let sup = &self.0;
        if !sup.snapshot().pending_dialogs.is_empty() {
            return Some(TerminateVia::Hold);
        }
        if target == sup.target_id() {
            return Some(TerminateVia::Session(sup.page_session()));
        }
        let via = sup
            .route(&FrameId::new(target.as_str()))
            .ok()
            .filter(|r| r.is_oopif)
            .map_or(TerminateVia::Hold, |r| TerminateVia::Session(r.session));
        Some(via)
    }

    fn dialogs(&self) -> Option<DialogRecord> {
        let v = self.0.snapshot();
        Some(DialogRecord {
            opened: v.dialogs_opened,
            open: v.pending_dialogs.first().map(info),
            latest: v.latest_dialog().map(info),
            answered_by_owner: self.0.dialog_policy() != DialogPolicy::MustRespond,
        })
    }

    fn dialogs_changed(&self) -> Changed {
        let mut rx = self.0.changes();
        Box::pin(async move {
            // A supervisor that is gone changes no more.
            if rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        })
    }
}
