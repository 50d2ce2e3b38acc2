//! The seam through which `evaluate` learns page facts that an owner of the
//! tab's state (a supervisor) already tracks, instead of tracking or asking
//! for them itself.
//!
//! Three facts cross it: a frame's current loader (refs check it on every
//! action), the session on which `Runtime.terminateExecution` reaches a
//! target's renderer, and the tab's JavaScript dialogs. Each method answers
//! at once, with no CDP call; its default answer is "not known here", and
//! then `evaluate` falls back to what it does alone:
//!
//! | fact | alone |
//! |---|---|
//! | [`PageFacts::loader_of`] | `Page.getFrameTree` on the ref's session |
//! | [`PageFacts::terminate_via`] | the command's own session |
//! | [`PageFacts::dialogs`] | `Page.javascriptDialogOpening`/`Closed` on the engine's own sessions |
//!
//! Give an implementation to [`crate::Engine::set_facts`] (the engine and
//! every [`crate::refs::AxSnapshotter::with_engine`] of it use it) or to
//! [`crate::refs::AxSnapshotter::with_facts`].

use crate::DialogInfo;
use cdp_transport::{FrameId, LoaderId, Session, TargetId};
use std::future::Future;
use std::pin::Pin;

/// Where a termination of a target's running script goes
/// ([`PageFacts::terminate_via`]).
#[derive(Debug, Clone)]
pub enum TerminateVia {
    /// On this session: one the target's renderer bound before it could get
    /// busy (Chromium queues even `Runtime.terminateExecution` behind a
    /// running script on a session attached while it runs).
    Session(Session),
    /// Send none: a dialog, not a script, holds that renderer (a termination
    /// would end the page's script once the dialog is answered), or the
    /// target is not the implementer's.
    Hold,
}

/// A tab's JavaScript dialogs as the owner of its state records them
/// ([`PageFacts::dialogs`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DialogRecord {
    /// Dialogs seen opening on the tab so far (all its frames); grows by
    /// one with each opening, so a change between two reads means one
    /// opened in between.
    pub opened: u64,
    /// The oldest dialog open now.
    pub open: Option<DialogInfo>,
    /// The dialog that opened last (open now or closed since), with the
    /// owner's id for it in [`DialogInfo::id`].
    pub latest: Option<DialogInfo>,
    /// True when the owner answers every dialog itself at once (an
    /// auto-accept or auto-dismiss policy): a dialog then does not end an
    /// evaluate; its script goes on after the answer and returns its value.
    pub answered_by_owner: bool,
}

/// A future that resolves when a [`DialogRecord`] may have changed.
pub type Changed = Pin<Box<dyn Future<Output = ()> + Send + 'static>>;

/// Facts about a tab, answered from state the implementer keeps current
/// from the page's own events. `None` means "not known here".
pub trait PageFacts: Send + Sync + 'static {
    /// The loader (`Network.LoaderId`) of the document frame `frame` shows
    /// now (`Page.frameNavigated` of the session that owns the frame).
    fn loader_of(&self, _frame: &FrameId) -> Option<LoaderId> {
        None
    }

    /// Where a termination of `target`'s running script goes. `None`: on
    /// the session of the command that had no answer.
    fn terminate_via(&self, _target: &TargetId) -> Option<TerminateVia> {
        None
    }

    /// The tab's dialogs now. `None`: the engine tracks dialogs on its own
    /// sessions (and a dialog always ends an evaluate).
    fn dialogs(&self) -> Option<DialogRecord> {
        None
    }

    /// Resolves when [`PageFacts::dialogs`] may answer differently from the
    /// moment of this call (it subscribes at once, so a change between this
    /// call and the next read of `dialogs` is not missed). Never resolves
    /// by default.
    fn dialogs_changed(&self) -> Changed {
        Box::pin(std::future::pending())
    }
}
