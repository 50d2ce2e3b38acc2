//! Endpoint parsing, redaction and `/json/version` discovery.

use crate::error::{Error, Result};
use std::fmt;
use url::Url;

/// A CDP endpoint URL that never shows its credentials.
///
/// `Debug` and `Display` print the URL with user info, every query value and
/// the fragment replaced by `***`, so tokens in `?apiKey=` or `user:pass@`
/// never reach errors or logs. Strings that do not parse are cut before any
/// `@`, `?` or `#` ([`redact`]).
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
            // `user:pass@host` without a scheme parses as scheme `user`: show neither.
            _ if url.cannot_be_a_base() => {
                return Err(Error::InvalidEndpoint {
                    endpoint: "***".into(),
                    reason: "not a ws://, wss://, http:// or https:// URL".into(),
                })
            }
            other => {
                return Err(Error::InvalidEndpoint {
                    endpoint: redact(&url),
                    reason: format!("scheme {other:?} is not one of ws, wss, http, https"),
                })
            }
        }
        if url.host_str().is_none() {
            return Err(Error::InvalidEndpoint {
                endpoint: redact(&url),
                reason: "no host".into(),
            });
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
///
/// A URL with no authority (`scheme:rest`, e.g. `user:pass@host` typed without
/// a scheme) prints as `***` whole: its "path" may be the credentials.
pub fn redact(url: &Url) -> String {
    if url.cannot_be_a_base() {
        return "***".into();
    }
    let mut u = url.clone();
    if !u.username().is_empty() || u.password().is_some() {
        let _ = u.set_username("***");
        let _ = u.set_password(None);
    }
    if u.query().is_some() {
        let pairs: Vec<String> = u.query_pairs().map(|(k, _)| format!("{k}=***")).collect();
        u.set_query(Some(&pairs.join("&")));
    }
    if u.fragment().is_some() {
        u.set_fragment(Some("***"));
    }
    u.to_string()
}

/// Redacts a string that may not parse as a URL.
///
/// A parseable URL goes through [`redact`]. Otherwise only the scheme and the
/// host part are kept: user info (anything before an `@` in the authority),
/// the query and the fragment become `***`, and the text is cut at 64 bytes.
pub fn redact_str(s: &str) -> String {
    if let Ok(u) = Url::parse(s) {
        return redact(&u);
    }
    let (scheme, rest) = match s.find("://") {
        Some(i) => s.split_at(i + 3),
        None => ("", s),
    };
    // The authority ends at the first '/', '?' or '#'; user info is whatever precedes its last '@'.
    let auth_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(auth_end);
    let host = match authority.rfind('@') {
        Some(i) => format!("***@{}", &authority[i + 1..]),
        None => authority.to_string(),
    };
    let secret_at = tail.find(['?', '#', '@']);
    let path = &tail[..secret_at.unwrap_or(tail.len())];
    let mut out = format!("{scheme}{host}{path}");
    let cut = floor_char_boundary(&out, out.len().min(64));
    let shortened = cut < out.len();
    out.truncate(cut);
    if secret_at.is_some() || shortened {
        out.push_str("***");
    }
    out
}

fn floor_char_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}
