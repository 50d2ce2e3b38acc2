//! Endpoint parsing, redaction and `/json/version` discovery.

use crate::error::{Error, Result};
use std::fmt;
use url::Url;

/// A CDP endpoint URL that never shows its credentials.
///
/// `Debug` and `Display` print the URL with user info replaced by `***` and
/// every query value replaced by `***`, so tokens in `?apiKey=` or `user:pass@`
/// never reach errors or logs.
#[derive(Clone)]
pub struct Endpoint {
    url: Url,
}

impl Endpoint {
    /// Parses `ws://`, `wss://`, `http://` or `https://` endpoints.
    ///
    /// # Errors
    /// [`Error::InvalidEndpoint`] for unparseable URLs or other schemes.
    pub fn parse(s: &str) -> Result<Self> {
        let url = Url::parse(s).map_err(|e| Error::InvalidEndpoint {
            endpoint: redact_str(s),
            reason: e.to_string(),
        })?;
        match url.scheme() {
            "ws" | "wss" | "http" | "https" => {}
            other => {
                return Err(Error::InvalidEndpoint {
                    endpoint: redact(&url),
                    reason: format!("scheme {other:?} is not one of ws, wss, http, https"),
                })
            }
        }
        if url.host_str().is_none() {
            return Err(Error::InvalidEndpoint { endpoint: redact(&url), reason: "no host".into() });
        }
        Ok(Self { url })
    }
    /// The full URL, credentials included: only for the wire.
    pub fn expose(&self) -> &Url {
        &self.url
    }
    /// True for `ws://` and `wss://`.
    pub fn is_websocket(&self) -> bool {
        matches!(self.url.scheme(), "ws" | "wss")
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&redact(&self.url))
    }
}
impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Endpoint({})", redact(&self.url))
    }
}

/// Redacts user info and query values of a URL.
pub fn redact(url: &Url) -> String {
    let mut u = url.clone();
    if !u.username().is_empty() || u.password().is_some() {
        let _ = u.set_username("***");
        let _ = u.set_password(None);
    }
    if u.query().is_some() {
        let pairs: Vec<String> = u.query_pairs().map(|(k, _)| format!("{k}=***")).collect();
        u.set_query(Some(&pairs.join("&")));
    }
    u.to_string()
}

/// Redacts a string that may not parse as a URL: keeps only the scheme and host-ish prefix.
pub fn redact_str(s: &str) -> String {
    match Url::parse(s) {
        Ok(u) => redact(&u),
        Err(_) => {
            let cut = s.find(['?', '@']).unwrap_or(s.len()).min(64);
            let mut out = s[..floor_char_boundary(s, cut)].to_string();
            if cut < s.len() {
                out.push_str("***");
            }
            out
        }
    }
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}
