//! One supervisor per agent task.

use crate::config::SupervisorConfig;
use crate::error::{Error, Result};
use crate::supervisor::Supervisor;
use cdp_transport::Connection;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Mutex;

/// Supervisors by task id. Each task gets its own connection and its own tab.
///
/// Launching a local Chromium is the caller's job: the endpoint is a
/// `ws://…` or `http://host:port` URL.
#[derive(Clone, Default)]
pub struct Registry {
    inner: Arc<Mutex<HashMap<String, (String, Supervisor)>>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").finish_non_exhaustive()
    }
}

const STOP_BUDGET: Duration = Duration::from_secs(5);

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// The supervisor of `task_id`, started on a new tab of `endpoint` when
    /// there is none. Idempotent for the same endpoint (config changes are
    /// ignored while it runs); a different endpoint stops the old supervisor
    /// first: state is never reused across endpoints. A supervisor that has
    /// become inactive for good is replaced.
    ///
    /// # Errors
    /// [`Error::Cdp`] when connecting or opening the tab fails.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped future may leave a tab open. Calls for
    /// different tasks run concurrently; calls for one task wait for each other.
    pub async fn get_or_start(
        &self,
        task_id: &str,
        endpoint: &str,
        config: SupervisorConfig,
    ) -> Result<Supervisor> {
        let old = {
            let map = self.inner.lock().await;
            match map.get(task_id) {
                Some((ep, s))
                    if ep == endpoint
                        && (s.snapshot().active
                            || s.snapshot().reason.as_deref() == Some("target crashed")) =>
                {
                    return Ok(s.clone())
                }
                Some((_, s)) => Some(s.clone()),
                None => None,
            }
        };
        if let Some(s) = old {
            s.stop(STOP_BUDGET).await;
        }
        let conn = Connection::connect(endpoint, config.connect_options.clone())
            .await
            .map_err(|e| Error::cdp("connecting", e))?;
        let sup = Supervisor::new_tab(conn, config).await?;
        let mut map = self.inner.lock().await;
        if let Some((_, prev)) =
            map.insert(task_id.to_string(), (endpoint.to_string(), sup.clone()))
        {
            // A concurrent call for the same task won the race: keep the newest.
            prev.stop(STOP_BUDGET).await;
        }
        Ok(sup)
    }

    /// The supervisor of `task_id`, if running.
    pub async fn get(&self, task_id: &str) -> Option<Supervisor> {
        self.inner.lock().await.get(task_id).map(|(_, s)| s.clone())
    }

    /// Task ids with a supervisor.
    pub async fn tasks(&self) -> Vec<String> {
        let mut v: Vec<String> = self.inner.lock().await.keys().cloned().collect();
        v.sort();
        v
    }

    /// Stops and removes the supervisor of `task_id` (closing its tab).
    /// Returns false when there was none.
    ///
    /// # Cancel safety
    /// Cancel safe: the entry is removed before any await.
    pub async fn stop(&self, task_id: &str) -> bool {
        let s = self.inner.lock().await.remove(task_id);
        match s {
            Some((_, s)) => {
                s.stop(STOP_BUDGET).await;
                true
            }
            None => false,
        }
    }

    /// Stops every supervisor.
    ///
    /// # Cancel safety
    /// Cancel safe: entries are removed before any await.
    pub async fn stop_all(&self) {
        let all: Vec<Supervisor> = self
            .inner
            .lock()
            .await
            .drain()
            .map(|(_, (_, s))| s)
            .collect();
        for s in all {
            s.stop(STOP_BUDGET).await;
        }
    }
}
