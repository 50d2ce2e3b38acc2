//! [`Tools`]: the configuration, connecting, the dispatcher [`Tools::call`]
//! and the helpers every tool shares. Each tool family has its own module
//! with its `impl Tools` block and its private helpers:
//!
//! * `navigate`: `browser_navigate` (and the load of `browser_tabs new`);
//! * `url`: the URL checks of `browser_navigate`, `browser_tabs new` and
//!   `browser_cdp Page.navigate`;
//! * `snapshot`: `browser_snapshot`;
//! * `actions`: `browser_click`, `browser_type`, `browser_press_key` (one
//!   ref-action path);
//! * `evaluate`: `browser_evaluate`;
//! * `dialog`: `browser_dialog`;
//! * `cdp`: `browser_cdp`;
//! * `capture`: `browser_screenshot`, `browser_console`;
//! * `tabs`: the tab set (which tabs, which one is current) and `browser_tabs`.

mod actions;
mod capture;
mod cdp;
mod dialog;
mod evaluate;
mod navigate;
mod snapshot;
mod tabs;
mod url;

pub use snapshot::MAX_SNAPSHOT_BYTES;

use crate::catalog::{self, parse_args, ToolInfo};
use crate::error::{Error, ErrorCode, Result, ToolError};
use crate::tab::Tab;
use ::evaluate::{EngineConfig, EngineMetrics};
use cdp_transport::{Budget, ConnectOptions, Connection, TargetId};
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use supervisor::{BridgeMode, DialogPolicy, ReconnectPolicy, SupervisorConfig};
use tabs::TabSet;

/// Size cap of an evaluate result (characters of serialized JSON, counted by
/// the engine in the page); a longer value is cut with a `truncated` marker.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;

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

/// Bound on `Target.getTargetInfo` for a navigation's URL and title (part of
/// the call's budget while some is left, else on its own).
const INFO_BUDGET: Duration = Duration::from_secs(2);

/// The agent tools over one browser connection and its tabs.
///
/// Each tab is one [`supervisor::Supervisor`] (dialogs, frames, routing,
/// console errors), one [`evaluate::Engine`](::evaluate::Engine) (budgeted
/// evaluate) and one
/// [`evaluate::refs::AxSnapshotter`](::evaluate::refs::AxSnapshotter) with
/// the ref map of its latest
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
            tabs: Mutex::new(TabSet::new(tab)),
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

    /// The evaluate engine's counters for the current tab (evaluations,
    /// timeouts, terminations, dialog interruptions, ...); counted anew
    /// after a reconnect.
    pub fn metrics(&self) -> EngineMetrics {
        self.tab().engine().metrics()
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
}
