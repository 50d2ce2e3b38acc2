//! `browser_navigate`: `Page.navigate`, then the load of the document it
//! committed (`LoadWatch`), a readiness probe at the deadline (`Probe`), and
//! `Page.stopLoading` for a navigation given up before its commit
//! (`StopIfDropped`). `browser_tabs new` with a `url` loads it here too.

use super::url::{check_url, maybe_same_site};
use super::{budget_of, cleanup_grace, Tools, INFO_BUDGET};
use crate::error::{inactive_error, map_transport, ErrorCode, ToolError};
use crate::tab::{Raced, Tab};
use crate::types::*;
use cdp_transport::Budget;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// Bound on `Page.stopLoading` after a navigation gave up before its commit
/// (its own bound: the call's budget is spent by then).
const STOP_BUDGET: Duration = Duration::from_secs(2);

/// How long the page of a tab may take to answer a trivial evaluate before
/// a same-site navigation away from it stops its running script (at most a
/// quarter of the call's budget; the check and the stop take at most half).
const FREE_RENDERER_WAIT: Duration = Duration::from_millis(300);

/// The `note` of a navigation that first stopped the page's own script.
const STOPPED_NOTE: &str = "the page being left was running a script that kept its renderer busy (a same-site navigation commits in that renderer, so it could not start): the script was stopped (Runtime.terminateExecution)";

/// Bound on a navigation's readiness probe (`document.readyState`).
const PROBE_BUDGET: Duration = Duration::from_secs(4);
/// A readiness probe not answered this long after it was sent counts as a
/// busy renderer.
const MIN_BUSY: Duration = Duration::from_millis(250);

/// Sends `Page.stopLoading` in the background when dropped while armed:
/// a navigation call dropped before its navigation committed must not leave
/// the tab holding every later command (see [`Tools::navigate`]).
struct StopIfDropped(Option<cdp_transport::Session>);

impl Drop for StopIfDropped {
    fn drop(&mut self) {
        let Some(page) = self.0.take() else {
            return;
        };
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                let r = page
                    .call("Page.stopLoading", json!({}), Budget::new(STOP_BUDGET))
                    .await;
                tracing::debug!(
                    ok = r.is_ok(),
                    "navigate dropped before the commit: Page.stopLoading sent"
                );
            });
        }
    }
}

/// True when `title` is Chromium's stand-in for a page without a title:
/// the URL itself, or its host and path (`127.0.0.1:8765/p.html`).
fn is_url_as_title(title: &str, url: &str) -> bool {
    title.is_empty()
        || title == url
        || (url.ends_with(title) && (title.contains('/') || title.contains(':')))
}

/// True when the events already buffered in `events` hold a
/// `beforeunload` dialog (the navigation's abort was the page's answer).
fn saw_beforeunload(events: &mut cdp_transport::EventStream) -> bool {
    let mut seen = false;
    while let Some(ev) = events.try_recv() {
        match ev {
            Ok(ev) => {
                seen |= ev.method == "Page.javascriptDialogOpening"
                    && ev.str_param("type") == Some("beforeunload");
            }
            // Events were dropped: one of them may have been the dialog.
            Err(cdp_transport::RecvError::Lagged(_)) => seen = true,
            Err(_) => break,
        }
    }
    seen
}

/// How a navigation's wait for its load event ended.
enum LoadEnd {
    Loaded,
    Lagged,
    Ended(String),
    Cancelled,
    Deadline,
}

/// The events of one navigation, as [`Tools::navigate`] reads them: the
/// load event counts only once the main frame committed the navigation's
/// own document (`Page.frameNavigated` with its `loaderId`, answered by
/// `Page.navigate`); a later main-frame commit (a client redirect) carries
/// on from there. Events of the page before (a load still in flight) are
/// ignored.
#[derive(Debug)]
struct LoadWatch {
    loader: String,
    /// The navigation's own document committed.
    ours: bool,
    /// URL of the latest main-frame document committed since (fragment included).
    committed_url: Option<String>,
    /// DOMContentLoaded fired for that document.
    dom_ready: bool,
}

impl LoadWatch {
    fn new(loader: &str) -> Self {
        Self {
            loader: loader.to_string(),
            ours: false,
            committed_url: None,
            dom_ready: false,
        }
    }

    /// Takes one page-session event; true when the load event of the
    /// navigation's document (or a later main-frame one) fired.
    fn on_event(&mut self, ev: &cdp_transport::Event) -> bool {
        match ev.method.as_str() {
            "Page.frameNavigated" => {
                let f = &ev.params["frame"];
                if f.get("parentId").and_then(Value::as_str).is_some() {
                    return false;
                }
                if !self.ours && f["loaderId"].as_str() == Some(self.loader.as_str()) {
                    self.ours = true;
                }
                if self.ours {
                    let url = f["url"].as_str().unwrap_or_default();
                    let fragment = f["urlFragment"].as_str().unwrap_or_default();
                    self.committed_url = Some(format!("{url}{fragment}"));
                    self.dom_ready = false;
                }
                false
            }
            "Page.domContentEventFired" => {
                self.dom_ready |= self.ours;
                false
            }
            "Page.loadEventFired" => self.ours,
            _ => false,
        }
    }
}

/// How long before a navigation's deadline its readiness probe is sent:
/// a quarter of the budget, at most 1 s.
fn probe_lead(total: Duration) -> Duration {
    (total / 4).min(Duration::from_secs(1))
}

/// The `note` of a navigation whose document is ready but whose load event
/// did not fire within `ms`.
fn load_note(ms: u128) -> String {
    format!(
        "the load event did not fire within timeout_ms={ms}: the document is ready (DOMContentLoaded fired) but a subresource (an image, stylesheet, iframe, …) is still loading; which one is unknown"
    )
}

/// The readiness probe of a navigation (`document.readyState` on the page
/// session, [`PROBE_BUDGET`]): a renderer that answers is not busy in a
/// script. Aborted when dropped.
struct Probe {
    sent_at: tokio::time::Instant,
    task: tokio::task::JoinHandle<std::result::Result<Value, cdp_transport::Error>>,
}

impl Probe {
    fn send(page: &cdp_transport::Session) -> Probe {
        let page = page.clone();
        Probe {
            sent_at: tokio::time::Instant::now(),
            task: tokio::spawn(async move {
                page.call(
                    "Runtime.evaluate",
                    json!({"expression": "document.readyState", "returnByValue": true}),
                    Budget::new(PROBE_BUDGET),
                )
                .await
            }),
        }
    }

    /// The probe's answer, waiting until `until` at most (an answer already
    /// in is taken even when `until` has passed); `None` when it has not
    /// answered by then (or its task failed). Call it again only after `None`.
    async fn wait_until(
        &mut self,
        until: tokio::time::Instant,
    ) -> Option<std::result::Result<Value, cdp_transport::Error>> {
        match tokio::time::timeout_at(until, &mut self.task).await {
            Ok(Ok(r)) => Some(r),
            Ok(Err(_)) | Err(_) => None,
        }
    }
}

impl Drop for Probe {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Tools {
    /// `browser_navigate`: `Page.navigate` on the supervisor's page session,
    /// then the load event of the document that navigation committed, raced
    /// against a dialog opening.
    ///
    /// * The URL is checked first: `javascript:` URLs are refused (they
    ///   would run script, which is `browser_evaluate`'s job, and bypass
    ///   `--no-evaluate`); with evaluate disabled so are `data:`, `blob:`
    ///   and `filesystem:` URLs (the caller writes that document, so its
    ///   scripts are script of the agent's choosing).
    /// * A dialog pending under `must_respond` is `dialog_pending`; one that
    ///   opens during the call is `status: "dialog_opened"`.
    /// * `Page.navigate` answers when the navigation commits. When the
    ///   budget ends (or the call is dropped) before that, `Page.stopLoading`
    ///   is sent (its acknowledgement waited for `timeout_ms`/20, 25–600 ms):
    ///   until a pending navigation ends,
    ///   Chromium holds every renderer-bound command of the tab, so without
    ///   it every later call would wait out its budget (found against a
    ///   server that accepts and never answers). The tab stays on its
    ///   previous page, and the `timeout` error says so.
    /// * A `Page.navigate` that Chromium aborts at once (`net::ERR_ABORTED`)
    ///   because another commit of the main frame was still in flight is
    ///   sent once more (not a download, not one a `beforeunload` ended).
    /// * Only the load event of the document this navigation committed
    ///   counts (its `loaderId` in `Page.frameNavigated`, or a main-frame
    ///   commit after it such as a client redirect): a load event of the
    ///   page before, still in flight, is ignored, and the URL and title
    ///   reported are read after that load and belong to that document.
    /// * Before a same-site navigation (the same scheme and registrable
    ///   domain, as far as a guess without the public-suffix list goes) the
    ///   page being left must answer a trivial evaluate within 300 ms (at
    ///   most a quarter of the budget); one that does not is running a
    ///   script, which is stopped (`Runtime.terminateExecution`, settled)
    ///   before `Page.navigate`, and the result's `note` says so. Chromium
    ///   commits such a navigation in that page's renderer and holds every
    ///   command of the tab behind the commit, so a spinning script would
    ///   leave the tab answering nothing.
    /// * When the load event has not fired by the deadline, the page is
    ///   probed (`document.readyState`, sent a quarter of the budget, at
    ///   most 1 s, before the deadline): a ready document (DOMContentLoaded
    ///   fired) whose load waits on a subresource is `status: "loaded"` with
    ///   a `note`; a document still parsing is a `timeout` saying so; a page
    ///   that did not answer the probe is busy in a script:
    ///   `Runtime.terminateExecution` is sent, and the `timeout` error says
    ///   a script was stopped only when the probe then came back (waited
    ///   for `timeout_ms`/20, 25–600 ms, past the deadline).
    ///
    /// # Errors
    /// `invalid_argument`, `dialog_pending`, `navigation_failed`, `timeout`,
    /// `browser_closed`, `target_crashed`.
    ///
    /// # Cancel safety
    /// Cancel safe: dropped before the navigation committed, it sends
    /// `Page.stopLoading` in the background; after, the page keeps loading.
    pub async fn navigate(
        &self,
        req: NavigateRequest,
    ) -> std::result::Result<NavigateResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let url = req.url.trim();
        check_url(url, self.engine_config.evaluate_enabled, "browser_navigate")?;
        let tab = self.tab();
        self.navigate_in(&tab, url, &budget, "browser_navigate")
            .await
    }

    /// The navigation of `browser_navigate` (and `browser_tabs new`) in
    /// `tab`, for an already checked `url`; `tool` names the caller in errors.
    pub(super) async fn navigate_in(
        &self,
        tab: &Arc<Tab>,
        url: &str,
        budget: &Budget,
        tool: &str,
    ) -> std::result::Result<NavigateResponse, ToolError> {
        let view = tab.sup.snapshot();
        if let Some(r) = tab.sup.connection().closed_reason() {
            return Err(ToolError::browser_closed(r));
        }
        // A pending dialog (must_respond) blocks the page: navigating would
        // report that old dialog as if the new page had opened it.
        if !tab.auto_policy() {
            if let Some(d) = tab.first_pending() {
                let id = d.id.clone();
                let mut e = ToolError::dialog_pending(d, tool);
                e.next_step = Some(format!(
                    "answer it with browser_dialog {{\"action\":\"accept\"|\"dismiss\", \"dialog_id\":\"{id}\"}}, then retry {tool} (or run with --dialog-policy auto_dismiss, or open a new tab with browser_tabs)"
                ));
                return Err(e);
            }
        }
        // A crashed tab is recovered by navigating; any other inactive state
        // (tab closed, target destroyed) is final for this tab.
        if !view.active && !view.reason.as_deref().is_some_and(|r| r.contains("crash")) {
            return Err(inactive_error(view.reason.as_deref()));
        }
        let prev_url = tab.main_url();
        let stopped = Self::free_renderer(tab, &prev_url, url, budget).await;
        let r = self.navigate_free(tab, url, &prev_url, budget, tool).await;
        match r {
            Ok(mut n) if stopped => {
                n.note = Some(match n.note.take() {
                    Some(more) => format!("{STOPPED_NOTE}; {more}"),
                    None => STOPPED_NOTE.into(),
                });
                Ok(n)
            }
            r => r,
        }
    }

    /// Before a navigation from `prev_url` to `url` that may be same-site:
    /// makes sure the page's renderer runs no script of its own
    /// ([`evaluate::Engine::stop_page_script`]). Chromium commits a
    /// same-site navigation in the renderer of the page it leaves, and
    /// once the navigation has started it holds every command of the tab's
    /// sessions (even `Runtime.terminateExecution`) behind the commit,
    /// which a spinning script never lets happen: the tab would not answer
    /// again. True when a script was stopped. Costs one round trip to the
    /// renderer; none for a fresh tab or a navigation to another site.
    async fn free_renderer(tab: &Tab, prev_url: &str, url: &str, budget: &Budget) -> bool {
        if prev_url.is_empty() || prev_url.starts_with("about:") || !maybe_same_site(prev_url, url)
        {
            return false;
        }
        // At most half the budget: the navigation keeps the other half.
        let within = budget.remaining() / 2;
        let found = tab
            .engine()
            .stop_page_script(
                &tab.sup.page_session(),
                FREE_RENDERER_WAIT.min(within / 2),
                within,
            )
            .await;
        tracing::debug!(
            ?found,
            prev_url,
            url,
            "navigate: the page's renderer before the navigation"
        );
        found == evaluate::PageScript::Stopped
    }

    /// [`Tools::navigate_in`] once the page's renderer is free.
    async fn navigate_free(
        &self,
        tab: &Arc<Tab>,
        url: &str,
        prev_url: &str,
        budget: &Budget,
        tool: &str,
    ) -> std::result::Result<NavigateResponse, ToolError> {
        let opened = |d| NavigateResponse {
            url: url.into(),
            status: "dialog_opened".into(),
            title: None,
            dialog: Some(d),
            note: None,
        };
        let page = tab.sup.page_session();
        // Subscribed before the navigation is sent, so its commit and load
        // events cannot be missed.
        let mut events;
        let mut retried = false;
        let reply = loop {
            events = page.subscribe();
            let mut stop = StopIfDropped(Some(page.clone()));
            let nav = page.call("Page.navigate", json!({"url": url}), budget.clone());
            let raced = tab.race_dialog(nav).await;
            // Answered, failed, or a dialog (a beforeunload holds the
            // navigation until it is answered): nothing to stop from here on.
            stop.0 = None;
            let reply = match raced {
                Raced::Dialog(d) => return Ok(opened(d)),
                Raced::Done(Ok(v)) => v,
                Raced::Done(Err(e))
                    if e.is_timeout() || matches!(e, cdp_transport::Error::Cancelled { .. }) =>
                {
                    return Err(Self::stop_uncommitted(tab, url, prev_url, budget, tool).await);
                }
                Raced::Done(Err(e @ cdp_transport::Error::Protocol { .. })) => {
                    return Err(ToolError::invalid(
                        "url",
                        format!("Chromium refused to navigate to {url:?}: {e}"),
                    )
                    .next(
                        "pass an absolute URL such as https://example.com/ or file:///path/page.html",
                    ));
                }
                Raced::Done(Err(e)) => return Err(tab.crashed_or(map_transport(&e, tool))),
            };
            // Chromium 156 aborts a navigation sent while the main frame is
            // still finishing the commit of another document (right after a
            // beforeunload was accepted, a link clicked, a script
            // navigated): `errorText: net::ERR_ABORTED` within milliseconds,
            // seen in ~half of the runs of "accept a beforeunload, navigate at
            // once". Sent again once it goes through. Not retried: a
            // download, or an abort by a beforeunload the policy dismissed
            // (sending again would only ask the page again).
            let aborted = reply["errorText"].as_str() == Some("net::ERR_ABORTED")
                && reply["isDownload"].as_bool() != Some(true);
            if aborted && !retried && !budget.is_expired() && !saw_beforeunload(&mut events) {
                tracing::debug!(
                    url,
                    "navigate: Page.navigate aborted by a commit in flight; sending it again"
                );
                retried = true;
                continue;
            }
            break reply;
        };
        if let Some(err) = reply["errorText"].as_str().filter(|s| !s.is_empty()) {
            return Err(ToolError::new(ErrorCode::NavigationFailed, format!(
                "Chromium could not load {url}: {err}{}",
                if retried { " (sent twice: the first attempt was aborted too)" } else { "" }
            ))
                .next(format!("check the URL (scheme, host, port) and that the server is up, then call {tool} again")));
        }
        // No loaderId: a same-document navigation (fragment); nothing loads.
        let Some(loader) = reply["loaderId"].as_str().filter(|l| !l.is_empty()) else {
            return Ok(Self::loaded_response(tab, url, None, None, budget).await);
        };
        let mut watch = LoadWatch::new(loader);
        let mut probe: Option<Probe> = None;
        let deadline = budget.deadline();
        let probe_at = deadline - probe_lead(budget.total());
        let waiting = async {
            loop {
                tokio::select! {
                    ev = events.recv() => match ev {
                        Ok(ev) => {
                            if watch.on_event(&ev) {
                                return LoadEnd::Loaded;
                            }
                        }
                        // A page that floods events can make this bounded
                        // stream lag past its load event; the load is then
                        // taken as done rather than waited out to the deadline
                        // (the agent's next snapshot shows the page).
                        Err(cdp_transport::RecvError::Lagged(n)) => {
                            tracing::debug!(n, "navigate: event stream lagged; not waiting for the load event");
                            return LoadEnd::Lagged;
                        }
                        Err(e) => return LoadEnd::Ended(format!("{e:?}")),
                    },
                    _ = tokio::time::sleep_until(probe_at), if probe.is_none() => {
                        probe = Some(Probe::send(&page));
                    }
                    _ = tokio::time::sleep_until(deadline) => return LoadEnd::Deadline,
                    _ = budget.cancel_token().cancelled() => return LoadEnd::Cancelled,
                }
            }
        };
        let end = match tab.race_dialog(waiting).await {
            Raced::Dialog(d) => return Ok(opened(d)),
            Raced::Done(end) => end,
        };
        match end {
            LoadEnd::Loaded | LoadEnd::Lagged => {
                Ok(Self::loaded_response(tab, url, watch.committed_url, None, budget).await)
            }
            LoadEnd::Ended(e) => Err(tab.crashed_or(ToolError::browser_closed(format!(
                "the tab's events ended: {e}"
            )))),
            LoadEnd::Cancelled => Err(ToolError::internal(format!("{tool} was cancelled"))),
            LoadEnd::Deadline => {
                let probe = probe.unwrap_or_else(|| Probe::send(&page));
                self.load_deadline(tab, url, watch, probe, budget, tool)
                    .await
            }
        }
    }

    /// The error of a navigation that had not committed when its budget
    /// ended (or was cancelled): sends `Page.stopLoading` so the tab drops
    /// the pending navigation and answers again on its previous page.
    async fn stop_uncommitted(
        tab: &Tab,
        url: &str,
        prev_url: &str,
        budget: &Budget,
        tool: &str,
    ) -> ToolError {
        let page = tab.sup.page_session();
        let stopped = matches!(
            tokio::time::timeout(
                cleanup_grace(budget),
                page.call("Page.stopLoading", json!({}), Budget::new(STOP_BUDGET)),
            )
            .await,
            Ok(Ok(_))
        );
        let prev = if prev_url.is_empty() {
            "its previous page".to_string()
        } else {
            format!("its previous page {prev_url}")
        };
        let ms = budget.total().as_millis();
        let err = ToolError::new(
            ErrorCode::Timeout,
            if stopped {
                format!(
                    "{tool}: {url} sent no response within timeout_ms={ms}, so the page did not start loading; the navigation was stopped (Page.stopLoading) and the tab stays on {prev}, usable"
                )
            } else {
                format!(
                    "{tool}: the navigation to {url} did not start within timeout_ms={ms} (the server sent no response, or the browser connection is not answering); Page.stopLoading was sent but not acknowledged, so the tab may not answer until the navigation ends"
                )
            },
        )
        .next(format!(
            "check that the server at {url} answers, then call {tool} again with a larger timeout_ms (max 120000); browser_snapshot shows the tab's page"
        ));
        tab.crashed_or(err)
    }

    /// `status: "loaded"` with the URL and title of the document the
    /// navigation committed (`committed_url`, from its `Page.frameNavigated`):
    /// `Target.getTargetInfo` is read after that document's load, and its
    /// title is kept only when its URL is that document's (no script runs
    /// for either). Without a committed URL (a same-document navigation, a
    /// lagged event stream) the target's URL and title are used.
    async fn loaded_response(
        tab: &Tab,
        url: &str,
        committed_url: Option<String>,
        note: Option<String>,
        budget: &Budget,
    ) -> NavigateResponse {
        let b = if budget.remaining() > Duration::from_millis(50) {
            budget.child(INFO_BUDGET)
        } else {
            Budget::new(INFO_BUDGET)
        };
        let info = tab
            .sup
            .connection()
            .browser()
            .call(
                "Target.getTargetInfo",
                json!({"targetId": tab.target_id.as_str()}),
                b,
            )
            .await
            .ok();
        let info = info.as_ref().map(|v| &v["targetInfo"]);
        let info_url = info.and_then(|i| i["url"].as_str()).map(String::from);
        let info_title = info.and_then(|i| i["title"].as_str()).map(String::from);
        let (now_url, title) = match committed_url {
            // The target moved on since (another navigation): its title is
            // not this document's.
            Some(c) if info_url.as_deref() != Some(c.as_str()) => (c, None),
            Some(c) => (c, info_title),
            None => (info_url.unwrap_or_else(|| tab.main_url()), info_title),
        };
        // Chromium reports the URL as the title of a page without one.
        let title = title.filter(|t| !is_url_as_title(t, &now_url));
        NavigateResponse {
            url: if now_url.is_empty() {
                url.into()
            } else {
                now_url
            },
            status: "loaded".into(),
            title,
            dialog: None,
            note,
        }
    }

    /// The outcome of a navigation whose document committed but whose load
    /// event did not fire by the deadline, from the readiness probe (see
    /// [`Tools::navigate`]).
    async fn load_deadline(
        &self,
        tab: &Arc<Tab>,
        url: &str,
        watch: LoadWatch,
        mut probe: Probe,
        budget: &Budget,
        tool: &str,
    ) -> std::result::Result<NavigateResponse, ToolError> {
        let ms = budget.total().as_millis();
        let opened = |d| NavigateResponse {
            url: url.into(),
            status: "dialog_opened".into(),
            title: None,
            dialog: Some(d),
            note: None,
        };
        // A probe sent moments ago gets at least MIN_BUSY to answer.
        let answer = match probe.wait_until(probe.sent_at + MIN_BUSY).await {
            Some(a) => a,
            None => {
                // No answer for a while: the renderer is busy, in a page
                // script (`onload` spinning) or frozen by a dialog.
                if !tab.auto_policy() {
                    if let Some(d) = tab.first_pending() {
                        return Ok(opened(d));
                    }
                }
                let term = tab.engine().terminate(&tab.sup.page_session());
                let after = probe
                    .wait_until(tokio::time::Instant::now() + cleanup_grace(budget))
                    .await;
                let acked = term.acknowledged(Duration::ZERO).await;
                let freed = matches!(
                    after,
                    Some(Ok(_)) | Some(Err(cdp_transport::Error::Protocol { .. }))
                );
                if freed {
                    return Err(ToolError::new(
                        ErrorCode::Timeout,
                        format!(
                            "{tool}: {url} did not finish loading within timeout_ms={ms}: a page script still running kept the page busy, and it was stopped (Runtime.terminateExecution), so the tab is usable"
                        ),
                    )
                    .next("call browser_snapshot to see the page state (the script did not finish, so the page may be incomplete)"));
                }
                if !tab.auto_policy() {
                    if let Some(d) = tab.first_pending() {
                        return Ok(opened(d));
                    }
                }
                return Err(tab.crashed_or(
                    ToolError::new(
                        ErrorCode::Timeout,
                        format!(
                            "{tool}: {url} did not finish loading within timeout_ms={ms}, and the page does not answer (its renderer is busy or stalled); Runtime.terminateExecution was {}, but the page still did not answer",
                            if acked { "acknowledged" } else { "sent" }
                        ),
                    )
                    .next("call browser_snapshot; if calls keep timing out, open a new tab with browser_tabs"),
                ));
            }
        };
        let state = match &answer {
            Ok(v) => v["result"]["value"].as_str().map(String::from),
            Err(_) => None,
        };
        match state.as_deref() {
            // The load event fires right after readyState turns complete:
            // it came at the deadline.
            Some("complete") => {
                Ok(Self::loaded_response(tab, url, watch.committed_url, None, budget).await)
            }
            Some("interactive") => Ok(Self::loaded_response(tab, url, watch.committed_url, Some(load_note(ms)), budget).await),
            _ if watch.dom_ready => Ok(Self::loaded_response(tab, url, watch.committed_url, Some(load_note(ms)), budget).await),
            Some(_) => Err(ToolError::new(
                ErrorCode::Timeout,
                format!(
                    "{tool}: {url} did not finish loading within timeout_ms={ms}: its document is still being parsed (document.readyState is \"loading\"), most likely waiting for a script or stylesheet that has not arrived; no page script was running, and the page answers calls"
                ),
            )
            .next(format!("call browser_snapshot to see what has loaded, or call {tool} again with a larger timeout_ms (max 120000)"))),
            None => Err(tab.crashed_or(
                ToolError::new(
                    ErrorCode::Timeout,
                    format!(
                        "{tool}: {url} did not finish loading within timeout_ms={ms}, and its readiness could not be read ({})",
                        match &answer {
                            Err(e) => e.to_string(),
                            Ok(v) => format!("unexpected reply {v}"),
                        }
                    ),
                )
                .next(format!("call browser_snapshot to see the page state, or call {tool} again with a larger timeout_ms (max 120000)")),
            )),
        }
    }
}

#[cfg(test)]
mod tests;
