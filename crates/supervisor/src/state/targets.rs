//! Sessions and targets: the page, popups (attached by the target gate or
//! after `Target.targetCreated`), OOPIF and other child sessions, detaches
//! and crashes.

use super::{str_of, Effect, Frame, Kind, Now, SessionInfo, State};
use crate::view::MAX_OOPIF_DEPTH;
use cdp_transport::{Event, FrameId, SessionId, TargetId};
use serde_json::Value;
use tracing::debug;

impl State {
    /// `Target.targetCreated` / `Target.targetInfoChanged` at browser level:
    /// without the target gate, a new page target opened by our page or one
    /// of our popups is attached; a popup's URL is kept current.
    pub(super) fn on_target_info(&mut self, ev: &Event, fx: &mut Vec<Effect>) {
        let ti = &ev.params["targetInfo"];
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

    fn is_our_target(&self, t: &str) -> bool {
        self.target_id.as_str() == t
            || self
                .sessions
                .values()
                .any(|s| matches!(s.kind, Kind::Popup) && s.target_id.as_str() == t)
    }

    /// `Inspector.targetCrashed` on one of our sessions: the page's crash
    /// makes the supervisor inactive; a popup's retires its dialogs.
    pub(super) fn on_inspector_crashed(&mut self, i: &SessionInfo, now: Now) {
        if i.kind == Kind::Page {
            self.crashed = true;
            self.set_inactive("target crashed", now);
        } else if i.kind == Kind::Popup {
            let r = i.root.clone();
            self.retire_all(Some(&r), now);
        }
    }

    pub(super) fn revive(&mut self) {
        self.crashed = false;
        if self.reason.as_deref() == Some("target crashed") {
            self.active = true;
            self.reason = None;
        }
    }

    pub(super) fn on_attached(
        &mut self,
        ev: &Event,
        parent: Option<&SessionInfo>,
        fx: &mut Vec<Effect>,
    ) {
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

    pub(super) fn on_detached(&mut self, sid: &SessionId, now: Now, fx: &mut Vec<Effect>) {
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
                self.retire_all(Some(sid), now);
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
        self.retire_paused_on(sid, now);
    }

    fn drop_session(&mut self, sid: &SessionId) {
        self.sessions.remove(sid);
        self.contexts.remove(sid);
    }
}
