//! The evaluate path (steps 2 to 4 of the [module docs](super)): the watch
//! over one evaluate (deadline, cancellation, the session's events), the
//! work that talks to the page (element resolve, the frame's context, one
//! retry in a new context), and sending the source in its forms with the
//! page-side helper.

use super::compile::{body_only_syntax, compile_check, invalid_source, is_syntax_error};
use super::form::{first_form, statements_form};
use super::js::{self, Helper};
use super::reply::{is_termination, map_call_err, read_reply};
use super::stop::{interruption, IdleProbe, Stop, INTERRUPT_SETTLE};
use super::warm::{parse_dialog, Ctx, HelperState, Warm};
use super::{
    duration_ms, lock, Engine, EvalOutcome, EvalRequest, SourceForm, Work, CLEANUP_BUDGET,
};
use crate::busy::Unstick;
use crate::error::{Error, Result};
use cdp_transport::{Budget, Event, EventStream, FrameId, RecvError};
use chromiumoxide_cdp::cdp::browser_protocol::dom::{self, ResolveNodeParams};
use chromiumoxide_cdp::cdp::browser_protocol::page::{
    EventFrameDetached, EventJavascriptDialogOpening,
};
use chromiumoxide_cdp::cdp::js_protocol::runtime::{
    CallFunctionOnParams, EvaluateParams, ReleaseObjectParams,
};
use serde_json::{json, Value};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::{debug, warn};

impl Engine {
    pub(super) async fn evaluate_inner(
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
            self.facts(),
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
        // The owner's dialog record, when the page facts carry one, else
        // the page session's own tracker (its events, subscribed above).
        let mut owner = super::dialogs::OwnerDialogs::watch(self.facts());
        self.check_dialog(owner.as_ref().map(|o| o.first()), &page, &warm, budget)
            .await?;
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
                dialog = async { owner.as_mut()?.opened().await.into() }, if owner.is_some() => {
                    if let Some(dialog) = dialog {
                        return Err(Error::DialogOpened {
                dialog: Box::new(dialog),
            });
                    }
                }
                ev = recv_opt(&mut page_ev) => {
                    if let Some(ev) = ev {
                        if owner.is_none() && ev.method == EventJavascriptDialogOpening::IDENTIFIER {
                            let dialog = parse_dialog(&ev.params);
                            debug!(?dialog, "dialog ended the evaluate");
                            return Err(Error::DialogOpened {
                dialog: Box::new(dialog),
            });
                        }
                        if same {
                            if let Some(e) = interruption(&ev, &frame_id, &ctx_id, &sent.on, &mut detached) {
                                if !sent.is_set() {
                                    return Err(e);
                                }
                                interrupted.get_or_insert((e, *lock(&ctx_id), tokio::time::Instant::now() + INTERRUPT_SETTLE));
                            }
                        } else if ev.method == EventFrameDetached::IDENTIFIER
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
            // Typed: the reply is a node's RemoteObject (type `object`,
            // subtype `node`), which the bindings know.
            let resolve = ResolveNodeParams {
                backend_node_id: Some(dom::BackendNodeId::new(node.0)),
                object_group: Some("tabwarden-eval".into()),
                ..Default::default()
            };
            let resolved = unstick
                .execute(session, resolve, &call_budget)
                .await
                .map_err(|e| {
                    map_call_err(e, frame, &format!("resolving backend node {}", node.0))
                })?;
            let Some(object_id) = resolved.object.object_id.map(String::from) else {
                return Err(Error::UnexpectedReply {
                    method: ResolveNodeParams::IDENTIFIER.into(),
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
                    .execute(ReleaseObjectParams::new(object_id), CLEANUP_BUDGET)
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
                    (
                        EvaluateParams::IDENTIFIER,
                        params,
                        text,
                        Some(ctx.id),
                        "evaluating",
                    )
                }
                Channel::Element(object_id) => {
                    let decl = js::wrapper_function(src, form, Helper::Install);
                    let text = js::function_compile_text(&decl);
                    let params = json!({
                        "functionDeclaration": decl,
                        "objectId": object_id,
                        "arguments": [{"objectId": object_id}, {"value": self.page_cfg(remaining)}],
                        "awaitPromise": true,
                        "returnByValue": true,
                    });
                    (
                        CallFunctionOnParams::IDENTIFIER,
                        params,
                        text,
                        None,
                        "calling the function on the element",
                    )
                }
            };
            sent.set();
            // raw: the reply's RemoteObject (any type/subtype the script's value or exception has) and exceptionDetails are read as JSON; a typed 0.9 decode fails on subtypes and fields Chromium 156 sends that it lacks
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
            js::script_wrapper_expression(src, helper, &self.page_cfg_literal(remaining))
        } else {
            js::wrapper_expression(src, form, helper, &self.page_cfg_literal(remaining))
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

/// Whether the user's script is in flight (sent, its call not answered),
/// and how many times a form was sent: an idle probe counts only for the
/// send it followed.
#[derive(Default)]
pub(super) struct Sent {
    on: AtomicBool,
    sends: AtomicU64,
}

impl Sent {
    pub(super) fn set(&self) {
        self.sends.fetch_add(1, Ordering::SeqCst);
        self.on.store(true, Ordering::SeqCst);
    }
    pub(super) fn clear(&self) {
        self.on.store(false, Ordering::SeqCst);
    }
    pub(super) fn is_set(&self) -> bool {
        self.on.load(Ordering::SeqCst)
    }
    pub(super) fn sends(&self) -> u64 {
        self.sends.load(Ordering::SeqCst)
    }
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

/// An idle probe re-scheduled because the script was not sent yet is sent
/// only when at least this much time is left before the deadline.
const MIN_PROBE_LEAD: Duration = Duration::from_millis(2);

/// The in-page settle timer for `remaining`: a margin (5 %, 20 to 250 ms)
/// before the deadline, rounded down to 10 ms. Rounded so that the same
/// source under the same budget gives the same wrapper text, which V8's
/// compilation cache recognises (a miss costs more than the rest of the
/// page-side work for a small script).
pub(super) fn settle_ms(remaining: Duration) -> u64 {
    let margin = (remaining / 20).clamp(Duration::from_millis(20), Duration::from_millis(250));
    (duration_ms(remaining.saturating_sub(margin)) / 10 * 10).max(1)
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
