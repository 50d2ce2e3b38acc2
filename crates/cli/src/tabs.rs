//! Who holds the connected [`Tools`], and closing the tabs tabwarden opened
//! in a browser it did not launch (`--cdp-url`) before it exits.
//!
//! [`Tools::connect`] opens a new tab (`Target.createTarget`). In a Chromium
//! tabwarden launched itself that tab goes with the browser; in a remote one
//! it would stay open after every `tabwarden eval|snapshot|screenshot|demo`
//! run, and after every `tabwarden mcp` session. [`release`] closes it
//! (plus any popup the page opened that the tools know) with
//! `Target.closeTarget`, bounded by [`CLOSE_TABS_BOUND`], on every way out:
//! success, a tool error, and SIGINT/SIGTERM/SIGHUP (`main` runs it after
//! the command's future ended or was dropped). [`Tools::connect`] is not
//! cancel safe (a dropped connect may leave its new tab open), so
//! [`connect_remote`] runs it in a task of its own that records the tools
//! even when nobody waits for them any more, and [`release`] first waits
//! (bounded) for such a connect to finish.

use cdp_transport::Budget;
use serde_json::json;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;
use tool_surface::{Tools, ToolsConfig};

/// The tools in use, shared between the command (or the MCP server, which
/// swaps them after a relaunch or fills them on a late connect) and the exit
/// path.
#[derive(Default)]
pub struct Slot {
    /// The tools; the lock is never held across an `.await`.
    tools: RwLock<Option<Arc<Tools>>>,
    /// Held by a [`connect_remote`] for as long as its connect runs.
    connecting: Arc<tokio::sync::Mutex<()>>,
    /// Connects finished so far, and the error of the last one that failed.
    attempts: AtomicU64,
    last_error: Mutex<Option<String>>,
}

/// A shared [`Slot`].
pub type ToolsSlot = Arc<Slot>;

/// Bound on [`release`]'s tab closing: listing the tabs plus one
/// `Target.closeTarget` each.
pub const CLOSE_TABS_BOUND: Duration = Duration::from_secs(3);

/// An empty slot.
pub fn slot() -> ToolsSlot {
    Arc::new(Slot::default())
}

/// The tools in `slot`, if any.
pub fn current(slot: &ToolsSlot) -> Option<Arc<Tools>> {
    slot.tools.read().unwrap_or_else(|p| p.into_inner()).clone()
}

/// Puts `tools` in `slot`; returns what was there.
pub fn put(slot: &ToolsSlot, tools: Arc<Tools>) -> Option<Arc<Tools>> {
    slot.tools
        .write()
        .unwrap_or_else(|p| p.into_inner())
        .replace(tools)
}

/// The tools of `slot`, or else [`Tools::connect`] to `endpoint` (a
/// `--cdp-url` browser) in a task of its own that puts them in `slot` when
/// it succeeds, whether or not this future is still awaited. One connect
/// per slot at a time: a caller that waited behind another connect gets its
/// tools, or its error when it failed (no second wait on an endpoint that
/// does not answer).
///
/// # Errors
/// [`Tools::connect`]'s error as text (its `Display`, which names the
/// cause once); a connect task that panicked says so.
///
/// # Cancel safety
/// Cancel safe: a dropped call leaves the connect running to completion,
/// and [`release`] waits for it (bounded) before closing the tabs.
pub async fn connect_remote(
    slot: &ToolsSlot,
    endpoint: &str,
    config: ToolsConfig,
) -> Result<Arc<Tools>, String> {
    let seen = slot.attempts.load(Ordering::SeqCst);
    let guard = slot.connecting.clone().lock_owned().await;
    if let Some(t) = current(slot) {
        return Ok(t);
    }
    if slot.attempts.load(Ordering::SeqCst) != seen {
        let last = slot
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(e) = last {
            return Err(e);
        }
    }
    let (s, endpoint) = (slot.clone(), endpoint.to_string());
    let task = tokio::spawn(async move {
        let r = Tools::connect(&endpoint, config)
            .await
            .map(Arc::new)
            .map_err(|e| e.to_string());
        match &r {
            Ok(t) => {
                put(&s, t.clone());
            }
            Err(e) => {
                *s.last_error.lock().unwrap_or_else(|p| p.into_inner()) = Some(e.clone());
            }
        }
        s.attempts.fetch_add(1, Ordering::SeqCst);
        drop(guard);
        r
    });
    task.await
        .unwrap_or_else(|e| Err(format!("the connect task failed: {e}")))
}

/// Closes every tab `tools` know (their own tabs and the popups those
/// opened, as `browser_tabs` lists them) with `Target.closeTarget` on the
/// browser session; returns how many the browser closed. Bounded by
/// [`CLOSE_TABS_BOUND`] as a whole; errors (a dead connection, a tab already
/// gone) are logged at debug level and skipped.
///
/// # Cancel safety
/// Cancel safe; a `Target.closeTarget` already sent may still close its tab.
pub async fn close_tabs(tools: &Tools) -> usize {
    let budget = Budget::new(CLOSE_TABS_BOUND);
    let work = async {
        let listed = tools.call("browser_tabs", json!({})).await;
        let ids: Vec<String> = listed["tabs"]
            .as_array()
            .map(|tabs| {
                tabs.iter()
                    .filter_map(|t| t["tab_id"].as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default();
        let browser = tools.connection().browser();
        let mut closed = 0;
        for id in ids {
            match browser
                .call(
                    "Target.closeTarget",
                    json!({"targetId": id}),
                    budget.clone(),
                )
                .await
            {
                Ok(_) => closed += 1,
                Err(e) => tracing::debug!(tab = %id, error = %e, "closing a tab failed"),
            }
        }
        closed
    };
    match tokio::time::timeout(CLOSE_TABS_BOUND, work).await {
        Ok(n) => n,
        Err(_) => {
            tracing::warn!(
                bound_ms = CLOSE_TABS_BOUND.as_millis() as u64,
                "closing the tabs tabwarden opened timed out; some may stay open"
            );
            0
        }
    }
}

/// Empties `slot`: when `remote` (a `--cdp-url` browser), waits up to
/// [`CLOSE_TABS_BOUND`] for a [`connect_remote`] still running, then closes
/// the tools' tabs ([`close_tabs`]); then closes their connection.
/// Idempotent.
///
/// # Cancel safety
/// Cancel safe; once the tools are out of the slot, dropping it leaves
/// their tabs open.
pub async fn release(slot: &ToolsSlot, remote: bool) {
    if remote
        && tokio::time::timeout(CLOSE_TABS_BOUND, slot.connecting.lock())
            .await
            .is_err()
    {
        tracing::warn!("a connect to --cdp-url still runs; the tab it opens may stay open");
    }
    let taken = slot.tools.write().unwrap_or_else(|p| p.into_inner()).take();
    let Some(tools) = taken else { return };
    if remote {
        let n = close_tabs(&tools).await;
        tracing::info!(closed = n, "closed the tabs tabwarden opened");
    }
    tools.connection().close();
}
