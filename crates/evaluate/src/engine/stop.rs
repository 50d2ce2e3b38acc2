//! Stopping an evaluate, and settling after (steps 5 and 6 of the
//! [module docs](super)): what ends one from outside (the deadline, the
//! caller's cancellation; a dialog, a navigation or a destroyed context),
//! the idle probe that tells a running script from a pending promise, the
//! hand-off of `Runtime.terminateExecution` to [`crate::terminate`], the
//! settling that keeps or retires the session, and the gate that holds new
//! evaluates while a termination may be pending.

use super::reply::{cancelled_setup, timeout_err};
use super::run::Sent;
use super::warm::Warm;
use super::{bump, duration_ms, lock, Engine, Work, CLEANUP_BUDGET};
use crate::busy::Unstick;
use crate::error::{Error, Result, TimeoutKind};
use cdp_transport::{Budget, Event, FrameId, Session};
use chromiumoxide_cdp::cdp::browser_protocol::page::EventFrameDetached;
use chromiumoxide_cdp::cdp::js_protocol::runtime::{
    EvaluateParams, EventExecutionContextDestroyed, EventExecutionContextsCleared,
};
use serde_json::{json, Value};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;
use tracing::debug;

impl Engine {
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
    pub(super) async fn stop<W>(
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
    /// page facts ([`Engine::set_facts`]) name for the target, else
    /// `session` itself; a route that names none (a dialog holds the page)
    /// sends nothing, and the handle reports nothing stopped.
    ///
    /// For the clean-up of an action whose page script kept running past
    /// the action's budget (a spinning click handler, a hung `onload`).
    pub fn terminate(&self, session: &Session) -> crate::Termination {
        let Some(via) = crate::busy::route_session(self.facts().as_ref(), session) else {
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
    pub(super) async fn wait_absorbed(&self, budget: &Budget, start: Instant) -> Result<()> {
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
    pub(super) async fn busy_or(
        &self,
        e: Error,
        unstick: &Unstick,
        budget: &Budget,
        start: Instant,
    ) -> Error {
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
}

/// How a watched evaluate was stopped from outside.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Stop {
    Deadline,
    Cancel,
}

/// The hook an [`Unstick`] of an engine calls when it sends a termination
/// (+1) and when that is settled (-1): new evaluates wait meanwhile
/// ([`Engine::wait_absorbed`]), as after the engine's own terminations (C17).
pub(super) fn absorb_hook(absorbing: &watch::Sender<u32>) -> crate::busy::SettleHook {
    let tx = absorbing.clone();
    Arc::new(move |d: i32| {
        tx.send_modify(|n| *n = n.saturating_add_signed(d));
    })
}

/// After an execution context of the running evaluate went away, how long
/// its call may take to answer for itself before the evaluate ends with
/// `navigated` / `context_destroyed` (C10).
pub(super) const INTERRUPT_SETTLE: Duration = Duration::from_millis(100);

/// The expression of an idle probe ([`IdleProbe`]); distinct from the
/// health probe's `0` so that logs (and scripted tests) tell them apart.
const IDLE_PROBE: &str = "0 // tabwarden idle probe";

/// A trivial evaluate sent, in the background, on the session of a script
/// whose call is pending. Commands of one session run in order on the
/// renderer's main thread, so an answer (a value, or "Execution was
/// terminated": either way it ran) means everything sent before it on that
/// session had run to the end of its synchronous part and the thread was
/// free: the script's call is waiting for a promise. No answer: the thread
/// is busy (or the browser is very slow).
pub(super) struct IdleProbe {
    /// The script send ([`Sent::sends`](super::run::Sent::sends)) it followed.
    sends: u64,
    answered: watch::Receiver<bool>,
}

impl IdleProbe {
    pub(super) fn send(session: &Session, sends: u64) -> Self {
        let (tx, rx) = watch::channel(false);
        let s = session.clone();
        tokio::spawn(async move {
            // raw: any answer counts, "Execution was terminated" included; a typed 0.9 decode of an answer it does not know (exceptionDetails, RemoteObject subtypes) would read as no answer
            let r = s
                .call(
                    EvaluateParams::IDENTIFIER,
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

    pub(super) fn answered(&self) -> bool {
        *self.answered.borrow()
    }

    /// Resolves when answered; never, if it fails.
    async fn wait(&mut self) {
        if self.answered.wait_for(|a| *a).await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// An event that ends the evaluate running in `frame` (context `ctx`).
///
/// Before the script is sent, a destroyed context is not an interruption:
/// the work retries once in the frame's new context (nothing ran yet).
pub(super) fn interruption(
    ev: &Event,
    frame: &FrameId,
    ctx: &Mutex<Option<i64>>,
    sent: &AtomicBool,
    detached: &mut bool,
) -> Option<Error> {
    let sent = sent.load(Ordering::SeqCst);
    match ev.method.as_str() {
        EventFrameDetached::IDENTIFIER
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
        EventExecutionContextDestroyed::IDENTIFIER => {
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
        EventExecutionContextsCleared::IDENTIFIER if lock(ctx).is_some() => {
            Some(Error::Navigated {
                frame_id: frame.clone(),
                message: "execution contexts were cleared (Runtime.executionContextsCleared)"
                    .into(),
            })
        }
        _ => None,
    }
}
