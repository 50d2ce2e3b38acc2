//! Collecting the per-frame AX trees over CDP and turning them into a [`Snapshot`].

use super::map::{RefEntry, RefMap};
use super::render::{self, JsonNode, RenderOptions};
use super::tree::{self, FrameAx, SnapshotNode, IFRAME_ROLE};
use crate::busy::{Unstick, BUSY_AFTER_MAX};
use crate::error::{Error, Result};
use crate::terminate::ACK_GRACE;
use cdp_transport::{Budget, Connection, FrameId, LoaderId, Session, SessionId, TargetId};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::{Duration, Instant};

/// Per session: frame id → loader id from `Page.getFrameTree`, and the session's own (root) frame.
type FrameTrees = HashMap<Option<SessionId>, FrameTree>;

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
    /// `: "text"` for folded text, `- "text"` for a text run, `h1`…`h6` for
    /// headings, strings cut at 70 characters with `…`; a truncation marker
    /// line when cut (format in the [`crate::refs`] module docs).
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
#[derive(Clone)]
pub struct AxSnapshotter {
    conn: Connection,
    page: Session,
    attached_page: bool,
    oopifs: Arc<Mutex<HashMap<TargetId, Session>>>,
    /// Holds an engine's evaluates while a termination sent here settles.
    hold: Option<crate::busy::SettleHook>,
    /// Given to the ref maps of this snapshotter's snapshots.
    facts: Option<Arc<dyn crate::PageFacts>>,
}

impl std::fmt::Debug for AxSnapshotter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AxSnapshotter")
            .field("page", &self.page)
            .field("attached_page", &self.attached_page)
            .field("facts", &self.facts.is_some())
            .finish_non_exhaustive()
    }
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
            hold: None,
            facts: None,
        })
    }

    /// A termination this snapshotter sends (a frame's renderer busy with
    /// its page's script) holds `engine`'s new evaluates until it is
    /// settled, as the engine's own do ([`crate::Engine::terminate`]): a
    /// termination that finds nothing running ends the next script of that
    /// process, which must not be the user's.
    /// The snapshotter also takes the engine's page facts
    /// ([`crate::Engine::set_facts`]) unless it has its own.
    pub fn with_engine(mut self, engine: &crate::Engine) -> Self {
        self.hold = Some(engine.absorb_hook());
        if self.facts.is_none() {
            self.facts = engine.facts();
        }
        self
    }

    /// Page facts (see [`crate::PageFacts`]): where a termination goes when
    /// a frame's renderer does not answer (without them, on the session the
    /// snapshot queried), and what the refs of this snapshotter's snapshots
    /// use instead of asking Chromium on each action.
    pub fn with_facts(mut self, facts: Arc<dyn crate::PageFacts>) -> Self {
        self.facts = Some(facts);
        self
    }

    /// Uses the caller's page session (not detached by [`AxSnapshotter::close`]).
    pub fn from_session(page: Session) -> Self {
        Self {
            conn: page.connection().clone(),
            page,
            attached_page: false,
            oopifs: Arc::default(),
            hold: None,
            facts: None,
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
    /// page session (sent together with its `Page.getFrameTree`); each
    /// `Iframe` node is mapped to its frame with
    /// `DOM.describeNode{backendNodeId}` (`frameId`); a frame listed by
    /// `Page.getFrameTree` on the same session is queried there with
    /// `frameId`, any other is an OOPIF: the target whose `targetId` equals
    /// the frame id (listed by `Target.getTargets`, sent only when an OOPIF
    /// has no cached session) is attached and queried on its own session
    /// (recursively, up to `opts.max_frame_depth`). Calls of one iframe level
    /// run concurrently. A child frame that fails (detached mid-walk, no
    /// target) is skipped with a note; the snapshot as a whole fails only
    /// when the main frame does or the budget ends. The raw trees are freed
    /// on the blocking pool after the build.
    ///
    /// A frame whose renderer does not answer a call for half the budget (at
    /// most [`crate::BUSY_AFTER_MAX`]) is busy with its page's own script:
    /// its target gets `Runtime.terminateExecution` once (on the session the
    /// page facts name, [`AxSnapshotter::with_facts`]), the
    /// walk goes on, and a note says so. Child frames end a fifth of the
    /// budget (at most 1 s) before the main frame, so a frame that stays
    /// stuck is skipped with a note.
    ///
    /// # Errors
    /// [`Error::Transport`] for a failed main-frame call or an expired or
    /// cancelled budget (its `source` says which); [`Error::PageBusy`] when
    /// the main frame had no answer at the deadline after a termination.
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
        // A renderer that does not answer is busy with its page's own
        // script: terminate it on that frame's session (see `busy`).
        let unstick = Unstick::new(
            &budget,
            BUSY_AFTER_MAX,
            self.hold.clone(),
            self.facts.clone(),
        );
        // Child frames end a little before the main frame, so a frame
        // whose renderer stays stuck is skipped with a note and the rest
        // of the page is still returned.
        let reserve = (budget.remaining() / 5).min(Duration::from_secs(1));
        let child_budget = budget.child(budget.remaining().saturating_sub(reserve));
        let mut frames: Vec<FrameInfo> = Vec::new();
        let mut axes: Vec<FrameAx> = Vec::new();
        let mut notes = Vec::new();
        // Per session: frame id -> loader id, and the session's own (root) frame.
        let mut trees: FrameTrees = HashMap::new();
        // One level of the frame tree at a time; every call within a level
        // runs concurrently, all under the one budget.
        let mut level = vec![Pending {
            session: self.page.clone(),
            frame_id: None,
            parent: None,
            depth: 0,
            is_oopif: false,
        }];
        while !level.is_empty() {
            let room = opts.max_frames.saturating_sub(frames.len());
            if level.len() > room {
                notes.push(format!(
                    "frame cap of {} reached: remaining frames skipped",
                    opts.max_frames
                ));
                level.truncate(room);
            }
            let fetched = join_all(
                level
                    .iter()
                    .map(|p| {
                        let need_tree = !trees.contains_key(&p.session.id().cloned());
                        let b = if p.parent.is_none() {
                            &budget
                        } else {
                            &child_budget
                        };
                        fetch_frame(p, need_tree, b, &unstick)
                    })
                    .collect(),
            )
            .await;
            // (frame index, session, iframe backend id, depth) of this level's iframes.
            let mut iframes = Vec::new();
            for (p, r) in level.iter().zip(fetched) {
                let main = frames.is_empty() && p.parent.is_none();
                let (tree, nodes) = match r {
                    Ok(x) => x,
                    Err(e) if main || budget.is_expired() || budget.is_cancelled() => {
                        return Err(busy_error(e, &unstick, &budget, start).await)
                    }
                    Err(e) => {
                        notes.push(format!(
                            "frame {} skipped: {e}",
                            p.frame_id.as_ref().map_or("(oopif)", FrameId::as_str)
                        ));
                        continue;
                    }
                };
                let key = p.session.id().cloned();
                if let Some(t) = tree {
                    trees.insert(key.clone(), t);
                }
                let idx = frames.len();
                if let Some((parent, backend)) = p.parent {
                    if let Some(pa) = axes.get_mut(parent) {
                        pa.iframes.insert(backend, idx);
                    }
                }
                let (info, iframe_nodes) = frame_info(p, &nodes, trees.get(&key));
                for backend in iframe_nodes {
                    if p.depth + 1 > opts.max_frame_depth {
                        notes.push(format!(
                            "iframe node {backend}: frame depth cap of {} reached",
                            opts.max_frame_depth
                        ));
                        continue;
                    }
                    iframes.push((idx, p.session.clone(), backend, p.depth + 1));
                }
                frames.push(info);
                axes.push(FrameAx {
                    nodes,
                    iframes: HashMap::new(),
                });
            }
            level = match self
                .child_frames(iframes, &trees, &mut notes, &child_budget, &unstick)
                .await
            {
                Ok(l) => l,
                Err(e) if budget.is_expired() || budget.is_cancelled() => {
                    return Err(busy_error(e, &unstick, &budget, start).await)
                }
                Err(e) => {
                    notes.push(format!("child frames skipped: {e}"));
                    Vec::new()
                }
            };
        }
        if unstick.fired() {
            unstick.settled(ACK_GRACE.min(budget.remaining())).await;
            notes.extend(unstick.note());
        }
        // Iframe maps were filled as children were fetched.
        let mut snapshot =
            Snapshot::from_parts(self.page.clone(), frames, &axes, notes, start.elapsed());
        snapshot.refs.set_facts(self.facts.clone());
        drop_later(axes);
        Ok(snapshot)
    }

    /// Maps iframe nodes to the frames to fetch next: `DOM.describeNode` for
    /// all of them at once, then the OOPIF sessions (cached or attached) at once.
    async fn child_frames(
        &self,
        iframes: Vec<(usize, Session, i64, usize)>,
        trees: &FrameTrees,
        notes: &mut Vec<String>,
        budget: &Budget,
        unstick: &Unstick,
    ) -> Result<Vec<Pending>> {
        let described = join_all(
            iframes
                .iter()
                .map(|(_, session, backend, _)| {
                    unstick.call(
                        session,
                        "DOM.describeNode",
                        json!({"backendNodeId": backend}),
                        budget,
                    )
                })
                .collect(),
        )
        .await;
        let mut next = Vec::new();
        let mut oopifs = Vec::new();
        for ((idx, session, backend, depth), d) in iframes.into_iter().zip(described) {
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
            let known = trees
                .get(&session.id().cloned())
                .is_some_and(|t| t.0.contains_key(&frame_id));
            if known {
                next.push(Pending {
                    session,
                    frame_id: Some(frame_id),
                    parent: Some((idx, backend)),
                    depth,
                    is_oopif: false,
                });
            } else {
                // Not in this session's frame tree: an OOPIF with its own target.
                oopifs.push((idx, backend, depth, frame_id));
            }
        }
        // Chromium creates the DevTools host of an OOPIF target on
        // `Target.getTargets`; `attachToTarget` alone does not find it. So a
        // frame with no cached session costs one `getTargets` per level.
        let uncached = oopifs
            .iter()
            .any(|(_, _, _, frame_id)| self.cached_oopif(frame_id).is_none());
        let targets = if uncached {
            let v = self
                .conn
                .browser()
                .call("Target.getTargets", json!({}), budget.clone())
                .await
                .map_err(|e| Error::transport("Target.getTargets", e))?;
            v.get("targetInfos")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|t| Some(TargetId::new(t.get("targetId")?.as_str()?)))
                        .collect()
                })
                .unwrap_or_default()
        } else {
            HashSet::new()
        };
        let sessions = join_all(
            oopifs
                .iter()
                .map(|(_, _, _, frame_id)| self.oopif_session(frame_id, &targets, budget))
                .collect(),
        )
        .await;
        for ((idx, backend, depth, frame_id), s) in oopifs.into_iter().zip(sessions) {
            match s {
                Ok(Some(s)) => next.push(Pending {
                    session: s,
                    frame_id: None,
                    parent: Some((idx, backend)),
                    depth,
                    is_oopif: true,
                }),
                Ok(None) => notes.push(format!(
                    "frame {frame_id} skipped: no frame tree entry and no target"
                )),
                Err(e) if budget.is_expired() || budget.is_cancelled() => return Err(e),
                Err(e) => notes.push(format!("frame {frame_id} skipped: {e}")),
            }
        }
        Ok(next)
    }

    /// The cached, still open session of the OOPIF whose frame id is `frame_id`.
    fn cached_oopif(&self, frame_id: &FrameId) -> Option<Session> {
        let tid = TargetId::new(frame_id.as_str());
        self.oopifs
            .lock()
            .ok()
            .and_then(|m| m.get(&tid).cloned())
            .filter(|s| s.closed_reason().is_none())
    }

    /// The (cached or newly attached) session of the OOPIF target for
    /// `frame_id` (an OOPIF's target id is its frame id); `None` when no
    /// cached session exists and `targets` does not list it.
    async fn oopif_session(
        &self,
        frame_id: &FrameId,
        targets: &HashSet<TargetId>,
        budget: &Budget,
    ) -> Result<Option<Session>> {
        if let Some(s) = self.cached_oopif(frame_id) {
            return Ok(Some(s));
        }
        let tid = TargetId::new(frame_id.as_str());
        if !targets.contains(&tid) {
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

/// The error of a snapshot that failed with `e` at its deadline: when a
/// renderer-bound command had no answer and its session was sent
/// `Runtime.terminateExecution` ([`Unstick`]), `page_busy` (after at most
/// [`ACK_GRACE`] for the termination to settle); else `e`.
async fn busy_error(e: Error, unstick: &Unstick, budget: &Budget, start: Instant) -> Error {
    let timed_out = matches!(&e, Error::Transport { source, .. } if source.is_timeout());
    if !timed_out || !unstick.fired() {
        return e;
    }
    unstick.settled(ACK_GRACE).await;
    Error::PageBusy {
        method: unstick.first_method().unwrap_or_default(),
        budget: budget.total(),
        elapsed: start.elapsed(),
        stopped: unstick.stopped_a_script(),
        consequence: "no snapshot was taken; call again".into(),
    }
}

/// One session's frame tree: frame id → loader id, and the session's root frame.
type FrameTree = (HashMap<FrameId, LoaderId>, Option<FrameId>);

/// Fetches one frame's AX tree (`nodes`, moved out of the reply, not copied)
/// and, when `need_tree`, its session's `Page.getFrameTree`, both at once.
async fn fetch_frame(
    p: &Pending,
    need_tree: bool,
    budget: &Budget,
    unstick: &Unstick,
) -> Result<(Option<FrameTree>, Vec<Value>)> {
    let params = match &p.frame_id {
        Some(f) => json!({"frameId": f.as_str()}),
        None => json!({}),
    };
    let ax = unstick.call(&p.session, "Accessibility.getFullAXTree", params, budget);
    let tree = async {
        if !need_tree {
            return Ok(None);
        }
        let v = unstick
            .call(&p.session, "Page.getFrameTree", json!({}), budget)
            .await
            .map_err(|e| Error::transport("Page.getFrameTree", e))?;
        let mut map = HashMap::new();
        collect_loaders(v.get("frameTree").unwrap_or(&Value::Null), &mut map);
        let root = v
            .pointer("/frameTree/frame/id")
            .and_then(Value::as_str)
            .map(FrameId::new);
        Ok(Some((map, root)))
    };
    let (ax, tree) = tokio::join!(ax, tree);
    let tree = tree?;
    let v = ax.map_err(|e| Error::transport("Accessibility.getFullAXTree", e))?;
    let nodes = match v {
        Value::Object(mut m) => match m.remove("nodes") {
            Some(Value::Array(a)) => Some(a),
            _ => None,
        },
        _ => None,
    };
    let Some(nodes) = nodes else {
        return Err(Error::UnexpectedReply {
            method: "Accessibility.getFullAXTree".into(),
            detail: "no nodes array".into(),
        });
    };
    Ok((tree, nodes))
}

/// The frame's [`FrameInfo`] and the backend ids of its non-ignored `Iframe` nodes.
fn frame_info(p: &Pending, nodes: &[Value], tree: Option<&FrameTree>) -> (FrameInfo, Vec<i64>) {
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
        .or_else(|| tree.and_then(|t| t.1.clone()))
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
        loader_id: tree.and_then(|t| t.0.get(&frame_id).cloned()),
        frame_id,
        session_id: p.session.id().cloned(),
        is_oopif: p.is_oopif,
        parent: p.parent.map(|(i, _)| i),
        session: p.session.clone(),
        root_backend,
    };
    (info, iframes)
}

/// Polls `futs` together on the caller's task and returns their outputs in
/// order. Cancel safe: dropping it drops every future.
async fn join_all<F: Future>(futs: Vec<F>) -> Vec<F::Output> {
    let mut futs: Vec<Pin<Box<F>>> = futs.into_iter().map(Box::pin).collect();
    let mut out: Vec<Option<F::Output>> = futs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (f, o) in futs.iter_mut().zip(out.iter_mut()) {
            if o.is_none() {
                match f.as_mut().poll(cx) {
                    Poll::Ready(v) => *o = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

/// Drops the raw AX trees (many small allocations: tens of milliseconds on a
/// large page in a debug build) on the blocking pool, off the caller's path.
fn drop_later<T: Send + 'static>(v: T) {
    match tokio::runtime::Handle::try_current() {
        Ok(h) => drop(h.spawn_blocking(move || drop(v))),
        Err(_) => drop(v),
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
