//! `browser_cdp`: CDP of the agent's choosing, on the session the supervisor
//! routes `frame_id` to (with evaluate disabled, only the methods that cannot
//! run script).

use super::url::{is_javascript_url, scheme_of, AUTHORED_SCHEMES};
use super::{budget_of, Tools};
use crate::error::{map_supervisor, map_transport, ErrorCode, ToolError};
use crate::tab::Raced;
use crate::types::*;
use serde_json::Value;

/// The `browser_cdp` methods allowed when evaluate is disabled: reads that
/// cannot run script or change the page, plus `Page.stopLoading`,
/// `Page.bringToFront`, `Page.handleJavaScriptDialog` (what
/// `browser_dialog` does) and `Page.navigate` to a URL `browser_navigate`
/// would load (checked the same way). Every other method is refused with
/// `evaluate_disabled`: too many run script of the caller's choosing in
/// some way (`Runtime.*`, `Debugger.*`, `DOM.setOuterHTML` with an inline
/// handler, `Page.reload`'s `scriptToEvaluateOnLoad`,
/// `Page.addScriptToEvaluateOnNewDocument`, `Target.createTarget` to a
/// `javascript:` or `data:` URL, `Input.insertText` into a script
/// element, …) for a deny list to be sound.
pub const NO_EVALUATE_CDP_METHODS: [&str; 22] = [
    "Accessibility.getFullAXTree",
    "Accessibility.getPartialAXTree",
    "Accessibility.queryAXTree",
    "Browser.getVersion",
    "DOM.describeNode",
    "DOM.getAttributes",
    "DOM.getBoxModel",
    "DOM.getDocument",
    "DOM.getNodeForLocation",
    "DOM.getOuterHTML",
    "DOM.querySelector",
    "DOM.querySelectorAll",
    "Page.bringToFront",
    "Page.captureScreenshot",
    "Page.getFrameTree",
    "Page.getLayoutMetrics",
    "Page.getNavigationHistory",
    "Page.handleJavaScriptDialog",
    "Page.navigate",
    "Page.stopLoading",
    "Target.getTargetInfo",
    "Target.getTargets",
];

impl Tools {
    /// `browser_cdp`: the one place this crate sends CDP of the agent's
    /// choosing, on the session the supervisor routes `frame_id` to.
    ///
    /// # Errors
    /// `evaluate_disabled`, `dialog_pending`, `unknown_frame`, `not_oopif`, `cdp_error`, `timeout`.
    ///
    /// # Cancel safety
    /// Cancel safe; the command may still run.
    pub async fn cdp(&self, req: CdpRequest) -> std::result::Result<CdpResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let m = req.method.as_str();
        if !m.contains('.') || m.starts_with('.') || m.ends_with('.') {
            return Err(
                ToolError::invalid("method", format!("{m:?} is not a CDP method name"))
                    .next("use Domain.method, e.g. DOM.getDocument"),
            );
        }
        let tab = self.tab();
        if !self.engine_config.evaluate_enabled {
            if !NO_EVALUATE_CDP_METHODS.contains(&m) {
                return Err(ToolError::new(
                    ErrorCode::EvaluateDisabled,
                    format!(
                        "browser_cdp {m} is refused: this server runs with evaluate disabled (--no-evaluate), and then browser_cdp takes only methods that cannot run script: {}",
                        NO_EVALUATE_CDP_METHODS.join(", ")
                    ),
                )
                .next("use browser_snapshot, browser_click, browser_type, browser_press_key and browser_navigate, or one of the methods listed"));
            }
            if m == "Page.navigate" {
                let url = req
                    .params
                    .as_ref()
                    .and_then(|p| p.get("url"))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .trim();
                let authored =
                    scheme_of(url).is_some_and(|s| AUTHORED_SCHEMES.contains(&s.as_str()));
                if is_javascript_url(url) || authored {
                    return Err(ToolError::new(
                        ErrorCode::EvaluateDisabled,
                        format!("browser_cdp Page.navigate to {:?} is refused: this server runs with evaluate disabled (--no-evaluate), and a javascript:, data:, blob: or filesystem: URL runs script of the caller's choosing", url.chars().take(60).collect::<String>()),
                    )
                    .next("navigate to an http(s) or file: URL"));
                }
            }
        }
        let browser_level = ["Target.", "Browser.", "SystemInfo.", "Storage."]
            .iter()
            .any(|p| m.starts_with(p));
        let session = match &req.frame_id {
            _ if browser_level => self.live_conn().browser(),
            None => tab.sup.page_session(),
            Some(fid) => {
                tab.sup
                    .route(&cdp_transport::FrameId::new(fid))
                    .map_err(|e| map_supervisor(&e, "browser_cdp"))?
                    .session
            }
        };
        let unblocked = browser_level || m == supervisor::HANDLE_DIALOG;
        if !unblocked {
            tab.ready("browser_cdp", &budget).await?;
        }
        let params = Value::Object(req.params.unwrap_or_default());
        let fut = session.call(m, params, budget.clone());
        let r = if unblocked {
            fut.await
        } else {
            match tab.race_dialog(fut).await {
                Raced::Dialog(d) => return Err(ToolError::dialog_pending(d, "browser_cdp")),
                Raced::Done(r) => r,
            }
        };
        match r {
            Ok(result) => Ok(CdpResponse { result }),
            Err(e @ cdp_transport::Error::Protocol { .. }) => Err(ToolError::new(ErrorCode::CdpError, e.to_string())
                .next("check the method name and params against the CDP reference (chromedevtools.github.io/devtools-protocol)")),
            Err(e) => Err(map_transport(&e, m)),
        }
    }
}
