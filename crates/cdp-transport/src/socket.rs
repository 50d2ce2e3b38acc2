//! The socket task: the one owner of the WebSocket. It writes queued
//! outgoing messages, hands every incoming text (or UTF-8 binary) message to
//! the routing table, and on any end (our close, the last handle dropped, the
//! peer, an I/O error, the size limit) fails everything through
//! `Core::close_all`.

use crate::connection::ConnWeak;
use crate::error::Error;
use crate::routing::{Core, ALL_HANDLES_DROPPED, CLOSED_BY_CLIENT};
use futures_util::{SinkExt, StreamExt};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::{self, Message};
use tracing::warn;

/// Runs the socket `ws` of the connection `core` until it ends; `out_rx`
/// carries outgoing text, `shutdown` is [`Connection::close`](crate::Connection::close)
/// (or the last handle dropping), `weak` builds the `Session`s announced by
/// `Target.attachedToTarget` without keeping the connection alive.
pub(crate) async fn socket_task<S>(
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
