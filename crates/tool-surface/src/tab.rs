//! The tab driver behind the tools: one page target, its OOPIF sessions, its
//! dialogs, frames, console errors and refs.
//!
//! This is the narrow seam between the tools and the browser. It follows the
//! supervisor's rules (SPEC.md, seed 000): auto-attach with
//! `waitForDebuggerOnStart` repeated on every child session, every paused
//! target resumed within a bounded time, dialogs answered on the top-level
//! page session, a `swap` detach kept as a process move. Reads are cheap
//! snapshots of a small state guarded by a std mutex that is never held
//! across an `.await`.

use crate::error::{ErrorCode, ToolError};
use crate::types::*;
use cdp_transport::{Budget, Connection, Event, Session, SessionId, TargetId};
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::watch;

const RECENT_CAP: usize = 20;
const CONSOLE_CAP: usize = 50;
const FRAME_CAP: usize = 30;
const SETUP_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Clone)]
struct FrameRec {
    frame_id: String,
    parent: Option<String>,
    url: String,
    name: Option<String>,
    session: Option<Session>,
}

#[derive(Clone)]
pub(crate) struct RefRec {
    pub backend_node_id: i64,
    pub session: Session,
    pub generation: u64,
}

#[derive(Default)]
struct State {
    next_dialog: u64,
    pending: Vec<DialogView>,
    answered_by_agent: HashMap<String, ()>,
    recent: VecDeque<ClosedDialogView>,
    frames: Vec<FrameRec>,
    /// (session id or "" for the page) + frame id → default execution context id.
    contexts: HashMap<(String, String), i64>,
    console: VecDeque<ConsoleEntry>,
    console_total: usize,
    crashed: bool,
    load_seq: u64,
    generation: u64,
    refs: HashMap<String, RefRec>,
    ref_generation: u64,
}

/// One supervised page target.
pub(crate) struct Tab {
    pub conn: Connection,
    pub target_id: TargetId,
    pub page: Session,
    st: Arc<Mutex<State>>,
    changed: watch::Sender<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Tab {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn lock(st: &Mutex<State>) -> MutexGuard<'_, State> {
    st.lock().unwrap_or_else(|p| p.into_inner())
}

fn sid_key(s: Option<&SessionId>) -> String {
    s.map(|s| s.as_str().to_string()).unwrap_or_default()
}

/// Result of waiting for a dialog while something else runs.
pub(crate) enum Raced<T> {
    Done(T),
    Dialog(DialogView),
}

impl Tab {
    /// Attaches to `target_id` and starts watching it.
    pub async fn attach(
        conn: Connection,
        target_id: TargetId,
        config: crate::tools::ToolsConfig,
        budget: &Budget,
    ) -> Result<Arc<Tab>, ToolError> {
        let page = conn
            .attach(&target_id, budget.clone())
            .await
            .map_err(|e| map_transport(&e, "attach"))?;
        let st = Arc::new(Mutex::new(State::default()));
        let (changed, _) = watch::channel(0u64);
        let events = conn.subscribe_all();
        let attached = conn.attached_targets();
        let policy = Policy {
            name: config.dialog_policy.clone(),
            timeout: config.dialog_timeout,
        };
        let task = tokio::spawn(event_loop(
            conn.clone(),
            page.clone(),
            st.clone(),
            changed.clone(),
            events,
            attached,
            policy,
        ));
        let tab = Arc::new(Tab {
            conn,
            target_id,
            page: page.clone(),
            st,
            changed,
            task,
        });
        for m in ["Page.enable", "Runtime.enable"] {
            page.call(m, json!({}), budget.clone())
                .await
                .map_err(|e| map_transport(&e, m))?;
        }
        let _ = page
            .call(
                "Page.setLifecycleEventsEnabled",
                json!({"enabled": true}),
                budget.clone(),
            )
            .await;
        if let Ok(tree) = page
            .call("Page.getFrameTree", json!({}), budget.clone())
            .await
        {
            let mut s = lock(&tab.st);
            bootstrap_frames(&mut s, &tree["frameTree"], None);
        }
        page.call(
            "Target.setAutoAttach",
            json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
            budget.clone(),
        )
        .await
        .map_err(|e| map_transport(&e, "Target.setAutoAttach"))?;
        Ok(tab)
    }

    fn bump(&self) {
        self.changed.send_modify(|v| *v += 1);
    }

    pub fn pending(&self) -> Vec<DialogView> {
        lock(&self.st).pending.clone()
    }

    pub fn first_pending(&self) -> Option<DialogView> {
        lock(&self.st).pending.first().cloned()
    }

    /// `Err(dialog_pending)` when a dialog blocks the page.
    pub fn gate(&self, tool: &str) -> Result<(), ToolError> {
        if let Some(d) = self.first_pending() {
            return Err(ToolError::dialog_pending(d, tool));
        }
        if let Some(r) = self.conn.closed_reason() {
            return Err(ToolError::browser_closed(r));
        }
        if lock(&self.st).crashed {
            return Err(ToolError::crashed());
        }
        Ok(())
    }

    pub fn supervisor(&self) -> SupervisorView {
        if let Some(r) = self.conn.closed_reason() {
            return SupervisorView {
                active: false,
                reason: Some(format!("connection closed: {r}")),
            };
        }
        if lock(&self.st).crashed {
            return SupervisorView {
                active: false,
                reason: Some("target crashed".into()),
            };
        }
        SupervisorView {
            active: true,
            reason: None,
        }
    }

    pub fn recent(&self) -> Vec<ClosedDialogView> {
        lock(&self.st).recent.iter().cloned().collect()
    }

    pub fn console(&self) -> (Vec<ConsoleEntry>, usize) {
        let s = lock(&self.st);
        (s.console.iter().cloned().collect(), s.console_total)
    }

    pub fn main_url(&self) -> String {
        let s = lock(&self.st);
        s.frames
            .iter()
            .find(|f| f.parent.is_none())
            .map(|f| f.url.clone())
            .unwrap_or_default()
    }

    pub fn frame_tree(&self) -> FrameTreeView {
        let s = lock(&self.st);
        let mut budget = FRAME_CAP;
        let mut truncated = false;
        fn build(
            s: &State,
            id: &str,
            depth: u8,
            budget: &mut usize,
            truncated: &mut bool,
        ) -> Vec<FrameNode> {
            let mut out = Vec::new();
            for f in s.frames.iter().filter(|f| f.parent.as_deref() == Some(id)) {
                if *budget == 0 {
                    *truncated = true;
                    break;
                }
                *budget -= 1;
                let oopif = f.session.is_some();
                let d = depth + u8::from(oopif);
                let children = if d > 2 {
                    *truncated = true;
                    Vec::new()
                } else {
                    build(s, &f.frame_id, d, budget, truncated)
                };
                out.push(FrameNode {
                    frame_id: f.frame_id.clone(),
                    url: f.url.clone(),
                    name: f.name.clone(),
                    oopif,
                    children,
                });
            }
            out
        }
        let top = match s.frames.iter().find(|f| f.parent.is_none()) {
            Some(t) => FrameNode {
                frame_id: t.frame_id.clone(),
                url: t.url.clone(),
                name: t.name.clone(),
                oopif: false,
                children: build(&s, &t.frame_id, 0, &mut budget, &mut truncated),
            },
            None => FrameNode {
                frame_id: self.target_id.as_str().to_string(),
                url: String::new(),
                name: None,
                oopif: false,
                children: vec![],
            },
        };
        FrameTreeView { top, truncated }
    }

    /// The session that serves `frame_id` and whether the frame is an OOPIF root.
    pub fn frame_session(&self, frame_id: &str) -> Result<(Session, bool), ToolError> {
        let s = lock(&self.st);
        let Some(f) = s.frames.iter().find(|f| f.frame_id == frame_id) else {
            return Err(ToolError::new(
                ErrorCode::UnknownFrame,
                format!("no frame {frame_id:?} in this tab"),
            )
            .next("call browser_snapshot and use a frame_id from its frame_tree"));
        };
        if let Some(sess) = &f.session {
            return Ok((sess.clone(), true));
        }
        // A same-process frame lives on the session of its nearest OOPIF ancestor (or the page).
        let mut cur = f.parent.clone();
        while let Some(p) = cur {
            match s.frames.iter().find(|x| x.frame_id == p) {
                Some(pf) if pf.session.is_some() => {
                    return Ok((
                        pf.session.clone().unwrap_or_else(|| self.page.clone()),
                        false,
                    ))
                }
                Some(pf) => cur = pf.parent.clone(),
                None => break,
            }
        }
        Ok((self.page.clone(), false))
    }

    pub fn context_for(&self, session: &Session, frame_id: &str) -> Option<i64> {
        lock(&self.st)
            .contexts
            .get(&(sid_key(session.id()), frame_id.to_string()))
            .copied()
    }

    pub fn is_main_frame(&self, frame_id: &str) -> bool {
        lock(&self.st)
            .frames
            .iter()
            .any(|f| f.parent.is_none() && f.frame_id == frame_id)
    }

    /// Frames to read AX trees from: (frame id, session, is OOPIF root), in tree order.
    pub fn frames_for_ax(&self) -> Vec<(String, Option<String>, Session, bool)> {
        let s = lock(&self.st);
        s.frames
            .iter()
            .map(|f| {
                (
                    f.frame_id.clone(),
                    f.parent.clone(),
                    f.session.clone().unwrap_or_else(|| self.page.clone()),
                    f.session.is_some(),
                )
            })
            .collect()
    }

    pub fn store_refs(&self, refs: HashMap<String, RefRec>) {
        let mut s = lock(&self.st);
        s.refs = refs;
        s.ref_generation = s.generation;
    }

    pub fn generation(&self) -> u64 {
        lock(&self.st).generation
    }

    pub fn lookup_ref(&self, r: &str) -> Result<RefRec, ToolError> {
        let s = lock(&self.st);
        match s.refs.get(r) {
            None => Err(ToolError::new(
                ErrorCode::UnknownRef,
                format!("no ref {r:?} in the latest snapshot"),
            )
            .next("call browser_snapshot and use a ref from it (refs look like e3)")),
            Some(rec) if rec.generation != s.generation => Err(ToolError::new(
                ErrorCode::StaleRef,
                format!("ref {r:?} belongs to a document that has since navigated"),
            )
            .next("call browser_snapshot for fresh refs")),
            Some(rec) => Ok(rec.clone()),
        }
    }

    /// Runs `fut`, but returns as soon as a dialog is pending.
    pub async fn race_dialog<T>(&self, fut: impl std::future::Future<Output = T>) -> Raced<T> {
        let mut rx = self.changed.subscribe();
        tokio::pin!(fut);
        loop {
            if let Some(d) = self.first_pending() {
                return Raced::Dialog(d);
            }
            tokio::select! {
                biased;
                v = &mut fut => return Raced::Done(v),
                r = rx.changed() => if r.is_err() { return Raced::Done(fut.await) },
            }
        }
    }

    pub fn load_seq(&self) -> u64 {
        lock(&self.st).load_seq
    }

    /// Waits until a load after `after`, a pending dialog, or the deadline.
    pub async fn wait_load_or_dialog(
        &self,
        after: u64,
        budget: &Budget,
    ) -> Result<Option<DialogView>, ToolError> {
        let mut rx = self.changed.subscribe();
        loop {
            if let Some(d) = self.first_pending() {
                return Ok(Some(d));
            }
            if self.load_seq() > after {
                return Ok(None);
            }
            if let Some(r) = self.conn.closed_reason() {
                return Err(ToolError::browser_closed(r));
            }
            tokio::select! {
                r = rx.changed() => if r.is_err() { return Err(ToolError::internal("tab watcher stopped")) },
                _ = tokio::time::sleep(budget.remaining()) => return Err(ToolError::timeout("waiting for the page to load", budget.total().as_millis() as u64)),
                _ = budget.cancel_token().cancelled() => return Err(ToolError::internal("cancelled")),
            }
        }
    }

    /// Answers a pending dialog on the top-level page session.
    pub async fn respond(
        &self,
        req: &DialogRequest,
        budget: &Budget,
    ) -> Result<DialogView, ToolError> {
        let dialog = {
            let s = lock(&self.st);
            match &req.dialog_id {
                Some(id) => s
                    .pending
                    .iter()
                    .find(|d| &d.id == id)
                    .cloned()
                    .ok_or_else(|| {
                        let ids: Vec<_> = s.pending.iter().map(|d| d.id.clone()).collect();
                        ToolError::new(
                            ErrorCode::NoDialog,
                            format!("dialog {id:?} is not pending (pending: {ids:?})"),
                        )
                        .next("call browser_snapshot to see pending_dialogs")
                    })?,
                None if s.pending.len() > 1 => {
                    let mut e = ToolError::new(
                        ErrorCode::AmbiguousDialog,
                        format!(
                            "{} dialogs are pending; say which one with dialog_id",
                            s.pending.len()
                        ),
                    )
                    .next("call browser_dialog again with dialog_id set to one of candidates[].id");
                    e.candidates = s.pending.clone();
                    return Err(e);
                }
                None => s.pending.first().cloned().ok_or_else(|| {
                    ToolError::new(ErrorCode::NoDialog, "no dialog is pending")
                        .next("call browser_snapshot; recent_dialogs shows dialogs closed already")
                })?,
            }
        };
        lock(&self.st)
            .answered_by_agent
            .insert(dialog.id.clone(), ());
        let accept = req.action == DialogAction::Accept;
        let mut params = json!({"accept": accept});
        if accept && dialog.kind == "prompt" {
            params["promptText"] = json!(req
                .prompt_text
                .clone()
                .or_else(|| dialog.default_prompt.clone())
                .unwrap_or_default());
        }
        let r = self
            .page
            .call(
                "Page.handleJavaScriptDialog",
                params.clone(),
                budget.clone(),
            )
            .await;
        if let Err(e) = r {
            lock(&self.st).answered_by_agent.remove(&dialog.id);
            // The dialog may have closed meanwhile (navigation, another client).
            if e.protocol_message().is_some() {
                let mut s = lock(&self.st);
                s.pending.retain(|d| d.id != dialog.id);
                return Err(ToolError::new(
                    ErrorCode::NoDialog,
                    format!("dialog {} was already closed: {e}", dialog.id),
                )
                .next("call browser_snapshot to see the page state"));
            }
            return Err(map_transport(&e, "Page.handleJavaScriptDialog"));
        }
        // Record at once; javascriptDialogClosed will only confirm it.
        {
            let mut s = lock(&self.st);
            if let Some(pos) = s.pending.iter().position(|d| d.id == dialog.id) {
                let d = s.pending.remove(pos);
                let user_input = if accept && d.kind == "prompt" {
                    params["promptText"].as_str().map(String::from)
                } else {
                    None
                };
                push_recent(&mut s, &d, "agent", Some(accept), user_input);
            }
        }
        self.bump();
        Ok(dialog)
    }
}

fn push_recent(
    s: &mut State,
    d: &DialogView,
    by: &str,
    accepted: Option<bool>,
    user_input: Option<String>,
) {
    s.recent.push_back(ClosedDialogView {
        id: d.id.clone(),
        kind: d.kind.clone(),
        message: d.message.clone(),
        closed_by: by.into(),
        accepted,
        user_input,
    });
    while s.recent.len() > RECENT_CAP {
        s.recent.pop_front();
    }
}

fn bootstrap_frames(s: &mut State, tree: &Value, parent: Option<String>) {
    let f = &tree["frame"];
    let Some(id) = f["id"].as_str() else { return };
    upsert_frame(s, id, parent, f["url"].as_str(), f["name"].as_str());
    if let Some(children) = tree["childFrames"].as_array() {
        for c in children {
            bootstrap_frames(s, c, Some(id.to_string()));
        }
    }
}

fn upsert_frame(
    s: &mut State,
    id: &str,
    parent: Option<String>,
    url: Option<&str>,
    name: Option<&str>,
) {
    let name = name.filter(|n| !n.is_empty()).map(String::from);
    if let Some(f) = s.frames.iter_mut().find(|f| f.frame_id == id) {
        if parent.is_some() {
            f.parent = parent;
        }
        if let Some(u) = url {
            f.url = u.to_string();
        }
        if name.is_some() {
            f.name = name;
        }
    } else {
        s.frames.push(FrameRec {
            frame_id: id.into(),
            parent,
            url: url.unwrap_or_default().into(),
            name,
            session: None,
        });
    }
}

fn remove_frame(s: &mut State, id: &str) {
    let mut gone = vec![id.to_string()];
    let mut i = 0;
    while i < gone.len() {
        let cur = gone[i].clone();
        gone.extend(
            s.frames
                .iter()
                .filter(|f| f.parent.as_deref() == Some(&cur))
                .map(|f| f.frame_id.clone()),
        );
        i += 1;
    }
    s.frames.retain(|f| !gone.contains(&f.frame_id));
}

fn our_session(s: &State, page: &Session, sid: Option<&SessionId>) -> bool {
    let Some(sid) = sid else { return false };
    page.id() == Some(sid)
        || s.frames
            .iter()
            .any(|f| f.session.as_ref().and_then(|x| x.id()) == Some(sid))
}

struct Policy {
    name: String,
    timeout: Duration,
}

/// Applies the dialog policy to a dialog that just opened (seed 000): auto
/// answers at once, `must_respond` arms the watchdog.
fn apply_policy(
    page: &Session,
    st: &Arc<Mutex<State>>,
    changed: &watch::Sender<u64>,
    policy: &Policy,
    d: DialogView,
) {
    let (accept, by, delay) = match policy.name.as_str() {
        "auto_accept" => (true, "auto_policy", Duration::ZERO),
        "auto_dismiss" => (false, "auto_policy", Duration::ZERO),
        _ => (false, "watchdog", policy.timeout),
    };
    let page = page.clone();
    let st = st.clone();
    let changed = changed.clone();
    tokio::spawn(async move {
        tokio::time::sleep(delay).await;
        let still = lock(&st).pending.iter().any(|p| p.id == d.id);
        if !still {
            return;
        }
        let mut params = json!({"accept": accept});
        if accept && d.kind == "prompt" {
            params["promptText"] = json!(d.default_prompt.clone().unwrap_or_default());
        }
        if page
            .call(
                "Page.handleJavaScriptDialog",
                params,
                Budget::new(SETUP_TIMEOUT),
            )
            .await
            .is_ok()
        {
            let mut s = lock(&st);
            if let Some(pos) = s.pending.iter().position(|p| p.id == d.id) {
                let d = s.pending.remove(pos);
                push_recent(&mut s, &d, by, Some(accept), None);
            }
            drop(s);
            tracing::info!(id = %d.id, by, "dialog answered by policy");
            changed.send_modify(|v| *v += 1);
        }
    });
}

async fn event_loop(
    conn: Connection,
    page: Session,
    st: Arc<Mutex<State>>,
    changed: watch::Sender<u64>,
    mut events: cdp_transport::EventStream,
    mut attached: tokio::sync::broadcast::Receiver<cdp_transport::AttachedTarget>,
    policy: Policy,
) {
    use tokio::sync::broadcast::error::RecvError as BRecv;
    loop {
        tokio::select! {
            ev = events.recv() => match ev {
                Ok(ev) => {
                    if on_event(&page, &st, &ev) {
                        if ev.method == "Page.javascriptDialogOpening" {
                            let last = lock(&st).pending.last().cloned();
                            if let Some(d) = last {
                                apply_policy(&page, &st, &changed, &policy, d);
                            }
                        }
                        changed.send_modify(|v| *v += 1);
                    }
                }
                Err(cdp_transport::RecvError::Lagged(n)) => tracing::warn!(n, "tab event stream lagged"),
                Err(_) => { changed.send_modify(|v| *v += 1); return; }
            },
            at = attached.recv() => match at {
                Ok(at) => on_attached(&conn, &page, &st, &changed, at),
                Err(BRecv::Lagged(n)) => tracing::warn!(n, "attached-target stream lagged"),
                Err(BRecv::Closed) => {}
            },
        }
    }
}

fn on_attached(
    conn: &Connection,
    page: &Session,
    st: &Arc<Mutex<State>>,
    changed: &watch::Sender<u64>,
    at: cdp_transport::AttachedTarget,
) {
    let ours = {
        let s = lock(st);
        at.parent_session_id
            .as_ref()
            .is_some_and(|p| our_session(&s, page, Some(p)))
    };
    if !ours {
        return;
    }
    let session = at.session.clone();
    let is_iframe = at.target_type() == "iframe";
    if is_iframe {
        let id = at.target_id();
        let url = at.target_info["url"].as_str().map(String::from);
        let mut s = lock(st);
        let parent_guess = s
            .frames
            .iter()
            .find(|f| f.frame_id == id.as_str())
            .and_then(|f| f.parent.clone());
        upsert_frame(&mut s, id.as_str(), parent_guess, url.as_deref(), None);
        if let Some(f) = s.frames.iter_mut().find(|f| f.frame_id == id.as_str()) {
            f.session = Some(session.clone());
        }
        drop(s);
        changed.send_modify(|v| *v += 1);
    }
    let waiting = at.waiting_for_debugger;
    let _ = conn;
    tokio::spawn(async move {
        let budget = Budget::new(SETUP_TIMEOUT);
        if is_iframe {
            for m in ["Page.enable", "Runtime.enable"] {
                if let Err(e) = session.call(m, json!({}), budget.clone()).await {
                    tracing::debug!(%e, "OOPIF setup");
                }
            }
            let _ = session
                .call(
                    "Target.setAutoAttach",
                    json!({"autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true}),
                    budget.clone(),
                )
                .await;
        }
        if waiting {
            // Resumed whatever happened above: a paused target never resumed is a hang we caused.
            let _ = session
                .call(
                    "Runtime.runIfWaitingForDebugger",
                    json!({}),
                    Budget::new(SETUP_TIMEOUT),
                )
                .await;
        }
    });
}

/// Applies one event; true when the state changed.
fn on_event(page: &Session, st: &Arc<Mutex<State>>, ev: &Event) -> bool {
    let mut s = lock(st);
    if !our_session(&s, page, ev.session_id.as_ref()) {
        return false;
    }
    let on_page = ev.session_id.as_ref() == page.id();
    let p = &ev.params;
    match ev.method.as_str() {
        "Page.javascriptDialogOpening" => {
            s.next_dialog += 1;
            let d = DialogView {
                id: format!("d-{}", s.next_dialog),
                kind: p["type"].as_str().unwrap_or("alert").into(),
                message: p["message"].as_str().unwrap_or_default().into(),
                default_prompt: if p["type"] == "prompt" {
                    Some(p["defaultPrompt"].as_str().unwrap_or_default().into())
                } else {
                    None
                },
                frame_id: p["frameId"].as_str().map(String::from),
                url: p["url"].as_str().map(String::from),
            };
            tracing::info!(id = %d.id, kind = %d.kind, "dialog opened");
            s.pending.push(d);
        }
        "Page.javascriptDialogClosed" => {
            if !s.pending.is_empty() {
                let d = s.pending.remove(0);
                let by = if s.answered_by_agent.remove(&d.id).is_some() {
                    "agent"
                } else {
                    "remote"
                };
                let accepted = p["result"].as_bool();
                let input = p["userInput"]
                    .as_str()
                    .filter(|_| accepted == Some(true) && d.kind == "prompt")
                    .map(String::from);
                push_recent(&mut s, &d, by, accepted, input);
            }
        }
        "Page.frameAttached" => {
            let id = p["frameId"].as_str().unwrap_or_default();
            upsert_frame(
                &mut s,
                id,
                p["parentFrameId"].as_str().map(String::from),
                None,
                None,
            );
        }
        "Page.frameNavigated" => {
            let f = &p["frame"];
            let id = f["id"].as_str().unwrap_or_default().to_string();
            let parent = f["parentId"].as_str().map(String::from);
            if on_page && parent.is_none() {
                s.generation += 1;
                // A new main document: drop the old frames (they will re-attach).
                s.frames.retain(|x| x.frame_id == id);
                s.crashed = false;
            }
            let url = format!(
                "{}{}",
                f["url"].as_str().unwrap_or_default(),
                f["urlFragment"].as_str().unwrap_or_default()
            );
            // An OOPIF's own main frame has no parentId on its session: keep the parent we know.
            upsert_frame(&mut s, &id, parent, Some(&url), f["name"].as_str());
        }
        "Page.navigatedWithinDocument" => {
            let id = p["frameId"].as_str().unwrap_or_default().to_string();
            upsert_frame(&mut s, &id, None, p["url"].as_str(), None);
        }
        "Page.frameDetached" => {
            if p["reason"] != "swap" {
                let id = p["frameId"].as_str().unwrap_or_default().to_string();
                remove_frame(&mut s, &id);
            }
        }
        "Page.loadEventFired" if on_page => s.load_seq += 1,
        "Target.detachedFromTarget" => {
            let sid = p["sessionId"].as_str().unwrap_or_default();
            for f in s.frames.iter_mut() {
                if f.session.as_ref().and_then(|x| x.id()).map(|x| x.as_str()) == Some(sid) {
                    f.session = None;
                }
            }
        }
        "Runtime.executionContextCreated" => {
            let c = &p["context"];
            let aux = &c["auxData"];
            if aux["isDefault"].as_bool() == Some(true) {
                if let (Some(fid), Some(cid)) = (aux["frameId"].as_str(), c["id"].as_i64()) {
                    let key = (sid_key(ev.session_id.as_ref()), fid.to_string());
                    s.contexts.insert(key, cid);
                }
            }
        }
        "Runtime.executionContextDestroyed" => {
            if let Some(cid) = p["executionContextId"].as_i64() {
                let k = sid_key(ev.session_id.as_ref());
                s.contexts.retain(|(sk, _), v| !(sk == &k && *v == cid));
            }
        }
        "Runtime.executionContextsCleared" => {
            let k = sid_key(ev.session_id.as_ref());
            s.contexts.retain(|(sk, _), _| sk != &k);
        }
        "Runtime.consoleAPICalled" => {
            let kind = p["type"].as_str().unwrap_or_default();
            if kind == "error" || kind == "assert" {
                let text = p["args"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|x| match &x["value"] {
                                Value::String(s) => s.clone(),
                                Value::Null => {
                                    x["description"].as_str().unwrap_or_default().to_string()
                                }
                                v => v.to_string(),
                            })
                            .collect::<Vec<_>>()
                            .join(" ")
                    })
                    .unwrap_or_default();
                let url = p["stackTrace"]["callFrames"][0]["url"]
                    .as_str()
                    .filter(|u| !u.is_empty())
                    .map(String::from);
                push_console(
                    &mut s,
                    ConsoleEntry {
                        kind: kind.into(),
                        text,
                        url,
                    },
                );
            }
        }
        "Runtime.exceptionThrown" => {
            let d = &p["exceptionDetails"];
            let text = d["exception"]["description"]
                .as_str()
                .or(d["text"].as_str())
                .unwrap_or("exception")
                .to_string();
            let url = d["url"]
                .as_str()
                .filter(|u| !u.is_empty())
                .map(String::from);
            push_console(
                &mut s,
                ConsoleEntry {
                    kind: "exception".into(),
                    text,
                    url,
                },
            );
        }
        "Inspector.targetCrashed" if on_page => s.crashed = true,
        _ => return false,
    }
    true
}

fn push_console(s: &mut State, e: ConsoleEntry) {
    s.console_total += 1;
    s.console.push_back(e);
    while s.console.len() > CONSOLE_CAP {
        s.console.pop_front();
    }
}

/// Maps a transport error to the agent's error.
pub(crate) fn map_transport(e: &cdp_transport::Error, what: &str) -> ToolError {
    use cdp_transport::Error as E;
    match e {
        E::Timeout { budget, .. } => ToolError::timeout(what, budget.as_millis() as u64),
        E::ConnectionClosed { reason } => ToolError::browser_closed(reason),
        E::TargetCrashed { .. } => ToolError::crashed(),
        E::SessionClosed { .. } => ToolError::new(ErrorCode::BrowserClosed, format!("{what}: {e}"))
            .next("call browser_snapshot (the frame or tab may be gone), or browser_tabs to pick another tab"),
        E::Protocol { .. } => ToolError::new(ErrorCode::CdpError, format!("{what}: {e}")),
        _ => ToolError::internal(format!("{what}: {e}")),
    }
}
