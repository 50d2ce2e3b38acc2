//! # cdp-transport
//!
//! A Chrome DevTools Protocol client: one WebSocket, many flattened sessions,
//! typed calls through `chromiumoxide_cdp`, tolerant event decoding and a
//! deadline on every call; plus a launcher for a local headless Chromium.
//!
//! ## Design
//!
//! * One task owns the socket. [`Connection`] and [`Session`] are cheap
//!   `Clone + Send + Sync` handles; a call inserts a oneshot into the routing
//!   table, sends its message, and waits for the reply, its [`Budget`]'s
//!   deadline, or its cancellation, whichever comes first.
//! * Only the envelope (`id`, `method`, `sessionId`) is decoded by the
//!   transport. Event payloads stay raw JSON until a subscriber asks for a
//!   type ([`Event::decode`]); a failed decode is the subscriber's to handle,
//!   so unknown events, fields and enum values never end anything (field case C23).
//! * A peer that is gone fails calls at once, not at their deadline:
//!   `Target.detachedFromTarget` fails that session's calls,
//!   `Inspector.targetCrashed` fails the calls of every session on that target
//!   (Chromium itself leaves them hanging, field case C24), a closed socket
//!   fails everything.
//! * Subscriptions are bounded broadcast queues: a slow subscriber sees
//!   [`RecvError::Lagged`] and never stalls the socket.
//! * Endpoint credentials (user info, query values) are redacted in every
//!   `Debug`, `Display`, error and log line.
//! * Endpoints: `ws://` and `wss://` WebSocket URLs, or `http://` and
//!   `https://` URLs resolved through `/json/version`; hosted browser fleets
//!   are usually `wss://`. TLS is rustls with the ring provider, passed
//!   explicitly (no process-wide default provider is needed or consulted),
//!   trusting the webpki roots plus
//!   [`ConnectOptions::extra_root_certificates`] (DER, for a private CA). A
//!   certificate that is not trusted is an [`Error::Connect`] that says so.
//!
//! ## Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use cdp_transport::{Connection, ConnectOptions};
//! use std::time::Duration;
//! let mock = cdp_mock::MockServer::start().await;
//! mock.on("Browser.getVersion", serde_json::json!({"product": "Mock/1.0"}));
//! let conn = Connection::connect(&mock.ws_url(), ConnectOptions::default()).await?;
//! let v = conn.browser().call("Browser.getVersion", serde_json::json!({}), Duration::from_secs(1)).await?;
//! assert_eq!(v["product"], "Mock/1.0");
//! # Ok(()) }
//! ```

mod budget;
mod connection;
mod discovery;
mod endpoint;
mod envelope;
mod error;
mod event;
#[cfg(feature = "fuzz")]
mod fuzz;
mod ids;
pub mod launcher;
mod routing;
mod session;
mod socket;
mod tls;

pub use budget::{Budget, BudgetRangeError, DEFAULT_TIMEOUT_MS, MAX_TIMEOUT_MS, MIN_TIMEOUT_MS};
pub use connection::{ConnectOptions, Connection, DEFAULT_MAX_MESSAGE_SIZE};
pub use endpoint::{redact, Endpoint};
pub use error::{Error, Result, SessionCloseReason};
pub use event::{Event, EventDecodeError, EventStream, RecvError};
#[doc(hidden)]
#[cfg(feature = "fuzz")]
pub use fuzz::fuzz_decode_envelope;
pub use ids::{BackendNodeId, ExecutionContextId, FrameId, LoaderId, SessionId, TargetId};
pub use launcher::{LaunchOptions, LaunchedChrome};
pub use session::{AttachedTarget, Session};

/// Re-exported so callers name command types without a direct dependency.
pub use chromiumoxide_cdp::cdp;
/// Re-exported `chromiumoxide_types::Command`, the trait every typed command implements.
pub use chromiumoxide_types::Command;
/// Re-exported cancellation token type used by [`Budget`].
pub use tokio_util::sync::CancellationToken;
