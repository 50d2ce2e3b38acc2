//! Shared helpers for the end-to-end tests: drive CDP by hand, the way the
//! supervisor will, and answer bridge requests with `bridge-script`.
#![allow(dead_code)]

use bridge_script::{
    continue_params, Bridge, DialogRequest, Paused, ADD_SCRIPT_METHOD, CONTINUE_METHOD,
    FETCH_ENABLE_METHOD, FULFILL_METHOD, REQUEST_PAUSED_EVENT,
};
use cdp_transport::launcher::shared_chrome;
use cdp_transport::{ConnectOptions, Connection, EventStream, RecvError, Session, TargetId};
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Budget for one CDP call.
pub const T: Duration = Duration::from_secs(8);

/// The browser ws URL of this test process's Chromium.
pub fn chrome_ws() -> String {
    shared_chrome().unwrap_or_else(|e| panic!("Chromium is needed for this test: {e}"))
}

pub async fn connect_to(ws: &str) -> Connection {
    Connection::connect(ws, ConnectOptions::default())
        .await
        .expect("connect")
}

pub async fn connect() -> Connection {
    connect_to(&chrome_ws()).await
}

pub async fn new_page(conn: &Connection) -> Session {
    let v = conn
        .browser()
        .call("Target.createTarget", json!({"url": "about:blank"}), T)
        .await
        .expect("createTarget");
    let tid = TargetId::new(v["targetId"].as_str().expect("targetId"));
    conn.attach(&tid, T).await.expect("attach")
}

/// Evaluates `expr` by value and returns `result.value` (absent → `Value::Null`).
pub async fn eval(s: &Session, expr: &str) -> Value {
    let v = s
        .call(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true}),
            T,
        )
        .await
        .expect("evaluate");
    assert!(v.get("exceptionDetails").is_none(), "{expr} threw: {v}");
    v["result"].get("value").cloned().unwrap_or(Value::Null)
}

/// Navigates and waits for `Page.loadEventFired` (Page must be enabled).
pub async fn navigate(s: &Session, url: &str) {
    let mut events = s.subscribe();
    let r = s
        .call("Page.navigate", json!({"url": url}), T)
        .await
        .expect("navigate");
    assert!(r.get("errorText").is_none(), "{r}");
    tokio::time::timeout(T, events.next_method("Page.loadEventFired"))
        .await
        .expect("load in time")
        .expect("stream");
}

/// What the answerer saw on its session.
#[derive(Default, Debug)]
pub struct Seen {
    pub dialogs: Vec<DialogRequest>,
    pub forged: usize,
    pub preflights: usize,
    pub not_ours: usize,
}

/// The test's stand-in for the supervisor's bridge handling on one session:
/// answers every `Fetch.requestPaused` at once. A dialog whose message
/// starts with `no` is dismissed; any other is accepted with
/// `promptText: "agent:<message>"`.
pub struct Answerer {
    pub seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Answerer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Answerer {
    /// Subscribes to `session` now (before any `Fetch.enable`), then answers.
    pub fn spawn(session: &Session, bridge: &Bridge) -> Answerer {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let mut events = session.subscribe();
        let (session, bridge, seen2) = (session.clone(), bridge.clone(), seen.clone());
        let task = tokio::spawn(async move {
            loop {
                let ev = match events.recv().await {
                    Ok(ev) => ev,
                    Err(RecvError::Lagged(_)) => continue,
                    Err(_) => break,
                };
                if ev.method != REQUEST_PAUSED_EVENT {
                    continue;
                }
                let paused = bridge
                    .parse_paused(&ev.params)
                    .expect("well-formed requestPaused");
                let (method, params) = match &paused {
                    Paused::Dialog(d) => {
                        let accept = !d.message.starts_with("no");
                        let text = format!("agent:{}", d.message);
                        (
                            FULFILL_METHOD,
                            bridge.fulfill_answer(
                                &d.request_id,
                                accept,
                                accept.then_some(text.as_str()),
                            ),
                        )
                    }
                    Paused::Preflight { request_id } => {
                        (FULFILL_METHOD, bridge.fulfill_preflight(request_id))
                    }
                    Paused::Forged { request_id } => {
                        (FULFILL_METHOD, bridge.fulfill_forbidden(request_id))
                    }
                    Paused::NotOurs { request_id } => {
                        (CONTINUE_METHOD, continue_params(request_id))
                    }
                    other => panic!("unexpected {other:?}"),
                };
                {
                    let mut s = seen2.lock().expect("lock");
                    match paused {
                        Paused::Dialog(d) => s.dialogs.push(d),
                        Paused::Preflight { .. } => s.preflights += 1,
                        Paused::Forged { .. } => s.forged += 1,
                        _ => s.not_ours += 1,
                    }
                }
                session
                    .call(method, params, T)
                    .await
                    .expect("answer the paused request");
            }
        });
        Answerer { seen, task }
    }

    pub fn dialogs(&self) -> Vec<DialogRequest> {
        self.seen.lock().expect("lock").dialogs.clone()
    }

    pub fn total_paused(&self) -> usize {
        let s = self.seen.lock().expect("lock");
        s.dialogs.len() + s.forged + s.preflights + s.not_ours
    }
}

/// Sets the bridge up on a session the way the supervisor will: answerer,
/// `Page.enable`, `Fetch.enable` with the bridge patterns, the script for new
/// documents (and, with `runImmediately`, the current one).
pub async fn install(session: &Session, bridge: &Bridge) -> Answerer {
    let answerer = Answerer::spawn(session, bridge);
    session
        .call("Page.enable", json!({}), T)
        .await
        .expect("Page.enable");
    session
        .call(FETCH_ENABLE_METHOD, bridge.fetch_enable_params(), T)
        .await
        .expect("Fetch.enable");
    session
        .call(ADD_SCRIPT_METHOD, bridge.add_script_params(), T)
        .await
        .expect("addScriptToEvaluateOnNewDocument");
    answerer
}

/// The four dialogs of the seed's 4/4 check, in one evaluate; returns
/// `[typeof alert(..), prompt(..), confirm-accept, confirm-dismiss]`.
pub const FOUR_DIALOGS: &str =
    "JSON.stringify([typeof alert('a1'), prompt('p1', 'def'), confirm('yes1'), confirm('no1')])";

/// What [`FOUR_DIALOGS`] must give with the [`Answerer`].
pub const FOUR_ANSWERS: &str = r#"["undefined","agent:p1",true,false]"#;

/// Asserts that the answerer saw exactly the four dialogs, from `frame_id`.
pub fn assert_four_dialogs(seen: &[DialogRequest], frame_id: &str) {
    let got: Vec<(String, String, Option<String>)> = seen
        .iter()
        .map(|d| {
            (
                d.kind.to_string(),
                d.message.clone(),
                d.default_prompt.clone(),
            )
        })
        .collect();
    assert_eq!(
        got,
        vec![
            ("alert".into(), "a1".into(), None),
            ("prompt".into(), "p1".into(), Some("def".into())),
            ("confirm".into(), "yes1".into(), None),
            ("confirm".into(), "no1".into(), None),
        ]
    );
    for d in seen {
        assert_eq!(d.frame_id.as_deref(), Some(frame_id), "{d:?}");
    }
}

/// The methods of every event already buffered in `events`.
pub fn drain_methods(events: &mut EventStream) -> Vec<String> {
    let mut out = Vec::new();
    while let Some(r) = events.try_recv() {
        if let Ok(ev) = r {
            out.push(ev.method.clone());
        }
    }
    out
}
