//! The tab set: which tabs the tools supervise and which one they act on,
//! opening, selecting and closing tabs (`browser_tabs`), and listing them
//! with the popups their supervisors report.

use super::url::check_url;
use super::{Tools, INFO_BUDGET};
use crate::error::{ErrorCode, ToolError};
use crate::tab::Tab;
use crate::types::*;
use cdp_transport::{Budget, Connection, TargetId};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// Budget of a `browser_tabs` call (it has no `timeout_ms`).
const TABS_BUDGET: Duration = Duration::from_secs(15);

/// The tabs the tools know, and which one they act on.
pub(super) struct TabSet {
    /// Every supervised tab, the current one included.
    tabs: Vec<Arc<Tab>>,
    /// The tab the tools act on.
    current: Arc<Tab>,
}

impl TabSet {
    /// The set of one tab, current (what [`Tools::connect`] starts with).
    pub(super) fn new(tab: Arc<Tab>) -> Self {
        Self {
            tabs: vec![tab.clone()],
            current: tab,
        }
    }

    fn push_current(&mut self, tab: Arc<Tab>) {
        self.tabs.push(tab.clone());
        self.current = tab;
    }
}

impl Tools {
    /// The connection the tools use now: the current tab supervisor's (it
    /// changes after a reconnect).
    pub(super) fn live_conn(&self) -> Connection {
        self.tab().sup.connection()
    }

    fn set(&self) -> std::sync::MutexGuard<'_, TabSet> {
        self.tabs.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The tab the tools act on.
    pub(super) fn tab(&self) -> Arc<Tab> {
        self.set().current.clone()
    }

    /// `browser_tabs`: the tabs this server supervises (each with its own
    /// supervisor, engine and snapshotter) plus the popups their supervisors
    /// report; selecting a popup supervises it as a tab.
    ///
    /// `new` with a `url` checks the URL as `browser_navigate` does (before
    /// any tab is opened), then opens the tab, makes it current and loads
    /// the URL exactly as `browser_navigate` would (`status`, `dialog`,
    /// `note` as its response); a failed load leaves the new tab open and
    /// current, and its error says so. With the browser connection closed
    /// every action is `browser_closed` (the list would be stale).
    ///
    /// # Errors
    /// `unknown_tab`, `invalid_argument`, `browser_closed`, and for `new`
    /// with a `url` the errors of `browser_navigate`.
    ///
    /// # Cancel safety
    /// Not cancel safe: a tab may be opened or closed without the switch.
    pub async fn tabs(&self, req: TabsRequest) -> std::result::Result<TabsResponse, ToolError> {
        let budget = Budget::new(TABS_BUDGET);
        if let Some(r) = self.live_conn().closed_reason() {
            return Err(ToolError::browser_closed(r));
        }
        let mut loaded: Option<NavigateResponse> = None;
        match req.action {
            TabsAction::List => {}
            TabsAction::New => {
                let url = req.url.as_deref().map(str::trim).filter(|u| !u.is_empty());
                if let Some(url) = url {
                    check_url(url, self.engine_config.evaluate_enabled, "browser_tabs new")?;
                }
                let tab = Tab::open(
                    self.live_conn(),
                    self.sup_config.clone(),
                    self.engine_config.clone(),
                    &budget,
                )
                .await?;
                self.set().push_current(tab.clone());
                if let Some(url) = url {
                    match self
                        .navigate_in(&tab, url, &budget, "browser_tabs new")
                        .await
                    {
                        Ok(r) => loaded = Some(r),
                        Err(mut e) => {
                            e.message = format!(
                                "{}; the new tab {} is open and current",
                                e.message,
                                tab.target_id.as_str()
                            );
                            return Err(e);
                        }
                    }
                }
            }
            TabsAction::Select | TabsAction::Close => {
                let Some(id) = req.tab_id.clone() else {
                    return Err(ToolError::invalid("tab_id", "select and close need tab_id")
                        .next("call browser_tabs to list tab ids"));
                };
                let ours = self
                    .set()
                    .tabs
                    .iter()
                    .position(|t| t.target_id.as_str() == id);
                let popup = ours.is_none() && self.popup_ids().iter().any(|p| p.as_str() == id);
                if ours.is_none() && !popup {
                    return Err(
                        ToolError::new(ErrorCode::UnknownTab, format!("no tab {id:?}"))
                            .next("call browser_tabs to list tab ids"),
                    );
                }
                if req.action == TabsAction::Select {
                    if popup {
                        let tab = Tab::attach(
                            self.live_conn(),
                            TargetId::new(&id),
                            self.sup_config.clone(),
                            self.engine_config.clone(),
                            &budget,
                        )
                        .await?;
                        self.set().push_current(tab);
                    } else {
                        let mut s = self.set();
                        if let Some(t) = s.tabs.iter().find(|t| t.target_id.as_str() == id) {
                            s.current = t.clone();
                        }
                    }
                } else {
                    self.close_tab(&id, &budget).await?;
                }
            }
        }
        let (status, dialog, note) = match loaded {
            Some(r) => (Some(r.status), r.dialog, r.note),
            None => (None, None, None),
        };
        Ok(TabsResponse {
            tabs: self.list_tabs(&budget).await,
            status,
            dialog,
            note,
        })
    }

    fn popup_ids(&self) -> Vec<TargetId> {
        let tabs = self.set().tabs.clone();
        tabs.iter()
            .flat_map(|t| {
                t.sup
                    .snapshot()
                    .popups
                    .iter()
                    .map(|p| p.target_id.clone())
                    .collect::<Vec<_>>()
            })
            .collect()
    }

    async fn close_tab(&self, id: &str, budget: &Budget) -> std::result::Result<(), ToolError> {
        let _ = self
            .live_conn()
            .browser()
            .call(
                "Target.closeTarget",
                json!({"targetId": id}),
                budget.clone(),
            )
            .await;
        let removed = {
            let mut s = self.set();
            let pos = s.tabs.iter().position(|t| t.target_id.as_str() == id);
            let removed = pos.map(|i| s.tabs.remove(i));
            if s.current.target_id.as_str() == id {
                if let Some(next) = s.tabs.first().cloned() {
                    s.current = next;
                }
            }
            removed
        };
        if let Some(t) = removed {
            t.shutdown(budget).await;
        }
        if self.set().tabs.is_empty() {
            let tab = Tab::open(
                self.live_conn(),
                self.sup_config.clone(),
                self.engine_config.clone(),
                budget,
            )
            .await?;
            self.set().push_current(tab);
        }
        Ok(())
    }

    async fn list_tabs(&self, budget: &Budget) -> Vec<TabView> {
        // A `new` whose page took most of the budget still lists the tabs.
        let budget = if budget.remaining() < INFO_BUDGET {
            Budget::new(INFO_BUDGET)
        } else {
            budget.clone()
        };
        let infos: HashMap<String, (String, String)> = self
            .live_conn()
            .browser()
            .call("Target.getTargets", json!({}), budget)
            .await
            .ok()
            .and_then(|v| {
                v["targetInfos"].as_array().map(|a| {
                    a.iter()
                        .filter_map(|t| {
                            Some((
                                t["targetId"].as_str()?.to_string(),
                                (
                                    t["url"].as_str().unwrap_or_default().to_string(),
                                    t["title"].as_str().unwrap_or_default().to_string(),
                                ),
                            ))
                        })
                        .collect()
                })
            })
            .unwrap_or_default();
        let (tabs, current) = {
            let s = self.set();
            (s.tabs.clone(), s.current.target_id.clone())
        };
        let mut out: Vec<TabView> = Vec::new();
        for t in &tabs {
            let (url, title) = infos
                .get(t.target_id.as_str())
                .cloned()
                .unwrap_or_else(|| (t.main_url(), String::new()));
            out.push(TabView {
                tab_id: t.target_id.as_str().to_string(),
                url,
                title,
                current: t.target_id == current,
            });
        }
        for t in &tabs {
            for p in &t.sup.snapshot().popups {
                if out.iter().any(|o| o.tab_id == p.target_id.as_str()) {
                    continue;
                }
                let (url, title) = infos
                    .get(p.target_id.as_str())
                    .cloned()
                    .unwrap_or_else(|| (p.url.clone(), String::new()));
                out.push(TabView {
                    tab_id: p.target_id.as_str().to_string(),
                    url,
                    title,
                    current: false,
                });
            }
        }
        out
    }
}
