//! The `must_respond` watchdog: a dialog nobody answered within
//! [`crate::SupervisorConfig::dialog_timeout`] is dismissed, closed by
//! `watchdog`.

use super::answer::answer;
use super::Shared;
use crate::view::ClosedBy;
use std::sync::Arc;
use std::time::Duration;
use tracing::{debug, warn};

/// Waits `after`, then dismisses dialog `dialog_id` if it is still pending
/// and nobody is answering it. Ends at once when the supervisor stops.
pub(super) async fn watchdog(s: Arc<Shared>, dialog_id: String, after: Duration) {
    tokio::select! {
        _ = s.shutdown.cancelled() => return,
        _ = tokio::time::sleep(after) => {}
    }
    let still = s.lock().unanswered(&dialog_id);
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
}
