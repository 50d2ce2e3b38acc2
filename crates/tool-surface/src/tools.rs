//! [`Tools`]: dispatch, the dialog gate, and each tool's implementation.

use crate::catalog::{self, parse_args, ToolInfo};
use crate::error::{Error, ErrorCode, Result, ToolError};
use crate::tab::{
    evaluate_disabled, inactive_error, map_eval, map_supervisor, map_transport, Raced,
    SnapshotFacts, Tab,
};
use crate::types::*;
use cdp_transport::{Budget, ConnectOptions, Connection, TargetId};
use evaluate::refs::{RenderOptions, SnapshotOptions};
use evaluate::{EngineConfig, EngineMetrics, EvalRequest, EvalTarget};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use supervisor::{BridgeMode, DialogPolicy, ReconnectPolicy, SupervisorConfig};

/// Size cap of an evaluate result (characters of serialized JSON, counted by
/// the engine in the page); a longer value is cut with a `truncated` marker.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;
/// Largest AX text kept in a snapshot, bytes; longer text is cut with a marker
/// line, and the refs on cut lines leave the ref map.
pub const MAX_SNAPSHOT_BYTES: usize = 48 * 1024;

/// The `browser_cdp` methods allowed when evaluate is disabled: reads that
/// cannot run script or change the page, plus `Page.stopLoading`,
/// `Page.bringToFront`, `Page.handleJavaScriptDialog` (what
/// `browser_dialog` does) and `Page.navigate` to a URL `browser_navigate`
/// would load (checked the same way). Every other method is refused with
/// `evaluate_disabled`: too many run script of the caller's choosing in
/// some way (`Runtime.*`, `Debugger.*`, `DOM.setOuterHTML` with an inline
/// handler, `Page.reload`'s `scriptToEvaluateOnLoad`,
/// `Page.addScriptToEvaluateOnNewDocument`, `Target.createTarget` to a
/// `javascript:` or `data:` URL, `Input.insertText` into a script
/// element, …) for a deny list to be sound.
pub const NO_EVALUATE_CDP_METHODS: [&str; 22] = [
    "Accessibility.getFullAXTree",
    "Accessibility.getPartialAXTree",
    "Accessibility.queryAXTree",
    "Browser.getVersion",
    "DOM.describeNode",
    "DOM.getAttributes",
    "DOM.getBoxModel",
    "DOM.getDocument",
    "DOM.getNodeForLocation",
    "DOM.getOuterHTML",
    "DOM.querySelector",
    "DOM.querySelectorAll",
    "Page.bringToFront",
    "Page.captureScreenshot",
    "Page.getFrameTree",
    "Page.getLayoutMetrics",
    "Page.getNavigationHistory",
    "Page.handleJavaScriptDialog",
    "Page.navigate",
    "Page.stopLoading",
    "Target.getTargetInfo",
    "Target.getTargets",
];

/// How [`Tools`] is set up. Every field documents its default.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ToolsConfig {
    /// Allow `browser_evaluate` and script-running `browser_cdp` methods. Default true.
    pub evaluate_enabled: bool,
    /// Dialog policy: `must_respond` (default), `auto_dismiss`, `auto_accept`.
    pub dialog_policy: String,
    /// `must_respond` watchdog: a dialog pending this long is dismissed. Default 300 s.
    pub dialog_timeout: Duration,
    /// Dialog bridge: `off` (default), `on`, `auto`.
    pub bridge: String,
    /// Open a fresh tab (default true) instead of taking over the first page tab.
    pub new_tab: bool,
    /// Options for the CDP connection.
    pub connect_options: ConnectOptions,
    /// Consecutive failed attempts after which a tab's supervisor stops
    /// reconnecting when the connection is lost (backoff from 200 ms, see
    /// [`supervisor::ReconnectPolicy`]); 0 disables reconnecting. Default 5.
    /// After a reconnect the tools work again on the new connection (refs
    /// from before it are `stale_ref`).
    pub reconnect_attempts: u32,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            evaluate_enabled: true,
            dialog_policy: "must_respond".into(),
            dialog_timeout: Duration::from_secs(300),
            bridge: "off".into(),
            new_tab: true,
            connect_options: ConnectOptions::default(),
            reconnect_attempts: ReconnectPolicy::default().max_consecutive_failures,
        }
    }
}

impl ToolsConfig {
    /// Sets [`ToolsConfig::evaluate_enabled`].
    pub fn evaluate_enabled(mut self, on: bool) -> Self {
        self.evaluate_enabled = on;
        self
    }
    /// Sets [`ToolsConfig::dialog_policy`] (validated by [`Tools::connect`]).
    pub fn dialog_policy(mut self, p: impl Into<String>) -> Self {
        self.dialog_policy = p.into();
        self
    }
    /// Sets [`ToolsConfig::dialog_timeout`].
    pub fn dialog_timeout(mut self, d: Duration) -> Self {
        self.dialog_timeout = d;
        self
    }
    /// Sets [`ToolsConfig::bridge`] (validated by [`Tools::connect`]).
    pub fn bridge(mut self, b: impl Into<String>) -> Self {
        self.bridge = b.into();
        self
    }
    /// Sets [`ToolsConfig::new_tab`].
    pub fn new_tab(mut self, on: bool) -> Self {
        self.new_tab = on;
        self
    }
    /// Sets [`ToolsConfig::reconnect_attempts`] (0: never reconnect).
    pub fn reconnect_attempts(mut self, n: u32) -> Self {
        self.reconnect_attempts = n;
        self
    }
    /// The supervisor's and the engine's configuration from these options.
    fn lower(&self) -> Result<(SupervisorConfig, EngineConfig)> {
        let policy: DialogPolicy = self.dialog_policy.parse().map_err(|e| Error::Config {
            field: "dialog_policy".into(),
            reason: format!("{e}"),
        })?;
        let bridge: BridgeMode = self.bridge.parse().map_err(|e| Error::Config {
            field: "bridge".into(),
            reason: format!("{e}"),
        })?;
        let sup = SupervisorConfig::default()
            .policy(policy)
            .dialog_timeout(self.dialog_timeout)
            .bridge(bridge)
            .reconnect(ReconnectPolicy::default().max_consecutive_failures(self.reconnect_attempts))
            .connect_options(self.connect_options.clone());
        let engine = EngineConfig::default()
            .evaluate_enabled(self.evaluate_enabled)
            .max_result_chars(MAX_RESULT_BYTES);
        Ok((sup, engine))
    }
}

/// Budget of a `browser_dialog` call (it has no `timeout_ms`).
const DIALOG_BUDGET: Duration = Duration::from_secs(10);
/// Budget of a `browser_tabs` call (it has no `timeout_ms`).
const TABS_BUDGET: Duration = Duration::from_secs(15);
/// Budget of [`Tools::connect`].
const CONNECT_BUDGET: Duration = Duration::from_secs(20);
/// Longest a timed-out ref action or navigation waits for its clean-up
/// (`Runtime.terminateExecution`, `Page.stopLoading`) to be acknowledged
/// before it returns; the request keeps going in the background. The wait
/// comes after the budget, so it is scaled to it: [`cleanup_grace`].
const TERMINATE_GRACE: Duration = Duration::from_millis(600);

/// The clean-up wait after a budget of `budget.total()` ran out: a twentieth
/// of it, between 25 ms and [`TERMINATE_GRACE`]. A call thus returns within
/// `timeout_ms` + 5 % (≤ 50 ms at 1 s; a responsive browser acknowledges in
/// a few ms, so it rarely waits that long); when the acknowledgement comes
/// later the error says it was sent but not acknowledged.
fn cleanup_grace(budget: &Budget) -> Duration {
    (budget.total() / 20).clamp(Duration::from_millis(25), TERMINATE_GRACE)
}

/// Most of a call's remaining budget spent waiting for the supervisor to
/// record a dialog the engine already saw open.
const DIALOG_CATCH_UP: Duration = Duration::from_secs(1);
/// After an accepted `beforeunload`, how long a main frame that stopped
/// loading may still commit before the released navigation is taken to
/// have ended without a new document.
const NO_COMMIT_GRACE: Duration = Duration::from_millis(500);
/// Bound on `Page.stopLoading` after a navigation gave up before its commit
/// (its own bound: the call's budget is spent by then).
const STOP_BUDGET: Duration = Duration::from_secs(2);
/// Bound on `Target.getTargetInfo` for a navigation's URL and title (part of
/// the call's budget while some is left, else on its own).
const INFO_BUDGET: Duration = Duration::from_secs(2);
/// Bound on a navigation's readiness probe (`document.readyState`).
const PROBE_BUDGET: Duration = Duration::from_secs(4);
/// A readiness probe not answered this long after it was sent counts as a
/// busy renderer.
const MIN_BUSY: Duration = Duration::from_millis(250);

/// A `javascript:` URL (scheme case-insensitive, leading whitespace and
/// control characters ignored as browsers do): it runs script in the page.
fn is_javascript_url(url: &str) -> bool {
    let u: String = url
        .trim_start_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .take(11)
        .collect();
    u.to_ascii_lowercase().starts_with("javascript:")
}

/// The scheme of `url`, lowercased, as a browser parses it (leading
/// whitespace and control characters skipped, tabs and newlines ignored);
/// `None` without a `:` before any `/`, `?` or `#`.
fn scheme_of(url: &str) -> Option<String> {
    let mut scheme = String::new();
    for c in url
        .trim_start_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
    {
        match c {
            ':' => return (!scheme.is_empty()).then_some(scheme),
            '/' | '?' | '#' => return None,
            _ if scheme.len() >= 32 => return None,
            c => scheme.push(c.to_ascii_lowercase()),
        }
    }
    None
}

/// URL schemes whose document the caller writes (so its scripts are script
/// of the agent's choosing): refused by `browser_navigate` and
/// `browser_tabs new` when evaluate is disabled.
const AUTHORED_SCHEMES: [&str; 3] = ["data", "blob", "filesystem"];

/// The checks `browser_navigate` and `browser_tabs new` make on a URL
/// before anything is sent: not a `javascript:` URL (always refused: it runs
/// script, `browser_evaluate`'s job); absolute (has a scheme; no spaces
/// outside a `data:` URL); and with evaluate disabled, not a `data:`,
/// `blob:` or `filesystem:` URL.
///
/// # Errors
/// `invalid_argument` with `field: "url"`, naming `tool`.
fn check_url(url: &str, evaluate_enabled: bool, tool: &str) -> std::result::Result<(), ToolError> {
    if is_javascript_url(url) {
        return Err(
            ToolError::invalid("url", format!("{tool} does not run javascript: URLs"))
                .next("use browser_evaluate to run script in the page"),
        );
    }
    let spaced = url.contains(char::is_whitespace) && !url.starts_with("data:");
    if url.is_empty() || !url.contains(':') || spaced {
        return Err(
            ToolError::invalid("url", format!("{url:?} is not an absolute URL")).next(
                "pass an absolute URL such as https://example.com/ or file:///path/page.html",
            ),
        );
    }
    if !evaluate_enabled {
        if let Some(s) = scheme_of(url).filter(|s| AUTHORED_SCHEMES.contains(&s.as_str())) {
            return Err(ToolError::invalid(
                "url",
                format!(
                    "{tool} does not load {s}: URLs while evaluate is disabled (--no-evaluate): the caller writes that document, so its scripts would be script of the agent's choosing"
                ),
            )
            .next("load the page from an http(s) or file: URL, or run the server without --no-evaluate"));
        }
    }
    Ok(())
}

/// Sends `Page.stopLoading` in the background when dropped while armed:
/// a navigation call dropped before its navigation committed must not leave
/// the tab holding every later command (see [`Tools::navigate`]).
struct StopIfDropped(Option<cdp_transport::Session>);

impl Drop for StopIfDropped {
    fn drop(&mut self) {
        let Some(page) = self.0.take() else {
            return;
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let r = page
                    .call("Page.stopLoading", json!({}), Budget::new(STOP_BUDGET))
                    .await;
                tracing::debug!(
                    ok = r.is_ok(),
                    "navigate dropped before the commit: Page.stopLoading sent"
                );
            });
        }
    }
}

/// True when `title` is Chromium's stand-in for a page without a title:
/// the URL itself, or its host and path (`127.0.0.1:8765/p.html`).
fn is_url_as_title(title: &str, url: &str) -> bool {
    title.is_empty()
        || title == url
        || (url.ends_with(title) && (title.contains('/') || title.contains(':')))
}

/// True when the events already buffered in `events` hold a
/// `beforeunload` dialog (the navigation's abort was the page's answer).
fn saw_beforeunload(events: &mut cdp_transport::EventStream) -> bool {
    let mut seen = false;
    while let Some(ev) = events.try_recv() {
        match ev {
            Ok(ev) => {
                seen |= ev.method == "Page.javascriptDialogOpening"
                    && ev.str_param("type") == Some("beforeunload");
            }
            // Events were dropped: one of them may have been the dialog.
            Err(cdp_transport::RecvError::Lagged(_)) => seen = true,
            Err(_) => break,
        }
    }
    seen
}

/// How a navigation's wait for its load event ended.
enum LoadEnd {
    Loaded,
    Lagged,
    Ended(String),
    Cancelled,
    Deadline,
}

/// The events of one navigation, as [`Tools::navigate`] reads them: the
/// load event counts only once the main frame committed the navigation's
/// own document (`Page.frameNavigated` with its `loaderId`, answered by
/// `Page.navigate`); a later main-frame commit (a client redirect) carries
/// on from there. Events of the page before (a load still in flight) are
/// ignored.
#[derive(Debug)]
struct LoadWatch {
    loader: String,
    /// The navigation's own document committed.
    ours: bool,
    /// URL of the latest main-frame document committed since (fragment included).
    committed_url: Option<String>,
    /// DOMContentLoaded fired for that document.
    dom_ready: bool,
}

impl LoadWatch {
    fn new(loader: &str) -> Self {
        Self {
            loader: loader.to_string(),
            ours: false,
            committed_url: None,
            dom_ready: false,
        }
    }

    /// Takes one page-session event; true when the load event of the
    /// navigation's document (or a later main-frame one) fired.
    fn on_event(&mut self, ev: &cdp_transport::Event) -> bool {
        match ev.method.as_str() {
            "Page.frameNavigated" => {
                let f = &ev.params["frame"];
                if f.get("parentId").and_then(Value::as_str).is_some() {
                    return false;
                }
                if !self.ours && f["loaderId"].as_str() == Some(self.loader.as_str()) {
                    self.ours = true;
                }
                if self.ours {
                    let url = f["url"].as_str().unwrap_or_default();
                    let fragment = f["urlFragment"].as_str().unwrap_or_default();
                    self.committed_url = Some(format!("{url}{fragment}"));
                    self.dom_ready = false;
                }
                false
            }
            "Page.domContentEventFired" => {
                self.dom_ready |= self.ours;
                false
            }
            "Page.loadEventFired" => self.ours,
            _ => false,
        }
    }
}

/// How long before a navigation's deadline its readiness probe is sent:
/// a quarter of the budget, at most 1 s.
fn probe_lead(total: Duration) -> Duration {
    (total / 4).min(Duration::from_secs(1))
}

/// The `note` of a navigation whose document is ready but whose load event
/// did not fire within `ms`.
fn load_note(ms: u128) -> String {
    format!(
        "the load event did not fire within timeout_ms={ms}: the document is ready (DOMContentLoaded fired) but a subresource (an image, stylesheet, iframe, …) is still loading; which one is unknown"
    )
}

/// The readiness probe of a navigation (`document.readyState` on the page
/// session, [`PROBE_BUDGET`]): a renderer that answers is not busy in a
/// script. Aborted when dropped.
struct Probe {
    sent_at: tokio::time::Instant,
    task: tokio::task::JoinHandle<std::result::Result<Value, cdp_transport::Error>>,
}

impl Probe {
    fn send(page: &cdp_transport::Session) -> Probe {
        let page = page.clone();
        Probe {
            sent_at: tokio::time::Instant::now(),
            task: tokio::spawn(async move {
                page.call(
                    "Runtime.evaluate",
                    json!({"expression": "document.readyState", "returnByValue": true}),
                    Budget::new(PROBE_BUDGET),
                )
                .await
            }),
        }
    }

    /// The probe's answer, waiting until `until` at most (an answer already
    /// in is taken even when `until` has passed); `None` when it has not
    /// answered by then (or its task failed). Call it again only after `None`.
    async fn wait_until(
        &mut self,
        until: tokio::time::Instant,
    ) -> Option<std::result::Result<Value, cdp_transport::Error>> {
        match tokio::time::timeout_at(until, &mut self.task).await {
            Ok(Ok(r)) => Some(r),
            Ok(Err(_)) | Err(_) => None,
        }
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The tabs the tools know, and which one they act on.
struct TabSet {
    /// Every supervised tab, the current one included.
    tabs: Vec<Arc<Tab>>,
    /// The tab the tools act on.
    current: Arc<Tab>,
}

impl TabSet {
    fn push_current(&mut self, tab: Arc<Tab>) {
        self.tabs.push(tab.clone());
        self.current = tab;
    }
}

/// The agent tools over one browser connection and its tabs.
///
/// Each tab is one [`supervisor::Supervisor`] (dialogs, frames, routing,
/// console errors), one [`evaluate::Engine`] (budgeted evaluate) and one
/// [`evaluate::refs::AxSnapshotter`] with the ref map of its latest
/// snapshot. Cheap to share behind an `Arc`; calls may run concurrently (a
/// snapshot while an evaluate is pending is fine).
pub struct Tools {
    conn: Connection,
    sup_config: SupervisorConfig,
    engine_config: EngineConfig,
    tabs: Mutex<TabSet>,
}

impl std::fmt::Debug for Tools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tools")
            .field("endpoint", &self.conn.endpoint().to_string())
            .finish_non_exhaustive()
    }
}

fn to_json<T: Serialize>(r: std::result::Result<T, ToolError>) -> Value {
    match r {
        Ok(v) => serde_json::to_value(v).unwrap_or_else(|e| {
            ToolError::internal(format!("cannot encode the response: {e}")).to_json()
        }),
        Err(e) => e.to_json(),
    }
}

fn budget_of(timeout_ms: Option<u64>) -> std::result::Result<Budget, ToolError> {
    Budget::from_timeout_ms(timeout_ms).map_err(|e| ToolError::invalid("timeout_ms", e.to_string()))
}

impl Tools {
    /// Connects to a CDP endpoint (`ws://…` or `http://host:port`) and opens
    /// (or takes over) a tab, supervised.
    ///
    /// # Errors
    /// [`Error::Config`] for a bad policy or bridge name; [`Error::Browser`]
    /// when connecting fails; [`Error::Supervisor`] when the tab cannot be
    /// supervised.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped future may leave a new blank tab open.
    pub async fn connect(endpoint: &str, config: ToolsConfig) -> Result<Tools> {
        let (sup_config, engine_config) = config.lower()?;
        let conn = Connection::connect(endpoint, config.connect_options.clone()).await?;
        let budget = Budget::new(CONNECT_BUDGET);
        let existing = if config.new_tab {
            None
        } else {
            let v = conn
                .browser()
                .call("Target.getTargets", json!({}), budget.clone())
                .await?;
            v["targetInfos"]
                .as_array()
                .and_then(|a| a.iter().find(|t| t["type"] == "page"))
                .and_then(|t| t["targetId"].as_str())
                .map(TargetId::new)
        };
        let tab = match existing {
            Some(t) => {
                Tab::attach(
                    conn.clone(),
                    t,
                    sup_config.clone(),
                    engine_config.clone(),
                    &budget,
                )
                .await
            }
            None => {
                Tab::open(
                    conn.clone(),
                    sup_config.clone(),
                    engine_config.clone(),
                    &budget,
                )
                .await
            }
        }
        .map_err(|e| Error::Supervisor { reason: e.message })?;
        Ok(Tools {
            conn,
            sup_config,
            engine_config,
            tabs: Mutex::new(TabSet {
                tabs: vec![tab.clone()],
                current: tab,
            }),
        })
    }

    /// Every tool with its description and input schema.
    pub fn list() -> Vec<ToolInfo> {
        catalog::list()
    }

    /// The connection [`Tools::connect`] opened. After a tab's supervisor
    /// reconnected, the tools use its new connection instead (this one is
    /// then closed).
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The connection the tools use now: the current tab supervisor's (it
    /// changes after a reconnect).
    fn live_conn(&self) -> Connection {
        self.tab().sup.connection()
    }

    /// The evaluate engine's counters for the current tab (evaluations,
    /// timeouts, terminations, dialog interruptions, ...); counted anew
    /// after a reconnect.
    pub fn metrics(&self) -> EngineMetrics {
        self.tab().engine().metrics()
    }

    fn set(&self) -> std::sync::MutexGuard<'_, TabSet> {
        self.tabs.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn tab(&self) -> Arc<Tab> {
        self.set().current.clone()
    }

    /// Calls tool `name` with `args` (a JSON object; `null` means `{}`).
    ///
    /// Returns the tool's response object, or `{"error": ToolError}`. Never
    /// panics; bad arguments give `invalid_argument` naming the field.
    ///
    /// # Cancel safety
    /// Cancel safe with respect to this crate's state; the browser may still
    /// run a command that was already sent.
    pub async fn call(&self, name: &str, args: Value) -> Value {
        let start = Instant::now();
        // Each arm: decode the typed request (bad input → `invalid_argument`),
        // run the tool, and turn its result into the agent's JSON.
        macro_rules! run {
            (|$r:ident| $call:expr) => {
                match parse_args(name, args) {
                    Ok($r) => to_json($call),
                    Err(e) => e.to_json(),
                }
            };
        }
        let out = match name {
            "browser_navigate" => run!(|r| self.navigate(r).await),
            "browser_snapshot" => run!(|r| self.snapshot(r).await),
            "browser_click" => run!(|r| self.click(r).await),
            "browser_type" => run!(|r| self.type_text(r).await),
            "browser_press_key" => run!(|r| self.press_key(r).await),
            "browser_evaluate" => run!(|r| self.evaluate(r).await),
            "browser_dialog" => run!(|r| self.dialog(r).await),
            "browser_cdp" => run!(|r| self.cdp(r).await),
            "browser_screenshot" => run!(|r| self.screenshot(r).await),
            "browser_console" => run!(|r| Ok(self.console(r))),
            "browser_tabs" => run!(|r| self.tabs(r).await),
            other => ToolError::new(ErrorCode::UnknownTool, format!("no tool named {other:?}"))
                .next(format!("use one of: {}", catalog::TOOL_NAMES.join(", ")))
                .to_json(),
        };
        let code = out
            .get("error")
            .and_then(|e| e.get("code"))
            .and_then(Value::as_str)
            .unwrap_or("ok");
        tracing::info!(
            tool = name,
            code,
            elapsed_ms = start.elapsed().as_millis() as u64,
            "tool call"
        );
        out
    }

    // ------------------------------------------------------------ navigate

    /// `browser_navigate`: `Page.navigate` on the supervisor's page session,
    /// then the load event of the document that navigation committed, raced
    /// against a dialog opening.
    ///
    /// * The URL is checked first: `javascript:` URLs are refused (they
    ///   would run script, which is `browser_evaluate`'s job, and bypass
    ///   `--no-evaluate`); with evaluate disabled so are `data:`, `blob:`
    ///   and `filesystem:` URLs (the caller writes that document, so its
    ///   scripts are script of the agent's choosing).
    /// * A dialog pending under `must_respond` is `dialog_pending`; one that
    ///   opens during the call is `status: "dialog_opened"`.
    /// * `Page.navigate` answers when the navigation commits. When the
    ///   budget ends (or the call is dropped) before that, `Page.stopLoading`
    ///   is sent (its acknowledgement waited for `timeout_ms`/20, 25–600 ms):
    ///   until a pending navigation ends,
    ///   Chromium holds every renderer-bound command of the tab, so without
    ///   it every later call would wait out its budget (found against a
    ///   server that accepts and never answers). The tab stays on its
    ///   previous page, and the `timeout` error says so.
    /// * A `Page.navigate` that Chromium aborts at once (`net::ERR_ABORTED`)
    ///   because another commit of the main frame was still in flight is
    ///   sent once more (not a download, not one a `beforeunload` ended).
    /// * Only the load event of the document this navigation committed
    ///   counts (its `loaderId` in `Page.frameNavigated`, or a main-frame
    ///   commit after it such as a client redirect): a load event of the
    ///   page before, still in flight, is ignored, and the URL and title
    ///   reported are read after that load and belong to that document.
    /// * When the load event has not fired by the deadline, the page is
    ///   probed (`document.readyState`, sent a quarter of the budget, at
    ///   most 1 s, before the deadline): a ready document (DOMContentLoaded
    ///   fired) whose load waits on a subresource is `status: "loaded"` with
    ///   a `note`; a document still parsing is a `timeout` saying so; a page
    ///   that did not answer the probe is busy in a script:
    ///   `Runtime.terminateExecution` is sent, and the `timeout` error says
    ///   a script was stopped only when the probe then came back (waited
    ///   for `timeout_ms`/20, 25–600 ms, past the deadline).
    ///
    /// # Errors
    /// `invalid_argument`, `dialog_pending`, `navigation_failed`, `timeout`,
    /// `browser_closed`, `target_crashed`.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before the navigation committed, it sends
    /// `Page.stopLoading` in the background; after, the page keeps loading.
    pub async fn navigate(
        &self,
        req: NavigateRequest,
    ) -> std::result::Result<NavigateResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let url = req.url.trim();
        check_url(url, self.engine_config.evaluate_enabled, "browser_navigate")?;
        let tab = self.tab();
        self.navigate_in(&tab, url, &budget, "browser_navigate")
            .await
    }

    /// The navigation of `browser_navigate` (and `browser_tabs new`) in
    /// `tab`, for an already checked `url`; `tool` names the caller in errors.
    async fn navigate_in(
        &self,
        tab: &Arc<Tab>,
        url: &str,
        budget: &Budget,
        tool: &str,
    ) -> std::result::Result<NavigateResponse, ToolError> {
        let view = tab.sup.snapshot();
        if let Some(r) = tab.sup.connection().closed_reason() {
            return Err(ToolError::browser_closed(r));
        }
        // A pending dialog (must_respond) blocks the page: navigating would
        // report that old dialog as if the new page had opened it.
        if !tab.auto_policy() {
            if let Some(d) = tab.first_pending() {
                let id = d.id.clone();
                let mut e = ToolError::dialog_pending(d, tool);
                e.next_step = Some(format!(
                    "answer it with browser_dialog {{\"action\":\"accept\"|\"dismiss\", \"dialog_id\":\"{id}\"}}, then retry {tool} (or run with --dialog-policy auto_dismiss, or open a new tab with browser_tabs)"
                ));
                return Err(e);
            }
        }
        // A crashed tab is recovered by navigating; any other inactive state
        // (tab closed, target destroyed) is final for this tab.
        if !view.active && !view.reason.as_deref().is_some_and(|r| r.contains("crash")) {
            return Err(inactive_error(view.reason.as_deref()));
        }
        let opened = |d| NavigateResponse {
            url: url.into(),
            status: "dialog_opened".into(),
            title: None,
            dialog: Some(d),
            note: None,
        };
        let page = tab.sup.page_session();
        let prev_url = tab.main_url();
        // Subscribed before the navigation is sent, so its commit and load
        // events cannot be missed.
        let mut events;
        let mut retried = false;
        let reply = loop {
            events = page.subscribe();
            let mut stop = StopIfDropped(Some(page.clone()));
            let nav = page.call("Page.navigate", json!({"url": url}), budget.clone());
            let raced = tab.race_dialog(nav).await;
            // Answered, failed, or a dialog (a beforeunload holds the
            // navigation until it is answered): nothing to stop from here on.
            stop.0 = None;
            let reply = match raced {
                Raced::Dialog(d) => return Ok(opened(d)),
                Raced::Done(Ok(v)) => v,
                Raced::Done(Err(e))
                    if e.is_timeout() || matches!(e, cdp_transport::Error::Cancelled { .. }) =>
                {
                    return Err(Self::stop_uncommitted(tab, url, &prev_url, budget, tool).await);
                }
                Raced::Done(Err(e @ cdp_transport::Error::Protocol { .. })) => {
                    return Err(ToolError::invalid(
                        "url",
                        format!("Chromium refused to navigate to {url:?}: {e}"),
                    )
                    .next(
                        "pass an absolute URL such as https://example.com/ or file:///path/page.html",
                    ));
                }
                Raced::Done(Err(e)) => return Err(tab.crashed_or(map_transport(&e, tool))),
            };
            // Chromium 156 aborts a navigation sent while the main frame is
            // still finishing the commit of another document (right after a
            // beforeunload was accepted, a link clicked, a script
            // navigated): `errorText: net::ERR_ABORTED` within milliseconds,
            // seen in ~half of the runs of "accept a beforeunload, navigate at
            // once". Sent again once it goes through. Not retried: a
            // download, or an abort by a beforeunload the policy dismissed
            // (sending again would only ask the page again).
            let aborted = reply["errorText"].as_str() == Some("net::ERR_ABORTED")
                && reply["isDownload"].as_bool() != Some(true);
            if aborted && !retried && !budget.is_expired() && !saw_beforeunload(&mut events) {
                tracing::debug!(
                    url,
                    "navigate: Page.navigate aborted by a commit in flight; sending it again"
                );
                retried = true;
                continue;
            }
            break reply;
        };
        if let Some(err) = reply["errorText"].as_str().filter(|s| !s.is_empty()) {
            return Err(ToolError::new(ErrorCode::NavigationFailed, format!(
                "Chromium could not load {url}: {err}{}",
                if retried { " (sent twice: the first attempt was aborted too)" } else { "" }
            ))
                .next(format!("check the URL (scheme, host, port) and that the server is up, then call {tool} again")));
        }
        // No loaderId: a same-document navigation (fragment); nothing loads.
        let Some(loader) = reply["loaderId"].as_str().filter(|l| !l.is_empty()) else {
            return Ok(Self::loaded_response(tab, url, None, None, budget).await);
        };
        let mut watch = LoadWatch::new(loader);
        let mut probe: Option<Probe> = None;
        let deadline = budget.deadline();
        let probe_at = deadline - probe_lead(budget.total());
        let waiting = async {
            loop {
                tokio::select! {
                    ev = events.recv() => match ev {
                        Ok(ev) => {
                            if watch.on_event(&ev) {
                                return LoadEnd::Loaded;
                            }
                        }
                        // A page that floods events can make this bounded
                        // stream lag past its load event; the load is then
                        // taken as done rather than waited out to the deadline
                        // (the agent's next snapshot shows the page).
                        Err(cdp_transport::RecvError::Lagged(n)) => {
                            tracing::debug!(n, "navigate: event stream lagged; not waiting for the load event");
                            return LoadEnd::Lagged;
                        }
                        Err(e) => return LoadEnd::Ended(format!("{e:?}")),
                    },
                    _ = tokio::time::sleep_until(probe_at), if probe.is_none() => {
                        probe = Some(Probe::send(&page));
                    }
                    _ = tokio::time::sleep_until(deadline) => return LoadEnd::Deadline,
                    _ = budget.cancel_token().cancelled() => return LoadEnd::Cancelled,
                }
            }
        };
        let end = match tab.race_dialog(waiting).await {
            Raced::Dialog(d) => return Ok(opened(d)),
            Raced::Done(end) => end,
        };
        match end {
            LoadEnd::Loaded | LoadEnd::Lagged => {
                Ok(Self::loaded_response(tab, url, watch.committed_url, None, budget).await)
            }
            LoadEnd::Ended(e) => Err(tab.crashed_or(ToolError::browser_closed(format!(
                "the tab's events ended: {e}"
            )))),
            LoadEnd::Cancelled => Err(ToolError::internal(format!("{tool} was cancelled"))),
            LoadEnd::Deadline => {
                let probe = probe.unwrap_or_else(|| Probe::send(&page));
                self.load_deadline(tab, url, watch, probe, budget, tool)
                    .await
            }
        }
    }

    /// The error of a navigation that had not committed when its budget
    /// ended (or was cancelled): sends `Page.stopLoading` so the tab drops
    /// the pending navigation and answers again on its previous page.
    async fn stop_uncommitted(
        tab: &Tab,
        url: &str,
        prev_url: &str,
        budget: &Budget,
        tool: &str,
    ) -> ToolError {
        let page = tab.sup.page_session();
        let stopped = matches!(
            tokio::time::timeout(
                cleanup_grace(budget),
                page.call("Page.stopLoading", json!({}), Budget::new(STOP_BUDGET)),
            )
            .await,
            Ok(Ok(_))
        );
        let prev = if prev_url.is_empty() {
            "its previous page".to_string()
        } else {
            format!("its previous page {prev_url}")
        };
        let ms = budget.total().as_millis();
        let err = ToolError::new(
            ErrorCode::Timeout,
            if stopped {
                format!(
                    "{tool}: {url} sent no response within timeout_ms={ms}, so the page did not start loading; the navigation was stopped (Page.stopLoading) and the tab stays on {prev}, usable"
                )
            } else {
                format!(
                    "{tool}: the navigation to {url} did not start within timeout_ms={ms} (the server sent no response, or the browser connection is not answering); Page.stopLoading was sent but not acknowledged, so the tab may not answer until the navigation ends"
                )
            },
        )
        .next(format!(
            "check that the server at {url} answers, then call {tool} again with a larger timeout_ms (max 120000); browser_snapshot shows the tab's page"
        ));
        tab.crashed_or(err)
    }

    /// `status: "loaded"` with the URL and title of the document the
    /// navigation committed (`committed_url`, from its `Page.frameNavigated`):
    /// `Target.getTargetInfo` is read after that document's load, and its
    /// title is kept only when its URL is that document's (no script runs
    /// for either). Without a committed URL (a same-document navigation, a
    /// lagged event stream) the target's URL and title are used.
    async fn loaded_response(
        tab: &Tab,
        url: &str,
        committed_url: Option<String>,
        note: Option<String>,
        budget: &Budget,
    ) -> NavigateResponse {
        let b = if budget.remaining() > Duration::from_millis(50) {
            budget.child(INFO_BUDGET)
        } else {
            Budget::new(INFO_BUDGET)
        };
        let info = tab
            .sup
            .connection()
            .browser()
            .call(
                "Target.getTargetInfo",
                json!({"targetId": tab.target_id.as_str()}),
                b,
            )
            .await
            .ok();
        let info = info.as_ref().map(|v| &v["targetInfo"]);
        let info_url = info.and_then(|i| i["url"].as_str()).map(String::from);
        let info_title = info.and_then(|i| i["title"].as_str()).map(String::from);
        let (now_url, title) = match committed_url {
            // The target moved on since (another navigation): its title is
            // not this document's.
            Some(c) if info_url.as_deref() != Some(c.as_str()) => (c, None),
            Some(c) => (c, info_title),
            None => (info_url.unwrap_or_else(|| tab.main_url()), info_title),
        };
        // Chromium reports the URL as the title of a page without one.
        let title = title.filter(|t| !is_url_as_title(t, &now_url));
        NavigateResponse {
            url: if now_url.is_empty() {
                url.into()
            } else {
                now_url
            },
            status: "loaded".into(),
            title,
            dialog: None,
            note,
        }
    }

    /// The outcome of a navigation whose document committed but whose load
    /// event did not fire by the deadline, from the readiness probe (see
    /// [`Tools::navigate`]).
    async fn load_deadline(
        &self,
        tab: &Arc<Tab>,
        url: &str,
        watch: LoadWatch,
        mut probe: Probe,
        budget: &Budget,
        tool: &str,
    ) -> std::result::Result<NavigateResponse, ToolError> {
        let ms = budget.total().as_millis();
        let opened = |d| NavigateResponse {
            url: url.into(),
            status: "dialog_opened".into(),
            title: None,
            dialog: Some(d),
            note: None,
        };
        // A probe sent moments ago gets at least MIN_BUSY to answer.
        let answer = match probe.wait_until(probe.sent_at + MIN_BUSY).await {
            Some(a) => a,
            None => {
                // No answer for a while: the renderer is busy, in a page
                // script (`onload` spinning) or frozen by a dialog.
                if !tab.auto_policy() {
                    if let Some(d) = tab.first_pending() {
                        return Ok(opened(d));
                    }
                }
                let term = tab.engine().terminate(&tab.sup.page_session());
                let after = probe
                    .wait_until(tokio::time::Instant::now() + cleanup_grace(budget))
                    .await;
                let acked = term.acknowledged(Duration::ZERO).await;
                let freed = matches!(
                    after,
                    Some(Ok(_)) | Some(Err(cdp_transport::Error::Protocol { .. }))
                );
                if freed {
                    return Err(ToolError::new(
                        ErrorCode::Timeout,
                        format!(
                            "{tool}: {url} did not finish loading within timeout_ms={ms}: a page script still running kept the page busy, and it was stopped (Runtime.terminateExecution), so the tab is usable"
                        ),
                    )
                    .next("call browser_snapshot to see the page state (the script did not finish, so the page may be incomplete)"));
                }
                if !tab.auto_policy() {
                    if let Some(d) = tab.first_pending() {
                        return Ok(opened(d));
                    }
                }
                return Err(tab.crashed_or(
                    ToolError::new(
                        ErrorCode::Timeout,
                        format!(
                            "{tool}: {url} did not finish loading within timeout_ms={ms}, and the page does not answer (its renderer is busy or stalled); Runtime.terminateExecution was {}, but the page still did not answer",
                            if acked { "acknowledged" } else { "sent" }
                        ),
                    )
                    .next("call browser_snapshot; if calls keep timing out, open a new tab with browser_tabs"),
                ));
            }
        };
        let state = match &answer {
            Ok(v) => v["result"]["value"].as_str().map(String::from),
            Err(_) => None,
        };
        match state.as_deref() {
            // The load event fires right after readyState turns complete:
            // it came at the deadline.
            Some("complete") => {
                Ok(Self::loaded_response(tab, url, watch.committed_url, None, budget).await)
            }
            Some("interactive") => Ok(Self::loaded_response(tab, url, watch.committed_url, Some(load_note(ms)), budget).await),
            _ if watch.dom_ready => Ok(Self::loaded_response(tab, url, watch.committed_url, Some(load_note(ms)), budget).await),
            Some(_) => Err(ToolError::new(
                ErrorCode::Timeout,
                format!(
                    "{tool}: {url} did not finish loading within timeout_ms={ms}: its document is still being parsed (document.readyState is \"loading\"), most likely waiting for a script or stylesheet that has not arrived; no page script was running, and the page answers calls"
                ),
            )
            .next(format!("call browser_snapshot to see what has loaded, or call {tool} again with a larger timeout_ms (max 120000)"))),
            None => Err(tab.crashed_or(
                ToolError::new(
                    ErrorCode::Timeout,
                    format!(
                        "{tool}: {url} did not finish loading within timeout_ms={ms}, and its readiness could not be read ({})",
                        match &answer {
                            Err(e) => e.to_string(),
                            Ok(v) => format!("unexpected reply {v}"),
                        }
                    ),
                )
                .next(format!("call browser_snapshot to see the page state, or call {tool} again with a larger timeout_ms (max 120000)")),
            )),
        }
    }

    // ------------------------------------------------------------ snapshot

    /// `browser_snapshot`: the supervisor's view plus the AX text with refs
    /// ([`evaluate::refs::AxSnapshotter`]); the ref map is kept for the tab
    /// until the next snapshot, with what the snapshot left out (refs past
    /// the size cap, or dropped by `interactive_only`) and which refs were
    /// disabled, for the errors of the ref tools. With the browser
    /// connection closed (the browser gone, no reconnect) the call fails
    /// with `browser_closed`: everything it would show is stale (the
    /// supervisor's view is still read first, which retires the dialogs
    /// that waited on the connection as `remote`). The AX part is skipped
    /// (with a `note` saying why) when the supervisor is inactive (crash,
    /// tab closed) and while a dialog is pending (not under an auto policy,
    /// whose dialogs are answered at once).
    ///
    /// # Errors
    /// `invalid_argument` (timeout_ms), `browser_closed` (connection closed);
    /// AX failures become a `note`, not an error.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn snapshot(
        &self,
        req: SnapshotRequest,
    ) -> std::result::Result<SnapshotResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let tab = self.tab();
        // The supervisor's state first: reading its view after the
        // connection closed retires the dialogs that were waiting on it.
        let view = tab.sup.snapshot();
        if let Some(r) = tab.sup.connection().closed_reason() {
            return Err(ToolError::browser_closed(r));
        }
        let pending = (!tab.auto_policy())
            .then(|| view.pending_dialogs.first())
            .flatten();
        let refreshed = if view.active {
            tab.refresh(&budget).await
        } else {
            Ok(())
        };
        let (snapshot, note) = if !view.active || tab.sup.page_session().is_crashed() {
            let reason = if view.active {
                Some("target crashed")
            } else {
                view.reason.as_deref()
            };
            (
                None,
                Some(format!(
                    "accessibility text unavailable: {}",
                    inactive_error(reason).message
                )),
            )
        } else if let Some(d) = pending {
            (None, Some(format!("accessibility text omitted: dialog {} blocks the page; answer it with browser_dialog", d.id)))
        } else if let Err(e) = refreshed {
            (
                None,
                Some(format!("accessibility text unavailable: {}", e.message)),
            )
        } else {
            let opts = SnapshotOptions::default();
            let ax = tab.ax();
            let walk = ax.snapshot(&opts, budget.clone());
            match tab.race_dialog(walk).await {
                Raced::Done(Ok(s)) => {
                    let r = s.render(&RenderOptions {
                        max_chars: Some(MAX_SNAPSHOT_BYTES),
                        interactive_only: req.interactive_only,
                        ..RenderOptions::default()
                    });
                    let facts = snapshot_facts(&s, &r, req.interactive_only);
                    tab.store_refs(r.refs, facts);
                    let mut notes = s.notes().to_vec();
                    if r.truncated {
                        notes.push(if req.interactive_only {
                            format!("the text was cut at {} KiB even with interactive_only; refs past the cut are not usable", MAX_SNAPSHOT_BYTES / 1024)
                        } else {
                            format!("the text was cut at {} KiB; refs past the cut are not usable: call browser_snapshot with {{\"interactive_only\": true}} for a shorter text with the refs of buttons, links and form fields", MAX_SNAPSHOT_BYTES / 1024)
                        });
                    }
                    let note = (!notes.is_empty()).then(|| notes.join("; "));
                    (Some(r.text), note)
                }
                Raced::Done(Err(e)) => (
                    None,
                    Some(format!(
                        "accessibility text unavailable: {}",
                        map_eval(&e, "browser_snapshot").message
                    )),
                ),
                // Same note as a dialog seen before the walk: the supervisor may
                // announce a dialog a moment before its view holds it.
                Raced::Dialog(d) => (None, Some(format!("accessibility text omitted: dialog {} blocks the page; answer it with browser_dialog", d.id))),
            }
        };
        let console_total = tab.console_total();
        Ok(SnapshotResponse {
            schema_version: crate::SCHEMA_VERSION,
            url: tab.main_url(),
            snapshot,
            note,
            pending_dialogs: tab.pending(),
            recent_dialogs: tab.recent(),
            frame_tree: tab.frame_tree(),
            console_errors: console_total,
            supervisor: tab.supervisor_view(),
        })
    }

    // ------------------------------------------------------------ click / type / key

    fn action(target: Option<String>, dialog: Option<DialogView>) -> ActionResponse {
        ActionResponse {
            status: if dialog.is_some() {
                "dialog_opened".into()
            } else {
                "done".into()
            },
            target,
            dialog,
        }
    }

    /// The error of a failed ref action. A call that ran out of budget while
    /// the page's script kept running (the input event handler never
    /// returned) gets `Runtime.terminateExecution` on the ref's session, so
    /// the tab stays usable.
    async fn action_error(
        tool: &str,
        tab: &Tab,
        ref_id: Option<&str>,
        e: evaluate::Error,
        budget: &Budget,
    ) -> ToolError {
        let timed_out =
            matches!(&e, evaluate::Error::Transport { source, .. } if source.is_timeout());
        if !timed_out {
            return tab.crashed_or(map_eval(&e, tool));
        }
        let session = ref_id
            .and_then(|r| {
                tab.refs()
                    .and_then(|m| m.get(r).map(|x| x.session().clone()))
            })
            .unwrap_or_else(|| tab.ax().page_session().clone());
        // The answer is waited for only a short grace, so a stalled browser
        // does not stretch the call far past its timeout_ms.
        // Through the engine: the next evaluate waits until this
        // termination can no longer end it.
        let terminated = tab
            .engine()
            .terminate(&session)
            .acknowledged(cleanup_grace(budget))
            .await;
        // What is known: nothing answered within the budget; not whether the
        // page was busy or the connection stalled. An acknowledged
        // termination shows that the browser answers.
        ToolError::new(
            ErrorCode::Timeout,
            format!(
                "{tool}: no answer within timeout_ms {} (the page is busy or the browser connection is not answering){}",
                budget.total().as_millis(),
                if terminated {
                    "; the browser acknowledged Runtime.terminateExecution, so a script still running was stopped and the tab is usable"
                } else {
                    ""
                }
            ),
        )
        .next("call browser_snapshot to see the page state")
    }

    /// `browser_click`: a real mouse click (`Input.dispatchMouseEvent`) on the
    /// ref's element through [`evaluate::refs::RefMap::click`], raced against
    /// a dialog opening.
    ///
    /// # Errors
    /// `dialog_pending`, `unknown_ref`, `stale_ref`, `not_interactable`,
    /// `timeout`, `browser_closed`.
    ///
    /// # Cancel safety
    /// Not cancel safe: a drop between press and release leaves the mouse
    /// button pressed in the page.
    pub async fn click(&self, req: ClickRequest) -> std::result::Result<ActionResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let tab = self.tab();
        tab.ready("browser_click", &budget).await?;
        tab.to_front(&budget).await;
        let refs = tab.refs_for(&req.target)?;
        tab.refuse_disabled(&refs, &req.target, "browser_click", &budget)
            .await?;
        match tab
            .race_dialog(refs.click(&req.target, budget.clone()))
            .await
        {
            Raced::Dialog(d) => Ok(Self::action(Some(req.target), Some(d))),
            Raced::Done(Ok(_)) => Ok(Self::action(Some(req.target), None)),
            Raced::Done(Err(e)) => {
                Err(Self::action_error("browser_click", &tab, Some(&req.target), e, &budget).await)
            }
        }
    }

    /// `browser_type`: focus and `Input.insertText` (and Enter when `submit`)
    /// through [`evaluate::refs::RefMap::type_text`].
    ///
    /// # Errors
    /// As [`Tools::click`].
    ///
    /// # Cancel safety
    /// Not cancel safe: part of the text may have been typed.
    pub async fn type_text(
        &self,
        req: TypeRequest,
    ) -> std::result::Result<ActionResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let tab = self.tab();
        tab.ready("browser_type", &budget).await?;
        tab.to_front(&budget).await;
        let refs = tab.refs_for(&req.target)?;
        tab.refuse_disabled(&refs, &req.target, "browser_type", &budget)
            .await?;
        let typing = refs.type_text(&req.target, &req.text, req.submit, budget.clone());
        match tab.race_dialog(typing).await {
            Raced::Dialog(d) => Ok(Self::action(Some(req.target), Some(d))),
            Raced::Done(Ok(())) => Ok(Self::action(Some(req.target), None)),
            Raced::Done(Err(e)) => {
                Err(Self::action_error("browser_type", &tab, Some(&req.target), e, &budget).await)
            }
        }
    }

    /// `browser_press_key`: `Input.dispatchKeyEvent` through
    /// [`evaluate::refs::RefMap::press_key`], after focusing `ref` when given.
    ///
    /// # Errors
    /// As [`Tools::click`], and `invalid_argument` (`key`) for an unknown key.
    ///
    /// # Cancel safety
    /// Not cancel safe: a drop between keyDown and keyUp leaves the key down.
    pub async fn press_key(
        &self,
        req: PressKeyRequest,
    ) -> std::result::Result<ActionResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let tab = self.tab();
        tab.ready("browser_press_key", &budget).await?;
        tab.to_front(&budget).await;
        let refs = match &req.target {
            Some(r) => {
                let refs = tab.refs_for(r)?;
                tab.refuse_disabled(&refs, r, "browser_press_key", &budget)
                    .await?;
                refs
            }
            None => match tab.refs() {
                Some(m) => m,
                // No snapshot yet: a main-frame-only walk gives a ref map whose
                // page session the key goes to (nothing is stored).
                None => {
                    let opts = SnapshotOptions {
                        max_frame_depth: 0,
                        max_frames: 1,
                    };
                    match tab
                        .race_dialog(tab.ax().snapshot(&opts, budget.clone()))
                        .await
                    {
                        Raced::Dialog(d) => return Ok(Self::action(None, Some(d))),
                        Raced::Done(Ok(s)) => s.refs().clone(),
                        Raced::Done(Err(e)) => return Err(map_eval(&e, "browser_press_key")),
                    }
                }
            },
        };
        let target = req.target.clone();
        let work = async {
            if let Some(r) = &target {
                let resolved = refs.resolve(r, budget.clone()).await?;
                resolved
                    .session
                    .call(
                        "DOM.focus",
                        json!({"backendNodeId": resolved.backend_node_id.0}),
                        budget.clone(),
                    )
                    .await
                    .map_err(|e| evaluate::Error::NotInteractable {
                        ref_id: r.clone(),
                        role: resolved.entry.role.clone(),
                        name: resolved.entry.name.clone(),
                        reason: format!("cannot focus: {e}"),
                    })?;
            }
            refs.press_key(&req.key, budget.clone()).await
        };
        match tab.race_dialog(work).await {
            Raced::Dialog(d) => Ok(Self::action(req.target, Some(d))),
            Raced::Done(Ok(())) => Ok(Self::action(req.target, None)),
            Raced::Done(Err(e)) => Err(Self::action_error(
                "browser_press_key",
                &tab,
                req.target.as_deref(),
                e,
                &budget,
            )
            .await),
        }
    }

    // ------------------------------------------------------------ evaluate

    /// `browser_evaluate` through the tab's [`evaluate::Engine`]: `frame_id`
    /// is routed with the supervisor (OOPIF → its own target, same-process
    /// frame → that frame), `ref` becomes an element evaluate
    /// ([`evaluate::refs::RefMap::evaluate`]).
    ///
    /// # Errors
    /// `evaluate_disabled`, `dialog_pending`, `timeout` (script terminated),
    /// `script_error`, `navigated`, `unknown_frame`, `unknown_ref`,
    /// `stale_ref`, `invalid_argument`.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the evaluate without terminating the
    /// script (the engine ends it at its deadline in the page).
    pub async fn evaluate(
        &self,
        req: EvaluateRequest,
    ) -> std::result::Result<EvaluateResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        // Dialogs closed from now on may be the one that ends this call.
        let since_ms = supervisor::now_ms();
        let tab = self.tab();
        let engine = tab.engine();
        if !engine.config().evaluate_enabled {
            return Err(evaluate_disabled("browser_evaluate"));
        }
        tab.ready("browser_evaluate", &budget).await?;
        let target = match (&req.target, &req.frame_id) {
            (Some(_), Some(_)) => {
                return Err(ToolError::invalid(
                    "frame_id",
                    "give either ref or frame_id, not both (a ref already names its frame)",
                ))
            }
            (None, Some(f)) => tab.eval_target(f)?,
            _ => EvalTarget::MainFrame,
        };
        let refs = match &req.target {
            Some(r) => Some(tab.refs_for(r)?),
            None => None,
        };
        // After `ready`: the engine of the supervisor's current connection.
        let engine = tab.engine();
        let run = async {
            match (&refs, &req.target) {
                (Some(m), Some(r)) => m.evaluate(&engine, r, &req.expression, &budget).await,
                _ => {
                    let er = EvalRequest::new(req.expression.clone()).target(target);
                    engine.evaluate(er, &budget).await
                }
            }
        };
        let out = match tab.race_dialog(run).await {
            Raced::Dialog(d) => return Err(ToolError::dialog_pending(d, "browser_evaluate")),
            Raced::Done(Ok(out)) => out,
            Raced::Done(Err(e)) => {
                if let Some(info) = e.dialog() {
                    let d = tab
                        .dialog_seen_by_engine(info, since_ms, &budget.child(DIALOG_CATCH_UP))
                        .await?;
                    if tab.auto_policy() {
                        // The engine ends an evaluate when a dialog opens; the
                        // policy answers the dialog, but this call's outcome is lost.
                        let mut t = ToolError::dialog_pending(d, "browser_evaluate");
                        t.message = format!(
                            "{} dialog ({}) opened while browser_evaluate ran and ended it; the {} policy answers it, but the script's outcome is unknown (it may have run)",
                            crate::error::a_dialog_kind(t.dialog.as_ref().map(|d| d.kind.as_str()).unwrap_or("native")),
                            t.dialog.as_ref().map(|d| d.id.as_str()).unwrap_or("?"),
                            tab.sup.dialog_policy().as_str()
                        );
                        t.next_step = Some("call browser_snapshot (recent_dialogs lists the dialog), then decide whether to run browser_evaluate again".into());
                        return Err(t);
                    }
                    return Err(ToolError::dialog_pending(d, "browser_evaluate"));
                }
                return Err(tab
                    .closed_or(map_eval(&e, "browser_evaluate"), &budget)
                    .await);
            }
        };
        let (value, kind) = untag(out.value);
        Ok(EvaluateResponse {
            value,
            kind,
            truncated: out.truncated,
            elapsed_ms: out.elapsed.as_millis() as u64,
        })
    }

    // ------------------------------------------------------------ dialog

    /// `browser_dialog` through [`supervisor::Supervisor::respond`]. An
    /// accepted prompt without `prompt_text` returns its default text.
    ///
    /// Accepting a `beforeunload` dialog of the tab releases the navigation
    /// it held: the call then waits (within its budget) for the main frame to
    /// commit the new document (`Page.frameNavigated`) and reports its URL
    /// in `url`, or says in `note` that it did not commit (still pending,
    /// or ended without a new document). Without that wait a navigation
    /// sent right after would race the released one (a second
    /// `beforeunload`, `net::ERR_ABORTED`, the wrong page's title).
    ///
    /// # Errors
    /// `no_dialog`, `ambiguous_dialog` (with `candidates`), `browser_closed`.
    ///
    /// # Cancel safety
    /// Not cancel safe: the answer may be sent; the supervisor's view stays consistent.
    pub async fn dialog(
        &self,
        req: DialogRequest,
    ) -> std::result::Result<DialogResponse, ToolError> {
        let budget = Budget::new(DIALOG_BUDGET);
        let tab = self.tab();
        let pending = tab.pending();
        let chosen = match &req.dialog_id {
            Some(id) => pending.iter().find(|d| &d.id == id),
            None if pending.len() == 1 => pending.first(),
            None => None,
        };
        let (action, prompt_text) = match req.action {
            DialogAction::Accept => (
                supervisor::DialogAction::Accept,
                req.prompt_text.clone().or_else(|| {
                    chosen
                        .filter(|d| d.kind == "prompt")
                        .map(|d| d.default_prompt.clone().unwrap_or_default())
                }),
            ),
            DialogAction::Dismiss => (supervisor::DialogAction::Dismiss, None),
        };
        // Subscribed before the answer, so the commit it releases cannot be
        // missed.
        let unloading = req.action == DialogAction::Accept
            && tab
                .sup
                .snapshot()
                .pending_dialogs
                .iter()
                .any(|d| d.kind == "beforeunload" && d.target_id == tab.target_id);
        let events = unloading.then(|| tab.sup.page_session().subscribe());
        let closed = tab
            .sup
            .respond(
                action,
                prompt_text.as_deref(),
                req.dialog_id.as_deref(),
                budget.clone(),
            )
            .await
            .map_err(|e| {
                let mut t = map_supervisor(&e, "browser_dialog");
                if t.code == ErrorCode::AmbiguousDialog {
                    t.candidates = tab.pending();
                }
                t
            })?;
        let released = closed.dialog.kind == "beforeunload"
            && closed.dialog.target_id == tab.target_id
            && closed.accepted != Some(false);
        let (url, note) = match events {
            Some(ev) if released => Self::released_navigation(&tab, ev, &budget).await,
            _ => (None, None),
        };
        Ok(DialogResponse {
            dialog: crate::tab::dialog_view(&closed.dialog),
            action: req.action,
            pending_dialogs: tab.pending(),
            url,
            note,
        })
    }

    /// After an accepted `beforeunload`: waits, until `budget` ends, for
    /// the main frame to commit the navigation the dialog held
    /// (`Page.frameNavigated` without `parentId`). Returns `(url, note)`:
    /// the committed URL (an error page's `unreachableUrl`, with a note), or
    /// a note saying the navigation has not committed yet, ended without a
    /// new document (`Page.frameStoppedLoading` and no commit within
    /// [`NO_COMMIT_GRACE`]: a download, a 204, a cancelled navigation), or
    /// that the tab closed (a `beforeunload` of closing the tab).
    async fn released_navigation(
        tab: &Tab,
        mut events: cdp_transport::EventStream,
        budget: &Budget,
    ) -> (Option<String>, Option<String>) {
        let deadline = budget.deadline();
        let mut stopped: Option<tokio::time::Instant> = None;
        loop {
            let grace_end = stopped.map(|t| t + NO_COMMIT_GRACE);
            tokio::select! {
                ev = events.recv() => match ev {
                    Ok(ev) if ev.method == "Page.frameNavigated" => {
                        let f = &ev.params["frame"];
                        if f.get("parentId").and_then(Value::as_str).is_some() {
                            continue;
                        }
                        if let Some(bad) = f["unreachableUrl"].as_str().filter(|u| !u.is_empty()) {
                            return (
                                Some(bad.to_string()),
                                Some(format!("the navigation the dialog released failed: Chromium shows its error page for {bad}")),
                            );
                        }
                        let url = f["url"].as_str().unwrap_or_default();
                        let fragment = f["urlFragment"].as_str().unwrap_or_default();
                        return (Some(format!("{url}{fragment}")), None);
                    }
                    Ok(ev) if ev.method == "Page.frameStoppedLoading" => {
                        let main = ev.str_param("frameId") == Some(tab.target_id.as_str())
                            || tab.frame_tree().top.frame_id == ev.str_param("frameId").unwrap_or_default();
                        if main && stopped.is_none() {
                            stopped = Some(tokio::time::Instant::now());
                        }
                    }
                    Ok(_) | Err(cdp_transport::RecvError::Lagged(_)) => {}
                    Err(_) => {
                        return (None, Some("the tab's page session ended after the answer (the beforeunload was for closing the tab?); call browser_tabs".into()));
                    }
                },
                _ = tokio::time::sleep_until(grace_end.unwrap_or(deadline)), if grace_end.is_some() => {
                    return (None, Some("the navigation the dialog released ended without a new page (cancelled, a download or an empty response); the tab stays on its page".into()));
                }
                _ = tokio::time::sleep_until(deadline) => {
                    return (None, Some(format!(
                        "the navigation the dialog released has not committed a new page within {} ms; until it does, calls on this tab wait for it: call browser_navigate again (to give it more time, or to go elsewhere) or browser_cdp Page.stopLoading to give up on it",
                        budget.total().as_millis()
                    )));
                }
            }
        }
    }

    // ------------------------------------------------------------ cdp

    /// `browser_cdp`: the one place this crate sends CDP of the agent's
    /// choosing, on the session the supervisor routes `frame_id` to.
    ///
    /// # Errors
    /// `evaluate_disabled`, `dialog_pending`, `unknown_frame`, `not_oopif`, `cdp_error`, `timeout`.
    ///
    /// # Cancel safety
    /// Cancel safe; the command may still run.
    pub async fn cdp(&self, req: CdpRequest) -> std::result::Result<CdpResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let m = req.method.as_str();
        if !m.contains('.') || m.starts_with('.') || m.ends_with('.') {
            return Err(
                ToolError::invalid("method", format!("{m:?} is not a CDP method name"))
                    .next("use Domain.method, e.g. DOM.getDocument"),
            );
        }
        let tab = self.tab();
        if !self.engine_config.evaluate_enabled {
            if !NO_EVALUATE_CDP_METHODS.contains(&m) {
                return Err(ToolError::new(
                    ErrorCode::EvaluateDisabled,
                    format!(
                        "browser_cdp {m} is refused: this server runs with evaluate disabled (--no-evaluate), and then browser_cdp takes only methods that cannot run script: {}",
                        NO_EVALUATE_CDP_METHODS.join(", ")
                    ),
                )
                .next("use browser_snapshot, browser_click, browser_type, browser_press_key and browser_navigate, or one of the methods listed"));
            }
            if m == "Page.navigate" {
                let url = req
                    .params
                    .as_ref()
                    .and_then(|p| p.get("url"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .trim();
                let authored =
                    scheme_of(url).is_some_and(|s| AUTHORED_SCHEMES.contains(&s.as_str()));
                if is_javascript_url(url) || authored {
                    return Err(ToolError::new(
                        ErrorCode::EvaluateDisabled,
                        format!("browser_cdp Page.navigate to {:?} is refused: this server runs with evaluate disabled (--no-evaluate), and a javascript:, data:, blob: or filesystem: URL runs script of the caller's choosing", url.chars().take(60).collect::<String>()),
                    )
                    .next("navigate to an http(s) or file: URL"));
                }
            }
        }
        let browser_level = ["Target.", "Browser.", "SystemInfo.", "Storage."]
            .iter()
            .any(|p| m.starts_with(p));
        let session = match &req.frame_id {
            _ if browser_level => self.live_conn().browser(),
            None => tab.sup.page_session(),
            Some(fid) => {
                tab.sup
                    .route(&cdp_transport::FrameId::new(fid))
                    .map_err(|e| map_supervisor(&e, "browser_cdp"))?
                    .session
            }
        };
        let unblocked = browser_level || m == supervisor::HANDLE_DIALOG;
        if !unblocked {
            tab.ready("browser_cdp", &budget).await?;
        }
        let params = Value::Object(req.params.unwrap_or_default());
        let fut = session.call(m, params, budget.clone());
        let r = if unblocked {
            fut.await
        } else {
            match tab.race_dialog(fut).await {
                Raced::Dialog(d) => return Err(ToolError::dialog_pending(d, "browser_cdp")),
                Raced::Done(r) => r,
            }
        };
        match r {
            Ok(result) => Ok(CdpResponse { result }),
            Err(e @ cdp_transport::Error::Protocol { .. }) => Err(ToolError::new(ErrorCode::CdpError, e.to_string())
                .next("check the method name and params against the CDP reference (chromedevtools.github.io/devtools-protocol)")),
            Err(e) => Err(map_transport(&e, m)),
        }
    }

    // ------------------------------------------------------------ screenshot

    /// `browser_screenshot`: `Page.captureScreenshot` on the supervisor's page session.
    ///
    /// # Errors
    /// `dialog_pending`, `timeout`, `browser_closed`.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn screenshot(
        &self,
        req: ScreenshotRequest,
    ) -> std::result::Result<ScreenshotResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let tab = self.tab();
        tab.ready("browser_screenshot", &budget).await?;
        // A tab behind another one in its window is hidden and produces no
        // frames: `Page.captureScreenshot` would wait for one until the
        // budget ends. Tabs opened here have a window of their own; a popup
        // or a tab of a browser given by URL may not.
        tab.to_front(&budget).await;
        let page = tab.sup.page_session();
        let (fmt, mime) = match req.format {
            ImageFormat::Png => ("png", "image/png"),
            ImageFormat::Jpeg => ("jpeg", "image/jpeg"),
        };
        let mut p = json!({"format": fmt});
        if req.format == ImageFormat::Jpeg {
            p["quality"] = json!(80);
        }
        if req.full_page {
            p["captureBeyondViewport"] = json!(true);
            if let Raced::Done(Ok(m)) = tab
                .race_dialog(page.call("Page.getLayoutMetrics", json!({}), budget.clone()))
                .await
            {
                let s = &m["cssContentSize"];
                if let (Some(w), Some(h)) = (s["width"].as_f64(), s["height"].as_f64()) {
                    p["clip"] =
                        json!({"x": 0, "y": 0, "width": w, "height": h.min(16384.0), "scale": 1});
                }
            }
        }
        let fut = page.call("Page.captureScreenshot", p, budget.clone());
        let v = match tab.race_dialog(fut).await {
            Raced::Dialog(d) => return Err(ToolError::dialog_pending(d, "browser_screenshot")),
            Raced::Done(r) => r.map_err(|e| map_transport(&e, "browser_screenshot"))?,
        };
        let data = v["data"].as_str().unwrap_or_default().to_string();
        let bytes = data.len() / 4 * 3;
        Ok(ScreenshotResponse {
            mime_type: mime.into(),
            bytes,
            data,
        })
    }

    // ------------------------------------------------------------ console

    /// `browser_console`: the supervisor's console-error ring. Never fails.
    pub fn console(&self, req: ConsoleRequest) -> ConsoleResponse {
        let tab = self.tab();
        let mut errors = tab.console();
        let total = tab.console_total().max(errors.len());
        let limit = req.limit.unwrap_or(20);
        if errors.len() > limit {
            errors.drain(..errors.len() - limit);
        }
        ConsoleResponse { errors, total }
    }

    // ------------------------------------------------------------ tabs

    /// `browser_tabs`: the tabs this server supervises (each with its own
    /// supervisor, engine and snapshotter) plus the popups their supervisors
    /// report; selecting a popup supervises it as a tab.
    ///
    /// `new` with a `url` checks the URL as `browser_navigate` does (before
    /// any tab is opened), then opens the tab, makes it current and loads
    /// the URL exactly as `browser_navigate` would (`status`, `dialog`,
    /// `note` as its response); a failed load leaves the new tab open and
    /// current, and its error says so. With the browser connection closed
    /// every action is `browser_closed` (the list would be stale).
    ///
    /// # Errors
    /// `unknown_tab`, `invalid_argument`, `browser_closed`, and for `new`
    /// with a `url` the errors of `browser_navigate`.
    ///
    /// # Cancel safety
    /// Not cancel safe: a tab may be opened or closed without the switch.
    pub async fn tabs(&self, req: TabsRequest) -> std::result::Result<TabsResponse, ToolError> {
        let budget = Budget::new(TABS_BUDGET);
        if let Some(r) = self.live_conn().closed_reason() {
            return Err(ToolError::browser_closed(r));
        }
        let mut loaded: Option<NavigateResponse> = None;
        match req.action {
            TabsAction::List => {}
            TabsAction::New => {
                let url = req.url.as_deref().map(str::trim).filter(|u| !u.is_empty());
                if let Some(url) = url {
                    check_url(url, self.engine_config.evaluate_enabled, "browser_tabs new")?;
                }
                let tab = Tab::open(
                    self.live_conn(),
                    self.sup_config.clone(),
                    self.engine_config.clone(),
                    &budget,
                )
                .await?;
                self.set().push_current(tab.clone());
                if let Some(url) = url {
                    match self
                        .navigate_in(&tab, url, &budget, "browser_tabs new")
                        .await
                    {
                        Ok(r) => loaded = Some(r),
                        Err(mut e) => {
                            e.message = format!(
                                "{}; the new tab {} is open and current",
                                e.message,
                                tab.target_id.as_str()
                            );
                            return Err(e);
                        }
                    }
                }
            }
            TabsAction::Select | TabsAction::Close => {
                let Some(id) = req.tab_id.clone() else {
                    return Err(ToolError::invalid("tab_id", "select and close need tab_id")
                        .next("call browser_tabs to list tab ids"));
                };
                let ours = self
                    .set()
                    .tabs
                    .iter()
                    .position(|t| t.target_id.as_str() == id);
                let popup = ours.is_none() && self.popup_ids().iter().any(|p| p.as_str() == id);
                if ours.is_none() && !popup {
                    return Err(
                        ToolError::new(ErrorCode::UnknownTab, format!("no tab {id:?}"))
                            .next("call browser_tabs to list tab ids"),
                    );
                }
                if req.action == TabsAction::Select {
                    if popup {
                        let tab = Tab::attach(
                            self.live_conn(),
                            TargetId::new(&id),
                            self.sup_config.clone(),
                            self.engine_config.clone(),
                            &budget,
                        )
                        .await?;
                        self.set().push_current(tab);
                    } else {
                        let mut s = self.set();
                        if let Some(t) = s.tabs.iter().find(|t| t.target_id.as_str() == id) {
                            s.current = t.clone();
                        }
                    }
                } else {
                    self.close_tab(&id, &budget).await?;
                }
            }
        }
        let (status, dialog, note) = match loaded {
            Some(r) => (Some(r.status), r.dialog, r.note),
            None => (None, None, None),
        };
        Ok(TabsResponse {
            tabs: self.list_tabs(&budget).await,
            status,
            dialog,
            note,
        })
    }

    fn popup_ids(&self) -> Vec<TargetId> {
        let tabs = self.set().tabs.clone();
        tabs.iter()
            .flat_map(|t| {
                t.sup
                    .snapshot()
                    .popups
                    .iter()
                    .map(|p| p.target_id.clone())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    async fn close_tab(&self, id: &str, budget: &Budget) -> std::result::Result<(), ToolError> {
        let _ = self
            .live_conn()
            .browser()
            .call(
                "Target.closeTarget",
                json!({"targetId": id}),
                budget.clone(),
            )
            .await;
        let removed = {
            let mut s = self.set();
            let pos = s.tabs.iter().position(|t| t.target_id.as_str() == id);
            let removed = pos.map(|i| s.tabs.remove(i));
            if s.current.target_id.as_str() == id {
                if let Some(next) = s.tabs.first().cloned() {
                    s.current = next;
                }
            }
            removed
        };
        if let Some(t) = removed {
            t.shutdown(budget).await;
        }
        if self.set().tabs.is_empty() {
            let tab = Tab::open(
                self.live_conn(),
                self.sup_config.clone(),
                self.engine_config.clone(),
                budget,
            )
            .await?;
            self.set().push_current(tab);
        }
        Ok(())
    }

    async fn list_tabs(&self, budget: &Budget) -> Vec<TabView> {
        // A `new` whose page took most of the budget still lists the tabs.
        let budget = if budget.remaining() < INFO_BUDGET {
            Budget::new(INFO_BUDGET)
        } else {
            budget.clone()
        };
        let infos: HashMap<String, (String, String)> = self
            .live_conn()
            .browser()
            .call("Target.getTargets", json!({}), budget)
            .await
            .ok()
            .and_then(|v| {
                v["targetInfos"].as_array().map(|a| {
                    a.iter()
                        .filter_map(|t| {
                            Some((
                                t["targetId"].as_str()?.to_string(),
                                (
                                    t["url"].as_str().unwrap_or_default().to_string(),
                                    t["title"].as_str().unwrap_or_default().to_string(),
                                ),
                            ))
                        })
                        .collect()
                })
            })
            .unwrap_or_default();
        let (tabs, current) = {
            let s = self.set();
            (s.tabs.clone(), s.current.target_id.clone())
        };
        let mut out: Vec<TabView> = Vec::new();
        for t in &tabs {
            let (url, title) = infos
                .get(t.target_id.as_str())
                .cloned()
                .unwrap_or_else(|| (t.main_url(), String::new()));
            out.push(TabView {
                tab_id: t.target_id.as_str().to_string(),
                url,
                title,
                current: t.target_id == current,
            });
        }
        for t in &tabs {
            for p in &t.sup.snapshot().popups {
                if out.iter().any(|o| o.tab_id == p.target_id.as_str()) {
                    continue;
                }
                let (url, title) = infos
                    .get(p.target_id.as_str())
                    .cloned()
                    .unwrap_or_else(|| (p.url.clone(), String::new()));
                out.push(TabView {
                    tab_id: p.target_id.as_str().to_string(),
                    url,
                    title,
                    current: false,
                });
            }
        }
        out
    }
}

/// What a rendered snapshot left out and which of its refs were disabled
/// (see [`crate::tab::SnapshotFacts`]).
fn snapshot_facts(
    s: &evaluate::refs::Snapshot,
    r: &evaluate::refs::RenderedSnapshot,
    interactive_only: bool,
) -> SnapshotFacts {
    fn disabled_refs(nodes: &[evaluate::refs::SnapshotNode], out: &mut HashSet<String>) {
        for n in nodes {
            if n.states.disabled {
                if let Some(r) = &n.ref_id {
                    out.insert(r.clone());
                }
            }
            disabled_refs(&n.children, out);
        }
    }
    let mut disabled = HashSet::new();
    disabled_refs(s.nodes(), &mut disabled);
    SnapshotFacts {
        left_out: s
            .refs()
            .iter()
            .filter(|e| r.refs.get(&e.ref_id).is_none())
            .map(|e| e.ref_id.clone())
            .collect(),
        truncated: r.truncated,
        interactive_only,
        disabled,
    }
}

/// The engine's tagged value as the tool's `{value, type}`: JSON values as
/// themselves with their JS type; `undefined`, non-JSON numbers and BigInt
/// as their text (`"undefined"`, `"NaN"`, `"-0"`, `"12n"`) with `type`
/// naming the JS type; other tagged values (nodes, functions, maps, …) as the
/// engine's tagged object with `type` from the tag.
fn untag(v: Value) -> (Value, String) {
    let kind = match &v {
        Value::Null | Value::Array(_) => "object",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Object(o) => match o.get("$type").and_then(Value::as_str) {
            Some("undefined") => return (json!("undefined"), "undefined".into()),
            Some(t @ ("number" | "bigint")) => {
                let repr = o.get("repr").cloned().unwrap_or(Value::Null);
                return (repr, t.into());
            }
            Some(t @ ("node" | "function" | "symbol")) => t,
            _ => "object",
        },
    }
    .to_string();
    (v, kind)
}

#[cfg(test)]
mod tests {
    use super::{check_url, is_url_as_title, probe_lead, scheme_of, untag, LoadWatch};
    use crate::ErrorCode;
    use serde_json::json;
    use std::time::Duration;

    fn ev(method: &str, params: serde_json::Value) -> cdp_transport::Event {
        cdp_transport::Event {
            method: method.into(),
            session_id: None,
            params,
        }
    }

    fn committed(loader: &str, url: &str) -> cdp_transport::Event {
        ev(
            "Page.frameNavigated",
            json!({"frame": {"id": "MAIN", "loaderId": loader, "url": url}}),
        )
    }

    #[test]
    fn only_the_load_of_the_navigations_own_document_counts() {
        let mut w = LoadWatch::new("L2");
        // The page before finishes loading while the new navigation is sent.
        assert!(!w.on_event(&ev("Page.domContentEventFired", json!({}))));
        assert!(!w.on_event(&ev("Page.loadEventFired", json!({}))));
        assert!(!w.dom_ready && w.committed_url.is_none());
        // Another document's commit is not ours either.
        assert!(!w.on_event(&committed("L1", "http://a/two")));
        assert!(!w.on_event(&ev("Page.loadEventFired", json!({}))));
        // A child frame's commit never counts.
        assert!(!w.on_event(&ev(
            "Page.frameNavigated",
            json!({"frame": {"id": "C", "parentId": "MAIN", "loaderId": "L2", "url": "http://a/child"}}),
        )));
        assert!(w.committed_url.is_none());
        assert!(!w.on_event(&ev(
            "Page.frameNavigated",
            json!({"frame": {"id": "MAIN", "loaderId": "L2", "url": "http://a/three", "urlFragment": "#x"}}),
        )));
        assert_eq!(w.committed_url.as_deref(), Some("http://a/three#x"));
        assert!(!w.on_event(&ev("Page.domContentEventFired", json!({}))));
        assert!(w.dom_ready);
        // A client redirect after ours carries on from there.
        assert!(!w.on_event(&committed("L3", "http://a/four")));
        assert_eq!(w.committed_url.as_deref(), Some("http://a/four"));
        assert!(!w.dom_ready);
        assert!(w.on_event(&ev("Page.loadEventFired", json!({}))));
    }

    #[test]
    fn urls_are_checked_as_navigate_checks_them() {
        let bad = |url: &str, eval: bool| {
            let Err(e) = check_url(url, eval, "browser_tabs new") else {
                panic!("{url} was accepted");
            };
            assert_eq!(e.code, ErrorCode::InvalidArgument, "{url}");
            assert_eq!(e.field.as_deref(), Some("url"), "{url}");
            assert!(e.next_step.is_some(), "{url}");
            e.message
        };
        assert!(bad("javascript:1", true).contains("javascript:"));
        assert!(bad("notaurl", true).contains("absolute"));
        assert!(bad("", true).contains("absolute"));
        assert!(bad("http://a b/", true).contains("absolute"));
        for authored in [
            "data:text/html,<script>1</script>",
            "DATA:text/html,x",
            "Blob:http://a/uuid",
            "filesystem:http://a/temporary/x.html",
        ] {
            assert!(
                bad(authored, false).contains("evaluate is disabled"),
                "{authored}"
            );
            assert!(
                check_url(authored, true, "browser_navigate").is_ok(),
                "{authored}"
            );
        }
        for ok in ["http://a/", "file:///tmp/x.html", "about:blank"] {
            assert!(check_url(ok, false, "browser_navigate").is_ok(), "{ok}");
        }
        assert!(check_url("data:text/html,a b", true, "browser_navigate").is_ok());
    }

    #[test]
    fn schemes_are_read_as_browsers_read_them() {
        assert_eq!(scheme_of(" Data:x").as_deref(), Some("data"));
        assert_eq!(scheme_of("bl\nob:x").as_deref(), Some("blob"));
        assert_eq!(scheme_of("/path:x"), None);
        assert_eq!(scheme_of("no-colon"), None);
        assert_eq!(scheme_of(":x"), None);
    }

    #[test]
    fn chromiums_url_stand_in_is_not_a_title() {
        assert!(is_url_as_title(
            "127.0.0.1:8765/p.html",
            "http://127.0.0.1:8765/p.html"
        ));
        assert!(is_url_as_title("about:blank", "about:blank"));
        assert!(!is_url_as_title("D", "data:text/html,<title>D</title>"));
        assert!(!is_url_as_title("Home", "http://a/Home"));
    }

    #[test]
    fn the_probe_goes_a_quarter_of_the_budget_early_at_most_a_second() {
        assert_eq!(
            probe_lead(Duration::from_millis(2000)),
            Duration::from_millis(500)
        );
        assert_eq!(probe_lead(Duration::from_secs(20)), Duration::from_secs(1));
    }

    fn check(engine_value: serde_json::Value, value: serde_json::Value, kind: &str) {
        assert_eq!(untag(engine_value), (value, kind.to_string()));
    }

    #[test]
    fn plain_json_keeps_its_value_and_names_its_js_type() {
        check(json!(42), json!(42), "number");
        check(json!("x"), json!("x"), "string");
        check(json!(true), json!(true), "boolean");
        check(json!(null), json!(null), "object");
        check(json!([1, 2]), json!([1, 2]), "object");
        check(json!({"a": 1}), json!({"a": 1}), "object");
    }

    #[test]
    fn values_json_cannot_hold_come_as_text_with_their_type() {
        check(
            json!({"$type": "undefined"}),
            json!("undefined"),
            "undefined",
        );
        check(
            json!({"$type": "number", "repr": "NaN"}),
            json!("NaN"),
            "number",
        );
        check(
            json!({"$type": "number", "repr": "-0"}),
            json!("-0"),
            "number",
        );
        check(
            json!({"$type": "bigint", "repr": "12n"}),
            json!("12n"),
            "bigint",
        );
    }

    #[test]
    fn other_tagged_values_stay_tagged() {
        let node = json!({"$type": "node", "nodeName": "BUTTON", "connected": true});
        check(node.clone(), node, "node");
        let f = json!({"$type": "function", "name": "f"});
        check(f.clone(), f, "function");
        let w = json!({"$type": "window", "url": "about:blank"});
        check(w.clone(), w, "object");
    }
}
