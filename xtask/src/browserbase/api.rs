//! The two Browserbase REST calls the run needs, over hyper (HTTP/1.1;
//! rustls with the ring provider and the webpki roots for `https://`).
//!
//! API facts (Browserbase API reference, "Create a Session" and "Update a
//! Session"): `POST {api}/v1/sessions` with header `X-BB-API-Key` and a JSON
//! body (`projectId`, optional `timeout` in seconds, 60..=21600) answers the
//! session object with `id` and `connectUrl` (a `wss://` CDP endpoint);
//! `POST {api}/v1/sessions/{id}` with `{"status": "REQUEST_RELEASE"}` ends it.

use http_body_util::{BodyExt, Full};
use hyper::body::Bytes;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use url::Url;

/// Bound on one API request: connect, TLS, request and the whole reply.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest reply body kept, bytes.
const MAX_BODY: usize = 1 << 20;

/// A Browserbase API client: base URL and key. `Debug` never shows the key.
#[derive(Clone)]
pub struct Api {
    base: Url,
    key: String,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api")
            .field("base", &cdp_transport::redact(&self.base))
            .field("key", &"***")
            .finish()
    }
}

/// A session as created: its id and CDP endpoint.
#[derive(Clone)]
pub struct Session {
    /// Browserbase session id (not secret; shown in the report).
    pub id: String,
    /// The `connectUrl` (holds a signing key: print it only through
    /// [`cdp_transport::redact`]).
    pub connect_url: String,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shown = Url::parse(&self.connect_url)
            .map(|u| cdp_transport::redact(&u))
            .unwrap_or_else(|_| "***".into());
        f.debug_struct("Session")
            .field("id", &self.id)
            .field("connect_url", &shown)
            .finish()
    }
}

trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

fn snippet(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let t: String = text.chars().take(300).collect();
    if t.len() < text.len() {
        format!("{t}…")
    } else {
        t
    }
}

impl Api {
    /// A client for `base` (`http://` or `https://`, path prefix kept).
    ///
    /// # Errors
    /// A text naming the problem when `base` is no http(s) URL with a host.
    pub fn new(base: &str, key: &str) -> Result<Api, String> {
        let url = Url::parse(base).map_err(|e| format!("API URL {base:?}: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(format!(
                "API URL {}: expected http(s)://host[:port]",
                cdp_transport::redact(&url)
            ));
        }
        Ok(Api {
            base: url,
            key: key.to_string(),
        })
    }

    /// The base URL, redacted.
    pub fn shown(&self) -> String {
        cdp_transport::redact(&self.base)
    }

    /// `POST /v1/sessions`.
    ///
    /// # Errors
    /// Transport failure, a non-2xx status (with the reply's start), or a
    /// reply without `id`/`connectUrl`.
    pub async fn create_session(
        &self,
        project_id: Option<&str>,
        timeout_s: u64,
    ) -> Result<Session, String> {
        let mut body = serde_json::json!({ "timeout": timeout_s });
        if let Some(p) = project_id {
            body["projectId"] = Value::from(p);
        }
        let (status, reply) = self.post("/v1/sessions", &body).await?;
        if !(200..300).contains(&status) {
            return Err(format!(
                "create session: HTTP {status}: {}{}",
                snippet(&reply),
                if project_id.is_none() {
                    " (BROWSERBASE_PROJECT_ID is not set; the API may need it)"
                } else {
                    ""
                }
            ));
        }
        let v: Value = serde_json::from_slice(&reply).map_err(|e| {
            format!(
                "create session: the reply is not JSON ({e}): {}",
                snippet(&reply)
            )
        })?;
        let id = v["id"].as_str().filter(|s| !s.is_empty());
        let connect = v["connectUrl"].as_str().filter(|s| !s.is_empty());
        match (id, connect) {
            (Some(id), Some(c)) => Ok(Session {
                id: id.to_string(),
                connect_url: c.to_string(),
            }),
            _ => Err(format!(
                "create session: the reply has no id or connectUrl (fields: {})",
                v.as_object()
                    .map(|o| o.keys().cloned().collect::<Vec<_>>().join(", "))
                    .unwrap_or_default()
            )),
        }
    }

    /// `POST /v1/sessions/{id}` with `status: REQUEST_RELEASE`.
    ///
    /// # Errors
    /// Transport failure or a non-2xx status (with the reply's start).
    pub async fn release_session(&self, id: &str, project_id: Option<&str>) -> Result<(), String> {
        let mut body = serde_json::json!({ "status": "REQUEST_RELEASE" });
        if let Some(p) = project_id {
            body["projectId"] = Value::from(p);
        }
        let path = format!("/v1/sessions/{}", encode_segment(id));
        let (status, reply) = self.post(&path, &body).await?;
        if (200..300).contains(&status) {
            Ok(())
        } else {
            Err(format!(
                "release session {id}: HTTP {status}: {}",
                snippet(&reply)
            ))
        }
    }

    /// One POST with a JSON body, bounded by [`REQUEST_TIMEOUT`]; returns the
    /// status and the body.
    async fn post(&self, path: &str, body: &Value) -> Result<(u16, Vec<u8>), String> {
        let what = format!("POST {}{path}", self.shown().trim_end_matches('/'));
        match tokio::time::timeout(REQUEST_TIMEOUT, self.post_inner(path, body)).await {
            Ok(r) => r.map_err(|e| format!("{what}: {e}")),
            Err(_) => Err(format!(
                "{what}: no complete reply within {REQUEST_TIMEOUT:?}"
            )),
        }
    }

    async fn post_inner(&self, path: &str, body: &Value) -> Result<(u16, Vec<u8>), String> {
        let host = self.base.host_str().unwrap_or_default().to_string();
        let port = self
            .base
            .port_or_known_default()
            .ok_or_else(|| "no port".to_string())?;
        let tcp = TcpStream::connect((host.trim_matches(['[', ']']), port))
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let _ = tcp.set_nodelay(true);
        let io: Box<dyn Io> = if self.base.scheme() == "https" {
            let mut roots = rustls::RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS setup: {e}"))?
            .with_root_certificates(roots)
            .with_no_client_auth();
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
            let name =
                rustls::pki_types::ServerName::try_from(host.trim_matches(['[', ']']).to_string())
                    .map_err(|_| format!("{host:?} is not a valid TLS server name"))?;
            let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS handshake: {e}"))?;
            Box::new(tls)
        } else {
            Box::new(tcp)
        };
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(io))
                .await
                .map_err(|e| format!("HTTP handshake: {e}"))?;
        let conn = tokio::spawn(async move {
            let _ = conn.await;
        });
        let full_path = format!("{}{path}", self.base.path().trim_end_matches('/'));
        let host_header = match self.base.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.clone(),
        };
        let payload = serde_json::to_vec(body).map_err(|e| format!("encode body: {e}"))?;
        let req = hyper::Request::post(full_path)
            .header("host", host_header)
            .header("x-bb-api-key", &self.key)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .header(
                "user-agent",
                concat!("tabwarden-xtask/", env!("CARGO_PKG_VERSION")),
            )
            .body(Full::new(Bytes::from(payload)))
            .map_err(|e| format!("build request: {e}"))?;
        let resp = sender
            .send_request(req)
            .await
            .map_err(|e| format!("request: {e}"))?;
        let status = resp.status().as_u16();
        let limited = http_body_util::Limited::new(resp.into_body(), MAX_BODY);
        let bytes = limited
            .collect()
            .await
            .map_err(|e| format!("reading the reply: {e}"))?
            .to_bytes();
        conn.abort();
        Ok((status, bytes.to_vec()))
    }
}

/// Percent-encodes a path segment (everything but unreserved characters).
fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_base_urls_are_refused_with_the_reason() {
        for bad in ["", "ftp://x", "api.browserbase.com", "http://"] {
            assert!(Api::new(bad, "k").is_err(), "{bad}");
        }
        let api = Api::new("https://api.browserbase.com", "secret-key").expect("valid");
        assert!(!format!("{api:?}").contains("secret-key"));
    }

    #[test]
    fn session_debug_redacts_the_connect_url() {
        let s = Session {
            id: "abc".into(),
            connect_url: "wss://connect.example?signingKey=TOPSECRET".into(),
        };
        let d = format!("{s:?}");
        assert!(d.contains("abc") && !d.contains("TOPSECRET"), "{d}");
    }

    #[test]
    fn path_segments_are_encoded() {
        assert_eq!(encode_segment("a-b_c.d~1"), "a-b_c.d~1");
        assert_eq!(encode_segment("../x y"), "..%2Fx%20y");
    }
}
