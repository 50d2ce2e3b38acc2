//! Dialogs and the evaluate: the record that says one is open (the page
//! facts' when they carry one, else the engine's own tracker), the refusal
//! of an evaluate while one is, and the watch that ends an evaluate when
//! one opens during it.

use super::warm::Warm;
use super::{duration_ms, Engine};
use crate::error::{DialogInfo, Error, Result};
use crate::facts::{Changed, DialogRecord, PageFacts};
use cdp_transport::{Budget, TargetId};
use chromiumoxide_cdp::cdp::js_protocol::runtime::EvaluateParams;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tracing::{debug, info};

/// A dialog seen opening this recently is taken as open without a check
/// (its close usually follows an answer within milliseconds).
const DIALOG_TRUST: Duration = Duration::from_millis(250);

/// How long the check of an older dialog waits for the page to answer.
const DIALOG_CHECK: Duration = Duration::from_millis(300);

/// The owner's dialog record for one evaluate ([`crate::PageFacts::dialogs`]),
/// subscribed before anything is sent.
pub(super) struct OwnerDialogs {
    facts: Arc<dyn PageFacts>,
    changed: Changed,
    /// [`DialogRecord::opened`] when the evaluate began.
    start: u64,
    /// The record when the evaluate began.
    first: DialogRecord,
}

impl OwnerDialogs {
    /// The owner's record, when `facts` carry one.
    pub(super) fn watch(facts: Option<Arc<dyn PageFacts>>) -> Option<Self> {
        let facts = facts?;
        // Subscribed before the read: a change in between wakes `opened`.
        let changed = facts.dialogs_changed();
        let first = facts.dialogs()?;
        Some(Self {
            facts,
            changed,
            start: first.opened,
            first,
        })
    }

    /// The record when the evaluate began.
    pub(super) fn first(&self) -> DialogRecord {
        self.first.clone()
    }

    /// Resolves with the dialog when one opens from now on that ends the
    /// evaluate (none does while the owner answers every dialog itself:
    /// the script goes on after the answer). Cancel safe: the pending wait
    /// is kept in `self`.
    pub(super) async fn opened(&mut self) -> DialogInfo {
        loop {
            (&mut self.changed).await;
            self.changed = self.facts.dialogs_changed();
            let Some(rec) = self.facts.dialogs() else {
                continue;
            };
            if rec.opened > self.start && !rec.answered_by_owner {
                if let Some(d) = rec.latest.or(rec.open) {
                    debug!(?d, "a dialog the owner recorded ended the evaluate");
                    return d;
                }
            }
        }
    }
}

impl Engine {
    /// Refuses the evaluate with `dialog_opened` while a dialog is open: by
    /// the owner's record when there is one (no dialog refuses while the
    /// owner answers every dialog itself), else by the engine's own
    /// tracker.
    pub(super) async fn check_dialog(
        &self,
        owner: Option<DialogRecord>,
        page: &Arc<Warm>,
        warm: &Arc<Warm>,
        budget: &Budget,
    ) -> Result<()> {
        match owner {
            Some(rec) => match rec.open {
                Some(dialog) if !rec.answered_by_owner => Err(Error::DialogOpened {
                    dialog: Box::new(dialog),
                }),
                _ => Ok(()),
            },
            None => self.check_own_dialog(page, warm, budget).await,
        }
    }

    /// Without an owner's record: refuses with `dialog_opened` while the
    /// page session's tracker saw a
    /// dialog open and no close. A dialog seen opening more than
    /// [`DIALOG_TRUST`] ago is checked first: a trivial evaluate on the
    /// session of the dialog's frame (a dialog holds its renderer, so it
    /// does not answer while the dialog shows) that answers within
    /// [`DIALOG_CHECK`] (at most half the remaining budget) shows that no
    /// dialog blocks, e.g. an opening whose close never came (an injected
    /// or lost event, C23), and the state is cleared. A dialog of a frame
    /// the engine has no session for is trusted as it is.
    async fn check_own_dialog(
        &self,
        page: &Arc<Warm>,
        warm: &Arc<Warm>,
        budget: &Budget,
    ) -> Result<()> {
        let (dialog, at) = {
            let st = page.lock();
            match &st.dialog {
                Some(d) => (d.clone(), st.dialog_at),
                None => return Ok(()),
            }
        };
        let Some((opened, seq)) = at.filter(|(t, _)| t.elapsed() >= DIALOG_TRUST) else {
            return Err(Error::DialogOpened {
                dialog: Box::new(dialog),
            });
        };
        // The session whose renderer the dialog holds.
        let session = match &dialog.frame_id {
            None => Some(page.session.clone()),
            Some(f) if page.lock().contexts.contains_key(f) => Some(page.session.clone()),
            Some(f) if warm.target_id.as_str() == f.as_str() => Some(warm.session.clone()),
            Some(f) => self
                .cached(&TargetId::new(f.as_str()))
                .map(|w| w.session.clone()),
        };
        let Some(session) = session else {
            return Err(Error::DialogOpened {
                dialog: Box::new(dialog),
            });
        };
        let bound = DIALOG_CHECK.min(budget.remaining() / 2);
        // raw: only whether it answers counts; a typed 0.9 decode of an answer it does not know (exceptionDetails, RemoteObject subtypes) would read as no answer
        let answered = session
            .call(
                EvaluateParams::IDENTIFIER,
                json!({"expression": "0 // tabwarden dialog check", "returnByValue": true}),
                bound,
            )
            .await
            .is_ok();
        if !answered {
            return Err(Error::DialogOpened {
                dialog: Box::new(dialog),
            });
        }
        let mut st = page.lock();
        if st.dialog_at.map(|(_, s)| s) == Some(seq) {
            st.dialog = None;
            st.dialog_at = None;
        }
        drop(st);
        info!(
            target: "tabwarden::evaluate",
            dialog_type = dialog.dialog_type.as_str(),
            open_ms = duration_ms(opened.elapsed()),
            "a dialog seen opening without a close does not block the page: forgotten"
        );
        Ok(())
    }
}
