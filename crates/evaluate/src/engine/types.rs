//! The engine's public types: its settings, one request and where it
//! runs, how the source was read, a finished evaluate, and the counters.
//! All are re-exported from [`crate::engine`] (and the crate root).

use cdp_transport::{BackendNodeId, FrameId, TargetId};
use serde::Serialize;
use serde_json::Value;
use std::time::Duration;

/// Engine settings. Every field has a documented default ([`EngineConfig::default`]).
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct EngineConfig {
    /// When false every evaluate fails with `evaluate_disabled`. Default `true`.
    pub evaluate_enabled: bool,
    /// Size cap of a result, in characters of serialized output (approximate,
    /// counted in the page). Over the cap the value is cut and a `truncated`
    /// marker is put in its place. Default 1 MiB (1 048 576).
    pub max_result_chars: usize,
    /// Nesting depth past which the serializer stops with a `truncated`
    /// marker of kind `depth`. Default 32.
    pub max_depth: u32,
    /// Items per array, map, set, node list or object keys. Default 1000.
    pub max_items: u32,
    /// Length of text excerpts (node text, function source, messages), characters. Default 200.
    pub text_excerpt_chars: u32,
    /// After `Runtime.terminateExecution`, how long to wait for the running
    /// call to end. Ended in time: the session is kept (after a health
    /// probe); not ended: it is detached and replaced. Also how long a
    /// promise pending at the deadline waits for the idle probe that decides
    /// whether anything still runs (C14). Default 100 ms.
    pub terminate_grace: Duration,
    /// Chromium's own `timeout` parameter of `Runtime.evaluate` is the
    /// remaining budget plus this margin (a second line only). Default 250 ms.
    pub chromium_timeout_margin: Duration,
    /// Before the script is sent, a renderer-bound setup command
    /// (`Runtime.enable`, `Page.getFrameTree`, `DOM.resolveNode`) that has
    /// no answer after half the budget, at most this long, means the
    /// renderer is busy with the page's own script: its session gets
    /// `Runtime.terminateExecution` and the evaluate goes on within its
    /// budget (step 1 of the module docs). Default 2 s ([`crate::BUSY_AFTER_MAX`]).
    pub busy_after_max: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            evaluate_enabled: true,
            max_result_chars: 1024 * 1024,
            max_depth: 32,
            max_items: 1000,
            text_excerpt_chars: 200,
            terminate_grace: Duration::from_millis(100),
            chromium_timeout_margin: Duration::from_millis(250),
            busy_after_max: crate::busy::BUSY_AFTER_MAX,
        }
    }
}

impl EngineConfig {
    /// Sets [`EngineConfig::evaluate_enabled`].
    pub fn evaluate_enabled(mut self, on: bool) -> Self {
        self.evaluate_enabled = on;
        self
    }
    /// Sets [`EngineConfig::max_result_chars`].
    pub fn max_result_chars(mut self, n: usize) -> Self {
        self.max_result_chars = n;
        self
    }
    /// Sets [`EngineConfig::max_depth`].
    pub fn max_depth(mut self, n: u32) -> Self {
        self.max_depth = n;
        self
    }
    /// Sets [`EngineConfig::terminate_grace`].
    pub fn terminate_grace(mut self, d: Duration) -> Self {
        self.terminate_grace = d;
        self
    }
    /// Sets [`EngineConfig::busy_after_max`].
    pub fn busy_after_max(mut self, d: Duration) -> Self {
        self.busy_after_max = d;
        self
    }
}

/// Where an evaluate runs: the main world of one frame.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum EvalTarget {
    /// The page target's main frame.
    MainFrame,
    /// A frame of the page target, by frame id. A same-process frame runs on
    /// the page session; an OOPIF frame id is recognised (its target id equals
    /// its frame id) and routed to its own session.
    Frame(FrameId),
    /// An OOPIF target, and optionally a same-process frame inside it
    /// (default: the OOPIF's own frame, whose id equals `target_id`).
    Oopif {
        /// The OOPIF target (`type: "iframe"`).
        target_id: TargetId,
        /// A frame in that target; `None` = the target's main frame.
        frame_id: Option<FrameId>,
    },
}

/// One evaluate request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalRequest {
    /// JavaScript: an expression, a function literal, or statements (see [`SourceForm`]).
    pub source: String,
    /// The frame whose main world runs it.
    pub target: EvalTarget,
    /// Element evaluate: the node is resolved with `DOM.resolveNode` on the
    /// target's session and passed as the function's first argument (and `this`).
    pub element: Option<BackendNodeId>,
}

impl EvalRequest {
    /// A page evaluate in the main frame.
    pub fn new(source: impl Into<String>) -> Self {
        Self {
            source: source.into(),
            target: EvalTarget::MainFrame,
            element: None,
        }
    }
    /// Sets [`EvalRequest::target`].
    pub fn target(mut self, target: EvalTarget) -> Self {
        self.target = target;
        self
    }
    /// Sets [`EvalRequest::element`].
    pub fn element(mut self, node: BackendNodeId) -> Self {
        self.element = Some(node);
        self
    }
}

/// How the engine read the source. Nothing runs twice: a form that does not
/// parse runs nothing, and only then is the next form sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum SourceForm {
    /// An expression (may use `await`); its value is returned.
    Expression,
    /// A function literal (`() => …`, `function …`, `async …`); it is called
    /// (with the element for element evaluate) and its value returned.
    Function,
    /// Statements, run as an async function body; `return` gives the value
    /// (`undefined` otherwise). Used for statements with a top-level
    /// `return` or any `await`, for element evaluates, and for statements
    /// that do not parse as a script.
    Statements,
    /// Statements run as a script (a direct `eval` in the wrapper): the
    /// value is the completion value, i.e. that of the last expression
    /// statement, as the DevTools console gives it (`var x = 1; x` is 1).
    /// A completion value that is a promise is awaited under the budget
    /// like any other. Page evaluates of statements without a top-level
    /// `return` and without `await` go this way first; one that does not
    /// parse as a script ran nothing and goes as [`SourceForm::Statements`].
    Script,
}

/// A finished evaluate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EvalOutcome {
    /// The value, as tagged JSON (see the module docs for the `$type` table).
    pub value: Value,
    /// True when the size cap, depth limit or item limit cut the value.
    pub truncated: bool,
    /// How the source was read.
    pub form: SourceForm,
    /// The frame whose main world ran it.
    pub frame_id: FrameId,
    /// The target whose session ran it (the page, or an OOPIF).
    pub target_id: TargetId,
    /// What the engine had to do besides running the script, in words:
    /// e.g. that the page's own script kept the renderer busy and was
    /// stopped with `Runtime.terminateExecution` before the script could
    /// run. Empty in the common case.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Wall time of the whole evaluate, including attach and any compile check.
    #[serde(skip)]
    pub elapsed: Duration,
}

/// A snapshot of the engine's counters. All counts since the engine was made.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EngineMetrics {
    /// Evaluates started (refused ones included).
    pub evaluations: u64,
    /// Evaluates that returned a value.
    pub succeeded: u64,
    /// `timeout` errors (every kind).
    pub timeouts: u64,
    /// Of those, promises that never settled (nothing to terminate).
    pub promise_timeouts: u64,
    /// `cancelled` errors.
    pub cancellations: u64,
    /// `Runtime.terminateExecution` requests sent.
    pub terminations: u64,
    /// Engine sessions detached after a termination.
    pub detaches: u64,
    /// Evaluates ended by a dialog.
    pub dialog_interruptions: u64,
    /// Evaluates ended by a navigation or a destroyed execution context.
    pub navigations: u64,
    /// Scripts that threw.
    pub js_exceptions: u64,
    /// Sources that did not parse.
    pub invalid_sources: u64,
    /// Evaluates refused by the `evaluate_enabled` gate.
    pub refused: u64,
    /// Fallbacks reported by callers ([`Engine::record_fallback`](crate::Engine::record_fallback)), e.g. a ref
    /// without a backend node id resolved another way.
    pub fallbacks: u64,
    /// Fallback counts by reason.
    pub fallback_reasons: std::collections::BTreeMap<String, u64>,
    /// Sum of evaluate wall times, µs.
    pub total_duration_us: u64,
    /// Longest evaluate wall time, µs.
    pub max_duration_us: u64,
}
