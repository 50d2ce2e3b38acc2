//! Table tests of the state machine: `inputs in (with times) → view and
//! effects out`.
//!
//! A row is a name, a setup (policy, bridge mode, target gate), the inputs
//! (CDP events, and the supervisor's answer bookkeeping: an answer begun, its
//! reply, the watchdog firing), each at a time in milliseconds after the
//! row's start, and the values expected out: JSON pointers into the
//! [`Outcome`] (the final view, every step's effects, and the state behind the
//! view: frames with their owner, loader and context, sessions, swallowed
//! close events). One driver, [`table`], runs every row on a fresh [`State`]
//! with the clock passed in, checks the row's expectations, and pins the
//! whole outcome with an insta snapshot (`snapshots/`).
//!
//! The rows are grouped by job: [`dialogs`] (native dialogs: opening, closed
//! by agent, policy, watchdog or remote, answers refused or lost), [`bridge`]
//! (bridge dialogs and `bridge: auto`), [`frames`] (frames, loaders, the
//! frame tree bootstrap, execution contexts), [`targets`] (OOPIFs, popups with
//! and without the target gate, crashes, detaches), [`runtime`] (console
//! errors, unknown and garbage events).

mod bridge;
mod dialogs;
mod frames;
mod runtime;
mod targets;

use super::dialogs::Answer;
use super::{Effect, Now, State};
use crate::config::{BridgeMode, DialogPolicy};
use crate::gate::{Gate, GateLink};
use crate::view::ClosedBy;
use bridge_script::Bridge;
use cdp_transport::{ConnectOptions, Connection, Event, SessionId, TargetId};
use serde_json::{json, Map, Value};
use std::collections::HashSet;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// The wall clock at a row's start (`t = 0`): timestamps in the view read
/// `BASE_MS + t`.
const BASE_MS: u64 = 1_000_000;
/// The bridge token of every row.
const TOKEN: &str = "table-token";
/// The `must_respond` timeout of every row.
const DIALOG_TIMEOUT: Duration = Duration::from_secs(30);
/// An expected value meaning "no such value" (the pointer finds nothing).
const ABSENT: &str = "<absent>";

/// One input, at `t` milliseconds after the row's start.
#[derive(Clone)]
enum Step {
    /// A CDP event on a session (`None`: the browser session).
    Ev(u64, &'static str, Option<&'static str>, Value),
    /// An answer begins (the agent's `respond`, the policy's or the
    /// watchdog's answer): [`State::pick_dialog`] then [`State::begin_answer`].
    Answer {
        t: u64,
        id: Option<&'static str>,
        by: ClosedBy,
        accept: bool,
        prompt: Option<&'static str>,
    },
    /// The reply to the answer begun last: success.
    Replied(u64),
    /// The reply to the answer begun last: an error (a protocol error or not).
    Failed(u64, bool),
    /// The watchdog of a dialog fires: when nobody answers it, it dismisses it.
    Watchdog(u64, &'static str),
    /// The supervisor goes inactive (stopped, or its socket is gone).
    Inactive(u64, &'static str),
    /// Re-attached after a reconnect, with a new page session.
    Reset(u64, &'static str),
    /// A `Page.getFrameTree` result (its `frameTree`) on a session.
    Tree(u64, &'static str, Value),
}

struct Row {
    name: &'static str,
    policy: DialogPolicy,
    bridge: BridgeMode,
    /// Join the connection's target gate, with our page as an opener.
    gate: bool,
    steps: Vec<Step>,
    expect: Vec<(&'static str, Value)>,
}

fn row(name: &'static str) -> Row {
    Row {
        name,
        policy: DialogPolicy::MustRespond,
        bridge: BridgeMode::Off,
        gate: false,
        steps: Vec::new(),
        expect: Vec::new(),
    }
}

impl Row {
    fn policy(mut self, p: DialogPolicy) -> Self {
        self.policy = p;
        self
    }
    fn bridge(mut self, b: BridgeMode) -> Self {
        self.bridge = b;
        self
    }
    fn gate(mut self) -> Self {
        self.gate = true;
        self
    }
    fn steps(mut self, s: Vec<Step>) -> Self {
        self.steps = s;
        self
    }
    fn expect(mut self, e: Vec<(&'static str, Value)>) -> Self {
        self.expect = e;
        self
    }
}

// Inputs.

/// An event on the page session `PAGE`.
fn page(t: u64, method: &'static str, params: Value) -> Step {
    Step::Ev(t, method, Some("PAGE"), params)
}
/// An event on session `sid`.
fn on(t: u64, sid: &'static str, method: &'static str, params: Value) -> Step {
    Step::Ev(t, method, Some(sid), params)
}
/// An event on the browser session.
fn browser(t: u64, method: &'static str, params: Value) -> Step {
    Step::Ev(t, method, None, params)
}
fn agent(t: u64, id: Option<&'static str>, accept: bool, prompt: Option<&'static str>) -> Step {
    Step::Answer {
        t,
        id,
        by: ClosedBy::Agent,
        accept,
        prompt,
    }
}
fn policy_answer(t: u64, id: &'static str, accept: bool, prompt: Option<&'static str>) -> Step {
    Step::Answer {
        t,
        id: Some(id),
        by: ClosedBy::AutoPolicy,
        accept,
        prompt,
    }
}

/// `Page.frameNavigated` params.
fn nav(id: &str, parent: Option<&str>, url: &str, loader: &str) -> Value {
    let origin = url.split('/').take(3).collect::<Vec<_>>().join("/");
    let mut f = json!({"id": id, "loaderId": loader, "url": url, "securityOrigin": origin});
    if let Some(p) = parent {
        f["parentId"] = json!(p);
    }
    json!({"frame": f, "type": "Navigation"})
}
/// The page's main frame `MAIN` navigated to `http://a.test/` (loader `L1`).
fn main_frame(t: u64) -> Step {
    page(
        t,
        "Page.frameNavigated",
        nav("MAIN", None, "http://a.test/", "L1"),
    )
}
fn frame_attached(t: u64, sid: &'static str, id: &str, parent: &str) -> Step {
    on(
        t,
        sid,
        "Page.frameAttached",
        json!({"frameId": id, "parentFrameId": parent}),
    )
}
/// `Target.attachedToTarget` params.
fn attached(sid: &str, tid: &str, ttype: &str, url: &str, paused: bool) -> Value {
    json!({
        "sessionId": sid,
        "targetInfo": {"targetId": tid, "type": ttype, "url": url, "attached": true},
        "waitingForDebugger": paused,
    })
}
/// A browser-level attach of page target `tid` opened by `opener`.
fn popup_attached(sid: &str, tid: &str, opener: &str, paused: bool) -> Value {
    let mut v = attached(sid, tid, "page", "http://p.test/", paused);
    v["targetInfo"]["openerId"] = json!(opener);
    v
}
/// The OOPIF `X` (session `SX`, `http://b.test/x`) attached paused under `MAIN`.
fn oopif(t: u64) -> Vec<Step> {
    vec![
        frame_attached(t, "PAGE", "X", "MAIN"),
        page(
            t,
            "Target.attachedToTarget",
            attached("SX", "X", "iframe", "http://b.test/x", true),
        ),
    ]
}
fn detached(sid: &str) -> Value {
    json!({"sessionId": sid})
}
/// `Page.javascriptDialogOpening` params.
fn opening(kind: &str, message: &str) -> Value {
    json!({"type": kind, "message": message, "url": "http://a.test/", "hasBrowserHandler": true})
}
fn closed(result: bool) -> Value {
    json!({"result": result, "userInput": ""})
}
/// `Fetch.requestPaused` of a bridge request (`query` after the prefix).
fn paused(rid: &str, query: &str, frame: &str) -> Value {
    let prefix = Bridge::with_token(TOKEN).expect("token").url_prefix();
    json!({
        "requestId": rid,
        "frameId": frame,
        "resourceType": "XHR",
        "request": {"url": format!("{prefix}{query}"), "method": "GET", "headers": {}},
    })
}
fn context(id: i64, frame: &str, default: bool) -> Value {
    json!({"context": {"id": id, "origin": "", "name": "", "auxData": {"isDefault": default, "frameId": frame}}})
}

// The driver.

/// The clocks at `t` milliseconds after `start`.
fn at(start: Instant, t: u64) -> Now {
    Now {
        wall_ms: BASE_MS + t,
        instant: start + Duration::from_millis(t),
    }
}

fn sid_of(s: &cdp_transport::Session) -> Value {
    json!(s.id().map(SessionId::as_str))
}

fn effect(e: &Effect) -> Value {
    match e {
        Effect::Setup {
            session,
            kind,
            paused,
            skip,
        } => {
            json!({"setup": sid_of(session), "kind": format!("{kind:?}"), "paused": paused, "skip": skip})
        }
        Effect::AttachPopup { target_id } => json!({"attach_popup": target_id.as_str()}),
        Effect::Release { session, paused } => {
            json!({"release": sid_of(session), "paused": paused})
        }
        Effect::Answer {
            dialog_id,
            accept,
            prompt,
            by,
        } => json!({"answer": dialog_id, "accept": accept, "prompt": prompt, "by": by}),
        Effect::Watchdog { dialog_id, after } => {
            json!({"watchdog": dialog_id, "after_ms": after.as_millis() as u64})
        }
        Effect::PageGone { reason, reconnect } => {
            json!({"page_gone": reason, "reconnect": reconnect})
        }
        Effect::Send {
            session,
            method,
            params,
        } => json!({"send": method, "on": sid_of(session), "params": params}),
        Effect::InstallBridge { sessions } => {
            let mut s: Vec<Value> = sessions.iter().map(sid_of).collect();
            s.sort_by_key(|v| v.to_string());
            json!({"install_bridge": s})
        }
    }
}

fn call(a: &Answer) -> Value {
    json!({"call": a.method, "on": sid_of(&a.session), "params": a.params})
}

fn error(e: &crate::error::Error) -> Value {
    json!({"error": e.code(), "message": e.to_string()})
}

/// What the state shows after a row: the view, and what stands behind it.
fn outcome(st: &State, steps: Vec<Value>) -> Value {
    let mut frames = Map::new();
    for (id, f) in &st.frames {
        let route = st.frame_route(id).expect("a known frame has a route");
        frames.insert(
            id.as_str().to_string(),
            json!({
                "parent": f.parent,
                "owner": f.owner,
                "root": f.root,
                "oopif_session": f.oopif_session,
                "depth": f.depth,
                "loader": st.frame_loader(id),
                "ctx": route.ctx.map(|c| c.0),
                "route_session": route.session.as_ref().map(sid_of),
            }),
        );
    }
    let mut sessions = Map::new();
    for (sid, s) in &st.sessions {
        sessions.insert(
            sid.as_str().to_string(),
            json!({"target": s.target_id, "kind": format!("{:?}", s.kind), "root": s.root, "depth": s.depth, "url": s.url}),
        );
    }
    let answering: Map<String, Value> = st
        .pending
        .iter()
        .filter_map(|d| d.answering.map(|by| (d.view.id.clone(), json!(by))))
        .collect();
    let swallow: Map<String, Value> = st
        .swallow_close
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), json!(v)))
        .collect();
    let mut skipped: Vec<&str> = st.skipped_frames.iter().map(|f| f.as_str()).collect();
    skipped.sort_unstable();
    let changed: Vec<usize> = steps
        .iter()
        .enumerate()
        .filter(|(_, s)| s["view_changed"] == json!(true))
        .map(|(i, _)| i)
        .collect();
    json!({
        "changed_steps": changed,
        "steps": steps,
        "view": st.view(),
        "frames": frames,
        "skipped_frames": skipped,
        "sessions": sessions,
        "answering": answering,
        "swallow_close": swallow,
        "bridge_on": st.bridge_on,
    })
}

/// Runs one row on a fresh state over `conn` (never written to: the state
/// only makes session handles from it).
fn run(conn: &Connection, row: &Row) -> Value {
    let start = Instant::now();
    let mut st = State::new(
        conn.clone(),
        conn.session(SessionId::new("PAGE")),
        TargetId::new("T1"),
        row.policy,
        DIALOG_TIMEOUT,
        row.bridge,
        Bridge::with_token(TOKEN).expect("token"),
    );
    if row.gate {
        let link = GateLink::join(
            Gate::for_connection(conn),
            CancellationToken::new(),
            Duration::from_secs(5),
        );
        link.add_opener(&st.target_id);
        st.gate = Some(link);
    }
    let mut last: Option<Answer> = None;
    let mut steps = Vec::new();
    let mut prev_t = 0;
    for step in &row.steps {
        let before = st.view();
        let (t, input, out): (u64, String, Vec<Value>) = match step {
            Step::Ev(t, method, sid, params) => {
                let ev = Event {
                    method: method.to_string(),
                    session_id: sid.map(SessionId::new),
                    params: params.clone(),
                };
                let fx = st.apply(&ev, at(start, *t));
                let input = format!("{method} @{}", sid.unwrap_or("browser"));
                (*t, input, fx.iter().map(effect).collect())
            }
            Step::Answer {
                t,
                id,
                by,
                accept,
                prompt,
            } => {
                let r = st
                    .pick_dialog(*id)
                    .and_then(|id| st.begin_answer(&id, *by, *accept, prompt.map(String::from)));
                let out = match r {
                    Ok(a) => {
                        let c = call(&a);
                        last = Some(a);
                        c
                    }
                    Err(e) => error(&e),
                };
                (*t, format!("answer {id:?} by {}", by.as_str()), vec![out])
            }
            Step::Replied(t) => {
                let a = last.take().expect("an answer to reply to");
                let rec = st.answer_replied(&a, at(start, *t));
                (
                    *t,
                    format!("reply to {}", a.id),
                    vec![json!({"closed": rec})],
                )
            }
            Step::Failed(t, protocol) => {
                let a = last.take().expect("an answer to fail");
                st.answer_failed(&a, *protocol, at(start, *t));
                (
                    *t,
                    format!("error for {} (protocol: {protocol})", a.id),
                    vec![],
                )
            }
            Step::Watchdog(t, id) => {
                let out = if st.unanswered(id) {
                    match st.begin_answer(id, ClosedBy::Watchdog, false, None) {
                        Ok(a) => {
                            let c = call(&a);
                            last = Some(a);
                            vec![c]
                        }
                        Err(e) => vec![error(&e)],
                    }
                } else {
                    vec![json!({"watchdog": id, "due": false})]
                };
                (*t, format!("watchdog of {id}"), out)
            }
            Step::Inactive(t, reason) => {
                st.set_inactive(*reason, at(start, *t));
                (*t, format!("inactive: {reason}"), vec![])
            }
            Step::Reset(t, sid) => {
                st.reset_for(
                    conn.clone(),
                    conn.session(SessionId::new(*sid)),
                    at(start, *t),
                );
                (*t, format!("reset onto {sid}"), vec![])
            }
            Step::Tree(t, sid, tree) => {
                st.merge_frame_tree(&SessionId::new(*sid), tree);
                (*t, format!("frame tree @{sid}"), vec![])
            }
        };
        assert!(t >= prev_t, "row {}: times go forward", row.name);
        prev_t = t;
        let changed = st.view() != before;
        steps.push(json!({"t": t, "in": input, "out": out, "view_changed": changed}));
    }
    outcome(&st, steps)
}

fn rows() -> Vec<Row> {
    let mut all = Vec::new();
    all.extend(dialogs::rows());
    all.extend(bridge::rows());
    all.extend(frames::rows());
    all.extend(targets::rows());
    all.extend(runtime::rows());
    all
}

#[tokio::test]
async fn table() {
    let mock = cdp_mock::MockServer::start().await;
    let conn = Connection::connect(&mock.ws_url(), ConnectOptions::default())
        .await
        .expect("connect");
    let rows = rows();
    assert!(rows.len() >= 30, "{} rows", rows.len());
    let mut names = HashSet::new();
    for row in &rows {
        assert!(names.insert(row.name), "two rows named {}", row.name);
        assert!(!row.expect.is_empty(), "row {} expects nothing", row.name);
        let out = run(&conn, row);
        let pretty = serde_json::to_string_pretty(&out).unwrap_or_default();
        for (ptr, want) in &row.expect {
            match out.pointer(ptr) {
                None if *want == json!(ABSENT) => {}
                got => assert_eq!(
                    got,
                    Some(want),
                    "row {}: {ptr}\noutcome: {pretty}",
                    row.name
                ),
            }
        }
        insta::with_settings!({sort_maps => true, prepend_module_to_snapshot => false}, {
            insta::assert_yaml_snapshot!(row.name, out);
        });
    }
}
