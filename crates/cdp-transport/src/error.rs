//! The transport's one error type.

use crate::ids::{SessionId, TargetId};
use std::time::Duration;

/// Result alias with [`Error`] as the default error.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a session stopped routing calls.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SessionCloseReason {
    /// `Target.detachedFromTarget` arrived (or we detached).
    Detached,
    /// `Target.targetDestroyed` for the session's target.
    TargetDestroyed,
    /// The socket closed.
    ConnectionClosed,
}

impl std::fmt::Display for SessionCloseReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::Detached => "detached",
            Self::TargetDestroyed => "target destroyed",
            Self::ConnectionClosed => "connection closed",
        })
    }
}

/// Every way a CDP call or connection can fail.
///
/// Each variant names the method, session or endpoint involved. Endpoints are
/// always shown redacted (no user info, no query values).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The endpoint string is not a usable CDP endpoint.
    #[error("invalid endpoint {endpoint}: {reason}")]
    InvalidEndpoint {
        /// The endpoint, redacted.
        endpoint: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Connecting (HTTP discovery or WebSocket handshake) failed.
    #[error("cannot connect to {endpoint}: {reason}")]
    Connect {
        /// The endpoint, redacted.
        endpoint: String,
        /// What failed.
        reason: String,
    },
    /// Connecting took longer than the connect timeout.
    #[error("connecting to {endpoint} timed out after {timeout:?}")]
    ConnectTimeout {
        /// The endpoint, redacted.
        endpoint: String,
        /// The connect timeout.
        timeout: Duration,
    },
    /// The browser answered the call with a CDP error object.
    #[error("{method} failed: {message} (code {code})")]
    Protocol {
        /// CDP method, e.g. `Runtime.evaluate`.
        method: String,
        /// CDP error code (`-32000` for most server errors).
        code: i64,
        /// CDP error message.
        message: String,
    },
    /// The call's budget ran out before a reply came.
    #[error("{method} timed out after {elapsed:?} (budget {budget:?})")]
    Timeout {
        /// CDP method.
        method: String,
        /// Time waited.
        elapsed: Duration,
        /// The whole budget the call ran under.
        budget: Duration,
    },
    /// The call's budget was cancelled.
    #[error("{method} was cancelled after {elapsed:?}")]
    Cancelled {
        /// CDP method.
        method: String,
        /// Time waited.
        elapsed: Duration,
    },
    /// The session the call was routed to is gone.
    #[error("{method} on session {session_id}: session closed ({reason})")]
    SessionClosed {
        /// CDP method.
        method: String,
        /// The session.
        session_id: SessionId,
        /// Why it closed.
        reason: SessionCloseReason,
    },
    /// The session's renderer crashed (`Inspector.targetCrashed`). Chromium
    /// itself would leave the call hanging until the next navigation.
    #[error("{method} on session {session_id}: target {target_id} crashed")]
    TargetCrashed {
        /// CDP method.
        method: String,
        /// The session.
        session_id: SessionId,
        /// The crashed target.
        target_id: TargetId,
    },
    /// The WebSocket is closed; every pending and later call fails with this.
    #[error("connection closed: {reason}")]
    ConnectionClosed {
        /// Why (peer closed, I/O error, message over the size limit, ...).
        reason: String,
    },
    /// A message exceeded the configured size limit.
    #[error("message of {size} bytes exceeds the limit of {limit} bytes (ConnectOptions::max_message_size)")]
    MessageTooLarge {
        /// Size of the message, bytes (0 when unknown).
        size: usize,
        /// The configured limit, bytes.
        limit: usize,
    },
    /// The reply did not decode into the command's response type.
    #[error("{method}: cannot decode the reply: {source}")]
    Decode {
        /// CDP method.
        method: String,
        /// The decode failure.
        #[source]
        source: serde_json::Error,
    },
    /// Serializing the command's parameters failed.
    #[error("{method}: cannot encode the parameters: {source}")]
    Encode {
        /// CDP method.
        method: String,
        /// The encode failure.
        #[source]
        source: serde_json::Error,
    },
    /// No Chromium binary was found.
    #[error("no Chromium found (tried {tried}); set TABWARDEN_CHROME to its path or run `cargo xtask setup`")]
    ChromeNotFound {
        /// The names and paths tried, comma separated.
        tried: String,
    },
    /// Chromium started but did not give a DevTools endpoint.
    #[error("Chromium launch failed: {reason}")]
    Launch {
        /// What went wrong (exit status, stderr tail, timeout).
        reason: String,
    },
}

impl Error {
    /// True for [`Error::Timeout`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout { .. })
    }
    /// True for [`Error::Cancelled`].
    pub fn is_cancelled(&self) -> bool {
        matches!(self, Error::Cancelled { .. })
    }
    /// True when the connection is gone (closed socket).
    pub fn is_connection_closed(&self) -> bool {
        matches!(self, Error::ConnectionClosed { .. })
    }
    /// True when the session is gone or its target crashed.
    pub fn is_session_gone(&self) -> bool {
        matches!(
            self,
            Error::SessionClosed { .. } | Error::TargetCrashed { .. }
        )
    }
    /// The CDP error message for [`Error::Protocol`].
    pub fn protocol_message(&self) -> Option<&str> {
        match self {
            Error::Protocol { message, .. } => Some(message),
            _ => None,
        }
    }
    /// A copy of this error for fan-out to several waiters (sources become text).
    pub(crate) fn duplicate(&self) -> Error {
        match self {
            Error::ConnectionClosed { reason } => Error::ConnectionClosed {
                reason: reason.clone(),
            },
            Error::MessageTooLarge { size, limit } => Error::MessageTooLarge {
                size: *size,
                limit: *limit,
            },
            other => Error::ConnectionClosed {
                reason: other.to_string(),
            },
        }
    }
}
