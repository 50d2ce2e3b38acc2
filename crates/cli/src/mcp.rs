//! `tabwarden mcp`: the tools as an MCP server over stdio (rmcp).
//!
//! Two things sit around rmcp's own stdio transport:
//! - a line filter in front of it ([`serve_io`]): a line that is not JSON
//!   gets a JSON-RPC `-32700` parse error reply (`"id": null`, JSON-RPC 2.0
//!   §5.1). rmcp 3.11's `AsyncRwTransport::receive`
//!   (`src/transport/async_rw.rs`) drops such lines without a reply (its
//!   rust-sdk issue #938); every other line reaches rmcp unchanged;
//! - [`Server::on_custom_request`]: a request for a method this server
//!   serves (`tools/call`, `tools/list`, `ping`) whose `params` do not
//!   decode reaches rmcp's handler as a *custom* request, which rmcp answers
//!   `-32601` method not found; it gets `-32602` invalid params instead,
//!   with the decoding error in the message.
//!
//! When tabwarden launched the Chromium itself (no `--cdp-url`) and that
//! Chromium dies, the next tool call starts a new one (at most
//! `--max-relaunches` times) and says so in its result
//! (`browser_relaunched`).

use cdp_transport::{LaunchOptions, LaunchedChrome};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorCode, Implementation, InitializeResult, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::{json, Value};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tool_surface::{Tools, ToolsConfig};

/// A Chromium this server launched itself, and how to launch another.
pub struct OwnedChrome {
    /// The running (or dead) Chromium.
    pub chrome: LaunchedChrome,
    /// Options of the first launch, reused for a relaunch.
    pub options: LaunchOptions,
    /// Relaunches allowed over the server's lifetime (`--max-relaunches`).
    pub max_relaunches: u32,
}

/// [`OwnedChrome`] plus how many relaunches were spent.
struct Relauncher {
    owned: OwnedChrome,
    relaunches: u32,
}

/// The MCP handler: every call goes to [`Tools::call`].
#[derive(Clone)]
pub struct Server {
    /// The tools in use; replaced after a relaunch. The lock is never held
    /// across an `.await`.
    tools: Arc<RwLock<Arc<Tools>>>,
    /// Configuration for a relaunch's [`Tools::connect`].
    config: ToolsConfig,
    /// Present when tabwarden launched the Chromium; a relaunch holds it.
    chrome: Option<Arc<tokio::sync::Mutex<Relauncher>>>,
}

const INSTRUCTIONS: &str = "Browser tools over Chromium that never hang on native dialogs, cross-site iframes or endless scripts. \
Start with browser_navigate, then browser_snapshot (refs like e3 for click/type). \
If a tool returns error code dialog_pending, answer the dialog with browser_dialog. \
Errors are {\"error\": {code, message, next_step}}; follow next_step.";

/// Methods this server serves whose params rmcp decodes; a request for one
/// of them that arrives as a custom request had params that do not decode.
const SERVED_METHODS: [&str; 3] = ["tools/call", "tools/list", "ping"];

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

/// What a relaunch did, for the tool result.
struct Relaunched {
    relaunch: u32,
    max: u32,
    elapsed: Duration,
}

impl Server {
    fn current(&self) -> Arc<Tools> {
        self.tools.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The tools to use for this call. When the Chromium we launched has
    /// exited and relaunches remain, launches a new one and connects to it
    /// first. `Err` is the tool result to return instead (a failed relaunch).
    async fn tools_for_call(&self) -> (Arc<Tools>, Option<Result<Relaunched, Value>>) {
        let Some(chrome) = &self.chrome else {
            return (self.current(), None);
        };
        let mut r = chrome.lock().await;
        if !chrome_exited(&r.owned.chrome) || r.relaunches >= r.owned.max_relaunches {
            return (self.current(), None);
        }
        r.relaunches += 1;
        let (n, max) = (r.relaunches, r.owned.max_relaunches);
        let t0 = Instant::now();
        tracing::warn!(
            relaunch = n,
            max,
            "the Chromium tabwarden launched has exited; starting a new one"
        );
        let launched = match LaunchedChrome::launch(r.owned.options.clone()).await {
            Ok(c) => c,
            Err(e) => {
                return (
                    self.current(),
                    Some(Err(relaunch_failed(
                        n,
                        max,
                        &format!("launching Chromium: {e}"),
                    ))),
                )
            }
        };
        let tools = match Tools::connect(launched.ws_url(), self.config.clone()).await {
            Ok(t) => Arc::new(t),
            Err(e) => {
                return (
                    self.current(),
                    Some(Err(relaunch_failed(n, max, &format!("connecting: {e}")))),
                )
            }
        };
        let old_chrome = std::mem::replace(&mut r.owned.chrome, launched);
        let old_tools = {
            let mut slot = self.tools.write().unwrap_or_else(|p| p.into_inner());
            std::mem::replace(&mut *slot, tools.clone())
        };
        old_tools.connection().close();
        drop(old_tools);
        // Dropping LaunchedChrome kills the (dead) group, waits and removes
        // the profile: blocking work, off the runtime.
        tokio::task::spawn_blocking(move || drop(old_chrome));
        let elapsed = t0.elapsed();
        tracing::info!(
            relaunch = n,
            elapsed_ms = elapsed.as_millis() as u64,
            "Chromium relaunched"
        );
        (
            tools,
            Some(Ok(Relaunched {
                relaunch: n,
                max,
                elapsed,
            })),
        )
    }

    /// For a `browser_closed` result while the Chromium we launched is dead:
    /// tells the agent whether the next call relaunches it.
    async fn annotate_closed(&self, out: &mut Value) {
        let Some(chrome) = &self.chrome else { return };
        if out["error"]["code"] != "browser_closed" {
            return;
        }
        let r = chrome.lock().await;
        if !chrome_exited(&r.owned.chrome) {
            return;
        }
        let step = if r.relaunches < r.owned.max_relaunches {
            format!(
                "the Chromium tabwarden launched has exited; call the tool again and tabwarden starts a new one (relaunch {} of {}); pages, tabs, refs and dialogs of the old one are gone",
                r.relaunches + 1,
                r.owned.max_relaunches
            )
        } else {
            format!(
                "the Chromium tabwarden launched has exited and the {} relaunches allowed (--max-relaunches) are spent: restart tabwarden mcp",
                r.owned.max_relaunches
            )
        };
        out["error"]["next_step"] = Value::from(step);
    }
}

fn relaunch_failed(n: u32, max: u32, why: &str) -> Value {
    json!({"error": {
        "code": "browser_closed",
        "message": format!("the Chromium tabwarden launched has exited and relaunch {n} of {max} failed: {why}"),
        "next_step": "call the tool again to retry the relaunch, or restart tabwarden mcp",
    }})
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
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        let (tools, relaunched) = self.tools_for_call().await;
        let (mut out, relaunched) = match relaunched {
            Some(Err(failed)) => (failed, None),
            Some(Ok(r)) => (tools.call(&request.name, args).await, Some(r)),
            None => (tools.call(&request.name, args).await, None),
        };
        self.annotate_closed(&mut out).await;
        if let (Some(r), Some(obj)) = (relaunched, out.as_object_mut()) {
            obj.insert(
                "browser_relaunched".into(),
                json!({
                    "relaunch": r.relaunch,
                    "max_relaunches": r.max,
                    "elapsed_ms": r.elapsed.as_millis() as u64,
                    "note": "the Chromium tabwarden launched had exited; this call ran on a new headless Chromium (pages, tabs, refs and pending dialogs of the old one are gone)",
                }),
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
                    obj.insert(
                        "note".into(),
                        Value::from("the image is in this result's image content block"),
                    );
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
        if !SERVED_METHODS.contains(&request.method.as_str()) {
            return Err(ErrorData::new(
                ErrorCode::METHOD_NOT_FOUND,
                request.method,
                None,
            ));
        }
        let why = match request.method.as_str() {
            "tools/call" => match request.params_as::<CallToolRequestParams>() {
                Err(e) => e.to_string(),
                Ok(None) => "params are required: {\"name\": …, \"arguments\": {…}}".into(),
                Ok(Some(_)) => "params do not match the method".into(),
            },
            "tools/list" => match request.params_as::<PaginatedRequestParams>() {
                Err(e) => e.to_string(),
                _ => "params do not match the method".into(),
            },
            _ => "params do not match the method".into(),
        };
        Err(ErrorData::invalid_params(
            format!("invalid params for {}: {why}", request.method),
            None,
        ))
    }
}

/// Serves MCP on stdin/stdout until the client closes stdin.
///
/// `owned` is the Chromium tabwarden launched (None with `--cdp-url`): when
/// it dies, the next tool call relaunches it with `owned.options` and
/// connects new [`Tools`] with `config`, at most `owned.max_relaunches` times.
///
/// # Errors
/// When the MCP handshake or transport fails.
///
/// # Cancel safety
/// Cancel safe: dropping it closes the transport; the stdin reader and
/// stdout writer tasks end with the runtime.
pub async fn serve(
    tools: Tools,
    config: ToolsConfig,
    owned: Option<OwnedChrome>,
) -> anyhow::Result<()> {
    let server = Server {
        tools: Arc::new(RwLock::new(Arc::new(tools))),
        config,
        chrome: owned.map(|owned| {
            Arc::new(tokio::sync::Mutex::new(Relauncher {
                owned,
                relaunches: 0,
            }))
        }),
    };
    serve_io(server, tokio::io::stdin(), tokio::io::stdout()).await
}

/// The JSON-RPC parse error reply for a line that is not JSON.
fn parse_error_line(why: &str) -> Vec<u8> {
    let message = Value::from(format!("Parse error: {why}"));
    format!(r#"{{"jsonrpc":"2.0","id":null,"error":{{"code":-32700,"message":{message}}}}}"#)
        .into_bytes()
        .into_iter()
        .chain(std::iter::once(b'\n'))
        .collect()
}

/// Whether a line is not JSON at all (as opposed to JSON of the wrong
/// shape, which rmcp answers `-32600` itself); `Some(reason)` when not.
fn not_json(line: &[u8]) -> Option<String> {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return None;
    }
    match serde_json::from_slice::<serde::de::IgnoredAny>(line) {
        Ok(_) => None,
        Err(e) if e.is_syntax() || e.is_eof() => Some(e.to_string()),
        Err(_) => None,
    }
}

/// Runs `server` over `input`/`output` (stdin/stdout in production) with
/// rmcp's stdio transport behind a line filter: lines that are JSON go to
/// rmcp unchanged; a line that is not JSON, or longer than [`MAX_LINE`],
/// gets a `-32700` reply. One writer task owns `output`, so rmcp's replies
/// and the parse errors never interleave within a line.
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

    // stdin → rmcp, with parse errors answered here.
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
                let why = format!("the line is longer than {MAX_LINE} bytes");
                if errors_tx.send(parse_error_line(&why)).await.is_err() {
                    break;
                }
                continue;
            }
            if let Some(why) = not_json(&line) {
                tracing::debug!(%why, "a line on stdin is not JSON; answering -32700");
                if errors_tx.send(parse_error_line(&why)).await.is_err() {
                    break;
                }
                continue;
            }
            if !line.ends_with(b"\n") {
                line.push(b'\n');
            }
            if feed.write_all(&line).await.is_err() {
                break;
            }
        }
        // EOF (or a dead rmcp): rmcp sees EOF and ends the session.
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

    let running = server.serve((rmcp_in, rmcp_out_w)).await?;
    let reason = running.waiting().await?;
    tracing::info!(?reason, "MCP client closed the session");
    reader.abort();
    // rmcp dropped its end of the pipe: the writer drains what is left.
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    Ok(())
}
