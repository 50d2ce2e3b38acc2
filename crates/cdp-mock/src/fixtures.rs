//! A loopback HTTP server for end-to-end fixture pages.
//!
//! It listens on one port on `127.0.0.1`, `127.0.0.2` and `[::1]`, so the same
//! page can be loaded as `http://localhost:P/…`, `http://127.0.0.1:P/…` and
//! `http://127.0.0.2:P/…`: three different sites, which Chromium puts in
//! different renderer processes (real OOPIFs, CHROMIUM-FACTS.md).

use axum::body::Body;
use axum::http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One served resource.
#[derive(Clone, Debug)]
pub struct Resource {
    /// Body bytes.
    pub body: Vec<u8>,
    /// `Content-Type`.
    pub content_type: String,
    /// Extra response headers (e.g. `Content-Security-Policy`).
    pub headers: Vec<(String, String)>,
    /// Delay before answering.
    pub delay: Option<Duration>,
}

#[derive(Default)]
struct Site {
    pages: HashMap<String, Resource>,
    dirs: Vec<(String, PathBuf)>,
    hits: HashMap<String, usize>,
}

/// A running fixture server. Dropping it stops serving.
pub struct FixtureServer {
    port: u16,
    site: Arc<Mutex<Site>>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for FixtureServer {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl FixtureServer {
    /// Starts serving on a free port on the loopback addresses.
    ///
    /// # Panics
    /// When no loopback port can be bound (test support only).
    pub async fn start() -> Self {
        let site = Arc::new(Mutex::new(Site::default()));
        #[allow(clippy::expect_used)]
        let first = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1");
        #[allow(clippy::expect_used)]
        let port = first.local_addr().expect("addr").port();
        let mut listeners = vec![first];
        for host in ["127.0.0.2", "[::1]"] {
            if let Ok(l) = tokio::net::TcpListener::bind(format!("{host}:{port}")).await {
                listeners.push(l);
            }
        }
        let mut tasks = Vec::new();
        for l in listeners {
            let site = site.clone();
            let app = axum::Router::new().fallback(move |req: Request<Body>| {
                let site = site.clone();
                async move { serve(site, req).await }
            });
            tasks.push(tokio::spawn(async move {
                let _ = axum::serve(l, app).await;
            }));
        }
        FixtureServer { port, site, tasks }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Site> {
        self.site.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Serves `html` at `path` (e.g. `/c07.html`).
    pub fn page(&self, path: &str, html: &str) -> &Self {
        self.resource(
            path,
            Resource {
                body: html.as_bytes().to_vec(),
                content_type: "text/html; charset=utf-8".into(),
                headers: vec![],
                delay: None,
            },
        )
    }

    /// Serves a resource at `path`.
    pub fn resource(&self, path: &str, r: Resource) -> &Self {
        self.lock().pages.insert(path.to_string(), r);
        self
    }

    /// Serves the files of `dir` under the URL prefix `prefix` (e.g. `/pages`).
    pub fn dir(&self, prefix: &str, dir: impl Into<PathBuf>) -> &Self {
        self.lock()
            .dirs
            .push((prefix.trim_end_matches('/').to_string(), dir.into()));
        self
    }

    /// The port, the same on every loopback address.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://{host}:{port}{path}`; use `localhost`, `127.0.0.1`, `127.0.0.2` for three sites.
    pub fn url(&self, host: &str, path: &str) -> String {
        format!("http://{host}:{}{path}", self.port)
    }

    /// How many requests `path` has had.
    pub fn hits(&self, path: &str) -> usize {
        self.lock().hits.get(path).copied().unwrap_or(0)
    }
}

async fn serve(site: Arc<Mutex<Site>>, req: Request<Body>) -> Response<Body> {
    let path = req.uri().path().to_string();
    let found = {
        let mut s = site.lock().unwrap_or_else(|p| p.into_inner());
        *s.hits.entry(path.clone()).or_default() += 1;
        match s.pages.get(&path) {
            Some(r) => Some(r.clone()),
            None => s.dirs.iter().find_map(|(prefix, dir)| {
                let rest = path.strip_prefix(prefix.as_str())?.trim_start_matches('/');
                if rest.contains("..") {
                    return None;
                }
                let body = std::fs::read(dir.join(rest)).ok()?;
                let ct = if rest.ends_with(".html") {
                    "text/html; charset=utf-8"
                } else {
                    "application/octet-stream"
                };
                Some(Resource {
                    body,
                    content_type: ct.into(),
                    headers: vec![],
                    delay: None,
                })
            }),
        }
    };
    let Some(r) = found else {
        let mut resp = Response::new(Body::from("not found"));
        *resp.status_mut() = StatusCode::NOT_FOUND;
        return resp;
    };
    if let Some(d) = r.delay {
        tokio::time::sleep(d).await;
    }
    let mut resp = Response::new(Body::from(r.body));
    let h: &mut HeaderMap = resp.headers_mut();
    if let Ok(v) = HeaderValue::from_str(&r.content_type) {
        h.insert("content-type", v);
    }
    h.insert("cache-control", HeaderValue::from_static("no-store"));
    for (k, v) in &r.headers {
        if let (Ok(k), Ok(v)) = (
            HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            h.insert(k, v);
        }
    }
    resp
}
