//! Collecting the per-frame AX trees over CDP and turning them into a [`Snapshot`].

use super::map::{RefEntry, RefMap};
use super::render::{self, JsonNode, RenderOptions};
use super::tree::{self, FrameAx, SnapshotNode, IFRAME_ROLE};
use crate::error::{Error, Result};
use cdp_transport::{Budget, Connection, FrameId, LoaderId, Session, SessionId, TargetId};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Per session: frame id → loader id from `Page.getFrameTree`, and the session's own (root) frame.
type FrameTrees = HashMap<Option<SessionId>, (HashMap<FrameId, LoaderId>, Option<FrameId>)>;

/// Limits of one snapshot walk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SnapshotOptions {
    /// How many iframe levels below the main frame are walked (default 4).
    pub max_frame_depth: usize,
    /// How many frames are walked in all, the main frame included (default 64).
    pub max_frames: usize,
}

impl Default for SnapshotOptions {
    fn default() -> Self {
        Self {
            max_frame_depth: 4,
            max_frames: 64,
        }
    }
}

/// One frame the snapshot walked.
#[derive(Debug, Clone, Serialize)]
pub struct FrameInfo {
    /// `Page.FrameId`.
    pub frame_id: FrameId,
    /// `loaderId` of the frame's document when the snapshot was taken
    /// (from `Page.getFrameTree` on the session that owns the frame).
    pub loader_id: Option<LoaderId>,
    /// The session the frame's tree was fetched on (`None`: the browser session, never in practice).
    pub session_id: Option<SessionId>,
    /// True when the frame is an OOPIF with its own target and session.
    pub is_oopif: bool,
    /// The parent frame's index in [`Snapshot::frames`] (`None` for the main frame).
    pub parent: Option<usize>,
    #[serde(skip)]
    pub(crate) session: Session,
    #[serde(skip)]
    pub(crate) root_backend: Option<cdp_transport::BackendNodeId>,
}

/// An AX snapshot of a page and its frames: the tree, its refs, and notes
/// about frames that could not be walked.
#[derive(Debug, Clone)]
pub struct Snapshot {
    nodes: Vec<SnapshotNode>,
    refs: RefMap,
    frames: Vec<FrameInfo>,
    notes: Vec<String>,
    elapsed: Duration,
}

/// A snapshot rendered with [`RenderOptions`].
#[derive(Debug, Clone)]
pub struct RenderedSnapshot {
    /// One line per node: 2 spaces per depth, `- role "name" [states] [ref=eN] [nth=N]`,
    /// `: "text"` for folded text; a truncation marker line when cut.
    pub text: String,
    /// The same lines as a nested JSON-serializable tree.
    pub json: Vec<JsonNode>,
    /// True when the character cap cut lines.
    pub truncated: bool,
    /// Exactly the refs on the kept lines.
    pub refs: RefMap,
}

impl Snapshot {
    /// The whole tree (no render options applied).
    pub fn nodes(&self) -> &[SnapshotNode] {
        &self.nodes
    }
    /// Every ref of the whole tree.
    pub fn refs(&self) -> &RefMap {
        &self.refs
    }
    /// The frames walked; index 0 is the main frame.
    pub fn frames(&self) -> &[FrameInfo] {
        &self.frames
    }
    /// Frames skipped and why (detached mid-walk, no target, over a cap).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }
    /// Time the snapshot took.
    pub fn elapsed(&self) -> Duration {
        self.elapsed
    }
    /// Renders the text and JSON forms; the returned ref map holds only the
    /// refs on kept lines (refs on lines cut by `max_chars` or `max_depth`,
    /// or left out by `interactive_only`, are dropped).
    pub fn render(&self, opts: &RenderOptions) -> RenderedSnapshot {
        let lines = render::lines(&self.nodes, opts);
        let (text, kept, truncated) = render::text_of(&lines, opts.max_chars);
        let kept_lines = lines.get(..kept).unwrap_or(&lines);
        let keep: HashSet<&str> = kept_lines
            .iter()
            .filter_map(|l| l.node.ref_id.as_deref())
            .collect();
        let refs = self.refs.retain(|r| keep.contains(r));
        RenderedSnapshot {
            text,
            json: render::json_of(kept_lines),
            truncated,
            refs,
        }
    }
    /// The full text form (`render(&RenderOptions::default()).text`).
    pub fn text(&self) -> String {
        self.render(&RenderOptions::default()).text
    }

    /// Builds a snapshot from already fetched frames (pure; used by tests and
    /// by [`AxSnapshotter::snapshot`]). `frames[i]` and `axes[i]` describe the same frame.
    pub(crate) fn from_parts(
        page: Session,
        frames: Vec<FrameInfo>,
        axes: &[FrameAx],
        notes: Vec<String>,
        elapsed: Duration,
    ) -> Self {
        let (nodes, drafts) = tree::build(axes);
        let entries = drafts
            .into_iter()
            .filter_map(|d| {
                let f = frames.get(d.frame)?;
                Some(RefEntry {
                    ref_id: d.ref_id,
                    role: d.role,
                    name: d.name,
                    nth: d.nth,
                    backend_node_id: d.backend,
                    frame_id: f.frame_id.clone(),
                    session_id: f.session_id.clone(),
                    loader_id: f.loader_id.clone(),
                    session: f.session.clone(),
                    frame_root: f.root_backend,
                    frame_nth: d.frame_nth,
                })
            })
            .collect();
        Self {
            nodes,
            refs: RefMap::new(page, entries),
            frames,
            notes,
            elapsed,
        }
    }
}

/// Takes AX snapshots of one page target and its frames.
///
/// Holds the page session and the OOPIF sessions it attached (cached by
/// target id and reused while alive), so refs stay actionable after the
/// snapshot. [`AxSnapshotter::close`] detaches what it attached.
#[derive(Debug, Clone)]
pub struct AxSnapshotter {
    conn: Connection,
    page: Session,
    attached_page: bool,
    oopifs: Arc<Mutex<HashMap<TargetId, Session>>>,
}

struct Pending {
    session: Session,
    /// `Some` for a same-process child frame (queried with `frameId`).
    frame_id: Option<FrameId>,
    parent: Option<(usize, i64)>,
    depth: usize,
    is_oopif: bool,
}

impl AxSnapshotter {
    /// Attaches a session of its own to the page target `target`
    /// (`Target.attachToTarget{flatten:true}`).
    ///
    /// # Errors
    /// [`Error::Transport`] when the attach fails (unknown target, budget).
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped future may leave the target attached.
    pub async fn attach(
        conn: &Connection,
        target: &TargetId,
        budget: impl Into<Budget>,
    ) -> Result<Self> {
        let budget = budget.into();
        let page = conn
            .attach(target, budget.clone())
            .await
            .map_err(|e| Error::transport(format!("attaching to page target {target}"), e))?;
        Ok(Self {
            conn: conn.clone(),
            page,
            attached_page: true,
            oopifs: Arc::default(),
        })
    }

    /// Uses the caller's page session (not detached by [`AxSnapshotter::close`]).
    pub fn from_session(page: Session) -> Self {
        Self {
            conn: page.connection().clone(),
            page,
            attached_page: false,
            oopifs: Arc::default(),
        }
    }

    /// The page session snapshots and page-level actions use.
    pub fn page_session(&self) -> &Session {
        &self.page
    }

    /// Detaches the OOPIF sessions this snapshotter attached, and the page
    /// session when [`AxSnapshotter::attach`] made it. Refs using them stop working.
    ///
    /// # Cancel safety
    /// Cancel safe: every detach closes its routing entry before awaiting.
    pub async fn close(&self, budget: impl Into<Budget>) {
        let budget = budget.into();
        let sessions: Vec<Session> = match self.oopifs.lock() {
            Ok(mut m) => m.drain().map(|(_, s)| s).collect(),
            Err(_) => Vec::new(),
        };
        for s in sessions {
            let _ = s.detach(budget.clone()).await;
        }
        if self.attached_page {
            let _ = self.page.detach(budget).await;
        }
    }

    /// Takes a snapshot of the page and every frame in it, with refs.
    ///
    /// The main frame's tree comes from `Accessibility.getFullAXTree` on the
    /// page session; each `Iframe` node is mapped to its frame with
    /// `DOM.describeNode{backendNodeId}` (`frameId`); a frame listed by
    /// `Page.getFrameTree` on the same session is queried there with
    /// `frameId`, any other is an OOPIF: the target whose `targetId` equals
    /// the frame id is attached and queried on its own session (recursively,
    /// up to `opts.max_frame_depth`). A child frame that fails (detached
    /// mid-walk, no target) is skipped with a note; the snapshot as a whole
    /// fails only when the main frame does or the budget ends.
    ///
    /// # Errors
    /// [`Error::Transport`] for a failed main-frame call or an expired or
    /// cancelled budget (its `source` says which).
    ///
    /// # Cancel safety
    /// Cancel safe for the page; OOPIF sessions attached before the drop stay
    /// cached in this snapshotter and are detached by [`AxSnapshotter::close`].
    pub async fn snapshot(
        &self,
        opts: &SnapshotOptions,
        budget: impl Into<Budget>,
    ) -> Result<Snapshot> {
        let budget = budget.into();
        let start = Instant::now();
        let mut frames: Vec<FrameInfo> = Vec::new();
        let mut axes: Vec<FrameAx> = Vec::new();
        let mut notes = Vec::new();
        // Per session: frame id -> loader id, and the session's own (root) frame.
        let mut trees: FrameTrees = HashMap::new();
        let mut targets: Option<Vec<(TargetId, String)>> = None;
        let mut queue = std::collections::VecDeque::from([Pending {
            session: self.page.clone(),
            frame_id: None,
            parent: None,
            depth: 0,
            is_oopif: false,
        }]);
        while let Some(p) = queue.pop_front() {
            if frames.len() >= opts.max_frames {
                notes.push(format!(
                    "frame cap of {} reached: remaining frames skipped",
                    opts.max_frames
                ));
                break;
            }
            let main = frames.is_empty();
            let r = self.fetch_frame(&p, &mut trees, &budget).await;
            let (info, mut ax, iframe_nodes) = match r {
                Ok(x) => x,
                Err(e) if main || budget.is_expired() || budget.is_cancelled() => return Err(e),
                Err(e) => {
                    notes.push(format!(
                        "frame {} skipped: {e}",
                        p.frame_id.as_ref().map_or("(oopif)", FrameId::as_str)
                    ));
                    continue;
                }
            };
            let idx = frames.len();
            if let Some((parent, backend)) = p.parent {
                if let Some(pa) = axes.get_mut(parent) {
                    pa.iframes.insert(backend, idx);
                }
            }
            ax.iframes.clear();
            let mut info = info;
            info.parent = p.parent.map(|(i, _)| i);
            info.is_oopif = p.is_oopif;
            let session = info.session.clone();
            let known = trees
                .get(&session.id().cloned())
                .map(|t| t.0.clone())
                .unwrap_or_default();
            frames.push(info);
            axes.push(ax);
            for backend in iframe_nodes {
                if p.depth + 1 > opts.max_frame_depth {
                    notes.push(format!(
                        "iframe node {backend}: frame depth cap of {} reached",
                        opts.max_frame_depth
                    ));
                    continue;
                }
                let d = session
                    .call(
                        "DOM.describeNode",
                        json!({"backendNodeId": backend}),
                        budget.clone(),
                    )
                    .await;
                let frame_id = match d {
                    Ok(v) => v
                        .pointer("/node/frameId")
                        .and_then(Value::as_str)
                        .map(FrameId::new),
                    Err(e) if budget.is_expired() || budget.is_cancelled() => {
                        return Err(Error::transport("DOM.describeNode", e));
                    }
                    Err(e) => {
                        notes.push(format!("iframe node {backend} skipped: {e}"));
                        continue;
                    }
                };
                let Some(frame_id) = frame_id else {
                    notes.push(format!("iframe node {backend} has no frame"));
                    continue;
                };
                if known.contains_key(&frame_id) {
                    queue.push_back(Pending {
                        session: session.clone(),
                        frame_id: Some(frame_id),
                        parent: Some((idx, backend)),
                        depth: p.depth + 1,
                        is_oopif: false,
                    });
                    continue;
                }
                // Not in this session's frame tree: an OOPIF with its own target.
                match self.oopif_session(&frame_id, &mut targets, &budget).await {
                    Ok(Some(s)) => queue.push_back(Pending {
                        session: s,
                        frame_id: None,
                        parent: Some((idx, backend)),
                        depth: p.depth + 1,
                        is_oopif: true,
                    }),
                    Ok(None) => notes.push(format!(
                        "frame {frame_id} skipped: no frame tree entry and no target"
                    )),
                    Err(e) if budget.is_expired() || budget.is_cancelled() => return Err(e),
                    Err(e) => notes.push(format!("frame {frame_id} skipped: {e}")),
                }
            }
        }
        // Iframe maps were filled as children were fetched.
        Ok(Snapshot::from_parts(
            self.page.clone(),
            frames,
            &axes,
            notes,
            start.elapsed(),
        ))
    }

    /// Fetches one frame's AX tree; returns its info, its nodes and the
    /// backend ids of its non-ignored `Iframe` nodes.
    async fn fetch_frame(
        &self,
        p: &Pending,
        trees: &mut FrameTrees,
        budget: &Budget,
    ) -> Result<(FrameInfo, FrameAx, Vec<i64>)> {
        let key = p.session.id().cloned();
        if !trees.contains_key(&key) {
            let v = p
                .session
                .call("Page.getFrameTree", json!({}), budget.clone())
                .await
                .map_err(|e| Error::transport("Page.getFrameTree", e))?;
            let mut map = HashMap::new();
            collect_loaders(v.get("frameTree").unwrap_or(&Value::Null), &mut map);
            let root = v
                .pointer("/frameTree/frame/id")
                .and_then(Value::as_str)
                .map(FrameId::new);
            trees.insert(key.clone(), (map, root));
        }
        let params = match &p.frame_id {
            Some(f) => json!({"frameId": f.as_str()}),
            None => json!({}),
        };
        let v = p
            .session
            .call("Accessibility.getFullAXTree", params, budget.clone())
            .await
            .map_err(|e| Error::transport("Accessibility.getFullAXTree", e))?;
        let nodes = match v.get("nodes") {
            Some(Value::Array(a)) => a.clone(),
            _ => {
                return Err(Error::UnexpectedReply {
                    method: "Accessibility.getFullAXTree".into(),
                    detail: "no nodes array".into(),
                })
            }
        };
        let (loaders, session_root) = trees.get(&key).cloned().unwrap_or_default();
        let root = nodes
            .iter()
            .find(|n| n.get("parentId").is_none_or(Value::is_null));
        let frame_id = p
            .frame_id
            .clone()
            .or_else(|| {
                root.and_then(|r| r.get("frameId"))
                    .and_then(Value::as_str)
                    .map(FrameId::new)
            })
            .or(session_root)
            .unwrap_or_else(|| FrameId::new(""));
        let root_backend = root
            .and_then(|r| r.get("backendDOMNodeId"))
            .and_then(Value::as_i64)
            .map(cdp_transport::BackendNodeId);
        let iframes = nodes
            .iter()
            .filter(|n| {
                tree::role_of(n) == IFRAME_ROLE
                    && !n.get("ignored").and_then(Value::as_bool).unwrap_or(false)
            })
            .filter_map(|n| n.get("backendDOMNodeId").and_then(Value::as_i64))
            .collect();
        let info = FrameInfo {
            loader_id: loaders.get(&frame_id).cloned(),
            frame_id,
            session_id: key,
            is_oopif: false,
            parent: None,
            session: p.session.clone(),
            root_backend,
        };
        Ok((
            info,
            FrameAx {
                nodes,
                iframes: HashMap::new(),
            },
            iframes,
        ))
    }

    /// The (cached or newly attached) session of the OOPIF target for `frame_id`.
    async fn oopif_session(
        &self,
        frame_id: &FrameId,
        targets: &mut Option<Vec<(TargetId, String)>>,
        budget: &Budget,
    ) -> Result<Option<Session>> {
        let tid = TargetId::new(frame_id.as_str());
        let cached = self.oopifs.lock().ok().and_then(|m| m.get(&tid).cloned());
        if let Some(s) = cached {
            if s.closed_reason().is_none() {
                return Ok(Some(s));
            }
        }
        if targets.is_none() {
            let v = self
                .conn
                .browser()
                .call("Target.getTargets", json!({}), budget.clone())
                .await
                .map_err(|e| Error::transport("Target.getTargets", e))?;
            let list = v
                .get("targetInfos")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|t| {
                            let id = t.get("targetId")?.as_str()?;
                            let ty = t.get("type").and_then(Value::as_str).unwrap_or("");
                            Some((TargetId::new(id), ty.to_string()))
                        })
                        .collect()
                })
                .unwrap_or_default();
            *targets = Some(list);
        }
        let found = targets
            .as_ref()
            .is_some_and(|l| l.iter().any(|(id, _)| *id == tid));
        if !found {
            return Ok(None);
        }
        let s = self
            .conn
            .attach(&tid, budget.clone())
            .await
            .map_err(|e| Error::transport(format!("attaching to OOPIF target {tid}"), e))?;
        if let Ok(mut m) = self.oopifs.lock() {
            m.insert(tid, s.clone());
        }
        Ok(Some(s))
    }
}

fn collect_loaders(tree: &Value, out: &mut HashMap<FrameId, LoaderId>) {
    if let (Some(id), Some(loader)) = (
        tree.pointer("/frame/id").and_then(Value::as_str),
        tree.pointer("/frame/loaderId").and_then(Value::as_str),
    ) {
        out.insert(FrameId::new(id), LoaderId::new(loader));
    }
    if let Some(children) = tree.get("childFrames").and_then(Value::as_array) {
        for c in children {
            collect_loaders(c, out);
        }
    }
}

/// The loader id of `frame_id` in `Page.getFrameTree` on `session`; `None` when the frame is not there.
pub(crate) async fn current_loader(
    session: &Session,
    frame_id: &FrameId,
    budget: &Budget,
) -> Result<Option<LoaderId>> {
    let v = session
        .call("Page.getFrameTree", json!({}), budget.clone())
        .await
        .map_err(|e| Error::transport("Page.getFrameTree", e))?;
    let mut map = HashMap::new();
    collect_loaders(v.get("frameTree").unwrap_or(&Value::Null), &mut map);
    Ok(map.remove(frame_id))
}
