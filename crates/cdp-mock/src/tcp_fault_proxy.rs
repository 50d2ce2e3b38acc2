//! A plain loopback TCP relay with fault switches, for fault-injection tests.
//!
//! Unlike [`crate::dismiss_proxy::DismissProxy`] it does not look inside the
//! stream at all (it neither parses WebSocket frames nor answers dialogs): it
//! copies bytes both ways between each client and its own upstream TCP
//! connection, as a load balancer or an SSH tunnel would. The switches:
//!
//! * [`TcpFaultProxy::cut`]: drop every open socket pair at once (no
//!   WebSocket close frame; the peers see EOF or a reset). New clients can
//!   still connect afterwards, so a reconnect through the same URL works.
//! * [`TcpFaultProxy::set_delay`]: a delay line: every chunk read is
//!   forwarded `delay` after it arrived (latency, not a throughput cap:
//!   chunks that arrive together leave together).
//! * [`TcpFaultProxy::set_stalled`]: stop forwarding but keep both sockets
//!   open (a hung middlebox); bytes wait in bounded queues and flow again
//!   when un-stalled.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::AbortHandle;
use tokio::time::Instant;

/// Chunks queued per direction before the reader waits (bounded queue).
const QUEUE: usize = 256;
/// Largest chunk read at once, bytes.
const CHUNK: usize = 64 * 1024;

#[derive(Default)]
struct Shared {
    delay_ms: AtomicU64,
    connections: AtomicUsize,
    tasks: Mutex<Vec<AbortHandle>>,
}

/// A running relay. Dropping it stops it and drops every socket.
pub struct TcpFaultProxy {
    port: u16,
    upstream: String,
    shared: Arc<Shared>,
    stalled: watch::Sender<bool>,
    accept_task: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for TcpFaultProxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpFaultProxy")
            .field("port", &self.port)
            .finish_non_exhaustive()
    }
}

impl Drop for TcpFaultProxy {
    fn drop(&mut self) {
        self.accept_task.abort();
        self.cut();
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// `host:port` of a `ws://host:port/path` (or `http://…`) URL.
fn authority(url: &str) -> String {
    let rest = url.split_once("://").map(|(_, r)| r).unwrap_or(url);
    rest.split('/').next().unwrap_or(rest).to_string()
}

impl TcpFaultProxy {
    /// Starts listening on `127.0.0.1:0`. Each client gets its own TCP
    /// connection to the host and port of `upstream_url` (a `ws://` or
    /// `http://` URL); when that connect fails the client is closed.
    ///
    /// # Panics
    /// When no loopback port can be bound (test support only).
    pub async fn start(upstream_url: &str) -> TcpFaultProxy {
        #[allow(clippy::expect_used)]
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        #[allow(clippy::expect_used)]
        let port = listener.local_addr().expect("local addr").port();
        let shared = Arc::new(Shared::default());
        let (stalled, _) = watch::channel(false);
        let target = authority(upstream_url);
        let accept_task = tokio::spawn({
            let (shared, stalled) = (shared.clone(), stalled.clone());
            async move {
                while let Ok((client, _)) = listener.accept().await {
                    let _ = client.set_nodelay(true);
                    let (shared2, stalled, target) =
                        (shared.clone(), stalled.subscribe(), target.clone());
                    let task = tokio::spawn(async move {
                        let Ok(up) = TcpStream::connect(&target).await else {
                            return;
                        };
                        let _ = up.set_nodelay(true);
                        shared2.connections.fetch_add(1, Ordering::SeqCst);
                        relay(client, up, shared2, stalled).await;
                    });
                    lock(&shared.tasks).push(task.abort_handle());
                }
            }
        });
        TcpFaultProxy {
            port,
            upstream: upstream_url.to_string(),
            shared,
            stalled,
            accept_task,
        }
    }

    /// The URL clients connect to: `upstream_url` with its host and port
    /// replaced by `127.0.0.1:<port>` (scheme and path kept).
    pub fn ws_url(&self) -> String {
        let (scheme, rest) = self
            .upstream
            .split_once("://")
            .unwrap_or(("ws", self.upstream.as_str()));
        let path = rest.find('/').map(|i| &rest[i..]).unwrap_or("/");
        format!("{scheme}://127.0.0.1:{}{path}", self.port)
    }

    /// The local port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// How many client connections were relayed so far.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Drops every open socket pair at once. New clients can still connect.
    pub fn cut(&self) {
        for t in lock(&self.shared.tasks).drain(..) {
            t.abort();
        }
    }

    /// Forwards every chunk `delay` after it arrived, both ways (zero: none).
    pub fn set_delay(&self, delay: Duration) {
        self.shared.delay_ms.store(
            u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
            Ordering::SeqCst,
        );
    }

    /// `true`: stop forwarding (sockets stay open, bytes wait); `false`: go on.
    pub fn set_stalled(&self, stalled: bool) {
        self.stalled.send_replace(stalled);
    }
}

/// One direction: read chunks, stamp them, and write each one `delay` after
/// it arrived, waiting while stalled. Ends on EOF or an I/O error.
async fn pipe(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    shared: Arc<Shared>,
    mut stalled: watch::Receiver<bool>,
) {
    let (tx, mut rx) = mpsc::channel::<(Instant, Vec<u8>)>(QUEUE);
    let reader = async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send((Instant::now(), buf[..n].to_vec())).await.is_err() {
                        break;
                    }
                }
            }
        }
    };
    let writer = async move {
        while let Some((at, bytes)) = rx.recv().await {
            let _ = stalled.wait_for(|s| !*s).await;
            let ms = shared.delay_ms.load(Ordering::SeqCst);
            if ms > 0 {
                tokio::time::sleep_until(at + Duration::from_millis(ms)).await;
            }
            if to.write_all(&bytes).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    };
    // The writer drains what the reader queued before its EOF.
    tokio::join!(reader, writer);
}

async fn relay(
    client: TcpStream,
    upstream: TcpStream,
    shared: Arc<Shared>,
    stalled: watch::Receiver<bool>,
) {
    let (cr, cw) = client.into_split();
    let (ur, uw) = upstream.into_split();
    // Whichever direction ends first ends the pair (dropping every half).
    tokio::select! {
        _ = pipe(cr, uw, shared.clone(), stalled.clone()) => {}
        _ = pipe(ur, cw, shared, stalled) => {}
    }
}
