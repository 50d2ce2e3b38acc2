//! A loopback CDP relay to a real Chromium that slips extra frames in
//! between the real ones (field case C23).
//!
//! Generated protocol bindings break on what a newer Chromium sends: an
//! unknown method, an unknown enum value, an extra or a missing field, a
//! `sessionId` nobody attached. [`InjectProxy`] relays CDP text frames both
//! ways between each client and its own upstream connection to Chromium, and
//! lets a test add frames on the way to the client:
//!
//! * [`InjectProxy::set_interleave`]: a function called with every frame
//!   coming from Chromium (parsed), before it is relayed; the frames it
//!   returns go to the client first, so they sit between real traffic of the
//!   same sessions;
//! * [`InjectProxy::inject`]: frames sent to every connected client now, in
//!   order with the relayed ones.
//!
//! The proxy also learns the sessions Chromium announces
//! (`Target.attachedToTarget`, [`InjectProxy::sessions`]), so a test can aim
//! an event at a real session. It never changes or drops a real frame, and
//! client → Chromium frames pass untouched.

use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::AbortHandle;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

/// Frames queued per direction before the reader waits (bounded queues).
const QUEUE: usize = 4096;

/// A function from a frame Chromium sent (parsed JSON) to frames (JSON text)
/// to send to the client before it.
pub type Interleave = Arc<dyn Fn(&Value) -> Vec<String> + Send + Sync>;

/// A session Chromium announced with `Target.attachedToTarget`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenSession {
    /// `sessionId`.
    pub session_id: String,
    /// `targetInfo.targetId`.
    pub target_id: String,
    /// `targetInfo.type` (`page`, `iframe`, `worker`, …).
    pub target_type: String,
}

#[derive(Default)]
struct Shared {
    interleave: Mutex<Option<Interleave>>,
    clients: Mutex<Vec<mpsc::Sender<Message>>>,
    sessions: Mutex<Vec<SeenSession>>,
    injected: AtomicUsize,
    relayed: AtomicUsize,
    tasks: Mutex<Vec<AbortHandle>>,
}

/// A running injecting relay. Dropping it stops it and drops every socket.
pub struct InjectProxy {
    port: u16,
    shared: Arc<Shared>,
    accept_task: tokio::task::JoinHandle<()>,
    upstream: String,
}

impl Drop for InjectProxy {
    fn drop(&mut self) {
        self.accept_task.abort();
        for t in lock(&self.shared.tasks).drain(..) {
            t.abort();
        }
    }
}

impl std::fmt::Debug for InjectProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InjectProxy")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(512 << 20))
        .max_frame_size(Some(512 << 20))
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl InjectProxy {
    /// Starts listening on `127.0.0.1:0`. Each client that connects gets its
    /// own upstream connection to `upstream_ws_url` (a browser ws URL); when
    /// that connect fails, the client's socket is closed.
    ///
    /// # Panics
    /// When no loopback port can be bound (test support only).
    pub async fn start(upstream_ws_url: &str) -> InjectProxy {
        #[allow(clippy::expect_used)]
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        #[allow(clippy::expect_used)]
        let port = listener.local_addr().expect("local addr").port();
        let shared = Arc::new(Shared::default());
        let accept_task = tokio::spawn({
            let shared = shared.clone();
            let upstream = upstream_ws_url.to_string();
            async move {
                while let Ok((tcp, _)) = listener.accept().await {
                    let (shared2, upstream) = (shared.clone(), upstream.clone());
                    let task = tokio::spawn(async move { relay(tcp, &upstream, shared2).await });
                    lock(&shared.tasks).push(task.abort_handle());
                }
            }
        });
        InjectProxy {
            port,
            shared,
            accept_task,
            upstream: upstream_ws_url.to_string(),
        }
    }

    /// The URL clients connect to: the upstream URL with host and port
    /// replaced by `127.0.0.1:<port>` (the path is kept).
    pub fn ws_url(&self) -> String {
        let path = self
            .upstream
            .split_once("://")
            .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
            .unwrap_or("/");
        format!("ws://127.0.0.1:{}{path}", self.port)
    }

    /// Sets (or with `None` clears) the function called with each frame from
    /// Chromium; its frames are sent to that client just before the real one.
    pub fn set_interleave(&self, f: Option<Interleave>) {
        *lock(&self.shared.interleave) = f;
    }

    /// Sends `frames` (JSON text, sent as they are, malformed or not) to every
    /// connected client now, after the frames already queued. Returns how
    /// many clients got them.
    pub async fn inject(&self, frames: &[String]) -> usize {
        let clients: Vec<_> = lock(&self.shared.clients).clone();
        let mut n = 0;
        for c in clients {
            let mut ok = true;
            for f in frames {
                if c.send(Message::text(f.clone())).await.is_err() {
                    ok = false;
                    break;
                }
                self.shared.injected.fetch_add(1, Ordering::SeqCst);
            }
            n += usize::from(ok);
        }
        n
    }

    /// The sessions Chromium announced so far (`Target.attachedToTarget`),
    /// oldest first.
    pub fn sessions(&self) -> Vec<SeenSession> {
        lock(&self.shared.sessions).clone()
    }

    /// How many frames were injected (interleaved or sent with [`Self::inject`]).
    pub fn injected(&self) -> usize {
        self.shared.injected.load(Ordering::SeqCst)
    }

    /// How many real frames were relayed from Chromium to clients.
    pub fn relayed(&self) -> usize {
        self.shared.relayed.load(Ordering::SeqCst)
    }
}

async fn relay(tcp: tokio::net::TcpStream, upstream_url: &str, shared: Arc<Shared>) {
    let Ok(client) = tokio_tungstenite::accept_async_with_config(tcp, Some(ws_config())).await
    else {
        return;
    };
    let Ok((upstream, _)) =
        tokio_tungstenite::connect_async_with_config(upstream_url, Some(ws_config()), false).await
    else {
        return;
    };
    let (mut client_tx, mut client_rx) = client.split();
    let (mut up_tx, mut up_rx) = upstream.split();
    let (to_client, mut to_client_rx) = mpsc::channel::<Message>(QUEUE);
    lock(&shared.clients).push(to_client.clone());

    let client_writer = async move {
        while let Some(m) = to_client_rx.recv().await {
            if client_tx.send(m).await.is_err() {
                break;
            }
        }
    };
    let client_reader = async move {
        while let Some(Ok(m)) = client_rx.next().await {
            let close = m.is_close();
            if (m.is_text() || m.is_binary() || close) && (up_tx.send(m).await.is_err() || close) {
                break;
            }
        }
    };
    let up_reader = {
        let shared = shared.clone();
        async move {
            while let Some(Ok(m)) = up_rx.next().await {
                if let Message::Text(text) = &m {
                    if let Ok(v) = serde_json::from_str::<Value>(text.as_str()) {
                        if v.get("method").and_then(Value::as_str)
                            == Some("Target.attachedToTarget")
                        {
                            let p = &v["params"];
                            let s = |v: &Value| v.as_str().unwrap_or_default().to_string();
                            lock(&shared.sessions).push(SeenSession {
                                session_id: s(&p["sessionId"]),
                                target_id: s(&p["targetInfo"]["targetId"]),
                                target_type: s(&p["targetInfo"]["type"]),
                            });
                        }
                        let f = lock(&shared.interleave).clone();
                        for extra in f.map(|f| f(&v)).unwrap_or_default() {
                            shared.injected.fetch_add(1, Ordering::SeqCst);
                            if to_client.send(Message::text(extra)).await.is_err() {
                                return;
                            }
                        }
                    }
                }
                let close = m.is_close();
                if m.is_text() || m.is_binary() || close {
                    shared.relayed.fetch_add(1, Ordering::SeqCst);
                    if to_client.send(m).await.is_err() || close {
                        break;
                    }
                }
            }
        }
    };
    // Whichever side ends first ends the pair; dropping the halves closes both sockets.
    tokio::select! {
        _ = client_writer => {}
        _ = client_reader => {}
        _ = up_reader => {}
    }
}
