//! The supervisor's one error type.

use crate::view::ClosedBy;
use cdp_transport::{ExecutionContextId, FrameId, TargetId};

/// Result alias with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every way a supervisor operation can fail.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A dialog policy name that is not `must_respond`, `auto_dismiss` or `auto_accept`.
    #[error(
        "unknown dialog policy {given:?}: expected one of must_respond, auto_dismiss, auto_accept"
    )]
    InvalidPolicy {
        /// The name given.
        given: String,
    },
    /// A bridge mode that is not `off`, `on` or `auto`.
    #[error("unknown bridge mode {given:?}: expected one of off, on, auto")]
    InvalidBridgeMode {
        /// The name given.
        given: String,
    },
    /// A dialog action other than `accept` or `dismiss`.
    #[error("unknown dialog action {given:?}: expected accept or dismiss")]
    InvalidAction {
        /// The action given.
        given: String,
    },
    /// `respond` was called while no dialog is pending.
    #[error("no_dialog: no dialog is pending{}", recent_hint(recent))]
    NoDialog {
        /// Ids of recently closed dialogs, newest last.
        recent: Vec<String>,
    },
    /// `respond` named a dialog id that is not pending.
    #[error("dialog {id:?} is not pending{}; pending dialogs: [{}]", closed_hint(closed_by), pending.join(", "))]
    UnknownDialog {
        /// The id given.
        id: String,
        /// How it was closed, when it is among the recent dialogs.
        closed_by: Option<ClosedBy>,
        /// Ids of the dialogs pending now.
        pending: Vec<String>,
    },
    /// Several dialogs are pending and no id was given.
    #[error("{} dialogs are pending; pass dialog_id, one of [{}]", candidates.len(), candidates.join(", "))]
    AmbiguousDialog {
        /// The pending dialog ids, oldest first.
        candidates: Vec<String>,
    },
    /// `Page.handleJavaScriptDialog` failed.
    #[error("answering dialog {id} failed: {source}")]
    Answer {
        /// The dialog id.
        id: String,
        /// The transport error.
        #[source]
        source: cdp_transport::Error,
    },
    /// The frame id is not in the frame tree.
    #[error(
        "frame {frame_id} is not in the frame tree; call snapshot() for the current frame ids"
    )]
    UnknownFrame {
        /// The frame id given.
        frame_id: FrameId,
    },
    /// The frame runs in its parent's process and has no session of its own.
    #[error(
        "frame {frame_id} is a same-process frame with no session of its own: evaluate on the page session {}, or reach it through its parent's contentDocument{}",
        context_hint(execution_context_id),
        parent_hint(parent_frame_id)
    )]
    SameProcessFrame {
        /// The frame.
        frame_id: FrameId,
        /// Its parent frame.
        parent_frame_id: Option<FrameId>,
        /// Its main-world execution context (on the session that owns it), when known.
        execution_context_id: Option<ExecutionContextId>,
    },
    /// The supervisor is not active (crashed, detached, disconnected or stopped).
    #[error("supervisor for target {target_id} is not active: {reason}")]
    Inactive {
        /// The supervised target.
        target_id: TargetId,
        /// Why.
        reason: String,
    },
    /// The wait in [`crate::Supervisor::wait_until`] ran out of budget.
    #[error("condition not met within {budget:?}")]
    WaitTimeout {
        /// The budget's total.
        budget: std::time::Duration,
    },
    /// A CDP call made while starting or attaching failed.
    #[error("{what}: {source}")]
    Cdp {
        /// What was being done.
        what: String,
        /// The transport error.
        #[source]
        source: cdp_transport::Error,
    },
}

impl Error {
    /// The stable error code an agent sees (`no_dialog`, `unknown_dialog`, ...).
    pub fn code(&self) -> &'static str {
        match self {
            Self::InvalidPolicy { .. } => "invalid_policy",
            Self::InvalidBridgeMode { .. } => "invalid_bridge_mode",
            Self::InvalidAction { .. } => "invalid_action",
            Self::NoDialog { .. } => "no_dialog",
            Self::UnknownDialog { .. } => "unknown_dialog",
            Self::AmbiguousDialog { .. } => "ambiguous_dialog",
            Self::Answer { .. } => "answer_failed",
            Self::UnknownFrame { .. } => "unknown_frame",
            Self::SameProcessFrame { .. } => "same_process_frame",
            Self::Inactive { .. } => "inactive",
            Self::WaitTimeout { .. } => "timeout",
            Self::Cdp { .. } => "cdp_error",
        }
    }

    pub(crate) fn cdp(what: impl Into<String>, source: cdp_transport::Error) -> Self {
        Self::Cdp {
            what: what.into(),
            source,
        }
    }
}

fn recent_hint(recent: &[String]) -> String {
    if recent.is_empty() {
        String::new()
    } else {
        format!(" (recently closed: [{}])", recent.join(", "))
    }
}

fn closed_hint(c: &Option<ClosedBy>) -> String {
    match c {
        Some(c) => format!(" (already closed by {})", c.as_str()),
        None => " (unknown id)".into(),
    }
}

fn context_hint(c: &Option<ExecutionContextId>) -> String {
    match c {
        Some(c) => format!("in execution context {}", c.0),
        None => "in the frame's execution context (not reported yet)".into(),
    }
}

fn parent_hint(p: &Option<FrameId>) -> String {
    match p {
        Some(p) => format!(" (parent frame {p})"),
        None => String::new(),
    }
}
