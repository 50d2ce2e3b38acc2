//! The URL checks of `browser_navigate` and `browser_tabs new` (and of
//! `browser_cdp Page.navigate` with evaluate disabled).

use crate::error::ToolError;

/// A `javascript:` URL (scheme case-insensitive, leading whitespace and
/// control characters ignored as browsers do): it runs script in the page.
pub(super) fn is_javascript_url(url: &str) -> bool {
    let u: String = url
        .trim_start_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
        .take(11)
        .collect();
    u.to_ascii_lowercase().starts_with("javascript:")
}

/// The scheme of `url`, lowercased, as a browser parses it (leading
/// whitespace and control characters skipped, tabs and newlines ignored);
/// `None` without a `:` before any `/`, `?` or `#`.
pub(super) fn scheme_of(url: &str) -> Option<String> {
    let mut scheme = String::new();
    for c in url
        .trim_start_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
    {
        match c {
            ':' => return (!scheme.is_empty()).then_some(scheme),
            '/' | '?' | '#' => return None,
            _ if scheme.len() >= 32 => return None,
            c => scheme.push(c.to_ascii_lowercase()),
        }
    }
    None
}

/// A guess of the site (scheme and registrable domain) of an `http(s)` or
/// `ws(s)` URL: the host's last two labels, or the whole host for an IP
/// address or a one-label host (`localhost`). No public-suffix list: under a
/// multi-label suffix (`a.co.uk`, `b.co.uk`) two sites look alike, which
/// errs on the side of "same site". `None` for other schemes.
fn site_of(url: &str) -> Option<(String, String)> {
    let scheme = scheme_of(url)?;
    if !matches!(scheme.as_str(), "http" | "https" | "ws" | "wss") {
        return None;
    }
    let rest = url
        .trim_start()
        .get(scheme.len() + 1..)?
        .strip_prefix("//")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    let hostport = authority.rsplit('@').next()?;
    let host = if let Some(v6) = hostport.strip_prefix('[') {
        v6.split(']').next()?.to_string()
    } else {
        hostport.split(':').next()?.to_ascii_lowercase()
    };
    let host = host.trim_end_matches('.');
    let is_ip = host.contains(':') || host.chars().all(|c| c.is_ascii_digit() || c == '.');
    let labels: Vec<&str> = host.split('.').collect();
    let site = if is_ip || labels.len() < 2 {
        host.to_string()
    } else {
        labels[labels.len() - 2..].join(".")
    };
    Some((scheme, site))
}

/// False only when `from` and `to` are certainly different sites (so the
/// navigation commits in another renderer process under site isolation).
pub(super) fn maybe_same_site(from: &str, to: &str) -> bool {
    match (site_of(from), site_of(to)) {
        (Some(a), Some(b)) => a == b,
        _ => true,
    }
}

/// URL schemes whose document the caller writes (so its scripts are script
/// of the agent's choosing): refused by `browser_navigate` and
/// `browser_tabs new` when evaluate is disabled.
pub(super) const AUTHORED_SCHEMES: [&str; 3] = ["data", "blob", "filesystem"];

/// The checks `browser_navigate` and `browser_tabs new` make on a URL
/// before anything is sent: not a `javascript:` URL (always refused: it runs
/// script, `browser_evaluate`'s job); absolute (has a scheme; no spaces
/// outside a `data:` URL); and with evaluate disabled, not a `data:`,
/// `blob:` or `filesystem:` URL.
///
/// # Errors
/// `invalid_argument` with `field: "url"`, naming `tool`.
pub(super) fn check_url(
    url: &str,
    evaluate_enabled: bool,
    tool: &str,
) -> std::result::Result<(), ToolError> {
    if is_javascript_url(url) {
        return Err(
            ToolError::invalid("url", format!("{tool} does not run javascript: URLs"))
                .next("use browser_evaluate to run script in the page"),
        );
    }
    let spaced = url.contains(char::is_whitespace) && !url.starts_with("data:");
    if url.is_empty() || !url.contains(':') || spaced {
        return Err(
            ToolError::invalid("url", format!("{url:?} is not an absolute URL")).next(
                "pass an absolute URL such as https://example.com/ or file:///path/page.html",
            ),
        );
    }
    if !evaluate_enabled {
        if let Some(s) = scheme_of(url).filter(|s| AUTHORED_SCHEMES.contains(&s.as_str())) {
            return Err(ToolError::invalid(
                "url",
                format!(
                    "{tool} does not load {s}: URLs while evaluate is disabled (--no-evaluate): the caller writes that document, so its scripts would be script of the agent's choosing"
                ),
            )
            .next("load the page from an http(s) or file: URL, or run the server without --no-evaluate"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
