//! `browser_snapshot`: the supervisor's view plus the AX text with refs, and
//! the facts about the snapshot the ref tools' errors need.

use super::{budget_of, Tools};
use crate::error::{inactive_error, map_eval, ToolError};
use crate::tab::{Raced, SnapshotFacts};
use crate::types::*;
use evaluate::refs::{RenderOptions, SnapshotOptions};
use std::collections::HashSet;

/// Largest AX text kept in a snapshot, bytes; longer text is cut with a marker
/// line, and the refs on cut lines leave the ref map.
pub const MAX_SNAPSHOT_BYTES: usize = 48 * 1024;

impl Tools {
    /// `browser_snapshot`: the supervisor's view plus the AX text with refs
    /// ([`evaluate::refs::AxSnapshotter`]); the ref map is kept for the tab
    /// until the next snapshot, with what the snapshot left out (refs past
    /// the size cap, or dropped by `interactive_only`) and which refs were
    /// disabled, for the errors of the ref tools. With the browser
    /// connection closed (the browser gone, no reconnect) the call fails
    /// with `browser_closed`: everything it would show is stale (the
    /// supervisor's view is still read first, which retires the dialogs
    /// that waited on the connection as `remote`). The AX part is skipped
    /// (with a `note` saying why) when the supervisor is inactive (crash,
    /// tab closed) and while a dialog is pending (not under an auto policy,
    /// whose dialogs are answered at once).
    ///
    /// # Errors
    /// `invalid_argument` (timeout_ms), `browser_closed` (connection closed);
    /// AX failures become a `note`, not an error.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn snapshot(
        &self,
        req: SnapshotRequest,
    ) -> std::result::Result<SnapshotResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let tab = self.tab();
        // The supervisor's state first: reading its view after the
        // connection closed retires the dialogs that were waiting on it.
        let view = tab.sup.snapshot();
        if let Some(r) = tab.sup.connection().closed_reason() {
            return Err(ToolError::browser_closed(r));
        }
        let pending = (!tab.auto_policy())
            .then(|| view.pending_dialogs.first())
            .flatten();
        let refreshed = if view.active {
            tab.refresh(&budget).await
        } else {
            Ok(())
        };
        let (snapshot, note) = if !view.active || tab.sup.page_session().is_crashed() {
            let reason = if view.active {
                Some("target crashed")
            } else {
                view.reason.as_deref()
            };
            (
                None,
                Some(format!(
                    "accessibility text unavailable: {}",
                    inactive_error(reason).message
                )),
            )
        } else if let Some(d) = pending {
            (None, Some(format!("accessibility text omitted: dialog {} blocks the page; answer it with browser_dialog", d.id)))
        } else if let Err(e) = refreshed {
            (
                None,
                Some(format!("accessibility text unavailable: {}", e.message)),
            )
        } else {
            let opts = SnapshotOptions::default();
            let ax = tab.ax();
            let walk = ax.snapshot(&opts, budget.clone());
            match tab.race_dialog(walk).await {
                Raced::Done(Ok(s)) => {
                    let r = s.render(&RenderOptions {
                        max_chars: Some(MAX_SNAPSHOT_BYTES),
                        interactive_only: req.interactive_only,
                        ..RenderOptions::default()
                    });
                    let facts = snapshot_facts(&s, &r, req.interactive_only);
                    tab.store_refs(r.refs, facts);
                    let mut notes = s.notes().to_vec();
                    if r.truncated {
                        notes.push(if req.interactive_only {
                            format!("the text was cut at {} KiB even with interactive_only; refs past the cut are not usable", MAX_SNAPSHOT_BYTES / 1024)
                        } else {
                            format!("the text was cut at {} KiB; refs past the cut are not usable: call browser_snapshot with {{\"interactive_only\": true}} for a shorter text with the refs of buttons, links and form fields", MAX_SNAPSHOT_BYTES / 1024)
                        });
                    }
                    let note = (!notes.is_empty()).then(|| notes.join("; "));
                    (Some(r.text), note)
                }
                Raced::Done(Err(e)) => (
                    None,
                    Some(format!(
                        "accessibility text unavailable: {}",
                        map_eval(&e, "browser_snapshot").message
                    )),
                ),
                // Same note as a dialog seen before the walk: the supervisor may
                // announce a dialog a moment before its view holds it.
                Raced::Dialog(d) => (None, Some(format!("accessibility text omitted: dialog {} blocks the page; answer it with browser_dialog", d.id))),
            }
        };
        let console_total = tab.console_total();
        Ok(SnapshotResponse {
            schema_version: crate::SCHEMA_VERSION,
            url: tab.main_url(),
            snapshot,
            note,
            pending_dialogs: tab.pending(),
            recent_dialogs: tab.recent(),
            frame_tree: tab.frame_tree(),
            console_errors: console_total,
            supervisor: tab.supervisor_view(),
        })
    }
}

/// What a rendered snapshot left out and which of its refs were disabled
/// (see [`crate::tab::SnapshotFacts`]).
fn snapshot_facts(
    s: &evaluate::refs::Snapshot,
    r: &evaluate::refs::RenderedSnapshot,
    interactive_only: bool,
) -> SnapshotFacts {
    fn disabled_refs(nodes: &[evaluate::refs::SnapshotNode], out: &mut HashSet<String>) {
        for n in nodes {
            if n.states.disabled {
                if let Some(r) = &n.ref_id {
                    out.insert(r.clone());
                }
            }
            disabled_refs(&n.children, out);
        }
    }
    let mut disabled = HashSet::new();
    disabled_refs(s.nodes(), &mut disabled);
    SnapshotFacts {
        left_out: s
            .refs()
            .iter()
            .filter(|e| r.refs.get(&e.ref_id).is_none())
            .map(|e| e.ref_id.clone())
            .collect(),
        truncated: r.truncated,
        interactive_only,
        disabled,
    }
}
