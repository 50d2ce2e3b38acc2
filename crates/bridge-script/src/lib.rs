//! # bridge-script
//!
//! The injected dialog bridge for hosted browsers, and the Rust side of its
//! wire format. Pure Rust plus one JS asset: no CDP I/O happens here, the
//! supervisor sends what this crate builds.
//!
//! ## Why
//!
//! Some hosted browsers (Browserbase, seed 000) put a proxy between us and
//! Chromium that closes every native dialog within ~10 ms, so
//! `Page.handleJavaScriptDialog` always loses the race. The bridge makes the
//! native dialog never fire: the script replaces `alert`, `confirm` and
//! `prompt` with a synchronous XHR to a made-up host under `.invalid`;
//! `Fetch.enable` with a pattern for that host only pauses the request
//! (`Fetch.requestPaused`), the supervisor turns it into a pending dialog, and
//! answers with `Fetch.fulfillRequest` and a small JSON body that the script
//! decodes, so `prompt()` returns the agent's text (field case C26).
//!
//! ## How the supervisor uses it
//!
//! On every session (page, OOPIF, popup), while the target is still paused on
//! start (before `Runtime.runIfWaitingForDebugger`):
//!
//! 1. `Page.addScriptToEvaluateOnNewDocument` with [`Bridge::add_script_params`]
//!    (`{source, runImmediately: true}`), and for documents already loaded
//!    `Runtime.evaluate` with [`Bridge::evaluate_params`] (the script is
//!    idempotent: it installs once per window);
//! 2. `Fetch.enable` with [`Bridge::fetch_enable_params`] (only the bridge
//!    host, request stage; `Fetch.enable` is per session and *replaces*
//!    earlier patterns, so whoever else needs Fetch on that session must merge
//!    with [`Bridge::fetch_patterns`]).
//!
//! On `Fetch.requestPaused` of that session, [`Bridge::parse_paused`] says what
//! to do:
//!
//! | [`Paused`]             | answer with `Fetch.fulfillRequest` / `Fetch.continueRequest` |
//! |------------------------|-------------------------------------------------------------|
//! | `Dialog{..}`           | a pending dialog; later [`Bridge::fulfill_answer`]          |
//! | `Preflight{..}`        | [`Bridge::fulfill_preflight`] at once                        |
//! | `Forged{..}`           | [`Bridge::fulfill_forbidden`] at once, no dialog            |
//! | `NotOurs{..}`          | [`continue_params`] (`Fetch.continueRequest`) at once       |
//!
//! The supervisor enforces [`MAX_PENDING_DIALOGS`]: a bridge dialog over the
//! cap is answered with [`Bridge::fulfill_answer`]`(id, false, None)` at once.
//! A paused request must always be answered within bounded time (policy or
//! watchdog); after a reconnect, request ids of the old connection are dead.
//!
//! ## Wire format
//!
//! Request (a *simple* `GET`, so no CORS preflight ever happens):
//!
//! ```text
//! GET https://tabwarden-dialog-bridge.invalid/<token>/dialog?kind=<kind>&message=<message>[&default=<default>]
//! ```
//!
//! * `<token>`: the per-supervisor random token, 22 characters of unpadded
//!   base64url (128 bits), see [`Bridge::new`]. A request on the bridge host
//!   without it, with another token, another path, another method or a bad
//!   query is [`Paused::Forged`] and gets 403.
//! * `kind`: `alert`, `confirm` or `prompt`.
//! * `message`: percent-encoded UTF-8, clipped by the script to
//!   [`MAX_SCRIPT_MESSAGE_CHARS`] UTF-16 units and by [`Bridge::parse_paused`]
//!   to [`MAX_MESSAGE_BYTES`] with [`TRUNCATION_MARKER`] appended.
//! * `default`: only for `prompt`, its default text (`""` when none), same caps.
//! * The frame is not in the URL: it is `Fetch.requestPaused.frameId`.
//! * `https` (not `http`) so that https pages do not block it as mixed content;
//!   the host never resolves and the request never leaves Chromium.
//!
//! Answer (`Fetch.fulfillRequest`): `200`, headers `Content-Type:
//! application/json`, `Access-Control-Allow-Origin: *` (sandboxed frames send
//! `Origin: null`), `Cache-Control: no-store`, body
//! `{"accept": bool, "promptText": string | null}`. The script makes `alert()`
//! return `undefined`, `confirm()` return `accept`, and `prompt()` return
//! `null` when `accept` is false, else `promptText`, or the default text when
//! `promptText` is null. Any other status, a body that is not that shape, or
//! an exception (CSP `connect-src`, `Permissions-Policy: sync-xhr=()`, a
//! detached frame) makes the script call the original native function, so the
//! dialog reaches the supervisor as `Page.javascriptDialogOpening`.
//!
//! ## Detached realms (field case C28)
//!
//! A page can take `alert` from a fresh iframe (the bridge installed there
//! too), remove the iframe and call `a.call(window, msg)`. The function then
//! runs in a detached realm: its XHR throws (`Document is already detached`)
//! and the native function of that realm shows nothing for its own window.
//! Chromium's native function acts on `this` when `this` is a window, so a
//! borrowed *native* `alert.call(window, msg)` does show on `window`
//! (Chromium 156). The script matches that: when its own window is detached
//! (`window.closed` is `true`, read with the getter captured at install) and
//! `this` is another window that is attached (`this.window === this`,
//! `this.closed === false`), the call is handed to that window's own
//! `alert`/`confirm`/`prompt` (its bridge when installed there, the dialog is
//! then a bridge request of *that* window's frame) and its result returned.
//! When that window's function is the caller itself, or on re-entry (a page
//! wrapper calling the borrowed function again), the native function acts on
//! that window instead (a native dialog there). With `this` undefined, the
//! detached window itself or no window, nothing changes: XHR fails, the
//! native function runs and shows nothing, as without the bridge. An
//! attached realm never forwards. Pinned by `tests/e2e_detached_realm.rs`.
//!
//! ## Known gaps
//!
//! * The token keeps other pages and frames that were not given the bridge
//!   from raising bridge dialogs; it is not a secret from the page that runs
//!   the bridge (for example, Resource Timing lists the request URL). A page
//!   that learns it can raise dialogs it could raise with `alert()` anyway; the
//!   pending cap bounds the cost.
//! * `Runtime.evaluate` into a loaded document installs into that window and
//!   its existing same-origin child frames; cross-origin same-process frames
//!   need an evaluate in their own execution context.
//! * A function borrowed from a removed frame and called without a window as
//!   `this` (`a(msg)`) shows nothing, as the native one does (see "Detached
//!   realms"); only a call on an attached window is forwarded.
//!
//! ## Example
//!
//! ```
//! use bridge_script::{Bridge, DialogKind, Paused};
//! use serde_json::json;
//!
//! let bridge = Bridge::with_token("test-token").expect("valid token");
//! assert!(bridge.script().contains("test-token"));
//! let params = json!({
//!     "requestId": "interception-1",
//!     "frameId": "F1",
//!     "resourceType": "XHR",
//!     "request": {
//!         "url": "https://tabwarden-dialog-bridge.invalid/test-token/dialog?kind=prompt&message=Name%3F&default=Ann",
//!         "method": "GET",
//!         "headers": {}
//!     }
//! });
//! match bridge.parse_paused(&params).expect("well-formed params") {
//!     Paused::Dialog(d) => {
//!         assert_eq!(d.kind, DialogKind::Prompt);
//!         assert_eq!(d.message, "Name?");
//!         assert_eq!(d.default_prompt.as_deref(), Some("Ann"));
//!         let answer = bridge.fulfill_answer(&d.request_id, true, Some("Bob"));
//!         assert_eq!(answer["responseCode"], 200);
//!     }
//!     other => panic!("{other:?}"),
//! }
//! ```

use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::fmt;

/// The made-up host the script calls. `.invalid` never resolves (RFC 2606).
pub const BRIDGE_HOST: &str = "tabwarden-dialog-bridge.invalid";

/// The path after the token.
pub const BRIDGE_PATH: &str = "dialog";

/// Name of the hidden, non-enumerable, non-configurable property the script
/// sets on each window it installed into (so it installs once per window).
pub const INSTALL_MARKER: &str = "__tabwardenDialogBridge";

/// Longest message or default text kept, in UTF-8 bytes (8 KiB). Longer ones
/// are cut at a character boundary and get [`TRUNCATION_MARKER`].
pub const MAX_MESSAGE_BYTES: usize = 8 * 1024;

/// The script clips message and default text to this many UTF-16 units before
/// sending (it keeps the URL bounded). It is twice [`MAX_MESSAGE_BYTES`], so a
/// message the script clipped is always over the Rust cap and gets the marker.
pub const MAX_SCRIPT_MESSAGE_CHARS: usize = 2 * MAX_MESSAGE_BYTES;

/// Appended to a message cut to [`MAX_MESSAGE_BYTES`].
pub const TRUNCATION_MARKER: &str = "…[truncated by tabwarden]";

/// How many bridge dialogs may be pending at once per supervisor. The
/// supervisor enforces it: one more is answered at once with
/// `fulfill_answer(id, false, None)` (dismissed) and recorded.
pub const MAX_PENDING_DIALOGS: usize = 32;

/// The bridge script with placeholders; see [`Bridge::script`].
pub const SCRIPT_TEMPLATE: &str = include_str!("../assets/bridge.js");

/// CDP method: register the script for every new document of a session.
pub const ADD_SCRIPT_METHOD: &str = "Page.addScriptToEvaluateOnNewDocument";
/// CDP method: run the script in an already loaded document.
pub const EVALUATE_METHOD: &str = "Runtime.evaluate";
/// CDP method: start pausing bridge requests on a session.
pub const FETCH_ENABLE_METHOD: &str = "Fetch.enable";
/// CDP event: a bridge (or other) request is paused.
pub const REQUEST_PAUSED_EVENT: &str = "Fetch.requestPaused";
/// CDP method: answer a paused request ([`Bridge::fulfill_answer`] and friends).
pub const FULFILL_METHOD: &str = "Fetch.fulfillRequest";
/// CDP method: let a paused request that is not ours go on ([`continue_params`]).
pub const CONTINUE_METHOD: &str = "Fetch.continueRequest";

const TOKEN_BYTES: usize = 16;
const MAX_TOKEN_LEN: usize = 128;

/// Errors of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A token given to [`Bridge::with_token`] is empty, too long, or has a
    /// character outside `[A-Za-z0-9_-]`.
    #[error("invalid bridge token ({reason})")]
    InvalidToken {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// `Fetch.requestPaused` params lack a field every paused request has.
    #[error("malformed Fetch.requestPaused params: missing {field}")]
    MalformedPaused {
        /// The missing field, e.g. `requestId` or `request.url`.
        field: &'static str,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Which native dialog the page asked for. `beforeunload` is never bridged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DialogKind {
    /// `window.alert`.
    Alert,
    /// `window.confirm`.
    Confirm,
    /// `window.prompt`.
    Prompt,
}

impl DialogKind {
    /// The CDP spelling (`Page.DialogType`): `alert`, `confirm`, `prompt`.
    pub fn as_str(self) -> &'static str {
        match self {
            DialogKind::Alert => "alert",
            DialogKind::Confirm => "confirm",
            DialogKind::Prompt => "prompt",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        match s {
            "alert" => Some(DialogKind::Alert),
            "confirm" => Some(DialogKind::Confirm),
            "prompt" => Some(DialogKind::Prompt),
            _ => None,
        }
    }
}

impl fmt::Display for DialogKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A dialog the page raised through the bridge; the page's JS thread is
/// blocked until the request is fulfilled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DialogRequest {
    /// `Fetch.RequestId` to answer with [`Bridge::fulfill_answer`], valid on
    /// the session the event came from, on this connection only.
    pub request_id: String,
    /// Which dialog.
    pub kind: DialogKind,
    /// The message, at most [`MAX_MESSAGE_BYTES`] plus [`TRUNCATION_MARKER`].
    pub message: String,
    /// For `prompt` its default text (`""` when none); `None` for the others.
    pub default_prompt: Option<String>,
    /// `Fetch.requestPaused.frameId`: the frame that called the dialog, when
    /// Chromium gave one. Chromium 156 gives the *parent* frame for a request
    /// from a script-created iframe's initial `about:blank` document (srcdoc
    /// and loaded frames give their own), pinned by an end-to-end test.
    pub frame_id: Option<String>,
    /// Whether message or default text was cut to the cap.
    pub truncated: bool,
}

/// What a `Fetch.requestPaused` means for the bridge; see the table in the
/// crate doc for the answer each needs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub enum Paused {
    /// A real bridge dialog: make it pending, answer later.
    Dialog(DialogRequest),
    /// A CORS preflight (`OPTIONS`) carrying our token: answer with
    /// [`Bridge::fulfill_preflight`]. Our script never causes one.
    Preflight {
        /// `Fetch.RequestId`.
        request_id: String,
    },
    /// On the bridge host but without our token, or not a well-formed bridge
    /// request: answer with [`Bridge::fulfill_forbidden`]; no dialog.
    Forged {
        /// `Fetch.RequestId`.
        request_id: String,
    },
    /// Not for the bridge host, or paused at the response stage: let it go on
    /// with [`continue_params`].
    NotOurs {
        /// `Fetch.RequestId`.
        request_id: String,
    },
}

impl Paused {
    /// The `Fetch.RequestId` of any variant.
    pub fn request_id(&self) -> &str {
        match self {
            Paused::Dialog(d) => &d.request_id,
            Paused::Preflight { request_id }
            | Paused::Forged { request_id }
            | Paused::NotOurs { request_id } => request_id,
        }
    }
}

/// One supervisor's bridge: its random token and everything derived from it.
///
/// `Debug` does not show the token.
#[derive(Clone)]
pub struct Bridge {
    token: String,
}

impl fmt::Debug for Bridge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bridge")
            .field("token", &"<redacted>")
            .finish()
    }
}

impl Default for Bridge {
    fn default() -> Self {
        Self::new()
    }
}

impl Bridge {
    /// A bridge with a fresh random token: 128 bits from `rand`'s thread RNG
    /// (seeded from the OS), as 22 characters of unpadded base64url.
    ///
    /// # Panics
    /// Never.
    pub fn new() -> Self {
        let bytes: [u8; TOKEN_BYTES] = rand::random();
        Bridge {
            token: base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes),
        }
    }

    /// A bridge with a fixed token (tests, snapshots).
    ///
    /// # Errors
    /// [`Error::InvalidToken`] when `token` is empty, longer than 128
    /// characters, or has a character outside `[A-Za-z0-9_-]` (it goes into a
    /// URL path and a JS string literal unescaped).
    pub fn with_token(token: impl Into<String>) -> Result<Self> {
        let token = token.into();
        if token.is_empty() {
            return Err(Error::InvalidToken { reason: "empty" });
        }
        if token.len() > MAX_TOKEN_LEN {
            return Err(Error::InvalidToken {
                reason: "longer than 128 characters",
            });
        }
        if !token
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(Error::InvalidToken {
                reason: "characters outside [A-Za-z0-9_-]",
            });
        }
        Ok(Bridge { token })
    }

    /// The token (goes into the script and the URL path).
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The bridge URL prefix for this token, up to and including `?`:
    /// `https://tabwarden-dialog-bridge.invalid/<token>/dialog?`.
    pub fn url_prefix(&self) -> String {
        format!("https://{BRIDGE_HOST}/{}/{BRIDGE_PATH}?", self.token)
    }

    /// The script source: pass it as `source` to
    /// `Page.addScriptToEvaluateOnNewDocument{runImmediately: true}` and as
    /// `expression` to `Runtime.evaluate` into already loaded documents. It
    /// evaluates to `undefined` and installs once per window.
    pub fn script(&self) -> String {
        SCRIPT_TEMPLATE
            .replace("__TABWARDEN_TOKEN__", &self.token)
            .replace("__TABWARDEN_HOST__", BRIDGE_HOST)
            .replace(
                "__TABWARDEN_MAX_CHARS__",
                &MAX_SCRIPT_MESSAGE_CHARS.to_string(),
            )
            .replace("__TABWARDEN_MARKER__", INSTALL_MARKER)
    }

    /// Params for `Page.addScriptToEvaluateOnNewDocument`:
    /// `{"source": script, "runImmediately": true}`.
    pub fn add_script_params(&self) -> Value {
        json!({"source": self.script(), "runImmediately": true})
    }

    /// Params for `Runtime.evaluate` into a loaded document:
    /// `{"expression": script, "returnByValue": true, "silent": true}`; add a
    /// `contextId` to target one frame's execution context.
    pub fn evaluate_params(&self) -> Value {
        json!({"expression": self.script(), "returnByValue": true, "silent": true})
    }

    /// The `Fetch.enable` `patterns`: the bridge host only (http and https),
    /// request stage. Patterns are anchored at the scheme, so no other URL
    /// can match.
    pub fn fetch_patterns(&self) -> Value {
        json!([
            {"urlPattern": format!("https://{BRIDGE_HOST}/*"), "requestStage": "Request"},
            {"urlPattern": format!("http://{BRIDGE_HOST}/*"), "requestStage": "Request"},
        ])
    }

    /// Params for `Fetch.enable`: `{"patterns": fetch_patterns()}`.
    pub fn fetch_enable_params(&self) -> Value {
        json!({"patterns": self.fetch_patterns()})
    }

    /// Classifies `Fetch.requestPaused` params (the event's `params` object).
    ///
    /// # Errors
    /// [`Error::MalformedPaused`] when `requestId` or `request.url` is
    /// missing; nothing can be answered then. Everything else is a [`Paused`].
    pub fn parse_paused(&self, params: &Value) -> Result<Paused> {
        let request_id = params
            .get("requestId")
            .and_then(Value::as_str)
            .ok_or(Error::MalformedPaused { field: "requestId" })?
            .to_string();
        let request = params
            .get("request")
            .ok_or(Error::MalformedPaused { field: "request" })?;
        let raw_url = request
            .get("url")
            .and_then(Value::as_str)
            .ok_or(Error::MalformedPaused {
                field: "request.url",
            })?;
        let not_ours = || Paused::NotOurs {
            request_id: request_id.clone(),
        };
        // A response-stage pause is never ours (we only ask for the request stage).
        if params.get("responseStatusCode").is_some() || params.get("responseErrorReason").is_some()
        {
            return Ok(not_ours());
        }
        let Ok(url) = url::Url::parse(raw_url) else {
            return Ok(not_ours());
        };
        if !matches!(url.scheme(), "http" | "https") || url.host_str() != Some(BRIDGE_HOST) {
            return Ok(not_ours());
        }
        let forged = Paused::Forged {
            request_id: request_id.clone(),
        };
        let mut segments = match url.path_segments() {
            Some(s) => s,
            None => return Ok(forged),
        };
        let (Some(token), Some(path), None) = (segments.next(), segments.next(), segments.next())
        else {
            return Ok(forged);
        };
        if !constant_time_eq(token.as_bytes(), self.token.as_bytes()) || path != BRIDGE_PATH {
            return Ok(forged);
        }
        let method = request
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("GET");
        if method.eq_ignore_ascii_case("OPTIONS") {
            return Ok(Paused::Preflight { request_id });
        }
        if !method.eq_ignore_ascii_case("GET") {
            return Ok(forged);
        }
        let (mut kind, mut message, mut default) = (None, None, None);
        for (k, v) in url.query_pairs() {
            match k.as_ref() {
                "kind" => kind = DialogKind::parse(&v),
                "message" => message = Some(v.into_owned()),
                "default" => default = Some(v.into_owned()),
                _ => {}
            }
        }
        let Some(kind) = kind else { return Ok(forged) };
        let (message, cut_m) = clip(message.unwrap_or_default());
        let (default_prompt, cut_d) = match (kind, default) {
            (DialogKind::Prompt, d) => {
                let (d, cut) = clip(d.unwrap_or_default());
                (Some(d), cut)
            }
            _ => (None, false),
        };
        let frame_id = params
            .get("frameId")
            .and_then(Value::as_str)
            .map(str::to_string);
        Ok(Paused::Dialog(DialogRequest {
            request_id,
            kind,
            message,
            default_prompt,
            frame_id,
            truncated: cut_m || cut_d,
        }))
    }

    /// Params for `Fetch.fulfillRequest` answering a bridge dialog: 200, body
    /// `{"accept": accept, "promptText": prompt_text}` (base64), headers
    /// `Content-Type: application/json`, `Access-Control-Allow-Origin: *`,
    /// `Cache-Control: no-store`. `prompt_text: None` with `accept: true` makes
    /// `prompt()` return its default text; it is ignored for alert/confirm.
    pub fn fulfill_answer(
        &self,
        request_id: &str,
        accept: bool,
        prompt_text: Option<&str>,
    ) -> Value {
        let body = json!({"accept": accept, "promptText": prompt_text}).to_string();
        fulfill(request_id, 200, "application/json", &body, &[])
    }

    /// Params for `Fetch.fulfillRequest` refusing a forged request: 403, body
    /// `forbidden` (text/plain), CORS-readable so the page sees the status.
    pub fn fulfill_forbidden(&self, request_id: &str) -> Value {
        fulfill(
            request_id,
            403,
            "text/plain; charset=utf-8",
            "forbidden",
            &[],
        )
    }

    /// Params for `Fetch.fulfillRequest` answering a CORS preflight: 204 with
    /// `Access-Control-Allow-Origin: *`, `-Methods: GET, OPTIONS`,
    /// `-Headers: *`, `-Max-Age: 0`, empty body.
    pub fn fulfill_preflight(&self, request_id: &str) -> Value {
        fulfill(
            request_id,
            204,
            "text/plain; charset=utf-8",
            "",
            &[
                ("Access-Control-Allow-Methods", "GET, OPTIONS"),
                ("Access-Control-Allow-Headers", "*"),
                ("Access-Control-Max-Age", "0"),
            ],
        )
    }
}

/// Params for `Fetch.continueRequest` (a [`Paused::NotOurs`]): `{"requestId"}`.
pub fn continue_params(request_id: &str) -> Value {
    json!({"requestId": request_id})
}

fn fulfill(
    request_id: &str,
    code: u16,
    content_type: &str,
    body: &str,
    extra: &[(&str, &str)],
) -> Value {
    let mut headers = vec![
        json!({"name": "Content-Type", "value": content_type}),
        json!({"name": "Access-Control-Allow-Origin", "value": "*"}),
        json!({"name": "Cache-Control", "value": "no-store"}),
    ];
    headers.extend(extra.iter().map(|(n, v)| json!({"name": n, "value": v})));
    json!({
        "requestId": request_id,
        "responseCode": code,
        "responseHeaders": headers,
        "body": base64::engine::general_purpose::STANDARD.encode(body.as_bytes()),
    })
}

/// Cuts `s` to [`MAX_MESSAGE_BYTES`] at a char boundary and appends the marker.
fn clip(mut s: String) -> (String, bool) {
    if s.len() <= MAX_MESSAGE_BYTES {
        return (s, false);
    }
    let mut end = MAX_MESSAGE_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.truncate(end);
    s.push_str(TRUNCATION_MARKER);
    (s, true)
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests;
