//! `cargo xtask e2e --backend browserbase` without outside network: a fake
//! Browserbase API on loopback whose sessions' `connectUrl` is a
//! `cdp_mock::dismiss_proxy::DismissProxy` (a proxy that closes every native
//! dialog, as the hosted browser's does) in front of this process's local
//! Chromium. The same `xtask::browserbase::run` the command uses runs
//! against it.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use cdp_mock::dismiss_proxy::DismissProxy;
use serde_json::{json, Value};
use std::process::Command;
use std::sync::{Arc, Mutex};
use xtask::browserbase::{self, Options, Outcome, SCENARIOS};

const KEY: &str = "bb_test_key_SECRET";
const PROJECT: &str = "proj-e2e";

/// One session of the fake.
struct FakeSession {
    id: String,
    create_body: Value,
    /// Dropped on release (its listener closes, as the hosted browser goes away).
    proxy: Option<DismissProxy>,
    /// Dialogs the proxy closed by itself, read at release.
    dismissed: usize,
    /// Client connections the proxy accepted, read at release.
    connections: usize,
    release_body: Option<Value>,
}

#[derive(Default)]
struct Fake {
    chrome_ws: String,
    sessions: tokio::sync::Mutex<Vec<FakeSession>>,
    /// Every request: (method path, X-BB-API-Key matched).
    log: Mutex<Vec<(String, bool)>>,
}

fn json_reply(status: StatusCode, v: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

fn authorized(fake: &Fake, what: String, headers: &HeaderMap) -> bool {
    let ok = headers.get("x-bb-api-key").and_then(|v| v.to_str().ok()) == Some(KEY);
    fake.log
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push((what, ok));
    ok
}

async fn create(State(fake): State<Arc<Fake>>, headers: HeaderMap, body: Bytes) -> Response {
    if !authorized(&fake, "POST /v1/sessions".into(), &headers) {
        return json_reply(
            StatusCode::UNAUTHORIZED,
            json!({"statusCode": 401, "error": "Unauthorized", "message": "Invalid API key"}),
        );
    }
    let Ok(body) = serde_json::from_slice::<Value>(&body) else {
        return json_reply(
            StatusCode::BAD_REQUEST,
            json!({"message": "body is not JSON"}),
        );
    };
    if body["projectId"] != PROJECT {
        return json_reply(
            StatusCode::BAD_REQUEST,
            json!({"message": "projectId required"}),
        );
    }
    let proxy = DismissProxy::start(&fake.chrome_ws).await;
    let mut sessions = fake.sessions.lock().await;
    let id = format!("fake-session-{}", sessions.len() + 1);
    let connect = format!("{}?signingKey=SIGNING_SECRET", proxy.ws_url());
    sessions.push(FakeSession {
        id: id.clone(),
        create_body: body,
        proxy: Some(proxy),
        dismissed: 0,
        connections: 0,
        release_body: None,
    });
    json_reply(
        StatusCode::CREATED,
        json!({"id": id, "status": "RUNNING", "projectId": PROJECT, "connectUrl": connect, "region": "us-west-2"}),
    )
}

async fn update(
    State(fake): State<Arc<Fake>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if !authorized(&fake, format!("POST /v1/sessions/{id}"), &headers) {
        return json_reply(
            StatusCode::UNAUTHORIZED,
            json!({"message": "Invalid API key"}),
        );
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut sessions = fake.sessions.lock().await;
    let Some(s) = sessions.iter_mut().find(|s| s.id == id) else {
        return json_reply(StatusCode::NOT_FOUND, json!({"message": "no such session"}));
    };
    if body["status"] != "REQUEST_RELEASE" {
        return json_reply(
            StatusCode::BAD_REQUEST,
            json!({"message": "status must be REQUEST_RELEASE"}),
        );
    }
    if let Some(p) = s.proxy.take() {
        s.dismissed = p.dismissed();
        s.connections = p.connections();
    }
    s.release_body = Some(body);
    json_reply(StatusCode::OK, json!({"id": id, "status": "COMPLETED"}))
}

/// Starts the fake API on 127.0.0.1; returns its base URL.
async fn start_fake() -> (String, Arc<Fake>) {
    let chrome_ws = cdp_transport::launcher::shared_chrome()
        .unwrap_or_else(|e| panic!("this test needs Chromium: {e}"));
    let fake = Arc::new(Fake {
        chrome_ws,
        ..Default::default()
    });
    let app = Router::new()
        .route("/v1/sessions", post(create))
        .route("/v1/sessions/{id}", post(update))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("bind: {e}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("{e}"))
        .port();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (format!("http://127.0.0.1:{port}"), fake)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_scenario_passes_against_a_fake_api_in_front_of_a_dismissing_proxy() {
    let (api_url, fake) = start_fake().await;
    let opts = Options {
        api_url,
        api_key: KEY.into(),
        project_id: Some(PROJECT.into()),
        session_timeout_s: 120,
    };
    let t0 = std::time::Instant::now();
    let report = browserbase::run(&opts).await;
    let table = report.table();
    println!("{table}(whole run {:?})", t0.elapsed());
    assert!(report.passed(), "{table}");
    assert!(
        !table.contains("SIGNING_SECRET") && !table.contains(KEY),
        "{table}"
    );

    // Every scenario ran and passed, in order, between create/connect and release.
    let names: Vec<(&str, &str)> = report
        .rows
        .iter()
        .map(|r| (r.bridge.as_str(), r.name.as_str()))
        .collect();
    let mut expected = Vec::new();
    for mode in ["off", "on"] {
        expected.push((mode, "create session"));
        expected.push((mode, "connect"));
        expected.extend(SCENARIOS.iter().filter(|(m, _)| *m == mode).copied());
        expected.push((mode, "release session"));
    }
    assert_eq!(names, expected);
    assert!(report
        .rows
        .iter()
        .all(|r| matches!(r.outcome, Outcome::Pass(_))));

    // Two sessions, each created with the project and a timeout, each released.
    let sessions = fake.sessions.lock().await;
    assert_eq!(sessions.len(), 2);
    assert_eq!(report.sessions.len(), 2);
    for (s, rec) in sessions.iter().zip(&report.sessions) {
        assert_eq!(s.id, rec.id);
        assert!(rec.released);
        assert_eq!(s.create_body["projectId"], PROJECT);
        assert_eq!(s.create_body["timeout"], 120);
        assert_eq!(
            s.release_body.as_ref().map(|b| b["status"].clone()),
            Some(json!("REQUEST_RELEASE")),
            "{} not released",
            s.id
        );
        assert!(s.proxy.is_none(), "{} still has its proxy", s.id);
        assert!(s.connections >= 1, "{}: nobody connected", s.id);
    }
    // Bridge off: the proxy closed the native prompt (once per client
    // session that has the Page domain on, so at least once). Bridge on: no
    // native dialog ever reached the proxy (all twelve went through the bridge).
    assert!(
        sessions[0].dismissed >= 1,
        "off session: {}",
        sessions[0].dismissed
    );
    assert_eq!(sessions[1].dismissed, 0, "on session");
    let log = fake.log.lock().unwrap_or_else(|p| p.into_inner());
    assert!(log.iter().all(|(_, ok)| *ok), "{log:?}");
}

fn xtask_bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_xtask"));
    for k in [
        "BROWSERBASE_API_KEY",
        "BROWSERBASE_PROJECT_ID",
        "BROWSERBASE_API_URL",
    ] {
        c.env_remove(k);
    }
    c
}

#[test]
fn without_an_api_key_the_command_says_what_it_needs_and_exits_2() {
    let out = xtask_bin()
        .args(["e2e", "--backend", "browserbase"])
        .output()
        .unwrap_or_else(|e| panic!("run xtask: {e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    for needed in [
        "BROWSERBASE_API_KEY",
        "BROWSERBASE_PROJECT_ID",
        "BROWSERBASE_API_URL",
    ] {
        assert!(err.contains(needed), "{err}");
    }
    assert!(out.stdout.is_empty());
    // An empty key counts as missing.
    let out = xtask_bin()
        .args(["e2e", "--backend", "browserbase"])
        .env("BROWSERBASE_API_KEY", "")
        .output()
        .unwrap_or_else(|e| panic!("run xtask: {e}"));
    assert_eq!(out.status.code(), Some(2));
    let out = xtask_bin()
        .args(["e2e", "--backend", "elsewhere"])
        .output()
        .unwrap_or_else(|e| panic!("run xtask: {e}"));
    assert_eq!(out.status.code(), Some(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_key_is_a_failed_run_with_the_api_reply_and_exit_1() {
    let (api_url, fake) = start_fake().await;
    let out = tokio::task::spawn_blocking(move || {
        xtask_bin()
            .args(["e2e", "--backend", "browserbase"])
            .env("BROWSERBASE_API_URL", &api_url)
            .env("BROWSERBASE_API_KEY", "wrong-key-SECRET")
            .env("BROWSERBASE_PROJECT_ID", PROJECT)
            .output()
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"))
    .unwrap_or_else(|e| panic!("run xtask: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
    assert!(
        stdout.contains("| off | create session | FAIL |"),
        "{stdout}"
    );
    assert!(
        stdout.contains("HTTP 401") && stdout.contains("Invalid API key"),
        "{stdout}"
    );
    assert!(
        stdout.contains("browserbase e2e: 0 passed, 2 failed"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("SECRET") && !stderr.contains("SECRET"),
        "{stdout}\n{stderr}"
    );
    assert!(fake.sessions.lock().await.is_empty());
    assert_eq!(
        fake.log.lock().unwrap_or_else(|p| p.into_inner()).len(),
        2,
        "one create attempt per bridge mode"
    );
}
