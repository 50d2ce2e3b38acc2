//! Endpoints: credential redaction everywhere (plain and TLS), `/json/version`
//! discovery with extra headers, connect timeout, and the debug spans of
//! connect/attach/call.

#[path = "support/tls.rs"]
mod tls_support;

use cdp_mock::{Action, MockServer};
use cdp_transport::{redact, ConnectOptions, Connection, Endpoint, Error, TargetId};
use serde_json::json;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(5);
const SECRETS: [&str; 4] = ["alice", "hunter2pw", "s3cr3t-t0ken", "h3ader-val"];

fn assert_clean(what: &str, text: &str) {
    for s in SECRETS {
        assert!(!text.contains(s), "{what} shows the secret {s:?}: {text}");
    }
}

/// Checks `Display`, `Debug` and every `source()` of an error.
fn assert_clean_error(what: &str, e: &Error) {
    assert_clean(what, &e.to_string());
    assert_clean(what, &format!("{e:?}"));
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        assert_clean(what, &s.to_string());
        src = s.source();
    }
}

/// A loopback port with nothing listening on it.
async fn closed_port() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    l.local_addr().expect("addr").port()
}

/// Accepts TCP connections and never says a word.
async fn silent_listener() -> (u16, tokio::task::JoinHandle<()>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = l.local_addr().expect("addr").port();
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((sock, _)) = l.accept().await {
            held.push(sock);
        }
    });
    (port, task)
}

/// Captures everything `tracing` writes (debug and up, span closes included).
///
/// One global subscriber for this test binary: thread-local ones race with
/// tracing's per-callsite interest cache when tests run in parallel.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

fn logs() -> &'static Captured {
    static LOGS: std::sync::OnceLock<Captured> = std::sync::OnceLock::new();
    LOGS.get_or_init(|| {
        let c = Captured::default();
        let w = c.clone();
        let sub = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::DEBUG)
            .with_ansi(false)
            .with_span_events(tracing_subscriber::fmt::format::FmtSpan::CLOSE)
            .with_writer(move || w.clone())
            .finish();
        tracing::subscriber::set_global_default(sub).expect("the only global subscriber");
        c
    })
}
impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
impl Captured {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_never_appear_in_debug_display_errors_or_logs() {
    let logs = logs();
    let mock = MockServer::start().await;
    let addr = mock.addr();
    let url = format!(
        "ws://alice:hunter2pw@{addr}/devtools/browser/mock?token=s3cr3t-t0ken&x=1#s3cr3t-t0ken"
    );
    let opts = ConnectOptions::default().header("Authorization", "Bearer h3ader-val");

    // Endpoint and options.
    let ep = Endpoint::parse(&url).expect("parse");
    assert_clean("Endpoint Display", &ep.to_string());
    assert_clean("Endpoint Debug", &format!("{ep:?}"));
    assert_eq!(
        ep.to_string(),
        format!("ws://***@{addr}/devtools/browser/mock?token=***&x=***#***")
    );
    assert_clean("redact", &redact(ep.expose()));
    assert_clean("ConnectOptions Debug", &format!("{opts:?}"));
    assert!(format!("{opts:?}").contains("Authorization: ***"));

    // A working connection with credentials: they go on the wire, nowhere else.
    let conn = Connection::connect(&url, opts.clone())
        .await
        .expect("connect with credentials");
    let hs = mock.handshakes();
    assert!(
        hs[0].path_and_query.contains("token=s3cr3t-t0ken"),
        "the token is sent: {hs:?}"
    );
    assert_eq!(hs[0].header("authorization"), Some("Bearer h3ader-val"));
    assert_clean("Connection Debug", &format!("{conn:?}"));
    assert_clean("Connection::endpoint", &conn.endpoint().to_string());
    mock.once(
        "Target.attachToTarget",
        Action::Reply(json!({ "sessionId": "S1" })),
    );
    let s = conn.attach(&TargetId::new("T1"), T).await.expect("attach");
    assert_clean("Session Debug", &format!("{s:?}"));
    conn.browser()
        .call("Browser.getVersion", json!({}), T)
        .await
        .expect("call");
    mock.drop_connections();
    let reason = tokio::time::timeout(T, conn.closed())
        .await
        .expect("closes");
    assert_clean("close reason", &reason);
    let err = conn
        .browser()
        .call("Browser.getVersion", json!({}), T)
        .await
        .expect_err("closed");
    assert_clean_error("call on a closed connection", &err);

    // The same over TLS: wss:// straight, and https:// discovery to wss://.
    let pki = tls_support::TestPki::new();
    let wss_relay = tls_support::TlsRelay::start(&pki, addr).await;
    let wss_json = mock
        .serve_json_version(Some(&format!(
            "wss://localhost:{}/devtools/browser/mock",
            wss_relay.port
        )))
        .await;
    let https_relay = tls_support::TlsRelay::start(&pki, tls_support::http_addr(&wss_json)).await;
    let trusted = opts
        .clone()
        .extra_root_certificates(vec![pki.ca_der.clone()]);
    assert_clean("ConnectOptions Debug with roots", &format!("{trusted:?}"));
    for url in [
        format!(
            "wss://alice:hunter2pw@localhost:{}/devtools/browser/mock?token=s3cr3t-t0ken",
            wss_relay.port
        ),
        format!(
            "https://alice:hunter2pw@localhost:{}/?token=s3cr3t-t0ken",
            https_relay.port
        ),
    ] {
        let conn = Connection::connect(&url, trusted.clone())
            .await
            .expect("connect over TLS with credentials");
        assert_clean("TLS Connection Debug", &format!("{conn:?}"));
        assert_clean("TLS Connection::endpoint", &conn.endpoint().to_string());
        conn.browser()
            .call("Browser.getVersion", json!({}), T)
            .await
            .expect("call over TLS");
        conn.close();
    }
    let hs = mock.handshakes();
    assert_eq!(hs.len(), 3, "plain, wss, https → wss: {hs:?}");
    assert!(
        hs.iter()
            .all(|h| h.path_and_query.contains("token=s3cr3t-t0ken")),
        "the token is sent over TLS too: {hs:?}"
    );

    // Every way connecting can fail.
    let dead = closed_port().await;
    let (silent, _silent_task) = silent_listener().await;
    let http = mock.serve_json_version(None).await;
    let http_port = http.rsplit(':').next().expect("port");
    let (wss_port, https_port) = (wss_relay.port, https_relay.port);
    let cases = [
        format!("ws://alice:hunter2pw@127.0.0.1:{dead}/devtools/browser/x?token=s3cr3t-t0ken"),
        format!("http://alice:hunter2pw@127.0.0.1:{dead}/?token=s3cr3t-t0ken"),
        format!("ws://alice:hunter2pw@127.0.0.1:{silent}/?token=s3cr3t-t0ken"),
        format!("http://alice:hunter2pw@127.0.0.1:{silent}/?token=s3cr3t-t0ken"),
        // A WebSocket handshake refused with HTTP 404 by the discovery server.
        format!("ws://alice:hunter2pw@127.0.0.1:{http_port}/nope?token=s3cr3t-t0ken"),
        // TLS: refused, silent, and a certificate from a CA nobody trusts
        // (`opts` has no extra roots).
        format!("wss://alice:hunter2pw@localhost:{dead}/devtools/browser/x?token=s3cr3t-t0ken"),
        format!("https://alice:hunter2pw@localhost:{dead}/?token=s3cr3t-t0ken"),
        format!("wss://alice:hunter2pw@localhost:{silent}/?token=s3cr3t-t0ken"),
        format!("https://alice:hunter2pw@localhost:{silent}/?token=s3cr3t-t0ken"),
        format!(
            "wss://alice:hunter2pw@localhost:{wss_port}/devtools/browser/mock?token=s3cr3t-t0ken"
        ),
        format!("https://alice:hunter2pw@localhost:{https_port}/?token=s3cr3t-t0ken"),
        // Schemes nobody supports, and strings that are not URLs.
        "ftp://alice:hunter2pw@example.invalid/?token=s3cr3t-t0ken".to_string(),
        "ws://alice:hunter2pw@".to_string(),
        "ws://alice:hunter2pw@[::1/?token=s3cr3t-t0ken".to_string(),
        "alice:hunter2pw@nowhere?token=s3cr3t-t0ken".to_string(),
        "not a url at all ?token=s3cr3t-t0ken".to_string(),
    ];
    let opts = opts.connect_timeout(Duration::from_millis(300));
    for case in &cases {
        let err = Connection::connect(case, opts.clone())
            .await
            .expect_err(case);
        assert_clean_error(case, &err);
        assert!(
            matches!(
                err,
                Error::Connect { .. }
                    | Error::ConnectTimeout { .. }
                    | Error::InvalidEndpoint { .. }
            ),
            "{case}: {err:?}"
        );
    }
    // Header values that cannot go on the wire are named by header, never shown.
    let bad = ConnectOptions::default().header("X-Key", "h3ader-val\n");
    let err = Connection::connect(&mock.ws_url(), bad)
        .await
        .expect_err("bad header value");
    assert_clean_error("bad header", &err);
    assert!(err.to_string().contains("X-Key"), "{err}");

    let logs = logs.text();
    assert!(logs.contains("cdp.connect"), "connect is traced: {logs}");
    assert_clean("logs", &logs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_attach_and_calls_have_debug_spans_with_method_session_and_elapsed() {
    let logs = logs();
    let mock = MockServer::start().await;
    let conn = Connection::connect(&mock.ws_url(), ConnectOptions::default())
        .await
        .expect("connect");
    mock.once(
        "Target.attachToTarget",
        Action::Reply(json!({ "sessionId": "S-spans" })),
    );
    let s = conn
        .attach(&TargetId::new("T-spans"), T)
        .await
        .expect("attach");
    s.call("Runtime.enable", json!({}), T).await.expect("call");
    let endpoint = format!("endpoint=ws://127.0.0.1:{}/", mock.addr().port());
    // Other tests of this binary log too: pick this test's lines by its ids.
    let logs = logs.text();
    let line = |needle: &[&str]| {
        logs.lines()
            .find(|l| needle.iter().all(|n| l.contains(n)))
            .map(str::to_string)
            .unwrap_or_else(|| panic!("no line with {needle:?} in\n{logs}"))
    };
    for l in [
        line(&["cdp.connect{", &endpoint, "elapsed_us=", "close"]),
        line(&[
            "cdp.attach{",
            "target_id=\"T-spans\"",
            "session=\"S-spans\"",
            "elapsed_us=",
            "close",
        ]),
        line(&[
            "target_id=\"T-spans\"",
            "cdp.call{",
            "method=\"Target.attachToTarget\"",
            "ok=true",
            "close",
        ]),
        line(&[
            "cdp.call{",
            "method=\"Runtime.enable\"",
            "session=\"S-spans\"",
            "elapsed_us=",
            "ok=true",
            "close",
        ]),
    ] {
        assert!(l.contains("DEBUG"), "spans are at debug level: {l}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_discovery_sends_extra_headers_and_carries_the_query_to_the_websocket() {
    let mock = MockServer::start().await;
    mock.on("Browser.getVersion", json!({ "product": "Mock/1.0" }));
    let http = mock.serve_json_version(None).await;
    let opts = ConnectOptions::default()
        .header("X-Api-Key", "k-123")
        .header("User-Agent", "tabwarden-test");
    let conn = Connection::connect(&format!("{http}/?token=tok"), opts)
        .await
        .expect("connect over http discovery");
    let v = conn
        .browser()
        .call("Browser.getVersion", json!({}), T)
        .await
        .expect("call");
    assert_eq!(v["product"], "Mock/1.0");

    let d = mock.discovery_requests();
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].path_and_query, "/json/version?token=tok");
    assert_eq!(d[0].header("x-api-key"), Some("k-123"));
    assert_eq!(d[0].header("user-agent"), Some("tabwarden-test"));
    let hs = mock.handshakes();
    assert_eq!(hs.len(), 1);
    assert_eq!(
        hs[0].path_and_query, "/devtools/browser/mock?token=tok",
        "the query is carried over"
    );
    assert_eq!(
        hs[0].header("x-api-key"),
        Some("k-123"),
        "headers go on the handshake too"
    );
    // The connection reports the WebSocket it uses, redacted.
    assert_eq!(
        conn.endpoint().to_string(),
        format!("{}?token=***", mock.ws_url())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_discovery_failures_are_connect_errors() {
    let mock = MockServer::start().await;
    // webSocketDebuggerUrl that is not a URL.
    let http = mock.serve_json_version(Some("not a url")).await;
    let err = Connection::connect(&http, ConnectOptions::default())
        .await
        .expect_err("bad ws url");
    assert!(
        matches!(&err, Error::Connect { reason, .. } if reason.contains("webSocketDebuggerUrl")),
        "{err:?}"
    );
    // A server that is not a DevTools endpoint: the WebSocket mock answers plain HTTP with an error.
    let err = Connection::connect(
        &format!("http://{}", mock.addr()),
        ConnectOptions::default(),
    )
    .await
    .expect_err("not a discovery endpoint");
    assert!(matches!(err, Error::Connect { .. }), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_times_out_against_a_listener_that_never_answers() {
    let (port, _task) = silent_listener().await;
    for url in [
        format!("ws://127.0.0.1:{port}/devtools/browser/x"),
        format!("http://127.0.0.1:{port}"),
    ] {
        let t0 = Instant::now();
        let err = Connection::connect(
            &url,
            ConnectOptions::default().connect_timeout(Duration::from_millis(200)),
        )
        .await
        .expect_err("never answers");
        let took = t0.elapsed();
        eprintln!("{url}: connect timeout 200 ms -> error after {took:?}");
        assert!(
            matches!(&err, Error::ConnectTimeout { timeout, .. } if *timeout == Duration::from_millis(200)),
            "{err:?}"
        );
        assert!(
            took >= Duration::from_millis(200) && took < Duration::from_secs(2),
            "took {took:?}"
        );
    }
}
