//! `browser_screenshot` and `browser_console`.

use super::{budget_of, Tools};
use crate::error::{map_transport, ToolError};
use crate::tab::Raced;
use crate::types::*;
use serde_json::json;
use std::time::Duration;

/// The tallest a full-page capture goes (Chromium's limit for one image).
const FULL_PAGE_MAX_PX: f64 = 16384.0;

/// How long the renderer gets to answer a trivial evaluate once a capture
/// has waited [`busy_after`] (then its running script is stopped).
const BUSY_CHECK: Duration = Duration::from_millis(300);

impl Tools {
    /// `browser_screenshot`: `Page.captureScreenshot` on the supervisor's page session.
    ///
    /// A renderer busy with its page's own script produces no frame, so the
    /// capture would wait out its budget: once it has waited half the
    /// budget (at most [`evaluate::BUSY_AFTER_MAX`]), the page gets
    /// [`evaluate::Engine::stop_page_script`] (a trivial evaluate, and a
    /// termination when that is not answered within 300 ms); the capture
    /// then completes and `note` says a script was stopped.
    ///
    /// # Errors
    /// `dialog_pending`, `timeout`, `browser_closed`.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn screenshot(
        &self,
        req: ScreenshotRequest,
    ) -> std::result::Result<ScreenshotResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let tab = self.tab();
        tab.ready("browser_screenshot", &budget).await?;
        // A tab behind another one in its window is hidden and produces no
        // frames: `Page.captureScreenshot` would wait for one until the
        // budget ends. Tabs opened here have a window of their own; a popup
        // or a tab of a browser given by URL may not.
        tab.to_front(&budget).await;
        let page = tab.sup.page_session();
        let (fmt, mime) = match req.format {
            ImageFormat::Png => ("png", "image/png"),
            ImageFormat::Jpeg => ("jpeg", "image/jpeg"),
        };
        let mut p = json!({"format": fmt});
        if req.format == ImageFormat::Jpeg {
            p["quality"] = json!(80);
        }
        let mut notes = Vec::new();
        if req.full_page {
            p["captureBeyondViewport"] = json!(true);
            if let Raced::Done(Ok(m)) = tab
                .race_dialog(page.call("Page.getLayoutMetrics", json!({}), budget.clone()))
                .await
            {
                let s = &m["cssContentSize"];
                if let (Some(w), Some(h)) = (s["width"].as_f64(), s["height"].as_f64()) {
                    p["clip"] = json!({"x": 0, "y": 0, "width": w, "height": h.min(FULL_PAGE_MAX_PX), "scale": 1});
                    if h > FULL_PAGE_MAX_PX {
                        notes.push(format!("the page is {h:.0} px tall; the image stops at {FULL_PAGE_MAX_PX:.0} px (Chromium's limit for one capture)"));
                    }
                }
            }
        }
        let capture = page.call("Page.captureScreenshot", p, budget.clone());
        let fut = async {
            tokio::pin!(capture);
            tokio::select! {
                r = &mut capture => (r, false),
                _ = tokio::time::sleep(busy_after(&budget)) => {
                    let within = budget.remaining().saturating_sub(Duration::from_millis(100));
                    let found = tab.engine().stop_page_script(&page, BUSY_CHECK.min(within / 2), within).await;
                    tracing::debug!(?found, "browser_screenshot: the capture waited; the page's renderer");
                    (capture.await, found == evaluate::PageScript::Stopped)
                }
            }
        };
        let (v, stopped) = match tab.race_dialog(fut).await {
            Raced::Dialog(d) => return Err(ToolError::dialog_pending(d, "browser_screenshot")),
            Raced::Done((r, stopped)) => (
                r.map_err(|e| map_transport(&e, "browser_screenshot"))?,
                stopped,
            ),
        };
        if stopped {
            notes.insert(0, "the page's own script kept its renderer busy (no frame comes while it runs): it was stopped (Runtime.terminateExecution), so the page may be incomplete".into());
        }
        let data = v["data"].as_str().unwrap_or_default().to_string();
        let bytes = data.len() / 4 * 3;
        Ok(ScreenshotResponse {
            mime_type: mime.into(),
            bytes,
            data,
            note: (!notes.is_empty()).then(|| notes.join("; ")),
        })
    }

    // ------------------------------------------------------------ console

    /// `browser_console`: the supervisor's console-error ring. Never fails.
    pub fn console(&self, req: ConsoleRequest) -> ConsoleResponse {
        let tab = self.tab();
        let mut errors = tab.console();
        let total = tab.console_total().max(errors.len());
        let limit = req.limit.unwrap_or(20);
        if errors.len() > limit {
            errors.drain(..errors.len() - limit);
        }
        ConsoleResponse { errors, total }
    }
}

/// How long a capture waits before the page's renderer is checked for a
/// running script: half the budget, at most [`evaluate::BUSY_AFTER_MAX`].
fn busy_after(budget: &cdp_transport::Budget) -> Duration {
    (budget.remaining() / 2).min(evaluate::BUSY_AFTER_MAX)
}
