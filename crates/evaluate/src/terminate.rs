//! `Runtime.terminateExecution`: the one module that sends it.
//!
//! What Chromium does with it (measured on Chromium 156):
//!
//! - It is a V8 interrupt for the whole renderer process (the isolate),
//!   whatever session carries it: it ends the script running now on that
//!   process, from any session, page or engine.
//! - The reply (the *acknowledgement*) comes once the terminated call has
//!   unwound. Sent while no script runs, it is neither answered nor
//!   dropped: it stays pending in V8 and ends the **next** script of that
//!   process (an evaluate of ours sent a moment later, on any session).
//! - It reaches a busy renderer only on a session the renderer bound before
//!   it got busy (a session attached while a script spins queues even this
//!   command behind that script).
//!
//! So every termination is *settled*: its acknowledgement is awaited for
//! 250 ms; without one, a trivial `Runtime.evaluate` on the same
//! session takes the pending termination. Only once settled may the next
//! script of that process run. [`Termination`] is the handle callers get:
//! whether the termination was acknowledged (a running script was
//! stopped) and when it is settled. [`crate::Engine::terminate`] holds the
//! engine's new evaluates until its terminations are settled.

use cdp_transport::Session;
use serde_json::json;
use std::time::Duration;
use tokio::sync::watch;
use tracing::debug;

/// How long the acknowledgement of a termination is awaited before a probe
/// evaluate is sent to take a termination that found nothing running.
pub(crate) const ACK_GRACE: Duration = Duration::from_millis(250);

/// Bound of each step of the background settling of one termination (the
/// termination call itself, the probe, the wait for a late acknowledgement).
pub(crate) const SETTLE_BOUND: Duration = Duration::from_secs(2);

/// The acknowledgement of one termination: `None` while unanswered,
/// `Some(true)` acknowledged, `Some(false)` failed (session gone, bound).
pub(crate) type Ack = watch::Receiver<Option<bool>>;

/// Sends `Runtime.terminateExecution` on `session` in the background, under
/// `bound`; the returned receiver turns `Some` when it is answered or fails.
/// The send is not chained on: the acknowledgement may come late.
pub(crate) fn send(session: &Session, bound: Duration) -> Ack {
    let (tx, rx) = watch::channel(None);
    let s = session.clone();
    tokio::spawn(async move {
        let r = s.call("Runtime.terminateExecution", json!({}), bound).await;
        if let Err(e) = &r {
            debug!(error = %e, "Runtime.terminateExecution");
        }
        tx.send_replace(Some(r.is_ok()));
    });
    rx
}

/// How long the engine's health probe after a termination may take.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// A trivial evaluate of `expression` on `session` (default execution
/// context), which also takes a termination left pending on its process.
/// `Ok(true)`: it ran to its value (so it took none); `Ok(false)`: it was
/// terminated or threw.
async fn probe(
    session: &Session,
    expression: &str,
    bound: Duration,
) -> std::result::Result<bool, cdp_transport::Error> {
    session
        .call(
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true}),
            bound,
        )
        .await
        .map(|r| r.get("exceptionDetails").is_none())
}

/// The engine's health probe (`0`): does `session` run a script to its
/// value after a termination?
pub(crate) async fn health_probe(
    session: &Session,
) -> std::result::Result<bool, cdp_transport::Error> {
    probe(session, "0", PROBE_TIMEOUT).await
}

/// After a termination on the engine's own session whose call has ended:
/// is the termination acknowledged (so cleared in V8) and does the session
/// still run a script to its value? An acknowledgement that has not come
/// within `grace` means nothing was running when it arrived: a health
/// probe takes it first.
pub(crate) async fn healthy_after(session: &Session, ack: &mut Ack, grace: Duration) -> bool {
    let _ = tokio::time::timeout(grace, ack.wait_for(Option::is_some)).await;
    if ack.borrow().is_none() {
        let absorbed = health_probe(session).await;
        debug!(?absorbed, "pending termination taken by a probe evaluate");
        let _ = tokio::time::timeout(PROBE_TIMEOUT, ack.wait_for(Option::is_some)).await;
    }
    let acked = *ack.borrow() == Some(true);
    acked && matches!(health_probe(session).await, Ok(true))
}

/// Waits until the termination whose acknowledgement is `ack` (sent on `s`)
/// is done with: `true` when a script was running and was stopped
/// (acknowledged within [`ACK_GRACE`], or later with the probe sent after
/// it running to its value), `false` otherwise (the probe took it, or it
/// failed).
pub(crate) async fn settle(s: &Session, mut ack: Ack) -> bool {
    if let Ok(r) = tokio::time::timeout(ACK_GRACE, ack.wait_for(Option::is_some)).await {
        return r.map(|v| *v == Some(true)).unwrap_or(false);
    }
    // Nothing was running when it came: a trivial evaluate takes it.
    let ran = probe(
        s,
        "0 // tabwarden takes a pending termination",
        SETTLE_BOUND,
    )
    .await;
    let _ = tokio::time::timeout(SETTLE_BOUND, ack.wait_for(Option::is_some)).await;
    // A probe that ran to its value did not take the termination: a
    // script was running (its interrupt was only slow) and was stopped.
    debug!(?ran, "probe after an unacknowledged termination");
    matches!(ran, Ok(true)) && *ack.borrow() == Some(true)
}

/// Sends a termination on `s` and settles it in the background; `done` is
/// called once settled (with whether a running script was stopped).
pub(crate) fn send_and_settle(
    s: &Session,
    done: impl FnOnce(bool) + Send + 'static,
) -> Termination {
    let ack = send(s, SETTLE_BOUND);
    let (tx, settled) = watch::channel(None);
    let s = s.clone();
    let for_settle = ack.clone();
    tokio::spawn(async move {
        let stopped = settle(&s, for_settle).await;
        debug!(session = ?s.id(), stopped, "termination settled");
        tx.send_replace(Some(stopped));
        done(stopped);
    });
    Termination { ack, settled }
}

/// One `Runtime.terminateExecution`, sent and settling in the background
/// ([`crate::Engine::terminate`]). Dropping the handle does not stop the
/// settling.
#[derive(Debug, Clone)]
pub struct Termination {
    ack: Ack,
    settled: watch::Receiver<Option<bool>>,
}

impl Termination {
    /// A termination that was not sent (nothing to stop, or no session on
    /// which it could reach the renderer): never acknowledged, settled.
    pub(crate) fn not_sent() -> Self {
        Self {
            ack: watch::channel(Some(false)).1,
            settled: watch::channel(Some(false)).1,
        }
    }

    /// True when the browser acknowledged the termination within `within`
    /// (from now): a script was running on that process and was stopped.
    /// `Duration::ZERO` asks about now without waiting.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn acknowledged(&self, within: Duration) -> bool {
        let mut ack = self.ack.clone();
        let _ = tokio::time::timeout(within, ack.wait_for(Option::is_some)).await;
        let acked = *ack.borrow() == Some(true);
        acked
    }

    /// Waits at most `within` for the termination to be settled (no longer
    /// able to end a later script). `Some(true)`: settled, and a running
    /// script was stopped; `Some(false)`: settled, none was confirmed
    /// stopped; `None`: still settling.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn settled(&self, within: Duration) -> Option<bool> {
        let mut rx = self.settled.clone();
        let _ = tokio::time::timeout(within, rx.wait_for(Option::is_some)).await;
        self.outcome()
    }

    /// [`Termination::settled`] as it stands now, without waiting.
    pub fn outcome(&self) -> Option<bool> {
        *self.settled.borrow()
    }
}

/// What [`crate::Engine::stop_page_script`] found on a page session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PageScript {
    /// The renderer answered a trivial evaluate within the wait: no script
    /// held it, nothing was sent.
    Idle,
    /// It did not; after a termination it did: a script of the page was
    /// running and was stopped (the termination is settled).
    Stopped,
    /// Still no answer after the termination (a dialog holds the renderer,
    /// or it is stalled for another reason); the termination may be
    /// settling still.
    Unresponsive,
}

impl crate::Engine {
    /// Makes sure the renderer of `session`'s target runs no script before
    /// the caller sends something that needs its main thread free: a
    /// trivial `Runtime.evaluate` on `session`, and when it has no answer
    /// within `wait`, one [`crate::Engine::terminate`] (on the session the
    /// page facts name) and the rest of `within` (at most
    /// 2 s) for the answer. Returns within `within`.
    ///
    /// For a navigation of a page whose own script spins: Chromium commits
    /// a same-site navigation in the renderer of the page it leaves, and
    /// once the navigation has started it holds every command of the tab's
    /// sessions (even `Runtime.terminateExecution`) until the commit, which
    /// a spinning script never lets happen. Before it starts, the
    /// termination still gets through. And for a screenshot: a busy
    /// renderer produces no frame. `session` must be one the renderer
    /// bound before it got busy (the supervisor's page session).
    ///
    /// # Cancel safety
    /// Cancel safe: a termination already sent settles in the background.
    pub async fn stop_page_script(
        &self,
        session: &Session,
        wait: Duration,
        within: Duration,
    ) -> PageScript {
        let deadline = tokio::time::Instant::now() + within;
        let s = session.clone();
        let mut check = tokio::spawn(async move {
            probe(&s, "0 // tabwarden checks the page answers", SETTLE_BOUND).await
        });
        if tokio::time::timeout(wait.min(within), &mut check)
            .await
            .is_ok()
        {
            return PageScript::Idle;
        }
        debug!(session = ?session.id(), ?wait, "page session does not answer: terminating its script");
        let term = self.terminate(session);
        let until = deadline.min(tokio::time::Instant::now() + SETTLE_BOUND);
        let answered = tokio::time::timeout_at(until, &mut check).await.is_ok();
        check.abort();
        if !answered {
            return PageScript::Unresponsive;
        }
        // Settled before the caller goes on when there is time: a
        // termination still pending in V8 would end the next page's first
        // script (the engine's own evaluates wait for it anyway).
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match term.settled(left).await {
            Some(true) => PageScript::Stopped,
            // The answer was only slow: the termination found nothing
            // running and the settling probe took it.
            Some(false) => PageScript::Idle,
            None if term.acknowledged(Duration::ZERO).await => PageScript::Stopped,
            None => PageScript::Idle,
        }
    }
}
