//! # evaluate
//!
//! Deadline-bounded JavaScript evaluation over CDP and AX-tree refs mapped
//! to backend nodes.
//!
//! Module layout:
//! - `engine` (and `engine/*` files, one per job): budgeted evaluate;
//! - `refs` (and `refs/*` files): the AX snapshot, refs, element actions;
//!   they use the engine only through its public API;
//! - [`terminate`]: the one place `Runtime.terminateExecution` is sent and
//!   settled; callers outside this crate go through [`Engine::terminate`];
//! - [`facts`]: [`PageFacts`], the seam through which a caller that tracks
//!   the page's frames (a supervisor) answers what the refs would otherwise
//!   ask Chromium on every action;
//! - `error`: the crate's one error enum, shared by all.
//!
//! ## Budgeted evaluate
//!
//! [`Engine`] runs JavaScript in one tab on its own CDP sessions under one
//! [`Budget`] (deadline + cancellation) created by the caller. It never blocks
//! the tab: a runaway script is terminated (`Runtime.terminateExecution`); the
//! session is kept when a probe shows the termination took, and otherwise
//! detached and replaced at once in the background; a promise that never settles ends in the
//! page; a dialog or navigation ends the evaluate at once with a typed error;
//! results come back as tagged JSON that keeps `undefined`, `NaN`, `-0`,
//! BigInt, DOM nodes, `Map`/`Set`, cycles and `window` apart. See
//! [`engine`] for the design and the value encoding, [`Error::code`] for the
//! stable error codes.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")] async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use evaluate::{Budget, Engine, EngineConfig, EvalRequest};
//! use serde_json::json;
//! // A scripted browser: one page target `PAGE` whose main frame has context 1.
//! let mock = cdp_mock::MockServer::start().await;
//! mock.on("Target.attachToTarget", json!({"sessionId": "S1"}));
//! mock.on_fn("Runtime.enable", |r| {
//!     let ctx = json!({"context": {"id": 1, "auxData": {"isDefault": true, "frameId": "PAGE"}}});
//!     Some(cdp_mock::Action::EventsThenReply(
//!         vec![("Runtime.executionContextCreated".into(), ctx, r.session_id.clone())],
//!         json!({}),
//!     ))
//! });
//! mock.on("Runtime.evaluate", json!({"result": {"type": "object",
//!     "value": {"$tw": "ok", "value": 42, "truncated": false}}}));
//!
//! let conn = cdp_transport::Connection::connect(&mock.ws_url(), Default::default()).await?;
//! let engine = Engine::new(conn, "PAGE".into(), EngineConfig::default());
//! let budget = Budget::from_timeout_ms(Some(2_000))?;
//! let out = engine.evaluate(EvalRequest::new("6 * 7"), &budget).await?;
//! assert_eq!(out.value, 42);
//! # Ok(()) }
//! ```

mod busy;
pub mod engine;
pub mod error;
pub mod facts;
pub mod refs;
pub mod terminate;

pub use busy::BUSY_AFTER_MAX;
pub use cdp_transport::Budget;
pub use engine::{
    Engine, EngineConfig, EngineMetrics, EvalOutcome, EvalRequest, EvalTarget, SourceForm,
};
pub use error::{DialogInfo, Error, Result, TimeoutKind};
pub use facts::{DialogRecord, PageFacts, TerminateVia};
pub use terminate::{PageScript, Termination};
