//! A loopback stand-in for a hosted browser's CDP proxy that closes native
//! dialogs by itself.
//!
//! Hosted browsers such as Browserbase put a (Playwright-based) proxy between
//! the client and Chromium that dismisses every native dialog within ~10 ms,
//! so the client's own `Page.handleJavaScriptDialog` always loses (seed 000).
//! [`DismissProxy`] does the same on loopback: it relays CDP text frames both
//! ways between each client and a fresh upstream connection to Chromium, and
//! on every `Page.javascriptDialogOpening` coming from upstream it sends its
//! own `Page.handleJavaScriptDialog{accept:false}` upstream on that
//! `sessionId` at once, before relaying the event. Its commands use ids from
//! [`OWN_ID_BASE`] up, and their replies are swallowed: the client sees the
//! opening and the closing events, never the proxy's commands.
//!
//! Fault switches for tests: [`DismissProxy::cut`] (drop every socket),
//! [`DismissProxy::set_delay`] (add latency to each relayed frame),
//! [`DismissProxy::set_stalled`] (stop relaying, keep the sockets open).

use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig;
use tokio_tungstenite::tungstenite::Message;

/// First id of the proxy's own commands; client ids stay below it.
pub const OWN_ID_BASE: u64 = 1_000_000_000;

/// Frames queued per direction before the reader waits (bounded queues).
const QUEUE: usize = 1024;

#[derive(Default)]
struct Shared {
    delay_ms: AtomicU64,
    dismissed: AtomicUsize,
    connections: AtomicUsize,
    tasks: Mutex<Vec<AbortHandle>>,
}

/// A running dismissing proxy. Dropping it stops it and drops every socket.
pub struct DismissProxy {
    port: u16,
    shared: Arc<Shared>,
    stalled: watch::Sender<bool>,
    accept_task: tokio::task::JoinHandle<()>,
    next_id: Arc<AtomicU64>,
    upstream: String,
}

impl Drop for DismissProxy {
    fn drop(&mut self) {
        self.accept_task.abort();
        self.cut();
    }
}

impl std::fmt::Debug for DismissProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DismissProxy")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

fn ws_config() -> WebSocketConfig {
    WebSocketConfig::default()
        .max_message_size(Some(512 << 20))
        .max_frame_size(Some(512 << 20))
}

impl DismissProxy {
    /// Starts listening on `127.0.0.1:0`. Each client that connects gets its
    /// own upstream connection to `upstream_ws_url` (a browser ws URL such as
    /// `ws://127.0.0.1:P/devtools/browser/…`); when that connect fails, the
    /// client's socket is closed.
    ///
    /// # Panics
    /// When no loopback port can be bound (test support only).
    pub async fn start(upstream_ws_url: &str) -> DismissProxy {
        #[allow(clippy::expect_used)]
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        #[allow(clippy::expect_used)]
        let port = listener.local_addr().expect("local addr").port();
        let shared = Arc::new(Shared::default());
        let (stalled, _) = watch::channel(false);
        let next_id = Arc::new(AtomicU64::new(OWN_ID_BASE));
        let accept_task = tokio::spawn({
            let (shared, stalled, next_id) = (shared.clone(), stalled.clone(), next_id.clone());
            let upstream = upstream_ws_url.to_string();
            async move {
                while let Ok((tcp, _)) = listener.accept().await {
                    let (shared2, stalled, next_id, upstream) = (
                        shared.clone(),
                        stalled.subscribe(),
                        next_id.clone(),
                        upstream.clone(),
                    );
                    let task = tokio::spawn(async move {
                        relay(tcp, &upstream, shared2, stalled, next_id).await;
                    });
                    lock(&shared.tasks).push(task.abort_handle());
                }
            }
        });
        DismissProxy {
            port,
            shared,
            stalled,
            accept_task,
            next_id,
            upstream: upstream_ws_url.to_string(),
        }
    }

    /// The URL clients connect to: the upstream URL with host and port
    /// replaced by `127.0.0.1:<port>` (the path is kept, so it still looks
    /// like a browser endpoint).
    pub fn ws_url(&self) -> String {
        let path = self
            .upstream
            .split_once("://")
            .and_then(|(_, rest)| rest.find('/').map(|i| &rest[i..]))
            .unwrap_or("/");
        format!("ws://127.0.0.1:{}{path}", self.port)
    }

    /// How many `Page.handleJavaScriptDialog` the proxy has sent.
    pub fn dismissed(&self) -> usize {
        self.shared.dismissed.load(Ordering::SeqCst)
    }

    /// How many client connections were accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Drops every client and upstream socket at once (no close frame). New
    /// clients can still connect afterwards.
    pub fn cut(&self) {
        for t in lock(&self.shared.tasks).drain(..) {
            t.abort();
        }
    }

    /// Adds `delay` before each relayed frame, both ways (zero: none). The
    /// proxy's own dismissals are not delayed.
    pub fn set_delay(&self, delay: Duration) {
        self.shared.delay_ms.store(
            u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            Ordering::SeqCst,
        );
    }

    /// `true`: stop relaying (frames wait, sockets stay open); `false`: go on.
    pub fn set_stalled(&self, stalled: bool) {
        self.stalled.send_replace(stalled);
    }

    /// The next id the proxy will use for its own command (diagnostics).
    pub fn next_own_id(&self) -> u64 {
        self.next_id.load(Ordering::SeqCst)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waits while stalled, then sleeps the configured delay.
async fn gate(shared: &Shared, stalled: &mut watch::Receiver<bool>) {
    let _ = stalled.wait_for(|s| !*s).await;
    let ms = shared.delay_ms.load(Ordering::SeqCst);
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

async fn relay(
    tcp: tokio::net::TcpStream,
    upstream_url: &str,
    shared: Arc<Shared>,
    stalled: watch::Receiver<bool>,
    next_id: Arc<AtomicU64>,
) {
    let Ok(client) = tokio_tungstenite::accept_async_with_config(tcp, Some(ws_config())).await
    else {
        return;
    };
    shared.connections.fetch_add(1, Ordering::SeqCst);
    let Ok((upstream, _)) =
        tokio_tungstenite::connect_async_with_config(upstream_url, Some(ws_config()), false).await
    else {
        return;
    };
    let (mut client_tx, mut client_rx) = client.split();
    let (mut up_tx, mut up_rx) = upstream.split();
    let (to_up, mut to_up_rx) = mpsc::channel::<Message>(QUEUE);
    let (to_client, mut to_client_rx) = mpsc::channel::<Message>(QUEUE);
    let own_ids = Arc::new(Mutex::new(HashSet::<u64>::new()));

    let up_writer = async move {
        while let Some(m) = to_up_rx.recv().await {
            if up_tx.send(m).await.is_err() {
                break;
            }
        }
    };
    let client_writer = async move {
        while let Some(m) = to_client_rx.recv().await {
            if client_tx.send(m).await.is_err() {
                break;
            }
        }
    };
    let client_reader = {
        let (to_up, shared, mut stalled) = (to_up.clone(), shared.clone(), stalled.clone());
        async move {
            while let Some(Ok(m)) = client_rx.next().await {
                let close = m.is_close();
                if m.is_text() || m.is_binary() || close {
                    gate(&shared, &mut stalled).await;
                    if to_up.send(m).await.is_err() || close {
                        break;
                    }
                }
            }
        }
    };
    let up_reader = {
        let (shared, mut stalled, own_ids) = (shared.clone(), stalled.clone(), own_ids.clone());
        async move {
            while let Some(Ok(m)) = up_rx.next().await {
                if let Message::Text(text) = &m {
                    if let Ok(v) = serde_json::from_str::<Value>(text.as_str()) {
                        if let Some(id) = v.get("id").and_then(Value::as_u64) {
                            if lock(&own_ids).remove(&id) {
                                continue; // the reply to our own dismissal
                            }
                        }
                        if v.get("method").and_then(Value::as_str)
                            == Some("Page.javascriptDialogOpening")
                        {
                            let id = next_id.fetch_add(1, Ordering::SeqCst);
                            lock(&own_ids).insert(id);
                            let mut cmd = json!({"id": id, "method": "Page.handleJavaScriptDialog", "params": {"accept": false}});
                            if let Some(s) = v.get("sessionId") {
                                cmd["sessionId"] = s.clone();
                            }
                            shared.dismissed.fetch_add(1, Ordering::SeqCst);
                            if to_up.send(Message::text(cmd.to_string())).await.is_err() {
                                break;
                            }
                        }
                    }
                }
                let close = m.is_close();
                if m.is_text() || m.is_binary() || close {
                    gate(&shared, &mut stalled).await;
                    if to_client.send(m).await.is_err() || close {
                        break;
                    }
                }
            }
        }
    };
    // Whichever side ends first ends the pair; dropping the halves closes both sockets.
    tokio::select! {
        _ = up_writer => {}
        _ = client_writer => {}
        _ = client_reader => {}
        _ = up_reader => {}
    }
}
