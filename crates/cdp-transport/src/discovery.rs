//! `http://host:port` or `https://host[:port]` → `webSocketDebuggerUrl`
//! through `GET /json/version`.

use crate::endpoint::Endpoint;
use crate::error::{Error, Result};
use http_body_util::{BodyExt, Empty, Limited};
use hyper::body::Bytes;

/// Largest `/json/version` body read, bytes.
const MAX_BODY: usize = 1024 * 1024;

/// Fetches `/json/version` (HTTP/1.1 over hyper) and returns `webSocketDebuggerUrl`.
///
/// `https://` runs the request over rustls ([`crate::tls::client_config`]
/// with `extra_roots`), SNI = the URL's host. Query parameters of the
/// endpoint (tokens) are carried over to the WebSocket URL when it has none.
pub(crate) async fn resolve_ws_url(
    ep: &Endpoint,
    headers: &[(String, String)],
    extra_roots: &[Vec<u8>],
) -> Result<String> {
    let url = ep.expose();
    let shown = ep.to_string();
    let fail = |reason: String| Error::Connect {
        endpoint: shown.clone(),
        reason,
    };
    let host = url.host_str().unwrap_or("127.0.0.1").to_string();
    let port = url.port_or_known_default().unwrap_or(80);
    let tls = match url.scheme() {
        "http" => None,
        "https" => Some((
            crate::tls::client_config(extra_roots).map_err(&fail)?,
            crate::tls::server_name(&host).map_err(&fail)?,
        )),
        other => return Err(fail(format!("{other}:// is not a discovery URL"))),
    };
    let tcp = tokio::net::TcpStream::connect((host.trim_matches(['[', ']']), port))
        .await
        .map_err(|e| fail(format!("tcp: {e}")))?;
    let _ = tcp.set_nodelay(true);
    let body = match tls {
        None => fetch(tcp, url, &host, port, headers).await,
        Some((config, name)) => {
            let stream = tokio_rustls::TlsConnector::from(config)
                .connect(name, tcp)
                .await
                .map_err(|e| {
                    fail(crate::tls::describe_io(&e).unwrap_or_else(|| format!("tls: {e}")))
                })?;
            fetch(stream, url, &host, port, headers).await
        }
    }
    .map_err(fail)?;
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

/// `GET <path>/json/version[?query]` over `io`; the body on a 2xx answer.
/// The error is the reason text for an [`Error::Connect`].
async fn fetch<IO>(
    io: IO,
    url: &url::Url,
    host: &str,
    port: u16,
    headers: &[(String, String)],
) -> std::result::Result<Bytes, String>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
            .await
            .map_err(|e| format!("http: {e}"))?;
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
        .map_err(|_| "a header name or value is not valid".to_string())?;
    let resp = sender
        .send_request(req)
        .await
        .map_err(|e| format!("http: {e}"))?;
    let status = resp.status();
    if !status.is_success() {
        return Err(format!("/json/version answered HTTP {}", status.as_u16()));
    }
    Ok(Limited::new(resp.into_body(), MAX_BODY)
        .collect()
        .await
        .map_err(|e| format!("reading /json/version: {e}"))?
        .to_bytes())
}
