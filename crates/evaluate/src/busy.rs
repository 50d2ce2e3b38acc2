//! The page's own script keeping the renderer busy.
//!
//! A renderer runs its page's JavaScript and the CDP commands of every
//! session on one main thread. A page script that never yields
//! (`setTimeout(() => { while (true) {} })`) holds every renderer-bound
//! command: `Runtime.enable`, `Page.getFrameTree`,
//! `Accessibility.getFullAXTree`, `DOM.describeNode`, `Runtime.evaluate`.
//! Only `Runtime.terminateExecution` gets through: Chromium dispatches it
//! as a V8 interrupt, inside the running script, and V8 ends that script.
//!
//! But only on a session the renderer had bound before it got busy:
//! Chromium binds a new session in the renderer on its main thread, so a
//! session attached while a script runs queues even
//! `Runtime.terminateExecution` behind that script (measured on Chromium
//! 156: a termination on a fresh engine session never took, one on a
//! session attached earlier did at once).
//!
//! [`Unstick`] wraps such commands for one operation (an evaluate's setup,
//! a snapshot). A command that has not answered after half the
//! operation's budget, at most [`BUSY_AFTER_MAX`], or whose budget ran
//! out, gets one `Runtime.terminateExecution` for **its target** (so for
//! the process of the busy frame: the page's, or a cross-site iframe's):
//! on the session the page facts name for that target
//! ([`crate::PageFacts::terminate_via`]: the supervisor's, attached when
//! the target was created; `Hold`, e.g. while a dialog holds the page,
//! means no termination), and without page facts on the command's own
//! session. The wait goes on within the same budget: the
//! held commands run as soon as the script has stopped. Nothing is sent
//! twice.
//!
//! A termination that arrives while no script runs stays pending in V8
//! and ends the *next* script of that process (`terminate the current or
//! the next execution`, field case C17), so each one is settled in the
//! background: its acknowledgement (V8 sends it once the terminated call
//! has unwound) is awaited for [`crate::terminate::ACK_GRACE`]; without it, a trivial
//! `Runtime.evaluate` on the same session takes the termination. An
//! acknowledgement within [`crate::terminate::ACK_GRACE`] (or a probe that then runs to its
//! value instead of being terminated) is the evidence that a script was
//! running and was stopped, and only then do the notes and errors say so. Callers that run the user's script next wait for
//! [`Unstick::settled`] first.
//!
//! Known limit: a renderer that is slow for another reason (a very large
//! layout, or a navigation that holds renderer-bound commands in the
//! browser) for that long is also sent a termination; it then ends the
//! next script of that process unless the probe takes it first.

use cdp_transport::{Budget, Command, Session};
use serde_json::Value;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tracing::{debug, info};

/// The longest a renderer-bound command waits before the renderer is taken
/// as busy with the page's own script (when half the budget is longer).
pub const BUSY_AFTER_MAX: Duration = Duration::from_secs(2);

/// The session a termination for `session`'s target goes on: the one the
/// page facts name for that target ([`crate::PageFacts::terminate_via`];
/// `Hold`: send none), else `session` itself. A closed session is never
/// named.
pub(crate) fn route_session(
    facts: Option<&Arc<dyn crate::PageFacts>>,
    session: &Session,
) -> Option<Session> {
    let via = match (facts, session.target_id()) {
        (Some(f), Some(t)) => f.terminate_via(t),
        _ => None,
    };
    match via {
        Some(crate::TerminateVia::Session(s)) => Some(s).filter(|s| s.closed_reason().is_none()),
        Some(crate::TerminateVia::Hold) => None,
        None => Some(session.clone()),
    }
}

/// A hook told `+1` when a termination is sent and `-1` when it is settled
/// (the engine holds its new evaluates meanwhile).
pub(crate) type SettleHook = Arc<dyn Fn(i32) + Send + Sync>;

/// One termination sent by an [`Unstick`].
struct Term {
    /// The target it was for (one termination per target).
    target: Option<cdp_transport::TargetId>,
    /// The session of the command that had no answer.
    session: Session,
    /// The command that did not answer, for the notes.
    method: String,
    /// How long it had waited.
    waited: Duration,
    /// Its settling (whether a running script was stopped).
    termination: crate::Termination,
}

/// Terminates the page's own script when a renderer-bound command of one
/// operation is not answered (see the [module docs](self)). Cheap to clone;
/// clones share the terminations.
#[derive(Clone)]
pub(crate) struct Unstick {
    after: Duration,
    shared: Arc<Shared>,
    hook: Option<SettleHook>,
    facts: Option<Arc<dyn crate::PageFacts>>,
}

/// What the clones of one [`Unstick`] share (one allocation per operation).
#[derive(Default)]
struct Shared {
    terms: Mutex<Vec<Term>>,
    /// Commands in flight.
    pending: Mutex<Vec<InFlight>>,
    next_key: std::sync::atomic::AtomicU64,
    /// Notes the caller added ([`Unstick::add_note`]).
    extra: Mutex<Vec<String>>,
}

/// A command in flight: (key, session, method, since).
type InFlight = (u64, Session, String, Instant);

/// Removes a command from the commands in flight when its future ends or is dropped.
struct PendingGuard<'a> {
    unstick: &'a Unstick,
    key: u64,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        lock(&self.unstick.shared.pending).retain(|p| p.0 != self.key);
    }
}

impl std::fmt::Debug for Unstick {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Unstick")
            .field("after", &self.after)
            .finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Half of `budget`'s remaining time, at most `max`.
pub(crate) fn busy_after(budget: &Budget, max: Duration) -> Duration {
    (budget.remaining() / 2).min(max)
}

impl Unstick {
    /// An unstick for one operation under `budget`; `max` caps the wait
    /// before a termination ([`BUSY_AFTER_MAX`] by default).
    pub(crate) fn new(
        budget: &Budget,
        max: Duration,
        hook: Option<SettleHook>,
        facts: Option<Arc<dyn crate::PageFacts>>,
    ) -> Self {
        Self {
            after: busy_after(budget, max),
            shared: Arc::default(),
            hook,
            facts,
        }
    }

    /// [`Unstick::call`] for a typed `chromiumoxide_cdp` command, as
    /// `session.execute(cmd, budget)` sends it: the same params on the wire,
    /// the same watchdog, and the reply decoded into the command's response.
    ///
    /// # Errors
    /// The call's own error; `Encode`/`Decode` as [`Session::execute`].
    ///
    /// # Cancel safety
    /// As [`Unstick::call`].
    pub(crate) async fn execute<C: Command>(
        &self,
        session: &Session,
        cmd: C,
        budget: &Budget,
    ) -> Result<C::Response, cdp_transport::Error> {
        let method = cmd.identifier();
        let params = serde_json::to_value(&cmd).map_err(|source| cdp_transport::Error::Encode {
            method: method.to_string(),
            source,
        })?;
        let reply = self.call(session, &method, params, budget).await?;
        C::response_from_value(reply).map_err(|source| cdp_transport::Error::Decode {
            method: method.to_string(),
            source,
        })
    }

    /// `session.call(method, params, budget)`, and `Runtime.terminateExecution`
    /// for `session`'s target (once) when it has not answered after half the
    /// operation's budget (at most the cap)
    /// or its budget ran out. The wait goes on after the termination, within
    /// `budget`.
    ///
    /// # Errors
    /// The call's own error.
    ///
    /// # Cancel safety
    /// Cancel safe: a termination already sent settles in the background.
    pub(crate) async fn call(
        &self,
        session: &Session,
        method: &str,
        params: Value,
        budget: &Budget,
    ) -> Result<Value, cdp_transport::Error> {
        let start = Instant::now();
        let key = self
            .shared
            .next_key
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        lock(&self.shared.pending).push((key, session.clone(), method.to_string(), start));
        let _guard = PendingGuard { unstick: self, key };
        let fut = session.call(method, params, budget.clone());
        tokio::pin!(fut);
        let stall = tokio::time::sleep(self.after);
        tokio::select! {
            biased;
            r = &mut fut => return self.after_call(session, method, start, r),
            () = stall => {
                self.terminate(session, method, start.elapsed());
            }
        }
        let r = fut.await;
        self.after_call(session, method, start, r)
    }

    fn after_call(
        &self,
        session: &Session,
        method: &str,
        start: Instant,
        r: Result<Value, cdp_transport::Error>,
    ) -> Result<Value, cdp_transport::Error> {
        if matches!(&r, Err(e) if e.is_timeout()) {
            // The budget ran out with the renderer still silent: stop what
            // holds it, so the next call finds the tab usable.
            self.terminate(session, method, start.elapsed());
        }
        r
    }

    /// Sends `Runtime.terminateExecution` for `session`'s target (on the
    /// session the page facts name, else on `session`) unless this unstick
    /// already did, and settles it in the background.
    fn terminate(&self, session: &Session, method: &str, waited: Duration) {
        let target = session.target_id().cloned();
        let mut terms = lock(&self.shared.terms);
        if terms
            .iter()
            .any(|t| t.target == target && (target.is_some() || t.session.id() == session.id()))
        {
            return;
        }
        let Some(via) = route_session(self.facts.as_ref(), session) else {
            debug!(method, "no terminate route for the target; nothing sent");
            return;
        };
        info!(
            target: "tabwarden::evaluate",
            session = ?session.id(),
            via = ?via.id(),
            method,
            waited_ms = u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
            "the renderer does not answer: terminating the page's own script"
        );
        if let Some(h) = &self.hook {
            h(1);
        }
        let hook = self.hook.clone();
        let termination = crate::terminate::send_and_settle(&via, move |_| {
            if let Some(h) = hook {
                h(-1);
            }
        });
        terms.push(Term {
            target,
            session: session.clone(),
            method: method.to_string(),
            waited,
            termination,
        });
    }

    /// Terminates on the session of every command still in flight (the
    /// operation's budget ran out while the renderer was silent).
    pub(crate) fn terminate_pending(&self) {
        let pending: Vec<(Session, String, Duration)> = lock(&self.shared.pending)
            .iter()
            .map(|(_, s, m, since)| (s.clone(), m.clone(), since.elapsed()))
            .collect();
        for (s, m, waited) in pending {
            self.terminate(&s, &m, waited);
        }
    }

    /// True once a termination was sent.
    pub(crate) fn fired(&self) -> bool {
        !lock(&self.shared.terms).is_empty()
    }

    /// Waits, at most `within`, until every termination sent is settled.
    /// Returns true when all are.
    pub(crate) async fn settled(&self, within: Duration) -> bool {
        let terms: Vec<crate::Termination> = lock(&self.shared.terms)
            .iter()
            .map(|t| t.termination.clone())
            .collect();
        let all = async {
            for t in terms {
                t.settled(within).await;
            }
        };
        tokio::time::timeout(within, all).await.is_ok()
    }

    /// The command whose silence caused the first termination.
    pub(crate) fn first_method(&self) -> Option<String> {
        lock(&self.shared.terms).first().map(|t| t.method.clone())
    }

    /// True when some termination stopped a running script.
    pub(crate) fn stopped_a_script(&self) -> bool {
        lock(&self.shared.terms)
            .iter()
            .any(|t| t.termination.outcome() == Some(true))
    }

    /// Adds a note of the caller's about the same operation.
    pub(crate) fn add_note(&self, note: String) {
        lock(&self.shared.extra).push(note);
    }

    /// The notes for the caller's result: [`Unstick::note`], then those
    /// added with [`Unstick::add_note`].
    pub(crate) fn notes(&self) -> Vec<String> {
        let mut out: Vec<String> = self.note().into_iter().collect();
        out.extend(lock(&self.shared.extra).iter().cloned());
        out
    }

    /// A note for the caller's result, when a termination was sent: what
    /// did not answer, for how long, and what the termination did.
    pub(crate) fn note(&self) -> Option<String> {
        let terms = lock(&self.shared.terms);
        let first = terms.first()?;
        let stopped = terms.iter().any(|t| t.termination.outcome() == Some(true));
        let ms = u64::try_from(first.waited.as_millis()).unwrap_or(u64::MAX);
        Some(if stopped {
            format!(
                "the page's own script kept the renderer busy ({} had no answer after {ms} ms); it was stopped with Runtime.terminateExecution",
                first.method
            )
        } else {
            format!(
                "the renderer did not answer {} for {ms} ms; Runtime.terminateExecution was sent, but no running script was confirmed stopped",
                first.method
            )
        })
    }
}
