//! One typed request and one typed response per tool, and the views they share.
//!
//! Requests derive [`JsonSchema`]: the input schema of each tool is generated
//! from these types, so the schema and the parser cannot disagree. Requests
//! reject unknown fields (a typo such as `timeoutMs` is an `invalid_argument`
//! naming it, not silently ignored).
//!
//! Integer arguments (`timeout_ms`, `limit`) follow JSON Schema's `integer`:
//! a number with a zero fractional part is an integer, so `5000.0` and `5e3`
//! are read as `5000`. `5000.5`, a negative number, a number past the field's
//! range and any string (`"NaN"`, `"5000"`) are `invalid_argument` naming the
//! field (see [`integral`]).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

// ---------------------------------------------------------------- shared views

/// A native JS dialog (alert, confirm, prompt, beforeunload).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct DialogView {
    /// Dialog id, `d-N`; pass it to `browser_dialog` as `dialog_id`.
    pub id: String,
    /// `alert`, `confirm`, `prompt` or `beforeunload`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The dialog's message.
    pub message: String,
    /// The prompt's default text (prompts only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_prompt: Option<String>,
    /// The frame that raised it (an OOPIF's frame id when raised inside one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frame_id: Option<String>,
    /// URL of the document that raised it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// True when `message` is at Chromium's cap and was probably cut:
    /// Chromium 156 cuts a dialog's message to 10,240 UTF-16 code units
    /// before it reaches CDP, so the page's full text is not available (a
    /// message of exactly that length cannot be told apart). Absent when false.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub message_truncated: bool,
}

/// A dialog that was closed (in `recent_dialogs`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClosedDialogView {
    /// Dialog id, `d-N`.
    pub id: String,
    /// `alert`, `confirm`, `prompt` or `beforeunload`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The dialog's message.
    pub message: String,
    /// Who closed it: `agent`, `auto_policy`, `watchdog` or `remote`.
    pub closed_by: String,
    /// True when accepted, false when dismissed; absent when unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted: Option<bool>,
    /// Text a prompt returned, when accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_input: Option<String>,
}

/// One frame of the frame tree.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameNode {
    /// Frame id (CDP `frameId`); pass it as `frame_id`.
    pub frame_id: String,
    /// The frame's URL.
    pub url: String,
    /// The iframe's `name` attribute, when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// True when the frame is out of process (has its own CDP session): route
    /// `browser_cdp` into it with `frame_id`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oopif: bool,
    /// Child frames.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub children: Vec<FrameNode>,
}

/// The frame tree: the top frame and its descendants.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameTreeView {
    /// The main frame, children nested.
    pub top: FrameNode,
    /// True when children were left out (over 30 children, or OOPIF depth over 2).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// Supervisor health.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SupervisorView {
    /// False after a crash, detach or closed connection.
    pub active: bool,
    /// Why it is inactive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A console error, a failed assert or an uncaught exception.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsoleEntry {
    /// `error`, `assert` or `exception`.
    pub kind: String,
    /// The text.
    pub text: String,
    /// Source URL, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

// ---------------------------------------------------------------- navigate

/// `browser_navigate`: load a URL in the current tab.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NavigateRequest {
    /// Absolute URL (`http:`, `https:`, `file:`, `data:`, `about:`).
    /// `javascript:` URLs are refused; so are `data:` and `blob:` URLs when
    /// the server runs with evaluate disabled.
    pub url: String,
    /// Budget for the whole call in ms, 1..=120000, default 20000.
    #[serde(default, deserialize_with = "integral::opt_u64")]
    #[schemars(range(min = 1, max = 120000))]
    pub timeout_ms: Option<u64>,
}

/// `browser_navigate` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NavigateResponse {
    /// The URL loaded.
    pub url: String,
    /// `loaded` (load event fired) or `dialog_opened` (a dialog blocks the
    /// load; `dialog` holds it; answer it with `browser_dialog`).
    pub status: String,
    /// The page title, when loaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The blocking dialog (`status: dialog_opened`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialog: Option<DialogView>,
    /// Present with `status: loaded` when the document is ready
    /// (DOMContentLoaded fired, the page answers) but its load event did not
    /// fire within `timeout_ms`: a subresource (image, stylesheet, iframe, …)
    /// is still loading; which one is unknown. Also present when the page
    /// being left was running a script that kept its renderer busy and it
    /// was stopped first (`Runtime.terminateExecution`) so that a same-site
    /// navigation could start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

// ---------------------------------------------------------------- snapshot

/// `browser_snapshot`: the page as accessibility text with refs, plus dialogs,
/// frames and console state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SnapshotRequest {
    /// Only interactive elements (buttons, links, form fields, …) and
    /// iframes: a much shorter text for a large page whose full snapshot is
    /// cut at its size cap. Default false.
    #[serde(default)]
    pub interactive_only: bool,
    /// Budget for the whole call in ms, 1..=120000, default 20000.
    #[serde(default, deserialize_with = "integral::opt_u64")]
    #[schemars(range(min = 1, max = 120000))]
    pub timeout_ms: Option<u64>,
}

/// `browser_snapshot` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SnapshotResponse {
    /// [`crate::SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The page URL.
    pub url: String,
    /// AX text: one line per node, `- role "name" [ref=eN]`, indented by depth,
    /// OOPIF content inlined under its iframe. Absent while a dialog is pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<String>,
    /// Why `snapshot` is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Dialogs waiting for an answer (always present, often empty).
    pub pending_dialogs: Vec<DialogView>,
    /// Recently closed dialogs (absent when none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recent_dialogs: Vec<ClosedDialogView>,
    /// The frame tree.
    pub frame_tree: FrameTreeView,
    /// Console errors seen since the tab was supervised (the supervisor's
    /// running total; `browser_console` shows the last 50).
    pub console_errors: usize,
    /// Supervisor health.
    pub supervisor: SupervisorView,
}

// ---------------------------------------------------------------- click / type / press_key

/// `browser_click`: click an element by ref.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClickRequest {
    /// A ref from the latest `browser_snapshot`, e.g. `e3`.
    #[serde(rename = "ref")]
    pub target: String,
    /// Budget for the whole call in ms, 1..=120000, default 20000.
    #[serde(default, deserialize_with = "integral::opt_u64")]
    #[schemars(range(min = 1, max = 120000))]
    pub timeout_ms: Option<u64>,
}

/// `browser_type`: type text into an element by ref.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TypeRequest {
    /// A ref from the latest `browser_snapshot`.
    #[serde(rename = "ref")]
    pub target: String,
    /// The text to type.
    pub text: String,
    /// Press Enter afterwards. Default false.
    #[serde(default)]
    pub submit: bool,
    /// Budget for the whole call in ms, 1..=120000, default 20000.
    #[serde(default, deserialize_with = "integral::opt_u64")]
    #[schemars(range(min = 1, max = 120000))]
    pub timeout_ms: Option<u64>,
}

/// `browser_press_key`: press one key (`Enter`, `Tab`, `Escape`, `ArrowDown`, `a`, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PressKeyRequest {
    /// Key name as in `KeyboardEvent.key`.
    pub key: String,
    /// Focus this ref first; default: the focused element.
    #[serde(default, rename = "ref")]
    pub target: Option<String>,
    /// Budget for the whole call in ms, 1..=120000, default 20000.
    #[serde(default, deserialize_with = "integral::opt_u64")]
    #[schemars(range(min = 1, max = 120000))]
    pub timeout_ms: Option<u64>,
}

/// Result of `browser_click`, `browser_type` and `browser_press_key`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ActionResponse {
    /// `done`, or `dialog_opened` when the action raised a dialog (`dialog`
    /// holds it; answer it with `browser_dialog`).
    pub status: String,
    /// The ref acted on.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The dialog the action raised.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialog: Option<DialogView>,
}

// ---------------------------------------------------------------- evaluate

/// `browser_evaluate`: run a JavaScript expression.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EvaluateRequest {
    /// The expression. With `ref`, a function source called with the element,
    /// e.g. `el => el.textContent`. Statements (`var x = 1; x`) give the value
    /// of the last one. Promises are awaited.
    pub expression: String,
    /// Evaluate against this element (a ref from `browser_snapshot`).
    #[serde(default, rename = "ref")]
    pub target: Option<String>,
    /// Evaluate in this frame (from `frame_tree`); default the main frame.
    #[serde(default)]
    pub frame_id: Option<String>,
    /// Budget in ms, 1..=120000, default 20000. On expiry the script is
    /// terminated and the tab stays usable.
    #[serde(default, deserialize_with = "integral::opt_u64")]
    #[schemars(range(min = 1, max = 120000))]
    pub timeout_ms: Option<u64>,
}

/// `browser_evaluate` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EvaluateResponse {
    /// The value as JSON. `undefined`, `NaN`, `-0`, `Infinity` and BigInt come
    /// as strings with `type` saying so; DOM nodes and cycles as a description.
    pub value: Value,
    /// JS type: `undefined`, `number`, `string`, `boolean`, `object`, `bigint`, ...
    #[serde(rename = "type")]
    pub kind: String,
    /// True when the value was cut to the size cap.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
    /// Time taken, ms.
    pub elapsed_ms: u64,
}

// ---------------------------------------------------------------- dialog

/// What to do with a dialog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DialogAction {
    /// OK / confirm / prompt returns `prompt_text`.
    Accept,
    /// Cancel / prompt returns null.
    Dismiss,
}

/// `browser_dialog`: answer a pending dialog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DialogRequest {
    /// `accept` or `dismiss`.
    pub action: DialogAction,
    /// Text a prompt returns when accepted; default its default text.
    #[serde(default)]
    pub prompt_text: Option<String>,
    /// Which dialog (`d-N`); required when several are pending.
    #[serde(default)]
    pub dialog_id: Option<String>,
}

/// `browser_dialog` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DialogResponse {
    /// The dialog answered.
    pub dialog: DialogView,
    /// `accept` or `dismiss`.
    pub action: DialogAction,
    /// Dialogs still pending after this one.
    pub pending_dialogs: Vec<DialogView>,
    /// After accepting a `beforeunload` dialog of the tab: the URL of the
    /// page the navigation it released committed (the call waits, within
    /// its budget, for that commit). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// What became of the released navigation when it did not commit a new
    /// page in time (still pending, cancelled, failed). Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

// ---------------------------------------------------------------- cdp

/// `browser_cdp`: send a raw CDP command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CdpRequest {
    /// CDP method, e.g. `DOM.getDocument`.
    pub method: String,
    /// Parameters object; default `{}`.
    #[serde(default)]
    pub params: Option<serde_json::Map<String, Value>>,
    /// Send on this OOPIF's session (a frame with `oopif: true` in `frame_tree`).
    #[serde(default)]
    pub frame_id: Option<String>,
    /// Budget in ms, 1..=120000, default 20000.
    #[serde(default, deserialize_with = "integral::opt_u64")]
    #[schemars(range(min = 1, max = 120000))]
    pub timeout_ms: Option<u64>,
}

/// `browser_cdp` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CdpResponse {
    /// The CDP result object.
    pub result: Value,
}

// ---------------------------------------------------------------- screenshot

/// Screenshot image format.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ImageFormat {
    /// PNG (default).
    #[default]
    Png,
    /// JPEG (quality 80).
    Jpeg,
}

/// `browser_screenshot`: capture the viewport (or the full page).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ScreenshotRequest {
    /// `png` (default) or `jpeg`.
    #[serde(default)]
    pub format: ImageFormat,
    /// Capture the whole scrollable page. Default false.
    #[serde(default)]
    pub full_page: bool,
    /// Budget in ms, 1..=120000, default 20000.
    #[serde(default, deserialize_with = "integral::opt_u64")]
    #[schemars(range(min = 1, max = 120000))]
    pub timeout_ms: Option<u64>,
}

/// `browser_screenshot` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScreenshotResponse {
    /// `image/png` or `image/jpeg`.
    pub mime_type: String,
    /// Image size, bytes.
    pub bytes: usize,
    /// The image, base64.
    pub data: String,
    /// Present when the image is not all the agent asked for, or when the
    /// page's own script kept its renderer busy (no frame comes while it
    /// runs) and was stopped first (`Runtime.terminateExecution`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// `browser_relaunched`, added by `tabwarden mcp` to the result of a call
/// that ran on a Chromium it launched again because the one it had launched
/// exited.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BrowserRelaunched {
    /// Which relaunch this was (1-based).
    pub relaunch: u32,
    /// The most relaunches the server makes (`--max-relaunches`).
    pub max_relaunches: u32,
    /// How long the relaunch took, milliseconds.
    pub elapsed_ms: u64,
    /// What the agent lost.
    pub note: String,
}

impl BrowserRelaunched {
    /// The record of relaunch `relaunch` of at most `max`, which took `elapsed`.
    pub fn new(relaunch: u32, max: u32, elapsed: std::time::Duration) -> Self {
        Self {
            relaunch,
            max_relaunches: max,
            elapsed_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
            note: "the Chromium tabwarden launched had exited; this call ran on a new headless Chromium (pages, tabs, refs and pending dialogs of the old one are gone)".into(),
        }
    }
}

// ---------------------------------------------------------------- console

/// `browser_console`: console errors and uncaught exceptions of the tab.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ConsoleRequest {
    /// Return at most this many, newest last. Default 20.
    #[serde(default, deserialize_with = "integral::opt_usize")]
    pub limit: Option<usize>,
}

/// `browser_console` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConsoleResponse {
    /// The newest entries, oldest first.
    pub errors: Vec<ConsoleEntry>,
    /// Console errors seen in all since the tab was supervised (the
    /// supervisor keeps only the last 50, so this can exceed what `errors` holds).
    pub total: usize,
}

// ---------------------------------------------------------------- tabs

/// What `browser_tabs` does.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TabsAction {
    /// List the tabs (default).
    #[default]
    List,
    /// Open a new tab (at `url`, default `about:blank`) and make it current.
    New,
    /// Make `tab_id` the current tab.
    Select,
    /// Close `tab_id`.
    Close,
}

/// `browser_tabs`: list, open, select or close tabs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TabsRequest {
    /// `list` (default), `new`, `select` or `close`.
    #[serde(default)]
    pub action: TabsAction,
    /// The tab for `select` and `close`.
    #[serde(default)]
    pub tab_id: Option<String>,
    /// URL for `new`, loaded as `browser_navigate` loads it (same checks,
    /// same `status`); default `about:blank`.
    #[serde(default)]
    pub url: Option<String>,
}

/// One tab.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TabView {
    /// Tab id (CDP `targetId`).
    pub tab_id: String,
    /// URL.
    pub url: String,
    /// Title.
    pub title: String,
    /// True for the tab the other tools act on.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub current: bool,
}

/// `browser_tabs` result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TabsResponse {
    /// Every page tab of the browser.
    pub tabs: Vec<TabView>,
    /// With `action: "new"` and a `url`: `loaded` or `dialog_opened`, as
    /// `browser_navigate` reports it for the new tab. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    /// The dialog that blocks the new tab's page (`status: dialog_opened`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dialog: Option<DialogView>,
    /// As `browser_navigate`'s `note` (the new page's load event did not fire in time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

// ---------------------------------------------------------------- integer arguments

/// Serde `deserialize_with` helpers for the optional unsigned integer
/// arguments, used on every integer field of the requests.
///
/// JSON Schema (draft 2020-12, the dialect of the published input schemas)
/// counts a number with a zero fractional part as an `integer`, and agent
/// runtimes that hold numbers as doubles send `5000.0`; serde's own `u64`
/// refuses any float. These accept:
///
/// * `null` (or the field left out, through `#[serde(default)]`) → `None`;
/// * a JSON integer in `0..=T::MAX`;
/// * a finite float with no fractional part in that range (`5000.0`, `5e3`,
///   `-0.0` → `0`).
///
/// Everything else is a serde error that `parse_args` turns into
/// `invalid_argument` naming the field: a fraction (`5000.5`), a negative
/// number, a value past `T::MAX` (`1e20`), a string (`"NaN"`, `"5000"`), a
/// boolean, an array or an object. Range checks of the tool itself (for
/// `timeout_ms`, 1..=120000) come after, on the integer.
pub mod integral {
    use serde::de::{self, Deserializer, Unexpected, Visitor};
    use std::fmt;
    use std::marker::PhantomData;

    /// `Option<u64>` from a JSON integer or integral float (see the module doc).
    ///
    /// # Errors
    /// The deserializer's error for anything that is not `null` or a
    /// non-negative integral number up to `u64::MAX`.
    pub fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
        d.deserialize_option(OptUint::<u64>(PhantomData))
    }

    /// `Option<usize>` from a JSON integer or integral float (see the module doc).
    ///
    /// # Errors
    /// The deserializer's error for anything that is not `null` or a
    /// non-negative integral number up to `usize::MAX`.
    pub fn opt_usize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<usize>, D::Error> {
        d.deserialize_option(OptUint::<usize>(PhantomData))
    }

    struct OptUint<T>(PhantomData<T>);
    struct Uint<T>(PhantomData<T>);

    const EXPECTED: &str = "a non-negative integer (a number with no fractional part)";

    impl<'de, T: TryFrom<u64>> Visitor<'de> for OptUint<T> {
        type Value = Option<T>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(EXPECTED)
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
            d.deserialize_any(Uint::<T>(PhantomData)).map(Some)
        }
    }

    impl<'de, T: TryFrom<u64>> Visitor<'de> for Uint<T> {
        type Value = T;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(EXPECTED)
        }

        fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
            T::try_from(v)
                .map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &"an integer in range"))
        }

        fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
            match u64::try_from(v) {
                Ok(u) => self.visit_u64(u),
                Err(_) => Err(E::invalid_value(Unexpected::Signed(v), &self)),
            }
        }

        fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
            // 2^64 is the first float past u64::MAX (u64::MAX itself rounds up to it).
            const TWO_POW_64: f64 = 18_446_744_073_709_551_616.0;
            if !(0.0..TWO_POW_64).contains(&v) || v.fract() != 0.0 {
                return Err(E::invalid_value(Unexpected::Float(v), &self));
            }
            // Exact: an integral float in [0, 2^64) converts without rounding.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let u = v as u64;
            self.visit_u64(u)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
