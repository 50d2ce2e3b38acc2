//! The supervisor: one event loop per tab, a lock-free view, respond and route.

use crate::config::{BridgeMode, DialogAction, DialogPolicy, SupervisorConfig};
use crate::error::{Error, Result};
use crate::gate::{self, Gate, GateLink, RESUME_TIMEOUT};
use crate::state::{Effect, Kind, State};
use crate::view::{ClosedBy, ClosedDialog, PendingDialog, SupervisorView};
use arc_swap::ArcSwap;
use bridge_script::Bridge;
use cdp_transport::{
    Budget, Connection, EventStream, ExecutionContextId, FrameId, LoaderId, RecvError, Session,
    TargetId,
};
use chromiumoxide_cdp::cdp::browser_protocol::target::CreateTargetParams;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

/// `Page.handleJavaScriptDialog`.
pub const HANDLE_DIALOG: &str = "Page.handleJavaScriptDialog";
/// Slack the target gate adds to a supervisor's own setup and resume bounds
/// before it resumes a claimed popup itself.
const GATE_SLACK: Duration = Duration::from_secs(1);

/// A change in the dialog set, for callers that must react at once (the tool
/// layer returns `dialog_pending` while navigating or evaluating).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum DialogEvent {
    /// A dialog opened.
    Opened(PendingDialog),
    /// A dialog closed.
    Closed(ClosedDialog),
}

/// Where a frame can be reached.
#[derive(Debug, Clone)]
pub struct Route {
    /// The frame.
    pub frame_id: FrameId,
    /// The session to send frame-scoped commands on: the OOPIF's own session,
    /// or the page session for the top frame.
    pub session: Session,
    /// True for an OOPIF.
    pub is_oopif: bool,
    /// The frame's main-world execution context on `session`, when reported.
    pub execution_context_id: Option<ExecutionContextId>,
}

/// A same-process frame's execution context (see [`Supervisor::frame_context`]).
#[derive(Debug, Clone)]
pub struct FrameContext {
    /// The session that owns the frame (the page or an OOPIF that contains it).
    pub session: Session,
    /// The frame's main-world execution context; `None` until Chromium reports it.
    pub execution_context_id: Option<ExecutionContextId>,
}

struct Shared {
    state: Mutex<State>,
    view: ArcSwap<SupervisorView>,
    /// The current connection (as `State::conn`), readable without the state
    /// lock so that [`Supervisor::snapshot`] can notice a closed socket.
    conn: ArcSwap<Connection>,
    view_tx: watch::Sender<Arc<SupervisorView>>,
    dialog_tx: broadcast::Sender<DialogEvent>,
    config: SupervisorConfig,
    endpoint: String,
    shutdown: CancellationToken,
    tracker: TaskTracker,
    owns_target: bool,
    target_id: TargetId,
}

struct StopOnDrop(CancellationToken);
impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// Supervises one tab: dialogs, frames, OOPIF sessions, popups, console errors.
///
/// A cheap, cloneable handle. One event-loop task per supervisor applies CDP
/// events to the state and publishes an immutable [`SupervisorView`] after
/// every change; [`Supervisor::snapshot`] reads it without waiting for the
/// loop. When the last handle drops, the loop stops (the tab is left open
/// unless [`Supervisor::stop`] is called on a tab the supervisor created).
#[derive(Clone)]
pub struct Supervisor {
    shared: Arc<Shared>,
    _guard: Arc<StopOnDrop>,
}

impl std::fmt::Debug for Supervisor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervisor")
            .field("target_id", &self.shared.target_id)
            .finish_non_exhaustive()
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Publishes the state as a new view, then announces dialog changes and
    /// the new view: the view is stored first, so a caller woken by a
    /// [`DialogEvent`] or by [`Supervisor::changes`] finds the change in
    /// [`Supervisor::snapshot`].
    fn commit(&self, st: &State) {
        let old = self.view.load_full();
        let new = Arc::new(st.view());
        if *new == *old {
            return;
        }
        self.view.store(new.clone());
        for d in &new.pending_dialogs {
            if !old.pending_dialogs.iter().any(|o| o.id == d.id) {
                let _ = self.dialog_tx.send(DialogEvent::Opened(d.clone()));
            }
        }
        for d in &new.recent_dialogs {
            if !old
                .recent_dialogs
                .iter()
                .any(|o| o.dialog.id == d.dialog.id)
            {
                let _ = self.dialog_tx.send(DialogEvent::Closed(d.clone()));
            }
        }
        self.view_tx.send_replace(new);
    }

    /// When the state's connection has closed but the state is still
    /// active, marks it inactive now (pending dialogs retired as `remote`),
    /// without waiting for the event loop to reach the end of its stream
    /// (it may be busy with a backlog). The event loop then reconnects as usual.
    fn retire_if_closed(&self, st: &mut State) -> bool {
        if !st.active {
            return false;
        }
        let Some(r) = st.conn.closed_reason() else {
            return false;
        };
        st.set_inactive(closed_reason_text(Some(r)));
        true
    }
    fn budget(&self, d: Duration) -> Budget {
        Budget::new(d).with_parent(&self.shutdown)
    }
}

impl Supervisor {
    /// Supervises an existing page target over `conn`.
    ///
    /// Attaches a flattened session, starts the event loop, and enables
    /// `Inspector`, `Page`, `Runtime` and recursive auto-attach
    /// (`waitForDebuggerOnStart: true`) on it. Then joins the connection's
    /// target gate (browser-level paused auto-attach of page targets, switched
    /// on by the first supervisor on `conn`): popups the tab opens are
    /// attached paused, set up and resumed by this supervisor; other new page
    /// targets are resumed at once. `Target.setDiscoverTargets` reports the
    /// tab's own destruction (and finds popups, attached after creation, when
    /// the browser refuses browser-level auto-attach). The frame tree is
    /// bootstrapped from `Page.getFrameTree` in the background.
    ///
    /// # Errors
    /// [`Error::Cdp`] when attaching or enabling fails within
    /// [`SupervisorConfig::attach_timeout`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped future may leave the target attached.
    pub async fn attach(
        conn: Connection,
        target_id: TargetId,
        config: SupervisorConfig,
    ) -> Result<Self> {
        Self::start(conn, target_id, config, false).await
    }

    /// Opens a new tab (`Target.createTarget` on `about:blank`, in a window
    /// of its own) and supervises it. [`Supervisor::stop`] closes the tab.
    ///
    /// A window of its own: Chromium renders only the front tab of a
    /// window, so a tab behind another one in the same window is `hidden`,
    /// gets no new frames (`Page.captureScreenshot` never answers) and
    /// receives input events only seconds late. With `newWindow` every tab
    /// the supervisor opens stays visible whichever tab is in front
    /// (measured on headless Chromium 156).
    ///
    /// # Errors
    /// [`Error::Cdp`] when creating, attaching or enabling fails.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped future may leave a tab open.
    pub async fn new_tab(conn: Connection, config: SupervisorConfig) -> Result<Self> {
        let mut create = CreateTargetParams::new("about:blank");
        create.new_window = Some(true);
        let created = conn
            .browser()
            .execute(create, config.attach_timeout)
            .await
            .map_err(|e| Error::cdp("Target.createTarget", e))?;
        let tid = TargetId::new(created.target_id.as_ref());
        match Self::start(conn.clone(), tid.clone(), config.clone(), true).await {
            Ok(s) => Ok(s),
            Err(e) => {
                let _ = conn
                    .browser()
                    .call(
                        "Target.closeTarget",
                        json!({"targetId": tid.as_str()}),
                        config.attach_timeout,
                    )
                    .await;
                Err(e)
            }
        }
    }

    async fn start(
        conn: Connection,
        target_id: TargetId,
        config: SupervisorConfig,
        owns_target: bool,
    ) -> Result<Self> {
        let events = conn.subscribe_all();
        let page = conn
            .attach(&target_id, config.attach_timeout)
            .await
            .map_err(|e| Error::cdp(format!("attaching to target {target_id}"), e))?;
        let mut state = State::new(
            conn.clone(),
            page.clone(),
            target_id.clone(),
            config.policy,
            config.dialog_timeout,
            config.bridge,
            Bridge::new(),
        );
        state.auto_bridge_window = config.auto_bridge_window;
        let view = Arc::new(state.view());
        let (view_tx, _) = watch::channel(view.clone());
        let shutdown = CancellationToken::new();
        let shared = Arc::new(Shared {
            state: Mutex::new(state),
            view: ArcSwap::new(view),
            conn: ArcSwap::from_pointee(conn.clone()),
            view_tx,
            dialog_tx: broadcast::channel(64).0,
            endpoint: conn.endpoint().expose().as_str().to_string(),
            config,
            shutdown: shutdown.clone(),
            tracker: TaskTracker::new(),
            owns_target,
            target_id,
        });
        shared
            .tracker
            .spawn(event_loop(shared.clone(), conn.clone(), events));
        let sup = Self {
            shared: shared.clone(),
            _guard: Arc::new(StopOnDrop(shutdown)),
        };
        if let Err(e) = setup_page(&shared, &conn, &page).await {
            shared.shutdown.cancel();
            return Err(e);
        }
        Ok(sup)
    }

    /// The current view. Never waits for the event loop.
    ///
    /// Lock-free, except once: the first read after the connection closed
    /// (while the event loop may still be busy with earlier events) marks the
    /// view inactive (`connection closed: …`) and retires pending dialogs as
    /// `remote` right away, under the state lock, so no reader sees a dialog
    /// waiting on a dead connection.
    ///
    /// # Panics
    /// Never.
    pub fn snapshot(&self) -> Arc<SupervisorView> {
        let v = self.shared.view.load_full();
        if v.active && self.shared.conn.load().is_closed() {
            let mut st = self.shared.lock();
            if self.shared.retire_if_closed(&mut st) {
                self.shared.commit(&st);
            }
            return self.shared.view.load_full();
        }
        v
    }

    /// A receiver that sees every new view (the latest is always available;
    /// intermediate ones may be skipped).
    pub fn changes(&self) -> watch::Receiver<Arc<SupervisorView>> {
        self.shared.view_tx.subscribe()
    }

    /// Dialog open/close notifications (bounded: a slow receiver lags).
    pub fn dialog_events(&self) -> broadcast::Receiver<DialogEvent> {
        self.shared.dialog_tx.subscribe()
    }

    /// The supervised tab's target id.
    pub fn target_id(&self) -> &TargetId {
        &self.shared.target_id
    }

    /// The dialog policy this supervisor answers dialogs with.
    pub fn dialog_policy(&self) -> DialogPolicy {
        self.shared.config.policy
    }

    /// The dialog bridge mode this supervisor was configured with (whether
    /// `auto` has switched on shows as [`SupervisorView::bridge_active`]).
    pub fn bridge_mode(&self) -> BridgeMode {
        self.shared.config.bridge
    }

    /// The tab's page session (on the current connection; it changes after a reconnect).
    pub fn page_session(&self) -> Session {
        self.shared.lock().page.clone()
    }

    /// The current connection (it changes after a reconnect).
    pub fn connection(&self) -> Connection {
        self.shared.lock().conn.clone()
    }

    /// Waits until `pred` holds for the view, and returns that view.
    ///
    /// # Errors
    /// [`Error::WaitTimeout`] when the budget runs out or is cancelled.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_until(
        &self,
        budget: impl Into<Budget>,
        pred: impl Fn(&SupervisorView) -> bool,
    ) -> Result<Arc<SupervisorView>> {
        let budget = budget.into();
        let mut rx = self.changes();
        let deadline = budget.deadline();
        loop {
            let v = rx.borrow_and_update().clone();
            if pred(&v) {
                return Ok(v);
            }
            tokio::select! {
                r = rx.changed() => if r.is_err() { return Err(Error::WaitTimeout { budget: budget.total() }) },
                _ = tokio::time::sleep_until(deadline) => return Err(Error::WaitTimeout { budget: budget.total() }),
                _ = budget.cancel_token().cancelled() => return Err(Error::WaitTimeout { budget: budget.total() }),
            }
        }
    }

    /// Waits for the first pending dialog (returns at once if one is pending).
    ///
    /// # Errors
    /// [`Error::WaitTimeout`] when none opens within the budget.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn wait_for_dialog(&self, budget: impl Into<Budget>) -> Result<PendingDialog> {
        let v = self
            .wait_until(budget, |v| !v.pending_dialogs.is_empty())
            .await?;
        v.pending_dialogs
            .first()
            .cloned()
            .ok_or(Error::WaitTimeout {
                budget: Duration::ZERO,
            })
    }

    /// Answers a pending dialog on the session where it must be answered: a
    /// native one with `Page.handleJavaScriptDialog` on the top-level page or
    /// popup session (also for dialogs raised inside an OOPIF); a bridge one
    /// ([`crate::DialogPath::Bridge`]) with `Fetch.fulfillRequest` on the
    /// session that paused its request (so `prompt()` returns `prompt_text`).
    ///
    /// `prompt_text` is what `prompt()` returns on accept. `dialog_id` picks a
    /// dialog; it may be omitted when exactly one is pending.
    ///
    /// # Errors
    /// [`Error::NoDialog`] (nothing pending), [`Error::UnknownDialog`] (not
    /// pending; names the pending ids and how it was closed),
    /// [`Error::AmbiguousDialog`] (several pending, no id; lists them),
    /// [`Error::Answer`] (the CDP call failed; a protocol error such as "No
    /// dialog is showing" or an unknown interception id retires the dialog as
    /// `remote`).
    ///
    /// # Cancel safety
    /// Not cancel safe: the answer may have been sent; the view stays
    /// consistent (the close event records it).
    pub async fn respond(
        &self,
        action: DialogAction,
        prompt_text: Option<&str>,
        dialog_id: Option<&str>,
        budget: impl Into<Budget>,
    ) -> Result<ClosedDialog> {
        let id = {
            let st = self.shared.lock();
            let pending: Vec<String> = st.pending.iter().map(|d| d.view.id.clone()).collect();
            match dialog_id {
                Some(id) if pending.iter().any(|p| p == id) => id.to_string(),
                Some(id) => {
                    let closed_by = st
                        .recent
                        .iter()
                        .rev()
                        .find(|r| r.dialog.id == id)
                        .map(|r| r.closed_by);
                    return Err(Error::UnknownDialog {
                        id: id.into(),
                        closed_by,
                        pending,
                    });
                }
                None => match pending.len() {
                    0 => {
                        return Err(Error::NoDialog {
                            recent: st.recent.iter().map(|r| r.dialog.id.clone()).collect(),
                        })
                    }
                    1 => pending[0].clone(),
                    _ => {
                        return Err(Error::AmbiguousDialog {
                            candidates: pending,
                        })
                    }
                },
            }
        };
        let accept = action == DialogAction::Accept;
        answer(
            &self.shared,
            &id,
            accept,
            prompt_text.map(String::from),
            ClosedBy::Agent,
            budget.into(),
        )
        .await
    }

    /// Where to send frame-scoped commands for `frame_id`.
    ///
    /// # Errors
    /// [`Error::UnknownFrame`] for a frame not in the tree;
    /// [`Error::SameProcessFrame`] for a frame in its parent's process: the
    /// error says how to reach it and carries its execution context id (see
    /// also [`Supervisor::frame_context`]).
    pub fn route(&self, frame_id: &FrameId) -> Result<Route> {
        let st = self.shared.lock();
        let r = st
            .frame_route(frame_id)
            .ok_or_else(|| Error::UnknownFrame {
                frame_id: frame_id.clone(),
            })?;
        match (&r.session, r.oopif || r.top) {
            (Some(session), true) => Ok(Route {
                frame_id: frame_id.clone(),
                session: session.clone(),
                is_oopif: r.oopif,
                execution_context_id: r.ctx,
            }),
            _ => Err(Error::SameProcessFrame {
                frame_id: frame_id.clone(),
                parent_frame_id: r.parent,
                execution_context_id: r.ctx,
            }),
        }
    }

    /// The loader (`Network.LoaderId`) of the document frame `frame_id`
    /// shows now, from the `Page.frameNavigated` events of the session that
    /// owns the frame; `None` when the frame is unknown here or has not
    /// committed a document yet. An event still in flight is not seen: a
    /// document that committed a moment ago may still report the old loader.
    pub fn frame_loader(&self, frame_id: &FrameId) -> Option<LoaderId> {
        self.shared.lock().frame_loader(frame_id)
    }

    /// The session that owns a frame (OOPIF, page, or the OOPIF that contains
    /// a same-process frame) and the frame's main-world execution context.
    ///
    /// # Errors
    /// [`Error::UnknownFrame`].
    pub fn frame_context(&self, frame_id: &FrameId) -> Result<FrameContext> {
        let st = self.shared.lock();
        let r = st
            .frame_route(frame_id)
            .ok_or_else(|| Error::UnknownFrame {
                frame_id: frame_id.clone(),
            })?;
        let session = r.session.ok_or_else(|| Error::UnknownFrame {
            frame_id: frame_id.clone(),
        })?;
        Ok(FrameContext {
            session,
            execution_context_id: r.ctx,
        })
    }

    /// Stops the event loop, marks the view inactive (`stopped`), and closes
    /// the tab if this supervisor created it ([`Supervisor::new_tab`]).
    ///
    /// # Cancel safety
    /// Cancel safe: the loop is stopped before any await.
    pub async fn stop(&self, budget: impl Into<Budget>) {
        let budget = budget.into();
        self.shared.shutdown.cancel();
        let conn = {
            let mut st = self.shared.lock();
            st.set_inactive("stopped");
            // Leave the target gate: new popups are resumed by it at once.
            st.gate = None;
            self.shared.commit(&st);
            st.conn.clone()
        };
        if self.shared.owns_target && !conn.is_closed() {
            let _ = conn
                .browser()
                .call(
                    "Target.closeTarget",
                    json!({"targetId": self.shared.target_id.as_str()}),
                    budget.child(Duration::from_secs(5)),
                )
                .await;
        }
        self.shared.tracker.close();
        let _ = tokio::time::timeout(budget.remaining(), self.shared.tracker.wait()).await;
    }
}

async fn setup_page(shared: &Arc<Shared>, conn: &Connection, page: &Session) -> Result<()> {
    let b = shared.budget(shared.config.attach_timeout);
    for (m, p) in [
        ("Inspector.enable", json!({})),
        ("Page.enable", json!({})),
        ("Runtime.enable", json!({})),
        (
            "Target.setAutoAttach",
            json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
        ),
    ] {
        page.call(m, p, b.clone())
            .await
            .map_err(|e| Error::cdp(format!("{m} on the page session"), e))?;
    }
    if install_bridge(shared, page, true).await {
        let mut st = shared.lock();
        if st.page.id() == page.id() {
            st.bridge_active = true;
            shared.commit(&st);
        }
    }
    join_gate(shared, conn, b.clone()).await;
    // Target events (our tab destroyed or crashed, popup URLs; and, without
    // the gate, the `Target.targetCreated` popups are attached after).
    conn.browser()
        .call(
            "Target.setDiscoverTargets",
            json!({"discover": true}),
            b.clone(),
        )
        .await
        .map_err(|e| Error::cdp("Target.setDiscoverTargets", e))?;
    // A pending dialog would hold Page.getFrameTree: never wait for it here.
    let (shared2, page2) = (shared.clone(), page.clone());
    shared
        .tracker
        .spawn(async move { load_frame_tree(&shared2, &page2).await });
    Ok(())
}

/// Switches the connection's target gate on (once per connection) and joins
/// it: our page target and our popups are registered as openers, so popups
/// they open are attached paused and set up before they run. When the
/// browser refuses browser-level auto-attach (or the call fails), the
/// supervisor stays out of the gate and attaches popups after
/// `Target.targetCreated`.
async fn join_gate(shared: &Arc<Shared>, conn: &Connection, budget: Budget) {
    let g = Gate::for_connection(conn);
    let on = match g.enable(conn, budget).await {
        Ok(on) => on,
        Err(e) => {
            warn!(error = %e, "browser-level auto-attach not switched on: popups are attached after Target.targetCreated");
            false
        }
    };
    if !on {
        return;
    }
    let hold = shared.config.setup_timeout + RESUME_TIMEOUT + GATE_SLACK;
    let mut st = shared.lock();
    if st.conn.id() != conn.id() || shared.shutdown.is_cancelled() {
        return;
    }
    let link = GateLink::join(g, shared.shutdown.clone(), hold);
    link.add_opener(&shared.target_id);
    for s in st.sessions.values().filter(|s| s.kind == Kind::Popup) {
        link.add_opener(&s.target_id);
    }
    st.gate = Some(link);
}

/// Tells the target gate that `session`'s target was resumed by us.
fn gate_resumed(shared: &Shared, session: &Session) {
    if let (Some(g), Some(t)) = (&shared.lock().gate, session.target_id()) {
        g.resumed(t);
    }
}

async fn load_frame_tree(shared: &Arc<Shared>, session: &Session) {
    let b = shared.budget(shared.config.attach_timeout);
    match session.call("Page.getFrameTree", json!({}), b).await {
        Ok(v) => {
            if let Some(sid) = session.id() {
                let mut st = shared.lock();
                st.merge_frame_tree(sid, &v["frameTree"]);
                shared.commit(&st);
            }
        }
        Err(e) => debug!(session = ?session.id(), error = %e, "Page.getFrameTree failed"),
    }
}

/// Installs the dialog bridge (issue 4) on one page, popup or OOPIF session
/// when it is on for this supervisor (`bridge: on`, or `auto` once switched
/// on): `Fetch.enable` with the bridge patterns only (first, so the script's
/// first request already pauses), `Page.addScriptToEvaluateOnNewDocument`
/// with `runImmediately`, and with `evaluate` a `Runtime.evaluate` of the
/// script into the document already loaded (idempotent: it installs once per
/// window). Failures are logged: native dialogs stay the backstop.
///
/// Returns whether every step succeeded.
async fn install_bridge(shared: &Arc<Shared>, session: &Session, evaluate: bool) -> bool {
    let bridge = {
        let st = shared.lock();
        if !st.bridge_on {
            return false;
        }
        st.bridge.clone()
    };
    let b = shared.budget(shared.config.setup_timeout);
    let mut steps = vec![
        (
            bridge_script::FETCH_ENABLE_METHOD,
            bridge.fetch_enable_params(),
        ),
        (bridge_script::ADD_SCRIPT_METHOD, bridge.add_script_params()),
    ];
    if evaluate {
        steps.push((bridge_script::EVALUATE_METHOD, bridge.evaluate_params()));
    }
    for (m, p) in steps {
        if let Err(e) = session.call(m, p, b.clone()).await {
            warn!(session = ?session.id(), method = m, error = %e, "installing the dialog bridge failed; native dialogs only on this session");
            return false;
        }
    }
    debug!(session = ?session.id(), evaluate, "dialog bridge installed");
    true
}

/// Sets up one attached session and resumes it if it is paused; the resume is
/// sent whatever happened during setup, so no target stays paused.
async fn setup_child(shared: Arc<Shared>, session: Session, kind: Kind, paused: bool, skip: bool) {
    if !skip {
        let b = shared.budget(shared.config.setup_timeout);
        let steps: &[(&str, Value)] = match kind {
            Kind::Iframe => &[
                ("Page.enable", json!({})),
                ("Runtime.enable", json!({})),
                (
                    "Target.setAutoAttach",
                    json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
                ),
            ],
            Kind::Popup | Kind::Page => &[
                ("Inspector.enable", json!({})),
                ("Page.enable", json!({})),
                ("Runtime.enable", json!({})),
                (
                    "Target.setAutoAttach",
                    json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
                ),
            ],
            Kind::Other => &[],
        };
        for (m, p) in steps {
            if let Err(e) = session.call(m, p.clone(), b.clone()).await {
                debug!(session = ?session.id(), method = m, error = %e, "session setup step failed; resuming anyway");
                break;
            }
        }
        if matches!(kind, Kind::Iframe | Kind::Popup) {
            // A paused target has run no script yet: runImmediately covers its
            // initial document. One that is already running (a popup attached
            // after it opened) also gets the script evaluated into it.
            install_bridge(&shared, &session, !paused).await;
        }
    }
    if paused && gate::resume(&session).await {
        gate_resumed(&shared, &session);
    }
    if !skip && matches!(kind, Kind::Iframe | Kind::Popup) {
        load_frame_tree(&shared, &session).await;
    }
}

async fn answer(
    shared: &Arc<Shared>,
    id: &str,
    accept: bool,
    prompt: Option<String>,
    by: ClosedBy,
    budget: Budget,
) -> Result<ClosedDialog> {
    let (session, kind, default_prompt, bridge_request, bridge) = {
        let mut st = shared.lock();
        let pending: Vec<String> = st.pending.iter().map(|d| d.view.id.clone()).collect();
        let Some(d) = st.pending.iter_mut().find(|d| d.view.id == id) else {
            let closed_by = st
                .recent
                .iter()
                .rev()
                .find(|r| r.dialog.id == id)
                .map(|r| r.closed_by);
            return Err(Error::UnknownDialog {
                id: id.into(),
                closed_by,
                pending,
            });
        };
        d.answering = Some(by);
        let out = (
            d.session.clone(),
            d.view.kind.clone(),
            d.view.default_prompt.clone(),
            d.bridge_request.clone(),
        );
        (out.0, out.1, out.2, out.3, st.bridge.clone())
    };
    let r = match &bridge_request {
        // A bridge dialog: fulfil the paused request on the session that paused it.
        Some(rid) => {
            let params = bridge.fulfill_answer(rid, accept, prompt.as_deref());
            session
                .call(bridge_script::FULFILL_METHOD, params, budget)
                .await
        }
        None => {
            let mut params = json!({"accept": accept});
            if let Some(t) = &prompt {
                params["promptText"] = Value::String(t.clone());
            }
            session.call(HANDLE_DIALOG, params, budget).await
        }
    };
    let user_input = if accept && kind == "prompt" {
        prompt.or(default_prompt)
    } else {
        None
    };
    let mut st = shared.lock();
    let out = match r {
        Ok(_) => match st.close_dialog(id, by, Some(accept), user_input) {
            Some(rec) => {
                // A native answer is followed by a close event; a fulfilled request is not.
                if let (None, Some(sid)) = (&bridge_request, session.id()) {
                    *st.swallow_close.entry(sid.clone()).or_default() += 1;
                }
                Ok(rec)
            }
            None => st
                .recent
                .iter()
                .rev()
                .find(|r| r.dialog.id == id)
                .cloned()
                .ok_or_else(|| Error::UnknownDialog {
                    id: id.into(),
                    closed_by: None,
                    pending: vec![],
                }),
        },
        Err(e) => {
            if let Some(d) = st.pending.iter_mut().find(|d| d.view.id == id) {
                d.answering = None;
            } else if let Some(r) = st.recent.iter_mut().rev().find(|r| r.dialog.id == id) {
                // The close event was credited to us, but our call failed: someone else closed it.
                r.closed_by = ClosedBy::Remote;
            }
            if e.protocol_message().is_some() {
                st.close_dialog(id, ClosedBy::Remote, None, None);
            }
            // The socket is gone: nothing waits for the event loop to notice.
            shared.retire_if_closed(&mut st);
            Err(Error::Answer {
                id: id.into(),
                source: e,
            })
        }
    };
    shared.commit(&st);
    out
}

fn run_effects(shared: &Arc<Shared>, fx: Vec<Effect>) -> Option<(String, bool)> {
    let mut gone = None;
    for e in fx {
        match e {
            Effect::Setup {
                session,
                kind,
                paused,
                skip,
            } => {
                shared
                    .tracker
                    .spawn(setup_child(shared.clone(), session, kind, paused, skip));
            }
            Effect::Release { session, paused } => {
                let s = shared.clone();
                shared.tracker.spawn(async move {
                    if paused && gate::resume(&session).await {
                        gate_resumed(&s, &session);
                    }
                    gate::release(session, false).await;
                });
            }
            Effect::AttachPopup { target_id } => {
                let s = shared.clone();
                shared.tracker.spawn(async move {
                    let conn = s.lock().conn.clone();
                    if let Err(e) = conn
                        .attach(&target_id, s.budget(s.config.attach_timeout))
                        .await
                    {
                        debug!(%target_id, error = %e, "attaching popup failed");
                    }
                });
            }
            Effect::Answer {
                dialog_id,
                accept,
                prompt,
                by,
            } => {
                let s = shared.clone();
                shared.tracker.spawn(async move {
                    if let Err(e) = answer(
                        &s,
                        &dialog_id,
                        accept,
                        prompt,
                        by,
                        s.budget(s.config.attach_timeout),
                    )
                    .await
                    {
                        debug!(dialog_id, error = %e, "policy answer failed");
                    }
                });
            }
            Effect::Watchdog { dialog_id, after } => {
                let s = shared.clone();
                shared.tracker.spawn(async move {
                    tokio::select! {
                        _ = s.shutdown.cancelled() => return,
                        _ = tokio::time::sleep(after) => {}
                    }
                    let still = s
                        .lock()
                        .pending
                        .iter()
                        .any(|d| d.view.id == dialog_id && d.answering.is_none());
                    if still {
                        warn!(
                            dialog_id,
                            ?after,
                            "dialog unanswered: the watchdog dismisses it"
                        );
                        if let Err(e) = answer(
                            &s,
                            &dialog_id,
                            false,
                            None,
                            ClosedBy::Watchdog,
                            s.budget(s.config.attach_timeout),
                        )
                        .await
                        {
                            debug!(dialog_id, error = %e, "watchdog answer failed");
                        }
                    }
                });
            }
            Effect::PageGone { reason, reconnect } => gone = Some((reason, reconnect)),
            Effect::Send {
                session,
                method,
                params,
            } => {
                let b = shared.budget(shared.config.setup_timeout);
                shared.tracker.spawn(async move {
                    if let Err(e) = session.call(method, params, b).await {
                        debug!(session = ?session.id(), method, error = %e, "answering a paused request failed");
                    }
                });
            }
            Effect::InstallBridge { sessions } => {
                // One task per session: a session whose renderer is busy does
                // not hold back the others.
                for session in sessions {
                    let s = shared.clone();
                    shared.tracker.spawn(async move {
                        if install_bridge(&s, &session, true).await {
                            let mut st = s.lock();
                            if st.page.id() == session.id() {
                                st.bridge_active = true;
                                s.commit(&st);
                            }
                        }
                    });
                }
            }
        }
    }
    gone
}

async fn event_loop(shared: Arc<Shared>, mut conn: Connection, mut events: EventStream) {
    loop {
        let r = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            r = events.recv() => r,
        };
        let gone = match r {
            Ok(ev) => {
                let fx = {
                    let mut st = shared.lock();
                    let fx = st.apply(&ev);
                    shared.commit(&st);
                    fx
                };
                run_effects(&shared, fx)
            }
            Err(RecvError::Lagged(n)) => {
                warn!(n, target_id = %shared.target_id, "supervisor event loop lagged; state may miss events");
                None
            }
            Err(_) => Some((closed_reason_text(conn.closed_reason()), true)),
        };
        if let Some((reason, reconnect)) = gone {
            match recover(&shared, &conn, reason, reconnect).await {
                Some((c, e)) => {
                    conn = c;
                    events = e;
                }
                None => return,
            }
        }
    }
}

/// The inactive reason for a lost connection.
fn closed_reason_text(reason: Option<String>) -> String {
    format!(
        "connection closed: {}",
        reason.unwrap_or_else(|| "socket ended".into())
    )
}

/// Marks the view inactive, then reconnects with backoff: a new connection if
/// the socket is gone, and a new attach to the same target if it still exists.
async fn recover(
    shared: &Arc<Shared>,
    old: &Connection,
    reason: String,
    reconnect: bool,
) -> Option<(Connection, EventStream)> {
    {
        let mut st = shared.lock();
        st.set_inactive(reason.clone());
        // Out of the gate while away: nobody would set our popups up.
        st.gate = None;
        shared.commit(&st);
    }
    let policy = shared.config.reconnect.clone();
    if !reconnect || policy.max_consecutive_failures == 0 {
        return None;
    }
    let mut backoff = policy.initial_backoff;
    let mut failures = 0u32;
    loop {
        tokio::select! {
            _ = shared.shutdown.cancelled() => return None,
            _ = tokio::time::sleep(backoff) => {}
        }
        match reattach(shared, old).await {
            Ok(Some(x)) => return Some(x),
            Ok(None) => {
                let mut st = shared.lock();
                st.set_inactive(format!(
                    "{reason}; target {} no longer exists",
                    shared.target_id
                ));
                shared.commit(&st);
                return None;
            }
            Err(e) => {
                failures += 1;
                debug!(failures, error = %e, "reconnect attempt failed");
                if failures >= policy.max_consecutive_failures {
                    let mut st = shared.lock();
                    st.set_inactive(format!(
                        "{reason}; gave up after {failures} reconnect attempts: {e}"
                    ));
                    shared.commit(&st);
                    return None;
                }
                backoff = (backoff * 2).min(policy.max_backoff);
            }
        }
    }
}

/// One reconnect attempt. `Ok(None)`: the target is gone for good.
async fn reattach(
    shared: &Arc<Shared>,
    old: &Connection,
) -> Result<Option<(Connection, EventStream)>> {
    let conn = if old.is_closed() {
        Connection::connect(&shared.endpoint, shared.config.connect_options.clone())
            .await
            .map_err(|e| Error::cdp("reconnecting", e))?
    } else {
        old.clone()
    };
    let b = shared.budget(shared.config.attach_timeout);
    let targets = conn
        .browser()
        .call("Target.getTargets", json!({}), b.clone())
        .await
        .map_err(|e| Error::cdp("Target.getTargets", e))?;
    let exists = targets
        .get("targetInfos")
        .and_then(Value::as_array)
        .is_some_and(|a| {
            a.iter().any(|t| {
                t.get("targetId").and_then(Value::as_str) == Some(shared.target_id.as_str())
            })
        });
    if !exists {
        return Ok(None);
    }
    let events = conn.subscribe_all();
    let page = conn
        .attach(&shared.target_id, b)
        .await
        .map_err(|e| Error::cdp("re-attaching", e))?;
    {
        let mut st = shared.lock();
        st.reset_for(conn.clone(), page.clone());
        shared.conn.store(Arc::new(conn.clone()));
        shared.commit(&st);
    }
    setup_page(shared, &conn, &page).await?;
    Ok(Some((conn, events)))
}
