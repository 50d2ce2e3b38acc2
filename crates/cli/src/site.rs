//! The demo's built-in fixture site, served on loopback with axum.
//!
//! One listener on `127.0.0.1` serves two sites: pages asked for as
//! `localhost` and as `127.0.0.1` are different sites to Chromium, so the
//! top page on `localhost` with an iframe from `127.0.0.1` gives a real
//! out-of-process iframe.

use axum::extract::{Path, State};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::get;
use std::net::SocketAddr;

/// The top page: a prompt on load, a same-process iframe, a cross-site
/// iframe, a button that starts a never-ending script.
pub const TOP: &str = r#"<!doctype html>
<html><head><title>tabwarden demo</title></head>
<body>
<h1>tabwarden demo</h1>
<p id="greeting">waiting for a name</p>
<script>
  document.getElementById('greeting').textContent = 'Hello, ' + prompt('What is your name?', 'guest') + '!';
  window.spin = () => { for (;;) {} };
</script>
<button onclick="window.spin()">Start endless script</button>
<button onclick="document.getElementById('greeting').textContent = 'Still responsive'">Check responsiveness</button>
<iframe name="same-site" src="/same.html" width="300" height="80"></iframe>
<iframe name="cross-site" src="http://127.0.0.1:PORT/cross.html" width="300" height="80"></iframe>
</body></html>"#;

/// The same-process (same-site) iframe.
pub const SAME: &str = r#"<!doctype html><html><head><title>same-site frame</title></head>
<body><p>I share the page's process.</p></body></html>"#;

/// The cross-site iframe (an OOPIF) with a confirm button.
pub const CROSS: &str = r#"<!doctype html><html><head><title>cross-site frame</title></head>
<body><button onclick="document.body.dataset.answer = String(confirm('Delete everything?'))">Delete everything</button>
<p>I run in my own process.</p></body></html>"#;

async fn page(State(port): State<u16>, Path(name): Path<String>) -> Response {
    match name.as_str() {
        "index.html" => Html(TOP.replace("PORT", &port.to_string())).into_response(),
        "same.html" => Html(SAME).into_response(),
        "cross.html" => Html(CROSS).into_response(),
        _ => (axum::http::StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

/// Serves the site on `127.0.0.1:0`; returns the port. The server runs until the runtime ends.
///
/// # Errors
/// When no loopback port can be bound.
pub async fn serve() -> std::io::Result<u16> {
    let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
    let port = listener.local_addr()?.port();
    let app = axum::Router::new()
        .route("/{name}", get(page))
        .with_state(port);
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(%e, "demo site stopped");
        }
    });
    Ok(port)
}
