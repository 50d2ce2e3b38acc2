//! Errors: [`ToolError`] (what an agent sees), [`Error`] (the crate's Rust
//! error), and the mapping of the lower crates' errors (transport,
//! supervisor, evaluate) to the agent's error.

use crate::types::DialogView;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Result alias with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Stable error codes. The JSON spelling (`snake_case`) never changes within a
/// [`crate::SCHEMA_VERSION`]; new codes may be added, so agents must treat an
/// unknown code like `internal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorCode {
    /// A native dialog blocks the page; `dialog` holds it. Answer it with `browser_dialog`.
    DialogPending,
    /// The call's `timeout_ms` ran out (for evaluate: the script was terminated).
    Timeout,
    /// The ref belongs to a document that has since changed (navigation, reload).
    StaleRef,
    /// No such ref in the latest snapshot.
    UnknownRef,
    /// `browser_cdp` with a `frame_id` of a same-process frame: it has no session of its own.
    NotOopif,
    /// No such frame in the frame tree.
    UnknownFrame,
    /// The server runs with evaluate disabled; script-running calls are refused.
    EvaluateDisabled,
    /// `browser_dialog` with no dialog pending (or the given id is not pending).
    NoDialog,
    /// `browser_dialog` without `dialog_id` while several dialogs are pending.
    AmbiguousDialog,
    /// The tab's renderer crashed; navigate to recover.
    TargetCrashed,
    /// An argument is missing, has the wrong type or is out of range; `field` names it.
    InvalidArgument,
    /// The URL could not be loaded (`net::ERR_...`).
    NavigationFailed,
    /// The browser or the connection to it is gone.
    BrowserClosed,
    /// The evaluated script threw; `message` holds the exception text.
    ScriptError,
    /// The frame's document was replaced (navigation) or its execution context
    /// destroyed while the call ran; the script's outcome is unknown.
    Navigated,
    /// The ref's element exists but cannot be acted on (hidden, zero size).
    NotInteractable,
    /// The browser rejected a `browser_cdp` call (CDP error object).
    CdpError,
    /// No such tool.
    UnknownTool,
    /// No such tab.
    UnknownTab,
    /// Anything else; the message says what happened.
    Internal,
}

impl ErrorCode {
    /// The JSON spelling, e.g. `"dialog_pending"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::DialogPending => "dialog_pending",
            Self::Timeout => "timeout",
            Self::StaleRef => "stale_ref",
            Self::UnknownRef => "unknown_ref",
            Self::NotOopif => "not_oopif",
            Self::UnknownFrame => "unknown_frame",
            Self::EvaluateDisabled => "evaluate_disabled",
            Self::NoDialog => "no_dialog",
            Self::AmbiguousDialog => "ambiguous_dialog",
            Self::TargetCrashed => "target_crashed",
            Self::InvalidArgument => "invalid_argument",
            Self::NavigationFailed => "navigation_failed",
            Self::BrowserClosed => "browser_closed",
            Self::ScriptError => "script_error",
            Self::Navigated => "navigated",
            Self::NotInteractable => "not_interactable",
            Self::CdpError => "cdp_error",
            Self::UnknownTool => "unknown_tool",
            Self::UnknownTab => "unknown_tab",
            Self::Internal => "internal",
        }
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error an agent sees: `{"error": ToolError}`.
///
/// `message` says what happened and `next_step` what to call next. `dialog`
/// is present with `dialog_pending`; `candidates` with `ambiguous_dialog`;
/// `field` with `invalid_argument`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema, thiserror::Error)]
#[error("{code}: {message}")]
pub struct ToolError {
    /// Stable code.
    pub code: ErrorCode,
    /// What happened, with the values involved.
    pub message: String,
    /// What the agent should do next (a tool call, usually).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_step: Option<String>,
    /// The argument at fault (`invalid_argument`), as a path like `params.x`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// The dialog that blocks the page (`dialog_pending`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialog: Option<Box<DialogView>>,
    /// The pending dialogs to choose from (`ambiguous_dialog`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub candidates: Vec<DialogView>,
}

impl ToolError {
    /// A new error with a code and message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            next_step: None,
            field: None,
            dialog: None,
            candidates: Vec::new(),
        }
    }
    /// Sets `next_step`.
    pub fn next(mut self, step: impl Into<String>) -> Self {
        self.next_step = Some(step.into());
        self
    }
    /// An `invalid_argument` error naming `field`.
    pub fn invalid(field: impl Into<String>, message: impl Into<String>) -> Self {
        let mut e = Self::new(ErrorCode::InvalidArgument, message);
        e.field = Some(field.into());
        e.next(
            "fix the argument and call the tool again; the tool's input schema lists every field",
        )
    }
    /// A `dialog_pending` error carrying the dialog.
    pub fn dialog_pending(dialog: DialogView, tool: &str) -> Self {
        let mut e = Self::new(
            ErrorCode::DialogPending,
            format!(
                "{} dialog ({}) blocks the page, so {tool} cannot run: {:?}",
                a_dialog_kind(&dialog.kind),
                dialog.id,
                dialog.message
            ),
        );
        e.next_step = Some(format!(
            "answer it with browser_dialog {{\"action\":\"accept\"|\"dismiss\", \"dialog_id\":\"{}\"}}, then retry {tool}",
            dialog.id
        ));
        e.dialog = Some(Box::new(dialog));
        e
    }
    /// `dialog_pending` for a dialog that opened while `tool` ran (its
    /// script, or the page, opened it): the script ran and waits on the
    /// dialog; its outcome is not this call's.
    pub fn dialog_opened_by_script(dialog: DialogView, tool: &str) -> Self {
        let mut e = Self::dialog_pending(dialog, tool);
        if let Some(d) = e.dialog.as_deref() {
            e.message = format!(
                "{} dialog ({}) opened while {tool} ran: {:?}; the script ran up to it and waits for the answer, so its value is not returned",
                a_dialog_kind(&d.kind),
                d.id,
                d.message
            );
            e.next_step = Some(format!(
                "answer it with browser_dialog {{\"action\":\"accept\"|\"dismiss\", \"dialog_id\":\"{}\"}} (the script then goes on); read what it did with another {tool}",
                d.id
            ));
        }
        e
    }
    /// `browser_closed` when the Chromium `tabwarden mcp` launched has
    /// exited and relaunch `n` of at most `max` failed (`why`).
    pub fn relaunch_failed(n: u32, max: u32, why: &str) -> Self {
        Self::new(
            ErrorCode::BrowserClosed,
            format!("the Chromium tabwarden launched has exited and relaunch {n} of {max} failed: {why}"),
        )
        .next("call the tool again to retry the relaunch, or restart tabwarden mcp")
    }
    /// A `timeout` error for a budget of `budget_ms`.
    pub fn timeout(what: &str, budget_ms: u64) -> Self {
        Self::new(ErrorCode::Timeout, format!("{what} did not finish within timeout_ms={budget_ms}"))
            .next("call browser_snapshot to see the page state (a dialog may block it), then retry with a larger timeout_ms (max 120000)")
    }
    /// A `browser_closed` error.
    pub fn browser_closed(reason: impl std::fmt::Display) -> Self {
        Self::new(
            ErrorCode::BrowserClosed,
            format!("the browser connection is gone: {reason}"),
        )
        .next("restart the tabwarden server (or check the --cdp-url endpoint)")
    }
    /// A `browser_closed` error for a tab that is gone while the browser
    /// is not (closed by another client or the user, its target destroyed).
    pub fn tab_closed(reason: impl std::fmt::Display) -> Self {
        Self::new(
            ErrorCode::BrowserClosed,
            format!("the tab was closed ({reason})"),
        )
        .next("call browser_tabs with {\"action\": \"new\"} to open a new tab (or list the tabs and select one)")
    }
    /// A `target_crashed` error.
    pub fn crashed() -> Self {
        Self::new(ErrorCode::TargetCrashed, "the tab's renderer crashed")
            .next("call browser_navigate to load a page again")
    }
    /// An `internal` error.
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Internal, message)
    }
    /// `{"error": self}` as JSON.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({ "error": self })
    }
}

/// `"an alert"`, `"a confirm"`, …: the dialog kind with its article.
pub(crate) fn a_dialog_kind(kind: &str) -> String {
    let vowel = kind
        .chars()
        .next()
        .is_some_and(|c| "aeiouAEIOU".contains(c));
    format!("{} {kind}", if vowel { "an" } else { "a" })
}

/// The crate's Rust error (setting up [`crate::Tools`]; tool calls themselves
/// report a [`ToolError`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Connecting to or preparing the browser failed.
    #[error("browser setup failed: {source}")]
    Browser {
        /// The transport error.
        #[source]
        source: cdp_transport::Error,
    },
    /// The supervisor could not start on the tab.
    #[error("supervisor setup failed: {reason}")]
    Supervisor {
        /// What failed.
        reason: String,
    },
    /// A configuration value is not accepted.
    #[error("invalid configuration {field}: {reason}")]
    Config {
        /// The option.
        field: String,
        /// Why.
        reason: String,
    },
}

impl From<cdp_transport::Error> for Error {
    fn from(source: cdp_transport::Error) -> Self {
        Error::Browser { source }
    }
}

/// The error of a call on a tab whose supervisor is inactive: a crash is
/// `target_crashed`; a lost connection is `browser_closed` naming it;
/// anything else (target destroyed, closed by another client, page session
/// gone for good) is `browser_closed` "the tab was closed".
pub(crate) fn inactive_error(reason: Option<&str>) -> ToolError {
    let reason = reason.unwrap_or("no reason given");
    if reason.contains("crash") {
        return ToolError::crashed();
    }
    match reason.strip_prefix("connection closed: ") {
        Some(r) => ToolError::browser_closed(r),
        None => ToolError::tab_closed(reason),
    }
}

/// Maps a transport error to the agent's error.
pub(crate) fn map_transport(e: &cdp_transport::Error, what: &str) -> ToolError {
    use cdp_transport::Error as E;
    match e {
        E::Timeout { budget, .. } => ToolError::timeout(what, budget.as_millis() as u64),
        E::ConnectionClosed { reason } => ToolError::browser_closed(reason),
        E::TargetCrashed { .. } => ToolError::crashed(),
        E::SessionClosed { .. } => ToolError::new(ErrorCode::BrowserClosed, format!("{what}: {e}"))
            .next("call browser_snapshot (the frame or tab may be gone), or browser_tabs to pick another tab"),
        E::Protocol { .. } => ToolError::new(ErrorCode::CdpError, format!("{what}: {e}")),
        _ => ToolError::internal(format!("{what}: {e}")),
    }
}

/// Maps a supervisor error (by its variant) to the agent's error.
pub(crate) fn map_supervisor(e: &supervisor::Error, what: &str) -> ToolError {
    use supervisor::Error as E;
    match e {
        // The supervisor's text starts with its code ("no_dialog: …"); the
        // agent sees the code in `code` already.
        E::NoDialog { .. } | E::UnknownDialog { .. } => ToolError::new(
            ErrorCode::NoDialog,
            e.to_string()
                .strip_prefix("no_dialog: ")
                .map(str::to_string)
                .unwrap_or_else(|| e.to_string()),
        )
            .next("call browser_snapshot: pending_dialogs lists what can be answered, recent_dialogs what was closed already"),
        // `candidates` is filled by the caller from the view (it has the whole dialogs).
        E::AmbiguousDialog { .. } => ToolError::new(ErrorCode::AmbiguousDialog, e.to_string())
            .next("call browser_dialog again with dialog_id set to one of candidates[].id"),
        E::UnknownFrame { frame_id } => ToolError::new(
            ErrorCode::UnknownFrame,
            format!(
                "{what}: frame {frame_id} is not in the frame tree (it was removed, or its page navigated)"
            ),
        )
        .next("call browser_snapshot and use a frame_id from its frame_tree"),
        E::SameProcessFrame { .. } => ToolError::new(
            ErrorCode::NotOopif,
            format!("{what}: {e}"),
        )
        .next("use browser_evaluate with this frame_id, or browser_cdp without frame_id and pass frameId in params"),
        E::Inactive { reason, .. } => {
            if reason.contains("crash") {
                ToolError::crashed()
            } else {
                ToolError::new(ErrorCode::BrowserClosed, format!("{what}: {e}"))
                    .next("call browser_tabs to pick another tab, or restart the tabwarden server")
            }
        }
        E::WaitTimeout { .. } => ToolError::new(ErrorCode::Timeout, format!("{what}: {e}"))
            .next("call browser_snapshot to see the page state, then retry with a larger timeout_ms (max 120000)"),
        E::Answer { source, .. } | E::Cdp { source, .. } => {
            let mut t = map_transport(source, what);
            t.message = format!("{what}: {e}");
            t
        }
        // Configuration errors (policy, bridge mode, action names), and
        // variants added later.
        _ => ToolError::internal(format!("{what}: {e}")),
    }
}

/// Maps an evaluate-crate error (by its variant) to the agent's error.
/// `DialogOpened` is handled by the callers (they need the supervisor's dialog id).
pub(crate) fn map_eval(e: &evaluate::Error, what: &str) -> ToolError {
    use evaluate::Error as E;
    const FRESH: &str = "call browser_snapshot for fresh refs";
    match e {
        E::UnknownRef { .. } => ToolError::new(ErrorCode::UnknownRef, e.to_string())
            .next("call browser_snapshot and use a ref from it (refs look like e3)"),
        E::StaleRef { .. } => ToolError::new(ErrorCode::StaleRef, e.to_string()).next(FRESH),
        E::NotInteractable { .. } => ToolError::new(ErrorCode::NotInteractable, e.to_string())
            .next("call browser_snapshot: the element may be hidden or have no size; pick another ref"),
        // No code of its own in this schema version: the element takes no text.
        E::NotEditable { .. } => ToolError::new(ErrorCode::NotInteractable, format!("{what}: {e}"))
            .next("browser_type takes a text field, a text area, a contenteditable element, or a select (it picks the option with that text); use browser_click for buttons, links and checkboxes, or call browser_snapshot for the right ref"),
        E::InvalidKey { .. } => ToolError::invalid("key", e.to_string())
            .next("use a KeyboardEvent.key name: Enter, Tab, Escape, Backspace, Delete, ArrowUp/Down/Left/Right, Home, End, PageUp, PageDown, Space, or one character"),
        E::Timeout { kind, budget, .. } => ToolError::new(
            ErrorCode::Timeout,
            format!(
                "{what} did not finish within timeout_ms={}: {e}",
                budget.as_millis()
            ),
        )
        .next(match kind {
            // The script never ran: nothing in it to fix.
            evaluate::TimeoutKind::Setup => {
                "call browser_snapshot to see the page state, then call again (with a larger timeout_ms if the page is slow)"
            }
            _ => "fix the script (an endless loop or a promise that never settles?) or raise timeout_ms (max 120000)",
        }),
        // No code of its own in this schema version: a timeout whose
        // message says what kept the page busy and what was done about it.
        E::PageBusy { stopped, budget, .. } => ToolError::new(
            ErrorCode::Timeout,
            format!("{what} did not finish within timeout_ms={}: {e}", budget.as_millis()),
        )
        .next(if *stopped {
            format!(
                "call {what} again: the page's script was stopped; if the page starts it again, leave the page with browser_navigate"
            )
        } else {
            "call browser_snapshot to see the page state, then call again; if the page stays busy, leave it with browser_navigate".into()
        }),
        E::Cancelled { .. } => ToolError::internal(format!("{what}: {e}")),
        E::Navigated { .. } | E::ContextDestroyed { .. } => ToolError::new(ErrorCode::Navigated, format!("{what}: {e}"))
            .next("call browser_snapshot to see the new page, then decide whether to run it again"),
        E::InvalidSource { .. } => ToolError::new(ErrorCode::ScriptError, format!("{what}: {e}"))
            .next("fix the syntax: pass an expression, a function such as el => el.textContent, or statements (the value of the last expression statement is returned; with await, use return)"),
        E::JsException { .. } => ToolError::new(ErrorCode::ScriptError, format!("{what}: {e}"))
            .next("fix the expression and call browser_evaluate again"),
        E::EvaluateDisabled => evaluate_disabled(what),
        E::UnknownFrame { frame_id, .. } => ToolError::new(
            ErrorCode::UnknownFrame,
            format!(
                "{what}: frame {frame_id} is not in the frame tree (it was removed, or its page navigated)"
            ),
        )
        .next("call browser_snapshot and use a frame_id from its frame_tree"),
        E::DialogOpened { .. } => ToolError::new(ErrorCode::DialogPending, format!("{what}: {e}"))
            .next("call browser_snapshot to see pending_dialogs, answer with browser_dialog"),
        E::Transport { source, .. } => {
            let mut t = map_transport(source, what);
            t.message = format!("{what}: {e}");
            t
        }
        // An unreadable reply, and variants added later.
        _ => ToolError::internal(format!("{what}: {e}")),
    }
}

/// The `evaluate_disabled` error of `what`, a call that runs page script.
pub(crate) fn evaluate_disabled(what: &str) -> ToolError {
    ToolError::new(
        ErrorCode::EvaluateDisabled,
        format!(
            "{what} runs page script, and this server runs with evaluate disabled (--no-evaluate)"
        ),
    )
    .next("use browser_snapshot, browser_click, browser_type and browser_press_key instead")
}

#[cfg(test)]
mod tests;
