//! The state machine: CDP events in, state changes plus follow-up effects out.
//!
//! Nothing here awaits; the event loop applies events and spawns the effects.

use crate::config::{BridgeMode, DialogPolicy};
use crate::gate::GateLink;
use crate::view::*;
use bridge_script::{Bridge, DialogRequest, Paused, MAX_PENDING_DIALOGS};
use cdp_transport::{
    Connection, Event, ExecutionContextId, FrameId, LoaderId, Session, SessionId, TargetId,
};
use serde_json::Value;
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tracing::{debug, info, warn};

/// The wall clock the view's timestamps (`opened_at_ms`, `closed_at_ms`,
/// `at_ms`) are on: milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Page,
    Popup,
    Iframe,
    Other,
}

#[derive(Debug, Clone)]
pub(crate) struct SessionInfo {
    pub session: Session,
    pub target_id: TargetId,
    pub kind: Kind,
    /// The page or popup session at the top of this session's tree.
    pub root: SessionId,
    pub depth: u8,
    pub url: String,
}

#[derive(Debug, Clone)]
struct Frame {
    seq: u64,
    parent: Option<FrameId>,
    url: String,
    origin: String,
    name: Option<String>,
    /// The session whose `Page` domain reports this frame.
    owner: SessionId,
    /// Root (page or popup) session of the tree this frame belongs to.
    root: SessionId,
    oopif_session: Option<SessionId>,
    depth: u8,
    /// `loaderId` of the frame's current document, as last reported by the
    /// session that owns the frame (`Page.frameNavigated`, or the frame
    /// tree); `None` before its first commit.
    loader: Option<LoaderId>,
}

#[derive(Debug, Clone)]
pub(crate) struct Dialog {
    pub view: PendingDialog,
    /// The session the answer is sent on (page/popup for native dialogs, the
    /// pausing session for bridge dialogs).
    pub session: Session,
    /// The page or popup session whose tree raised it.
    pub root: SessionId,
    pub answering: Option<ClosedBy>,
    pub opened: Instant,
    /// `Fetch.RequestId` of a bridge dialog (valid on `session`, this connection only).
    pub bridge_request: Option<String>,
}

/// Work the event loop spawns after applying an event.
#[derive(Debug)]
pub(crate) enum Effect {
    /// Set up a newly attached session, then resume it if paused.
    Setup {
        session: Session,
        kind: Kind,
        paused: bool,
        skip: bool,
    },
    /// Attach a popup target (only without the target gate).
    AttachPopup { target_id: TargetId },
    /// Resume (when paused) and detach a session we will not supervise (a
    /// second session on a popup we already have).
    Release { session: Session, paused: bool },
    /// Answer a dialog by policy.
    Answer {
        dialog_id: String,
        accept: bool,
        prompt: Option<String>,
        by: ClosedBy,
    },
    /// Start the `must_respond` watchdog.
    Watchdog { dialog_id: String, after: Duration },
    /// The page session is gone.
    PageGone { reason: String, reconnect: bool },
    /// Send one call and forget its reply (answers to paused bridge requests
    /// that need no decision: preflight, forged, not ours, over the cap).
    Send {
        session: Session,
        method: &'static str,
        params: Value,
    },
    /// `bridge: auto` switched on: install the bridge on these live sessions
    /// (including into their loaded documents).
    InstallBridge { sessions: Vec<Session> },
}

pub(crate) struct State {
    pub target_id: TargetId,
    pub conn: Connection,
    pub page: Session,
    pub page_sid: SessionId,
    pub active: bool,
    pub reason: Option<String>,
    pub crashed: bool,
    pub generation: u64,
    pub policy: DialogPolicy,
    pub dialog_timeout: Duration,
    pub sessions: HashMap<SessionId, SessionInfo>,
    frames: HashMap<FrameId, Frame>,
    frame_seq: u64,
    skipped_frames: HashSet<FrameId>,
    contexts: HashMap<SessionId, HashMap<FrameId, ExecutionContextId>>,
    popup_requests: HashSet<TargetId>,
    /// Our membership of the connection's target gate; `None` when the
    /// browser refused browser-level auto-attach (popups are then attached
    /// after `Target.targetCreated`) or the supervisor is stopping/reconnecting.
    pub gate: Option<GateLink>,
    pub pending: Vec<Dialog>,
    pub recent: VecDeque<ClosedDialog>,
    next_dialog: u64,
    /// Close events still to come for dialogs already retired on our answer's reply.
    pub swallow_close: HashMap<SessionId, u32>,
    console: VecDeque<ConsoleError>,
    /// Console errors seen in all, the ones the ring dropped included.
    console_total: u64,
    pub bridge: Bridge,
    pub bridge_mode: BridgeMode,
    pub auto_bridge_window: Duration,
    /// Whether sessions get the bridge (mode `on`, or `auto` once switched on).
    /// Survives reconnects.
    pub bridge_on: bool,
    /// The bridge is installed on the current page session.
    pub bridge_active: bool,
    bridge_refused: u64,
}

impl State {
    pub fn new(
        conn: Connection,
        page: Session,
        target_id: TargetId,
        policy: DialogPolicy,
        dialog_timeout: Duration,
        bridge_mode: BridgeMode,
        bridge: Bridge,
    ) -> Self {
        let page_sid = page.id().cloned().unwrap_or_else(|| SessionId::new(""));
        let mut s = Self {
            target_id,
            conn,
            page: page.clone(),
            page_sid,
            active: true,
            reason: None,
            crashed: false,
            generation: 1,
            policy,
            dialog_timeout,
            sessions: HashMap::new(),
            frames: HashMap::new(),
            frame_seq: 0,
            skipped_frames: HashSet::new(),
            contexts: HashMap::new(),
            popup_requests: HashSet::new(),
            gate: None,
            pending: Vec::new(),
            recent: VecDeque::new(),
            next_dialog: 1,
            swallow_close: HashMap::new(),
            console: VecDeque::new(),
            console_total: 0,
            bridge,
            bridge_mode,
            auto_bridge_window: Duration::from_millis(100),
            bridge_on: bridge_mode == BridgeMode::On,
            bridge_active: false,
            bridge_refused: 0,
        };
        s.insert_page_session();
        s
    }

    fn insert_page_session(&mut self) {
        self.sessions.insert(
            self.page_sid.clone(),
            SessionInfo {
                session: self.page.clone(),
                target_id: self.target_id.clone(),
                kind: Kind::Page,
                root: self.page_sid.clone(),
                depth: 0,
                url: String::new(),
            },
        );
    }

    /// Starts over on a new connection / page session (after a reconnect).
    /// Dialogs still pending are retired as `remote`.
    pub fn reset_for(&mut self, conn: Connection, page: Session) {
        self.retire_all(None);
        self.conn = conn;
        self.page_sid = page.id().cloned().unwrap_or_else(|| SessionId::new(""));
        self.page = page;
        self.sessions.clear();
        self.frames.clear();
        self.skipped_frames.clear();
        self.contexts.clear();
        self.popup_requests.clear();
        self.gate = None;
        self.swallow_close.clear();
        self.bridge_active = false;
        self.insert_page_session();
        self.active = true;
        self.reason = None;
        self.crashed = false;
        self.generation += 1;
    }

    /// Marks the supervisor inactive and retires every pending dialog as `remote`.
    pub fn set_inactive(&mut self, reason: impl Into<String>) {
        self.active = false;
        self.reason = Some(reason.into());
        self.retire_all(None);
    }

    /// Retires pending dialogs (of one root session, or all) as `remote`.
    fn retire_all(&mut self, root: Option<&SessionId>) {
        let (gone, keep): (Vec<Dialog>, Vec<Dialog>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|d| root.is_none_or(|r| &d.root == r));
        self.pending = keep;
        for d in gone {
            self.push_recent(d.view, ClosedBy::Remote, None, None);
        }
    }

    pub fn push_recent(
        &mut self,
        dialog: PendingDialog,
        by: ClosedBy,
        accepted: Option<bool>,
        user_input: Option<String>,
    ) {
        if self.recent.len() >= RECENT_DIALOGS_CAP {
            self.recent.pop_front();
        }
        self.recent.push_back(ClosedDialog {
            dialog,
            closed_at_ms: now_ms(),
            closed_by: by,
            accepted,
            user_input,
        });
    }

    /// Moves a pending dialog to the recent ring. Returns the record, or `None` if it was not pending.
    pub fn close_dialog(
        &mut self,
        id: &str,
        by: ClosedBy,
        accepted: Option<bool>,
        user_input: Option<String>,
    ) -> Option<ClosedDialog> {
        let pos = self.pending.iter().position(|d| d.view.id == id)?;
        let d = self.pending.remove(pos);
        self.push_recent(d.view, by, accepted, user_input);
        self.recent.back().cloned()
    }

    fn owned(&self, sid: &Option<SessionId>) -> Option<&SessionInfo> {
        sid.as_ref().and_then(|s| self.sessions.get(s))
    }

    fn is_our_target(&self, t: &str) -> bool {
        self.target_id.as_str() == t
            || self
                .sessions
                .values()
                .any(|s| matches!(s.kind, Kind::Popup) && s.target_id.as_str() == t)
    }

    /// Applies one event; returns the follow-up work.
    pub fn apply(&mut self, ev: &Event) -> Vec<Effect> {
        let mut fx = Vec::new();
        let p = &ev.params;
        let info = self.owned(&ev.session_id).cloned();
        if ev.session_id.is_some() && info.is_none() {
            // Not one of ours (another user of this connection, or a child we dropped).
            return fx;
        }
        match ev.method.as_str() {
            "Target.targetCreated" | "Target.targetInfoChanged" if ev.session_id.is_none() => {
                let ti = &p["targetInfo"];
                let tid = str_of(ti, "targetId");
                // With the target gate, popups arrive paused through a
                // browser-level attach instead (see `on_attached`).
                if ev.method == "Target.targetCreated"
                    && self.gate.is_none()
                    && str_of(ti, "type") == "page"
                    && ti
                        .get("openerId")
                        .and_then(Value::as_str)
                        .is_some_and(|o| self.is_our_target(o))
                    && !ti.get("attached").and_then(Value::as_bool).unwrap_or(false)
                    && self.popup_requests.insert(TargetId::new(&tid))
                {
                    fx.push(Effect::AttachPopup {
                        target_id: TargetId::new(&tid),
                    });
                }
                if let Some(s) = self
                    .sessions
                    .values_mut()
                    .find(|s| s.target_id.as_str() == tid && s.kind == Kind::Popup)
                {
                    s.url = str_of(ti, "url");
                }
            }
            "Target.targetDestroyed"
                if ev.session_id.is_none() && str_of(p, "targetId") == self.target_id.as_str() =>
            {
                fx.push(Effect::PageGone {
                    reason: "target destroyed".into(),
                    reconnect: false,
                });
            }
            "Target.attachedToTarget" => self.on_attached(ev, info.as_ref(), &mut fx),
            "Target.detachedFromTarget" => {
                let sid = SessionId::new(str_of(p, "sessionId"));
                self.on_detached(&sid, &mut fx);
            }
            "Target.targetCrashed"
                if ev.session_id.is_none() && str_of(p, "targetId") == self.target_id.as_str() =>
            {
                self.crashed = true;
                self.set_inactive("target crashed");
            }
            "Inspector.targetCrashed" => {
                if let Some(i) = &info {
                    if i.kind == Kind::Page {
                        self.crashed = true;
                        self.set_inactive("target crashed");
                    } else if i.kind == Kind::Popup {
                        let r = i.root.clone();
                        self.retire_all(Some(&r));
                    }
                }
            }
            "Inspector.targetReloadedAfterCrash"
                if info.as_ref().is_some_and(|i| i.kind == Kind::Page) =>
            {
                self.revive();
            }
            "Page.frameAttached" => {
                if let Some(i) = &info {
                    let id = FrameId::new(str_of(p, "frameId"));
                    let parent = p
                        .get("parentFrameId")
                        .and_then(Value::as_str)
                        .map(FrameId::new);
                    self.upsert_frame(&id, parent, i, None);
                }
            }
            "Page.frameNavigated" => {
                if let Some(i) = &info {
                    let f = &p["frame"];
                    let id = FrameId::new(str_of(f, "id"));
                    let parent = f.get("parentId").and_then(Value::as_str).map(FrameId::new);
                    let is_top = parent.is_none() && matches!(i.kind, Kind::Page | Kind::Popup);
                    self.upsert_frame(&id, parent, i, Some(f));
                    // A new document: the old document's subframes are gone
                    // (Chromium sends no frameDetached for them).
                    self.remove_descendants(&id);
                    if is_top {
                        if i.kind == Kind::Page && self.crashed {
                            self.revive();
                        }
                        if let Some(s) = ev
                            .session_id
                            .as_ref()
                            .and_then(|s| self.sessions.get_mut(s))
                        {
                            s.url = str_of(f, "url");
                        }
                    }
                }
            }
            "Page.frameDetached" if info.is_some() => {
                let id = FrameId::new(str_of(p, "frameId"));
                if str_of(p, "reason") != "swap" {
                    self.remove_frame(&id);
                }
            }
            "Page.javascriptDialogOpening" => {
                if let Some(i) = &info {
                    self.on_dialog_opening(p, i, &mut fx);
                }
            }
            bridge_script::REQUEST_PAUSED_EVENT => {
                if let Some(i) = &info {
                    self.on_request_paused(p, i, &mut fx);
                }
            }
            "Page.javascriptDialogClosed" => {
                if let Some(i) = &info {
                    let root = i.root.clone();
                    if let Some(n) = self.swallow_close.get_mut(&root).filter(|n| **n > 0) {
                        // The close event of a dialog we already retired when our answer was acknowledged.
                        *n -= 1;
                        return fx;
                    }
                    // Bridge dialogs never get a native close event.
                    let native = |d: &Dialog| d.root == root && d.bridge_request.is_none();
                    let pos = self
                        .pending
                        .iter()
                        .position(|d| native(d) && d.answering.is_some());
                    let pos = pos.or_else(|| self.pending.iter().position(native));
                    if let Some(pos) = pos {
                        let d = self.pending.remove(pos);
                        let by = d.answering.unwrap_or(ClosedBy::Remote);
                        if by == ClosedBy::Remote
                            && self.bridge_mode == BridgeMode::Auto
                            && !self.bridge_on
                            && d.opened.elapsed() < self.auto_bridge_window
                        {
                            info!(
                                dialog_id = %d.view.id,
                                after = ?d.opened.elapsed(),
                                "a native dialog was closed by someone else at once (a dismissing proxy?): bridge auto switches on"
                            );
                            self.bridge_on = true;
                            let sessions = self
                                .sessions
                                .values()
                                .filter(|s| {
                                    matches!(s.kind, Kind::Page | Kind::Popup | Kind::Iframe)
                                })
                                .map(|s| s.session.clone())
                                .collect();
                            fx.push(Effect::InstallBridge { sessions });
                        }
                        let accepted = p.get("result").and_then(Value::as_bool);
                        let input = p
                            .get("userInput")
                            .and_then(Value::as_str)
                            .filter(|s| !s.is_empty())
                            .map(String::from);
                        self.push_recent(d.view, by, accepted, input);
                    }
                }
            }
            "Runtime.consoleAPICalled" => {
                let kind = str_of(p, "type");
                if kind == "error" || kind == "assert" {
                    let text = p
                        .get("args")
                        .and_then(Value::as_array)
                        .map(|a| {
                            a.iter()
                                .map(remote_object_text)
                                .collect::<Vec<_>>()
                                .join(" ")
                        })
                        .unwrap_or_default();
                    let url = p
                        .pointer("/stackTrace/callFrames/0/url")
                        .and_then(Value::as_str)
                        .filter(|s| !s.is_empty())
                        .map(String::from);
                    self.push_console(kind, text, url, ev.session_id.clone());
                }
            }
            "Runtime.exceptionThrown" => {
                let d = &p["exceptionDetails"];
                let text = d
                    .pointer("/exception/description")
                    .and_then(Value::as_str)
                    .map(String::from)
                    .unwrap_or_else(|| str_of(d, "text"));
                let url = d
                    .get("url")
                    .and_then(Value::as_str)
                    .filter(|s| !s.is_empty())
                    .map(String::from);
                self.push_console("exception".into(), text, url, ev.session_id.clone());
            }
            "Runtime.executionContextCreated" => {
                if let Some(sid) = &ev.session_id {
                    let c = &p["context"];
                    let aux = &c["auxData"];
                    if aux.get("isDefault").and_then(Value::as_bool) == Some(true) {
                        if let (Some(fid), Some(id)) = (
                            aux.get("frameId").and_then(Value::as_str),
                            c.get("id").and_then(Value::as_i64),
                        ) {
                            self.contexts
                                .entry(sid.clone())
                                .or_default()
                                .insert(FrameId::new(fid), ExecutionContextId(id));
                        }
                    }
                }
            }
            "Runtime.executionContextDestroyed" => {
                if let (Some(sid), Some(id)) = (
                    &ev.session_id,
                    p.get("executionContextId").and_then(Value::as_i64),
                ) {
                    if let Some(m) = self.contexts.get_mut(sid) {
                        m.retain(|_, c| c.0 != id);
                    }
                }
            }
            "Runtime.executionContextsCleared" => {
                if let Some(sid) = &ev.session_id {
                    self.contexts.remove(sid);
                }
            }
            _ => {}
        }
        fx
    }

    fn revive(&mut self) {
        self.crashed = false;
        if self.reason.as_deref() == Some("target crashed") {
            self.active = true;
            self.reason = None;
        }
    }

    fn on_attached(&mut self, ev: &Event, parent: Option<&SessionInfo>, fx: &mut Vec<Effect>) {
        let p = &ev.params;
        let sid = SessionId::new(str_of(p, "sessionId"));
        let ti = &p["targetInfo"];
        let tid = TargetId::new(str_of(ti, "targetId"));
        let ttype = str_of(ti, "type");
        let paused = p
            .get("waitingForDebugger")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if sid.as_str().is_empty() || self.sessions.contains_key(&sid) {
            return;
        }
        let session = self.conn.session(sid.clone());
        match parent {
            None => {
                // Browser-level: with the target gate, a paused page target the
                // gate says is ours (opened by our page or one of our popups);
                // without it, only popups we asked to attach. Any other
                // session (another tab, our own tab's extra session, someone's
                // explicit attach) is not ours: the gate resumes and detaches
                // what needs it.
                if ttype != "page" {
                    return;
                }
                let claimed = match &self.gate {
                    Some(g) => paused && g.claims(&tid, ti.get("openerId").and_then(Value::as_str)),
                    None => self.popup_requests.remove(&tid),
                };
                if !claimed {
                    return;
                }
                if self
                    .sessions
                    .values()
                    .any(|s| s.kind == Kind::Popup && s.target_id == tid)
                {
                    // Never supervise one popup through two sessions (its
                    // dialogs would be reported twice).
                    debug!(%tid, session = %sid, "popup already supervised: extra session released");
                    fx.push(Effect::Release { session, paused });
                    return;
                }
                if let Some(g) = &self.gate {
                    g.add_opener(&tid);
                }
                self.sessions.insert(
                    sid.clone(),
                    SessionInfo {
                        session: session.clone(),
                        target_id: tid,
                        kind: Kind::Popup,
                        root: sid,
                        depth: 0,
                        url: str_of(ti, "url"),
                    },
                );
                fx.push(Effect::Setup {
                    session,
                    kind: Kind::Popup,
                    paused,
                    skip: false,
                });
            }
            Some(parent) => {
                let (kind, depth) = if ttype == "iframe" {
                    (Kind::Iframe, parent.depth + 1)
                } else {
                    (Kind::Other, parent.depth)
                };
                let skip = kind == Kind::Iframe && depth > MAX_OOPIF_DEPTH;
                if skip {
                    let fid = FrameId::new(tid.as_str());
                    self.remove_frame(&fid);
                    self.skipped_frames.insert(fid);
                    fx.push(Effect::Setup {
                        session,
                        kind,
                        paused,
                        skip: true,
                    });
                    return;
                }
                self.sessions.insert(
                    sid.clone(),
                    SessionInfo {
                        session: session.clone(),
                        target_id: tid.clone(),
                        kind,
                        root: parent.root.clone(),
                        depth,
                        url: str_of(ti, "url"),
                    },
                );
                if kind == Kind::Iframe {
                    let fid = FrameId::new(tid.as_str());
                    self.frame_seq += 1;
                    let seq = self.frame_seq;
                    let f = self.frames.entry(fid).or_insert_with(|| Frame {
                        seq,
                        parent: None,
                        url: String::new(),
                        origin: String::new(),
                        name: None,
                        owner: sid.clone(),
                        root: parent.root.clone(),
                        oopif_session: None,
                        depth,
                        loader: None,
                    });
                    if f.owner != sid {
                        // The parent's process no longer shows this frame's
                        // document; its own session reports the loader.
                        f.loader = None;
                    }
                    f.owner = sid.clone();
                    f.oopif_session = Some(sid.clone());
                    f.depth = depth;
                    if f.url.is_empty() {
                        f.url = str_of(ti, "url");
                    }
                }
                fx.push(Effect::Setup {
                    session,
                    kind,
                    paused,
                    skip: false,
                });
            }
        }
    }

    fn on_detached(&mut self, sid: &SessionId, fx: &mut Vec<Effect>) {
        let Some(info) = self.sessions.get(sid).cloned() else {
            return;
        };
        match info.kind {
            Kind::Page => {
                fx.push(Effect::PageGone {
                    reason: "page session detached".into(),
                    reconnect: true,
                });
            }
            Kind::Popup => {
                if let Some(g) = &self.gate {
                    g.remove_opener(&info.target_id);
                }
                self.retire_all(Some(sid));
                self.frames.retain(|_, f| &f.root != sid);
                self.drop_session(sid);
            }
            Kind::Iframe => {
                // The frame may live on in its parent's process (a transient detach or a
                // move back): keep its entry, drop what only this session knew.
                let fid = FrameId::new(info.target_id.as_str());
                let inner: Vec<FrameId> = self
                    .frames
                    .iter()
                    .filter(|(k, f)| &f.owner == sid && **k != fid)
                    .map(|(k, _)| k.clone())
                    .collect();
                for k in inner {
                    self.remove_frame(&k);
                }
                if let Some(parent) = self.frames.get(&fid).map(|f| f.parent.clone()) {
                    let parent_owner = parent
                        .as_ref()
                        .and_then(|p| self.frames.get(p))
                        .map(|p| (p.owner.clone(), p.depth));
                    if let Some(f) = self.frames.get_mut(&fid) {
                        f.oopif_session = None;
                        match parent_owner {
                            Some((o, d)) => {
                                f.owner = o;
                                f.depth = d;
                            }
                            None => {
                                self.frames.remove(&fid);
                            }
                        }
                    }
                }
                self.drop_session(sid);
            }
            Kind::Other => self.drop_session(sid),
        }
        self.retire_paused_on(sid);
    }

    fn drop_session(&mut self, sid: &SessionId) {
        self.sessions.remove(sid);
        self.contexts.remove(sid);
    }

    fn upsert_frame(
        &mut self,
        id: &FrameId,
        parent: Option<FrameId>,
        owner: &SessionInfo,
        f: Option<&Value>,
    ) {
        if self.skipped_frames.contains(id) {
            return;
        }
        let owner_sid = owner
            .session
            .id()
            .cloned()
            .unwrap_or_else(|| SessionId::new(""));
        self.frame_seq += 1;
        let seq = self.frame_seq;
        let e = self.frames.entry(id.clone()).or_insert_with(|| Frame {
            seq,
            parent: None,
            url: String::new(),
            origin: String::new(),
            name: None,
            owner: owner_sid.clone(),
            root: owner.root.clone(),
            oopif_session: None,
            depth: owner.depth,
            loader: None,
        });
        if parent.is_some() {
            e.parent = parent;
        }
        // A frame that is an OOPIF is owned by its own session; the parent's reports don't take it back.
        if e.oopif_session.is_none() {
            e.owner = owner_sid.clone();
            e.depth = owner.depth;
        }
        if let Some(f) = f {
            if e.owner.as_str() == owner_sid.as_str() {
                e.loader = f.get("loaderId").and_then(Value::as_str).map(LoaderId::new);
            }
            e.url = format!("{}{}", str_of(f, "url"), str_of(f, "urlFragment"));
            e.origin = str_of(f, "securityOrigin");
            e.name = f
                .get("name")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from);
        }
    }

    fn remove_descendants(&mut self, id: &FrameId) {
        let kids: Vec<FrameId> = self
            .frames
            .iter()
            .filter(|(_, c)| c.parent.as_ref() == Some(id))
            .map(|(k, _)| k.clone())
            .collect();
        for k in kids {
            self.remove_frame(&k);
        }
    }

    fn remove_frame(&mut self, id: &FrameId) {
        let mut stack = vec![id.clone()];
        while let Some(f) = stack.pop() {
            if self.frames.remove(&f).is_some() {
                stack.extend(
                    self.frames
                        .iter()
                        .filter(|(_, c)| c.parent.as_ref() == Some(&f))
                        .map(|(k, _)| k.clone()),
                );
            }
        }
    }

    /// Merges a `Page.getFrameTree` result reported on `sid`. Frames already
    /// known from events keep their event data (it is newer).
    pub fn merge_frame_tree(&mut self, sid: &SessionId, tree: &Value) {
        let Some(info) = self.sessions.get(sid).cloned() else {
            return;
        };
        let mut stack = vec![tree.clone()];
        while let Some(node) = stack.pop() {
            let f = &node["frame"];
            let id = FrameId::new(str_of(f, "id"));
            if id.as_str().is_empty() {
                continue;
            }
            if !self.frames.contains_key(&id)
                || self
                    .frames
                    .get(&id)
                    .is_some_and(|x| x.url.is_empty() || x.origin.is_empty() || x.loader.is_none())
            {
                let parent = f.get("parentId").and_then(Value::as_str).map(FrameId::new);
                self.upsert_frame(&id, parent, &info, Some(f));
            }
            if let Some(kids) = node.get("childFrames").and_then(Value::as_array) {
                // Push in reverse so that discovery order follows document order.
                stack.extend(kids.iter().rev().cloned());
            }
        }
    }

    fn on_dialog_opening(&mut self, p: &Value, i: &SessionInfo, fx: &mut Vec<Effect>) {
        let Some(root) = self.sessions.get(&i.root).cloned() else {
            return;
        };
        let id = format!("d-{}", self.next_dialog);
        self.next_dialog += 1;
        let kind = dialog_type(p);
        let default_prompt = if kind == "prompt" {
            Some(str_of(p, "defaultPrompt"))
        } else {
            None
        };
        let frame_id = p
            .get("frameId")
            .and_then(Value::as_str)
            .map(FrameId::new)
            .or_else(|| {
                self.frames
                    .iter()
                    .find(|(_, f)| f.root == i.root && f.parent.is_none())
                    .map(|(k, _)| k.clone())
            });
        let view = PendingDialog {
            id: id.clone(),
            kind,
            message: str_of(p, "message"),
            default_prompt: default_prompt.clone(),
            url: str_of(p, "url"),
            frame_id,
            target_id: root.target_id.clone(),
            session_id: root.session.id().cloned(),
            opened_at_ms: now_ms(),
            bridge_request_id: None,
            opened_via: DialogPath::Native,
        };
        self.pending.push(Dialog {
            view,
            session: root.session.clone(),
            root: i.root.clone(),
            answering: None,
            opened: Instant::now(),
            bridge_request: None,
        });
        self.policy_effect(id, default_prompt, fx);
    }

    /// The effect the dialog policy asks for on a new pending dialog.
    fn policy_effect(&self, id: String, default_prompt: Option<String>, fx: &mut Vec<Effect>) {
        match self.policy {
            DialogPolicy::MustRespond => fx.push(Effect::Watchdog {
                dialog_id: id,
                after: self.dialog_timeout,
            }),
            DialogPolicy::AutoDismiss => fx.push(Effect::Answer {
                dialog_id: id,
                accept: false,
                prompt: None,
                by: ClosedBy::AutoPolicy,
            }),
            DialogPolicy::AutoAccept => fx.push(Effect::Answer {
                dialog_id: id,
                accept: true,
                prompt: default_prompt,
                by: ClosedBy::AutoPolicy,
            }),
        }
    }

    /// `Fetch.requestPaused` on one of our sessions: Fetch is enabled only
    /// with the bridge patterns, so this is the bridge (or a forgery of it).
    fn on_request_paused(&mut self, p: &Value, i: &SessionInfo, fx: &mut Vec<Effect>) {
        let send = |method, params| Effect::Send {
            session: i.session.clone(),
            method,
            params,
        };
        match self.bridge.parse_paused(p) {
            Err(e) => {
                // Without a request id nothing can be answered; with one, let it go on.
                warn!(session = ?i.session.id(), error = %e, "malformed Fetch.requestPaused");
                if let Some(rid) = p.get("requestId").and_then(Value::as_str) {
                    fx.push(send(
                        bridge_script::CONTINUE_METHOD,
                        bridge_script::continue_params(rid),
                    ));
                }
            }
            Ok(Paused::Dialog(d)) => self.on_bridge_dialog(d, i, fx),
            Ok(Paused::Preflight { request_id }) => fx.push(send(
                bridge_script::FULFILL_METHOD,
                self.bridge.fulfill_preflight(&request_id),
            )),
            Ok(Paused::Forged { request_id }) => {
                self.bridge_refused += 1;
                debug!(session = ?i.session.id(), "bridge request without our token: 403, no dialog");
                fx.push(send(
                    bridge_script::FULFILL_METHOD,
                    self.bridge.fulfill_forbidden(&request_id),
                ));
            }
            Ok(other) => fx.push(send(
                bridge_script::CONTINUE_METHOD,
                bridge_script::continue_params(other.request_id()),
            )),
        }
    }

    fn on_bridge_dialog(&mut self, d: DialogRequest, i: &SessionInfo, fx: &mut Vec<Effect>) {
        let Some(root) = self.sessions.get(&i.root).cloned() else {
            return;
        };
        let id = format!("d-{}", self.next_dialog);
        self.next_dialog += 1;
        let frame_id = d.frame_id.as_deref().map(FrameId::new);
        let url = frame_id
            .as_ref()
            .and_then(|f| self.frames.get(f))
            .map(|f| f.url.clone())
            .unwrap_or_else(|| i.url.clone());
        let view = PendingDialog {
            id: id.clone(),
            kind: d.kind.as_str().to_string(),
            message: d.message,
            default_prompt: d.default_prompt.clone(),
            url,
            frame_id,
            target_id: root.target_id.clone(),
            session_id: i.session.id().cloned(),
            opened_at_ms: now_ms(),
            bridge_request_id: Some(d.request_id.clone()),
            opened_via: DialogPath::Bridge,
        };
        let bridged = self
            .pending
            .iter()
            .filter(|p| p.bridge_request.is_some())
            .count();
        if bridged >= MAX_PENDING_DIALOGS {
            warn!(
                dialog_id = %id,
                cap = MAX_PENDING_DIALOGS,
                "too many pending bridge dialogs: dismissed at once"
            );
            fx.push(Effect::Send {
                session: i.session.clone(),
                method: bridge_script::FULFILL_METHOD,
                params: self.bridge.fulfill_answer(&d.request_id, false, None),
            });
            self.push_recent(view, ClosedBy::AutoPolicy, Some(false), None);
            return;
        }
        self.pending.push(Dialog {
            view,
            session: i.session.clone(),
            root: i.root.clone(),
            answering: None,
            opened: Instant::now(),
            bridge_request: Some(d.request_id),
        });
        self.policy_effect(id, d.default_prompt, fx);
    }

    /// Retires bridge dialogs paused on `sid` (its session is gone, so is the request).
    fn retire_paused_on(&mut self, sid: &SessionId) {
        let (gone, keep): (Vec<Dialog>, Vec<Dialog>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|d| d.bridge_request.is_some() && d.session.id() == Some(sid));
        self.pending = keep;
        for d in gone {
            self.push_recent(d.view, ClosedBy::Remote, None, None);
        }
    }

    fn push_console(
        &mut self,
        kind: String,
        text: String,
        url: Option<String>,
        session_id: Option<SessionId>,
    ) {
        self.console_total = self.console_total.saturating_add(1);
        if self.console.len() >= CONSOLE_ERRORS_CAP {
            self.console.pop_front();
        }
        const MAX_TEXT: usize = 2000;
        let text = if text.len() > MAX_TEXT {
            let mut cut = MAX_TEXT;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{}…", &text[..cut])
        } else {
            text
        };
        self.console.push_back(ConsoleError {
            kind,
            text,
            url,
            session_id,
            at_ms: now_ms(),
        });
    }

    /// The frame's owning session and main-world execution context, and whether it is an OOPIF.
    pub fn frame_route(&self, id: &FrameId) -> Option<FrameRoute> {
        let f = self.frames.get(id)?;
        let session = self.sessions.get(&f.owner).map(|s| s.session.clone());
        let ctx = self.contexts.get(&f.owner).and_then(|m| m.get(id)).copied();
        Some(FrameRoute {
            session,
            oopif: f.oopif_session.is_some(),
            top: f.parent.is_none(),
            parent: f.parent.clone(),
            ctx,
        })
    }

    /// The loader of `id`'s current document, when the frame is known and
    /// has committed one.
    pub fn frame_loader(&self, id: &FrameId) -> Option<LoaderId> {
        self.frames.get(id).and_then(|f| f.loader.clone())
    }

    pub fn view(&self) -> SupervisorView {
        let to_view = |id: &FrameId, f: &Frame| FrameView {
            frame_id: id.clone(),
            parent_frame_id: f.parent.clone(),
            url: f.url.clone(),
            origin: f.origin.clone(),
            name: f.name.clone(),
            is_oopif: f.oopif_session.is_some(),
            session_id: f.oopif_session.clone(),
            oopif_depth: f.depth,
        };
        let mut mine: Vec<(&FrameId, &Frame)> = self
            .frames
            .iter()
            .filter(|(_, f)| f.root == self.page_sid)
            .collect();
        mine.sort_by_key(|(_, f)| f.seq);
        let top = mine
            .iter()
            .find(|(_, f)| f.parent.is_none() && f.owner == self.page_sid)
            .map(|(k, f)| to_view(k, f));
        let rest: Vec<FrameView> = mine
            .iter()
            .filter(|(k, _)| top.as_ref().is_none_or(|t| &t.frame_id != *k))
            .map(|(k, f)| to_view(k, f))
            .collect();
        let truncated = rest.len() > FRAME_CHILDREN_CAP || !self.skipped_frames.is_empty();
        let children = rest.into_iter().take(FRAME_CHILDREN_CAP).collect();
        let mut popups: Vec<PopupView> = self
            .sessions
            .iter()
            .filter(|(_, s)| s.kind == Kind::Popup)
            .map(|(k, s)| PopupView {
                target_id: s.target_id.clone(),
                session_id: k.clone(),
                url: s.url.clone(),
            })
            .collect();
        popups.sort_by(|a, b| a.target_id.cmp(&b.target_id));
        SupervisorView {
            target_id: self.target_id.clone(),
            active: self.active,
            reason: self.reason.clone(),
            generation: self.generation,
            pending_dialogs: self.pending.iter().map(|d| d.view.clone()).collect(),
            recent_dialogs: self.recent.iter().cloned().collect(),
            frame_tree: FrameTreeView {
                top,
                children,
                truncated,
            },
            console_errors: self.console.iter().cloned().collect(),
            console_errors_total: self.console_total,
            popups,
            bridge_active: self.bridge_active,
            bridge_refused: self.bridge_refused,
        }
    }
}

pub(crate) struct FrameRoute {
    pub session: Option<Session>,
    pub oopif: bool,
    pub top: bool,
    pub parent: Option<FrameId>,
    pub ctx: Option<ExecutionContextId>,
}

/// `type` of a `Page.javascriptDialogOpening`: one of CDP's
/// `Page.DialogType` values, or `unknown` when it is missing or not one we
/// know (a malformed or newer event). The dialog is recorded either way and
/// answered like any other (`Page.handleJavaScriptDialog`).
fn dialog_type(p: &Value) -> String {
    match p.get("type").and_then(Value::as_str) {
        Some(t @ ("alert" | "confirm" | "prompt" | "beforeunload")) => t.to_string(),
        other => {
            warn!(
                given = ?other,
                "dialog event with a missing or unknown type: recorded as unknown"
            );
            "unknown".to_string()
        }
    }
}

fn str_of(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}

fn remote_object_text(o: &Value) -> String {
    if let Some(v) = o.get("value") {
        return match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
    }
    o.get("description")
        .or_else(|| o.get("unserializableValue"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}
