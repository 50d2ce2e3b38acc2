//! TLS endpoints: `wss://` handshakes and `https://` discovery against a
//! loopback TLS terminator with a throwaway CA, relaying to `cdp_mock`.

#[path = "support/tls.rs"]
mod tls_support;

use cdp_mock::MockServer;
use cdp_transport::{ConnectOptions, Connection, Error};
use serde_json::json;
use std::time::{Duration, Instant};
use tls_support::{http_addr, TestPki, TlsRelay};

const T: Duration = Duration::from_secs(5);

/// A mock answering `Browser.getVersion`, behind a TLS relay.
async fn mock_behind_tls(pki: &TestPki) -> (MockServer, TlsRelay) {
    let mock = MockServer::start().await;
    mock.on("Browser.getVersion", json!({ "product": "Mock/1.0" }));
    let relay = TlsRelay::start(pki, mock.addr()).await;
    (mock, relay)
}

fn trusting(pki: &TestPki) -> ConnectOptions {
    ConnectOptions::default().extra_root_certificates(vec![pki.ca_der.clone()])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wss_with_the_test_ca_connects_and_calls() {
    let pki = TestPki::new();
    let (mock, relay) = mock_behind_tls(&pki).await;
    let url = format!(
        "wss://localhost:{}/devtools/browser/mock?token=tok",
        relay.port
    );
    let conn = Connection::connect(&url, trusting(&pki))
        .await
        .expect("wss connect");
    let v = conn
        .browser()
        .call("Browser.getVersion", json!({}), T)
        .await
        .expect("call over wss");
    assert_eq!(v["product"], "Mock/1.0");
    assert_eq!(
        conn.endpoint().to_string(),
        format!(
            "wss://localhost:{}/devtools/browser/mock?token=***",
            relay.port
        )
    );
    assert_eq!(relay.sni(), vec![Some("localhost".to_string())], "SNI");
    let hs = mock.handshakes();
    assert_eq!(hs.len(), 1, "{hs:?}");
    assert_eq!(hs[0].path_and_query, "/devtools/browser/mock?token=tok");
    // The connection lives and closes like a plain one.
    mock.drop_connections();
    let reason = tokio::time::timeout(T, conn.closed())
        .await
        .expect("closes");
    assert!(!reason.contains("tok"), "{reason}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wss_without_the_ca_is_a_connect_error_saying_not_trusted() {
    let pki = TestPki::new();
    let (mock, relay) = mock_behind_tls(&pki).await;
    let url = format!(
        "wss://alice:hunter2pw@localhost:{}/devtools/browser/mock?token=s3cr3t",
        relay.port
    );
    let err = Connection::connect(&url, ConnectOptions::default())
        .await
        .expect_err("self-signed CA is not in webpki roots");
    let Error::Connect { endpoint, reason } = &err else {
        panic!("not a Connect error: {err:?}");
    };
    assert_eq!(
        endpoint,
        &format!(
            "wss://***@localhost:{}/devtools/browser/mock?token=***",
            relay.port
        )
    );
    assert!(reason.contains("not trusted"), "{reason}");
    assert!(reason.contains("extra_root_certificates"), "{reason}");
    for secret in ["alice", "hunter2pw", "s3cr3t"] {
        assert!(!err.to_string().contains(secret), "{err}");
        assert!(!format!("{err:?}").contains(secret), "{err:?}");
    }
    assert_eq!(mock.handshakes().len(), 0, "nothing reached the browser");

    // Another CA does not help either.
    let other = TestPki::new();
    let err = Connection::connect(&url, trusting(&other))
        .await
        .expect_err("wrong CA");
    assert!(
        matches!(&err, Error::Connect { reason, .. } if reason.contains("not trusted")),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wss_to_a_host_the_certificate_does_not_name_is_refused() {
    let pki = TestPki::new();
    let (_mock, relay) = mock_behind_tls(&pki).await;
    // The certificate names `localhost` only.
    let url = format!("wss://127.0.0.1:{}/devtools/browser/mock", relay.port);
    let err = Connection::connect(&url, trusting(&pki))
        .await
        .expect_err("name mismatch");
    assert!(
        matches!(&err, Error::Connect { reason, .. } if reason.contains("not valid for this host name")),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_extra_root_is_a_connect_error() {
    let err = Connection::connect(
        "wss://localhost:9/devtools/browser/x",
        ConnectOptions::default().extra_root_certificates(vec![b"not DER".to_vec()]),
    )
    .await
    .expect_err("bad root");
    assert!(
        matches!(&err, Error::Connect { reason, .. } if reason.contains("extra root certificate #0")),
        "{err:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_discovery_resolves_to_wss_and_carries_the_query() {
    let pki = TestPki::new();
    let (mock, ws_relay) = mock_behind_tls(&pki).await;
    let json = mock
        .serve_json_version(Some(&format!(
            "wss://localhost:{}/devtools/browser/mock",
            ws_relay.port
        )))
        .await;
    let https_relay = TlsRelay::start(&pki, http_addr(&json)).await;
    let url = format!("https://localhost:{}/?token=tok", https_relay.port);
    let opts = trusting(&pki).header("X-Api-Key", "k-1");
    let conn = Connection::connect(&url, opts)
        .await
        .expect("https discovery then wss");
    let v = conn
        .browser()
        .call("Browser.getVersion", json!({}), T)
        .await
        .expect("call");
    assert_eq!(v["product"], "Mock/1.0");

    let d = mock.discovery_requests();
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0].path_and_query, "/json/version?token=tok");
    assert_eq!(d[0].header("x-api-key"), Some("k-1"));
    assert_eq!(https_relay.sni(), vec![Some("localhost".to_string())]);
    assert_eq!(ws_relay.sni(), vec![Some("localhost".to_string())]);
    let hs = mock.handshakes();
    assert_eq!(hs.len(), 1, "{hs:?}");
    assert_eq!(
        hs[0].path_and_query, "/devtools/browser/mock?token=tok",
        "the query is carried over to the wss URL"
    );
    assert_eq!(
        conn.endpoint().to_string(),
        format!(
            "wss://localhost:{}/devtools/browser/mock?token=***",
            ws_relay.port
        )
    );

    // Without the CA, discovery itself is refused, with the same words.
    let err = Connection::connect(&url, ConnectOptions::default())
        .await
        .expect_err("untrusted https");
    let Error::Connect { endpoint, reason } = &err else {
        panic!("not a Connect error: {err:?}");
    };
    assert_eq!(
        endpoint,
        &format!("https://localhost:{}/?token=***", https_relay.port)
    );
    assert!(reason.contains("not trusted"), "{reason}");
    assert_eq!(mock.discovery_requests().len(), 1, "no request was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wss_and_https_to_a_closed_port_fail_fast_with_connect() {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let port = l.local_addr().expect("addr").port();
    drop(l);
    for url in [
        format!("wss://localhost:{port}/devtools/browser/x"),
        format!("https://localhost:{port}"),
    ] {
        let t0 = Instant::now();
        let err = Connection::connect(&url, ConnectOptions::default())
            .await
            .expect_err("closed port");
        let took = t0.elapsed();
        assert!(matches!(err, Error::Connect { .. }), "{url}: {err:?}");
        assert!(
            took < Duration::from_secs(1),
            "{url}: refused at once, not at the 10 s connect timeout: {took:?}"
        );
    }
}
