//! `tabwarden mcp`: the tools as an MCP server over stdio (rmcp).
//!
//! Around rmcp's own stdio transport:
//! - a line filter in front of it ([`serve_io`], checks in
//!   [`crate::jsonrpc`]): a line that is not JSON gets `-32700`; JSON that is
//!   not a JSON-RPC 2.0 request rmcp can decode gets `-32600`/`-32602`
//!   carrying the request's `id` (rmcp 3.11 would drop the first silently and
//!   answer the second without an id); a batch gets one `-32600` per request;
//! - [`Server::on_custom_request`]: a request for a method this server
//!   serves whose `params` do not decode reaches rmcp's handler as a
//!   *custom* request, which rmcp answers `-32601`; it gets `-32602` instead
//!   (the filter already answers these; this is the second line of defence).
//!
//! When tabwarden launched the Chromium itself (no `--cdp-url`) and that
//! Chromium dies, the next tool call starts a new one (at most
//! `--max-relaunches` times) and says so in its result
//! (`browser_relaunched`); a dead Chromium that is not relaunched is reaped
//! within [`REAP_EVERY`] (no zombie until the server exits). With
//! `--cdp-url`, an endpoint that cannot be reached when the server starts
//! does not stop it: `initialize` is answered and each tool call tries to
//! connect again, returning `browser_closed` with a `next_step` while it
//! fails.
//!
//! stdin EOF ends the session at once: tool calls still running are stopped
//! (their futures dropped; they answer `internal` "stopped") instead of
//! rmcp's 5 s drain, and a `notifications/cancelled` stops its call the same
//! way.

use crate::jsonrpc::{self, Verdict};
use crate::tabs::{self, ToolsSlot};
use cdp_transport::{CancellationToken, LaunchOptions, LaunchedChrome};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, Implementation, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tool_surface::{ErrorCode as ToolCode, ToolError, Tools, ToolsConfig};

/// A Chromium this server launched itself, and how to launch another.
pub struct OwnedChrome {
    /// The running (or dead) Chromium.
    pub chrome: LaunchedChrome,
    /// Options of the first launch, reused for a relaunch.
    pub options: LaunchOptions,
    /// Relaunches allowed over the server's lifetime (`--max-relaunches`).
    pub max_relaunches: u32,
}

/// The Chromium tabwarden launched and how many relaunches were spent.
struct Relauncher {
    /// `None` once a dead Chromium was reaped (dropped: group killed, main
    /// process waited for, profile removed) and not yet replaced.
    chrome: Option<LaunchedChrome>,
    options: LaunchOptions,
    max_relaunches: u32,
    relaunches: u32,
}

/// A `--cdp-url` browser: where it is.
struct Remote {
    endpoint: String,
}

/// How often a background task looks for a dead launched Chromium to reap.
pub const REAP_EVERY: Duration = Duration::from_secs(1);

/// The MCP handler: every call goes to [`Tools::call`].
#[derive(Clone)]
pub struct Server {
    /// The tools in use: replaced after a relaunch, filled by a late connect
    /// to `--cdp-url`; `None` until that connect succeeds.
    tools: ToolsSlot,
    /// Configuration for a relaunch's (or late connect's) [`Tools::connect`].
    config: ToolsConfig,
    /// Present when tabwarden launched the Chromium; a relaunch holds it.
    chrome: Option<Arc<tokio::sync::Mutex<Relauncher>>>,
    /// Present with `--cdp-url`.
    remote: Option<Arc<Remote>>,
    /// Cancelled on stdin EOF: running tool calls stop.
    stop: CancellationToken,
}

const INSTRUCTIONS: &str = "Browser tools over Chromium that never hang on native dialogs, cross-site iframes or endless scripts. \
Start with browser_navigate, then browser_snapshot (refs like e3 for click/type). \
If a tool returns error code dialog_pending, answer the dialog with browser_dialog. \
Errors are {\"error\": {code, message, next_step}}; follow next_step.";

/// Largest line accepted on stdin, as rmcp's own cap
/// (`rmcp::transport::async_rw::DEFAULT_MAX_LINE_LENGTH`); a longer line is
/// answered `-32700` and discarded.
const MAX_LINE: usize = 16 * 1024 * 1024;

fn tool_list() -> Vec<Tool> {
    Tools::list()
        .into_iter()
        .map(|t| {
            let schema = match t.input_schema {
                Value::Object(o) => o,
                _ => Default::default(),
            };
            Tool::new(t.name, t.description, Arc::new(schema))
        })
        .collect()
}

/// True when process `pid` has exited (gone, or a zombie not yet reaped):
/// Linux `/proc/<pid>/stat`, state field after the command name.
fn process_exited(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return true;
    };
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next())
        .unwrap_or("");
    matches!(state, "Z" | "X" | "x")
}

fn chrome_exited(c: &LaunchedChrome) -> bool {
    c.pid().is_none_or(process_exited)
}

impl Relauncher {
    /// True when there is no live Chromium (it exited, or was reaped).
    fn exited(&self) -> bool {
        self.chrome.as_ref().is_none_or(chrome_exited)
    }

    /// Drops a dead Chromium on the blocking pool (its `Drop` kills the
    /// group, waits for the main process and removes the profile), so it is
    /// no zombie while the server runs on.
    fn reap(&mut self) {
        if let Some(dead) = self.chrome.take() {
            tracing::info!(pid = dead.pid(), "reaping the exited Chromium");
            tokio::task::spawn_blocking(move || drop(dead));
        }
    }
}

/// Every [`REAP_EVERY`], reaps the launched Chromium if it exited; ends when
/// the server is gone.
fn spawn_reaper(chrome: Weak<tokio::sync::Mutex<Relauncher>>) {
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(REAP_EVERY).await;
            let Some(c) = chrome.upgrade() else { return };
            let mut r = c.lock().await;
            if r.chrome.is_some() && r.exited() {
                r.reap();
            }
        }
    });
}

/// What a relaunch did, for the tool result.
struct Relaunched {
    relaunch: u32,
    max: u32,
    elapsed: Duration,
}

impl Server {
    fn current(&self) -> Option<Arc<Tools>> {
        tabs::current(&self.tools)
    }

    /// The tools to use for this call, with what a relaunch did. With
    /// `--cdp-url` and no connection yet, connects first. When the Chromium
    /// we launched has exited and relaunches remain, launches a new one and
    /// connects to it first. `Err` is the tool result to return instead (a
    /// failed connect or relaunch).
    async fn tools_for_call(&self) -> Result<(Arc<Tools>, Option<Relaunched>), Value> {
        if let Some(remote) = &self.remote {
            return self.remote_tools(remote).await.map(|t| (t, None));
        }
        let no_tools = || ToolError::browser_closed("no browser is connected").to_json();
        let Some(chrome) = &self.chrome else {
            return self.current().map(|t| (t, None)).ok_or_else(no_tools);
        };
        let mut r = chrome.lock().await;
        if !r.exited() {
            return self.current().map(|t| (t, None)).ok_or_else(no_tools);
        }
        if r.relaunches >= r.max_relaunches {
            r.reap();
            return self.current().map(|t| (t, None)).ok_or_else(no_tools);
        }
        r.reap();
        r.relaunches += 1;
        let (n, max) = (r.relaunches, r.max_relaunches);
        let t0 = Instant::now();
        tracing::warn!(
            relaunch = n,
            max,
            "the Chromium tabwarden launched has exited; starting a new one"
        );
        let launched = LaunchedChrome::launch(r.options.clone())
            .await
            .map_err(|e| relaunch_failed(n, max, &format!("launching Chromium: {e}")))?;
        let tools = match Tools::connect(launched.ws_url(), self.config.clone()).await {
            Ok(t) => Arc::new(t),
            Err(e) => {
                tokio::task::spawn_blocking(move || drop(launched));
                return Err(relaunch_failed(n, max, &format!("connecting: {e}")));
            }
        };
        r.chrome = Some(launched);
        if let Some(old) = tabs::put(&self.tools, tools.clone()) {
            old.connection().close();
        }
        let elapsed = t0.elapsed();
        tracing::info!(
            relaunch = n,
            elapsed_ms = elapsed.as_millis() as u64,
            "Chromium relaunched"
        );
        Ok((
            tools,
            Some(Relaunched {
                relaunch: n,
                max,
                elapsed,
            }),
        ))
    }

    /// The `--cdp-url` browser's tools, connecting first when the server has
    /// none yet (the endpoint could not be reached at start or at an earlier
    /// call). One connect at a time ([`tabs::connect_remote`]).
    async fn remote_tools(&self, remote: &Remote) -> Result<Arc<Tools>, Value> {
        if let Some(t) = self.current() {
            return Ok(t);
        }
        match tabs::connect_remote(&self.tools, &remote.endpoint, self.config.clone()).await {
            Ok(t) => {
                tracing::info!("connected to --cdp-url");
                Ok(t)
            }
            Err(e) => Err(unreachable_remote(&e)),
        }
    }

    /// For a `browser_closed` result while the Chromium we launched is dead:
    /// tells the agent whether the next call relaunches it.
    async fn annotate_closed(&self, out: &mut Value) {
        let Some(chrome) = &self.chrome else { return };
        if out["error"]["code"] != "browser_closed" {
            return;
        }
        let r = chrome.lock().await;
        if !r.exited() {
            return;
        }
        let step = if r.relaunches < r.max_relaunches {
            format!(
                "the Chromium tabwarden launched has exited; call the tool again and tabwarden starts a new one (relaunch {} of {}); pages, tabs, refs and dialogs of the old one are gone",
                r.relaunches + 1,
                r.max_relaunches
            )
        } else {
            format!(
                "the Chromium tabwarden launched has exited and the {} relaunches allowed (--max-relaunches) are spent: restart tabwarden mcp",
                r.max_relaunches
            )
        };
        out["error"]["next_step"] = Value::from(step);
    }
}

/// The tool result while the `--cdp-url` endpoint cannot be reached.
fn unreachable_remote(e: &str) -> Value {
    ToolError::new(
        ToolCode::BrowserClosed,
        format!("cannot reach the browser given by --cdp-url: {e}"),
    )
    .next("start that browser (or fix --cdp-url / TABWARDEN_CDP_URL and restart tabwarden mcp); every tool call tries to connect again")
    .to_json()
}

fn relaunch_failed(n: u32, max: u32, why: &str) -> Value {
    ToolError::relaunch_failed(n, max, why).to_json()
}

impl Server {
    /// One tool call on the current (connected, relaunched) tools.
    async fn run_call(&self, name: &str, args: Value) -> (Value, Option<Relaunched>) {
        match self.tools_for_call().await {
            Err(failed) => (failed, None),
            Ok((tools, relaunched)) => {
                let mut out = tools.call(name, args).await;
                self.annotate_closed(&mut out).await;
                (out, relaunched)
            }
        }
    }
}

/// The result of a tool call stopped before it finished.
fn stopped(why: &str) -> Value {
    ToolError::internal(format!("the call was stopped: {why}"))
        .next("call the tool again if it is still needed")
        .to_json()
}

impl ServerHandler for Server {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("tabwarden", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "{INSTRUCTIONS} (schema_version {})",
                tool_surface::SCHEMA_VERSION
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult {
            tools: tool_list(),
            ..Default::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        // Tools::call is cancel safe: a stopped call leaves no state behind
        // in the tools (the browser may still run what was sent).
        let (mut out, relaunched) = tokio::select! {
            r = self.run_call(&request.name, args) => r,
            _ = context.ct.cancelled() => (stopped("the client cancelled it (notifications/cancelled)"), None),
            _ = self.stop.cancelled() => (stopped("the MCP client closed stdin"), None),
        };
        if let (Some(r), Some(obj)) = (relaunched, out.as_object_mut()) {
            let record = tool_surface::types::BrowserRelaunched::new(r.relaunch, r.max, r.elapsed);
            obj.insert(
                "browser_relaunched".into(),
                serde_json::to_value(record).unwrap_or(Value::Null),
            );
        }
        let is_error = out.get("error").is_some();
        // A screenshot's base64 goes once, in the image block; the text and
        // structuredContent keep the rest of the response without `data`.
        let mut image = None;
        if request.name == "browser_screenshot" && !is_error {
            if let Some(obj) = out.as_object_mut() {
                if let (Some(Value::String(data)), Some(mime)) = (
                    obj.remove("data"),
                    obj.get("mime_type")
                        .and_then(Value::as_str)
                        .map(String::from),
                ) {
                    obj.insert("bytes_base64".into(), Value::from(data.len()));
                    // A note of the screenshot itself (a script stopped, a
                    // page cut at the capture limit) is kept before it.
                    let here = "the image is in this result's image content block";
                    let note = match obj.get("note").and_then(Value::as_str) {
                        Some(n) => format!("{n}; {here}"),
                        None => here.into(),
                    };
                    obj.insert("note".into(), Value::from(note));
                    image = Some(ContentBlock::image(data, mime));
                }
            }
        }
        let text = serde_json::to_string(&out).unwrap_or_else(|_| "{}".into());
        let mut content = vec![ContentBlock::text(text)];
        content.extend(image);
        let mut result = if is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        };
        result.structured_content = Some(out);
        Ok(result.into())
    }

    /// rmcp hands a request whose `params` do not decode for its method to
    /// this hook as a custom request; for a method we serve that is `-32602`
    /// invalid params (JSON-RPC 2.0 §5.1), not `-32601`.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        if !jsonrpc::SERVED_METHODS.contains(&request.method.as_str()) {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                request.method,
                None,
            ));
        }
        Err(ErrorData::invalid_params(
            jsonrpc::invalid_params_message(&request.method, request.params.as_ref()),
            None,
        ))
    }
}

/// Where `tabwarden mcp` gets its browser.
pub enum Browser {
    /// A Chromium tabwarden launched (connected in `slot`): when it dies,
    /// the next tool call relaunches it with `options` and connects new
    /// [`Tools`], at most `max_relaunches` times.
    Launched(OwnedChrome),
    /// `--cdp-url`: `slot` holds its tools once connected; while it is
    /// empty, each tool call tries to connect.
    Remote {
        /// The endpoint as given.
        endpoint: String,
    },
}

/// Serves MCP on stdin/stdout until the client closes stdin.
///
/// `slot` holds the connected tools (filled beforehand, or later for a
/// [`Browser::Remote`] that could not be reached yet); the caller keeps it to
/// close the tabs of a remote browser afterwards ([`tabs::release`]).
///
/// # Errors
/// When the MCP handshake or transport fails.
///
/// # Cancel safety
/// Cancel safe: dropping it closes the transport; the stdin reader and
/// stdout writer tasks end with the runtime.
pub async fn serve(slot: ToolsSlot, config: ToolsConfig, browser: Browser) -> anyhow::Result<()> {
    let (chrome, remote) = match browser {
        Browser::Launched(owned) => {
            let r = Arc::new(tokio::sync::Mutex::new(Relauncher {
                chrome: Some(owned.chrome),
                options: owned.options,
                max_relaunches: owned.max_relaunches,
                relaunches: 0,
            }));
            spawn_reaper(Arc::downgrade(&r));
            (Some(r), None)
        }
        Browser::Remote { endpoint } => (None, Some(Arc::new(Remote { endpoint }))),
    };
    let server = Server {
        tools: slot,
        config,
        chrome,
        remote,
        stop: CancellationToken::new(),
    };
    serve_io(server, tokio::io::stdin(), tokio::io::stdout()).await
}

/// `reply` as one line of JSON, an error object's members in the usual
/// order (`jsonrpc`, `id`, `error`; `serde_json` would sort them).
fn reply_line(reply: &Value) -> Vec<u8> {
    fn encode(v: &Value) -> String {
        match v {
            Value::Array(items) => {
                let inner: Vec<String> = items.iter().map(encode).collect();
                format!("[{}]", inner.join(","))
            }
            Value::Object(o) if o.len() == 3 && o.contains_key("error") => format!(
                r#"{{"jsonrpc":"2.0","id":{},"error":{}}}"#,
                o.get("id").unwrap_or(&Value::Null),
                o.get("error").unwrap_or(&Value::Null)
            ),
            other => other.to_string(),
        }
    }
    let mut line = encode(reply).into_bytes();
    line.push(b'\n');
    line
}

/// Runs `server` over `input`/`output` (stdin/stdout in production) with
/// rmcp's stdio transport behind a line filter ([`jsonrpc::classify`]):
/// lines rmcp can decode go to it unchanged; a line that is not JSON, or
/// longer than [`MAX_LINE`], gets `-32700`; other JSON that is no valid
/// request gets `-32600`/`-32602` with its id. One writer task owns
/// `output`, so rmcp's replies and the filter's never interleave within a
/// line. On input EOF the server's running tool calls are stopped
/// (`Server::stop`), then rmcp sees EOF.
///
/// # Errors
/// When the MCP handshake or transport fails.
pub async fn serve_io<R, W>(server: Server, input: R, output: W) -> anyhow::Result<()>
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (rmcp_in, mut feed) = tokio::io::duplex(64 * 1024);
    let (rmcp_out_w, rmcp_out_r) = tokio::io::duplex(64 * 1024);
    let (errors_tx, mut errors_rx) = mpsc::channel::<Vec<u8>>(64);
    let stop = server.stop.clone();

    // stdin → rmcp, with what rmcp would mishandle answered here.
    let reader = tokio::spawn(async move {
        let mut input = BufReader::new(input);
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = match (&mut input)
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut line)
                .await
            {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(error = %e, "reading stdin failed");
                    break;
                }
            };
            if n == 0 {
                break;
            }
            if line.len() > MAX_LINE {
                // Discard the rest of the line, then answer it.
                if !line.ends_with(b"\n") {
                    let mut rest = Vec::new();
                    loop {
                        rest.clear();
                        match (&mut input)
                            .take(MAX_LINE as u64)
                            .read_until(b'\n', &mut rest)
                            .await
                        {
                            Ok(0) | Err(_) => break,
                            Ok(_) if rest.ends_with(b"\n") => break,
                            Ok(_) => {}
                        }
                    }
                }
                let why = format!("Parse error: the line is longer than {MAX_LINE} bytes");
                let reply = jsonrpc::error(Value::Null, jsonrpc::PARSE_ERROR, why);
                if errors_tx.send(reply_line(&reply)).await.is_err() {
                    break;
                }
                continue;
            }
            match jsonrpc::classify(&line) {
                Verdict::Forward => {}
                Verdict::Reply(reply) => {
                    tracing::debug!(%reply, "answering a line rmcp would mishandle");
                    if errors_tx.send(reply_line(&reply)).await.is_err() {
                        break;
                    }
                    continue;
                }
                Verdict::Drop(why) => {
                    tracing::debug!(%why, "ignoring a line on stdin");
                    continue;
                }
            }
            if !line.ends_with(b"\n") {
                line.push(b'\n');
            }
            if feed.write_all(&line).await.is_err() {
                break;
            }
        }
        // EOF (or a dead rmcp): running calls stop, then rmcp sees EOF and
        // ends the session (its drain then finds nothing left running).
        stop.cancel();
        let _ = feed.shutdown().await;
    });

    // rmcp's replies and our parse errors → stdout, whole lines only.
    let writer = tokio::spawn(async move {
        let mut output = output;
        let mut from_rmcp = BufReader::new(rmcp_out_r);
        let mut line = Vec::new();
        let mut rmcp_open = true;
        let mut errors_open = true;
        while rmcp_open || errors_open {
            tokio::select! {
                r = from_rmcp.read_until(b'\n', &mut line), if rmcp_open => {
                    match r {
                        Ok(0) | Err(_) => rmcp_open = false,
                        Ok(_) => {
                            if output.write_all(&line).await.is_err() || output.flush().await.is_err() {
                                return;
                            }
                            line.clear();
                        }
                    }
                }
                e = errors_rx.recv(), if errors_open => {
                    match e {
                        None => errors_open = false,
                        Some(l) => {
                            if output.write_all(&l).await.is_err() || output.flush().await.is_err() {
                                return;
                            }
                        }
                    }
                }
            }
        }
    });

    let running = match server.serve((rmcp_in, rmcp_out_w)).await {
        Ok(r) => r,
        // stdin closed before any initialize: no session to serve.
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => {
            tracing::info!("stdin closed before initialize");
            reader.abort();
            let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let reason = running.waiting().await?;
    tracing::info!(?reason, "MCP client closed the session");
    reader.abort();
    // rmcp dropped its end of the pipe: the writer drains what is left.
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    Ok(())
}
