//! Answering dialogs: the agent's answer ([`Supervisor::respond`]) and the
//! policy's, on the session each dialog must be answered on.

use super::{Shared, Supervisor};
use crate::config::DialogAction;
use crate::error::{Error, Result};
use crate::state::Now;
use crate::view::{ClosedBy, ClosedDialog};
use cdp_transport::Budget;
use std::sync::Arc;

impl Supervisor {
    /// Answers a pending dialog on the session where it must be answered: a
    /// native one with `Page.handleJavaScriptDialog` on the top-level page or
    /// popup session (also for dialogs raised inside an OOPIF); a bridge one
    /// ([`crate::DialogPath::Bridge`]) with `Fetch.fulfillRequest` on the
    /// session that paused its request (so `prompt()` returns `prompt_text`).
    ///
    /// `prompt_text` is what `prompt()` returns on accept. `dialog_id` picks a
    /// dialog; it may be omitted when exactly one is pending.
    ///
    /// # Errors
    /// [`Error::NoDialog`] (nothing pending), [`Error::UnknownDialog`] (not
    /// pending; names the pending ids and how it was closed),
    /// [`Error::AmbiguousDialog`] (several pending, no id; lists them),
    /// [`Error::Answer`] (the CDP call failed; a protocol error such as "No
    /// dialog is showing" or an unknown interception id retires the dialog as
    /// `remote`).
    ///
    /// # Cancel safety
    /// Not cancel safe: the answer may have been sent; the view stays
    /// consistent (the close event records it).
    pub async fn respond(
        &self,
        action: DialogAction,
        prompt_text: Option<&str>,
        dialog_id: Option<&str>,
        budget: impl Into<Budget>,
    ) -> Result<ClosedDialog> {
        let id = self.shared.lock().pick_dialog(dialog_id)?;
        let accept = action == DialogAction::Accept;
        answer(
            &self.shared,
            &id,
            accept,
            prompt_text.map(String::from),
            ClosedBy::Agent,
            budget.into(),
        )
        .await
    }
}

/// Answers dialog `id` on behalf of `by` and records the outcome (see
/// [`Supervisor::respond`] for the errors).
pub(super) async fn answer(
    shared: &Arc<Shared>,
    id: &str,
    accept: bool,
    prompt: Option<String>,
    by: ClosedBy,
    budget: Budget,
) -> Result<ClosedDialog> {
    let a = shared.lock().begin_answer(id, by, accept, prompt)?;
    let r = a.session.call(a.method, a.params.clone(), budget).await;
    let mut st = shared.lock();
    let out = match r {
        Ok(_) => st
            .answer_replied(&a, Now::system())
            .ok_or_else(|| Error::UnknownDialog {
                id: id.into(),
                closed_by: None,
                pending: vec![],
            }),
        Err(e) => {
            st.answer_failed(&a, e.protocol_message().is_some(), Now::system());
            // The socket is gone: nothing waits for the event loop to notice.
            shared.retire_if_closed(&mut st);
            Err(Error::Answer {
                id: id.into(),
                source: e,
            })
        }
    };
    shared.commit(&st);
    out
}
