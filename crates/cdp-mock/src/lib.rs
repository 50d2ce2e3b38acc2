//! # cdp-mock
//!
//! Test support: a scripted, in-process CDP server on a loopback port 0.
//!
//! A test starts a [`MockServer`], connects a client to [`MockServer::ws_url`],
//! and scripts what the "browser" does: reply to a method (optionally on one
//! session), reply late, never reply, reply with a CDP error, push events,
//! send garbage, drop the socket. What goes to one client (pushed events, raw
//! frames, replies) leaves in the order it was scheduled: an event pushed
//! before a request is answered arrives before that reply, as from a browser
//! (late replies, `Action::ReplyAfter`, join the queue when due). Every
//! request the client sent is recorded in order. Methods with no rule get `{}` (so `Page.enable` and friends need
//! no script), unless [`MockServer::strict`] is on.
//!
//! Ids are the client's own; the mock adds none of its own except session ids
//! it is told to use, so snapshots stay deterministic.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() {
//! let mock = cdp_mock::MockServer::start().await;
//! mock.on("Runtime.evaluate", serde_json::json!({"result": {"type": "number", "value": 2}}));
//! assert!(mock.ws_url().starts_with("ws://127.0.0.1:"));
//! # }
//! ```

pub mod dismiss_proxy;
pub mod fixtures;
pub mod inject_proxy;
pub mod tcp_fault_proxy;
pub use fixtures::FixtureServer;

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, Notify};
use tokio_tungstenite::tungstenite::Message;

/// One request the client sent.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// The client's call id.
    pub id: u64,
    /// CDP method.
    pub method: String,
    /// `sessionId`, when present.
    pub session_id: Option<String>,
    /// Raw params.
    pub params: Value,
}

/// What the mock does with a matching request.
#[derive(Debug, Clone)]
pub enum Action {
    /// Reply `{"id", "result"}` at once.
    Reply(Value),
    /// Reply after a delay (other traffic flows meanwhile).
    ReplyAfter(Duration, Value),
    /// Reply with a CDP error object.
    Error {
        /// CDP error code.
        code: i64,
        /// CDP error message.
        message: String,
    },
    /// Never reply.
    Never,
    /// Send these events (method, params, sessionId) and then reply.
    EventsThenReply(Vec<(String, Value, Option<String>)>, Value),
    /// Close the socket without replying.
    DropSocket,
}

type Handler = Arc<dyn Fn(&Request) -> Option<Action> + Send + Sync>;

struct Rule {
    method: String,
    session: Option<Option<String>>,
    handler: Handler,
    times: Option<usize>,
}

/// One HTTP request seen by the server: a WebSocket handshake or a
/// `/json/version` discovery request.
#[derive(Debug, Clone, PartialEq)]
pub struct HttpRequest {
    /// Path and query as sent, e.g. `/devtools/browser/mock?token=t`.
    pub path_and_query: String,
    /// Headers as sent, names lowercase, in order.
    pub headers: Vec<(String, String)>,
}

impl HttpRequest {
    /// The first value of header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

#[derive(Default)]
struct State {
    rules: Vec<Rule>,
    received: Vec<Request>,
    handshakes: Vec<HttpRequest>,
    discovery: Vec<HttpRequest>,
    extra_tasks: Vec<tokio::task::JoinHandle<()>>,
    clients: Vec<mpsc::UnboundedSender<Outgoing>>,
    strict: bool,
}

enum Outgoing {
    Text(String),
    Drop,
}

/// The scripted server. Dropping it stops accepting; open sockets close when
/// their client goes.
pub struct MockServer {
    addr: std::net::SocketAddr,
    state: Arc<Mutex<State>>,
    notify: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
        for t in self.lock().extra_tasks.drain(..) {
            t.abort();
        }
        for c in self.lock().clients.drain(..) {
            let _ = c.send(Outgoing::Drop);
        }
    }
}

impl MockServer {
    /// Starts a server on `127.0.0.1:0`.
    ///
    /// # Panics
    /// When binding a loopback port fails (test support only).
    pub async fn start() -> Self {
        #[allow(clippy::expect_used)]
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        #[allow(clippy::expect_used)]
        let addr = listener.local_addr().expect("local addr");
        let state = Arc::new(Mutex::new(State::default()));
        let notify = Arc::new(Notify::new());
        let (st, nt) = (state.clone(), notify.clone());
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (st, nt) = (st.clone(), nt.clone());
                // Small frames go out at once (no Nagle delay on bursts of events).
                let _ = tcp.set_nodelay(true);
                tokio::spawn(async move {
                    let st2 = st.clone();
                    // The error type is tungstenite's (an HTTP response); never returned here.
                    #[allow(clippy::result_large_err)]
                    let record = move |req: &tokio_tungstenite::tungstenite::handshake::server::Request,
                                       resp: tokio_tungstenite::tungstenite::handshake::server::Response| {
                        let seen = http_request(req.uri(), req.headers());
                        st2.lock().unwrap_or_else(|p| p.into_inner()).handshakes.push(seen);
                        Ok(resp)
                    };
                    if let Ok(ws) = tokio_tungstenite::accept_hdr_async_with_config(
                        tcp,
                        record,
                        Some(big_config()),
                    )
                    .await
                    {
                        serve(ws, st, nt).await;
                    }
                });
            }
        });
        MockServer {
            addr,
            state,
            notify,
            task,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `ws://127.0.0.1:PORT/devtools/browser/mock`.
    pub fn ws_url(&self) -> String {
        format!("ws://{}/devtools/browser/mock", self.addr)
    }

    /// The bound address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Unknown methods get a `-32601 method not found` error instead of `{}`.
    pub fn strict(&self, on: bool) {
        self.lock().strict = on;
    }

    /// Replies `result` to every `method` call, on any session. Later rules win.
    pub fn on(&self, method: &str, result: Value) {
        self.rule(method, None, None, move |_| {
            Some(Action::Reply(result.clone()))
        });
    }

    /// Scripts `method` on any session with a fixed action.
    pub fn on_action(&self, method: &str, action: Action) {
        self.rule(method, None, None, move |_| Some(action.clone()));
    }

    /// Scripts `method` on one session (`None` = browser session) with a fixed action.
    pub fn on_session(&self, method: &str, session: Option<&str>, action: Action) {
        self.rule(method, Some(session.map(String::from)), None, move |_| {
            Some(action.clone())
        });
    }

    /// Scripts the next `times` calls of `method` only; afterwards earlier rules apply.
    pub fn once(&self, method: &str, action: Action) {
        self.rule(method, None, Some(1), move |_| Some(action.clone()));
    }

    /// Scripts `method` with a function of the request; `None` falls through to older rules.
    pub fn on_fn(
        &self,
        method: &str,
        f: impl Fn(&Request) -> Option<Action> + Send + Sync + 'static,
    ) {
        self.rule(method, None, None, f);
    }

    fn rule(
        &self,
        method: &str,
        session: Option<Option<String>>,
        times: Option<usize>,
        f: impl Fn(&Request) -> Option<Action> + Send + Sync + 'static,
    ) {
        self.lock().rules.push(Rule {
            method: method.into(),
            session,
            handler: Arc::new(f),
            times,
        });
    }

    /// Pushes an event to every connected client.
    pub fn event(&self, method: &str, params: Value, session_id: Option<&str>) {
        let mut msg = json!({"method": method, "params": params});
        if let Some(s) = session_id {
            msg["sessionId"] = Value::String(s.into());
        }
        self.send_raw(&msg.to_string());
    }

    /// Sends a raw text frame (garbage, partial JSON, anything) to every client.
    pub fn send_raw(&self, text: &str) {
        for c in &self.lock().clients {
            let _ = c.send(Outgoing::Text(text.to_string()));
        }
    }

    /// Sends a reply for call `id` now (for out-of-order replies scripted with `Action::Never`).
    pub fn reply(&self, id: u64, result: Value, session_id: Option<&str>) {
        let mut msg = json!({"id": id, "result": result});
        if let Some(s) = session_id {
            msg["sessionId"] = Value::String(s.into());
        }
        self.send_raw(&msg.to_string());
    }

    /// Closes every client socket abruptly.
    pub fn drop_connections(&self) {
        for c in self.lock().clients.drain(..) {
            let _ = c.send(Outgoing::Drop);
        }
    }

    /// Number of connected clients.
    pub fn clients(&self) -> usize {
        self.lock()
            .clients
            .iter()
            .filter(|c| !c.is_closed())
            .count()
    }

    /// Every WebSocket handshake received so far (path, query and headers), in order.
    pub fn handshakes(&self) -> Vec<HttpRequest> {
        self.lock().handshakes.clone()
    }

    /// Starts an HTTP endpoint on another loopback port 0 that answers
    /// `GET /json/version` (under any path prefix) like Chromium, with
    /// `webSocketDebuggerUrl` = `ws_url` (default: [`MockServer::ws_url`]).
    /// Returns its base URL, `http://127.0.0.1:PORT`. Every request is
    /// recorded ([`MockServer::discovery_requests`]). Other paths get 404.
    ///
    /// # Panics
    /// When binding a loopback port fails (test support only).
    pub async fn serve_json_version(&self, ws_url: Option<&str>) -> String {
        #[allow(clippy::expect_used)]
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        #[allow(clippy::expect_used)]
        let addr = listener.local_addr().expect("local addr");
        let ws = ws_url.map(String::from).unwrap_or_else(|| self.ws_url());
        let state = self.state.clone();
        let app =
            axum::Router::new().fallback(move |req: axum::http::Request<axum::body::Body>| {
                let (ws, state) = (ws.clone(), state.clone());
                async move {
                    let seen = http_request(req.uri(), req.headers());
                    state
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .discovery
                        .push(seen);
                    let mut resp = if req.uri().path().ends_with("/json/version") {
                        let body = json!({
                            "Browser": "MockChrome/1.0",
                            "Protocol-Version": "1.3",
                            "webSocketDebuggerUrl": ws,
                        });
                        axum::http::Response::new(axum::body::Body::from(body.to_string()))
                    } else {
                        let mut r = axum::http::Response::new(axum::body::Body::from("not found"));
                        *r.status_mut() = axum::http::StatusCode::NOT_FOUND;
                        r
                    };
                    resp.headers_mut().insert(
                        "content-type",
                        axum::http::HeaderValue::from_static("application/json"),
                    );
                    resp
                }
            });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        self.lock().extra_tasks.push(task);
        format!("http://{addr}")
    }

    /// Every `/json/version` (or other discovery) request received so far, in order.
    pub fn discovery_requests(&self) -> Vec<HttpRequest> {
        self.lock().discovery.clone()
    }

    /// Every request received so far, in order.
    pub fn received(&self) -> Vec<Request> {
        self.lock().received.clone()
    }

    /// Requests of one method received so far.
    pub fn received_method(&self, method: &str) -> Vec<Request> {
        self.lock()
            .received
            .iter()
            .filter(|r| r.method == method)
            .cloned()
            .collect()
    }

    /// Waits until `n` requests of `method` have arrived, or `timeout` passes.
    ///
    /// Returns the requests seen (possibly fewer than `n` on timeout).
    pub async fn wait_for(&self, method: &str, n: usize, timeout: Duration) -> Vec<Request> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.notify.notified();
            let got = self.received_method(method);
            if got.len() >= n {
                return got;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return self.received_method(method);
            }
        }
    }
}

fn http_request(uri: &axum::http::Uri, headers: &axum::http::HeaderMap) -> HttpRequest {
    HttpRequest {
        path_and_query: uri
            .path_and_query()
            .map(|p| p.as_str().to_string())
            .unwrap_or_else(|| uri.path().to_string()),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_string(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
    }
}

fn big_config() -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(1 << 30))
        .max_frame_size(Some(1 << 30))
}

async fn serve(
    ws: tokio_tungstenite::WebSocketStream<tokio::net::TcpStream>,
    state: Arc<Mutex<State>>,
    notify: Arc<Notify>,
) {
    let (mut sink, mut stream) = ws.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<Outgoing>();
    state
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clients
        .push(tx.clone());
    loop {
        tokio::select! {
            out = rx.recv() => match out {
                Some(Outgoing::Text(t)) => { if sink.send(Message::Text(t.into())).await.is_err() { break; } }
                Some(Outgoing::Drop) | None => break,
            },
            msg = stream.next() => {
                let text = match msg {
                    Some(Ok(Message::Text(t))) => t.to_string(),
                    Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                    Some(Ok(_)) => continue,
                };
                let Ok(v) = serde_json::from_str::<Value>(&text) else { continue };
                let req = Request {
                    id: v.get("id").and_then(Value::as_u64).unwrap_or(0),
                    method: v.get("method").and_then(Value::as_str).unwrap_or("").to_string(),
                    session_id: v.get("sessionId").and_then(Value::as_str).map(String::from),
                    params: v.get("params").cloned().unwrap_or(Value::Null),
                };
                let action = {
                    let mut st = state.lock().unwrap_or_else(|p| p.into_inner());
                    st.received.push(req.clone());
                    let mut found = None;
                    for i in (0..st.rules.len()).rev() {
                        let r = &st.rules[i];
                        if r.method != req.method { continue; }
                        if let Some(s) = &r.session { if s != &req.session_id { continue; } }
                        if let Some(a) = (r.handler)(&req) {
                            found = Some(a);
                            if let Some(t) = st.rules[i].times.as_mut() {
                                *t -= 1;
                                if *t == 0 { st.rules.remove(i); }
                            }
                            break;
                        }
                    }
                    match found {
                        Some(a) => a,
                        None if st.strict => Action::Error { code: -32601, message: format!("'{}' wasn't found", req.method) },
                        None => Action::Reply(json!({})),
                    }
                };
                notify.notify_waiters();
                let reply = |result: Value| {
                    let mut m = json!({"id": req.id, "result": result});
                    if let Some(s) = &req.session_id { m["sessionId"] = Value::String(s.clone()); }
                    m.to_string()
                };
                // Replies go through the same FIFO as pushed events, so an event
                // pushed before a request is answered reaches the client first.
                match action {
                    Action::Reply(r) => { let _ = tx.send(Outgoing::Text(reply(r))); }
                    Action::ReplyAfter(d, r) => {
                        let tx = tx.clone();
                        let text = reply(r);
                        tokio::spawn(async move { tokio::time::sleep(d).await; let _ = tx.send(Outgoing::Text(text)); });
                    }
                    Action::Error { code, message } => {
                        let mut m = json!({"id": req.id, "error": {"code": code, "message": message}});
                        if let Some(s) = &req.session_id { m["sessionId"] = Value::String(s.clone()); }
                        let _ = tx.send(Outgoing::Text(m.to_string()));
                    }
                    Action::Never => {}
                    Action::EventsThenReply(events, r) => {
                        for (method, params, sid) in events {
                            let mut m = json!({"method": method, "params": params});
                            if let Some(s) = sid { m["sessionId"] = Value::String(s); }
                            let _ = tx.send(Outgoing::Text(m.to_string()));
                        }
                        let _ = tx.send(Outgoing::Text(reply(r)));
                    }
                    Action::DropSocket => break,
                }
            }
        }
    }
}
