//! # tool-surface
//!
//! The browser tools an AI agent calls, and every JSON shape it sees. The
//! tools compose the [`supervisor`] (dialogs, frames, OOPIF routing, popups,
//! console errors) and [`evaluate`] (budgeted evaluate, AX refs and real
//! input on refs) over one [`cdp_transport::Connection`]. Each tab is one
//! `Supervisor` + one `Engine` + one `AxSnapshotter` with the `RefMap` of its
//! latest snapshot. This crate keeps no browser state of its own and sends
//! CDP itself only to route `browser_cdp`, and for the few commands no lower
//! crate covers (`Page.navigate`, `Page.captureScreenshot`, tab targets).
//!
//! ## Design
//!
//! * **JSON in, JSON out.** [`Tools::call`] takes a tool name and its
//!   arguments object and always returns a JSON value: the tool's response
//!   object, or `{"error": ToolError}`. It never panics and never hangs: every
//!   call runs under one [`cdp_transport::Budget`] built from its `timeout_ms`
//!   (1..=120000, default 20000; the same meaning as the CLI's `--timeout-ms`).
//! * **Schemas come from the types.** Each tool has a typed request in
//!   [`types`]; its JSON Schema ([`Tools::list`]) is generated from that type
//!   with `schemars`, and the same type parses the arguments, so schema and
//!   parser agree. Unknown fields are refused (a typo is reported, not ignored).
//! * **Dialogs first.** While a native dialog is pending, the page's renderer
//!   answers nothing. Renderer-bound tools (`browser_click`, `browser_type`,
//!   `browser_press_key`, `browser_evaluate`, `browser_screenshot`,
//!   `browser_cdp` on the page) therefore return at once with
//!   `dialog_pending` and the dialog. `browser_snapshot` still answers, with
//!   the pending dialogs and the frame tree but no AX text. `browser_navigate`
//!   returns when the page loads or as soon as a dialog blocks it.
//! * **Small output.** Tokens are the agent's cost: absent beats `null`, empty
//!   lists are left out where the doc below says so.
//!
//! ## JSON shapes (schema_version 1)
//!
//! [`SCHEMA_VERSION`] is 1. Within a version fields are only added, never
//! renamed or removed; error codes are only added.
//!
//! ### Errors
//!
//! ```json
//! {"error": {"code": "dialog_pending",
//!            "message": "a prompt dialog (d-1) blocks the page, so browser_click cannot run: \"Your name?\"",
//!            "next_step": "answer it with browser_dialog {...}, then retry browser_click",
//!            "dialog": {"id": "d-1", "type": "prompt", "message": "Your name?", "default_prompt": "", "frame_id": "…", "url": "…"}}}
//! ```
//!
//! `code` is one of [`ErrorCode`]: `dialog_pending` (with `dialog`), `timeout`,
//! `stale_ref`, `unknown_ref`, `not_oopif`, `unknown_frame`,
//! `evaluate_disabled`, `no_dialog`, `ambiguous_dialog` (with `candidates`),
//! `target_crashed`, `invalid_argument` (with `field`), `navigation_failed`,
//! `browser_closed`, `script_error`, `navigated`, `not_interactable`,
//! `cdp_error`, `unknown_tool`, `unknown_tab`, `internal`. Errors of the
//! lower crates are mapped by their variant (`error.rs`). `next_step`
//! (optional) says what to call next.
//!
//! ### Shared objects
//!
//! * dialog: `{id: "d-N", type: "alert"|"confirm"|"prompt"|"beforeunload"|"unknown", message, default_prompt?, frame_id?, url?, message_truncated?: true}`
//!   (`unknown`: the browser's event had no or an unrecognised type; answer it like any other;
//!   `message_truncated`: the message is at Chromium's cap of 10,240 UTF-16 code units, so
//!   Chromium probably cut it before CDP carried it)
//! * closed dialog: `{id, type, message, closed_by: "agent"|"auto_policy"|"watchdog"|"remote", accepted?, user_input?}`
//! * frame: `{frame_id, url, name?, oopif?: true, children?: [frame]}` (`oopif` and
//!   `children` absent when false / empty)
//!
//! ### Responses, per tool
//!
//! | tool | arguments | response |
//! |---|---|---|
//! | `browser_navigate` | `{url, timeout_ms?}` | `{url, status: "loaded"\|"dialog_opened", title?, dialog?, note?}` |
//! | `browser_snapshot` | `{interactive_only?, timeout_ms?}` | `{schema_version, url, snapshot?, note?, pending_dialogs: [dialog], recent_dialogs?: [closed dialog], frame_tree: {top: frame, truncated?}, console_errors: n, supervisor: {active, reason?}}` |
//! | `browser_click` | `{ref, timeout_ms?}` | `{status: "done"\|"dialog_opened", ref, dialog?}` |
//! | `browser_type` | `{ref, text, submit?, timeout_ms?}` | as click |
//! | `browser_press_key` | `{key, ref?, timeout_ms?}` | as click |
//! | `browser_evaluate` | `{expression, ref?, frame_id?, timeout_ms?}` | `{value, type, truncated?, elapsed_ms}` |
//! | `browser_dialog` | `{action: "accept"\|"dismiss", prompt_text?, dialog_id?}` | `{dialog, action, pending_dialogs, url?, note?}` |
//! | `browser_cdp` | `{method, params?, frame_id?, timeout_ms?}` | `{result}` |
//! | `browser_screenshot` | `{format?: "png"\|"jpeg", full_page?, timeout_ms?}` | `{mime_type, bytes, data (base64)}` |
//! | `browser_console` | `{limit?}` | `{errors: [{kind, text, url?}], total}` |
//! | `browser_tabs` | `{action?: "list"\|"new"\|"select"\|"close", tab_id?, url?}` | `{tabs: [{tab_id, url, title, current?}], status?, dialog?, note?}` |
//!
//! `browser_navigate` (and `browser_tabs new` with a `url`, which loads it
//! the same way and reports the same `status`, `dialog` and `note`):
//!
//! * refuses `javascript:` URLs, and with evaluate disabled `data:`, `blob:`
//!   and `filesystem:` URLs (`invalid_argument`, `field: "url"`): their
//!   documents are written by the caller, so their scripts would be the
//!   agent's own;
//! * reports the URL and title of the document its own navigation
//!   committed, read after that document's load (a load event of the page
//!   before is ignored); a `Page.navigate` that Chromium aborts because
//!   another commit was still in flight is sent once more;
//! * gives up on a navigation that has not committed by `timeout_ms` (a
//!   server that accepts and never answers) with `timeout`, after
//!   `Page.stopLoading`: the tab stays on its previous page and answers at
//!   once (until a pending navigation ends Chromium holds every
//!   renderer-bound command of the tab);
//! * when the document is ready (DOMContentLoaded) but its load event has
//!   not fired by `timeout_ms` (a subresource that never loads), returns
//!   `status: "loaded"` with a `note` saying so; a document still being
//!   parsed is a `timeout` saying so; a page busy in a script at the
//!   deadline has the script stopped (`Runtime.terminateExecution`) and the
//!   `timeout` says so only when the page answered again afterwards.
//!
//! `browser_dialog` accepting a `beforeunload` of the tab waits (within its
//! budget) for the navigation it released to commit and gives its `url`
//! (or a `note` when it did not commit).
//!
//! The `snapshot` text is the refs crate's text form
//! ([`evaluate::refs`]): one line per node, indented two spaces per level,
//! `- role "name" [states] [ref=eN] [nth=N]` (`: "text"` for folded text),
//! capped at 48 KiB with a marker line (and a `note`: refs past the cut are
//! not usable, `interactive_only: true` gives a shorter text with the refs
//! of the interactive elements; a cut ref is `unknown_ref` saying so).
//! Content of every iframe (cross-site ones included) is inlined under its
//! `Iframe` line. A ref the snapshot showed `[disabled]` that is still
//! disabled when clicked, typed into or focused is `not_interactable`. Refs stay valid across
//! calls until the next `browser_snapshot` of the tab (each tab keeps its
//! own); a ref whose document changed gives `stale_ref`, one not in the
//! latest snapshot `unknown_ref`. Clicks, typing and keys are real input
//! events (`Input.dispatchMouseEvent`, `Input.insertText`,
//! `Input.dispatchKeyEvent`).
//!
//! `browser_evaluate` `value` is the result as JSON; values JSON cannot hold
//! (`undefined`, `NaN`, `-0`, `Infinity`, BigInt) come as a string with
//! `type` naming the JS type; DOM nodes, functions, maps, dates, cycles and
//! the like come as the engine's tagged object (`{"$type": "node", …}`,
//! see [`evaluate::engine`]). A script still running at its deadline is
//! terminated (`Runtime.terminateExecution`) and the call fails with
//! `timeout` naming `timeout_ms`; the tab stays usable. A dialog opened by
//! the script ends the call with `dialog_pending`.
//!
//! `console_errors` (snapshot) and `total` (`browser_console`) count every
//! console error seen since the tab was supervised; `errors` holds at most
//! the last 50.
//!
//! Dialog policies: under `must_respond` (default) a pending dialog makes
//! renderer-bound tools return `dialog_pending` at once, and a call under way
//! when one opens returns `dialog_opened` / `dialog_pending`. Under
//! `auto_dismiss` / `auto_accept` the policy owns every dialog: no call is
//! refused or cut short for one (a call waits, within its `timeout_ms`, for
//! the policy to answer the dialogs pending when it starts), and
//! `browser_navigate` sends the navigation even while a dialog shows (the
//! navigation closes it; it is recorded `auto_policy` or `remote`).
//! `browser_evaluate` of `confirm('x')` under `auto_accept` returns `true`:
//! the engine learns from the supervisor that the policy answers every
//! dialog, and lets the script run on to its value.
//!
//! A tab closed elsewhere (another client, the user) gives `browser_closed`
//! "the tab was closed (…)" with `next_step` `browser_tabs`; a lost
//! connection gives `browser_closed` naming it, from every tool
//! (`browser_snapshot` and `browser_tabs` included: what they would show is
//! stale). When the supervisor
//! reconnects (see [`ToolsConfig::reconnect_attempts`]) the tools work again
//! on its new connection; refs from before are `stale_ref`.
//!
//! With evaluate disabled, `browser_cdp` takes only the methods that cannot
//! run script (reads such as `DOM.getDocument`, `Page.getFrameTree`,
//! `Accessibility.getFullAXTree`, `Page.captureScreenshot`, plus
//! `Page.stopLoading`, `Page.bringToFront`, `Page.handleJavaScriptDialog`
//! and `Page.navigate` to a URL `browser_navigate` would load); every other
//! method is `evaluate_disabled`: too many raw methods run script of the
//! caller's choosing in some way (`Runtime.*`, `DOM.setOuterHTML` with an
//! inline handler, `Page.reload`'s `scriptToEvaluateOnLoad`, …) for a deny
//! list to be sound. With `frame_id` of a same-process frame it fails with
//! `not_oopif`: use `browser_evaluate` with that `frame_id` instead.
//!
//! ## Example
//!
//! ```no_run
//! # #[tokio::main] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use tool_surface::{Tools, ToolsConfig};
//! let ws = cdp_transport::launcher::shared_chrome()?;
//! let tools = Tools::connect(&ws, ToolsConfig::default()).await?;
//! let out = tools.call("browser_navigate", serde_json::json!({"url": "data:text/html,<button>OK</button>"})).await;
//! assert_eq!(out["status"], "loaded");
//! let snap = tools.call("browser_snapshot", serde_json::json!({})).await;
//! println!("{}", snap["snapshot"]);
//! # Ok(()) }
//! ```

mod catalog;
mod error;
mod tab;
mod tools;
pub mod types;

pub use catalog::{list, parse_args, ToolInfo, TOOL_NAMES};
pub use error::{Error, ErrorCode, Result, ToolError};
pub use tools::{Tools, ToolsConfig};

/// Version of the JSON shapes documented above.
pub const SCHEMA_VERSION: u32 = 1;
