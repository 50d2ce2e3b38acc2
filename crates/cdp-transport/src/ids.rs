//! Newtype ids with CDP's spelling.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::Arc;

macro_rules! string_id {
    ($(#[$m:meta])* $name:ident) => {
        $(#[$m])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(Arc<str>);

        impl $name {
            /// Wraps a raw id string as sent by the browser.
            pub fn new(id: impl AsRef<str>) -> Self {
                Self(Arc::from(id.as_ref()))
            }
            /// The raw id string.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:?})", stringify!($name), &*self.0)
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }
        impl From<&str> for $name {
            fn from(s: &str) -> Self {
                Self::new(s)
            }
        }
        impl From<String> for $name {
            fn from(s: String) -> Self {
                Self::new(s)
            }
        }
    };
}

string_id!(
    /// `Target.SessionID`: a flattened session, routed by the `sessionId` envelope field.
    SessionId
);
string_id!(
    /// `Target.TargetID`. For an OOPIF target it equals the iframe's `FrameId`.
    TargetId
);
string_id!(
    /// `Page.FrameId`.
    FrameId
);
string_id!(
    /// `Network.LoaderId`: changes with every new document in a frame.
    LoaderId
);

/// `DOM.BackendNodeId`: stable for a node's lifetime within one renderer process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct BackendNodeId(pub i64);

/// `Runtime.ExecutionContextId`: unique only within one renderer process, so key it by session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ExecutionContextId(pub i64);
