//! The seam through which `evaluate` learns page facts that an owner of the
//! tab's state (a supervisor) already tracks, instead of asking Chromium on
//! every action.
//!
//! Used alone, `evaluate` needs no implementation: without one, each fact
//! is read from Chromium when needed (`Page.getFrameTree` for a loader).

use cdp_transport::{FrameId, LoaderId};

/// Facts about a page's frames, answered from state the implementer keeps
/// current from the page's own events. Every method answers at once, with
/// no CDP call: `None` means "not known here", and the caller asks Chromium.
pub trait PageFacts: Send + Sync + 'static {
    /// The loader (`Network.LoaderId`) of the document frame `frame` shows
    /// now (`Page.frameNavigated` of the session that owns the frame).
    fn loader_of(&self, frame: &FrameId) -> Option<LoaderId>;
}
