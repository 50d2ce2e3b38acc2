//! The immutable snapshot a reader gets from [`crate::Supervisor::snapshot`].

use cdp_transport::{FrameId, SessionId, TargetId};
use serde::Serialize;

/// Capacity of the recent-dialog ring.
pub const RECENT_DIALOGS_CAP: usize = 20;
/// Capacity of the console-error ring.
pub const CONSOLE_ERRORS_CAP: usize = 50;
/// Most child frames listed in [`FrameTreeView::children`].
pub const FRAME_CHILDREN_CAP: usize = 30;
/// Deepest OOPIF nesting followed (the top page is depth 0).
pub const MAX_OOPIF_DEPTH: u8 = 2;

/// Who closed a dialog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ClosedBy {
    /// Answered through [`crate::Supervisor::respond`].
    Agent,
    /// Answered by the `auto_dismiss` / `auto_accept` policy; also a bridge
    /// dialog over `bridge_script::MAX_PENDING_DIALOGS`, dismissed at once.
    AutoPolicy,
    /// Dismissed by the `must_respond` watchdog.
    Watchdog,
    /// Closed by someone else: the browser, a navigation, a proxy, another
    /// CDP client, or a lost connection / crashed target.
    Remote,
}

impl ClosedBy {
    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Agent => "agent",
            Self::AutoPolicy => "auto_policy",
            Self::Watchdog => "watchdog",
            Self::Remote => "remote",
        }
    }
}

/// How a dialog reached the supervisor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum DialogPath {
    /// A native dialog (`Page.javascriptDialogOpening`), answered with
    /// `Page.handleJavaScriptDialog` on the top-level page or popup session.
    #[default]
    Native,
    /// The dialog bridge (`Fetch.requestPaused` of the bridge host), answered
    /// with `Fetch.fulfillRequest` on the session that paused it.
    Bridge,
}

/// A dialog blocking a page's JS thread now.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PendingDialog {
    /// `d-N`, unique within one supervisor.
    pub id: String,
    /// `alert`, `confirm`, `prompt` or `beforeunload` (as CDP sends it), or
    /// `unknown` when the event's `type` is missing or none of these (a
    /// malformed or newer event): such a dialog is still pending and
    /// answerable like any other.
    #[serde(rename = "type")]
    pub kind: String,
    /// The dialog text.
    pub message: String,
    /// `defaultPrompt` for a prompt; absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub default_prompt: Option<String>,
    /// URL of the document that opened it.
    pub url: String,
    /// The frame that raised it (an OOPIF's own frame id when raised inside one).
    pub frame_id: Option<FrameId>,
    /// The target whose page session must answer (the tab or a popup).
    pub target_id: TargetId,
    /// The session on which it is answered: the top-level page or popup
    /// session for a native dialog; for a bridge dialog the session whose
    /// `Fetch.requestPaused` it came from (an OOPIF's own session when raised inside one).
    pub session_id: Option<SessionId>,
    /// Wall clock when it opened, milliseconds since the Unix epoch.
    pub opened_at_ms: u64,
    /// The bridge request id when the dialog came through the dialog bridge; absent for native dialogs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bridge_request_id: Option<String>,
    /// `native` or `bridge`: the path it came through (and is answered on).
    pub opened_via: DialogPath,
}

/// A dialog that is no longer pending.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClosedDialog {
    /// The dialog as it was pending.
    #[serde(flatten)]
    pub dialog: PendingDialog,
    /// Wall clock when it closed, milliseconds since the Unix epoch.
    pub closed_at_ms: u64,
    /// Who closed it.
    pub closed_by: ClosedBy,
    /// `true` accepted, `false` dismissed; absent when unknown (e.g. lost connection).
    pub accepted: Option<bool>,
    /// The text a prompt returned, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub user_input: Option<String>,
}

/// One frame.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FrameView {
    /// `Page.FrameId` (for an OOPIF also its target id).
    pub frame_id: FrameId,
    /// Parent frame; `None` for the top frame.
    pub parent_frame_id: Option<FrameId>,
    /// Current URL (empty before the first commit).
    pub url: String,
    /// `securityOrigin` (empty when not reported yet).
    pub origin: String,
    /// The frame's `name`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// True when the frame runs in its own process and has its own session.
    pub is_oopif: bool,
    /// The OOPIF's session (only OOPIF frames carry one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<SessionId>,
    /// OOPIF hops from the top page (0: in the top page's process).
    pub oopif_depth: u8,
}

/// The frame tree, flattened: the top frame and every other frame with its parent.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct FrameTreeView {
    /// The tab's main frame, once known.
    pub top: Option<FrameView>,
    /// Other frames in discovery order, at most [`FRAME_CHILDREN_CAP`].
    pub children: Vec<FrameView>,
    /// True when frames were left out (the cap, or OOPIFs deeper than [`MAX_OOPIF_DEPTH`]).
    pub truncated: bool,
}

/// One console error (`Runtime.consoleAPICalled` error/assert, `Runtime.exceptionThrown`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConsoleError {
    /// `error`, `assert` or `exception`.
    pub kind: String,
    /// The text (arguments joined, or the exception description).
    pub text: String,
    /// Source URL when reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// The session it came from.
    pub session_id: Option<SessionId>,
    /// Wall clock, milliseconds since the Unix epoch.
    pub at_ms: u64,
}

/// A popup (a page target opened by the tab) being watched.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PopupView {
    /// The popup's target.
    pub target_id: TargetId,
    /// Its session.
    pub session_id: SessionId,
    /// Its URL as last reported.
    pub url: String,
}

/// An immutable snapshot of one supervisor's state.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SupervisorView {
    /// The supervised tab.
    pub target_id: TargetId,
    /// False after a crash, a detach, a lost socket or stop.
    pub active: bool,
    /// Why `active` is false (`target crashed`, `connection closed: ...`, ...).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Connections made so far (1 + successful reconnects).
    pub generation: u64,
    /// Dialogs open now, oldest first.
    pub pending_dialogs: Vec<PendingDialog>,
    /// Up to [`RECENT_DIALOGS_CAP`] closed dialogs, oldest first.
    pub recent_dialogs: Vec<ClosedDialog>,
    /// The tab's frame tree.
    pub frame_tree: FrameTreeView,
    /// Up to [`CONSOLE_ERRORS_CAP`] console errors, oldest first.
    pub console_errors: Vec<ConsoleError>,
    /// Every console error seen since the supervisor started (across
    /// reconnects), including those the ring of [`CONSOLE_ERRORS_CAP`] no
    /// longer holds.
    pub console_errors_total: u64,
    /// Popups opened by the tab and still open.
    pub popups: Vec<PopupView>,
    /// True once the dialog bridge is installed on the page session of the
    /// current connection (`bridge: on`, or `auto` after it switched on).
    pub bridge_active: bool,
    /// Requests to the bridge host refused with 403 because they lacked this
    /// supervisor's token (a page forging dialogs); no dialog was created.
    pub bridge_refused: u64,
    /// Dialogs seen opening since the supervisor started (native and
    /// bridge, across reconnects): the `N` of the latest `d-N`. A change
    /// between two views means a dialog opened in between, even one an
    /// auto policy has already closed. Not serialized.
    #[serde(skip)]
    pub dialogs_opened: u64,
}

/// The id of the `n`-th dialog a supervisor saw opening (`d-N`).
pub(crate) fn dialog_id(n: u64) -> String {
    format!("d-{n}")
}

impl SupervisorView {
    /// The dialog that opened last ([`SupervisorView::dialogs_opened`]),
    /// pending or among the recent ones; `None` when none opened yet or the
    /// recent list no longer holds it.
    pub fn latest_dialog(&self) -> Option<&PendingDialog> {
        self.dialog(&dialog_id(self.dialogs_opened))
    }

    /// The dialog `id`, pending or among the recent ones.
    pub fn dialog(&self, id: &str) -> Option<&PendingDialog> {
        self.pending_dialogs
            .iter()
            .find(|d| d.id == id)
            .or_else(|| {
                self.recent_dialogs
                    .iter()
                    .rev()
                    .map(|c| &c.dialog)
                    .find(|d| d.id == id)
            })
    }
}
