//! `tabwarden`: drive Chromium over CDP from an AI agent without hanging.
//!
//! Commands: `demo`, `snapshot`, `eval`, `screenshot`, `mcp`. Results go to
//! stdout, logs to stderr (`RUST_LOG`, default `warn`); `eval --metrics`
//! also prints the engine's metrics to stderr as one JSON line
//! `{"metrics": {…}}`.
//!
//! Exit codes: 0 success; 1 the tool reported an error (its JSON is printed)
//! or a demo expectation failed; 2 bad command line; 3 no browser (Chromium
//! could not be started or `--cdp-url` could not be reached); 128 + the
//! signal number after SIGHUP (129), SIGINT (130) or SIGTERM (143): the
//! command is stopped as on stdin EOF (the launched Chromium is killed and
//! its profile removed) before exiting. Arguments (`--timeout-ms` range, the
//! target file, the screenshot's output directory) are checked before
//! Chromium is launched (exit 2).
//!
//! Reaching `--cdp-url` (`/json/version` discovery plus the WebSocket
//! handshake) is bounded by `--connect-timeout-ms`, else by the command's
//! `--timeout-ms` when given, else 10 s; past it the command exits 3 with
//! `connecting to … timed out after …`. Opening the tab afterwards has
//! tool-surface's own 20 s bound.

mod demo;
mod mcp;
mod site;

use anyhow::Context;
use cdp_transport::{LaunchOptions, LaunchedChrome};
use clap::{Args, Parser, Subcommand, ValueEnum};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
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
    /// discovery plus the WebSocket handshake. Default: `--timeout-ms` when
    /// the command has one and it is given, else 10000.
    #[arg(long, env = "TABWARDEN_CONNECT_TIMEOUT_MS", global = true,
          value_parser = clap::value_parser!(u64).range(1..=120_000))]
    connect_timeout_ms: Option<u64>,
}

/// Connect bound when neither `--connect-timeout-ms` nor `--timeout-ms` is given.
const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl BrowserArgs {
    /// The bound on discovery + handshake: `--connect-timeout-ms`, else the
    /// command's `--timeout-ms`, else [`DEFAULT_CONNECT_TIMEOUT`].
    fn connect_timeout(&self, timeout_ms: Option<u64>) -> Duration {
        self.connect_timeout_ms
            .or(timeout_ms)
            .map(Duration::from_millis)
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
        /// URL, or path of an HTML file.
        target: String,
        /// Budget per call in ms (1..=120000).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..=120_000))]
        timeout_ms: Option<u64>,
        #[command(flatten)]
        browser: BrowserArgs,
    },
    /// Evaluate a JavaScript expression on a page (URL or file path) and print the result as JSON.
    Eval {
        /// URL, or path of an HTML file.
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
        browser: BrowserArgs,
    },
    /// Save a PNG screenshot of a page.
    Screenshot {
        /// URL, or path of an HTML file.
        target: String,
        /// Output file.
        #[arg(short, long)]
        output: PathBuf,
        /// Capture the whole page, not only the viewport.
        #[arg(long)]
        full_page: bool,
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
        /// Refuse browser_evaluate and script-running browser_cdp methods.
        #[arg(long)]
        no_evaluate: bool,
        /// When the Chromium that tabwarden launched itself (no `--cdp-url`)
        /// has died, the next tool call starts a new one, at most this many
        /// times per server (0: never; the call then returns browser_closed).
        #[arg(long, default_value_t = 3)]
        max_relaunches: u32,
    },
}

/// `mcp --dialog-policy`.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
#[value(rename_all = "snake_case")]
enum DialogPolicy {
    /// Tools return dialog_pending until the agent answers with browser_dialog.
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

/// A URL as given, or an existing file path as a `file://` URL.
fn to_url(target: &str) -> anyhow::Result<String> {
    let p = Path::new(target);
    if !target.contains("://") && !target.starts_with("data:") && !target.starts_with("about:") {
        let abs = std::fs::canonicalize(p)
            .with_context(|| format!("{target} is neither a URL nor a readable file"))?;
        return Ok(format!("file://{}", abs.display()));
    }
    Ok(target.to_string())
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

/// [`Tools`] that close their connection on drop, before the browser goes away.
struct Connected(Tools);

impl std::ops::Deref for Connected {
    type Target = Tools;
    fn deref(&self) -> &Tools {
        &self.0
    }
}

impl Drop for Connected {
    fn drop(&mut self) {
        self.0.connection().close();
    }
}

async fn connect(b: &Browser, config: ToolsConfig) -> Result<Connected, Failure> {
    Tools::connect(&b.endpoint, config)
        .await
        .map(Connected)
        .map_err(|e| Failure::NoBrowser(e.into()))
}

/// Navigates; a page blocked by a dialog is not a failure for snapshot/eval (the dialog is in the output).
async fn open(tools: &Tools, target: &str, timeout_ms: Option<u64>) -> Result<Value, Failure> {
    let url = to_url(target)?;
    let mut args = json!({"url": url});
    if let Some(t) = timeout_ms {
        args["timeout_ms"] = json!(t);
    }
    let nav = tools.call("browser_navigate", args).await;
    if is_error(&nav) {
        print(&nav);
        return Err(Failure::Tool);
    }
    Ok(nav)
}

/// Checks what clap cannot before Chromium is launched: the target is a URL
/// or a readable file; the screenshot's output directory exists.
fn check_args(command: &Command) -> Result<(), Failure> {
    let target = match command {
        Command::Snapshot { target, .. }
        | Command::Eval { target, .. }
        | Command::Screenshot { target, .. } => target,
        _ => return Ok(()),
    };
    to_url(target).map_err(|e| Failure::Usage(format!("{e:#}")))?;
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

async fn run(cli: Cli) -> Result<(), Failure> {
    check_args(&cli.command)?;
    match cli.command {
        Command::Demo { browser: b, jsonl } => {
            let br = browser(&b).await.map_err(Failure::NoBrowser)?;
            let tools = connect(&br, b.tools_config(ToolsConfig::default(), None)).await?;
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
            browser: b,
        } => {
            let br = browser(&b).await.map_err(Failure::NoBrowser)?;
            let tools = connect(&br, b.tools_config(ToolsConfig::default(), timeout_ms)).await?;
            open(&tools, &target, timeout_ms).await?;
            let mut args = json!({});
            if let Some(t) = timeout_ms {
                args["timeout_ms"] = json!(t);
            }
            let snap = tools.call("browser_snapshot", args).await;
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
            browser: b,
        } => {
            let br = browser(&b).await.map_err(Failure::NoBrowser)?;
            let tools = connect(&br, b.tools_config(ToolsConfig::default(), timeout_ms)).await?;
            let nav = open(&tools, &target, timeout_ms).await?;
            if nav["status"] == "dialog_opened" {
                print(
                    &json!({"error": {"code": "dialog_pending", "message": "a dialog blocks the page", "dialog": nav["dialog"]}}),
                );
                return Err(Failure::Tool);
            }
            let mut args = json!({"expression": expression});
            if let Some(t) = timeout_ms {
                args["timeout_ms"] = json!(t);
            }
            let out = tools.call("browser_evaluate", args).await;
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
            browser: b,
        } => {
            let br = browser(&b).await.map_err(Failure::NoBrowser)?;
            let tools = connect(&br, b.tools_config(ToolsConfig::default(), None)).await?;
            open(&tools, &target, None).await?;
            let out = tools
                .call("browser_screenshot", json!({"full_page": full_page}))
                .await;
            if is_error(&out) {
                print(&out);
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
            let tools = Tools::connect(&br.endpoint, config.clone())
                .await
                .map_err(|e| Failure::NoBrowser(e.into()))?;
            let owned = br.chrome.map(|chrome| mcp::OwnedChrome {
                chrome,
                options: launch_options(&b),
                max_relaunches,
            });
            mcp::serve(tools, config, owned).await?;
            Ok(())
        }
    }
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
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .init();
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
    // A signal ends the command as stdin EOF does: the `run` future is
    // dropped inside `block_on`, which drops the tools and the browser, so
    // `LaunchedChrome` kills Chromium and removes its profile.
    let r = rt.block_on(async {
        tokio::select! {
            r = run(cli) => r,
            sig = shutdown_signal() => Err(Failure::Signal(sig)),
        }
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
            eprintln!("tabwarden: no browser: {e:#}");
            ExitCode::from(3)
        }
        Err(Failure::Other(e)) => {
            eprintln!("tabwarden: {e:#}");
            ExitCode::from(1)
        }
    }
}
