//! Events: the envelope is decoded by the transport, the payload by the subscriber.

use crate::ids::SessionId;
use serde::de::DeserializeOwned;
use std::sync::Arc;
use tokio::sync::broadcast;

/// One CDP event as it came off the socket.
///
/// Only the envelope (`method`, `sessionId`) is interpreted; `params` stays raw
/// JSON until a subscriber calls [`Event::decode`]. Unknown methods, fields and
/// enum values therefore never end anything (field case C23).
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// CDP method, e.g. `Page.javascriptDialogOpening`.
    pub method: String,
    /// The flattened session it arrived on; `None` for the browser session.
    pub session_id: Option<SessionId>,
    /// The raw `params` object (`null` when absent).
    pub params: serde_json::Value,
}

/// A typed decode of an event's `params` failed; the raw event is still in hand.
#[derive(Debug, thiserror::Error)]
#[error("cannot decode {method} params as {type_name}: {source}")]
pub struct EventDecodeError {
    /// The event's method.
    pub method: String,
    /// The Rust type that was asked for.
    pub type_name: &'static str,
    /// serde's reason.
    #[source]
    pub source: serde_json::Error,
}

impl Event {
    /// Decodes `params` into `T` (for example a `chromiumoxide_cdp` event type).
    ///
    /// # Errors
    /// [`EventDecodeError`] when the payload does not fit `T`: the caller keeps
    /// `self.params` as the fallback.
    pub fn decode<T: DeserializeOwned>(&self) -> Result<T, EventDecodeError> {
        T::deserialize(&self.params).map_err(|source| EventDecodeError {
            method: self.method.clone(),
            type_name: std::any::type_name::<T>(),
            source,
        })
    }
    /// `params[key]` as a string, if present.
    pub fn str_param(&self, key: &str) -> Option<&str> {
        self.params.get(key).and_then(|v| v.as_str())
    }
}

/// Why [`EventStream::recv`] returned no event.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecvError {
    /// The subscriber fell behind and `n` events were dropped for it; the
    /// stream goes on with the oldest event still buffered.
    #[error("subscriber lagged: {0} events dropped")]
    Lagged(u64),
    /// The session or connection is closed; no more events will come.
    #[error("event stream closed")]
    Closed,
}

/// A bounded subscription to the events of one session or of the whole connection.
///
/// A slow subscriber sees [`RecvError::Lagged`]; it never stalls the socket.
#[derive(Debug)]
pub struct EventStream {
    pub(crate) rx: Option<broadcast::Receiver<Arc<Event>>>,
}

impl EventStream {
    /// The next event.
    ///
    /// # Errors
    /// [`RecvError::Lagged`] after an overflow (call again to continue),
    /// [`RecvError::Closed`] once the source is gone.
    ///
    /// # Cancel safety
    /// Cancel safe: dropping the future loses no event.
    pub async fn recv(&mut self) -> Result<Arc<Event>, RecvError> {
        let Some(rx) = self.rx.as_mut() else {
            return Err(RecvError::Closed);
        };
        match rx.recv().await {
            Ok(ev) => Ok(ev),
            Err(broadcast::error::RecvError::Lagged(n)) => Err(RecvError::Lagged(n)),
            Err(broadcast::error::RecvError::Closed) => Err(RecvError::Closed),
        }
    }

    /// Waits for the next event with `method`, skipping lag notices.
    ///
    /// # Errors
    /// [`RecvError::Closed`] when the source ends first.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn next_method(&mut self, method: &str) -> Result<Arc<Event>, RecvError> {
        loop {
            match self.recv().await {
                Ok(ev) if ev.method == method => return Ok(ev),
                Ok(_) | Err(RecvError::Lagged(_)) => continue,
                Err(e) => return Err(e),
            }
        }
    }

    /// Returns an event already buffered, without waiting.
    pub fn try_recv(&mut self) -> Option<Result<Arc<Event>, RecvError>> {
        let rx = self.rx.as_mut()?;
        match rx.try_recv() {
            Ok(ev) => Some(Ok(ev)),
            Err(broadcast::error::TryRecvError::Empty) => None,
            Err(broadcast::error::TryRecvError::Lagged(n)) => Some(Err(RecvError::Lagged(n))),
            Err(broadcast::error::TryRecvError::Closed) => Some(Err(RecvError::Closed)),
        }
    }
}
