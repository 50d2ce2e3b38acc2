//! # evaluate
//!
//! Deadline-bounded JavaScript evaluation over CDP (issue 5) and AX-tree refs
//! mapped to backend nodes (issue 6).
//!
//! Module layout, so two people can work side by side:
//! - `engine` (and any `engine_*` files): budgeted evaluate (issue 5);
//! - `refs` (and any `refs/*` files): the AX snapshot, refs, element actions (issue 6);
//! - `error`: the crate's one error enum, shared by both.

pub mod engine;
mod engine_js;
pub mod error;
pub mod refs;

pub use cdp_transport::Budget;
pub use engine::{
    Engine, EngineConfig, EngineMetrics, EvalOutcome, EvalRequest, EvalTarget, SourceForm,
};
pub use error::{DialogInfo, Error, Result, TimeoutKind};
