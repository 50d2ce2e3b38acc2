//! The connection: one socket task, a routing table, cheap handles.

use crate::budget::Budget;
use crate::endpoint::{redact, Endpoint};
use crate::error::{Error, Result, SessionCloseReason};
use crate::event::{Event, EventStream};
use crate::ids::{SessionId, TargetId};
use chromiumoxide_types::Command;
use futures_util::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc, oneshot, watch};
use tokio_tungstenite::tungstenite::{self, protocol::WebSocketConfig, Message};
use tracing::{debug, warn, Instrument};

/// Close reason when [`Connection::close`] was called.
const CLOSED_BY_CLIENT: &str = "closed by client";
/// Close reason when the last handle was dropped.
const ALL_HANDLES_DROPPED: &str = "all handles dropped";

/// Default single-message size limit: 256 MiB.
pub const DEFAULT_MAX_MESSAGE_SIZE: usize = 256 * 1024 * 1024;

/// Options for [`Connection::connect`]. Every field has a documented default.
///
/// `Debug` shows header names only: values (often credentials) print as `***`.
#[derive(Clone)]
#[non_exhaustive]
pub struct ConnectOptions {
    /// Upper bound on discovery plus handshake. Default 10 s.
    pub connect_timeout: Duration,
    /// Extra HTTP headers for the handshake and `/json/version` (hosted browsers
    /// that authenticate by header). Values are never logged. Default none.
    pub headers: Vec<(String, String)>,
    /// Largest single message accepted, bytes. Default 256 MiB.
    pub max_message_size: usize,
    /// Events buffered per subscription before it lags. Default 4096.
    pub event_capacity: usize,
    /// Outgoing messages queued before callers wait. Default 1024.
    pub outgoing_capacity: usize,
    /// Root certificates (DER) trusted for `wss://` and `https://` endpoints in
    /// addition to the built-in webpki roots (Mozilla's list): a private CA, or
    /// a self-signed certificate in tests. Default none.
    pub extra_root_certificates: Vec<Vec<u8>>,
}

impl std::fmt::Debug for ConnectOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let headers: Vec<String> = self
            .headers
            .iter()
            .map(|(k, _)| format!("{k}: ***"))
            .collect();
        f.debug_struct("ConnectOptions")
            .field("connect_timeout", &self.connect_timeout)
            .field("headers", &headers)
            .field("max_message_size", &self.max_message_size)
            .field("event_capacity", &self.event_capacity)
            .field("outgoing_capacity", &self.outgoing_capacity)
            .field(
                "extra_root_certificates",
                &format_args!("[{} DER certificates]", self.extra_root_certificates.len()),
            )
            .finish()
    }
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            headers: Vec::new(),
            max_message_size: DEFAULT_MAX_MESSAGE_SIZE,
            event_capacity: 4096,
            outgoing_capacity: 1024,
            extra_root_certificates: Vec::new(),
        }
    }
}

impl ConnectOptions {
    /// Sets [`ConnectOptions::connect_timeout`].
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = d;
        self
    }
    /// Adds a handshake header.
    pub fn header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
    /// Sets [`ConnectOptions::max_message_size`].
    pub fn max_message_size(mut self, bytes: usize) -> Self {
        self.max_message_size = bytes;
        self
    }
    /// Sets [`ConnectOptions::event_capacity`].
    pub fn event_capacity(mut self, n: usize) -> Self {
        self.event_capacity = n.max(1);
        self
    }
    /// Adds root certificates (DER) to [`ConnectOptions::extra_root_certificates`].
    ///
    /// A certificate that does not parse fails [`Connection::connect`] to a
    /// `wss://` or `https://` endpoint with [`Error::Connect`] naming its index;
    /// `ws://` and `http://` endpoints ignore these.
    pub fn extra_root_certificates(mut self, ders: Vec<Vec<u8>>) -> Self {
        self.extra_root_certificates.extend(ders);
        self
    }
}

/// A target attached with `flatten: true`, announced by `Target.attachedToTarget`.
#[derive(Debug, Clone)]
pub struct AttachedTarget {
    /// The new session.
    pub session: Session,
    /// `targetInfo` as sent (raw JSON: `targetId`, `type`, `url`, `openerId`, ...).
    pub target_info: Value,
    /// The session on which the event arrived (`None`: browser session).
    pub parent_session_id: Option<SessionId>,
    /// True when the target is paused until `Runtime.runIfWaitingForDebugger`.
    pub waiting_for_debugger: bool,
}

impl AttachedTarget {
    /// `targetInfo.type` (`page`, `iframe`, `worker`, `service_worker`, ...).
    pub fn target_type(&self) -> &str {
        self.target_info
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
    /// `targetInfo.targetId`.
    pub fn target_id(&self) -> TargetId {
        TargetId::new(
            self.target_info
                .get("targetId")
                .and_then(Value::as_str)
                .unwrap_or(""),
        )
    }
}

struct Pending {
    method: String,
    session: Option<SessionId>,
    tx: oneshot::Sender<Result<Value>>,
}

struct SessionEntry {
    target_id: Option<TargetId>,
    target_type: String,
    /// Named by a `Target.attachToTarget` reply on this connection (not auto-attach).
    by_call: bool,
    events: Option<broadcast::Sender<Arc<Event>>>,
    closed: Option<SessionCloseReason>,
    crashed: bool,
}

struct State {
    pending: HashMap<u64, Pending>,
    sessions: HashMap<SessionId, SessionEntry>,
    browser_events: Option<broadcast::Sender<Arc<Event>>>,
    all_events: Option<broadcast::Sender<Arc<Event>>>,
    attached: Option<broadcast::Sender<AttachedTarget>>,
    closed: Option<String>,
    closed_count: usize,
}

/// Bytes tungstenite reads from the socket at a time (its default: 128 KiB).
const READ_BUFFER_SIZE: usize = 16 * 1024;

/// Source of [`Connection::id`].
static NEXT_CONNECTION_ID: AtomicU64 = AtomicU64::new(1);

struct Core {
    id: u64,
    endpoint: Endpoint,
    options: ConnectOptions,
    state: Mutex<State>,
    next_id: AtomicU64,
    closed_tx: watch::Sender<Option<String>>,
}

struct Handle {
    core: Arc<Core>,
    out_tx: mpsc::Sender<String>,
    shutdown: tokio_util::sync::CancellationToken,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

/// A CDP connection: a cheap, cloneable handle to one WebSocket.
///
/// One task owns the socket; calls and subscriptions share a routing table
/// (pending calls by id, sessions by `sessionId`). When the last handle
/// (including [`Session`] handles) drops, the socket is closed.
#[derive(Clone)]
pub struct Connection {
    h: Arc<Handle>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("endpoint", &self.h.core.endpoint)
            .finish_non_exhaustive()
    }
}

/// A handle to one CDP session: the browser session or a flattened child.
#[derive(Clone)]
pub struct Session {
    conn: Connection,
    id: Option<SessionId>,
    target_id: Option<TargetId>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("target_id", &self.target_id)
            .finish()
    }
}

#[derive(Deserialize)]
struct Envelope {
    id: Option<u64>,
    method: Option<String>,
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
    result: Option<Value>,
    error: Option<ProtoError>,
    params: Option<Value>,
}

#[derive(Deserialize)]
struct ProtoError {
    #[serde(default)]
    code: i64,
    #[serde(default)]
    message: String,
    #[serde(default)]
    data: Option<Value>,
}

/// One incoming text message with its envelope decoded (the pure half of
/// `Core::on_text`: no state, no I/O).
#[derive(Debug)]
enum Incoming {
    /// A reply to call `id`: its `result` (`null` when absent), or why not.
    Reply {
        id: u64,
        outcome: std::result::Result<Value, ReplyError>,
    },
    /// An event; `params` stays raw.
    Event(Event),
    /// Not a CDP message; logged and skipped.
    Malformed { reason: String },
}

/// Why a reply is not a result.
#[derive(Debug)]
enum ReplyError {
    /// The protocol error's `code` and `message[: data]`.
    Protocol(i64, String),
    /// A JSON object with a call's `id` whose envelope does not decode (a
    /// non-string `sessionId`, a duplicate key, a fractional error `code`...).
    /// Found by the `transport_envelope` fuzz target: such a reply used to be
    /// skipped, so its call waited out its whole budget.
    Malformed(serde_json::Error),
}

/// Decodes the envelope of one incoming text message.
/// Replaces every unpaired `\uD800`–`\uDFFF` escape in JSON text with
/// `\uFFFD`; `None` when there is none (the text is left to fail as it is).
fn repair_lone_surrogates(text: &str) -> Option<String> {
    fn hex4(b: &[u8]) -> Option<u16> {
        let s = std::str::from_utf8(b.get(..4)?).ok()?;
        u16::from_str_radix(s, 16).ok()
    }
    let b = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        if b.get(i + 1) != Some(&b'u') {
            i += 2;
            continue;
        }
        let Some(unit) = hex4(&b[i + 2..]) else {
            i += 2;
            continue;
        };
        let lone = match unit {
            0xD800..=0xDBFF => {
                let next_is_low = b.get(i + 6) == Some(&b'\\')
                    && b.get(i + 7) == Some(&b'u')
                    && matches!(hex4(&b[(i + 8).min(b.len())..]), Some(0xDC00..=0xDFFF));
                if next_is_low {
                    i += 12;
                    continue;
                }
                true
            }
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
            o.push_str(&text[copied..i]);
            o.push_str("\\uFFFD");
            copied = i + 6;
        }
        i += 6;
    }
    let mut o = out?;
    o.push_str(&text[copied..]);
    Some(o)
}

fn decode_envelope(text: &str) -> Incoming {
    let parsed = serde_json::from_str::<Envelope>(text).or_else(|e| {
        // Chromium sends JavaScript strings as they are, so a lone UTF-16
        // surrogate (`'\ud800'`) arrives as an unpaired `\uD800` escape,
        // which is not valid JSON text for serde. Decode it leniently (as
        // U+FFFD) instead of losing the message and leaving its call waiting.
        match repair_lone_surrogates(text) {
            Some(fixed) => serde_json::from_str::<Envelope>(&fixed).map_err(|_| e),
            None => Err(e),
        }
    });
    let env: Envelope = match parsed {
        Ok(e) => e,
        Err(e) => {
            // Still answer the call it names, if any: fail it now.
            let id = serde_json::from_str::<Value>(text)
                .ok()
                .and_then(|v| v.get("id").and_then(Value::as_u64));
            return match id {
                Some(id) => Incoming::Reply {
                    id,
                    outcome: Err(ReplyError::Malformed(e)),
                },
                None => Incoming::Malformed {
                    reason: e.to_string(),
                },
            };
        }
    };
    if let Some(id) = env.id {
        let outcome = match env.error {
            Some(err) => {
                let mut message = err.message;
                if let Some(Value::String(d)) = err.data {
                    message = format!("{message}: {d}");
                }
                Err(ReplyError::Protocol(err.code, message))
            }
            None => Ok(env.result.unwrap_or(Value::Null)),
        };
        return Incoming::Reply { id, outcome };
    }
    let Some(method) = env.method else {
        return Incoming::Malformed {
            reason: "neither id nor method".into(),
        };
    };
    Incoming::Event(Event {
        method,
        session_id: env.session_id.map(SessionId::new),
        params: env.params.unwrap_or(Value::Null),
    })
}

const CRASH_EXEMPT: [&str; 4] = [
    "Page.navigate",
    "Page.reload",
    "Page.close",
    "Runtime.runIfWaitingForDebugger",
];

impl Connection {
    /// Connects to a CDP endpoint.
    ///
    /// `endpoint` is `ws://…`/`wss://…` (used as is) or `http://host:port` /
    /// `https://host[:port]` (resolved through `GET /json/version` →
    /// `webSocketDebuggerUrl`). TLS (`wss://`, `https://`) is rustls with the
    /// ring provider, given explicitly (a process-wide default provider is
    /// neither needed nor used), trusting the webpki roots plus
    /// [`ConnectOptions::extra_root_certificates`]; SNI is the URL's host.
    ///
    /// # Errors
    /// [`Error::InvalidEndpoint`], [`Error::Connect`], [`Error::ConnectTimeout`];
    /// every message shows the endpoint redacted.
    ///
    /// # Cancel safety
    /// Cancel safe: nothing is spawned until the handshake completes.
    pub async fn connect(endpoint: &str, options: ConnectOptions) -> Result<Self> {
        let ep = Endpoint::parse(endpoint)?;
        let span =
            tracing::debug_span!("cdp.connect", endpoint = %ep, elapsed_us = tracing::field::Empty);
        let timeout = options.connect_timeout;
        let shown = ep.to_string();
        let start = Instant::now();
        let r = match tokio::time::timeout(
            timeout,
            Self::connect_inner(ep, options).instrument(span.clone()),
        )
        .await
        {
            Ok(r) => r,
            Err(_) => Err(Error::ConnectTimeout {
                endpoint: shown,
                timeout,
            }),
        };
        span.record(
            "elapsed_us",
            u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX),
        );
        if let Err(e) = &r {
            debug!(parent: &span, error = %e, "connect failed");
        }
        r
    }

    async fn connect_inner(ep: Endpoint, options: ConnectOptions) -> Result<Self> {
        let ws_ep = if ep.is_websocket() {
            ep.clone()
        } else {
            let ws = crate::discovery::resolve_ws_url(
                &ep,
                &options.headers,
                &options.extra_root_certificates,
            )
            .await?;
            Endpoint::parse(&ws)?
        };
        let connector = if ws_ep.expose().scheme() == "wss" {
            let cfg =
                crate::tls::client_config(&options.extra_root_certificates).map_err(|reason| {
                    Error::Connect {
                        endpoint: ws_ep.to_string(),
                        reason,
                    }
                })?;
            Some(tokio_tungstenite::Connector::Rustls(cfg))
        } else {
            None
        };
        use tokio_tungstenite::tungstenite::client::IntoClientRequest;
        let mut req =
            ws_ep
                .expose()
                .as_str()
                .into_client_request()
                .map_err(|e| Error::Connect {
                    endpoint: ws_ep.to_string(),
                    reason: format!(
                        "bad handshake request: {}",
                        scrub(&e.to_string(), ws_ep.expose())
                    ),
                })?;
        for (k, v) in &options.headers {
            let name = tungstenite::http::HeaderName::from_bytes(k.as_bytes()).map_err(|_| {
                Error::InvalidEndpoint {
                    endpoint: ws_ep.to_string(),
                    reason: format!("header name {k:?} is not valid"),
                }
            })?;
            let value = tungstenite::http::HeaderValue::from_str(v).map_err(|_| {
                Error::InvalidEndpoint {
                    endpoint: ws_ep.to_string(),
                    reason: format!("value of header {k:?} is not valid"),
                }
            })?;
            req.headers_mut().insert(name, value);
        }
        // tungstenite zero-fills its whole read buffer before every socket
        // read (`FrameCodec::read_in`); at its default 128 KiB that was 70–80%
        // of our process's instructions per small evaluate (callgrind,
        // docs/profiles/evaluate.md). Large messages just take more reads.
        let config = WebSocketConfig::default()
            .read_buffer_size(READ_BUFFER_SIZE)
            .max_message_size(Some(options.max_message_size))
            .max_frame_size(Some(options.max_message_size));
        let (ws, _resp) =
            tokio_tungstenite::connect_async_tls_with_config(req, Some(config), true, connector)
                .await
                .map_err(|e| Error::Connect {
                    endpoint: ws_ep.to_string(),
                    reason: scrub(&describe_ws_error(&e), ws_ep.expose()),
                })?;
        debug!(endpoint = %ws_ep, "connected");
        Ok(Self::from_socket(ws, ws_ep, options))
    }

    fn from_socket<S>(
        ws: tokio_tungstenite::WebSocketStream<S>,
        endpoint: Endpoint,
        options: ConnectOptions,
    ) -> Self
    where
        S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    {
        let (out_tx, out_rx) = mpsc::channel(options.outgoing_capacity.max(1));
        let core = Arc::new(Core::new(endpoint, options));
        let shutdown = tokio_util::sync::CancellationToken::new();
        let conn = Connection {
            h: Arc::new(Handle {
                core: core.clone(),
                out_tx,
                shutdown: shutdown.clone(),
            }),
        };
        let weak = ConnWeak(Arc::downgrade(&conn.h));
        tokio::spawn(socket_task(ws, core, out_rx, shutdown, weak));
        conn
    }

    /// The browser session (no `sessionId`).
    pub fn browser(&self) -> Session {
        Session {
            conn: self.clone(),
            id: None,
            target_id: None,
        }
    }

    /// The endpoint this connection was made to (redacted on display).
    pub fn endpoint(&self) -> &Endpoint {
        &self.h.core.endpoint
    }

    /// A number unique to this connection within the process (clones share
    /// it), for keeping per-connection state elsewhere.
    pub fn id(&self) -> u64 {
        self.h.core.id
    }

    /// True when session `id` was named by the reply to a
    /// `Target.attachToTarget` sent on this connection (by anyone, through
    /// [`Connection::attach`] or a raw call), as opposed to a session that
    /// auto-attach created. Replies are recorded in arrival order: once the
    /// reply to any later call has been received, an attach reply that came
    /// before it is already counted.
    pub fn attached_by_call(&self, id: &SessionId) -> bool {
        self.h
            .core
            .lock()
            .sessions
            .get(id)
            .is_some_and(|e| e.by_call)
    }

    /// A handle for an already attached session id (for example one announced
    /// by [`Connection::attached_targets`]).
    pub fn session(&self, id: SessionId) -> Session {
        let target_id = self
            .h
            .core
            .lock()
            .sessions
            .get(&id)
            .and_then(|e| e.target_id.clone());
        Session {
            conn: self.clone(),
            id: Some(id),
            target_id,
        }
    }

    /// Attaches to `target_id` with `Target.attachToTarget{flatten:true}`.
    ///
    /// # Errors
    /// Any call error of `Target.attachToTarget` (e.g. `Protocol` for an unknown target).
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped future may leave the target attached.
    pub async fn attach(&self, target_id: &TargetId, budget: impl Into<Budget>) -> Result<Session> {
        let span = tracing::debug_span!(
            "cdp.attach",
            target_id = target_id.as_str(),
            session = tracing::field::Empty,
            elapsed_us = tracing::field::Empty,
        );
        let start = Instant::now();
        let r = self
            .attach_inner(target_id, budget.into())
            .instrument(span.clone())
            .await;
        if let Ok(s) = &r {
            span.record("session", s.id().map(|id| id.as_str()));
        }
        span.record(
            "elapsed_us",
            u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX),
        );
        r
    }

    async fn attach_inner(&self, target_id: &TargetId, budget: Budget) -> Result<Session> {
        let v = self
            .browser()
            .call(
                "Target.attachToTarget",
                json!({"targetId": target_id.as_str(), "flatten": true}),
                budget,
            )
            .await?;
        let sid = v
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or_else(|| Error::Protocol {
                method: "Target.attachToTarget".into(),
                code: 0,
                message: "reply has no sessionId".into(),
            })?;
        let sid = SessionId::new(sid);
        self.h
            .core
            .register_session(&sid, Some(target_id.clone()), "");
        Ok(Session {
            conn: self.clone(),
            id: Some(sid),
            target_id: Some(target_id.clone()),
        })
    }

    /// Events of every session, in arrival order.
    pub fn subscribe_all(&self) -> EventStream {
        EventStream {
            rx: self
                .h
                .core
                .lock()
                .all_events
                .as_ref()
                .map(|s| s.subscribe()),
        }
    }

    /// Sessions created by auto-attach or attach, as `Target.attachedToTarget` announces them.
    pub fn attached_targets(&self) -> broadcast::Receiver<AttachedTarget> {
        let st = self.h.core.lock();
        match st.attached.as_ref() {
            Some(s) => s.subscribe(),
            None => broadcast::channel(1).1,
        }
    }

    /// `Some(reason)` once the socket is closed.
    pub fn closed_reason(&self) -> Option<String> {
        self.h.core.lock().closed.clone()
    }

    /// True once the socket is closed.
    pub fn is_closed(&self) -> bool {
        self.closed_reason().is_some()
    }

    /// Resolves with the close reason when the socket closes.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn closed(&self) -> String {
        let mut rx = self.h.core.closed_tx.subscribe();
        loop {
            if let Some(r) = rx.borrow_and_update().clone() {
                return r;
            }
            if rx.changed().await.is_err() {
                return "connection dropped".into();
            }
        }
    }

    /// Closes the socket; pending calls fail with `ConnectionClosed`.
    pub fn close(&self) {
        self.h.shutdown.cancel();
    }

    /// Number of calls waiting for a reply (for leak checks).
    pub fn pending_calls(&self) -> usize {
        self.h.core.lock().pending.len()
    }

    /// Number of live sessions in the routing table.
    pub fn live_sessions(&self) -> usize {
        self.h
            .core
            .lock()
            .sessions
            .values()
            .filter(|s| s.closed.is_none())
            .count()
    }

    async fn call_raw(
        &self,
        session: Option<&SessionId>,
        method: &str,
        params: Value,
        budget: Budget,
    ) -> Result<Value> {
        let core = &self.h.core;
        let start = Instant::now();
        // A budget already spent sends nothing: the browser never sees the call.
        if budget.is_cancelled() {
            return Err(Error::Cancelled {
                method: method.into(),
                elapsed: Duration::ZERO,
            });
        }
        if budget.is_expired() {
            return Err(Error::Timeout {
                method: method.into(),
                elapsed: Duration::ZERO,
                budget: budget.total(),
            });
        }
        let id = core.next_id.fetch_add(1, Ordering::Relaxed);
        tracing::Span::current().record("id", id);
        let (tx, rx) = oneshot::channel();
        {
            let mut st = core.lock();
            if let Some(reason) = &st.closed {
                return Err(Error::ConnectionClosed {
                    reason: reason.clone(),
                });
            }
            if let Some(sid) = session {
                if let Some(e) = st.sessions.get(sid) {
                    if let Some(r) = &e.closed {
                        return Err(Error::SessionClosed {
                            method: method.into(),
                            session_id: sid.clone(),
                            reason: r.clone(),
                        });
                    }
                    if e.crashed && !CRASH_EXEMPT.contains(&method) {
                        return Err(Error::TargetCrashed {
                            method: method.into(),
                            session_id: sid.clone(),
                            target_id: e.target_id.clone().unwrap_or_else(|| TargetId::new("")),
                        });
                    }
                }
            }
            st.pending.insert(
                id,
                Pending {
                    method: method.into(),
                    session: session.cloned(),
                    tx,
                },
            );
        }
        let _guard = PendingGuard { core, id };
        let mut msg = json!({"id": id, "method": method, "params": params});
        if let Some(sid) = session {
            msg["sessionId"] = Value::String(sid.as_str().into());
        }
        let text = msg.to_string();
        let timeout = |elapsed| Error::Timeout {
            method: method.into(),
            elapsed,
            budget: budget.total(),
        };
        let deadline = budget.deadline();
        tokio::select! {
            biased;
            r = self.h.out_tx.send(text) => {
                if r.is_err() {
                    return Err(Error::ConnectionClosed { reason: core.lock().closed.clone().unwrap_or_else(|| "socket task ended".into()) });
                }
            }
            _ = budget.cancel_token().cancelled() => return Err(Error::Cancelled { method: method.into(), elapsed: start.elapsed() }),
            _ = tokio::time::sleep_until(deadline) => return Err(timeout(start.elapsed())),
        }
        let r = tokio::select! {
            biased;
            r = rx => match r {
                Ok(r) => r,
                Err(_) => Err(Error::ConnectionClosed { reason: core.lock().closed.clone().unwrap_or_else(|| "socket task ended".into()) }),
            },
            _ = budget.cancel_token().cancelled() => Err(Error::Cancelled { method: method.into(), elapsed: start.elapsed() }),
            _ = tokio::time::sleep_until(deadline) => Err(timeout(start.elapsed())),
        };
        let elapsed_us = u64::try_from(start.elapsed().as_micros()).unwrap_or(u64::MAX);
        let span = tracing::Span::current();
        span.record("elapsed_us", elapsed_us);
        span.record("ok", r.is_ok());
        debug!(
            method,
            session = session.map(|s| s.as_str()),
            id,
            elapsed_us,
            ok = r.is_ok(),
            "cdp.call done"
        );
        r
    }
}

struct PendingGuard<'a> {
    core: &'a Core,
    id: u64,
}
impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.core.lock().pending.remove(&self.id);
    }
}

impl Session {
    /// The `sessionId`; `None` for the browser session.
    pub fn id(&self) -> Option<&SessionId> {
        self.id.as_ref()
    }
    /// The target this session is attached to, when known.
    pub fn target_id(&self) -> Option<&TargetId> {
        self.target_id.as_ref()
    }
    /// The connection this session lives on.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    /// Sends a typed `chromiumoxide_cdp` command and decodes its reply.
    ///
    /// # Errors
    /// `Protocol` (CDP error object), `Timeout`/`Cancelled` (budget),
    /// `SessionClosed`, `TargetCrashed`, `ConnectionClosed`, `Decode`, `Encode`.
    /// A gone peer fails the call at once, not at the deadline.
    ///
    /// # Cancel safety
    /// Cancel safe with respect to the transport: a dropped future removes its
    /// pending entry and a late reply is discarded. The command itself may
    /// still have been sent and run in the browser.
    pub async fn execute<C: Command>(
        &self,
        cmd: C,
        budget: impl Into<Budget>,
    ) -> Result<C::Response> {
        let method = cmd.identifier().to_string();
        let params = serde_json::to_value(&cmd).map_err(|source| Error::Encode {
            method: method.clone(),
            source,
        })?;
        let v = self.call(&method, params, budget).await?;
        C::response_from_value(v).map_err(|source| Error::Decode { method, source })
    }

    /// Sends `method` with raw JSON `params` and returns the raw `result`.
    ///
    /// # Errors
    /// As [`Session::execute`], without `Decode`/`Encode`.
    ///
    /// # Cancel safety
    /// As [`Session::execute`].
    pub async fn call(
        &self,
        method: &str,
        params: Value,
        budget: impl Into<Budget>,
    ) -> Result<Value> {
        let budget = budget.into();
        let span = tracing::debug_span!(
            "cdp.call",
            method,
            session = self.id.as_ref().map(|s| s.as_str()),
            id = tracing::field::Empty,
            elapsed_us = tracing::field::Empty,
            ok = tracing::field::Empty,
        );
        let params = if params.is_null() { json!({}) } else { params };
        self.conn
            .call_raw(self.id.as_ref(), method, params, budget)
            .instrument(span)
            .await
    }

    /// Events of this session only (the browser session gets events with no `sessionId`).
    pub fn subscribe(&self) -> EventStream {
        let st = self.conn.h.core.lock();
        let rx = match &self.id {
            None => st.browser_events.as_ref().map(|s| s.subscribe()),
            Some(id) => st
                .sessions
                .get(id)
                .and_then(|e| e.events.as_ref())
                .map(|s| s.subscribe()),
        };
        EventStream { rx }
    }

    /// Detaches this session (`Target.detachFromTarget`) and fails its pending calls.
    ///
    /// # Errors
    /// The call's error, except that an already closed session is `Ok`.
    ///
    /// # Cancel safety
    /// Cancel safe: the routing entry is closed before any await.
    pub async fn detach(&self, budget: impl Into<Budget>) -> Result<()> {
        let Some(id) = &self.id else { return Ok(()) };
        let r = self
            .conn
            .browser()
            .call(
                "Target.detachFromTarget",
                json!({"sessionId": id.as_str()}),
                budget,
            )
            .await;
        self.conn
            .h
            .core
            .close_session(id, SessionCloseReason::Detached);
        match r {
            Ok(_) => Ok(()),
            Err(e) if e.protocol_message().is_some() => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// `Some(reason)` when this session no longer routes calls.
    pub fn closed_reason(&self) -> Option<SessionCloseReason> {
        let st = self.conn.h.core.lock();
        if st.closed.is_some() {
            return Some(SessionCloseReason::ConnectionClosed);
        }
        self.id
            .as_ref()
            .and_then(|id| st.sessions.get(id))
            .and_then(|e| e.closed.clone())
    }

    /// True after `Inspector.targetCrashed` and before the next successful navigation.
    pub fn is_crashed(&self) -> bool {
        let st = self.conn.h.core.lock();
        self.id
            .as_ref()
            .and_then(|id| st.sessions.get(id))
            .is_some_and(|e| e.crashed)
    }

    /// `targetInfo.type` as announced at attach (empty when unknown).
    pub fn target_type(&self) -> String {
        let st = self.conn.h.core.lock();
        self.id
            .as_ref()
            .and_then(|id| st.sessions.get(id))
            .map(|e| e.target_type.clone())
            .unwrap_or_default()
    }
}

impl Core {
    fn new(endpoint: Endpoint, options: ConnectOptions) -> Self {
        let cap = options.event_capacity;
        let (closed_tx, _) = watch::channel(None);
        Core {
            id: NEXT_CONNECTION_ID.fetch_add(1, Ordering::Relaxed),
            endpoint,
            options,
            state: Mutex::new(State {
                pending: HashMap::new(),
                sessions: HashMap::new(),
                browser_events: Some(broadcast::channel(cap).0),
                all_events: Some(broadcast::channel(cap).0),
                attached: Some(broadcast::channel(256).0),
                closed: None,
                closed_count: 0,
            }),
            next_id: AtomicU64::new(1),
            closed_tx,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A poisoned lock only means another thread panicked mid-update; the
        // table is still consistent enough to fail calls, so keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn register_session(&self, sid: &SessionId, target_id: Option<TargetId>, target_type: &str) {
        let mut st = self.lock();
        if st.closed.is_some() {
            return;
        }
        let cap = self.options.event_capacity;
        let e = st
            .sessions
            .entry(sid.clone())
            .or_insert_with(|| SessionEntry {
                target_id: None,
                target_type: String::new(),
                by_call: false,
                events: Some(broadcast::channel(cap).0),
                closed: None,
                crashed: false,
            });
        if e.target_id.is_none() {
            e.target_id = target_id;
        }
        if e.target_type.is_empty() {
            e.target_type = target_type.into();
        }
    }

    fn close_session(&self, sid: &SessionId, reason: SessionCloseReason) {
        let mut st = self.lock();
        let Some(e) = st.sessions.get_mut(sid) else {
            return;
        };
        if e.closed.is_some() {
            return;
        }
        e.closed = Some(reason.clone());
        e.events = None;
        st.closed_count += 1;
        let ids: Vec<u64> = st
            .pending
            .iter()
            .filter(|(_, p)| p.session.as_ref() == Some(sid))
            .map(|(k, _)| *k)
            .collect();
        for id in ids {
            if let Some(p) = st.pending.remove(&id) {
                let _ = p.tx.send(Err(Error::SessionClosed {
                    method: p.method,
                    session_id: sid.clone(),
                    reason: reason.clone(),
                }));
            }
        }
        // Keep closed entries so later calls get a precise error, but bound them.
        if st.closed_count > 4096 {
            st.sessions.retain(|_, e| e.closed.is_none());
            st.closed_count = 0;
        }
    }

    fn mark_crashed(&self, sid: Option<&SessionId>, target: Option<&TargetId>, crashed: bool) {
        let mut st = self.lock();
        let target = target.cloned().or_else(|| {
            sid.and_then(|s| st.sessions.get(s))
                .and_then(|e| e.target_id.clone())
        });
        let mut hit: Vec<(SessionId, Option<TargetId>)> = Vec::new();
        for (k, e) in st.sessions.iter_mut() {
            let same = Some(k) == sid || (target.is_some() && e.target_id == target);
            if same && e.closed.is_none() {
                e.crashed = crashed;
                hit.push((k.clone(), e.target_id.clone()));
            }
        }
        if !crashed {
            return;
        }
        for (sid, tid) in hit {
            let ids: Vec<u64> = st
                .pending
                .iter()
                .filter(|(_, p)| {
                    p.session.as_ref() == Some(&sid) && !CRASH_EXEMPT.contains(&p.method.as_str())
                })
                .map(|(k, _)| *k)
                .collect();
            for id in ids {
                if let Some(p) = st.pending.remove(&id) {
                    let _ = p.tx.send(Err(Error::TargetCrashed {
                        method: p.method,
                        session_id: sid.clone(),
                        target_id: tid.clone().unwrap_or_else(|| TargetId::new("")),
                    }));
                }
            }
        }
    }

    fn close_all(&self, cause: Error) {
        let mut st = self.lock();
        if st.closed.is_some() {
            return;
        }
        let reason = match &cause {
            Error::ConnectionClosed { reason } => reason.clone(),
            other => other.to_string(),
        };
        // Our own close (explicit, or the last handle dropped) is routine;
        // anything else (peer gone, I/O error, size limit) is worth a warning.
        if matches!(reason.as_str(), CLOSED_BY_CLIENT | ALL_HANDLES_DROPPED) {
            debug!(endpoint = %self.endpoint, %reason, "cdp connection closed");
        } else {
            warn!(endpoint = %self.endpoint, %reason, "cdp connection closed");
        }
        st.closed = Some(reason.clone());
        for (_, p) in st.pending.drain() {
            let _ = p.tx.send(Err(cause.duplicate()));
        }
        for e in st.sessions.values_mut() {
            if e.closed.is_none() {
                e.closed = Some(SessionCloseReason::ConnectionClosed);
            }
            e.events = None;
        }
        st.browser_events = None;
        st.all_events = None;
        st.attached = None;
        drop(st);
        // `send` would drop the value when no receiver exists yet; `send_replace`
        // stores it so a later `Connection::closed` sees it.
        self.closed_tx.send_replace(Some(reason));
    }

    fn on_text(self: &Arc<Self>, conn_weak: &ConnWeak, text: &str) {
        let ev = match decode_envelope(text) {
            Incoming::Malformed { reason } => {
                warn!(error = %reason, len = text.len(), "skipping malformed CDP message");
                return;
            }
            Incoming::Reply { id, outcome } => {
                let p = self.lock().pending.remove(&id);
                let Some(p) = p else {
                    debug!(id, "reply for a caller that went away");
                    return;
                };
                let r = outcome.map_err(|e| match e {
                    ReplyError::Protocol(code, message) => Error::Protocol {
                        method: p.method.clone(),
                        code,
                        message,
                    },
                    ReplyError::Malformed(source) => {
                        warn!(id, error = %source, "malformed CDP reply fails its call");
                        Error::Decode {
                            method: p.method.clone(),
                            source,
                        }
                    }
                });
                if r.is_ok() && (p.method == "Page.navigate" || p.method == "Page.reload") {
                    self.mark_crashed(p.session.as_ref(), None, false);
                }
                if let (Ok(v), "Target.attachToTarget") = (&r, p.method.as_str()) {
                    // In arrival order, so a reader that got any later reply
                    // sees it (`Connection::attached_by_call`).
                    if let Some(sid) = v.get("sessionId").and_then(Value::as_str) {
                        let sid = SessionId::new(sid);
                        self.register_session(&sid, None, "");
                        if let Some(e) = self.lock().sessions.get_mut(&sid) {
                            e.by_call = true;
                        }
                    }
                }
                let _ = p.tx.send(r);
                return;
            }
            Incoming::Event(ev) => Arc::new(ev),
        };
        self.route_special(conn_weak, &ev);
        let st = self.lock();
        let target = match &ev.session_id {
            None => st.browser_events.as_ref(),
            Some(sid) => st.sessions.get(sid).and_then(|e| e.events.as_ref()),
        };
        if let Some(tx) = target {
            let _ = tx.send(ev.clone());
        }
        if let Some(all) = &st.all_events {
            let _ = all.send(ev);
        }
    }

    fn route_special(self: &Arc<Self>, conn_weak: &ConnWeak, ev: &Event) {
        match ev.method.as_str() {
            "Target.attachedToTarget" => {
                let Some(sid) = ev.str_param("sessionId") else {
                    return;
                };
                let sid = SessionId::new(sid);
                let info = ev.params.get("targetInfo").cloned().unwrap_or(Value::Null);
                let tid = info
                    .get("targetId")
                    .and_then(Value::as_str)
                    .map(TargetId::new);
                let ttype = info.get("type").and_then(Value::as_str).unwrap_or("");
                self.register_session(&sid, tid.clone(), ttype);
                let Some(conn) = conn_weak.upgrade() else {
                    return;
                };
                let at = AttachedTarget {
                    session: Session {
                        conn,
                        id: Some(sid),
                        target_id: tid,
                    },
                    target_info: info,
                    parent_session_id: ev.session_id.clone(),
                    waiting_for_debugger: ev
                        .params
                        .get("waitingForDebugger")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                };
                if let Some(tx) = self.lock().attached.as_ref() {
                    let _ = tx.send(at);
                }
            }
            "Target.detachedFromTarget" => {
                if let Some(sid) = ev.str_param("sessionId") {
                    self.close_session(&SessionId::new(sid), SessionCloseReason::Detached);
                }
            }
            "Target.targetDestroyed" => {
                if let Some(tid) = ev.str_param("targetId") {
                    let tid = TargetId::new(tid);
                    let sids: Vec<SessionId> = self
                        .lock()
                        .sessions
                        .iter()
                        .filter(|(_, e)| e.target_id.as_ref() == Some(&tid))
                        .map(|(k, _)| k.clone())
                        .collect();
                    for s in sids {
                        self.close_session(&s, SessionCloseReason::TargetDestroyed);
                    }
                }
            }
            "Inspector.targetCrashed" => self.mark_crashed(ev.session_id.as_ref(), None, true),
            "Target.targetCrashed" => {
                if let Some(tid) = ev.str_param("targetId") {
                    self.mark_crashed(None, Some(&TargetId::new(tid)), true);
                }
            }
            "Inspector.targetReloadedAfterCrash" => {
                self.mark_crashed(ev.session_id.as_ref(), None, false)
            }
            _ => {}
        }
    }
}

/// Fuzzing and regression hook, not API: runs `frames`, in order, through the
/// real incoming path (`Core::on_text`: envelope decoding, reply routing,
/// session bookkeeping, event fan-out) of a connection that has no socket.
///
/// The routing table starts with sessions `S1` (target `T1`, page) and `S2`
/// (target `T2`, iframe) and pending calls 1..=6 on the browser session, `S1`,
/// `S2` and the unknown `S3`. Checked after every frame: a frame that is a
/// JSON object whose `id` is a pending call's resolves that call (a reply is
/// never lost, whatever else the envelope holds). Checked at the end: the
/// connection is not closed, a fresh call still gets its reply, and a fresh
/// event still reaches `subscribe_all`.
///
/// # Errors
/// The first broken invariant, as text.
///
/// # Panics
/// Never (a panic is what the fuzzer looks for).
#[cfg(feature = "fuzz")]
#[doc(hidden)]
pub fn fuzz_decode_envelope(frames: &[&str]) -> std::result::Result<(), String> {
    let endpoint = Endpoint::parse("ws://127.0.0.1:9/devtools/browser/fuzz")
        .map_err(|e| format!("fixed endpoint: {e}"))?;
    let core = Arc::new(Core::new(
        endpoint,
        ConnectOptions::default().event_capacity(8),
    ));
    let (out_tx, _out_rx) = mpsc::channel(1);
    let handle = Arc::new(Handle {
        core: core.clone(),
        out_tx,
        shutdown: tokio_util::sync::CancellationToken::new(),
    });
    let weak = ConnWeak(Arc::downgrade(&handle));
    let mut all = Connection { h: handle.clone() }.subscribe_all();
    let mut attached = Connection { h: handle.clone() }.attached_targets();
    core.register_session(&SessionId::new("S1"), Some(TargetId::new("T1")), "page");
    core.register_session(&SessionId::new("S2"), Some(TargetId::new("T2")), "iframe");
    let calls = [
        (None, "Browser.getVersion"),
        (Some("S1"), "Page.navigate"),
        (Some("S1"), "Runtime.evaluate"),
        (Some("S2"), "DOM.getDocument"),
        (Some("S2"), "Page.reload"),
        (Some("S3"), "Target.getTargets"),
    ];
    let mut replies = Vec::new();
    for (n, (session, method)) in (1u64..).zip(calls) {
        let (tx, rx) = oneshot::channel();
        core.lock().pending.insert(
            n,
            Pending {
                method: method.into(),
                session: session.map(SessionId::new),
                tx,
            },
        );
        replies.push(rx);
    }
    for text in frames {
        let id = serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|v| v.get("id").and_then(Value::as_u64));
        let was_pending = id.is_some_and(|id| core.lock().pending.contains_key(&id));
        core.on_text(&weak, text);
        if let Some(id) = id.filter(|_| was_pending) {
            if core.lock().pending.contains_key(&id) {
                return Err(format!("the reply to pending call {id} was lost: {text:?}"));
            }
        }
        while attached.try_recv().is_ok() {}
    }
    if let Some(reason) = core.lock().closed.clone() {
        return Err(format!("connection closed by incoming text: {reason}"));
    }
    let probe = 1u64 << 62;
    let (tx, mut rx) = oneshot::channel();
    core.lock().pending.insert(
        probe,
        Pending {
            method: "Browser.getVersion".into(),
            session: None,
            tx,
        },
    );
    core.on_text(
        &weak,
        &format!(r#"{{"id":{probe},"result":{{"probe":true}}}}"#),
    );
    match rx.try_recv() {
        Ok(Ok(v)) if v == json!({"probe": true}) => {}
        other => return Err(format!("a fresh call got {other:?} instead of its reply")),
    }
    core.on_text(&weak, r#"{"method":"Fuzz.probe","params":{"n":1}}"#);
    let mut seen = false;
    while let Some(r) = all.try_recv() {
        if let Ok(ev) = r {
            seen |= ev.method == "Fuzz.probe" && ev.session_id.is_none();
        }
    }
    if !seen {
        return Err("a fresh event did not reach subscribe_all".into());
    }
    // Break the Session -> Connection -> Core cycle an undrained
    // `attached_targets` buffer would keep.
    while attached.try_recv().is_ok() {}
    core.lock().attached = None;
    drop(replies);
    Ok(())
}

/// A weak handle used by the socket task to build `Session`s without keeping
/// the connection alive.
struct ConnWeak(std::sync::Weak<Handle>);
impl ConnWeak {
    fn upgrade(&self) -> Option<Connection> {
        self.0.upgrade().map(|h| Connection { h })
    }
}

async fn socket_task<S>(
    ws: tokio_tungstenite::WebSocketStream<S>,
    core: Arc<Core>,
    mut out_rx: mpsc::Receiver<String>,
    shutdown: tokio_util::sync::CancellationToken,
    weak: ConnWeak,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut stream) = ws.split();
    let limit = core.options.max_message_size;
    let cause = loop {
        tokio::select! {
            _ = shutdown.cancelled() => {
                let _ = sink.send(Message::Close(None)).await;
                break Error::ConnectionClosed { reason: CLOSED_BY_CLIENT.into() };
            }
            out = out_rx.recv() => match out {
                Some(text) => {
                    if let Err(e) = sink.send(Message::Text(text.into())).await {
                        break Error::ConnectionClosed { reason: format!("write failed: {e}") };
                    }
                }
                None => {
                    let _ = sink.send(Message::Close(None)).await;
                    break Error::ConnectionClosed { reason: ALL_HANDLES_DROPPED.into() };
                }
            },
            msg = stream.next() => match msg {
                Some(Ok(Message::Text(t))) => core.on_text(&weak, t.as_str()),
                Some(Ok(Message::Binary(b))) => match std::str::from_utf8(&b) {
                    Ok(t) => core.on_text(&weak, t),
                    Err(_) => warn!(len = b.len(), "skipping non-UTF-8 binary CDP message"),
                },
                Some(Ok(Message::Close(frame))) => {
                    break Error::ConnectionClosed { reason: format!("peer closed the socket{}", frame.map(|f| format!(" ({} {})", f.code, f.reason)).unwrap_or_default()) };
                }
                Some(Ok(_)) => {}
                Some(Err(tungstenite::Error::Capacity(c))) => {
                    let size = match c {
                        tungstenite::error::CapacityError::MessageTooLong { size, .. } => size,
                        _ => 0,
                    };
                    break Error::MessageTooLarge { size, limit };
                }
                Some(Err(e)) => break Error::ConnectionClosed { reason: format!("socket error: {e}") },
                None => break Error::ConnectionClosed { reason: "socket ended".into() },
            },
        }
    };
    core.close_all(cause);
}

/// The reason text of a failed WebSocket connect: TLS failures in words
/// ([`crate::tls::describe_io`]), anything else as tungstenite says it.
fn describe_ws_error(e: &tungstenite::Error) -> String {
    match e {
        tungstenite::Error::Io(io) => {
            crate::tls::describe_io(io).unwrap_or_else(|| format!("IO error: {io}"))
        }
        tungstenite::Error::Tls(t) => format!("TLS: {t}"),
        other => other.to_string(),
    }
}

/// Replaces the URL (with credentials) inside an error text by its redacted form.
fn scrub(text: &str, url: &url::Url) -> String {
    let mut t = text.replace(url.as_str(), &redact(url));
    if let Some(q) = url.query() {
        t = t.replace(q, "***");
    }
    if let Some(p) = url.password() {
        t = t.replace(p, "***");
    }
    t
}
