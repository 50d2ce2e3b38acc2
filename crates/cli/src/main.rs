//! `tabwarden`: drive Chromium over CDP from an AI agent without hanging.
//!
//! Commands: `demo`, `snapshot`, `eval`, `screenshot`, `mcp`. Results go to
//! stdout, logs to stderr (`RUST_LOG`, default `warn`); `eval --metrics`
//! also prints the engine's metrics to stderr as one JSON line
//! `{"metrics": {…}}`.
//!
//! Exit codes: 0 success; 1 the tool reported an error (its JSON is printed)
//! or a demo expectation failed; 2 bad command line; 3 no browser (Chromium
//! could not be started or `--cdp-url` could not be reached; `mcp` with
//! `--cdp-url` serves anyway and its tool calls report it); 128 + the
//! signal number after SIGHUP (129), SIGINT (130) or SIGTERM (143): the
//! command is stopped as on stdin EOF (the launched Chromium is killed and
//! its profile removed) before exiting. Arguments (`--timeout-ms` range, the
//! target as a file or an http/https/file/data/about URL, `--cdp-url` as a
//! ws/wss/http/https URL, the screenshot's output directory) are checked
//! before any browser is launched or contacted (exit 2).
//!
//! With `--cdp-url`, the tab a command opened (and the popups its page
//! opened) is closed before tabwarden exits: on success, on a tool error
//! and after a signal (`Target.closeTarget`, bounded by
//! [`tabs::CLOSE_TABS_BOUND`]); a launched Chromium goes whole.
//!
//! Reaching `--cdp-url` (`/json/version` discovery plus the WebSocket
//! handshake) is bounded by `--connect-timeout-ms`, else by the command's
//! `--timeout-ms` when given but never under 5 s, else 10 s; past it the
//! command exits 3 with `connecting to … timed out after …`. Connecting to a
//! Chromium tabwarden launched itself always has the 10 s bound (a short
//! `--timeout-ms` is for the page, not for the local handshake). Opening the
//! tab afterwards has tool-surface's own 20 s bound.

mod demo;
mod jsonrpc;
mod mcp;
mod site;
mod tabs;

use anyhow::Context;
use cdp_transport::{LaunchOptions, LaunchedChrome};
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::{json, Value};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tabs::ToolsSlot;
use tool_surface::{Tools, ToolsConfig};

#[derive(Parser, Debug)]
#[command(
    name = "tabwarden",
    version,
    about = "Drive Chromium over CDP from an AI agent without hanging on dialogs, iframes or endless scripts"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Args, Debug, Clone)]
struct BrowserArgs {
    /// CDP endpoint of a running browser (`ws://…` or `http://host:port`); default: launch a local headless Chromium.
    #[arg(long, env = "TABWARDEN_CDP_URL", global = true)]
    cdp_url: Option<String>,
    /// Launch Chromium with outside network blocked (for saved pages and tests).
    #[arg(long, env = "TABWARDEN_OFFLINE", global = true, hide = true)]
    offline: bool,
    /// Bound in ms (1..=120000) on reaching `--cdp-url`: `/json/version`
    /// discovery plus the WebSocket handshake. Default: the command's
    /// `--timeout-ms` when given, but at least 5000; else 10000. Not used for
    /// the Chromium tabwarden launches itself (always 10000).
    #[arg(long, env = "TABWARDEN_CONNECT_TIMEOUT_MS", global = true,
          value_parser = clap::value_parser!(u64).range(1..=120_000))]
    connect_timeout_ms: Option<u64>,
}

/// Connect bound for a Chromium tabwarden launched, and for `--cdp-url` when
/// neither `--connect-timeout-ms` nor `--timeout-ms` is given.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Least connect bound taken from `--timeout-ms`: a call budget of a few ms
/// is about the page, while a remote handshake (TLS, a hosted browser's
/// proxy) takes a second or more.
const MIN_CONNECT_TIMEOUT_FROM_TIMEOUT_MS: Duration = Duration::from_secs(5);

impl BrowserArgs {
    /// The bound on discovery + handshake. A launched Chromium (no
    /// `--cdp-url`): [`DEFAULT_CONNECT_TIMEOUT`]. `--cdp-url`:
    /// `--connect-timeout-ms`, else the command's `--timeout-ms` raised to
    /// [`MIN_CONNECT_TIMEOUT_FROM_TIMEOUT_MS`], else
    /// [`DEFAULT_CONNECT_TIMEOUT`].
    fn connect_timeout(&self, timeout_ms: Option<u64>) -> Duration {
        if self.cdp_url.is_none() {
            return DEFAULT_CONNECT_TIMEOUT;
        }
        if let Some(ms) = self.connect_timeout_ms {
            return Duration::from_millis(ms);
        }
        timeout_ms
            .map(|ms| Duration::from_millis(ms).max(MIN_CONNECT_TIMEOUT_FROM_TIMEOUT_MS))
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT)
    }

    /// `config` with the connect bound of [`BrowserArgs::connect_timeout`].
    fn tools_config(&self, mut config: ToolsConfig, timeout_ms: Option<u64>) -> ToolsConfig {
        config.connect_options = config
            .connect_options
            .connect_timeout(self.connect_timeout(timeout_ms));
        config
    }
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Serve a built-in fixture site and play an agent session through the tools.
    Demo {
        #[command(flatten)]
        browser: BrowserArgs,
        /// Print one JSON object per step (`{step, tool, args, result, ok}`) instead of the readable log.
        #[arg(long)]
        jsonl: bool,
    },
    /// Print the snapshot of a page (URL or file path) as JSON.
    Snapshot {
        /// URL (http, https, file, data, about), or path of an HTML file.
        target: String,
        /// Budget per call in ms (1..=120000).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=120_000))]
        timeout_ms: Option<u64>,
        #[command(flatten)]
        page: PageArgs,
        #[command(flatten)]
        browser: BrowserArgs,
    },
    /// Evaluate a JavaScript expression on a page (URL or file path) and print the result as JSON.
    Eval {
        /// URL (http, https, file, data, about), or path of an HTML file.
        target: String,
        /// The expression (promises are awaited).
        expression: String,
        /// Budget in ms (1..=120000, default 20000); a script still running is terminated.
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=120_000))]
        timeout_ms: Option<u64>,
        /// After the evaluate, print the engine's metrics (evaluations,
        /// timeouts, terminations, …) as one line of JSON to stderr.
        #[arg(long)]
        metrics: bool,
        #[command(flatten)]
        page: PageArgs,
        #[command(flatten)]
        browser: BrowserArgs,
    },
    /// Save a PNG screenshot of a page.
    Screenshot {
        /// URL (http, https, file, data, about), or path of an HTML file.
        target: String,
        /// Output file.
        #[arg(short, long)]
        output: PathBuf,
        /// Capture the whole page, not only the viewport.
        #[arg(long)]
        full_page: bool,
        #[command(flatten)]
        page: PageArgs,
        #[command(flatten)]
        browser: BrowserArgs,
    },
    /// Serve the tools over MCP on stdin/stdout.
    Mcp {
        #[command(flatten)]
        browser: BrowserArgs,
        /// Dialog policy.
        #[arg(long, value_enum, default_value_t = DialogPolicy::MustRespond)]
        dialog_policy: DialogPolicy,
        /// must_respond watchdog: dismiss a dialog left pending this many seconds.
        #[arg(long, default_value_t = 300)]
        dialog_timeout_s: u64,
        /// Dialog bridge for hosted browsers whose proxy closes native dialogs: off, on or auto.
        #[arg(long, default_value = "off", value_parser = ["off", "on", "auto"])]
        bridge: String,
        /// Refuse page script from the agent: browser_evaluate, browser_cdp
        /// outside its read-only allowlist, and javascript:/data:/blob: URLs.
        #[arg(long)]
        no_evaluate: bool,
        /// When the Chromium that tabwarden launched itself (no `--cdp-url`)
        /// has died, the next tool call starts a new one, at most this many
        /// times per server (0: never; the call then returns browser_closed).
        #[arg(long, default_value_t = 3)]
        max_relaunches: u32,
    },
}

/// Options of the commands that load one page (`snapshot`, `eval`, `screenshot`).
#[derive(Args, Debug, Clone)]
struct PageArgs {
    /// What happens to a native dialog (alert, confirm, prompt,
    /// beforeunload) the page opens. must_respond (default): it stays open
    /// and is reported (snapshot lists it under pending_dialogs; eval and
    /// screenshot exit 1 with dialog_pending, since the CLI cannot answer
    /// it); auto_dismiss / auto_accept: answered at once, the command goes on.
    #[arg(long, value_enum, default_value_t = DialogPolicy::MustRespond)]
    dialog_policy: DialogPolicy,
}

/// What the CLI says to do about a pending dialog: it has no command to
/// answer one (MCP has `browser_dialog`).
const CLI_DIALOG_STEP: &str = "the tabwarden CLI cannot answer a dialog: rerun with --dialog-policy auto_dismiss (dismiss every dialog) or --dialog-policy auto_accept (accept every dialog); to answer it yourself, use tabwarden mcp and browser_dialog";

/// A tool's JSON as the CLI prints it: `dialog_pending`'s `next_step` and a
/// snapshot's note point at `--dialog-policy` instead of `browser_dialog`,
/// which the CLI does not have.
fn for_cli(mut v: Value) -> Value {
    if v["error"]["code"] == "dialog_pending" {
        v["error"]["next_step"] = Value::from(CLI_DIALOG_STEP);
    }
    if let Some(note) = v.get("note").and_then(Value::as_str) {
        if note.contains("browser_dialog") {
            let fixed = note.replace(
                "answer it with browser_dialog",
                "rerun with --dialog-policy auto_dismiss or auto_accept to answer it",
            );
            v["note"] = Value::from(fixed);
        }
    }
    v
}

/// `--dialog-policy` (`mcp`, `snapshot`, `eval`, `screenshot`).
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
#[value(rename_all = "snake_case")]
enum DialogPolicy {
    /// The dialog stays open and is reported (dialog_pending) until answered (MCP: browser_dialog).
    MustRespond,
    /// Dismiss every dialog at once.
    AutoDismiss,
    /// Accept every dialog at once.
    AutoAccept,
}

impl DialogPolicy {
    fn as_str(self) -> &'static str {
        match self {
            Self::MustRespond => "must_respond",
            Self::AutoDismiss => "auto_dismiss",
            Self::AutoAccept => "auto_accept",
        }
    }
}

/// A browser to talk to: a launched local one (killed on drop) or a remote endpoint.
struct Browser {
    chrome: Option<LaunchedChrome>,
    endpoint: String,
}

impl Browser {
    /// True for `--cdp-url` (tabwarden did not launch it).
    fn remote(&self) -> bool {
        self.chrome.is_none()
    }
}

/// How a local Chromium is launched for these arguments.
fn launch_options(args: &BrowserArgs) -> LaunchOptions {
    LaunchOptions::default().offline(args.offline)
}

async fn browser(args: &BrowserArgs) -> anyhow::Result<Browser> {
    if let Some(url) = &args.cdp_url {
        return Ok(Browser {
            chrome: None,
            endpoint: url.clone(),
        });
    }
    let chrome = LaunchedChrome::launch(launch_options(args))
        .await
        .context("launching Chromium")?;
    tracing::info!(port = chrome.port(), "launched headless Chromium");
    let endpoint = chrome.ws_url().to_string();
    Ok(Browser {
        chrome: Some(chrome),
        endpoint,
    })
}

/// Schemes a page given on the command line may have.
const PAGE_SCHEMES: [&str; 5] = ["http", "https", "file", "data", "about"];

/// A URL as given (checked: it parses, its scheme is one of
/// [`PAGE_SCHEMES`], http/https have a host), or an existing file path as a
/// `file://` URL. `Err` is the usage message.
fn to_url(target: &str) -> Result<String, String> {
    let lower = target.to_ascii_lowercase();
    if !target.contains("://") && !lower.starts_with("data:") && !lower.starts_with("about:") {
        let abs = std::fs::canonicalize(Path::new(target))
            .map_err(|e| format!("{target} is neither a URL nor a readable file: {e}"))?;
        return url::Url::from_file_path(&abs)
            .map(String::from)
            .map_err(|()| format!("{} cannot be made a file:// URL", abs.display()));
    }
    let url = url::Url::parse(target).map_err(|e| format!("{target:?} is not a valid URL: {e}"))?;
    if !PAGE_SCHEMES.contains(&url.scheme()) {
        return Err(format!(
            "{target:?}: scheme {:?} is not one of {}",
            url.scheme(),
            PAGE_SCHEMES.join(", ")
        ));
    }
    if matches!(url.scheme(), "http" | "https") && url.host_str().is_none_or(str::is_empty) {
        return Err(format!("{target:?} has no host"));
    }
    Ok(target.to_string())
}

/// Checks `--cdp-url` as [`cdp_transport::Endpoint::parse`] does (a ws,
/// wss, http or https URL with a host); `Err` is the usage message, with
/// the URL's credentials redacted.
fn check_cdp_url(url: &str) -> Result<(), String> {
    cdp_transport::Endpoint::parse(url)
        .map(drop)
        .map_err(|e| format!("--cdp-url: {e}"))
}

fn print(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

/// `eval --metrics`: the engine's counters ([`Tools::metrics`]) as one line
/// of JSON on stderr, `{"metrics": {evaluations, succeeded, timeouts, …}}`.
fn print_metrics(tools: &Tools) {
    let m = serde_json::to_value(tools.metrics()).unwrap_or(Value::Null);
    eprintln!("{}", json!({ "metrics": m }));
}

fn is_error(v: &Value) -> bool {
    v.get("error").is_some()
}

/// An error and its causes, each said once: `a: b: c`. A cause whose text
/// the message so far already contains (an error that prints its source in
/// its own message, as tool-surface's `browser setup failed: {source}` does)
/// is not repeated.
fn error_text(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in e.chain() {
        let c = cause.to_string();
        if c.is_empty() || out.contains(&c) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&c);
    }
    out
}

enum Failure {
    Tool,
    /// A bad command line found before launching Chromium (exit 2).
    Usage(String),
    /// Stopped by a signal (exit 128 + its number).
    Signal(i32),
    NoBrowser(anyhow::Error),
    Other(anyhow::Error),
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure::Other(e.into())
    }
}

/// Connected [`Tools`]. In a Chromium tabwarden launched, their connection
/// is closed on drop, before the browser goes away. For `--cdp-url` they are
/// also in the run's [`ToolsSlot`], whose [`tabs::release`] (after the
/// command, whatever ended it) closes their tab, then the connection.
struct Connected {
    tools: Arc<Tools>,
    local: bool,
}

impl std::ops::Deref for Connected {
    type Target = Tools;
    fn deref(&self) -> &Tools {
        &self.tools
    }
}

impl Drop for Connected {
    fn drop(&mut self) {
        if self.local {
            self.tools.connection().close();
        }
    }
}

async fn connect(b: &Browser, config: ToolsConfig, slot: &ToolsSlot) -> Result<Connected, Failure> {
    let tools = if b.remote() {
        tabs::connect_remote(slot, &b.endpoint, config)
            .await
            .map_err(|e| Failure::NoBrowser(anyhow::anyhow!(e)))?
    } else {
        Tools::connect(&b.endpoint, config)
            .await
            .map(Arc::new)
            .map_err(|e| Failure::NoBrowser(e.into()))?
    };
    Ok(Connected {
        tools,
        local: !b.remote(),
    })
}

/// Navigates; a page blocked by a dialog is not a failure for snapshot/eval (the dialog is in the output).
async fn open(tools: &Tools, target: &str, timeout_ms: Option<u64>) -> Result<Value, Failure> {
    let url = to_url(target).map_err(Failure::Usage)?;
    let mut args = json!({"url": url});
    if let Some(t) = timeout_ms {
        args["timeout_ms"] = json!(t);
    }
    let nav = tools.call("browser_navigate", args).await;
    if is_error(&nav) {
        print(&for_cli(nav));
        return Err(Failure::Tool);
    }
    Ok(nav)
}

/// The `--cdp-url` of a command, if any.
fn cdp_url(command: &Command) -> Option<&str> {
    match command {
        Command::Demo { browser, .. }
        | Command::Snapshot { browser, .. }
        | Command::Eval { browser, .. }
        | Command::Screenshot { browser, .. }
        | Command::Mcp { browser, .. } => browser.cdp_url.as_deref(),
    }
}

/// Checks what clap cannot before any browser is launched or contacted:
/// `--cdp-url` is a ws/wss/http/https URL with a host; the target is a
/// readable file or an http/https/file/data/about URL; the screenshot's
/// output directory exists.
fn check_args(command: &Command) -> Result<(), Failure> {
    if let Some(url) = cdp_url(command) {
        check_cdp_url(url).map_err(Failure::Usage)?;
    }
    let target = match command {
        Command::Snapshot { target, .. }
        | Command::Eval { target, .. }
        | Command::Screenshot { target, .. } => target,
        _ => return Ok(()),
    };
    to_url(target).map_err(Failure::Usage)?;
    if let Command::Screenshot { output, .. } = command {
        let dir = match output.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        if !dir.is_dir() {
            return Err(Failure::Usage(format!(
                "--output {}: directory {} does not exist",
                output.display(),
                dir.display()
            )));
        }
        if output.is_dir() {
            return Err(Failure::Usage(format!(
                "--output {} is a directory; pass a file path",
                output.display()
            )));
        }
    }
    Ok(())
}

/// Resolves on the first SIGINT, SIGTERM or SIGHUP with its number; never
/// when the handlers cannot be installed.
async fn shutdown_signal() -> i32 {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term), Ok(mut hup)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
        signal(SignalKind::hangup()),
    ) else {
        tracing::warn!("cannot install signal handlers");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => 2,
        _ = term.recv() => 15,
        _ = hup.recv() => 1,
    }
}

/// Tools configuration for a page command's `--dialog-policy`.
fn page_config(page: &PageArgs) -> ToolsConfig {
    ToolsConfig::default().dialog_policy(page.dialog_policy.as_str())
}

/// Runs the command. With `--cdp-url`, the connected tools go into `slot`
/// (see [`tabs::release`]).
async fn run(cli: Cli, slot: ToolsSlot) -> Result<(), Failure> {
    check_args(&cli.command)?;
    match cli.command {
        Command::Demo { browser: b, jsonl } => {
            let br = browser(&b).await.map_err(Failure::NoBrowser)?;
            let tools = connect(&br, b.tools_config(ToolsConfig::default(), None), &slot).await?;
            let port = site::serve().await?;
            if demo::play(&tools, port, jsonl).await {
                Ok(())
            } else {
                Err(Failure::Tool)
            }
        }
        Command::Snapshot {
            target,
            timeout_ms,
            page,
            browser: b,
        } => {
            let br = browser(&b).await.map_err(Failure::NoBrowser)?;
            let tools = connect(&br, b.tools_config(page_config(&page), timeout_ms), &slot).await?;
            open(&tools, &target, timeout_ms).await?;
            let mut args = json!({});
            if let Some(t) = timeout_ms {
                args["timeout_ms"] = json!(t);
            }
            let snap = for_cli(tools.call("browser_snapshot", args).await);
            print(&snap);
            if is_error(&snap) {
                return Err(Failure::Tool);
            }
            Ok(())
        }
        Command::Eval {
            target,
            expression,
            timeout_ms,
            metrics,
            page,
            browser: b,
        } => {
            let br = browser(&b).await.map_err(Failure::NoBrowser)?;
            let tools = connect(&br, b.tools_config(page_config(&page), timeout_ms), &slot).await?;
            let nav = open(&tools, &target, timeout_ms).await?;
            if nav["status"] == "dialog_opened" {
                let d = &nav["dialog"];
                print(&json!({"error": {
                    "code": "dialog_pending",
                    "message": format!(
                        "{} dialog {} blocks the page, so the expression was not run: {}",
                        d["type"].as_str().unwrap_or("native"),
                        d["id"].as_str().unwrap_or("?"),
                        d["message"]
                    ),
                    "next_step": CLI_DIALOG_STEP,
                    "dialog": d,
                }}));
                return Err(Failure::Tool);
            }
            let mut args = json!({"expression": expression});
            if let Some(t) = timeout_ms {
                args["timeout_ms"] = json!(t);
            }
            let out = for_cli(tools.call("browser_evaluate", args).await);
            print(&out);
            if metrics {
                print_metrics(&tools);
            }
            if is_error(&out) {
                return Err(Failure::Tool);
            }
            Ok(())
        }
        Command::Screenshot {
            target,
            output,
            full_page,
            page,
            browser: b,
        } => {
            let br = browser(&b).await.map_err(Failure::NoBrowser)?;
            let tools = connect(&br, b.tools_config(page_config(&page), None), &slot).await?;
            open(&tools, &target, None).await?;
            let out = tools
                .call("browser_screenshot", json!({"full_page": full_page}))
                .await;
            if is_error(&out) {
                print(&for_cli(out));
                return Err(Failure::Tool);
            }
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(out["data"].as_str().unwrap_or_default())
                .context("decoding the screenshot")?;
            std::fs::write(&output, &bytes)
                .with_context(|| format!("writing {}", output.display()))?;
            print(
                &json!({"path": output.display().to_string(), "bytes": bytes.len(), "mime_type": out["mime_type"]}),
            );
            Ok(())
        }
        Command::Mcp {
            browser: b,
            dialog_policy,
            dialog_timeout_s,
            bridge,
            no_evaluate,
            max_relaunches,
        } => {
            let config = b.tools_config(
                ToolsConfig::default()
                    .dialog_policy(dialog_policy.as_str())
                    .dialog_timeout(Duration::from_secs(dialog_timeout_s))
                    .bridge(bridge)
                    .evaluate_enabled(!no_evaluate),
                None,
            );
            let br = browser(&b).await.map_err(Failure::NoBrowser)?;
            if br.remote() {
                // Connect in the background and serve at once: `initialize`
                // never waits for the endpoint, and one that is not up yet
                // does not stop the server; tool calls wait for this connect
                // and, while it fails, try again and report browser_closed.
                let (s, endpoint, cfg) = (slot.clone(), br.endpoint.clone(), config.clone());
                tokio::spawn(async move {
                    match tabs::connect_remote(&s, &endpoint, cfg).await {
                        Ok(_) => tracing::info!("connected to --cdp-url"),
                        Err(e) => tracing::warn!(
                            error = %e,
                            "cannot reach --cdp-url; serving anyway, every tool call tries to connect"
                        ),
                    }
                });
            } else {
                let t = Tools::connect(&br.endpoint, config.clone())
                    .await
                    .map_err(|e| Failure::NoBrowser(e.into()))?;
                tabs::put(&slot, Arc::new(t));
            }
            let source = match br.chrome {
                Some(chrome) => mcp::Browser::Launched(mcp::OwnedChrome {
                    chrome,
                    options: launch_options(&b),
                    max_relaunches,
                }),
                None => mcp::Browser::Remote {
                    endpoint: br.endpoint,
                },
            };
            mcp::serve(slot, config, source).await?;
            Ok(())
        }
    }
}

/// Sets up logging to stderr: `RUST_LOG` (default `warn`), ANSI colours
/// only when stderr is a terminal.
fn init_logging() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    init_logging();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("tabwarden: cannot start the async runtime: {e}");
            return ExitCode::from(1);
        }
    };
    let remote = cdp_url(&cli.command).is_some();
    // A signal ends the command as stdin EOF does: the `run` future is
    // dropped inside `block_on`, which drops the tools and the browser, so
    // `LaunchedChrome` kills Chromium and removes its profile. Then, success,
    // error or signal alike, the tabs opened in a `--cdp-url` browser are
    // closed (bounded).
    let slot = tabs::slot();
    let r = rt.block_on(async {
        let r = tokio::select! {
            r = run(cli, slot.clone()) => r,
            sig = shutdown_signal() => Err(Failure::Signal(sig)),
        };
        tabs::release(&slot, remote).await;
        r
    });
    // Stop servers before the runtime goes away; bounded, since a blocking
    // stdin read (mcp) never returns while the client keeps stdin open.
    rt.shutdown_timeout(Duration::from_millis(500));
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Tool) => ExitCode::from(1),
        Err(Failure::Usage(m)) => {
            eprintln!("tabwarden: error: {m}");
            ExitCode::from(2)
        }
        Err(Failure::Signal(n)) => {
            tracing::info!(signal = n, "stopped by a signal");
            ExitCode::from(u8::try_from(128 + n).unwrap_or(1))
        }
        Err(Failure::NoBrowser(e)) => {
            eprintln!("tabwarden: no browser: {}", error_text(&e));
            ExitCode::from(3)
        }
        Err(Failure::Other(e)) => {
            eprintln!("tabwarden: {}", error_text(&e));
            ExitCode::from(1)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(cdp_url: Option<&str>, connect_timeout_ms: Option<u64>) -> BrowserArgs {
        BrowserArgs {
            cdp_url: cdp_url.map(String::from),
            offline: false,
            connect_timeout_ms,
        }
    }

    #[test]
    fn a_launched_chromium_always_gets_the_default_connect_bound() {
        let a = args(None, None);
        assert_eq!(a.connect_timeout(Some(1)), DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(a.connect_timeout(Some(50)), DEFAULT_CONNECT_TIMEOUT);
        assert_eq!(a.connect_timeout(None), DEFAULT_CONNECT_TIMEOUT);
        let a = args(None, Some(100));
        assert_eq!(a.connect_timeout(Some(50)), DEFAULT_CONNECT_TIMEOUT);
    }

    #[test]
    fn cdp_url_connect_bound_is_the_flag_else_timeout_ms_floored_at_5s_else_10s() {
        let a = args(Some("ws://127.0.0.1:9/x"), None);
        assert_eq!(a.connect_timeout(None), Duration::from_secs(10));
        assert_eq!(a.connect_timeout(Some(50)), Duration::from_secs(5));
        assert_eq!(a.connect_timeout(Some(1200)), Duration::from_secs(5));
        assert_eq!(a.connect_timeout(Some(7000)), Duration::from_secs(7));
        assert_eq!(a.connect_timeout(Some(60_000)), Duration::from_secs(60));
        let a = args(Some("ws://127.0.0.1:9/x"), Some(800));
        assert_eq!(a.connect_timeout(Some(60_000)), Duration::from_millis(800));
        assert_eq!(a.connect_timeout(None), Duration::from_millis(800));
    }

    #[test]
    fn page_targets_are_checked_as_urls() {
        for ok in [
            "http://127.0.0.1:1/",
            "https://example.com/a?b#c",
            "data:text/html,<p>x</p>",
            "about:blank",
            "file:///etc/hostname",
            "HTTP://EXAMPLE.COM/",
        ] {
            assert_eq!(to_url(ok).as_deref(), Ok(ok), "{ok}");
        }
        for (bad, needle) in [
            ("http://[::1", "invalid IPv6"),
            ("chrome://version", "scheme \"chrome\""),
            ("ftp://example.com/", "scheme \"ftp\""),
            ("http://", "not a valid URL"),
            ("/nonexistent/x.html", "neither a URL nor a readable file"),
        ] {
            let e = to_url(bad).err().unwrap_or_default();
            assert!(e.contains(needle), "{bad}: {e}");
        }
        // A file path with characters a URL must escape.
        let dir = std::env::temp_dir().join(format!("tw url #{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        let f = dir.join("a b?.html");
        std::fs::write(&f, "<p>x</p>").unwrap_or_else(|e| panic!("{e}"));
        let u = to_url(f.to_str().unwrap_or_default()).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            u.starts_with("file:///")
                && u.contains("%20")
                && u.contains("%23")
                && u.contains("%3F"),
            "{u}"
        );
        let parsed = url::Url::parse(&u).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            parsed.to_file_path().ok().as_deref(),
            std::fs::canonicalize(&f).ok().as_deref()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn cdp_urls_are_checked_and_redacted() {
        for ok in [
            "ws://127.0.0.1:9222/devtools/browser/x",
            "http://127.0.0.1:9222",
            "wss://h.example/?apiKey=s",
        ] {
            assert_eq!(check_cdp_url(ok), Ok(()), "{ok}");
        }
        for bad in [
            "notaurl",
            "ftp://h/",
            "http://[::1",
            "ws://",
            "wss://u:secret@?apiKey=secret",
        ] {
            let e = check_cdp_url(bad).err().unwrap_or_default();
            assert!(e.starts_with("--cdp-url"), "{bad}: {e}");
            assert!(!e.contains("secret"), "{bad}: {e}");
        }
    }

    #[test]
    fn each_cause_is_said_once() {
        #[derive(Debug)]
        struct Inner;
        impl std::fmt::Display for Inner {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("IO error: Connection refused")
            }
        }
        impl std::error::Error for Inner {}
        #[derive(Debug)]
        struct Outer(Inner);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "browser setup failed: {}", self.0)
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let e = anyhow::Error::new(Outer(Inner)).context("launching Chromium");
        assert_eq!(
            error_text(&e),
            "launching Chromium: browser setup failed: IO error: Connection refused"
        );
        assert_eq!(format!("{e:#}").matches("Connection refused").count(), 2);
    }

    #[test]
    fn the_cli_points_at_dialog_policy_not_browser_dialog() {
        let v = for_cli(
            json!({"error": {"code": "dialog_pending", "message": "m", "next_step": "answer it with browser_dialog"}}),
        );
        assert_eq!(v["error"]["next_step"], CLI_DIALOG_STEP);
        let v = for_cli(
            json!({"note": "accessibility text omitted: dialog d-1 blocks the page; answer it with browser_dialog"}),
        );
        let note = v["note"].as_str().unwrap_or_default();
        assert!(
            note.contains("--dialog-policy") && !note.contains("browser_dialog"),
            "{note}"
        );
        let v = for_cli(json!({"error": {"code": "timeout", "next_step": "x"}}));
        assert_eq!(v["error"]["next_step"], "x");
    }
}
