//! The frame tree: frames attached, navigated (a new loader) and detached
//! on the page, popup and OOPIF sessions, the `Page.getFrameTree` bootstrap,
//! and each session's main-world execution contexts per frame.

use super::{str_of, Frame, Kind, SessionInfo, State};
use cdp_transport::{ExecutionContextId, FrameId, LoaderId, Session, SessionId};
use serde_json::Value;

/// Where a frame lives (see [`State::frame_route`]).
pub(crate) struct FrameRoute {
    pub session: Option<Session>,
    pub oopif: bool,
    pub top: bool,
    pub parent: Option<FrameId>,
    pub ctx: Option<ExecutionContextId>,
}

impl State {
    pub(super) fn on_frame_attached(&mut self, p: &Value, i: &SessionInfo) {
        let id = FrameId::new(str_of(p, "frameId"));
        let parent = p
            .get("parentFrameId")
            .and_then(Value::as_str)
            .map(FrameId::new);
        self.upsert_frame(&id, parent, i, None);
    }

    pub(super) fn on_frame_navigated(
        &mut self,
        p: &Value,
        i: &SessionInfo,
        session_id: Option<&SessionId>,
    ) {
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
            if let Some(s) = session_id.and_then(|s| self.sessions.get_mut(s)) {
                s.url = str_of(f, "url");
            }
        }
    }

    pub(super) fn on_frame_detached(&mut self, p: &Value) {
        let id = FrameId::new(str_of(p, "frameId"));
        if str_of(p, "reason") != "swap" {
            self.remove_frame(&id);
        }
    }

    /// A session's default (main-world) context of a frame.
    pub(super) fn on_context_created(&mut self, sid: &SessionId, p: &Value) {
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

    pub(super) fn on_context_destroyed(&mut self, sid: &SessionId, p: &Value) {
        if let Some(id) = p.get("executionContextId").and_then(Value::as_i64) {
            if let Some(m) = self.contexts.get_mut(sid) {
                m.retain(|_, c| c.0 != id);
            }
        }
    }

    pub(super) fn upsert_frame(
        &mut self,
        id: &FrameId,
        parent: Option<FrameId>,
        owner: &SessionInfo,
        f: Option<&Value>,
    ) {
        // A frame event without a frame id names no frame (a malformed or
        // injected event): recording it would key a frame by "".
        if id.as_str().is_empty() || self.skipped_frames.contains(id) {
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

    pub(super) fn remove_descendants(&mut self, id: &FrameId) {
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

    pub(super) fn remove_frame(&mut self, id: &FrameId) {
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
}
