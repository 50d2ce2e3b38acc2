//! The state machine: CDP events in, state changes plus follow-up effects out.
//!
//! Nothing here awaits; the event loop applies events and spawns the effects.
//!
//! By job: [`targets`] (sessions: popups, OOPIFs, crashes), [`frames`] (the
//! frame tree, loaders, execution contexts), [`dialogs`] (native and bridge
//! dialogs, policies), [`console`] (console errors); this file holds the
//! types, the event dispatch and the view.

mod console;
mod dialogs;
mod frames;
#[cfg(test)]
mod table_tests;
mod targets;

pub use dialogs::HANDLE_DIALOG;

use crate::config::{BridgeMode, DialogPolicy};
use crate::gate::GateLink;
use crate::view::*;
use bridge_script::Bridge;
use cdp_transport::{
    Connection, Event, ExecutionContextId, FrameId, LoaderId, Session, SessionId, TargetId,
};
use serde_json::Value;
use std::collections::{HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The wall clock the view's timestamps (`opened_at_ms`, `closed_at_ms`,
/// `at_ms`) are on: milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// The clock an input is applied at, read once by the caller: the state
/// machine never reads a clock itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Now {
    /// The wall clock of the view's timestamps ([`now_ms`]).
    pub wall_ms: u64,
    /// The monotonic clock of durations (how soon a dialog was closed).
    pub instant: Instant,
}

impl Now {
    /// The system clocks, now.
    pub fn system() -> Self {
        Self {
            wall_ms: now_ms(),
            instant: Instant::now(),
        }
    }
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
    pub fn reset_for(&mut self, conn: Connection, page: Session, now: Now) {
        self.retire_all(None, now);
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
    pub fn set_inactive(&mut self, reason: impl Into<String>, now: Now) {
        self.active = false;
        self.reason = Some(reason.into());
        self.retire_all(None, now);
    }

    /// Retires pending dialogs (of one root session, or all) as `remote`.
    fn retire_all(&mut self, root: Option<&SessionId>, now: Now) {
        let (gone, keep): (Vec<Dialog>, Vec<Dialog>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|d| root.is_none_or(|r| &d.root == r));
        self.pending = keep;
        for d in gone {
            self.push_recent(d.view, ClosedBy::Remote, None, None, now);
        }
    }

    fn push_recent(
        &mut self,
        dialog: PendingDialog,
        by: ClosedBy,
        accepted: Option<bool>,
        user_input: Option<String>,
        now: Now,
    ) {
        if self.recent.len() >= RECENT_DIALOGS_CAP {
            self.recent.pop_front();
        }
        self.recent.push_back(ClosedDialog {
            dialog,
            closed_at_ms: now.wall_ms,
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
        now: Now,
    ) -> Option<ClosedDialog> {
        let pos = self.pending.iter().position(|d| d.view.id == id)?;
        let d = self.pending.remove(pos);
        self.push_recent(d.view, by, accepted, user_input, now);
        self.recent.back().cloned()
    }

    fn owned(&self, sid: &Option<SessionId>) -> Option<&SessionInfo> {
        sid.as_ref().and_then(|s| self.sessions.get(s))
    }

    /// Applies one event, received at `now`; returns the follow-up work.
    pub fn apply(&mut self, ev: &Event, now: Now) -> Vec<Effect> {
        let mut fx = Vec::new();
        let p = &ev.params;
        let info = self.owned(&ev.session_id).cloned();
        if ev.session_id.is_some() && info.is_none() {
            // Not one of ours (another user of this connection, or a child we dropped).
            return fx;
        }
        match ev.method.as_str() {
            "Target.targetCreated" | "Target.targetInfoChanged" if ev.session_id.is_none() => {
                self.on_target_info(ev, &mut fx);
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
                self.on_detached(&sid, now, &mut fx);
            }
            "Target.targetCrashed"
                if ev.session_id.is_none() && str_of(p, "targetId") == self.target_id.as_str() =>
            {
                self.crashed = true;
                self.set_inactive("target crashed", now);
            }
            "Inspector.targetCrashed" => {
                if let Some(i) = &info {
                    self.on_inspector_crashed(i, now);
                }
            }
            "Inspector.targetReloadedAfterCrash"
                if info.as_ref().is_some_and(|i| i.kind == Kind::Page) =>
            {
                self.revive();
            }
            "Page.frameAttached" => {
                if let Some(i) = &info {
                    self.on_frame_attached(p, i);
                }
            }
            "Page.frameNavigated" => {
                if let Some(i) = &info {
                    self.on_frame_navigated(p, i, ev.session_id.as_ref());
                }
            }
            "Page.frameDetached" if info.is_some() => self.on_frame_detached(p),
            "Page.javascriptDialogOpening" => {
                if let Some(i) = &info {
                    self.on_dialog_opening(p, i, now, &mut fx);
                }
            }
            bridge_script::REQUEST_PAUSED_EVENT => {
                if let Some(i) = &info {
                    self.on_request_paused(p, i, now, &mut fx);
                }
            }
            "Page.javascriptDialogClosed" => {
                if let Some(i) = &info {
                    self.on_dialog_closed(p, i, now, &mut fx);
                }
            }
            "Runtime.consoleAPICalled" => self.on_console_api_called(p, ev.session_id.clone(), now),
            "Runtime.exceptionThrown" => self.on_exception_thrown(p, ev.session_id.clone(), now),
            "Runtime.executionContextCreated" => {
                if let Some(sid) = &ev.session_id {
                    self.on_context_created(sid, p);
                }
            }
            "Runtime.executionContextDestroyed" => {
                if let Some(sid) = &ev.session_id {
                    self.on_context_destroyed(sid, p);
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
            dialogs_opened: self.next_dialog.saturating_sub(1),
        }
    }
}

fn str_of(v: &Value, k: &str) -> String {
    v.get(k).and_then(Value::as_str).unwrap_or("").to_string()
}
