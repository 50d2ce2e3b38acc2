//! The ref map of the tab's latest snapshot, what that snapshot left out or
//! marked disabled, and the errors of a ref that cannot be used.

use super::Tab;
use crate::error::{ErrorCode, ToolError};
use cdp_transport::Budget;
use evaluate::refs::RefMap;
use std::collections::HashSet;
use std::time::Duration;

/// Bound on the live `Accessibility.getPartialAXTree` check of a ref the
/// latest snapshot showed disabled (see [`Tab::refuse_disabled`]).
const DISABLED_CHECK: Duration = Duration::from_millis(1000);

/// What the latest snapshot of a tab left out or marked, kept beside its
/// ref map for the errors of the ref tools.
#[derive(Debug, Default, Clone)]
pub(crate) struct SnapshotFacts {
    /// Refs of the whole AX tree that the rendered text left out (cut by the
    /// size cap, or not interactive under `interactive_only`).
    pub left_out: HashSet<String>,
    /// True when the text was cut at its size cap.
    pub truncated: bool,
    /// True when the snapshot was taken with `interactive_only`.
    pub interactive_only: bool,
    /// Refs whose AX node was disabled when the snapshot was taken.
    pub disabled: HashSet<String>,
}

impl Tab {
    /// The ref map of the latest snapshot.
    pub fn refs(&self) -> Option<RefMap> {
        self.refs.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Replaces the ref map (a new snapshot was rendered) and what that
    /// snapshot left out or marked.
    pub fn store_refs(&self, refs: RefMap, facts: SnapshotFacts) {
        *self.refs.lock().unwrap_or_else(|p| p.into_inner()) = Some(refs);
        *self.facts.lock().unwrap_or_else(|p| p.into_inner()) = facts;
        *self.refs_dropped.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn facts(&self) -> SnapshotFacts {
        self.facts.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The ref map holding `ref_id`. Errors:
    /// * `unknown_ref` when no snapshot was taken yet;
    /// * `stale_ref` when the map was dropped after a reconnect;
    /// * `unknown_ref` saying so when the latest snapshot left the ref out
    ///   (its text was cut at the size cap, or `interactive_only` dropped
    ///   the node), with a next step that gets a usable ref;
    /// * `unknown_ref` when the latest snapshot has no such ref.
    pub fn refs_for(&self, ref_id: &str) -> Result<RefMap, ToolError> {
        let map = self.refs_map_for(ref_id)?;
        if map.get(ref_id).is_some() {
            return Ok(map);
        }
        let facts = self.facts();
        if facts.left_out.contains(ref_id) {
            let (why, next) = if facts.truncated && !facts.interactive_only {
                (
                    format!("the latest snapshot's text was cut at its {} KiB cap and ref {ref_id:?} was past the cut, so it was left out", crate::tools::MAX_SNAPSHOT_BYTES / 1024),
                    "call browser_snapshot with {\"interactive_only\": true}: a shorter text that keeps the refs of buttons, links and form fields".to_string(),
                )
            } else if facts.truncated {
                (
                    format!("the latest snapshot (interactive_only) was still cut at its {} KiB cap and ref {ref_id:?} was past the cut", crate::tools::MAX_SNAPSHOT_BYTES / 1024),
                    "the page is too large for one snapshot: reach the element with browser_evaluate (document.querySelector) or browser_cdp (DOM.querySelector), or navigate to a smaller part of the site".to_string(),
                )
            } else {
                (
                    format!("the latest snapshot was taken with interactive_only, which leaves out ref {ref_id:?} (not an interactive element)"),
                    "call browser_snapshot without interactive_only to get the refs of every node".to_string(),
                )
            };
            return Err(ToolError::new(
                ErrorCode::UnknownRef,
                format!("ref {ref_id:?} is not usable: {why}"),
            )
            .next(next));
        }
        Err(ToolError::new(
            ErrorCode::UnknownRef,
            format!("no ref {ref_id:?} in the latest snapshot"),
        )
        .next("call browser_snapshot and use a ref from it (refs look like e3)"))
    }

    /// Refuses a ref the latest snapshot showed disabled (AX `disabled`)
    /// when it is still disabled now: one `Accessibility.getPartialAXTree`
    /// on the ref's session (at most [`DISABLED_CHECK`] of `budget`), sent
    /// only for refs the snapshot marked. A control enabled since the
    /// snapshot, a ref without a backend node, or a check that fails goes
    /// ahead (the action reports its own errors).
    ///
    /// # Errors
    /// `not_interactable` naming the ref and saying it is disabled.
    ///
    /// # Cancel safety
    /// Cancel safe (a read).
    pub async fn refuse_disabled(
        &self,
        refs: &RefMap,
        ref_id: &str,
        tool: &str,
        budget: &Budget,
    ) -> Result<(), ToolError> {
        if !self.facts().disabled.contains(ref_id) {
            return Ok(());
        }
        let Some(entry) = refs.get(ref_id) else {
            return Ok(());
        };
        let Some(backend) = entry.backend_node_id else {
            return Ok(());
        };
        let r = entry
            .session()
            .call(
                "Accessibility.getPartialAXTree",
                serde_json::json!({"backendNodeId": backend.0, "fetchRelatives": false}),
                budget.child(DISABLED_CHECK),
            )
            .await;
        let Ok(v) = r else {
            return Ok(());
        };
        let nodes = v["nodes"].as_array().cloned().unwrap_or_default();
        let node = nodes
            .iter()
            .find(|n| n["backendDOMNodeId"].as_i64() == Some(backend.0))
            .or_else(|| nodes.first());
        let disabled = node
            .and_then(|n| n["properties"].as_array())
            .is_some_and(|props| {
                props
                    .iter()
                    .any(|p| p["name"] == "disabled" && p["value"]["value"].as_bool() == Some(true))
            });
        if !disabled {
            return Ok(());
        }
        Err(ToolError::new(
            ErrorCode::NotInteractable,
            format!(
                "ref {ref_id} ({} {:?}) is disabled, so {tool} would have no effect",
                entry.role, entry.name
            ),
        )
        .next("do what enables it first (fill the form fields it needs, tick a checkbox), call browser_snapshot, then retry; or pick another ref"))
    }

    /// The ref map, or the error for a tab without one (see [`Tab::refs_for`]).
    fn refs_map_for(&self, ref_id: &str) -> Result<RefMap, ToolError> {
        self.refs().ok_or_else(|| {
            match self
                .refs_dropped
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
            {
                Some(why) => ToolError::new(
                    ErrorCode::StaleRef,
                    format!("ref {ref_id:?} is from an older snapshot: {why}"),
                )
                .next("call browser_snapshot for fresh refs"),
                None => ToolError::new(
                    ErrorCode::UnknownRef,
                    format!("no ref {ref_id:?}: no snapshot has been taken in this tab yet"),
                )
                .next("call browser_snapshot and use a ref from it (refs look like e3)"),
            }
        })
    }
}
