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
//!    page facts name ([`Engine::set_facts`], [`crate::PageFacts::terminate_via`]: a session the renderer bound
//!    before it got busy; one attached while the script runs cannot reach
//!    it), and the evaluate goes on within its budget: the held commands
//!    answer once the script has stopped, and the script is sent only after
//!    that termination is settled (acknowledged, or taken by a probe), so it
//!    never ends the user's script. The result then carries a note
//!    ([`EvalOutcome::notes`]); at the deadline it is `page_busy`, which
//!    says a script was stopped only when the termination was acknowledged.
//!
//!    Dialogs come from the page facts when they carry them
//!    ([`crate::PageFacts::dialogs`], a supervisor's record with its ids):
//!    one open refuses the evaluate (`dialog_opened`) unless the owner
//!    answers every dialog itself (an auto policy). Alone, the page
//!    session's tracker is the record: a dialog it saw open with no close
//!    refuses the evaluate. One seen more than 250 ms ago is checked first
//!    by a trivial evaluate on the session of its frame, bounded by 300 ms
//!    (and half the budget): a dialog holds its renderer, so an answer shows
//!    none blocks it (an opening whose close never came), and the state is
//!    forgotten.
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
//!
//! ## Files
//!
//! One file per job under `engine/`; this file holds the [`Engine`] handle
//! and its small public methods:
//! - `types.rs`: the public types ([`EngineConfig`], [`EvalTarget`],
//!   [`EvalRequest`], [`SourceForm`], [`EvalOutcome`], [`EngineMetrics`]);
//! - `warm.rs`: warm sessions (attach and enable, the per-session tracker of
//!   execution contexts and dialogs, routing a target to a session);
//! - `run.rs`: the evaluate path (the watch loop, the work, sending forms);
//! - `stop.rs`: deadline, cancellation, dialogs and navigations, the idle
//!   probe, the termination hand-off and settling;
//! - `reply.rs`: reading the wrapper's reply, error mapping, stack positions;
//! - `form.rs`: the source-form lexer; `compile.rs`: the compile check;
//! - `js.rs`: the per-call wrapper around the page-side helper
//!   (`assets/helper.js`);
//! - `tests.rs`: unit tests of the pure parts.

mod compile;
mod dialogs;
mod form;
mod js;
mod reply;
mod run;
mod stop;
#[cfg(test)]
mod tests;
mod types;
mod warm;

pub use types::{EngineConfig, EngineMetrics, EvalOutcome, EvalRequest, EvalTarget, SourceForm};

use crate::error::{Error, Result, TimeoutKind};
use cdp_transport::{BackendNodeId, Budget, Connection, Session, TargetId};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tracing::{info, Instrument};
use warm::Warm;

/// Budget for clean-up work that runs after the caller got its answer
/// (`Runtime.terminateExecution`, `Target.detachFromTarget`, `Runtime.releaseObject`).
const CLEANUP_BUDGET: Duration = Duration::from_secs(2);

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
    /// What the owner of the tab's state knows ([`Engine::set_facts`]).
    facts: Mutex<Option<Arc<dyn crate::PageFacts>>>,
    /// The settle hook of this engine's [`Unstick`](crate::busy::Unstick)s (see [`stop::absorb_hook`]).
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

/// What the work future returns before it becomes an [`EvalOutcome`].
type Work = Result<(Value, bool, SourceForm)>;

fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

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
                absorb_hook: stop::absorb_hook(&absorbing),
                absorbing,
                facts: Mutex::new(None),
                m: Counters::default(),
            }),
        }
    }

    /// Gives the engine what the owner of the tab's state knows (see
    /// [`crate::facts`]): where a termination reaches a target whose
    /// renderer is busy with its page's own script (one the renderer bound
    /// before it got busy: Chromium binds a new session on the renderer's
    /// main thread, so a session the engine attaches while a script runs
    /// cannot end it; a tab names the supervisor's page and cross-site
    /// iframe sessions, and none while a dialog is pending), and the tab's
    /// dialogs, with their ids. Without facts, terminations go on the
    /// engine's own session of the command that had no answer (which ends
    /// the page's script only when that session was attached before), and
    /// dialogs are tracked on the engine's own sessions.
    pub fn set_facts(&self, facts: Arc<dyn crate::PageFacts>) {
        *lock(&self.inner.facts) = Some(facts);
    }

    /// The facts given with [`Engine::set_facts`].
    pub fn facts(&self) -> Option<Arc<dyn crate::PageFacts>> {
        lock(&self.inner.facts).clone()
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
}
