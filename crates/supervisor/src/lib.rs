//! # supervisor
//!
//! Per-tab browser state over CDP (seed 000): native dialogs, the frame tree
//! with out-of-process iframes (OOPIFs) and their sessions, popups, console
//! errors; dialog policies; a registry of one supervisor per agent task.
//!
//! ## Design
//!
//! * One event-loop task per [`Supervisor`] reads every event of its
//!   connection in order (`Connection::subscribe_all`), keeps only its own
//!   sessions' events, and applies them to a state machine that never awaits.
//!   Follow-up CDP work (setting up a child session, answering by policy, the
//!   watchdog, attaching a popup) is spawned, so the loop keeps draining.
//! * Every change publishes an immutable [`SupervisorView`] through
//!   `arc-swap`: [`Supervisor::snapshot`] never waits for the loop, so a tool
//!   can report `dialog_pending` while the page's JS thread is frozen.
//! * Auto-attach is recursive and paused (`waitForDebuggerOnStart: true`):
//!   each child is set up (domains, the dialog bridge) and then resumed
//!   with `Runtime.runIfWaitingForDebugger`, even when setup fails, within
//!   [`SupervisorConfig::setup_timeout`] plus a short resume bound.
//! * Popups are caught paused at start by a per-connection target gate:
//!   browser-level `Target.setAutoAttach{waitForDebuggerOnStart, flatten,
//!   filter:[{type:"page"}]}`, switched on by the first supervisor on a
//!   connection. A new page target whose `openerId` is a supervisor's page
//!   (or one of its popups) is claimed by that supervisor, set up like any
//!   child (dialog handling and the bridge in place before its first script,
//!   and before `window.open` returns to the opener), then resumed; any
//!   other new page target (a tab someone else opened) is resumed at once and
//!   its extra session detached, as are the idle sessions Chromium attaches
//!   to tabs that already exist. Nothing stays paused: the gate resumes a
//!   claimed popup itself when its owner stops or overruns
//!   [`SupervisorConfig::setup_timeout`] plus the resume bound and a second.
//!   A browser that refuses browser-level auto-attach gets the older path:
//!   popups attached after `Target.targetCreated` (field case C28).
//! * Dialogs are answered on the top-level page (or popup) session, also
//!   those raised inside an OOPIF (Chromium rejects the OOPIF session).
//! * The dialog bridge ([`BridgeMode`], crate `bridge-script`) for hosted
//!   browsers whose proxy closes native dialogs: when on, every page, popup
//!   and OOPIF session gets `Fetch.enable` with the bridge host's patterns
//!   only and the bridge script before it resumes; a paused bridge request
//!   becomes a pending dialog with [`DialogPath::Bridge`], answered by
//!   [`Supervisor::respond`] with `Fetch.fulfillRequest` on the session that
//!   paused it. Forged requests get 403, at most
//!   `bridge_script::MAX_PENDING_DIALOGS` bridge dialogs are pending (more are
//!   dismissed at once), and native dialogs stay the backstop. `auto` turns
//!   it on when a native dialog is closed by someone else at once.
//! * A crash, a detach or a closed socket shows as `active: false` with a
//!   reason; pending dialogs are retired as `remote`; a lost socket or a
//!   detached page session is recovered with backoff and a bounded number of
//!   consecutive failures.
//!
//! ## Example
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use cdp_transport::{Connection, ConnectOptions, TargetId};
//! use supervisor::{Supervisor, SupervisorConfig};
//! let mock = cdp_mock::MockServer::start().await;
//! mock.on("Target.attachToTarget", serde_json::json!({"sessionId": "S1"}));
//! let conn = Connection::connect(&mock.ws_url(), ConnectOptions::default()).await?;
//! let config = SupervisorConfig::default().with_policy_name("auto_dismiss")?;
//! let sup = Supervisor::attach(conn, TargetId::new("T1"), config).await?;
//! let view = sup.snapshot();
//! assert!(view.active && view.pending_dialogs.is_empty());
//! # Ok(()) }
//! ```

mod config;
mod error;
mod gate;
mod registry;
mod state;
mod supervisor;
mod view;

pub use config::{BridgeMode, DialogAction, DialogPolicy, ReconnectPolicy, SupervisorConfig};
pub use error::{Error, Result};
pub use registry::Registry;
pub use state::{now_ms, HANDLE_DIALOG};
pub use supervisor::{DialogEvent, FrameContext, Route, Supervisor};
pub use view::{
    ClosedBy, ClosedDialog, ConsoleError, DialogPath, FrameTreeView, FrameView, PendingDialog,
    PopupView, SupervisorView, CONSOLE_ERRORS_CAP, FRAME_CHILDREN_CAP, MAX_OOPIF_DEPTH,
    RECENT_DIALOGS_CAP,
};
