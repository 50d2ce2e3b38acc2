//! [`Tools`]: dispatch, the dialog gate, and each tool's implementation.

use crate::catalog::{self, parse_args, ToolInfo};
use crate::error::{Error, ErrorCode, Result, ToolError};
use crate::tab::{
    evaluate_disabled, inactive_error, map_eval, map_supervisor, map_transport, Raced, Tab,
};
use crate::types::*;
use cdp_transport::{Budget, ConnectOptions, Connection, TargetId};
use evaluate::refs::{RenderOptions, SnapshotOptions};
use evaluate::{EngineConfig, EngineMetrics, EvalRequest, EvalTarget};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use supervisor::{BridgeMode, DialogPolicy, ReconnectPolicy, SupervisorConfig};

/// Size cap of an evaluate result (characters of serialized JSON, counted by
/// the engine in the page); a longer value is cut with a `truncated` marker.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;
/// Largest AX text kept in a snapshot, bytes; longer text is cut with a marker
/// line, and the refs on cut lines leave the ref map.
pub const MAX_SNAPSHOT_BYTES: usize = 48 * 1024;

/// CDP methods that run page script; refused when evaluate is disabled.
pub const SCRIPT_METHODS: [&str; 8] = [
    "Runtime.evaluate",
    "Runtime.callFunctionOn",
    "Runtime.compileScript",
    "Runtime.runScript",
    "Page.addScriptToEvaluateOnNewDocument",
    "Runtime.addBinding",
    "Debugger.evaluateOnCallFrame",
    "Debugger.setScriptSource",
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
/// After a click/type/key call ran out of its budget because the page's
/// script kept running: the bound on `Runtime.terminateExecution` (the
/// call's own budget is spent by then; the engine uses the same rule for its
/// clean-up).
const TERMINATE_BUDGET: Duration = Duration::from_secs(2);
/// How long a timed-out ref action waits for `Runtime.terminateExecution` to
/// be acknowledged before it returns (the request keeps going in the background).
const TERMINATE_GRACE: Duration = Duration::from_millis(600);
/// Most of a call's remaining budget spent waiting for the supervisor to
/// record a dialog the engine already saw open.
const DIALOG_CATCH_UP: Duration = Duration::from_secs(1);

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
    /// then the page's `Page.loadEventFired`, raced against a dialog opening.
    /// `javascript:` URLs are refused (`invalid_argument`: they would run
    /// script, which is `browser_evaluate`'s job and bypass `--no-evaluate`).
    /// A dialog pending under `must_respond` is `dialog_pending`. On a load
    /// timeout `Runtime.terminateExecution` is sent on the page session (a
    /// hung `onload` would keep the renderer busy for every later call).
    ///
    /// # Errors
    /// `invalid_argument`, `dialog_pending`, `navigation_failed`, `timeout`, `browser_closed`.
    ///
    /// # Cancel safety
    /// Cancel safe; the navigation may still happen.
    pub async fn navigate(
        &self,
        req: NavigateRequest,
    ) -> std::result::Result<NavigateResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let url = req.url.trim();
        if is_javascript_url(url) {
            return Err(ToolError::invalid(
                "url",
                "browser_navigate does not run javascript: URLs",
            )
            .next("use browser_evaluate to run script in the page"));
        }
        let spaced = url.contains(char::is_whitespace) && !url.starts_with("data:");
        if url.is_empty() || !url.contains(':') || spaced {
            return Err(
                ToolError::invalid("url", format!("{url:?} is not an absolute URL")).next(
                    "pass an absolute URL such as https://example.com/ or file:///path/page.html",
                ),
            );
        }
        let tab = self.tab();
        let view = tab.sup.snapshot();
        let conn = tab.sup.connection();
        if let Some(r) = conn.closed_reason() {
            return Err(ToolError::browser_closed(r));
        }
        // A pending dialog (must_respond) blocks the page: navigating would
        // report that old dialog as if the new page had opened it.
        if !tab.auto_policy() {
            if let Some(d) = tab.first_pending() {
                let id = d.id.clone();
                let mut e = ToolError::dialog_pending(d, "browser_navigate");
                e.next_step = Some(format!(
                    "answer it with browser_dialog {{\"action\":\"accept\"|\"dismiss\", \"dialog_id\":\"{id}\"}}, then retry browser_navigate (or run with --dialog-policy auto_dismiss, or open a new tab with browser_tabs)"
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
        };
        let page = tab.sup.page_session();
        // Subscribed before the navigation is sent, so its load event cannot be missed.
        let mut events = page.subscribe();
        let nav = page.call("Page.navigate", json!({"url": url}), budget.clone());
        let reply = match tab.race_dialog(nav).await {
            Raced::Dialog(d) => return Ok(opened(d)),
            Raced::Done(r) => r.map_err(|e| map_transport(&e, "browser_navigate"))?,
        };
        if let Some(err) = reply["errorText"].as_str().filter(|s| !s.is_empty()) {
            return Err(ToolError::new(ErrorCode::NavigationFailed, format!("Chromium could not load {url}: {err}"))
                .next("check the URL (scheme, host, port) and that the server is up, then call browser_navigate again"));
        }
        if reply.get("loaderId").is_some() {
            // A page that floods events can make this bounded stream lag past
            // its load event; the load is then taken as done rather than waited
            // out to the deadline (the agent's next snapshot shows the page).
            let load = async {
                loop {
                    match events.recv().await {
                        Ok(ev) if ev.method == "Page.loadEventFired" => return Ok(()),
                        Ok(_) => {}
                        Err(cdp_transport::RecvError::Lagged(n)) => {
                            tracing::debug!(
                                n,
                                "navigate: event stream lagged; not waiting for the load event"
                            );
                            return Ok(());
                        }
                        Err(e) => return Err(e),
                    }
                }
            };
            let bounded = async {
                tokio::select! {
                    r = load => r.map_err(|e| ToolError::browser_closed(format!("the tab's events ended: {e:?}"))),
                    _ = tokio::time::sleep_until(tokio::time::Instant::from_std(budget.deadline())) => Err(ToolError::timeout("waiting for the page to load", budget.total().as_millis() as u64)),
                    _ = budget.cancel_token().cancelled() => Err(ToolError::internal("cancelled")),
                }
            };
            match tab.race_dialog(bounded).await {
                Raced::Dialog(d) => return Ok(opened(d)),
                Raced::Done(Err(mut e)) if e.code == ErrorCode::Timeout => {
                    // A page script that never returns (`onload` spinning)
                    // keeps the renderer busy for every later call: stop it,
                    // as a timed-out click does.
                    let session = page.clone();
                    let term = tokio::spawn(async move {
                        session
                            .call(
                                "Runtime.terminateExecution",
                                json!({}),
                                Budget::new(TERMINATE_BUDGET),
                            )
                            .await
                            .is_ok()
                    });
                    if matches!(
                        tokio::time::timeout(TERMINATE_GRACE, term).await,
                        Ok(Ok(true))
                    ) {
                        e.message.push_str(
                            "; a page script still running was stopped (Runtime.terminateExecution), so the tab is usable",
                        );
                    }
                    return Err(e);
                }
                Raced::Done(r) => r?,
            }
        }
        // URL and title from the browser (no page script runs for them).
        let info = conn
            .browser()
            .call(
                "Target.getTargetInfo",
                json!({"targetId": tab.target_id.as_str()}),
                budget.clone(),
            )
            .await
            .ok();
        let info = info.as_ref().map(|v| &v["targetInfo"]);
        let now_url = info
            .and_then(|i| i["url"].as_str())
            .map(String::from)
            .unwrap_or_else(|| tab.main_url());
        let title = info
            .and_then(|i| i["title"].as_str())
            .filter(|t| !t.is_empty() && !now_url.ends_with(t) && !now_url.contains(*t))
            .map(String::from);
        Ok(NavigateResponse {
            url: if now_url.is_empty() {
                url.into()
            } else {
                now_url
            },
            status: "loaded".into(),
            title,
            dialog: None,
        })
    }

    // ------------------------------------------------------------ snapshot

    /// `browser_snapshot`: the supervisor's view plus the AX text with refs
    /// ([`evaluate::refs::AxSnapshotter`]); the ref map is kept for the tab
    /// until the next snapshot. The AX part is skipped (with a `note`
    /// saying why) when the connection is closed or the supervisor inactive
    /// (checked first: the pending list is then empty, its dialogs retired as
    /// `remote`), and while a dialog is pending (not under an auto policy,
    /// whose dialogs are answered at once).
    ///
    /// # Errors
    /// `invalid_argument` (timeout_ms); AX failures become a `note`, not an error.
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
        let pending = (!tab.auto_policy())
            .then(|| view.pending_dialogs.first())
            .flatten();
        let refreshed = if view.active {
            tab.refresh(&budget).await
        } else {
            Ok(())
        };
        let (snapshot, note) = if let Some(r) = tab.sup.connection().closed_reason() {
            (None, Some(format!("browser connection closed: {r}")))
        } else if !view.active || tab.sup.page_session().is_crashed() {
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
                        ..RenderOptions::default()
                    });
                    tab.store_refs(r.refs);
                    let notes = s.notes();
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
        // Sent in the background (its own short bound: the call's budget is
        // spent); the answer is waited for only a short grace, so a stalled
        // browser does not stretch the call far past its timeout_ms.
        let term = tokio::spawn(async move {
            session
                .call(
                    "Runtime.terminateExecution",
                    json!({}),
                    Budget::new(TERMINATE_BUDGET),
                )
                .await
                .is_ok()
        });
        let terminated = matches!(
            tokio::time::timeout(TERMINATE_GRACE, term).await,
            Ok(Ok(true))
        );
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
            Some(r) => tab.refs_for(r)?,
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
                        .dialog_seen_by_engine(info, &budget.child(DIALOG_CATCH_UP))
                        .await;
                    if tab.auto_policy() {
                        // The engine ends an evaluate when a dialog opens; the
                        // policy answers the dialog, but this call's outcome is lost.
                        let mut t = ToolError::dialog_pending(d, "browser_evaluate");
                        t.message = format!(
                            "a {} dialog ({}) opened while browser_evaluate ran and ended it; the {} policy answers it, but the script's outcome is unknown (it may have run)",
                            t.dialog.as_ref().map(|d| d.kind.as_str()).unwrap_or("native"),
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
        let closed = tab
            .sup
            .respond(
                action,
                prompt_text.as_deref(),
                req.dialog_id.as_deref(),
                budget,
            )
            .await
            .map_err(|e| {
                let mut t = map_supervisor(&e, "browser_dialog");
                if t.code == ErrorCode::AmbiguousDialog {
                    t.candidates = tab.pending();
                }
                t
            })?;
        Ok(DialogResponse {
            dialog: crate::tab::dialog_view(&closed.dialog),
            action: req.action,
            pending_dialogs: tab.pending(),
        })
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
        if !tab.engine().config().evaluate_enabled
            && (SCRIPT_METHODS.contains(&m)
                || m.starts_with("Debugger.")
                || (matches!(m, "Page.navigate" | "Target.createTarget")
                    && req
                        .params
                        .as_ref()
                        .and_then(|p| p.get("url"))
                        .and_then(Value::as_str)
                        .is_some_and(is_javascript_url)))
        {
            return Err(evaluate_disabled(m));
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
    /// # Errors
    /// `unknown_tab`, `invalid_argument`, `browser_closed`.
    ///
    /// # Cancel safety
    /// Not cancel safe: a tab may be opened or closed without the switch.
    pub async fn tabs(&self, req: TabsRequest) -> std::result::Result<TabsResponse, ToolError> {
        let budget = Budget::new(TABS_BUDGET);
        match req.action {
            TabsAction::List => {}
            TabsAction::New => {
                let tab = Tab::open(
                    self.live_conn(),
                    self.sup_config.clone(),
                    self.engine_config.clone(),
                    &budget,
                )
                .await?;
                if let Some(url) = req.url.as_deref().filter(|u| !u.is_empty()) {
                    tab.sup
                        .page_session()
                        .call("Page.navigate", json!({"url": url}), budget.clone())
                        .await
                        .map_err(|e| map_transport(&e, "opening the new tab's URL"))?;
                }
                self.set().push_current(tab);
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
        Ok(TabsResponse {
            tabs: self.list_tabs(&budget).await,
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
        let infos: HashMap<String, (String, String)> = self
            .live_conn()
            .browser()
            .call("Target.getTargets", json!({}), budget.clone())
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
    use super::untag;
    use serde_json::json;

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
