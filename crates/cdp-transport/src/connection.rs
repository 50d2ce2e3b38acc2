//! The connection: [`Connection`] (a cheap handle to one WebSocket),
//! [`ConnectOptions`] and [`Connection::connect`]. The envelope decoding
//! (`envelope`), routing table (`routing`), session handles (`session`) and
//! socket task (`socket`) live in their own modules.

use crate::budget::Budget;
use crate::endpoint::{redact, Endpoint};
use crate::error::{Error, Result};
use crate::event::EventStream;
use crate::ids::{SessionId, TargetId};
use crate::routing::Core;
use crate::session::{AttachedTarget, Session};
use crate::socket::socket_task;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, mpsc};
use tokio_tungstenite::tungstenite::{self, protocol::WebSocketConfig};
use tracing::{debug, Instrument};

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

/// Bytes tungstenite reads from the socket at a time (its default: 128 KiB).
const READ_BUFFER_SIZE: usize = 16 * 1024;

/// The shared inside of every [`Connection`] clone; dropping the last one
/// stops the socket task.
pub(crate) struct Handle {
    pub(crate) core: Arc<Core>,
    pub(crate) out_tx: mpsc::Sender<String>,
    pub(crate) shutdown: tokio_util::sync::CancellationToken,
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
    pub(crate) h: Arc<Handle>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("endpoint", &self.h.core.endpoint)
            .finish_non_exhaustive()
    }
}

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
        Session::new(self.clone(), None, None)
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
        Session::new(self.clone(), Some(id), target_id)
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
        Ok(Session::new(
            self.clone(),
            Some(sid),
            Some(target_id.clone()),
        ))
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
}

/// A weak handle used by the socket task to build `Session`s without keeping
/// the connection alive.
pub(crate) struct ConnWeak(pub(crate) std::sync::Weak<Handle>);
impl ConnWeak {
    pub(crate) fn upgrade(&self) -> Option<Connection> {
        self.0.upgrade().map(|h| Connection { h })
    }
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
