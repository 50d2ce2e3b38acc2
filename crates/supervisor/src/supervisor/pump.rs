//! The event pump: one loop per supervisor applies its connection's events
//! to the state, publishes the view, and spawns the follow-up effects.

use super::answer::answer;
use super::open::{gate_resumed, install_bridge, setup_child};
use super::reconnect::recover;
use super::watchdog::watchdog;
use super::{closed_reason_text, Shared};
use crate::gate;
use crate::state::{Effect, Now};
use cdp_transport::{Connection, EventStream, RecvError};
use std::sync::Arc;
use tracing::{debug, warn};

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
                shared
                    .tracker
                    .spawn(watchdog(shared.clone(), dialog_id, after));
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

pub(super) async fn event_loop(shared: Arc<Shared>, mut conn: Connection, mut events: EventStream) {
    loop {
        let r = tokio::select! {
            _ = shared.shutdown.cancelled() => return,
            r = events.recv() => r,
        };
        let gone = match r {
            Ok(ev) => {
                let fx = {
                    let mut st = shared.lock();
                    let fx = st.apply(&ev, Now::system());
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
