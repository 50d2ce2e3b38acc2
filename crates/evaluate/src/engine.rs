//! Budgeted evaluate (issue 5, seed 004).
//!
//! An [`Engine`] evaluates JavaScript in one tab on its **own** flattened CDP
//! sessions (never the supervisor's), so that ending a runaway script costs
//! nothing else. Sessions are attached lazily and kept warm; one is replaced
//! only when a termination did not take.
//!
//! ## How one evaluate runs
//!
//! 1. The page session is attached (`Target.attachToTarget{flatten:true}`)
//!    with `Runtime` and `Page` enabled. A background task per session keeps
//!    the frame → main-world execution context table (`auxData.isDefault`,
//!    `auxData.frameId`; keyed by session because context ids are per process)
//!    and the open dialog, if any. An OOPIF gets its own session the same way
//!    (its target id equals its frame id).
//!
//!    **A renderer busy with its page's own script** (a loop that never
//!    yields) holds these renderer-bound setup commands (`Runtime.enable`,
//!    `Page.enable`, `Page.getFrameTree`, `DOM.resolveNode`). One that has
//!    no answer after half the budget, at most
//!    [`EngineConfig::busy_after_max`] (2 s), or whose budget runs out,
//!    means nothing of ours runs there: the target gets
//!    `Runtime.terminateExecution` once, on the session the
//!    [`Engine::set_terminate_route`] names (a session the renderer bound
//!    before it got busy; one attached while the script runs cannot reach
//!    it), and the evaluate goes on within its budget: the held commands
//!    answer once the script has stopped, and the script is sent only after
//!    that termination is settled (acknowledged, or taken by a probe), so it
//!    never ends the user's script. The result then carries a note
//!    ([`EvalOutcome::notes`]); at the deadline it is `page_busy`, which
//!    says a script was stopped only when the termination was acknowledged.
//!
//!    A dialog the page session's tracker saw open with no close refuses the
//!    evaluate (`dialog_opened`). One seen more than 250 ms ago is checked
//!    first by a trivial evaluate on the session of its frame, bounded by
//!    300 ms (and half the budget): a dialog holds its renderer, so an
//!    answer shows none blocks it (an opening whose close never came, C23),
//!    and the state is forgotten.
//! 2. The user's source is sent **once**, in one round trip in the common
//!    case: `Runtime.evaluate` in the frame's main world (or
//!    `Runtime.callFunctionOn` on the element from `DOM.resolveNode`) of a
//!    small wrapper that holds the source in one form (see [`SourceForm`]):
//!    statements when the source certainly is no expression (it starts with
//!    `const`/`let x`/`if`/`return`/…, or has a `;` outside brackets),
//!    a function when it is a function literal, an expression otherwise.
//!    Statements of a page evaluate go as a script (a direct `eval` of the
//!    source in the wrapper), whose value is their completion value, as in
//!    the DevTools console (`var x = 1; x` is 1); with a top-level `return`
//!    or any `await`, and for element evaluates, as a function body
//!    (`return` gives the value). A wrapper that does not parse runs
//!    nothing: a `SyntaxError` reply is compile-checked
//!    (`Runtime.compileScript` on exactly the text sent, which runs nothing)
//!    to tell it from a `SyntaxError` the script threw (`js_exception`), and
//!    a source that is no expression is then sent as statements. A script
//!    whose `eval` throws before its first statement ran (it does not parse
//!    as a script) answers `not_script`: the source alone is compile-checked,
//!    and it goes as a function body when the complaint is a top-level
//!    `return`/`await`, else it is `invalid_source`. A source that parses in
//!    no form is `invalid_source`, with the parser's position in the
//!    user's source (none when the parser stopped inside the wrapper).
//!    Exception positions are mapped back the same way (`line L, column C`
//!    of the source).
//! 3. The wrapper hands the script to a page-side helper, installed once per
//!    execution context as a non-enumerable global property named after the
//!    helper's content hash (the first evaluate in a context carries it;
//!    later ones send a few hundred bytes). The helper runs the script, returns a value that is no promise
//!    at once (a plain JSON primitive as itself, anything else as tagged
//!    JSON, field case C15), and races a promise against an in-page timer
//!    just short of the deadline (so a promise that never settles ends in the
//!    page too, C14). It catches the script's exception (`js_exception`,
//!    distinct from `invalid_source`).
//! 4. Meanwhile the engine watches the deadline, the caller's cancellation,
//!    `Page.javascriptDialogOpening` (ends the evaluate at once with
//!    `dialog_opened`, C03) and the execution context's destruction
//!    (`navigated` / `context_destroyed`, C10; a context that went away
//!    after the script was sent gets 100 ms for its call to answer for
//!    itself, since a call sent to a context already gone fails with "Cannot
//!    find context", ran nothing, and is retried once in the new context).
//! 5. Half-way to the deadline, while the script's call is still pending,
//!    an idle probe (a trivial `Runtime.evaluate`) goes on the same session.
//!    A session's commands run in order on the renderer's main thread, so an
//!    answer means the script's synchronous part has returned and its call
//!    waits for a promise. At the deadline that decides the kind (C14): a
//!    promise timeout when the probe answered (then a second probe: if it
//!    answers within `terminate_grace`, nothing runs and nothing is
//!    terminated), a script timeout when it did not. The in-page timer
//!    usually answers first; under load or in a throttled tab it fires late,
//!    and the kind no longer depends on it.
//! 6. On deadline (script still running) or cancellation with the script sent:
//!    `Runtime.terminateExecution` on that session and a short grace for the
//!    call to end. When it ended (the loop really stopped), the session is
//!    **kept warm** after the termination is acknowledged and a probe
//!    evaluate answers; otherwise that session alone is detached and a fresh
//!    one is attached at once in the background, so the next evaluate finds
//!    it ready (C13, C17). New evaluates wait for this settling (a few ms).
//!    Chromium's own `timeout` parameter of `Runtime.evaluate` is set a
//!    little past the deadline, as a second line: it is what stops a
//!    runaway script when this process dies or its socket drops mid-evaluate
//!    (then nobody sends `Runtime.terminateExecution`, and the tab would stay
//!    busy for every other client). It costs V8 a delayed task on a worker
//!    thread per evaluate, not measurable in the benchmark
//!    (`docs/profiles/evaluate.md`).
//!
//! ## Result encoding
//!
//! [`EvalOutcome::value`] is JSON. Plain JSON values (finite numbers other than
//! `-0`, strings, booleans, `null`, arrays, plain objects) come through as
//! themselves. Everything else is an object with a `$type` tag:
//!
//! | `$type` | fields | for |
//! |---|---|---|
//! | `undefined` | | `undefined` |
//! | `number` | `repr`: `NaN`, `Infinity`, `-Infinity`, `-0` | non-JSON numbers |
//! | `bigint` | `repr`: `"123n"` | BigInt |
//! | `symbol` | `description` | Symbol |
//! | `function` | `name`, `source` (excerpt) | functions |
//! | `node` | `nodeType`, `nodeName`, `tag`, `id`, `classes`, `text` (excerpt), `connected` | DOM nodes |
//! | `nodelist` | `kind`, `length`, `items` | `NodeList`, `HTMLCollection` |
//! | `window` | `url`, `title` | a window |
//! | `date` | `iso` | `Date` |
//! | `regexp` | `source` | `RegExp` |
//! | `error` | `name`, `message`, `stack` | `Error` values (returned, not thrown) |
//! | `map` / `set` | `size`, `entries` / `values` | `Map` / `Set` |
//! | `typedarray` | `kind`, `length`, `values` | typed arrays |
//! | `arraybuffer` | `byteLength` | `ArrayBuffer` |
//! | `promise`, `weakmap`, `weakset`, `weakref` | | opaque values |
//! | `object` | `className`, `value` | class instances (and objects with an own `$type` key) |
//! | `circular` | `path` (e.g. `$.self`) | a reference back to an ancestor |
//! | `hole` | | an array hole |
//! | `threw` | `message` | a getter that threw |
//! | `truncated` | `kind`: `string` (+ `length`, `value` prefix), `items`/`keys` (+ `omitted`), `depth`, `size` | the size cap, depth or item limit hit |
//! | `unserializable` | `error` | anything the serializer could not read |

use crate::busy::Unstick;
use crate::engine_js::{self, Helper};
use crate::error::{DialogInfo, Error, Result, TimeoutKind};
use cdp_transport::{
    BackendNodeId, Budget, Connection, Event, EventStream, FrameId, RecvError, Session, TargetId,
};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tracing::{debug, info, warn, Instrument};

const RUNTIME_ENABLE: &str = "Runtime.enable";
const PAGE_ENABLE: &str = "Page.enable";
const RUNTIME_EVALUATE: &str = "Runtime.evaluate";
const RUNTIME_CALL_FUNCTION_ON: &str = "Runtime.callFunctionOn";
const RUNTIME_COMPILE_SCRIPT: &str = "Runtime.compileScript";
const RUNTIME_RELEASE_OBJECT: &str = "Runtime.releaseObject";
const DOM_RESOLVE_NODE: &str = "DOM.resolveNode";
const PAGE_GET_FRAME_TREE: &str = "Page.getFrameTree";
const TARGET_GET_TARGET_INFO: &str = "Target.getTargetInfo";
const EV_CONTEXT_CREATED: &str = "Runtime.executionContextCreated";
const EV_CONTEXT_DESTROYED: &str = "Runtime.executionContextDestroyed";
const EV_CONTEXTS_CLEARED: &str = "Runtime.executionContextsCleared";
const EV_DIALOG_OPENING: &str = "Page.javascriptDialogOpening";
const EV_DIALOG_CLOSED: &str = "Page.javascriptDialogClosed";
const EV_FRAME_DETACHED: &str = "Page.frameDetached";

/// Budget for clean-up work that runs after the caller got its answer
/// (`Runtime.terminateExecution`, `Target.detachFromTarget`, `Runtime.releaseObject`).
const CLEANUP_BUDGET: Duration = Duration::from_secs(2);

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
    /// Fallbacks reported by callers ([`Engine::record_fallback`]), e.g. a ref
    /// without a backend node id resolved another way.
    pub fallbacks: u64,
    /// Fallback counts by reason.
    pub fallback_reasons: std::collections::BTreeMap<String, u64>,
    /// Sum of evaluate wall times, µs.
    pub total_duration_us: u64,
    /// Longest evaluate wall time, µs.
    pub max_duration_us: u64,
}

#[derive(Default)]
struct Counters {
    evaluations: AtomicU64,
    succeeded: AtomicU64,
    timeouts: AtomicU64,
    promise_timeouts: AtomicU64,
    cancellations: AtomicU64,
    terminations: AtomicU64,
    detaches: AtomicU64,
    dialog_interruptions: AtomicU64,
    navigations: AtomicU64,
    js_exceptions: AtomicU64,
    invalid_sources: AtomicU64,
    refused: AtomicU64,
    fallbacks: AtomicU64,
    total_duration_us: AtomicU64,
    max_duration_us: AtomicU64,
    fallback_reasons: Mutex<std::collections::BTreeMap<String, u64>>,
}

fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// A frame's main-world execution context on one session.
#[derive(Debug, Clone)]
struct Ctx {
    id: i64,
    unique_id: Option<String>,
}

/// Whether the page-side helper ([`engine_js`]) is in an execution context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HelperState {
    /// Installed: send the short wrapper.
    Installed,
    /// Installing does not stick (a frozen global object): always send the installing wrapper.
    Unstickable,
}

#[derive(Default)]
struct WarmState {
    contexts: HashMap<FrameId, Ctx>,
    by_id: HashMap<i64, FrameId>,
    dialog: Option<DialogInfo>,
    /// When `dialog` was seen opening, and a count of openings (so a check
    /// clears only the dialog it checked).
    dialog_at: Option<(Instant, u64)>,
    dialog_seq: u64,
    /// Helper state by execution context id (absent: not installed yet).
    helpers: HashMap<i64, HelperState>,
}

/// One attached engine session with its tracker task.
struct Warm {
    session: Session,
    target_id: TargetId,
    state: Arc<Mutex<WarmState>>,
    changed: watch::Receiver<u64>,
    tracker: tokio::task::JoinHandle<()>,
}

impl Drop for Warm {
    fn drop(&mut self) {
        self.tracker.abort();
    }
}

impl Warm {
    fn lock(&self) -> MutexGuard<'_, WarmState> {
        lock(&self.state)
    }
    fn forget_context(&self, id: i64) {
        let mut st = self.lock();
        st.helpers.remove(&id);
        if let Some(frame) = st.by_id.remove(&id) {
            if st.contexts.get(&frame).is_some_and(|c| c.id == id) {
                st.contexts.remove(&frame);
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

struct Inner {
    conn: Connection,
    page_target: TargetId,
    config: EngineConfig,
    warm: Mutex<HashMap<TargetId, Arc<Warm>>>,
    attach_lock: tokio::sync::Mutex<()>,
    /// How many sessions are settling after a `Runtime.terminateExecution`
    /// (health probe, or absorbing a termination that found nothing running:
    /// "terminate the current or the NEXT execution", C17). New evaluates
    /// wait until it is zero, so a stray termination never ends their script.
    absorbing: watch::Sender<u32>,
    /// Where a termination of the page's own script goes ([`Engine::set_terminate_route`]).
    terminate_route: Mutex<Option<crate::TerminateRoute>>,
    /// The settle hook of this engine's [`Unstick`]s (see [`absorb_hook`]).
    absorb_hook: crate::busy::SettleHook,
    m: Counters,
}

/// Budgeted evaluate for one tab (a page target). Cheap to clone; clones share
/// sessions and metrics. See the [module docs](self) for how an evaluate runs.
#[derive(Clone)]
pub struct Engine {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("page_target", &self.inner.page_target)
            .finish_non_exhaustive()
    }
}

/// Whether the user's script is in flight (sent, its call not answered),
/// and how many times a form was sent: an idle probe counts only for the
/// send it followed.
#[derive(Default)]
struct Sent {
    on: AtomicBool,
    sends: AtomicU64,
}

impl Sent {
    fn set(&self) {
        self.sends.fetch_add(1, Ordering::SeqCst);
        self.on.store(true, Ordering::SeqCst);
    }
    fn clear(&self) {
        self.on.store(false, Ordering::SeqCst);
    }
    fn is_set(&self) -> bool {
        self.on.load(Ordering::SeqCst)
    }
    fn sends(&self) -> u64 {
        self.sends.load(Ordering::SeqCst)
    }
}

/// How a watched evaluate was stopped from outside.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stop {
    Deadline,
    Cancel,
}

/// What the work future returns before it becomes an [`EvalOutcome`].
type Work = Result<(Value, bool, SourceForm)>;

impl Engine {
    /// An engine for the page target `page_target` on `conn`. Nothing is
    /// attached until the first evaluate (or [`Engine::warm_up`]).
    pub fn new(conn: Connection, page_target: TargetId, config: EngineConfig) -> Self {
        let absorbing = watch::channel(0).0;
        Self {
            inner: Arc::new(Inner {
                conn,
                page_target,
                config,
                warm: Mutex::new(HashMap::new()),
                attach_lock: tokio::sync::Mutex::new(()),
                absorb_hook: absorb_hook(&absorbing),
                absorbing,
                terminate_route: Mutex::new(None),
                m: Counters::default(),
            }),
        }
    }

    /// Names the session on which `Runtime.terminateExecution` reaches a
    /// target whose renderer is busy with its page's own script: one the
    /// renderer bound before it got busy (Chromium binds a new session on
    /// the renderer's main thread, so a session the engine attaches while
    /// a script runs cannot end it). A tab passes the supervisor's page and
    /// cross-site iframe sessions, and none while a dialog is pending (then
    /// nothing is terminated). Without a route, the termination goes on the
    /// engine's own session of the command that had no answer, which ends
    /// the page's script only when that session was attached before.
    pub fn set_terminate_route(&self, route: crate::TerminateRoute) {
        *lock(&self.inner.terminate_route) = Some(route);
    }

    /// The page target this engine serves.
    pub fn page_target(&self) -> &TargetId {
        &self.inner.page_target
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.inner.config
    }

    /// Attaches the page session now (Runtime and Page enabled), so the first
    /// evaluate does not pay for it.
    ///
    /// # Errors
    /// `timeout`/`cancelled` (setup) or `transport` when attaching fails.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped future may leave a session attached but unused
    /// (it is detached with the target).
    pub async fn warm_up(&self, budget: &Budget) -> Result<()> {
        let start = Instant::now();
        let target = self.inner.page_target.clone();
        self.warm_session(&target, budget, start, None)
            .await
            .map(|_| ())
    }

    /// The engine's current session on `target_id`, if one is attached and warm
    /// (for callers that need to send their own commands on the same session,
    /// e.g. `DOM.describeNode` for a node the engine resolved).
    pub fn session(&self, target_id: &TargetId) -> Option<Session> {
        lock(&self.inner.warm)
            .get(target_id)
            .filter(|w| w.session.closed_reason().is_none())
            .map(|w| w.session.clone())
    }

    /// Counts a fallback taken by a caller (for example the refs layer
    /// resolving a ref by role and name because it had no backend node id).
    pub fn record_fallback(&self, reason: &str) {
        bump(&self.inner.m.fallbacks);
        *lock(&self.inner.m.fallback_reasons)
            .entry(reason.to_string())
            .or_insert(0) += 1;
        info!(target: "tabwarden::evaluate", reason, "evaluate fallback");
    }

    /// A snapshot of the counters.
    pub fn metrics(&self) -> EngineMetrics {
        let m = &self.inner.m;
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        EngineMetrics {
            evaluations: g(&m.evaluations),
            succeeded: g(&m.succeeded),
            timeouts: g(&m.timeouts),
            promise_timeouts: g(&m.promise_timeouts),
            cancellations: g(&m.cancellations),
            terminations: g(&m.terminations),
            detaches: g(&m.detaches),
            dialog_interruptions: g(&m.dialog_interruptions),
            navigations: g(&m.navigations),
            js_exceptions: g(&m.js_exceptions),
            invalid_sources: g(&m.invalid_sources),
            refused: g(&m.refused),
            fallbacks: g(&m.fallbacks),
            fallback_reasons: lock(&m.fallback_reasons).clone(),
            total_duration_us: g(&m.total_duration_us),
            max_duration_us: g(&m.max_duration_us),
        }
    }

    /// Detaches every engine session (the tab itself stays open).
    ///
    /// # Cancel safety
    /// Cancel safe: the sessions are forgotten before any await.
    pub async fn close(&self, budget: &Budget) {
        let all: Vec<Arc<Warm>> = lock(&self.inner.warm).drain().map(|(_, w)| w).collect();
        for w in all {
            let _ = w.session.detach(budget.clone()).await;
        }
    }

    /// Element evaluate: resolves `backend_node_id` (`DOM.resolveNode`) on the
    /// session of `target` and calls `function_source` with the element as its
    /// first argument (and `this`), under `budget`. Same as [`Engine::evaluate`]
    /// with [`EvalRequest::element`] set.
    ///
    /// # Errors
    /// As [`Engine::evaluate`]; a node that no longer exists is `transport`
    /// with the CDP message (`No node with given id found`).
    ///
    /// # Cancel safety
    /// As [`Engine::evaluate`].
    pub async fn evaluate_on_node(
        &self,
        target: EvalTarget,
        backend_node_id: BackendNodeId,
        function_source: &str,
        budget: &Budget,
    ) -> Result<EvalOutcome> {
        self.evaluate(
            EvalRequest {
                source: function_source.to_string(),
                target,
                element: Some(backend_node_id),
            },
            budget,
        )
        .await
    }

    /// Runs `req` once under `budget` and returns its value, or says exactly
    /// what happened.
    ///
    /// # Errors
    /// - `evaluate_disabled`: the gate is off;
    /// - `invalid_source`: the source parses as no form (nothing ran);
    /// - `js_exception`: the script threw or its promise rejected;
    /// - `timeout`: the deadline passed; `kind` says whether the script was
    ///   terminated (`script`), its promise never settled (`promise`), or it
    ///   never ran (`setup`); the message echoes the budget;
    /// - `cancelled`: the budget was cancelled (a running script is terminated);
    /// - `dialog_opened`: a native dialog opened; answer it with
    ///   `Page.handleJavaScriptDialog` on the page session;
    /// - `navigated` / `context_destroyed`: the frame's document went away;
    /// - `unknown_frame`: no such frame; `transport`: any other CDP failure.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the evaluate without terminating the
    /// script: cancel the [`Budget`] instead to get termination. No engine
    /// state is left inconsistent either way.
    pub async fn evaluate(&self, req: EvalRequest, budget: &Budget) -> Result<EvalOutcome> {
        let start = Instant::now();
        bump(&self.inner.m.evaluations);
        if !self.inner.config.evaluate_enabled {
            bump(&self.inner.m.refused);
            return Err(Error::EvaluateDisabled);
        }
        let span = tracing::info_span!(
            target: "tabwarden::evaluate",
            "evaluate",
            page = self.inner.page_target.as_str(),
            target = ?req.target,
            element = req.element.map(|n| n.0),
            budget_ms = u64::try_from(budget.total().as_millis()).unwrap_or(u64::MAX),
        );
        let r = self
            .evaluate_inner(&req, budget, start)
            .instrument(span.clone())
            .await;
        let elapsed = start.elapsed();
        self.record(&r, elapsed);
        let elapsed_ms = u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX);
        match &r {
            Ok(o) => {
                info!(parent: &span, elapsed_ms, form = ?o.form, truncated = o.truncated, "evaluate ok")
            }
            Err(e) => {
                info!(parent: &span, elapsed_ms, code = e.code(), error = %e, "evaluate failed")
            }
        }
        r.map(|mut o| {
            o.elapsed = elapsed;
            o
        })
    }

    fn record(&self, r: &Result<EvalOutcome>, elapsed: Duration) {
        let m = &self.inner.m;
        let us = u64::try_from(elapsed.as_micros()).unwrap_or(u64::MAX);
        m.total_duration_us.fetch_add(us, Ordering::Relaxed);
        m.max_duration_us.fetch_max(us, Ordering::Relaxed);
        match r {
            Ok(_) => bump(&m.succeeded),
            Err(Error::Timeout { kind, .. }) => {
                bump(&m.timeouts);
                if *kind == TimeoutKind::Promise {
                    bump(&m.promise_timeouts);
                }
            }
            Err(Error::Cancelled { .. }) => bump(&m.cancellations),
            Err(Error::DialogOpened { .. }) => bump(&m.dialog_interruptions),
            Err(Error::Navigated { .. } | Error::ContextDestroyed { .. }) => bump(&m.navigations),
            Err(Error::JsException { .. }) => bump(&m.js_exceptions),
            Err(Error::InvalidSource { .. }) => bump(&m.invalid_sources),
            Err(_) => {}
        }
    }

    async fn evaluate_inner(
        &self,
        req: &EvalRequest,
        budget: &Budget,
        start: Instant,
    ) -> Result<EvalOutcome> {
        self.wait_absorbed(budget, start).await?;
        let page_target = self.inner.page_target.clone();
        // Renderer-bound setup commands: a renderer that does not answer
        // them is busy with the page's own script, which is terminated
        // (see `busy`), and the evaluate goes on within its budget.
        let unstick = Unstick::new(
            budget,
            self.inner.config.busy_after_max,
            Some(self.inner.absorb_hook.clone()),
            lock(&self.inner.terminate_route).clone(),
        );
        let setup = async {
            let page = self
                .warm_session(&page_target, budget, start, Some(&unstick))
                .await?;
            let (warm, frame_id) = self
                .route(&page, &req.target, budget, start, &unstick)
                .await?;
            Ok::<_, Error>((page, warm, frame_id))
        };
        let (page, warm, frame_id) = match setup.await {
            Ok(x) => x,
            Err(e) => return Err(self.busy_or(e, &unstick, budget, start).await),
        };
        // Subscribe before anything is sent, so no event is missed.
        let same = Arc::ptr_eq(&warm, &page);
        let mut page_ev = Some(page.session.subscribe());
        let mut own_ev = if same {
            None
        } else {
            Some(warm.session.subscribe())
        };
        self.check_dialog(&page, &warm, budget).await?;
        let sent = Arc::new(Sent::default());
        let ctx_id: Arc<Mutex<Option<i64>>> = Arc::new(Mutex::new(None));
        let work = self.work(
            &warm,
            &frame_id,
            req,
            budget,
            start,
            sent.clone(),
            ctx_id.clone(),
            &unstick,
        );
        let mut work = std::pin::pin!(work);
        let deadline = budget.deadline();
        let mut detached = false;
        // An execution context that went away after the script was sent: the
        // error, the context it was about, and when to give it. Until then
        // the call may still answer "Cannot find context" (it was sent to a
        // context already gone, so nothing ran and the work retries in the
        // new one) or end by itself.
        let mut interrupted: Option<(Error, Option<i64>, tokio::time::Instant)> = None;
        let far = deadline + Duration::from_secs(3600);
        // The idle probe (see `stop`): sent half-way to the deadline while
        // the script's call is pending, it tells a script whose synchronous
        // part returned a promise (the probe, queued behind it on the same
        // session, answers) from one still running (it does not).
        let mut idle: Option<IdleProbe> = None;
        let now = tokio::time::Instant::now();
        let mut probe_at = Some(now + deadline.saturating_duration_since(now) / 2);
        // One timer for the whole evaluate (first the probe's time, then the
        // deadline), registered before the work's first call registers its
        // own (later) one: a timer earlier than every registered one wakes
        // tokio's timer driver on another thread, which costs a measurable
        // share of a small evaluate.
        let expiry = tokio::time::sleep_until(probe_at.unwrap_or(deadline));
        tokio::pin!(expiry);
        std::future::poll_fn(|cx| {
            let _ = expiry.as_mut().poll(cx);
            std::task::Poll::Ready(())
        })
        .await;
        let finish = |(value, truncated, form): (Value, bool, SourceForm)| EvalOutcome {
            value,
            truncated,
            form,
            frame_id: frame_id.clone(),
            target_id: warm.target_id.clone(),
            notes: unstick.notes(),
            elapsed: start.elapsed(),
        };
        loop {
            tokio::select! {
                biased;
                r = &mut work => return r.map(finish),
                _ = budget.cancel_token().cancelled() => {
                    return self.stop(&warm, work.as_mut(), Stop::Cancel, budget, start, &sent, None, &unstick).await.map(finish);
                }
                _ = &mut expiry => {
                    if probe_at.take().is_some() {
                        let now = tokio::time::Instant::now();
                        if sent.is_set() {
                            idle = Some(IdleProbe::send(&warm.session, sent.sends()));
                            expiry.as_mut().reset(deadline);
                        } else if deadline > now + MIN_PROBE_LEAD {
                            // Not sent yet (attach, context): half the rest.
                            let at = now + (deadline - now) / 2;
                            probe_at = Some(at);
                            expiry.as_mut().reset(at);
                        } else {
                            expiry.as_mut().reset(deadline);
                        }
                        continue;
                    }
                    return self.stop(&warm, work.as_mut(), Stop::Deadline, budget, start, &sent, idle.take(), &unstick).await.map(finish);
                }
                _ = tokio::time::sleep_until(interrupted.as_ref().map_or(far, |i| i.2)), if interrupted.is_some() => {
                    if let Some((e, ctx_then, _)) = interrupted.take() {
                        if sent.is_set() && *lock(&ctx_id) == ctx_then {
                            return Err(e);
                        }
                        debug!("context event did not concern the running script; going on");
                    }
                }
                ev = recv_opt(&mut page_ev) => {
                    if let Some(ev) = ev {
                        if ev.method == EV_DIALOG_OPENING {
                            let dialog = parse_dialog(&ev.params);
                            debug!(?dialog, "dialog ended the evaluate");
                            return Err(Error::DialogOpened { dialog });
                        }
                        if same {
                            if let Some(e) = interruption(&ev, &frame_id, &ctx_id, &sent.on, &mut detached) {
                                if !sent.is_set() {
                                    return Err(e);
                                }
                                interrupted.get_or_insert((e, *lock(&ctx_id), tokio::time::Instant::now() + INTERRUPT_SETTLE));
                            }
                        } else if ev.method == EV_FRAME_DETACHED
                            && ev.str_param("frameId") == Some(warm.target_id.as_str())
                            && ev.str_param("reason") != Some("swap")
                        {
                            return Err(Error::ContextDestroyed {
                                frame_id: frame_id.clone(),
                                message: "the OOPIF's frame was detached".into(),
                            });
                        }
                    }
                }
                ev = recv_opt(&mut own_ev) => {
                    if let Some(ev) = ev {
                        if let Some(e) = interruption(&ev, &frame_id, &ctx_id, &sent.on, &mut detached) {
                            if !sent.is_set() {
                                return Err(e);
                            }
                            interrupted.get_or_insert((e, *lock(&ctx_id), tokio::time::Instant::now() + INTERRUPT_SETTLE));
                        }
                    }
                }
            }
        }
    }

    /// Deadline or cancellation while the work is pending: terminate (when
    /// the script was sent) and a grace for the call to end. The session is
    /// then settled in the background ([`Engine::settle`]): kept when the
    /// termination took, else detached and replaced.
    ///
    /// The timeout's kind comes from what was running (C14), not from the
    /// in-page settle timer (which a loaded or background renderer fires
    /// late): when the idle probe sent half-way through (`idle`, for this
    /// very send) was answered, the script's synchronous part had returned
    /// a promise, and it is a `promise` timeout. Then a second probe asks
    /// whether anything runs now: answered within `terminate_grace`, nothing
    /// does and nothing is terminated; not answered (a continuation of the
    /// promise still runs), it is terminated as a running script would be.
    /// Without an answered probe it is a `script` timeout.
    #[allow(clippy::too_many_arguments)]
    async fn stop<W>(
        &self,
        warm: &Arc<Warm>,
        mut work: Pin<&mut W>,
        why: Stop,
        budget: &Budget,
        start: Instant,
        sent: &Sent,
        idle: Option<IdleProbe>,
        unstick: &Unstick,
    ) -> Work
    where
        W: Future<Output = Work>,
    {
        let was_sent = sent.is_set();
        if !was_sent && why == Stop::Deadline {
            // Nothing of ours runs: a setup command still pending now is
            // held by the page's own script.
            unstick.terminate_pending();
            if unstick.fired() {
                return Err(self
                    .busy_or(
                        timeout_err(TimeoutKind::Setup, budget, start, false),
                        unstick,
                        budget,
                        start,
                    )
                    .await);
            }
        }
        let grace = self.inner.config.terminate_grace;
        let promise = why == Stop::Deadline
            && was_sent
            && idle
                .as_ref()
                .is_some_and(|p| p.answered() && p.sends == sent.sends());
        let mut now_probe = None;
        if promise {
            let mut p = IdleProbe::send(&warm.session, sent.sends());
            tokio::select! {
                biased;
                // It ended after all (its own answer wins).
                r = work.as_mut() => return r,
                () = p.wait() => {
                    debug!("promise pending at the deadline with the page idle; nothing to terminate");
                    return Err(timeout_err(TimeoutKind::Promise, budget, start, false));
                }
                () = tokio::time::sleep(grace) => {
                    debug!("promise pending at the deadline and the page busy; terminating");
                }
            }
            now_probe = Some(p);
        }
        let mut terminated = false;
        if was_sent {
            bump(&self.inner.m.terminations);
            // Not chained on: the acknowledgement may come late.
            let ack = crate::terminate::send(&warm.session, CLEANUP_BUDGET);
            let ended = tokio::time::timeout(grace, work).await;
            self.settle(warm, ended.is_ok(), ack);
            match ended {
                Ok(Ok(v)) if why == Stop::Deadline => {
                    // It finished inside the grace: hand the value over after all.
                    if !promise {
                        // The renderer had not answered the idle probe: a
                        // script kept it busy, and since ours then ran to
                        // its value, it was most likely the page's own.
                        unstick.add_note(format!(
                            "the renderer did not answer until the deadline ({} ms): a script (most likely the page's own) kept it busy and was stopped with Runtime.terminateExecution, then this script ran",
                            duration_ms(start.elapsed())
                        ));
                    }
                    return Ok(v);
                }
                Ok(Err(Error::Timeout {
                    kind: TimeoutKind::Promise,
                    ..
                })) if why == Stop::Deadline => {
                    // The in-page timer answered once the termination had
                    // ended what kept the page busy: the script had returned
                    // a promise, and code it started was running.
                    return Err(timeout_err(TimeoutKind::Promise, budget, start, true));
                }
                Ok(_) => terminated = true,
                // A promise's call stays pending after its continuation was
                // terminated; the second probe answering shows the page runs again.
                Err(_) if now_probe.as_ref().is_some_and(IdleProbe::answered) => {
                    terminated = true;
                }
                Err(_) => debug!(
                    grace_ms = duration_ms(grace),
                    "call still pending after Runtime.terminateExecution"
                ),
            }
        }
        match why {
            Stop::Deadline => Err(timeout_err(
                if promise {
                    TimeoutKind::Promise
                } else if was_sent {
                    TimeoutKind::Script
                } else {
                    TimeoutKind::Setup
                },
                budget,
                start,
                terminated,
            )),
            Stop::Cancel => Err(Error::Cancelled {
                budget: budget.total(),
                elapsed: start.elapsed(),
                sent: was_sent,
                terminated,
            }),
        }
    }

    /// After a `Runtime.terminateExecution` on `warm`, in the background and
    /// with new evaluates held back until it is done ([`Engine::wait_absorbed`]):
    ///
    /// - `call_ended` (the running call ended within the grace): V8
    ///   acknowledges the termination once the terminated call has unwound,
    ///   and clears it then. If the script had already finished when the
    ///   termination came, the termination waits for the next call: a probe
    ///   evaluate takes it. With the acknowledgement in, a probe that answers
    ///   shows the session healthy, and it is **kept**, warm (C13, C17);
    /// - otherwise (the call is still running, or the checks fail), the
    ///   session is **retired**: a fresh session is attached at once in the
    ///   background, a probe on the old one absorbs the termination if it is
    ///   still pending, then the old one is detached.
    fn settle(&self, warm: &Arc<Warm>, call_ended: bool, mut ack: watch::Receiver<Option<bool>>) {
        self.inner.absorbing.send_modify(|n| *n += 1);
        let engine = self.clone();
        let warm = warm.clone();
        let grace = self.inner.config.terminate_grace;
        tokio::spawn(async move {
            let healthy =
                call_ended && crate::terminate::healthy_after(&warm.session, &mut ack, grace).await;
            if healthy {
                debug!(
                    target_id = warm.target_id.as_str(),
                    "termination took; engine session kept"
                );
                engine.inner.absorbing.send_modify(|n| *n -= 1);
                return;
            }
            engine.retire(&warm).await;
        });
    }

    /// Forgets `warm`, starts attaching its replacement, absorbs a pending
    /// termination with a probe on the old session, opens the gate, and
    /// detaches the old session. Ends one [`Engine::settle`].
    async fn retire(&self, warm: &Arc<Warm>) {
        {
            let mut map = lock(&self.inner.warm);
            if map
                .get(&warm.target_id)
                .is_some_and(|w| Arc::ptr_eq(w, warm))
            {
                map.remove(&warm.target_id);
            }
        }
        bump(&self.inner.m.detaches);
        let engine = self.clone();
        let target = warm.target_id.clone();
        tokio::spawn(async move {
            let budget = Budget::new(CLEANUP_BUDGET);
            match engine
                .warm_session(&target, &budget, Instant::now(), None)
                .await
            {
                Ok(_) => debug!(
                    target_id = target.as_str(),
                    "replacement engine session ready"
                ),
                Err(e) => {
                    debug!(target_id = target.as_str(), error = %e, "replacement engine session not attached; the next evaluate attaches")
                }
            }
        });
        let probe = crate::terminate::health_probe(&warm.session).await;
        debug!(?probe, "termination absorbed by a probe evaluate");
        self.inner.absorbing.send_modify(|n| *n -= 1);
        if let Err(e) = warm.session.detach(CLEANUP_BUDGET).await {
            debug!(error = %e, "Target.detachFromTarget");
        }
    }

    /// Sends `Runtime.terminateExecution` for `session`'s target and settles
    /// it in the background, holding this engine's new evaluates until it is
    /// settled, so that it never ends one of them (a termination sent while
    /// no script runs ends the next script of that process, on any session;
    /// see [`crate::terminate`]). The session used is the one the terminate
    /// route ([`Engine::set_terminate_route`]) names for the target, else
    /// `session` itself; a route that names none (a dialog holds the page)
    /// sends nothing, and the handle reports nothing stopped.
    ///
    /// For the clean-up of an action whose page script kept running past
    /// the action's budget (a spinning click handler, a hung `onload`).
    pub fn terminate(&self, session: &Session) -> crate::Termination {
        let route = lock(&self.inner.terminate_route).clone();
        let Some(via) = crate::busy::route_session(route.as_ref(), session) else {
            debug!("no terminate route for the target; nothing sent");
            return crate::Termination::not_sent();
        };
        bump(&self.inner.m.terminations);
        let hook = self.absorb_hook();
        hook(1);
        crate::terminate::send_and_settle(&via, move |_| hook(-1))
    }

    /// The hook that holds this engine's new evaluates while a termination
    /// settles (+1 when sent, -1 when settled).
    pub(crate) fn absorb_hook(&self) -> crate::busy::SettleHook {
        self.inner.absorb_hook.clone()
    }

    /// Waits (under the budget) until no stray termination may be pending.
    async fn wait_absorbed(&self, budget: &Budget, start: Instant) -> Result<()> {
        if *self.inner.absorbing.borrow() == 0 {
            return Ok(());
        }
        let mut rx = self.inner.absorbing.subscribe();
        tokio::select! {
            r = rx.wait_for(|settling| *settling == 0) => { let _ = r; Ok(()) }
            _ = budget.cancel_token().cancelled() => Err(cancelled_setup(budget, start)),
            _ = tokio::time::sleep_until(budget.deadline()) => {
                Err(timeout_err(TimeoutKind::Setup, budget, start, false))
            }
        }
    }

    /// The error for a setup that failed with `e`: when `unstick` sent a
    /// termination (a renderer-bound setup command had no answer), a
    /// timeout becomes `page_busy`, after at most `terminate_grace` for the
    /// termination to settle (to say whether a running script was stopped).
    async fn busy_or(&self, e: Error, unstick: &Unstick, budget: &Budget, start: Instant) -> Error {
        let setup_timeout = matches!(
            e,
            Error::Timeout {
                kind: TimeoutKind::Setup,
                ..
            }
        );
        if !setup_timeout || !unstick.fired() {
            return e;
        }
        unstick.settled(self.inner.config.terminate_grace).await;
        Error::PageBusy {
            method: unstick.first_method().unwrap_or_default(),
            budget: budget.total(),
            elapsed: start.elapsed(),
            stopped: unstick.stopped_a_script(),
            consequence: "the script never ran".into(),
        }
    }

    /// Refuses with `dialog_opened` while the page session's tracker saw a
    /// dialog open and no close. A dialog seen opening more than
    /// [`DIALOG_TRUST`] ago is checked first: a trivial evaluate on the
    /// session of the dialog's frame (a dialog holds its renderer, so it
    /// does not answer while the dialog shows) that answers within
    /// [`DIALOG_CHECK`] (at most half the remaining budget) shows that no
    /// dialog blocks, e.g. an opening whose close never came (an injected
    /// or lost event, C23), and the state is cleared. A dialog of a frame
    /// the engine has no session for is trusted as it is.
    async fn check_dialog(
        &self,
        page: &Arc<Warm>,
        warm: &Arc<Warm>,
        budget: &Budget,
    ) -> Result<()> {
        let (dialog, at) = {
            let st = page.lock();
            match &st.dialog {
                Some(d) => (d.clone(), st.dialog_at),
                None => return Ok(()),
            }
        };
        let Some((opened, seq)) = at.filter(|(t, _)| t.elapsed() >= DIALOG_TRUST) else {
            return Err(Error::DialogOpened { dialog });
        };
        // The session whose renderer the dialog holds.
        let session = match &dialog.frame_id {
            None => Some(page.session.clone()),
            Some(f) if page.lock().contexts.contains_key(f) => Some(page.session.clone()),
            Some(f) if warm.target_id.as_str() == f.as_str() => Some(warm.session.clone()),
            Some(f) => self
                .cached(&TargetId::new(f.as_str()))
                .map(|w| w.session.clone()),
        };
        let Some(session) = session else {
            return Err(Error::DialogOpened { dialog });
        };
        let bound = DIALOG_CHECK.min(budget.remaining() / 2);
        let answered = session
            .call(
                RUNTIME_EVALUATE,
                json!({"expression": "0 // tabwarden dialog check", "returnByValue": true}),
                bound,
            )
            .await
            .is_ok();
        if !answered {
            return Err(Error::DialogOpened { dialog });
        }
        let mut st = page.lock();
        if st.dialog_at.map(|(_, s)| s) == Some(seq) {
            st.dialog = None;
            st.dialog_at = None;
        }
        drop(st);
        info!(
            target: "tabwarden::evaluate",
            dialog_type = dialog.dialog_type.as_str(),
            open_ms = duration_ms(opened.elapsed()),
            "a dialog seen opening without a close does not block the page: forgotten"
        );
        Ok(())
    }

    /// The warm session on `target`, attaching (and enabling Runtime/Page) if needed.
    async fn warm_session(
        &self,
        target: &TargetId,
        budget: &Budget,
        start: Instant,
        unstick: Option<&Unstick>,
    ) -> Result<Arc<Warm>> {
        if let Some(w) = self.cached(target) {
            return Ok(w);
        }
        let _guard = tokio::select! {
            g = self.inner.attach_lock.lock() => g,
            _ = budget.cancel_token().cancelled() => return Err(cancelled_setup(budget, start)),
            _ = tokio::time::sleep_until(budget.deadline()) => {
                return Err(timeout_err(TimeoutKind::Setup, budget, start, false));
            }
        };
        if let Some(w) = self.cached(target) {
            return Ok(w);
        }
        let is_page = *target == self.inner.page_target;
        let session = self
            .inner
            .conn
            .attach(target, budget.clone())
            .await
            .map_err(|e| {
                if e.protocol_message().is_some() && !is_page {
                    Error::UnknownFrame {
                        frame_id: FrameId::new(target.as_str()),
                        target_id: self.inner.page_target.clone(),
                    }
                } else {
                    setup_err(e, budget, start, &format!("attaching to target {target}"))
                }
            })?;
        let events = session.subscribe();
        let state = Arc::new(Mutex::new(WarmState::default()));
        let (tx, rx) = watch::channel(0u64);
        let tracker = tokio::spawn(track(events, state.clone(), tx));
        let warm = Arc::new(Warm {
            session: session.clone(),
            target_id: target.clone(),
            state,
            changed: rx,
            tracker,
        });
        // `Runtime.enable` and `Page.enable` are renderer-bound: the page's
        // own script can hold them (then `unstick` terminates it).
        let call = |method: &'static str| {
            let session = session.clone();
            let budget = budget.clone();
            let unstick = unstick.cloned();
            async move {
                match unstick {
                    Some(u) => u.call(&session, method, json!({}), &budget).await,
                    None => session.call(method, json!({}), budget).await,
                }
            }
        };
        let enable = async {
            let rt = call(RUNTIME_ENABLE);
            if is_page {
                let (a, b) = tokio::join!(rt, call(PAGE_ENABLE));
                a.and(b)
            } else {
                rt.await
            }
        };
        if let Err(e) = enable.await {
            let s = session.clone();
            let settling = unstick.cloned();
            tokio::spawn(async move {
                // A termination sent on it goes first.
                if let Some(u) = settling {
                    u.settled(CLEANUP_BUDGET).await;
                }
                s.detach(CLEANUP_BUDGET).await
            });
            return Err(setup_err(
                e,
                budget,
                start,
                &format!("enabling Runtime on target {target}"),
            ));
        }
        debug!(target_id = target.as_str(), session = ?session.id(), "engine session attached");
        lock(&self.inner.warm).insert(target.clone(), warm.clone());
        Ok(warm)
    }

    fn cached(&self, target: &TargetId) -> Option<Arc<Warm>> {
        let mut map = lock(&self.inner.warm);
        match map.get(target) {
            Some(w) if w.session.closed_reason().is_none() => Some(w.clone()),
            Some(_) => {
                map.remove(target);
                None
            }
            None => None,
        }
    }

    /// Picks the session and frame for `target`.
    async fn route(
        &self,
        page: &Arc<Warm>,
        target: &EvalTarget,
        budget: &Budget,
        start: Instant,
        unstick: &Unstick,
    ) -> Result<(Arc<Warm>, FrameId)> {
        let page_frame = FrameId::new(self.inner.page_target.as_str());
        match target {
            EvalTarget::MainFrame => Ok((page.clone(), page_frame)),
            EvalTarget::Frame(f) if *f == page_frame => Ok((page.clone(), page_frame)),
            EvalTarget::Frame(f) => {
                if page.lock().contexts.contains_key(f) {
                    return Ok((page.clone(), f.clone()));
                }
                let tree = unstick
                    .call(&page.session, PAGE_GET_FRAME_TREE, json!({}), budget)
                    .await
                    .map_err(|e| setup_err(e, budget, start, "reading the frame tree"))?;
                if frame_in_tree(&tree["frameTree"], f.as_str()) {
                    return Ok((page.clone(), f.clone()));
                }
                // An OOPIF's target id equals its frame id.
                let info = self
                    .inner
                    .conn
                    .browser()
                    .call(
                        TARGET_GET_TARGET_INFO,
                        json!({"targetId": f.as_str()}),
                        budget.clone(),
                    )
                    .await;
                match info {
                    Ok(v) if v["targetInfo"]["type"] == "iframe" => {
                        let tid = TargetId::new(f.as_str());
                        let w = self
                            .warm_session(&tid, budget, start, Some(unstick))
                            .await?;
                        Ok((w, f.clone()))
                    }
                    Ok(_) => Err(Error::UnknownFrame {
                        frame_id: f.clone(),
                        target_id: self.inner.page_target.clone(),
                    }),
                    Err(e) if e.protocol_message().is_some() => Err(Error::UnknownFrame {
                        frame_id: f.clone(),
                        target_id: self.inner.page_target.clone(),
                    }),
                    Err(e) => Err(setup_err(e, budget, start, "looking up the frame's target")),
                }
            }
            EvalTarget::Oopif {
                target_id,
                frame_id,
            } => {
                let w = self
                    .warm_session(target_id, budget, start, Some(unstick))
                    .await?;
                let f = frame_id
                    .clone()
                    .unwrap_or_else(|| FrameId::new(target_id.as_str()));
                Ok((w, f))
            }
        }
    }

    /// Waits (under the budget) for the main-world context of `frame` on `warm`.
    async fn context_for(&self, warm: &Warm, frame: &FrameId, not: Option<i64>) -> Result<Ctx> {
        let mut rx = warm.changed.clone();
        loop {
            if let Some(c) = warm
                .lock()
                .contexts
                .get(frame)
                .filter(|c| Some(c.id) != not)
                .cloned()
            {
                return Ok(c);
            }
            if let Some(reason) = warm.session.closed_reason() {
                return Err(Error::ContextDestroyed {
                    frame_id: frame.clone(),
                    message: format!("the engine session closed ({reason})"),
                });
            }
            // The outer select ends this wait at the deadline.
            if rx.changed().await.is_err() {
                return Err(Error::ContextDestroyed {
                    frame_id: frame.clone(),
                    message: "the engine session closed".into(),
                });
            }
        }
    }

    /// Everything that talks to the page for one evaluate.
    #[allow(clippy::too_many_arguments)]
    async fn work(
        &self,
        warm: &Warm,
        frame: &FrameId,
        req: &EvalRequest,
        budget: &Budget,
        start: Instant,
        sent: Arc<Sent>,
        ctx_cell: Arc<Mutex<Option<i64>>>,
        unstick: &Unstick,
    ) -> Work {
        let cfg = &self.inner.config;
        // Calls below run under a budget that outlives the caller's by the
        // grace and is not cancelled with it: the select in `evaluate_inner`
        // owns the deadline and the cancellation, and needs the pending call
        // alive to see it end after `Runtime.terminateExecution`.
        let call_budget =
            Budget::new(budget.remaining() + cfg.terminate_grace + cfg.chromium_timeout_margin);
        let session = &warm.session;
        if let Some(node) = req.element {
            let resolved = unstick
                .call(
                    session,
                    DOM_RESOLVE_NODE,
                    json!({"backendNodeId": node.0, "objectGroup": "tabwarden-eval"}),
                    &call_budget,
                )
                .await
                .map_err(|e| {
                    map_call_err(e, frame, &format!("resolving backend node {}", node.0))
                })?;
            let Some(object_id) = resolved["object"]["objectId"].as_str().map(str::to_string)
            else {
                return Err(Error::UnexpectedReply {
                    method: DOM_RESOLVE_NODE.into(),
                    detail: "no object.objectId".into(),
                });
            };
            settle_before_send(unstick, budget).await;
            let r = self
                .run_forms(
                    Channel::Element(&object_id),
                    warm,
                    frame,
                    &req.source,
                    budget,
                    &call_budget,
                    start,
                    &sent,
                )
                .await;
            let s = session.clone();
            // Not awaited: the caller has its answer.
            tokio::spawn(async move {
                let _ = s
                    .call(
                        RUNTIME_RELEASE_OBJECT,
                        json!({"objectId": object_id}),
                        CLEANUP_BUDGET,
                    )
                    .await;
            });
            return r;
        }
        // A context id remembered from before a navigation fails with
        // "Cannot find context" / "uniqueContextId not found" before
        // anything runs: then wait for the frame's new context and go
        // once more (the script has not run, so this is no re-run, C10).
        let mut stale: Option<i64> = None;
        settle_before_send(unstick, budget).await;
        loop {
            let ctx = self.context_for(warm, frame, stale).await?;
            *lock(&ctx_cell) = Some(ctx.id);
            let r = self
                .run_forms(
                    Channel::Page(&ctx),
                    warm,
                    frame,
                    &req.source,
                    budget,
                    &call_budget,
                    start,
                    &sent,
                )
                .await;
            match r {
                Err(e) if stale.is_none() && is_stale_context(&e) => {
                    sent.clear();
                    debug!(
                        context = ctx.id,
                        "stale execution context; waiting for the new one"
                    );
                    warm.forget_context(ctx.id);
                    stale = Some(ctx.id);
                }
                r => return r,
            }
        }
    }
}

/// The hook an [`Unstick`] of an engine calls when it sends a termination
/// (+1) and when that is settled (-1): new evaluates wait meanwhile
/// ([`Engine::wait_absorbed`]), as after the engine's own terminations (C17).
fn absorb_hook(absorbing: &watch::Sender<u32>) -> crate::busy::SettleHook {
    let tx = absorbing.clone();
    Arc::new(move |d: i32| {
        tx.send_modify(|n| *n = n.saturating_add_signed(d));
    })
}

/// A termination of the page's own script sent during setup ends the
/// current *or the next* script of that process: wait (within the budget;
/// the caller's select owns the deadline) until it is taken, so it never
/// ends the user's script.
async fn settle_before_send(unstick: &Unstick, budget: &Budget) {
    if unstick.fired() {
        let settled = unstick.settled(budget.remaining()).await;
        debug!(
            settled,
            "setup terminated the page's script; the renderer answers again"
        );
    }
}

/// Where the wrapper runs.
#[derive(Clone, Copy)]
enum Channel<'a> {
    /// `Runtime.evaluate` in a frame's main-world execution context.
    Page(&'a Ctx),
    /// `Runtime.callFunctionOn` on a resolved element (by its `objectId`).
    Element(&'a str),
}

impl Engine {
    /// Sends the user's source once, in the form [`first_form`] guesses.
    ///
    /// The common case is one round trip. A wrapper that does not parse runs
    /// nothing; a `SyntaxError` reply is compile-checked (`Runtime.compileScript`,
    /// which runs nothing) to tell that from a `SyntaxError` thrown at run
    /// time, and a source that is no expression is then sent once more as
    /// statements. A missing page-side helper (`{$tw: 'no_helper'}`, nothing
    /// ran) is installed by sending the installing wrapper.
    #[allow(clippy::too_many_arguments)]
    async fn run_forms(
        &self,
        channel: Channel<'_>,
        warm: &Warm,
        frame: &FrameId,
        src: &str,
        budget: &Budget,
        call_budget: &Budget,
        start: Instant,
        sent: &Sent,
    ) -> Work {
        let session = &warm.session;
        let element = matches!(channel, Channel::Element(_));
        let mut form = first_form(src, element);
        let mut force_install = false;
        loop {
            let remaining = budget.remaining();
            let (method, params, compile_text, compile_ctx, context) = match channel {
                Channel::Page(ctx) => {
                    let helper = match warm.lock().helpers.get(&ctx.id) {
                        Some(HelperState::Installed) if !force_install => Helper::Use,
                        _ => Helper::Install,
                    };
                    let (params, text) = self.page_params(src, form, helper, ctx, remaining);
                    (RUNTIME_EVALUATE, params, text, Some(ctx.id), "evaluating")
                }
                Channel::Element(object_id) => {
                    let decl = engine_js::wrapper_function(src, form, Helper::Install);
                    let text = engine_js::function_compile_text(&decl);
                    let params = json!({
                        "functionDeclaration": decl,
                        "objectId": object_id,
                        "arguments": [{"objectId": object_id}, {"value": self.page_cfg(remaining)}],
                        "awaitPromise": true,
                        "returnByValue": true,
                    });
                    (
                        RUNTIME_CALL_FUNCTION_ON,
                        params,
                        text,
                        None,
                        "calling the function on the element",
                    )
                }
            };
            sent.set();
            let reply = session
                .call(method, params, call_budget.clone())
                .await
                .map_err(|e| map_call_err(e, frame, context))?;
            match reply.get("exceptionDetails") {
                None if reply["result"]["value"]["$tw"] == "not_script" => {
                    // The statements did not start: nothing of them ran.
                    sent.clear();
                    if let Channel::Page(ctx) = channel {
                        warm.lock()
                            .helpers
                            .entry(ctx.id)
                            .or_insert(HelperState::Installed);
                    }
                    // The source alone, compiled as a script (runs nothing):
                    // a syntax error that is not about `return`/`await` is
                    // the user's, with its own positions.
                    if let Some(d) =
                        compile_check(session, compile_ctx, src.to_string(), call_budget, frame)
                            .await?
                    {
                        if !body_only_syntax(&d) {
                            return Err(invalid_source(&d, 0, src));
                        }
                    }
                    debug!("statements are no script; sending them as a function body");
                    form = SourceForm::Statements;
                    continue;
                }
                None if reply["result"]["value"]["$tw"] == "no_helper" => {
                    // Nothing ran. The helper did not stay (or the page lost it).
                    sent.clear();
                    if let Channel::Page(ctx) = channel {
                        warm.lock().helpers.insert(ctx.id, HelperState::Unstickable);
                    }
                    if force_install {
                        return Err(Error::UnexpectedReply {
                            method: method.into(),
                            detail: "the page-side helper is missing after installing it".into(),
                        });
                    }
                    force_install = true;
                    continue;
                }
                None => {
                    if let Channel::Page(ctx) = channel {
                        warm.lock()
                            .helpers
                            .entry(ctx.id)
                            .or_insert(HelperState::Installed);
                    }
                }
                Some(d) if is_syntax_error(d) && !is_termination(d) => {
                    // The call is over: whatever ran (if anything) has ended.
                    sent.clear();
                    match compile_check(session, compile_ctx, compile_text, call_budget, frame)
                        .await?
                    {
                        // It parsed: the SyntaxError was thrown at run time.
                        None => {}
                        Some(d) if form == SourceForm::Statements => {
                            return Err(self
                                .invalid_statements(
                                    session,
                                    compile_ctx,
                                    src,
                                    &d,
                                    call_budget,
                                    frame,
                                )
                                .await)
                        }
                        Some(_) => {
                            debug!(?form, "source is no expression; sending it as statements");
                            // Each step moves on: expression or function →
                            // statements (a script first, for a page) →
                            // a function body → invalid_source.
                            form = match form {
                                SourceForm::Script => SourceForm::Statements,
                                _ => statements_form(src, element),
                            };
                            continue;
                        }
                    }
                }
                Some(_) => {}
            }
            return read_reply(reply, form, src, method, budget, start);
        }
    }

    /// `invalid_source` for statements whose function-body wrapper did not
    /// parse (`wrapper` is its compile failure): the source alone compiled
    /// as a script gives the parser's own words and positions, unless its
    /// complaint is one a function body does not have (`return`, `await`);
    /// then the wrapper's, mapped back to the source (its line 2 is the
    /// source's line 1), and without a position when it lies in the wrapper.
    async fn invalid_statements(
        &self,
        session: &Session,
        ctx: Option<i64>,
        src: &str,
        wrapper: &Value,
        budget: &Budget,
        frame: &FrameId,
    ) -> Error {
        match compile_check(session, ctx, src.to_string(), budget, frame).await {
            Ok(Some(d)) if !body_only_syntax(&d) => invalid_source(&d, 0, src),
            _ => invalid_source(wrapper, 1, src),
        }
    }

    /// The `Runtime.evaluate` params of a page evaluate of `src` in `form`
    /// in context `ctx`, and the expression text (for the compile check).
    fn page_params(
        &self,
        src: &str,
        form: SourceForm,
        helper: Helper,
        ctx: &Ctx,
        remaining: Duration,
    ) -> (Value, String) {
        let cfg = &self.inner.config;
        let text = if form == SourceForm::Script {
            engine_js::script_wrapper_expression(src, helper, &self.page_cfg_literal(remaining))
        } else {
            engine_js::wrapper_expression(src, form, helper, &self.page_cfg_literal(remaining))
        };
        let mut params = json!({
            "expression": text,
            "awaitPromise": true,
            "returnByValue": true,
            "timeout": duration_ms(remaining + cfg.chromium_timeout_margin),
        });
        match &ctx.unique_id {
            Some(u) => params["uniqueContextId"] = json!(u),
            None => params["contextId"] = json!(ctx.id),
        }
        (params, text)
    }

    /// The exact `Runtime.evaluate` params a warm evaluate of `src` in the
    /// main frame would send now with `remaining` left, or `None` when the
    /// page session is not attached or its main-world context not known yet.
    /// For the benchmark's breakdown and the profiles (`docs/profiles/`);
    /// not a stable API.
    #[doc(hidden)]
    pub fn warm_page_params(&self, src: &str, remaining: Duration) -> Option<Value> {
        let warm = self.cached(&self.inner.page_target)?;
        let frame = FrameId::new(self.inner.page_target.as_str());
        let (ctx, installed) = {
            let st = warm.lock();
            let ctx = st.contexts.get(&frame)?.clone();
            let installed = st.helpers.get(&ctx.id) == Some(&HelperState::Installed);
            (ctx, installed)
        };
        let helper = if installed {
            Helper::Use
        } else {
            Helper::Install
        };
        Some(
            self.page_params(src, first_form(src, false), helper, &ctx, remaining)
                .0,
        )
    }

    /// [`Engine::page_cfg`] as a JavaScript array literal.
    fn page_cfg_literal(&self, remaining: Duration) -> String {
        let cfg = &self.inner.config;
        format!(
            "[{},{},{},{},{}]",
            settle_ms(remaining),
            cfg.max_result_chars,
            cfg.max_depth,
            cfg.max_items,
            cfg.text_excerpt_chars
        )
    }

    /// The page-side settings for the wrapper, `[settleMs, maxChars,
    /// maxDepth, maxItems, textMax]`: the in-page settle timer ends a little
    /// before the deadline, so a never-settling promise ends in the page
    /// first (C14) and nothing needs terminating.
    fn page_cfg(&self, remaining: Duration) -> Value {
        let cfg = &self.inner.config;
        json!([
            settle_ms(remaining),
            cfg.max_result_chars,
            cfg.max_depth,
            cfg.max_items,
            cfg.text_excerpt_chars,
        ])
    }
}

/// A dialog seen opening this recently is taken as open without a check
/// (its close usually follows an answer within milliseconds).
const DIALOG_TRUST: Duration = Duration::from_millis(250);

/// How long the check of an older dialog waits for the page to answer.
const DIALOG_CHECK: Duration = Duration::from_millis(300);

/// After an execution context of the running evaluate went away, how long
/// its call may take to answer for itself before the evaluate ends with
/// `navigated` / `context_destroyed` (C10).
const INTERRUPT_SETTLE: Duration = Duration::from_millis(100);

/// The expression of an idle probe ([`IdleProbe`]); distinct from the
/// health probe's `0` so that logs (and scripted tests) tell them apart.
const IDLE_PROBE: &str = "0 // tabwarden idle probe";

/// An idle probe re-scheduled because the script was not sent yet is sent
/// only when at least this much time is left before the deadline.
const MIN_PROBE_LEAD: Duration = Duration::from_millis(2);

/// A trivial evaluate sent, in the background, on the session of a script
/// whose call is pending. Commands of one session run in order on the
/// renderer's main thread, so an answer (a value, or "Execution was
/// terminated": either way it ran) means everything sent before it on that
/// session had run to the end of its synchronous part and the thread was
/// free: the script's call is waiting for a promise. No answer: the thread
/// is busy (or the browser is very slow).
struct IdleProbe {
    /// The script send ([`Sent::sends`]) it followed.
    sends: u64,
    answered: watch::Receiver<bool>,
}

impl IdleProbe {
    fn send(session: &Session, sends: u64) -> Self {
        let (tx, rx) = watch::channel(false);
        let s = session.clone();
        tokio::spawn(async move {
            let r = s
                .call(
                    RUNTIME_EVALUATE,
                    json!({"expression": IDLE_PROBE, "returnByValue": true}),
                    CLEANUP_BUDGET,
                )
                .await;
            // A failed call (session gone, budget) proves nothing.
            if r.is_ok() {
                tx.send_replace(true);
            }
        });
        Self {
            sends,
            answered: rx,
        }
    }

    fn answered(&self) -> bool {
        *self.answered.borrow()
    }

    /// Resolves when answered; never, if it fails.
    async fn wait(&mut self) {
        if self.answered.wait_for(|a| *a).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// The in-page settle timer for `remaining`: a margin (5 %, 20 to 250 ms)
/// before the deadline, rounded down to 10 ms. Rounded so that the same
/// source under the same budget gives the same wrapper text, which V8's
/// compilation cache recognises (a miss costs more than the rest of the
/// page-side work for a small script).
fn settle_ms(remaining: Duration) -> u64 {
    let margin = (remaining / 20).clamp(Duration::from_millis(20), Duration::from_millis(250));
    (duration_ms(remaining.saturating_sub(margin)) / 10 * 10).max(1)
}

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn is_stale_context(e: &Error) -> bool {
    matches!(e, Error::ContextDestroyed { message, .. }
        if message.contains("Cannot find context with specified id") || message.contains("uniqueContextId not found"))
}

/// Ends the wait of `select!` on a stream that is gone (never resolves).
async fn recv_opt(s: &mut Option<EventStream>) -> Option<Arc<Event>> {
    let Some(stream) = s.as_mut() else {
        return std::future::pending().await;
    };
    loop {
        match stream.recv().await {
            Ok(ev) => return Some(ev),
            Err(RecvError::Lagged(n)) => warn!(n, "engine event stream lagged"),
            Err(_) => {
                *s = None;
                return None;
            }
        }
    }
}

/// An event that ends the evaluate running in `frame` (context `ctx`).
///
/// Before the script is sent, a destroyed context is not an interruption:
/// the work retries once in the frame's new context (nothing ran yet).
fn interruption(
    ev: &Event,
    frame: &FrameId,
    ctx: &Mutex<Option<i64>>,
    sent: &AtomicBool,
    detached: &mut bool,
) -> Option<Error> {
    let sent = sent.load(Ordering::SeqCst);
    match ev.method.as_str() {
        EV_FRAME_DETACHED
            if ev.str_param("frameId") == Some(frame.as_str())
                && ev.str_param("reason") != Some("swap") =>
        {
            *detached = true;
            (!sent).then(|| Error::ContextDestroyed {
                frame_id: frame.clone(),
                message: "the frame was detached (Page.frameDetached)".into(),
            })
        }
        _ if !sent => None,
        EV_CONTEXT_DESTROYED => {
            let id = ev.params.get("executionContextId").and_then(Value::as_i64);
            let ours = *lock(ctx);
            if ours.is_some() && id == ours {
                Some(if *detached {
                    Error::ContextDestroyed {
                        frame_id: frame.clone(),
                        message: "the frame was detached (Page.frameDetached)".into(),
                    }
                } else {
                    Error::Navigated {
                        frame_id: frame.clone(),
                        message: "its execution context was destroyed (Runtime.executionContextDestroyed)".into(),
                    }
                })
            } else {
                None
            }
        }
        EV_CONTEXTS_CLEARED if lock(ctx).is_some() => Some(Error::Navigated {
            frame_id: frame.clone(),
            message: "execution contexts were cleared (Runtime.executionContextsCleared)".into(),
        }),
        _ => None,
    }
}

/// The per-session tracker: main-world contexts by frame, and the open dialog.
async fn track(mut events: EventStream, state: Arc<Mutex<WarmState>>, tx: watch::Sender<u64>) {
    loop {
        match events.recv().await {
            Ok(ev) => {
                if apply(&state, &ev) {
                    tx.send_modify(|n| *n += 1);
                }
            }
            Err(RecvError::Lagged(n)) => warn!(
                n,
                "engine tracker lagged; execution context table may be stale"
            ),
            Err(_) => {
                tx.send_modify(|n| *n += 1);
                return;
            }
        }
    }
}

/// Applies one event to the tracked state; true when contexts changed.
fn apply(state: &Mutex<WarmState>, ev: &Event) -> bool {
    let mut st = lock(state);
    match ev.method.as_str() {
        EV_CONTEXT_CREATED => {
            let c = &ev.params["context"];
            let aux = &c["auxData"];
            let (Some(id), Some(frame)) = (c["id"].as_i64(), aux["frameId"].as_str()) else {
                return false;
            };
            if aux["isDefault"].as_bool() != Some(true) {
                return false;
            }
            let frame = FrameId::new(frame);
            st.by_id.insert(id, frame.clone());
            st.contexts.insert(
                frame,
                Ctx {
                    id,
                    unique_id: c["uniqueId"].as_str().map(str::to_string),
                },
            );
            true
        }
        EV_CONTEXT_DESTROYED => {
            let Some(id) = ev.params["executionContextId"].as_i64() else {
                return false;
            };
            st.helpers.remove(&id);
            if let Some(frame) = st.by_id.remove(&id) {
                if st.contexts.get(&frame).is_some_and(|c| c.id == id) {
                    st.contexts.remove(&frame);
                }
            }
            true
        }
        EV_CONTEXTS_CLEARED => {
            st.contexts.clear();
            st.by_id.clear();
            st.helpers.clear();
            true
        }
        EV_DIALOG_OPENING => {
            st.dialog = Some(parse_dialog(&ev.params));
            st.dialog_seq += 1;
            st.dialog_at = Some((Instant::now(), st.dialog_seq));
            false
        }
        EV_DIALOG_CLOSED => {
            st.dialog = None;
            st.dialog_at = None;
            false
        }
        _ => false,
    }
}

fn parse_dialog(p: &Value) -> DialogInfo {
    let s = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_string);
    DialogInfo {
        dialog_type: s("type").unwrap_or_else(|| "unknown".into()),
        message: s("message").unwrap_or_default(),
        default_prompt: s("defaultPrompt"),
        frame_id: s("frameId").map(FrameId::new),
        url: s("url"),
    }
}

fn frame_in_tree(node: &Value, frame: &str) -> bool {
    if node["frame"]["id"].as_str() == Some(frame) {
        return true;
    }
    node["childFrames"]
        .as_array()
        .is_some_and(|c| c.iter().any(|n| frame_in_tree(n, frame)))
}

/// Compiles exactly `text` with `Runtime.compileScript` (which runs nothing):
/// `None` when it parses, else the parser's `exceptionDetails`. Used only on
/// the error path, to tell a source that did not parse (nothing ran) from a
/// `SyntaxError` thrown while the script ran.
async fn compile_check(
    session: &Session,
    ctx: Option<i64>,
    text: String,
    budget: &Budget,
    frame: &FrameId,
) -> Result<Option<Value>> {
    let mut p = json!({"expression": text, "sourceURL": "", "persistScript": false});
    if let Some(id) = ctx {
        p["executionContextId"] = json!(id);
    }
    session
        .call(RUNTIME_COMPILE_SCRIPT, p, budget.clone())
        .await
        .map(|v| v.get("exceptionDetails").cloned())
        .map_err(|e| map_call_err(e, frame, "compile-checking the source"))
}

/// `invalid_source` from the parser's `exceptionDetails` of a text in
/// which `src` starts on line `offset` (0-based), column 0. A position
/// outside `src` (in a wrapper around it) is left out.
fn invalid_source(d: &Value, offset: u32, src: &str) -> Error {
    let mut message = syntax_message(d).to_string();
    let lines = u32::try_from(src.lines().count().max(1)).unwrap_or(u32::MAX);
    let raw_line = d["lineNumber"]
        .as_u64()
        .and_then(|l| u32::try_from(l).ok())
        .and_then(|l| l.checked_sub(offset));
    let line = raw_line.filter(|l| *l < lines);
    if offset > 0
        && raw_line.is_some_and(|l| l >= lines)
        && message.starts_with("SyntaxError: Unexpected token")
    {
        // The parser stopped at the wrapper's closing token, after the
        // source: to the user, the source ended too early.
        message = "SyntaxError: Unexpected end of input".into();
    }
    let column = line.and_then(|_| {
        d["columnNumber"]
            .as_u64()
            .and_then(|c| u32::try_from(c).ok())
    });
    Error::InvalidSource {
        message,
        line,
        column,
    }
}

/// The first line of a parser's `exceptionDetails` text.
fn syntax_message(d: &Value) -> &str {
    d["exception"]["description"]
        .as_str()
        .or_else(|| d["text"].as_str())
        .unwrap_or("SyntaxError")
        .lines()
        .next()
        .unwrap_or("SyntaxError")
}

/// True for a parser complaint that a function body does not have:
/// `return` or `await` at the top level of a script, `new.target`.
fn body_only_syntax(d: &Value) -> bool {
    let m = syntax_message(d);
    m.contains("Illegal return") || m.contains("await is only valid") || m.contains("new.target")
}

/// True for `exceptionDetails` of a `SyntaxError` (thrown by the parser, or
/// by code at run time: only a compile check tells which).
fn is_syntax_error(d: &Value) -> bool {
    d["exception"]["className"].as_str() == Some("SyntaxError")
        || d["exception"]["description"]
            .as_str()
            .is_some_and(|t| t.starts_with("SyntaxError"))
}

/// The form to send first. Statements when the source certainly is no
/// expression (see [`statements_form`]), a function for a function
/// literal, an expression otherwise. A wrong guess costs a parse failure
/// (nothing runs), never a second run.
pub(crate) fn first_form(src: &str, element: bool) -> SourceForm {
    if certainly_statements(src) {
        statements_form(src, element)
    } else if looks_like_function(src) {
        SourceForm::Function
    } else {
        SourceForm::Expression
    }
}

/// How statements go: as a script ([`SourceForm::Script`], the completion
/// value) for a page evaluate, unless they use `await` (anywhere: top-level
/// `await` does not parse in a script), `return` at the top level, or open
/// with a `"use strict"` directive (the script's first line is the
/// engine's, so the directive would not apply); then, and for element
/// evaluates, as a function body ([`SourceForm::Statements`]).
pub(crate) fn statements_form(src: &str, element: bool) -> SourceForm {
    let strict = skip_trivia(src)
        .is_some_and(|s| s.starts_with("'use strict'") || s.starts_with("\"use strict\""));
    if element || strict || src.contains("await") || top_level_return(src) {
        SourceForm::Statements
    } else {
        SourceForm::Script
    }
}

/// A `return` keyword outside every bracket, string and comment. Answers
/// false when unsure (a `/` that is no comment, a template literal): the
/// script form is tried then, and a `return` it cannot parse sends the
/// source as a function body (nothing ran).
pub(crate) fn top_level_return(src: &str) -> bool {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let mut depth = 0i32;
    let mut prev = ' ';
    let mut it = src.char_indices().peekable();
    while let Some((i, c)) = it.next() {
        match c {
            '\'' | '"' => loop {
                match it.next() {
                    Some((_, '\\')) => {
                        it.next();
                    }
                    Some((_, q)) if q == c => break,
                    Some((_, '\n' | '\r')) | None => return false,
                    Some(_) => {}
                }
            },
            '/' => match it.peek().map(|x| x.1) {
                Some('/') => {
                    for (_, x) in it.by_ref() {
                        if x == '\n' {
                            break;
                        }
                    }
                }
                Some('*') => {
                    it.next();
                    let mut last = ' ';
                    loop {
                        match it.next() {
                            Some((_, '/')) if last == '*' => break,
                            Some((_, x)) => last = x,
                            None => return false,
                        }
                    }
                }
                _ => return false,
            },
            '`' => return false,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth -= 1,
            'r' if depth == 0 && !is_ident(prev) && prev != '.' => {
                let rest = &src[i..];
                if rest.starts_with("return") && !rest["return".len()..].starts_with(is_ident) {
                    return true;
                }
            }
            _ => {}
        }
        prev = c;
    }
    false
}

/// True only when `src` cannot parse as an expression: it starts with a
/// keyword that begins statements only (`const`, `let x`, `var`, `if`,
/// `for`, `return`, …), or has a `;` outside every bracket, string and
/// comment. Whatever it cannot lex for sure (a `/` that is no comment, a
/// template literal, HTML-like comments) makes it answer false, and the
/// browser's parser decides.
pub(crate) fn certainly_statements(src: &str) -> bool {
    const STATEMENT_ONLY: [&str; 14] = [
        "var", "const", "if", "for", "while", "do", "return", "throw", "try", "switch", "break",
        "continue", "debugger", "with",
    ];
    let is_ident = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let word_at = |s: &str| -> usize { s.find(|c: char| !is_ident(c)).unwrap_or(s.len()) };
    let Some(body) = skip_trivia(src) else {
        return false;
    };
    let n = word_at(body);
    let word = &body[..n];
    if STATEMENT_ONLY.contains(&word) {
        return true;
    }
    if word == "let" {
        if let Some(rest) = skip_trivia(&body[n..]) {
            let next = &rest[..word_at(rest)];
            let starts_ident = rest
                .chars()
                .next()
                .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$');
            if (starts_ident && next != "in" && next != "instanceof") || rest.starts_with('{') {
                return true;
            }
        }
    }
    top_level_semicolon(src)
}

/// Whitespace and comments skipped; `None` for an unterminated block comment.
fn skip_trivia(s: &str) -> Option<&str> {
    let mut s = s.trim_start();
    loop {
        if let Some(rest) = s.strip_prefix("//") {
            s = rest.find('\n').map_or("", |i| &rest[i..]).trim_start();
        } else if let Some(rest) = s.strip_prefix("/*") {
            s = rest[rest.find("*/")? + 2..].trim_start();
        } else {
            return Some(s);
        }
    }
}

/// A `;` outside brackets, strings and comments, found before anything
/// ambiguous to a lexer without a grammar (see [`certainly_statements`]).
fn top_level_semicolon(src: &str) -> bool {
    let mut depth = 0i32;
    let mut it = src.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\'' | '"' => loop {
                match it.next() {
                    Some('\\') => {
                        it.next();
                    }
                    Some(q) if q == c => break,
                    Some('\n' | '\r') | None => return false,
                    Some(_) => {}
                }
            },
            '/' => match it.peek() {
                Some('/') => {
                    for x in it.by_ref() {
                        if x == '\n' {
                            break;
                        }
                    }
                }
                Some('*') => {
                    it.next();
                    let mut prev = ' ';
                    loop {
                        match it.next() {
                            Some('/') if prev == '*' => break,
                            Some(x) => prev = x,
                            None => return false,
                        }
                    }
                }
                _ => return false,
            },
            '`' => return false,
            '<' if it.clone().take(3).eq("!--".chars()) => return false,
            '-' if it.clone().take(2).eq("->".chars()) => return false,
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            ';' if depth == 0 => return true,
            _ => {}
        }
    }
    false
}

/// True when `src` is a function literal: `function …`, `async …`, `x => …`, `(…) => …`.
pub(crate) fn looks_like_function(src: &str) -> bool {
    let mut s = src.trim_start();
    let is_ident = |c: char| c.is_alphanumeric() || c == '_' || c == '$';
    let keyword = |s: &str, kw: &str| s.starts_with(kw) && !s[kw.len()..].starts_with(is_ident);
    if keyword(s, "async") {
        s = s["async".len()..].trim_start();
    }
    if keyword(s, "function") {
        return true;
    }
    let rest = if let Some(inner) = s.strip_prefix('(') {
        let mut depth = 1usize;
        let mut end = None;
        for (i, c) in inner.char_indices() {
            match c {
                '(' => depth += 1,
                ')' => {
                    depth -= 1;
                    if depth == 0 {
                        end = Some(i + 1);
                        break;
                    }
                }
                _ => {}
            }
        }
        match end {
            Some(e) => &inner[e..],
            None => return false,
        }
    } else {
        let n = s.find(|c: char| !is_ident(c)).unwrap_or(s.len());
        if n == 0 {
            return false;
        }
        &s[n..]
    };
    rest.trim_start().starts_with("=>")
}

fn timeout_err(kind: TimeoutKind, budget: &Budget, start: Instant, terminated: bool) -> Error {
    Error::Timeout {
        kind,
        budget: budget.total(),
        elapsed: start.elapsed(),
        terminated,
    }
}

fn cancelled_setup(budget: &Budget, start: Instant) -> Error {
    Error::Cancelled {
        budget: budget.total(),
        elapsed: start.elapsed(),
        sent: false,
        terminated: false,
    }
}

/// A transport error before the script was sent.
fn setup_err(e: cdp_transport::Error, budget: &Budget, start: Instant, context: &str) -> Error {
    if e.is_timeout() {
        timeout_err(TimeoutKind::Setup, budget, start, false)
    } else if e.is_cancelled() {
        cancelled_setup(budget, start)
    } else {
        Error::transport(context, e)
    }
}

/// Maps a failed call on the evaluating session (C10 texts, gone sessions).
fn map_call_err(e: cdp_transport::Error, frame: &FrameId, context: &str) -> Error {
    if let Some(msg) = e.protocol_message() {
        if msg.contains("Inspected target navigated or closed") {
            return Error::Navigated {
                frame_id: frame.clone(),
                message: msg.to_string(),
            };
        }
        if msg.contains("Cannot find context with specified id")
            || msg.contains("Execution context was destroyed")
            || msg.contains("Cannot find default execution context")
            || msg.contains("uniqueContextId not found")
        {
            return Error::ContextDestroyed {
                frame_id: frame.clone(),
                message: msg.to_string(),
            };
        }
    }
    if e.is_session_gone() {
        return Error::ContextDestroyed {
            frame_id: frame.clone(),
            message: e.to_string(),
        };
    }
    Error::transport(context, e)
}

/// True for `exceptionDetails` of a terminated execution
/// (`Runtime.terminateExecution`, or Chromium's own `timeout`).
fn is_termination(d: &Value) -> bool {
    d["exception"]["description"]
        .as_str()
        .or_else(|| d["text"].as_str())
        .is_some_and(|t| t.contains("Execution was terminated"))
        || d["text"].as_str().is_some_and(|t| t.contains("terminated"))
}

/// Reads the wrapper's answer to `method`.
fn read_reply(
    mut reply: Value,
    form: SourceForm,
    src: &str,
    method: &str,
    budget: &Budget,
    start: Instant,
) -> Work {
    if let Some(d) = reply.get("exceptionDetails") {
        // The wrapper catches the script's exceptions, so this is a termination
        // (Chromium's own `timeout`), code that escaped the wrapper, or a
        // failure of the wrapper itself.
        if is_termination(d) {
            return Err(timeout_err(TimeoutKind::Script, budget, start, true));
        }
        let text = d["exception"]["description"]
            .as_str()
            .or_else(|| d["text"].as_str())
            .unwrap_or("exception");
        let name = d["exception"]["className"]
            .as_str()
            .unwrap_or("Error")
            .to_string();
        return Err(Error::JsException {
            name,
            message: text.lines().next().unwrap_or(text).to_string(),
            location: None,
        });
    }
    let result = &mut reply["result"];
    // A plain JSON primitive comes back as itself (see `engine_js`).
    let primitive = match result["type"].as_str() {
        Some("boolean" | "string") => true,
        Some("number") => result["value"].is_number(),
        Some("object") => result["subtype"] == "null" && result["value"].is_null(),
        _ => false,
    };
    if primitive {
        return Ok((result["value"].take(), false, form));
    }
    let v = &mut result["value"];
    match v["$tw"].as_str() {
        Some("ok") => Ok((
            v.get_mut("value").map(Value::take).unwrap_or(Value::Null),
            v["truncated"].as_bool().unwrap_or(false),
            form,
        )),
        Some("exception") => {
            let stack = v["stack"].as_str().unwrap_or("");
            Err(Error::JsException {
                name: v["name"].as_str().unwrap_or("Error").to_string(),
                message: v["message"].as_str().unwrap_or("").to_string(),
                location: first_frame(stack, form, src),
            })
        }
        Some("promise_timeout") => Err(timeout_err(TimeoutKind::Promise, budget, start, false)),
        _ => Err(Error::UnexpectedReply {
            method: method.into(),
            detail: format!(
                "the page returned no wrapper result: {}",
                excerpt(&reply.to_string(), 200)
            ),
        }),
    }
}

fn excerpt(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n).collect();
        t.push('…');
        t
    }
}

/// Where the exception was thrown, from a V8 stack: the first frame that
/// is no builtin. In the user's source it is `line L, column C` (1-based,
/// the wrapper's offset taken off; with the function name when the user's
/// code named it, e.g. `f (line 2, column 5)`); in another script it is the
/// frame as V8 prints it (`f (http://a/b.js:10:2)`). A position inside the
/// wrapper, or a stack with no frame, gives `None`.
///
/// The source sits on line 2 of the wrapper (column 1), or, for
/// [`SourceForm::Script`], on line 2 of the text its `eval` runs (frames
/// `(eval at …, <anonymous>:L:C)`).
pub(crate) fn first_frame(stack: &str, form: SourceForm, src: &str) -> Option<String> {
    let lines = src.lines().count().max(1);
    for frame in stack
        .lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("at "))
    {
        let (name, loc) = match frame.find(" (") {
            Some(p) if frame.ends_with(')') => (Some(&frame[..p]), &frame[p + 2..frame.len() - 1]),
            _ => (None, frame),
        };
        let (in_eval, pos) = match loc.strip_prefix("eval at ") {
            Some(rest) => (true, rest.rsplit(", ").next().unwrap_or(rest)),
            None => (false, loc),
        };
        let Some(at) = pos.strip_prefix("<anonymous>") else {
            // Another script (a URL), or `native`.
            if pos == "native" {
                continue;
            }
            return Some(frame.to_string());
        };
        let mut nums = at.split(':').skip(1).map(|n| n.parse::<usize>().ok());
        let (Some(Some(line)), Some(Some(col))) = (nums.next(), nums.next()) else {
            // A builtin (`JSON.parse (<anonymous>)`): look further.
            continue;
        };
        let ours = in_eval == (form == SourceForm::Script);
        let user_line = line
            .checked_sub(1)
            .filter(|l| ours && (1..=lines).contains(l))?;
        let named =
            name.filter(|n| !matches!(*n, "__tw_run" | "eval" | "<anonymous>" | "async __tw_run"));
        return Some(match named {
            Some(n) => format!("{n} (line {user_line}, column {col})"),
            None => format!("line {user_line}, column {col}"),
        });
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn function_literals_are_recognised() {
        for s in [
            "() => 1",
            "x => x",
            "async () => 1",
            "async x => x",
            "function f() {}",
            " async function () {}",
            "(a, (b)) => a",
        ] {
            assert!(looks_like_function(s), "{s}");
        }
        for s in [
            "1 + 2",
            "document.title",
            "(1 + 2)",
            "functional()",
            "asyncThing",
            "x",
            "(x)",
            "{a: 1}",
        ] {
            assert!(!looks_like_function(s), "{s}");
        }
    }

    #[test]
    fn statements_are_recognised_only_when_certain() {
        for s in [
            "const a = 2; return a * 21",
            "let x = 1",
            "let {a} = o",
            "var x",
            "if (a) b()",
            "for (;;) {}",
            "while (true) {}",
            "return 5",
            "throw new Error('x')",
            "try { a() } catch {}",
            "// note\nreturn 1",
            "/* c */ do {} while (0)",
            "a = 1; return a",
            "f(); g()",
            "1+1;",
            "x = 'a;b'; y",
            "({a: 1}); 2",
        ] {
            assert!(certainly_statements(s), "{s}");
            assert_eq!(first_form(s, true), SourceForm::Statements, "{s}");
        }
        // Valid expressions (and whatever the lexer cannot be sure of) are not.
        for s in [
            "1+1",
            "document.title",
            "(function () { return 1; })()",
            "() => { a(); b(); }",
            "x => x",
            "'a;b'",
            "\"a;b\"",
            "`a;${b}`",
            "/;/.test(s)",
            "a / b; c",
            "x <!-- ; y",
            "a\n--> ; b",
            "let in o",
            "let instanceof X",
            "let[0]",
            "letter + 1",
            "format(x)",
            "returned",
            "class A {}",
            "{a: 1}",
            "import('x')",
            "a\nb",
            "(a; b",
            ")); x;",
            "'unterminated; x",
            "/* unterminated ; x",
        ] {
            assert!(!certainly_statements(s), "{s}");
        }
        assert_eq!(first_form("async () => 1", false), SourceForm::Function);
        assert_eq!(first_form("a\nb", false), SourceForm::Expression);
        // Page statements go as a script (completion value) unless they
        // `return` at the top level or use `await`.
        for (src, form) in [
            ("var x = 1; x", SourceForm::Script),
            ("document.title; document.title.length", SourceForm::Script),
            ("const f = () => { return 1 }; f()", SourceForm::Script),
            ("if (a) { return 1 }; 2", SourceForm::Script),
            ("x.return = 1; x", SourceForm::Script),
            ("const a = 2; return a * 21", SourceForm::Statements),
            ("if (a) return 1; 2", SourceForm::Statements),
            ("const r = await f(); r", SourceForm::Statements),
            ("'use strict'; var s = 1; s", SourceForm::Statements),
            ("// note\n\"use strict\"; 1; 2", SourceForm::Statements),
        ] {
            assert_eq!(first_form(src, false), form, "{src}");
            assert_eq!(first_form(src, true), SourceForm::Statements, "{src}");
        }
    }

    #[test]
    fn settle_timer_is_rounded_down_before_the_deadline() {
        let ms = Duration::from_millis;
        assert_eq!(settle_ms(ms(5000) - Duration::from_micros(30)), 4740);
        assert_eq!(settle_ms(ms(5000) - Duration::from_micros(900)), 4740);
        assert_eq!(settle_ms(ms(500)), 470);
        assert_eq!(settle_ms(ms(20_000)), 19_750);
        assert_eq!(settle_ms(ms(5)), 1);
        for r in [1u64, 37, 499, 1001, 7_777, 120_000] {
            let s = settle_ms(ms(r));
            assert!(s < r || r <= 20, "{r} → {s}");
            assert_eq!(s % 10, if s == 1 { 1 } else { 0 });
        }
    }

    #[test]
    fn first_frame_maps_wrapper_lines_back() {
        let e = SourceForm::Expression;
        let two = "a\nb()";
        let stack =
            "Error: boom\n    at __tw_run (<anonymous>:3:7)\n    at async x (<anonymous>:9:1)";
        assert_eq!(
            first_frame(stack, e, two).as_deref(),
            Some("line 2, column 7")
        );
        // Past the source's last line, or on the wrapper's first: no position.
        assert_eq!(first_frame(stack, e, "one line"), None);
        assert_eq!(first_frame("E\n    at <anonymous>:1:30", e, two), None);
        assert_eq!(first_frame("Error: x", e, two), None);
        assert_eq!(
            first_frame("E\n    at f (http://a/b.js:10:2)", e, two).as_deref(),
            Some("f (http://a/b.js:10:2)")
        );
        // Builtins are skipped; a user-named function keeps its name.
        assert_eq!(
            first_frame(
                "SyntaxError: x\n    at JSON.parse (<anonymous>)\n    at parse (<anonymous>:2:12)",
                SourceForm::Statements,
                two
            )
            .as_deref(),
            Some("parse (line 1, column 12)")
        );
        // A script's statements run in an eval whose line 2 is the source's line 1.
        let s = SourceForm::Script;
        let stack = "TypeError: t\n    at eval (eval at __tw_run (<anonymous>:1:95), <anonymous>:2:8)\n    at __tw_run (<anonymous>:1:95)";
        assert_eq!(
            first_frame(stack, s, two).as_deref(),
            Some("line 1, column 8")
        );
        let stack = "Error: f\n    at f (eval at __tw_run (<anonymous>:1:95), <anonymous>:3:20)";
        assert_eq!(
            first_frame(stack, s, two).as_deref(),
            Some("f (line 2, column 20)")
        );
        // The wrapper's own frame is no position of the source's.
        assert_eq!(
            first_frame("E\n    at __tw_run (<anonymous>:1:95)", s, two),
            None
        );
    }
}
