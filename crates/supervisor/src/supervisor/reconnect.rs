//! Recovery: after a lost socket or a detached page session the view goes
//! inactive, then the supervisor reconnects (or re-attaches) with backoff.

use super::open::setup_page;
use super::Shared;
use crate::error::{Error, Result};
use crate::state::Now;
use cdp_transport::{Connection, EventStream};
use serde_json::{json, Value};
use std::sync::Arc;
use tracing::debug;

/// Marks the view inactive, then reconnects with backoff: a new connection if
/// the socket is gone, and a new attach to the same target if it still exists.
pub(super) async fn recover(
    shared: &Arc<Shared>,
    old: &Connection,
    reason: String,
    reconnect: bool,
) -> Option<(Connection, EventStream)> {
    {
        let mut st = shared.lock();
        st.set_inactive(reason.clone(), Now::system());
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
                st.set_inactive(
                    format!("{reason}; target {} no longer exists", shared.target_id),
                    Now::system(),
                );
                shared.commit(&st);
                return None;
            }
            Err(e) => {
                failures += 1;
                debug!(failures, error = %e, "reconnect attempt failed");
                if failures >= policy.max_consecutive_failures {
                    let mut st = shared.lock();
                    st.set_inactive(
                        format!("{reason}; gave up after {failures} reconnect attempts: {e}"),
                        Now::system(),
                    );
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
        st.reset_for(conn.clone(), page.clone(), Now::system());
        shared.conn.store(Arc::new(conn.clone()));
        shared.commit(&st);
    }
    setup_page(shared, &conn, &page).await?;
    Ok(Some((conn, events)))
}
