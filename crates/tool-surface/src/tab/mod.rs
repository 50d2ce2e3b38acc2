//! One tab as the tools see it: a [`Supervisor`] (dialogs, frames, routing,
//! console errors), an [`Engine`] (budgeted evaluate) and an
//! [`AxSnapshotter`] with the [`RefMap`] of the latest snapshot.
//!
//! This module owns no browser state of its own: every fact is read from the
//! supervisor's lock-free view or the latest ref map, and converted to the
//! JSON views of [`crate::types`]. The waiting it does, always under the
//! caller's budget: [`Tab::race_dialog`], which ends a renderer-bound call as
//! soon as the supervisor reports a dialog (unless an auto policy owns the
//! dialogs); [`Tab::ready`], which rebuilds the engine and the snapshotter
//! after the supervisor reconnected and lets an auto policy answer the
//! dialogs pending when a call starts.
//!
//! By job: this file holds the tab itself and its lifecycle (building,
//! rebuilding after a reconnect, attaching, opening, shutting down) and the
//! supervisor's facts and termination route handed to the engine;
//! `dialogs` the dialog views and the race against a dialog opening; `gate`
//! whether a call may run and the error of a tab that went away; `refs` the
//! latest snapshot's ref map and what it left out; `view` the JSON views of
//! the supervisor's state and frame routing for evaluate.

mod dialogs;
mod facts;
mod gate;
mod refs;
mod view;

pub(crate) use dialogs::{dialog_view, Raced};
pub(crate) use refs::SnapshotFacts;

use crate::error::{map_eval, map_supervisor, ToolError};
use cdp_transport::{Budget, Connection, TargetId};
use evaluate::refs::{AxSnapshotter, RefMap};
use evaluate::{Engine, EngineConfig};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use supervisor::{Supervisor, SupervisorConfig};

/// Bound on closing the engine's and snapshotter's sessions of a connection
/// the supervisor left (in the background; the old socket is usually gone).
const RETIRE_BUDGET: Duration = Duration::from_secs(2);

/// The engine and the snapshotter of a tab, on the connection of one
/// supervisor generation (see [`supervisor::SupervisorView::generation`]).
struct Parts {
    engine: Engine,
    ax: AxSnapshotter,
    /// The supervisor's view generation they were built for.
    generation: u64,
}

/// One supervised page target and what the tools keep for it.
pub(crate) struct Tab {
    pub target_id: TargetId,
    pub sup: Supervisor,
    /// Rebuilt by [`Tab::ready`] after the supervisor reconnected.
    parts: Mutex<Arc<Parts>>,
    engine_config: EngineConfig,
    /// Held while the parts are rebuilt (one rebuild at a time).
    rebuild: tokio::sync::Mutex<()>,
    /// The ref map of the latest snapshot; `None` before the first one.
    refs: Mutex<Option<RefMap>>,
    /// What the latest snapshot left out or marked (with `refs`).
    facts: Mutex<SnapshotFacts>,
    /// Set when the ref map was dropped because the parts were rebuilt.
    refs_dropped: Mutex<Option<String>>,
}

impl std::fmt::Debug for Tab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tab")
            .field("target_id", &self.target_id)
            .finish_non_exhaustive()
    }
}

impl Tab {
    /// Builds the tab around a running supervisor: an engine for its target
    /// and a snapshotter on a session of its own.
    ///
    /// # Errors
    /// The snapshotter's attach failing (`browser_closed`, `timeout`, ...).
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped future may leave a session attached.
    pub async fn from_supervisor(
        sup: Supervisor,
        engine_config: EngineConfig,
        budget: &Budget,
    ) -> Result<Arc<Tab>, ToolError> {
        let target_id = sup.target_id().clone();
        let parts = Self::build(&sup, &target_id, &engine_config, budget).await?;
        Ok(Arc::new(Tab {
            target_id,
            sup,
            parts: Mutex::new(Arc::new(parts)),
            engine_config,
            rebuild: tokio::sync::Mutex::new(()),
            refs: Mutex::new(None),
            facts: Mutex::new(SnapshotFacts::default()),
            refs_dropped: Mutex::new(None),
        }))
    }

    /// An engine and a snapshotter on the supervisor's current connection.
    async fn build(
        sup: &Supervisor,
        target_id: &TargetId,
        engine_config: &EngineConfig,
        budget: &Budget,
    ) -> Result<Parts, ToolError> {
        // The generation first: if a reconnect lands in between, the next
        // call sees a newer generation and builds again.
        let generation = sup.snapshot().generation;
        let conn = sup.connection();
        // The supervisor is the one owner of the tab's facts: frame
        // loaders, the sessions a termination goes on, dialogs.
        let engine = Engine::new(conn.clone(), target_id.clone(), engine_config.clone());
        engine.set_facts(Arc::new(facts::SupervisorFacts(sup.clone())));
        let ax = AxSnapshotter::attach(&conn, target_id, budget.clone())
            .await
            .map_err(|e| map_eval(&e, "attaching the snapshotter"))?
            .with_engine(&engine);
        Ok(Parts {
            engine,
            ax,
            generation,
        })
    }

    fn parts(&self) -> Arc<Parts> {
        self.parts.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The tab's evaluate engine (on the supervisor's connection as of the
    /// last [`Tab::ready`]).
    pub fn engine(&self) -> Engine {
        self.parts().engine.clone()
    }

    /// The tab's AX snapshotter (same connection as [`Tab::engine`]).
    pub fn ax(&self) -> AxSnapshotter {
        self.parts().ax.clone()
    }

    /// Rebuilds the parts when the supervisor is active on a newer
    /// generation than they were built for.
    pub async fn refresh(&self, budget: &Budget) -> Result<(), ToolError> {
        let stale = |t: &Tab| {
            let v = t.sup.snapshot();
            v.active && v.generation != t.parts().generation
        };
        if !stale(self) {
            return Ok(());
        }
        let deadline = budget.deadline();
        let Ok(_guard) = tokio::time::timeout_at(deadline, self.rebuild.lock()).await else {
            return Err(ToolError::timeout(
                "re-attaching to the tab after a reconnect",
                budget.total().as_millis() as u64,
            ));
        };
        if !stale(self) {
            return Ok(());
        }
        let fresh = Self::build(&self.sup, &self.target_id, &self.engine_config, budget).await?;
        tracing::info!(
            target_id = %self.target_id,
            generation = fresh.generation,
            "the supervisor reconnected: engine and snapshotter rebuilt on its new connection"
        );
        let old = std::mem::replace(
            &mut *self.parts.lock().unwrap_or_else(|p| p.into_inner()),
            Arc::new(fresh),
        );
        if self
            .refs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .is_some()
        {
            *self.refs_dropped.lock().unwrap_or_else(|p| p.into_inner()) =
                Some("the browser connection was re-established since the last snapshot".into());
        }
        tokio::spawn(async move {
            let b = Budget::new(RETIRE_BUDGET);
            old.engine.close(&b).await;
            old.ax.close(b).await;
        });
        Ok(())
    }

    /// Supervises `target_id` (an existing page or popup) and builds the tab.
    ///
    /// # Errors
    /// As [`Supervisor::attach`] and [`Tab::from_supervisor`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped future may leave the target attached.
    pub async fn attach(
        conn: Connection,
        target_id: TargetId,
        config: SupervisorConfig,
        engine_config: EngineConfig,
        budget: &Budget,
    ) -> Result<Arc<Tab>, ToolError> {
        let sup = Supervisor::attach(conn, target_id, config)
            .await
            .map_err(|e| map_supervisor(&e, "attaching to the tab"))?;
        Self::from_supervisor(sup, engine_config, budget).await
    }

    /// Opens a new blank tab and supervises it.
    ///
    /// # Errors
    /// As [`Supervisor::new_tab`] and [`Tab::from_supervisor`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped future may leave a tab open.
    pub async fn open(
        conn: Connection,
        config: SupervisorConfig,
        engine_config: EngineConfig,
        budget: &Budget,
    ) -> Result<Arc<Tab>, ToolError> {
        let sup = Supervisor::new_tab(conn, config)
            .await
            .map_err(|e| map_supervisor(&e, "opening a tab"))?;
        Self::from_supervisor(sup, engine_config, budget).await
    }

    /// Stops the supervisor and detaches the engine's and snapshotter's
    /// sessions (the tab itself is closed by the caller when wanted).
    ///
    /// # Cancel safety
    /// Cancel safe: each step stops its own work before awaiting.
    pub async fn shutdown(&self, budget: &Budget) {
        let parts = self.parts();
        parts.engine.close(budget).await;
        parts.ax.close(budget.clone()).await;
        self.sup.stop(budget.clone()).await;
    }
}
