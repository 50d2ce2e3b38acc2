//! Errors: [`ToolError`] (what an agent sees) and [`Error`] (the crate's Rust error).

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
