//! The evaluate crate's one error type.
//!
//! Every variant has a stable snake_case [`Error::code`] that higher layers
//! (tool-surface) put in front of agents; the `Display` text carries the
//! context (budget, frame, dialog) and says what happened to the script.

use cdp_transport::{FrameId, TargetId};
use serde::Serialize;
use std::time::Duration;

/// Result alias with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A native JavaScript dialog (`Page.javascriptDialogOpening`) that ended an evaluate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DialogInfo {
    /// `alert`, `confirm`, `prompt` or `beforeunload` (as CDP spells it; unknown
    /// future values pass through).
    #[serde(rename = "type")]
    pub dialog_type: String,
    /// The dialog's message.
    pub message: String,
    /// `defaultPrompt` for `prompt()`; absent when CDP sent none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_prompt: Option<String>,
    /// The frame that opened it (`frameId`, sent by Chromium 156; absent on older browsers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub frame_id: Option<FrameId>,
    /// URL of the document that opened it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The id the owner of the tab's state gave it (a supervisor's `d-N`),
    /// when the dialog is known through [`crate::PageFacts::dialogs`];
    /// absent when the engine saw it on its own session.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

/// What kind of wait ran out in a [`Error::Timeout`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum TimeoutKind {
    /// The script was still running (or the renderer was busy): it was sent
    /// `Runtime.terminateExecution`. With `terminated` the call ended and the
    /// session was kept; without, the session was detached and replaced.
    Script,
    /// The script's synchronous part had returned a promise (or thenable)
    /// that had not settled at the deadline (field case C14). Usually the JS
    /// thread was idle and nothing was terminated; with `terminated`, code
    /// the promise had started was still running and was ended by
    /// `Runtime.terminateExecution`.
    Promise,
    /// The budget ran out before the script was sent (attach, execution
    /// context lookup, compile check): the script never ran.
    Setup,
}

/// Every way an evaluate can fail.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The budget's deadline passed.
    #[error("{}", timeout_text(*.kind, *.budget, *.elapsed, *.terminated))]
    Timeout {
        /// What was still pending.
        kind: TimeoutKind,
        /// The whole budget the evaluate ran under.
        budget: Duration,
        /// Time from the start of the evaluate to the error.
        elapsed: Duration,
        /// True when the running script was confirmed ended by
        /// `Runtime.terminateExecution` within the grace period.
        terminated: bool,
    },
    /// The renderer did not answer a command of the operation before its
    /// budget ran out, and no script of ours was running: the page's own
    /// script (or something else) kept the renderer's main thread busy. The
    /// command's session was sent `Runtime.terminateExecution`; `stopped`
    /// says whether a running script was confirmed stopped (then the tab
    /// answers again). Nothing of the operation ran in the page.
    #[error("{}", page_busy_text(.method, *.budget, *.elapsed, *.stopped, .consequence))]
    PageBusy {
        /// The CDP command that got no answer (e.g. `Runtime.enable`).
        method: String,
        /// The whole budget the operation ran under.
        budget: Duration,
        /// Time from the start of the operation to the error.
        elapsed: Duration,
        /// True when the termination stopped a running script (it was
        /// acknowledged at once, see `busy` in the crate source).
        stopped: bool,
        /// What this means for the operation (e.g. "the script never ran").
        consequence: String,
    },
    /// The caller cancelled the budget.
    #[error("evaluate cancelled by the caller after {elapsed:?} (budget {budget:?}); {}", if *.terminated { "the script was terminated (Runtime.terminateExecution), side effects unknown" } else if *.sent { "the script was sent Runtime.terminateExecution and its session detached, side effects unknown" } else { "the script never ran" })]
    Cancelled {
        /// The whole budget the evaluate ran under.
        budget: Duration,
        /// Time from the start of the evaluate to the cancellation.
        elapsed: Duration,
        /// True once the script had been sent to the page.
        sent: bool,
        /// True when the running script was confirmed ended by `Runtime.terminateExecution`.
        terminated: bool,
    },
    /// A native dialog opened while the evaluate ran; the page's JS thread is
    /// blocked until someone answers it with `Page.handleJavaScriptDialog`
    /// on the top-level page session.
    #[error("a {} dialog opened during the evaluate ({:?}{}); answer it with Page.handleJavaScriptDialog, the script resumes after that", .dialog.dialog_type, .dialog.message, .dialog.frame_id.as_ref().map(|f| format!(", frame {f}")).unwrap_or_default())]
    DialogOpened {
        /// The dialog (boxed: it is the largest variant).
        dialog: Box<DialogInfo>,
    },
    /// The frame navigated (its document was replaced) while the evaluate ran
    /// or just before it (field case C10). The script's outcome is unknown;
    /// it was not retried.
    #[error("frame {frame_id} navigated during the evaluate: {message}; the script's outcome is unknown and it was not retried")]
    Navigated {
        /// The frame the evaluate ran in.
        frame_id: FrameId,
        /// What was seen (CDP error text or event).
        message: String,
    },
    /// The execution context went away (frame detached, target closed).
    #[error(
        "the execution context of frame {frame_id} was destroyed during the evaluate: {message}"
    )]
    ContextDestroyed {
        /// The frame the evaluate ran in.
        frame_id: FrameId,
        /// What was seen (CDP error text or event).
        message: String,
    },
    /// The source does not parse as an expression, a function or a statement
    /// body. Nothing ran.
    #[error("invalid source: {message}{}", location_text(*.line, *.column))]
    InvalidSource {
        /// The parser's message (e.g. `SyntaxError: Unexpected token '}'`).
        message: String,
        /// 0-based line in the user's source, when known.
        line: Option<u32>,
        /// 0-based column, when known.
        column: Option<u32>,
    },
    /// The user's script threw (or its promise rejected).
    #[error("the script threw {name}: {message}{}", .location.as_ref().map(|l| format!(" (at {l})")).unwrap_or_default())]
    JsException {
        /// `error.name` (`Error`, `TypeError`, ...) or the thrown value's type.
        name: String,
        /// `error.message`, or the thrown value as text.
        message: String,
        /// The first stack frame (`fn (url:line:col)`), when the value had a stack.
        location: Option<String>,
    },
    /// The engine was built with `evaluate_enabled = false`.
    #[error("evaluate is disabled by configuration (evaluate_enabled = false)")]
    EvaluateDisabled,
    /// No such frame in the target (neither in `Page.getFrameTree` nor an OOPIF target).
    #[error("unknown frame {frame_id} in target {target_id}; take a fresh snapshot to get current frame ids")]
    UnknownFrame {
        /// The frame asked for.
        frame_id: FrameId,
        /// The target searched.
        target_id: TargetId,
    },
    /// A CDP call failed in a way none of the variants above explains.
    #[error("{context}: {source}")]
    Transport {
        /// What the engine was doing.
        context: String,
        /// The transport error.
        #[source]
        source: cdp_transport::Error,
    },
    /// The browser answered with something the engine cannot read.
    #[error("unexpected reply to {method}: {detail}")]
    UnexpectedReply {
        /// CDP method.
        method: String,
        /// What was wrong.
        detail: String,
    },
    /// The ref is not in the ref map of the latest snapshot (refs module, issue 6).
    #[error("unknown ref {ref_id}: call browser_snapshot for fresh refs")]
    UnknownRef {
        /// The ref asked for (e.g. `e12`).
        ref_id: String,
    },
    /// The ref points at a document or node that is gone: the frame's loader
    /// changed, the frame detached, or the node is no longer connected.
    /// Nothing was done to the page.
    #[error(
        "stale ref {ref_id} ({role} {name:?}): {reason}; call browser_snapshot for fresh refs"
    )]
    StaleRef {
        /// The ref.
        ref_id: String,
        /// The ref's role.
        role: String,
        /// The ref's accessible name.
        name: String,
        /// What changed (loader id, node disconnected, no match).
        reason: String,
    },
    /// The ref's element exists but cannot be acted on (no box, zero size,
    /// several matches when resolving by role and name). Nothing was done.
    #[error("ref {ref_id} ({role} {name:?}) is not interactable: {reason}")]
    NotInteractable {
        /// The ref.
        ref_id: String,
        /// The ref's role.
        role: String,
        /// The ref's accessible name.
        name: String,
        /// Why.
        reason: String,
    },
    /// `browser_type` on an element that takes no text: not an `<input>` of
    /// a text kind, a `<textarea>`, a contenteditable element or a
    /// `<select>`; or read-only, disabled, or it did not take the focus
    /// (`document.activeElement` is not it after `DOM.focus`). Nothing was typed.
    #[error("ref {ref_id} ({role} {name:?}) cannot be typed into: {reason}")]
    NotEditable {
        /// The ref.
        ref_id: String,
        /// The ref's role.
        role: String,
        /// The ref's accessible name.
        name: String,
        /// Why (the element's kind, or the focus check).
        reason: String,
    },
    /// A key name [`crate::refs::RefMap::press_key`] does not know. Nothing was sent.
    #[error("unknown key {key:?}: use a DOM key name (Enter, Tab, Escape, Backspace, ArrowDown, ...) or one character")]
    InvalidKey {
        /// The key asked for.
        key: String,
    },
}

fn timeout_text(
    kind: TimeoutKind,
    budget: Duration,
    elapsed: Duration,
    terminated: bool,
) -> String {
    let what = match kind {
        TimeoutKind::Script if terminated => {
            "the script was still running and was terminated (Runtime.terminateExecution); side effects unknown"
        }
        TimeoutKind::Script => {
            "the script was still running; it was sent Runtime.terminateExecution and its session was detached; side effects unknown"
        }
        TimeoutKind::Promise if terminated => {
            "its promise never settled, and code it had started was still running at the deadline and was terminated (Runtime.terminateExecution); side effects unknown"
        }
        TimeoutKind::Promise => "its promise never settled (nothing was running, nothing was terminated)",
        TimeoutKind::Setup => "the script never ran (the page did not answer in time)",
    };
    format!("evaluate timed out after {elapsed:?} (budget {budget:?}): {what}")
}

fn page_busy_text(
    method: &str,
    budget: Duration,
    elapsed: Duration,
    stopped: bool,
    consequence: &str,
) -> String {
    if stopped {
        format!("the page's own script kept the renderer busy: {method} had no answer after {elapsed:?} (budget {budget:?}); it was stopped with Runtime.terminateExecution, so the tab answers again; {consequence}")
    } else {
        format!("the renderer did not answer {method} within {elapsed:?} (budget {budget:?}); Runtime.terminateExecution was sent, but no running script was confirmed stopped (the renderer may still be busy, or a navigation holds it); {consequence}")
    }
}

fn location_text(line: Option<u32>, column: Option<u32>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" (line {}, column {})", l + 1, c + 1),
        (Some(l), None) => format!(" (line {})", l + 1),
        _ => String::new(),
    }
}

impl Error {
    /// A stable snake_case code for agents and logs: `timeout`, `cancelled`,
    /// `page_busy`, `dialog_opened`, `navigated`, `context_destroyed`,
    /// `invalid_source`, `js_exception`, `evaluate_disabled`,
    /// `unknown_frame`, `transport`, `unexpected_reply`; for refs
    /// `unknown_ref`, `stale_ref`, `not_interactable`, `not_editable`,
    /// `invalid_key`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Timeout { .. } => "timeout",
            Error::Cancelled { .. } => "cancelled",
            Error::PageBusy { .. } => "page_busy",
            Error::DialogOpened { .. } => "dialog_opened",
            Error::Navigated { .. } => "navigated",
            Error::ContextDestroyed { .. } => "context_destroyed",
            Error::InvalidSource { .. } => "invalid_source",
            Error::JsException { .. } => "js_exception",
            Error::EvaluateDisabled => "evaluate_disabled",
            Error::UnknownFrame { .. } => "unknown_frame",
            Error::Transport { .. } => "transport",
            Error::UnexpectedReply { .. } => "unexpected_reply",
            Error::UnknownRef { .. } => "unknown_ref",
            Error::StaleRef { .. } => "stale_ref",
            Error::NotInteractable { .. } => "not_interactable",
            Error::NotEditable { .. } => "not_editable",
            Error::InvalidKey { .. } => "invalid_key",
        }
    }
    /// True for [`Error::Timeout`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout { .. })
    }
    /// True for [`Error::Cancelled`].
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Error::Cancelled { .. })
    }
    /// The dialog, for [`Error::DialogOpened`].
    pub fn dialog(&self) -> Option<&DialogInfo> {
        match self {
            Error::DialogOpened { dialog } => Some(dialog),
            _ => None,
        }
    }
    pub(crate) fn transport(context: impl Into<String>, source: cdp_transport::Error) -> Self {
        Error::Transport {
            context: context.into(),
            source,
        }
    }
}
