//! `cargo xtask e2e --backend browserbase`: the dialog-bridge scenarios of
//! the local suite (`crates/supervisor/tests/e2e_bridge.rs`,
//! `crates/tool-surface/tests/field_cases.rs` C26, both behind
//! `cdp_mock::dismiss_proxy::DismissProxy`) against a real hosted browser.
//!
//! [`run`] creates one Browserbase session per bridge mode over the REST
//! API ([`api`]), connects [`Tools`] to its `connectUrl` (a new tab, as
//! `tabwarden mcp --cdp-url` does), drives the agent's tools
//! (`browser_navigate`, `browser_evaluate`, `browser_snapshot`,
//! `browser_dialog`, `browser_click`, `browser_tabs`) and releases the
//! session (while still connected, so that a provider that ends sessions on
//! disconnect does not make the release fail). Pages are `data:` URLs: the
//! hosted browser cannot reach a loopback fixture server.
//!
//! Scenarios ([`SCENARIOS`]):
//! - bridge `off`: a `prompt()` is closed by the provider's proxy; the page
//!   gets `null` and the tools record the dialog `closed_by: remote`;
//! - bridge `on`, main frame: alert, prompt (the agent's text reaches page
//!   script), confirm accepted, confirm dismissed: 4/4 answered by the agent;
//! - bridge `on`, a `data:` iframe: the same 4/4 inside a child frame with an
//!   opaque origin. Not an out-of-process frame: Chromium keeps `data:`
//!   subframes in their parent's process, and a real cross-site OOPIF needs
//!   a second site the hosted browser can load (left to the local suite);
//! - bridge `on`, a popup: `window.open('about:blank')` from a click, the
//!   popup selected with `browser_tabs`, 4/4 in it once the bridge is in its
//!   document (a `data:` popup URL is refused by Chromium for
//!   renderer-initiated top-level navigations, so the popup is `about:blank`).
//!
//! Every wait has a deadline ([`STEP`], [`SCENARIO_BUDGET`]); a scenario that
//! runs out fails with what it was waiting for.

pub mod api;

use api::Api;
use serde_json::{json, Value};
use std::future::Future;
use std::time::{Duration, Instant};
use tool_surface::{Tools, ToolsConfig};

/// Default API base URL; `BROWSERBASE_API_URL` overrides it.
pub const DEFAULT_API_URL: &str = "https://api.browserbase.com";

/// How long one poll for a state that should come soon may take.
pub const STEP: Duration = Duration::from_secs(15);
/// Bound on one whole scenario.
pub const SCENARIO_BUDGET: Duration = Duration::from_secs(90);
/// Bound on reaching the session's `connectUrl` and opening a tab.
pub const CONNECT_BUDGET: Duration = Duration::from_secs(45);

/// The scenarios of one run, `(bridge mode, name)`, in run order.
pub const SCENARIOS: [(&str, &str); 4] = [
    (
        "off",
        "prompt closed by the provider: page gets null, recorded remote",
    ),
    (
        "on",
        "main frame: alert, prompt, confirm accept, confirm dismiss (4/4)",
    ),
    ("on", "data: iframe (opaque origin, same process): 4/4"),
    ("on", "about:blank popup: 4/4"),
];

/// What [`run`] needs. `Debug` never shows the key.
#[derive(Clone)]
pub struct Options {
    /// API base URL (`BROWSERBASE_API_URL`, default [`DEFAULT_API_URL`]).
    pub api_url: String,
    /// `BROWSERBASE_API_KEY`, sent as `X-BB-API-Key`.
    pub api_key: String,
    /// `BROWSERBASE_PROJECT_ID`, sent as `projectId` when set.
    pub project_id: Option<String>,
    /// Session length asked for, seconds (Browserbase `timeout`, 60..=21600):
    /// the backstop that ends the session should the release fail. Default 300.
    pub session_timeout_s: u64,
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("api_url", &self.api_url)
            .field("api_key", &"***")
            .field("project_id", &self.project_id)
            .field("session_timeout_s", &self.session_timeout_s)
            .finish()
    }
}

/// What is missing for a run (the command exits 2 with this text).
pub const USAGE: &str = "cargo xtask e2e --backend browserbase needs:
  BROWSERBASE_API_KEY     your Browserbase API key (sent as X-BB-API-Key)
  BROWSERBASE_PROJECT_ID  your project id (sent as projectId; needed unless the key implies it)
  BROWSERBASE_API_URL     optional, default https://api.browserbase.com
and outside network (api.browserbase.com and the session's wss:// connectUrl).
Without them, the loopback dismissing proxy stands in for the hosted browser in
`cargo xtask test` (cdp_mock::dismiss_proxy::DismissProxy).";

impl Options {
    /// From `BROWSERBASE_API_KEY`, `BROWSERBASE_PROJECT_ID`,
    /// `BROWSERBASE_API_URL`; `None` when the key is missing or empty.
    pub fn from_env() -> Option<Options> {
        let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
        Some(Options {
            api_key: var("BROWSERBASE_API_KEY")?,
            project_id: var("BROWSERBASE_PROJECT_ID"),
            api_url: var("BROWSERBASE_API_URL").unwrap_or_else(|| DEFAULT_API_URL.into()),
            session_timeout_s: 300,
        })
    }
}

/// A scenario's (or step's) outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Passed; the text says what was seen.
    Pass(String),
    /// Failed; the text says what went wrong.
    Fail(String),
}

/// One line of the report.
#[derive(Debug, Clone)]
pub struct Row {
    /// Bridge mode of the session: `off` or `on`.
    pub bridge: String,
    /// Scenario or step name (`create session`, `connect`, a scenario, `release session`).
    pub name: String,
    /// The outcome.
    pub outcome: Outcome,
    /// Wall time of the step.
    pub elapsed: Duration,
}

/// A session the run created.
#[derive(Debug, Clone)]
pub struct SessionRecord {
    /// Bridge mode it was used with.
    pub bridge: String,
    /// Browserbase session id.
    pub id: String,
    /// Whether the release request succeeded.
    pub released: bool,
}

/// The result of [`run`].
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// Every step and scenario in run order.
    pub rows: Vec<Row>,
    /// Every session created.
    pub sessions: Vec<SessionRecord>,
}

impl Report {
    /// True when every row passed and every session created was released.
    pub fn passed(&self) -> bool {
        !self.rows.is_empty()
            && self
                .rows
                .iter()
                .all(|r| matches!(r.outcome, Outcome::Pass(_)))
            && self.sessions.iter().all(|s| s.released)
    }

    /// Rows that did not pass.
    pub fn failures(&self) -> Vec<&Row> {
        self.rows
            .iter()
            .filter(|r| !matches!(r.outcome, Outcome::Pass(_)))
            .collect()
    }

    /// A Markdown table: bridge, step, result, ms, detail; then a summary line
    /// `N passed, M failed`.
    pub fn table(&self) -> String {
        let mut s =
            String::from("| bridge | scenario | result | ms | detail |\n|---|---|---|---:|---|\n");
        for r in &self.rows {
            let (res, detail) = match &r.outcome {
                Outcome::Pass(d) => ("pass", d.as_str()),
                Outcome::Fail(d) => ("FAIL", d.as_str()),
            };
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} |\n",
                r.bridge,
                r.name,
                res,
                r.elapsed.as_millis(),
                detail.replace('|', "\\|").replace('\n', " ")
            ));
        }
        let failed = self.failures().len();
        s.push_str(&format!(
            "\nbrowserbase e2e: {} passed, {} failed\n",
            self.rows.len() - failed,
            failed
        ));
        s
    }

    fn push(&mut self, bridge: &str, name: &str, elapsed: Duration, r: Result<String, String>) {
        self.rows.push(Row {
            bridge: bridge.into(),
            name: name.into(),
            outcome: match r {
                Ok(d) => Outcome::Pass(d),
                Err(e) => Outcome::Fail(e),
            },
            elapsed,
        });
    }
}

/// Runs every scenario: per bridge mode, create a session, connect, run
/// that mode's scenarios, release. Never panics; failures are rows.
///
/// # Cancel safety
/// Not cancel safe: a dropped future leaves the session to its
/// `session_timeout_s`.
pub async fn run(opts: &Options) -> Report {
    let mut report = Report::default();
    let api = match Api::new(&opts.api_url, &opts.api_key) {
        Ok(a) => a,
        Err(e) => {
            report.push("-", "API URL", Duration::ZERO, Err(e));
            return report;
        }
    };
    for bridge in ["off", "on"] {
        run_mode(&api, opts, bridge, &mut report).await;
    }
    report
}

async fn run_mode(api: &Api, opts: &Options, bridge: &str, report: &mut Report) {
    let t0 = Instant::now();
    let session = match api
        .create_session(opts.project_id.as_deref(), opts.session_timeout_s)
        .await
    {
        Ok(s) => {
            report.push(
                bridge,
                "create session",
                t0.elapsed(),
                Ok(format!("id {}", s.id)),
            );
            s
        }
        Err(e) => {
            report.push(bridge, "create session", t0.elapsed(), Err(e));
            return;
        }
    };
    report.sessions.push(SessionRecord {
        bridge: bridge.into(),
        id: session.id.clone(),
        released: false,
    });

    let t0 = Instant::now();
    let mut config = ToolsConfig::default().bridge(bridge);
    config.connect_options = config.connect_options.connect_timeout(CONNECT_BUDGET);
    let tools =
        match tokio::time::timeout(CONNECT_BUDGET, Tools::connect(&session.connect_url, config))
            .await
        {
            Ok(Ok(t)) => {
                report.push(bridge, "connect", t0.elapsed(), Ok("tab opened".into()));
                Some(t)
            }
            Ok(Err(e)) => {
                report.push(bridge, "connect", t0.elapsed(), Err(e.to_string()));
                None
            }
            Err(_) => {
                report.push(
                    bridge,
                    "connect",
                    t0.elapsed(),
                    Err(format!("no tab within {CONNECT_BUDGET:?}")),
                );
                None
            }
        };

    if let Some(tools) = &tools {
        for (mode, name) in SCENARIOS.iter().filter(|(m, _)| *m == bridge) {
            let t0 = Instant::now();
            let scenario: std::pin::Pin<Box<dyn Future<Output = Result<String, String>> + '_>> =
                match (*mode, *name) {
                    ("off", _) => Box::pin(prompt_closed_remote(tools)),
                    (_, n) if n.starts_with("main frame") => Box::pin(four_in_main_frame(tools)),
                    (_, n) if n.starts_with("data: iframe") => Box::pin(four_in_data_iframe(tools)),
                    _ => Box::pin(four_in_popup(tools)),
                };
            let r = bounded(scenario).await;
            report.push(bridge, name, t0.elapsed(), r);
        }
    }

    // Release while still connected, then close.
    let t0 = Instant::now();
    let released = api
        .release_session(&session.id, opts.project_id.as_deref())
        .await;
    if let Some(rec) = report.sessions.iter_mut().find(|s| s.id == session.id) {
        rec.released = released.is_ok();
    }
    report.push(
        bridge,
        "release session",
        t0.elapsed(),
        released.map(|()| format!("id {} REQUEST_RELEASE", session.id)),
    );
    if let Some(t) = tools {
        t.connection().close();
    }
}

async fn bounded(f: impl Future<Output = Result<String, String>>) -> Result<String, String> {
    tokio::time::timeout(SCENARIO_BUDGET, f)
        .await
        .unwrap_or_else(|_| Err(format!("did not finish within {SCENARIO_BUDGET:?}")))
}

// ------------------------------------------------------------ pages

/// `data:` URL of an HTML document (every byte but unreserved ones escaped).
pub fn data_url(html: &str) -> String {
    let mut s = String::from("data:text/html;charset=utf-8,");
    for b in html.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

const OUT: &str = "document.getElementById('out').textContent";

fn page() -> String {
    data_url("<!doctype html><title>tabwarden e2e</title><p id=out>ready</p>")
}

fn page_with_iframe() -> String {
    let child = data_url("<!doctype html><title>child</title><p id=out>ready</p>");
    data_url(&format!(
        "<!doctype html><title>tabwarden e2e iframe</title><p>top</p><iframe src=\"{child}\"></iframe>"
    ))
}

fn page_with_popup_button() -> String {
    data_url(
        "<!doctype html><title>tabwarden e2e opener</title><p id=out>ready</p>\
         <button onclick=\"window.__tw_popup = window.open('about:blank', 'tw_e2e_popup')\">Open popup</button>",
    )
}

/// Schedules the four dialogs (so the evaluate that starts them returns at
/// once) and writes their results as JSON into `#out`, creating it in a
/// document that has none.
const FOUR_DIALOGS: &str = "(() => { setTimeout(() => { \
    const r = JSON.stringify([typeof alert('a1'), prompt('p1', 'def'), confirm('yes1'), confirm('no1')]); \
    let o = document.getElementById('out'); \
    if (!o) { o = document.createElement('p'); o.id = 'out'; document.body.appendChild(o); } \
    o.textContent = r; }, 0); return 'scheduled'; })()";
/// What the page sees when the agent answers as `four_of_four` does.
pub const FOUR_ANSWERS: &str = r#"["undefined","agent text for p1",true,false]"#;

// ------------------------------------------------------------ tool helpers

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.len() > 400 {
        format!(
            "{}…",
            &s[..s
                .char_indices()
                .take_while(|(i, _)| *i < 400)
                .last()
                .map_or(0, |(i, c)| i + c.len_utf8())]
        )
    } else {
        s
    }
}

async fn call_ok(tools: &Tools, name: &str, args: Value) -> Result<Value, String> {
    let v = tools.call(name, args.clone()).await;
    if v.get("error").is_some() {
        return Err(format!("{name} {args}: {}", short(&v)));
    }
    Ok(v)
}

async fn navigate(tools: &Tools, url: &str) -> Result<(), String> {
    let v = call_ok(tools, "browser_navigate", json!({ "url": url })).await?;
    if v["status"] != "loaded" {
        return Err(format!(
            "browser_navigate: status {} ({})",
            v["status"],
            short(&v)
        ));
    }
    Ok(())
}

async fn eval(tools: &Tools, expression: &str, frame_id: Option<&str>) -> Result<Value, String> {
    let mut args = json!({ "expression": expression });
    if let Some(f) = frame_id {
        args["frame_id"] = json!(f);
    }
    let v = tools.call("browser_evaluate", args).await;
    if v.get("error").is_some() {
        return Err(format!("browser_evaluate {expression:?}: {}", short(&v)));
    }
    Ok(v["value"].clone())
}

/// Polls `expression` until it returns something other than `"ready"`
/// (errors such as `dialog_pending` while a dialog shows are retried).
async fn wait_for_change(
    tools: &Tools,
    expression: &str,
    frame_id: Option<&str>,
) -> Result<Value, String> {
    let t0 = Instant::now();
    let mut last = String::new();
    while t0.elapsed() < STEP {
        match eval(tools, expression, frame_id).await {
            Ok(v) if v != json!("ready") => return Ok(v),
            Ok(v) => last = v.to_string(),
            Err(e) => last = e,
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!(
        "{expression} did not change within {STEP:?} (last: {last})"
    ))
}

async fn snapshot(tools: &Tools) -> Result<Value, String> {
    call_ok(tools, "browser_snapshot", json!({})).await
}

/// The first pending dialog, polled through `browser_snapshot`.
async fn wait_pending(tools: &Tools) -> Result<Value, String> {
    let t0 = Instant::now();
    let mut last = Value::Null;
    while t0.elapsed() < STEP {
        let s = snapshot(tools).await?;
        if let Some(d) = s["pending_dialogs"].get(0) {
            return Ok(d.clone());
        }
        last = s["recent_dialogs"].clone();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!(
        "no pending dialog within {STEP:?} (recent_dialogs: {}; without a working bridge the provider closes dialogs itself)",
        short(&last)
    ))
}

/// Answers the four dialogs [`FOUR_DIALOGS`] raises as the local suite does
/// (accept, accept with text, accept, dismiss), checking each one's type and
/// message, and (when given) that it came from `frame`. Returns how long the
/// first one took to show.
async fn four_of_four(tools: &Tools, frame: Option<&str>) -> Result<Duration, String> {
    let t0 = Instant::now();
    let mut first = None;
    for (kind, message, action, text) in [
        ("alert", "a1", "accept", None),
        ("prompt", "p1", "accept", Some("agent text for p1")),
        ("confirm", "yes1", "accept", None),
        ("confirm", "no1", "dismiss", None),
    ] {
        let d = wait_pending(tools).await?;
        first.get_or_insert_with(|| t0.elapsed());
        if d["type"] != kind || d["message"] != message {
            return Err(format!("expected {kind} {message:?}, got {}", short(&d)));
        }
        if let Some(f) = frame {
            if d["frame_id"] != f {
                return Err(format!(
                    "{kind} {message:?} came from frame {} not {f}",
                    d["frame_id"]
                ));
            }
        }
        let mut args = json!({ "action": action, "dialog_id": d["id"] });
        if let Some(t) = text {
            args["prompt_text"] = json!(t);
        }
        let a = call_ok(tools, "browser_dialog", args).await?;
        if a["dialog"]["id"] != d["id"] {
            return Err(format!(
                "browser_dialog answered another dialog: {}",
                short(&a)
            ));
        }
    }
    Ok(first.unwrap_or_default())
}

/// The last `n` closed dialogs must all be `closed_by: agent`.
async fn closed_by_agent(tools: &Tools, n: usize) -> Result<(), String> {
    let s = snapshot(tools).await?;
    let recent = s["recent_dialogs"].as_array().cloned().unwrap_or_default();
    let last: Vec<&Value> = recent.iter().rev().take(n).collect();
    if last.len() < n || last.iter().any(|d| d["closed_by"] != "agent") {
        return Err(format!(
            "expected the last {n} dialogs closed by the agent: {}",
            short(&s["recent_dialogs"])
        ));
    }
    Ok(())
}

// ------------------------------------------------------------ scenarios

/// Bridge off: the provider's proxy closes a native prompt before the agent
/// can answer; the page gets `null` and the tools record it `remote`.
async fn prompt_closed_remote(tools: &Tools) -> Result<String, String> {
    navigate(tools, &page()).await?;
    eval(
        tools,
        "setTimeout(() => { document.getElementById('out').textContent = 'prompt said ' + prompt('native?', 'd'); }, 0); 'scheduled'",
        None,
    )
    .await?;
    let t0 = Instant::now();
    let got = wait_for_change(tools, OUT, None).await.map_err(|e| {
        format!("{e}: the prompt stayed open, so this provider's proxy did not close it")
    });
    let got = match got {
        Ok(v) => v,
        Err(e) => {
            // Leave nothing pending behind.
            let _ = tools
                .call("browser_dialog", json!({"action": "dismiss"}))
                .await;
            return Err(e);
        }
    };
    let page_saw = t0.elapsed();
    if got != json!("prompt said null") {
        return Err(format!("the page got {got}, expected \"prompt said null\""));
    }
    let t1 = Instant::now();
    loop {
        let s = snapshot(tools).await?;
        if let Some(d) = s["recent_dialogs"].as_array().and_then(|a| a.last()) {
            if d["type"] != "prompt" || d["closed_by"] != "remote" {
                return Err(format!(
                    "expected the prompt closed_by remote: {}",
                    short(d)
                ));
            }
            if s["pending_dialogs"]
                .as_array()
                .is_some_and(|p| !p.is_empty())
            {
                return Err(format!(
                    "dialogs still pending: {}",
                    short(&s["pending_dialogs"])
                ));
            }
            return Ok(format!(
                "page got null {} ms after scheduling; recorded closed_by remote",
                page_saw.as_millis()
            ));
        }
        if t1.elapsed() > STEP {
            return Err(format!(
                "the closed prompt was not recorded within {STEP:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn four_in_main_frame(tools: &Tools) -> Result<String, String> {
    navigate(tools, &page()).await?;
    eval(tools, FOUR_DIALOGS, None).await?;
    let first = four_of_four(tools, None).await?;
    let got = wait_for_change(tools, OUT, None).await?;
    if got != json!(FOUR_ANSWERS) {
        return Err(format!("the page got {got}, expected {FOUR_ANSWERS}"));
    }
    closed_by_agent(tools, 4).await?;
    Ok(format!(
        "4/4 answered by the agent; first dialog pending after {} ms; page got {FOUR_ANSWERS}",
        first.as_millis()
    ))
}

async fn four_in_data_iframe(tools: &Tools) -> Result<String, String> {
    navigate(tools, &page_with_iframe()).await?;
    let t0 = Instant::now();
    let frame = loop {
        let s = snapshot(tools).await?;
        if let Some(f) = s["frame_tree"]["top"]["children"][0]["frame_id"].as_str() {
            break f.to_string();
        }
        if t0.elapsed() > STEP {
            return Err(format!(
                "no child frame within {STEP:?}: {}",
                short(&s["frame_tree"])
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    // The child document loaded: its #out exists.
    let t0 = Instant::now();
    while eval(
        tools,
        "document.getElementById('out') ? 'ok' : 'no'",
        Some(&frame),
    )
    .await?
        != json!("ok")
    {
        if t0.elapsed() > STEP {
            return Err("the iframe's document never loaded".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eval(tools, FOUR_DIALOGS, Some(&frame)).await?;
    let first = four_of_four(tools, Some(&frame)).await?;
    let got = wait_for_change(tools, OUT, Some(&frame)).await?;
    if got != json!(FOUR_ANSWERS) {
        return Err(format!("the iframe got {got}, expected {FOUR_ANSWERS}"));
    }
    closed_by_agent(tools, 4).await?;
    Ok(format!(
        "4/4 in the child frame; first dialog pending after {} ms",
        first.as_millis()
    ))
}

async fn four_in_popup(tools: &Tools) -> Result<String, String> {
    navigate(tools, &page_with_popup_button()).await?;
    let before = call_ok(tools, "browser_tabs", json!({})).await?;
    let known: Vec<String> = before["tabs"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|t| t["tab_id"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let s = snapshot(tools).await?;
    let text = s["snapshot"].as_str().unwrap_or_default();
    let r = text
        .lines()
        .find(|l| l.contains("\"Open popup\""))
        .and_then(|l| l.split("[ref=").nth(1))
        .and_then(|r| r.split(']').next())
        .ok_or_else(|| format!("no \"Open popup\" button in the snapshot: {text}"))?
        .to_string();
    // A real click: window.open needs a user gesture.
    call_ok(tools, "browser_click", json!({ "ref": r })).await?;
    let t0 = Instant::now();
    let popup = loop {
        let tabs = call_ok(tools, "browser_tabs", json!({})).await?;
        let new = tabs["tabs"].as_array().and_then(|a| {
            a.iter()
                .filter_map(|t| t["tab_id"].as_str())
                .find(|id| !known.iter().any(|k| k == id))
                .map(String::from)
        });
        if let Some(id) = new {
            break id;
        }
        if t0.elapsed() > STEP {
            return Err(format!("no popup tab within {STEP:?}: {}", short(&tabs)));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let result = async {
        // Wait until the bridge replaced alert in the popup's document (a
        // dialog raised before that goes native: the known popup gap).
        let t0 = Instant::now();
        loop {
            match eval(tools, POPUP_BRIDGED, None).await {
                Ok(v) if v == json!("bridged") => break,
                Ok(_) | Err(_) if t0.elapsed() > STEP => {
                    return Err(format!(
                        "the bridge did not reach the popup within {STEP:?}"
                    ));
                }
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        let waited = t0.elapsed();
        eval(tools, FOUR_DIALOGS_IN_POPUP, None).await?;
        let first = four_of_four(tools, None).await?;
        let got = wait_for_change(tools, OUT, None).await?;
        if got != json!(FOUR_ANSWERS) {
            return Err(format!("the popup's dialogs returned {got}, expected {FOUR_ANSWERS}"));
        }
        closed_by_agent(tools, 4).await?;
        Ok(format!(
            "4/4 raised by the popup's window; bridge in its document after {} ms; first dialog pending after {} ms",
            waited.as_millis(),
            first.as_millis()
        ))
    }
    .await;
    let _ = tools
        .call(
            "browser_tabs",
            json!({ "action": "close", "tab_id": popup }),
        )
        .await;
    result
}

/// In the opener: whether the bridge replaced `alert` in the popup's window.
const POPUP_BRIDGED: &str = "(() => { const w = window.__tw_popup; \
    return w && !String(w.alert).includes('[native code]') ? 'bridged' : 'native'; })()";

/// In the opener: the four dialogs of [`FOUR_DIALOGS`], raised by the popup's
/// own `alert`/`prompt`/`confirm` (the popup's document, the popup's bridge);
/// the results go to the opener's `#out`.
const FOUR_DIALOGS_IN_POPUP: &str = "(() => { setTimeout(() => { const w = window.__tw_popup; \
    document.getElementById('out').textContent = JSON.stringify([typeof w.alert('a1'), \
    w.prompt('p1', 'def'), w.confirm('yes1'), w.confirm('no1')]); }, 0); return 'scheduled'; })()";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_urls_escape_everything_but_unreserved_bytes() {
        assert_eq!(
            data_url("<p id=out>a b</p>"),
            "data:text/html;charset=utf-8,%3Cp%20id%3Dout%3Ea%20b%3C%2Fp%3E"
        );
        // A nested data: URL survives one level of decoding.
        let outer = page_with_iframe();
        assert!(
            outer.contains("src%3D%22data%3Atext%2Fhtml%3Bcharset%3Dutf-8%2C%253C"),
            "{outer}"
        );
    }

    #[test]
    fn the_report_needs_every_row_passed_and_every_session_released() {
        let mut r = Report::default();
        assert!(!r.passed(), "an empty run is no pass");
        r.push("on", "x", Duration::from_millis(5), Ok("fine".into()));
        r.sessions.push(SessionRecord {
            bridge: "on".into(),
            id: "s".into(),
            released: true,
        });
        assert!(r.passed());
        r.sessions[0].released = false;
        assert!(!r.passed());
        r.sessions[0].released = true;
        r.push("on", "y", Duration::ZERO, Err("bad | thing".into()));
        assert!(!r.passed());
        let t = r.table();
        assert!(t.contains("| on | y | FAIL | 0 | bad \\| thing |"), "{t}");
        assert!(
            t.trim_end()
                .ends_with("browserbase e2e: 1 passed, 1 failed"),
            "{t}"
        );
    }

    #[test]
    fn options_debug_hides_the_key() {
        let o = Options {
            api_url: DEFAULT_API_URL.into(),
            api_key: "bb_live_SECRET".into(),
            project_id: None,
            session_timeout_s: 300,
        };
        assert!(!format!("{o:?}").contains("SECRET"));
    }
}
