//! The target gate: browser-level auto-attach of page targets, paused at
//! start, one per connection and shared by every supervisor on it.
//!
//! Why: a popup attached after `Target.targetCreated` may already have run
//! script, and a popup whose dialog opens before anyone listens freezes its
//! opener (field case C28). With
//! `Target.setAutoAttach{autoAttach, waitForDebuggerOnStart, flatten, filter:[{type:"page"}]}`
//! on the browser session, Chromium 156 sends a browser-level
//! `Target.attachedToTarget{waitingForDebugger:true}` for every new page
//! target (a `window.open` popup carries `openerId` = the opener's page
//! target id, also when an iframe opened it), and the target runs nothing
//! until `Runtime.runIfWaitingForDebugger` is sent on that session. The
//! opener's `window.open` itself does not return before that.
//!
//! Browser-level auto-attach is state of the connection, not of a session,
//! so one [`Gate`] per connection (keyed by [`Connection::id`]) holds it:
//!
//! * Supervisors join with a [`GateLink`] and register the target ids they
//!   own as openers (their page and their popups).
//! * Every paused page target is decided once (`Owners::decide`, memoised by
//!   target id, so the gate tasks and the supervisors' event loops, which see
//!   the same event in their own streams, always agree): claimed by the live
//!   supervisor that registered its `openerId`, or unclaimed.
//! * Unclaimed: the gate resumes it at once and detaches the session.
//!   Claimed: the owner sets it up and resumes it; the gate resumes it anyway
//!   (and lets go of it) when the owner stops first, or when the owner has not
//!   resumed it after its hold (its setup bound plus the resume bound plus a
//!   second). No target stays paused.
//! * One `Runtime.runIfWaitingForDebugger` from ANY client resumes a target
//!   that several clients auto-attached paused (probed on Chromium 156). So
//!   openers and decisions are process-wide: the gate of another connection
//!   of this process that sees a target claimed by a supervisor elsewhere
//!   waits for that owner to resume it (or to stop, or its hold) and then
//!   detaches its own session, instead of resuming it early. A client outside
//!   this process that resumes at once cannot be held back.
//! * The sessions Chromium attaches to page targets that already exist when
//!   auto-attach is switched on (not paused; one of them is a second session
//!   on each supervisor's own tab) are detached at once and never enabled, so
//!   no dialog is reported twice. Sessions named by a `Target.attachToTarget`
//!   reply ([`Connection::attached_by_call`]) are never touched.
//!
//! A browser (or a hosted browser's proxy) that refuses the browser-level
//! `Target.setAutoAttach` with a protocol error leaves the gate off for that
//! connection: supervisors then fall back to `Target.setDiscoverTargets` and
//! attach their popups after `Target.targetCreated`.

use cdp_transport::{AttachedTarget, Budget, Connection, Session, TargetId};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

/// Bound on one `Runtime.runIfWaitingForDebugger`.
pub(crate) const RESUME_TIMEOUT: Duration = Duration::from_secs(2);
/// Bound on `Target.detachFromTarget` of a session the gate lets go of.
const DETACH_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a decision is remembered (a supervisor's event loop that is this
/// far behind has lagged anyway).
const DECISION_MEMORY: Duration = Duration::from_secs(60);

/// The browser-level `Target.setAutoAttach` params.
pub(crate) fn auto_attach_params() -> Value {
    json!({
        "autoAttach": true,
        "waitForDebuggerOnStart": true,
        "flatten": true,
        "filter": [{"type": "page"}],
    })
}

type OwnerId = u64;

static NEXT_OWNER: AtomicU64 = AtomicU64::new(1);
static GATES: OnceLock<Mutex<HashMap<u64, Weak<Gate>>>> = OnceLock::new();
static OWNERS: OnceLock<Mutex<Owners>> = OnceLock::new();

fn gates() -> MutexGuard<'static, HashMap<u64, Weak<Gate>>> {
    GATES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

fn owners() -> MutexGuard<'static, Owners> {
    OWNERS
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

#[derive(Clone)]
struct Owner {
    /// The connection the owner's sessions live on ([`Connection::id`]).
    conn_id: u64,
    shutdown: CancellationToken,
    hold: Duration,
}

#[derive(Clone)]
struct Claim {
    owner: Option<(OwnerId, Owner)>,
    /// Cancelled once the owner resumed the target.
    resumed: CancellationToken,
    at: Instant,
}

/// Owners, openers and decisions, process-wide: one runIfWaitingForDebugger
/// from ANY client resumes a target that several clients auto-attached
/// paused (probed on Chromium 156), so a gate must not resume a target that
/// a supervisor on another connection of this process is still setting up.
/// Target ids are random tokens, unique across browsers in practice.
#[derive(Default)]
struct Owners {
    owners: HashMap<OwnerId, Owner>,
    openers: HashMap<TargetId, OwnerId>,
    /// By the paused target's id: every gate and owner sees the same decision.
    claims: HashMap<TargetId, Claim>,
}

impl Owners {
    /// Who owns the paused page target `target`, decided once: the live
    /// owner that registered `opener`, or `None`.
    fn decide(&mut self, target: &TargetId, opener: Option<&str>) -> Claim {
        if let Some(c) = self.claims.get(target) {
            return c.clone();
        }
        self.claims.retain(|_, c| c.at.elapsed() < DECISION_MEMORY);
        let owner = opener
            .and_then(|o| self.openers.get(&TargetId::new(o)).copied())
            .and_then(|id| self.owners.get(&id).map(|o| (id, o.clone())))
            .filter(|(_, o)| !o.shutdown.is_cancelled());
        let c = Claim {
            owner,
            resumed: CancellationToken::new(),
            at: Instant::now(),
        };
        self.claims.insert(target.clone(), c.clone());
        c
    }
}

/// The per-connection gate (see the module docs).
pub(crate) struct Gate {
    conn_id: u64,
    /// `Some(true)`: auto-attach is on; `Some(false)`: the browser refused it.
    enabled: tokio::sync::OnceCell<bool>,
}

impl Gate {
    /// The gate of `conn`, created (with its task, which starts listening
    /// before anything is sent) on first use. The task ends, and the entry
    /// goes, when the connection closes; it holds no `Connection`, so it never
    /// keeps the socket open.
    pub(crate) fn for_connection(conn: &Connection) -> Arc<Gate> {
        let mut map = gates();
        map.retain(|_, g| g.strong_count() > 0);
        if let Some(g) = map.get(&conn.id()).and_then(Weak::upgrade) {
            return g;
        }
        let gate = Arc::new(Gate {
            conn_id: conn.id(),
            enabled: tokio::sync::OnceCell::new(),
        });
        map.insert(conn.id(), Arc::downgrade(&gate));
        tokio::spawn(run(gate.clone(), conn.attached_targets()));
        gate
    }

    /// Switches browser-level paused auto-attach on, once per connection.
    ///
    /// `Ok(true)`: on (now or earlier). `Ok(false)`: the browser refused it
    /// with a protocol error (remembered for the connection). `Err`: the call
    /// failed otherwise (timeout, closed socket); not remembered, the next
    /// supervisor tries again.
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped call leaves the gate undecided.
    pub(crate) async fn enable(
        &self,
        conn: &Connection,
        budget: Budget,
    ) -> Result<bool, cdp_transport::Error> {
        let on = self
            .enabled
            .get_or_try_init(|| async {
                let mut window = conn.attached_targets();
                match conn
                    .browser()
                    .call("Target.setAutoAttach", auto_attach_params(), budget)
                    .await
                {
                    Ok(_) => {
                        release_existing(conn, &mut window);
                        debug!(conn = self.conn_id, "target gate on");
                        Ok(true)
                    }
                    Err(e) if e.protocol_message().is_some() => {
                        warn!(error = %e, "browser-level Target.setAutoAttach refused: popups are attached after Target.targetCreated (not paused at start)");
                        Ok(false)
                    }
                    Err(e) => Err(e),
                }
            })
            .await?;
        Ok(*on)
    }

    /// One browser-level attach, as the gate task sees it.
    fn on_attached(&self, at: AttachedTarget) {
        if at.parent_session_id.is_some() || at.target_type() != "page" || !at.waiting_for_debugger
        {
            return;
        }
        let (Some(sid), target) = (at.session.id().cloned(), at.target_id()) else {
            return;
        };
        let opener = at.target_info.get("openerId").and_then(Value::as_str);
        let claim = owners().decide(&target, opener);
        let session = at.session;
        let Some((_, owner)) = claim.owner else {
            debug!(session = %sid, %target, "target gate: not ours, resumed at once");
            tokio::spawn(release(session, true));
            return;
        };
        let ours = owner.conn_id == self.conn_id;
        tokio::spawn(async move {
            tokio::select! {
                biased;
                _ = claim.resumed.cancelled() => {
                    // Set up and resumed by its owner. A session of ours on a
                    // connection the owner does not use is of no use.
                    if !ours {
                        release(session, false).await;
                    }
                }
                _ = owner.shutdown.cancelled() => {
                    debug!(session = %sid, %target, "target gate: the owner stopped; resumed by the gate");
                    release(session, true).await;
                }
                _ = tokio::time::sleep(owner.hold) => {
                    warn!(session = %sid, %target, hold = ?owner.hold, "target gate: the owner has not resumed its popup; resumed by the gate");
                    if ours {
                        resume(&session).await;
                    } else {
                        release(session, true).await;
                    }
                }
            }
        });
    }
}

/// Resumes a paused target (harmless on a running one), within [`RESUME_TIMEOUT`].
pub(crate) async fn resume(session: &Session) -> bool {
    let resume =
        chromiumoxide_cdp::cdp::js_protocol::runtime::RunIfWaitingForDebuggerParams::default();
    match session.execute(resume, Budget::new(RESUME_TIMEOUT)).await {
        Ok(_) => true,
        Err(e) => {
            warn!(session = ?session.id(), error = %e, "Runtime.runIfWaitingForDebugger failed");
            false
        }
    }
}

/// Resumes (when `paused`) and detaches a session nobody supervises.
pub(crate) async fn release(session: Session, paused: bool) {
    if paused {
        resume(&session).await;
    }
    if let Err(e) = session.detach(Budget::new(DETACH_TIMEOUT)).await {
        debug!(session = ?session.id(), error = %e, "detaching a session we do not supervise failed");
    }
}

/// Detaches the sessions auto-attach created for page targets that already
/// existed (they arrive, not paused, before the `Target.setAutoAttach`
/// reply); sessions named by an attach reply are someone's own and kept.
fn release_existing(conn: &Connection, window: &mut broadcast::Receiver<AttachedTarget>) {
    loop {
        let at = match window.try_recv() {
            Ok(at) => at,
            Err(broadcast::error::TryRecvError::Lagged(n)) => {
                debug!(
                    n,
                    "target gate: some existing targets keep an extra idle session"
                );
                continue;
            }
            Err(_) => return,
        };
        let Some(sid) = at.session.id() else { continue };
        if at.parent_session_id.is_none()
            && at.target_type() == "page"
            && !at.waiting_for_debugger
            && !conn.attached_by_call(sid)
        {
            debug!(session = %sid, target_id = %at.target_info["targetId"], "target gate: detaching the extra session of an existing tab");
            tokio::spawn(release(at.session, false));
        }
    }
}

async fn run(gate: Arc<Gate>, mut rx: broadcast::Receiver<AttachedTarget>) {
    loop {
        match rx.recv().await {
            Ok(at) => gate.on_attached(at),
            Err(broadcast::error::RecvError::Lagged(n)) => {
                warn!(n, "target gate lagged: targets attached meanwhile may stay paused until their owner resumes them");
            }
            Err(broadcast::error::RecvError::Closed) => break,
        }
    }
    let mut map = gates();
    if map
        .get(&gate.conn_id)
        .is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(&gate)))
    {
        map.remove(&gate.conn_id);
    }
}

/// A supervisor's membership of a connection's gate. Dropping it removes the
/// owner and every opener it registered.
pub(crate) struct GateLink {
    gate: Arc<Gate>,
    owner: OwnerId,
}

impl std::fmt::Debug for GateLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GateLink")
            .field("conn", &self.gate.conn_id)
            .field("owner", &self.owner)
            .finish()
    }
}

impl GateLink {
    /// Joins `gate` as a new owner: `shutdown` cancelled means stopping
    /// (its claims are resumed by the gate at once); `hold` bounds how long
    /// the gate waits for this owner to resume a claimed target.
    pub(crate) fn join(gate: Arc<Gate>, shutdown: CancellationToken, hold: Duration) -> Self {
        let owner = NEXT_OWNER.fetch_add(1, Ordering::Relaxed);
        owners().owners.insert(
            owner,
            Owner {
                conn_id: gate.conn_id,
                shutdown,
                hold,
            },
        );
        Self { gate, owner }
    }

    /// Registers `target` as one of ours: page targets it opens are claimed.
    /// A target another owner registered first stays theirs.
    pub(crate) fn add_opener(&self, target: &TargetId) {
        owners().openers.entry(target.clone()).or_insert(self.owner);
    }

    pub(crate) fn remove_opener(&self, target: &TargetId) {
        let mut o = owners();
        if o.openers.get(target) == Some(&self.owner) {
            o.openers.remove(target);
        }
    }

    /// Whether the paused page target `target` (opened by `opener`) is ours
    /// to set up and resume on this connection.
    pub(crate) fn claims(&self, target: &TargetId, opener: Option<&str>) -> bool {
        owners()
            .decide(target, opener)
            .owner
            .is_some_and(|(id, o)| id == self.owner && o.conn_id == self.gate.conn_id)
    }

    /// Tells the gates that we resumed `target`.
    pub(crate) fn resumed(&self, target: &TargetId) {
        if let Some(c) = owners().claims.get(target) {
            c.resumed.cancel();
        }
    }
}

impl Drop for GateLink {
    fn drop(&mut self) {
        let mut o = owners();
        o.owners.remove(&self.owner);
        o.openers.retain(|_, id| *id != self.owner);
    }
}
