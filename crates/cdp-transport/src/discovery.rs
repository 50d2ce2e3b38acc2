//! `http://host:port` → `webSocketDebuggerUrl` through `GET /json/version`.

use crate::endpoint::Endpoint;
use crate::error::{Error, Result};
use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;

/// Largest `/json/version` body read, bytes.
const MAX_BODY: usize = 1024 * 1024;

/// Fetches `/json/version` (HTTP/1.1 over hyper) and returns `webSocketDebuggerUrl`.
///
/// Only `http://` is supported here (an `https://` discovery URL gets a clear
/// error). Query parameters of the endpoint (tokens) are carried over to the
/// WebSocket URL when it has none.
pub(crate) async fn resolve_ws_url(ep: &Endpoint, headers: &[(String, String)]) -> Result<String> {
    let url = ep.expose();
    let shown = ep.to_string();
    let fail = |reason: String| Error::Connect {
        endpoint: shown.clone(),
        reason,
    };
    if url.scheme() != "http" {
        return Err(fail(
            "https:// discovery needs TLS, which this build leaves out; pass the ws:// URL".into(),
        ));
    }
    let host = url.host_str().unwrap_or("127.0.0.1").to_string();
    let port = url.port_or_known_default().unwrap_or(80);
    let tcp = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port))
        .await
        .map_err(|e| fail(format!("tcp: {e}")))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .map_err(|e| fail(format!("http: {e}")))?;
    tokio::spawn(async move {
        let _ = conn.await;
    });
    let mut path = format!("{}/json/version", url.path().trim_end_matches('/'));
    if let Some(q) = url.query() {
        path.push('?');
        path.push_str(q);
    }
    let mut req = hyper::Request::get(path).header("host", format!("{host}:{port}"));
    for (k, v) in headers {
        req = req.header(k.as_str(), v.as_str());
    }
    let req = req
        .body(Empty::<Bytes>::new())
        .map_err(|_| fail("a header name or value is not valid".into()))?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| fail(format!("http: {e}")))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(fail(format!(
            "/json/version answered HTTP {}",
            status.as_u16()
        )));
    }
    let body = Limited::new(resp.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| fail(format!("reading /json/version: {e}")))?
        .to_bytes();
    let v: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| fail(format!("/json/version is not JSON: {e}")))?;
    let ws = v
        .get("webSocketDebuggerUrl")
        .and_then(|x| x.as_str())
        .ok_or_else(|| fail("/json/version has no webSocketDebuggerUrl".into()))?;
    let mut ws_url =
        url::Url::parse(ws).map_err(|e| fail(format!("bad webSocketDebuggerUrl: {e}")))?;
    if ws_url.query().is_none() && url.query().is_some() {
        ws_url.set_query(url.query());
    }
    Ok(ws_url.to_string())
}
