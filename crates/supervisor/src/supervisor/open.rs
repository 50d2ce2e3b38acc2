//! Attaching to or opening the tab, and setting up its sessions: domains,
//! recursive paused auto-attach, the dialog bridge, the target gate, and the
//! frame tree bootstrap.

use super::pump::event_loop;
use super::{Shared, StopOnDrop, Supervisor};
use crate::config::SupervisorConfig;
use crate::error::{Error, Result};
use crate::gate::{self, Gate, GateLink, RESUME_TIMEOUT};
use crate::state::{Kind, State};
use arc_swap::ArcSwap;
use bridge_script::Bridge;
use cdp_transport::{Budget, Connection, Session, TargetId};
use chromiumoxide_cdp::cdp::browser_protocol::target::{
    CreateTargetParams, SetAutoAttachParams, SetDiscoverTargetsParams,
};
use chromiumoxide_cdp::cdp::browser_protocol::{inspector, page};
use chromiumoxide_cdp::cdp::js_protocol::runtime;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, warn};

/// Slack the target gate adds to a supervisor's own setup and resume bounds
/// before it resumes a claimed popup itself.
const GATE_SLACK: Duration = Duration::from_secs(1);

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
}

pub(super) async fn setup_page(
    shared: &Arc<Shared>,
    conn: &Connection,
    page: &Session,
) -> Result<()> {
    let b = shared.budget(shared.config.attach_timeout);
    enable_domains(page, true, &b)
        .await
        .map_err(|(m, e)| Error::cdp(format!("{m} on the page session"), e))?;
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
        .execute(SetDiscoverTargetsParams::new(true), b.clone())
        .await
        .map_err(|e| Error::cdp(SetDiscoverTargetsParams::IDENTIFIER, e))?;
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
pub(super) fn gate_resumed(shared: &Shared, session: &Session) {
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
pub(super) async fn install_bridge(
    shared: &Arc<Shared>,
    session: &Session,
    evaluate: bool,
) -> bool {
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
pub(super) async fn setup_child(
    shared: Arc<Shared>,
    session: Session,
    kind: Kind,
    paused: bool,
    skip: bool,
) {
    if !skip {
        let b = shared.budget(shared.config.setup_timeout);
        let inspector = match kind {
            Kind::Iframe => Some(false),
            Kind::Popup | Kind::Page => Some(true),
            Kind::Other => None,
        };
        if let Some(inspector) = inspector {
            if let Err((m, e)) = enable_domains(&session, inspector, &b).await {
                debug!(session = ?session.id(), method = m, error = %e, "session setup step failed; resuming anyway");
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

/// The domains every session of a tab gets, in order: `Inspector.enable`
/// (page and popup targets: `Inspector.targetCrashed`), `Page.enable`,
/// `Runtime.enable`, and `Target.setAutoAttach` paused and flattened (its
/// OOPIFs, workers and popups come attached and wait for their own set-up).
/// Stops at the first step that fails, naming it.
async fn enable_domains(
    session: &Session,
    inspector: bool,
    b: &Budget,
) -> std::result::Result<(), (&'static str, cdp_transport::Error)> {
    if inspector {
        let p = inspector::EnableParams::default();
        session
            .execute(p, b.clone())
            .await
            .map_err(|e| (inspector::EnableParams::IDENTIFIER, e))?;
    }
    session
        .execute(page::EnableParams::default(), b.clone())
        .await
        .map_err(|e| (page::EnableParams::IDENTIFIER, e))?;
    session
        .execute(runtime::EnableParams::default(), b.clone())
        .await
        .map_err(|e| (runtime::EnableParams::IDENTIFIER, e))?;
    let mut auto = SetAutoAttachParams::new(true, true);
    auto.flatten = Some(true);
    session
        .execute(auto, b.clone())
        .await
        .map_err(|e| (SetAutoAttachParams::IDENTIFIER, e))?;
    Ok(())
}
