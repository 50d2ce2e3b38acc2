//! `bridge_script::Bridge::parse_paused` over fuzz-built `Fetch.requestPaused`
//! params: must never panic, and its verdict must agree with the wire format
//! in the crate doc (the assertions are in `checks/bridge_paused.rs`, shared
//! with the replay test in `crates/bridge-script/tests/fuzz_regressions.rs`).
//!
//! Input: either a structured request (URL assembled from bridge-like parts,
//! method, headers, response-stage fields) or, when the first byte is odd,
//! raw JSON used as the params object as is (the form regressions are kept in).
#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use bridge_script::Bridge;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Map, Value};

#[path = "../checks/bridge_paused.rs"]
mod checks;
use checks::{check, TOKEN};

#[derive(Arbitrary, Debug)]
enum Scheme {
    Https,
    Http,
    Upper,
    Ws,
    Other(String),
}

#[derive(Arbitrary, Debug)]
enum Host {
    Bridge,
    BridgeUpper,
    BridgeTrailingDot,
    BridgePort(u16),
    BridgeUserinfo(String),
    BridgePercent,
    Other(String),
}

#[derive(Arbitrary, Debug)]
enum Token {
    Ours,
    OursPercentEncoded,
    Prefix,
    Longer,
    Other(String),
    Missing,
}

#[derive(Arbitrary, Debug)]
struct Url {
    scheme: Scheme,
    host: Host,
    token: Token,
    path: Option<String>,
    extra_segments: Vec<String>,
    query: Vec<(String, String)>,
    raw_query: Option<String>,
    fragment: Option<String>,
}

#[derive(Arbitrary, Debug)]
enum Method {
    Absent,
    Get,
    Options,
    Lower(bool),
    Other(String),
    NotAString(i64),
}

#[derive(Arbitrary, Debug)]
struct Structured {
    request_id: Option<String>,
    request_id_not_string: bool,
    no_request: bool,
    url: Url,
    url_not_string: bool,
    method: Method,
    headers: Vec<(String, String)>,
    frame_id: Option<String>,
    response_status: Option<u16>,
    response_error: Option<String>,
    resource_type: Option<String>,
}

fn build_url(u: &Url) -> String {
    let scheme = match &u.scheme {
        Scheme::Https => "https".to_string(),
        Scheme::Http => "http".into(),
        Scheme::Upper => "HTTPS".into(),
        Scheme::Ws => "wss".into(),
        Scheme::Other(s) => s.clone(),
    };
    let host = match &u.host {
        Host::Bridge => bridge_script::BRIDGE_HOST.to_string(),
        Host::BridgeUpper => bridge_script::BRIDGE_HOST.to_uppercase(),
        Host::BridgeTrailingDot => format!("{}.", bridge_script::BRIDGE_HOST),
        Host::BridgePort(p) => format!("{}:{p}", bridge_script::BRIDGE_HOST),
        Host::BridgeUserinfo(u) => format!("{u}@{}", bridge_script::BRIDGE_HOST),
        Host::BridgePercent => "tabwarden-dialog-bridge%2Einvalid".into(),
        Host::Other(h) => h.clone(),
    };
    let mut s = format!("{scheme}://{host}");
    match &u.token {
        Token::Ours => s.push_str(&format!("/{TOKEN}")),
        Token::OursPercentEncoded => s.push_str("/%66uzzTOKEN_0123456789-a"),
        Token::Prefix => s.push_str(&format!("/{}", &TOKEN[..TOKEN.len() - 1])),
        Token::Longer => s.push_str(&format!("/{TOKEN}x")),
        Token::Other(t) => s.push_str(&format!("/{t}")),
        Token::Missing => {}
    }
    match &u.path {
        None => s.push_str("/dialog"),
        Some(p) => s.push_str(&format!("/{p}")),
    }
    for seg in &u.extra_segments {
        s.push('/');
        s.push_str(seg);
    }
    let mut q: Vec<String> = u.query.iter().map(|(k, v)| format!("{k}={v}")).collect();
    if let Some(r) = &u.raw_query {
        q.push(r.clone());
    }
    if !q.is_empty() {
        s.push('?');
        s.push_str(&q.join("&"));
    }
    if let Some(f) = &u.fragment {
        s.push('#');
        s.push_str(f);
    }
    s
}

fn build(st: &Structured) -> Value {
    let mut p = Map::new();
    if let Some(id) = &st.request_id {
        p.insert(
            "requestId".into(),
            if st.request_id_not_string {
                json!(id.len())
            } else {
                json!(id)
            },
        );
    }
    if !st.no_request {
        let mut r = Map::new();
        let url = build_url(&st.url);
        r.insert(
            "url".into(),
            if st.url_not_string {
                json!([url])
            } else {
                json!(url)
            },
        );
        match &st.method {
            Method::Absent => {}
            Method::Get => {
                r.insert("method".into(), json!("GET"));
            }
            Method::Options => {
                r.insert("method".into(), json!("OPTIONS"));
            }
            Method::Lower(get) => {
                r.insert("method".into(), json!(if *get { "get" } else { "options" }));
            }
            Method::Other(m) => {
                r.insert("method".into(), json!(m));
            }
            Method::NotAString(n) => {
                r.insert("method".into(), json!(n));
            }
        }
        let headers: Map<String, Value> = st
            .headers
            .iter()
            .map(|(k, v)| (k.clone(), json!(v)))
            .collect();
        r.insert("headers".into(), Value::Object(headers));
        p.insert("request".into(), Value::Object(r));
    }
    if let Some(f) = &st.frame_id {
        p.insert("frameId".into(), json!(f));
    }
    if let Some(c) = st.response_status {
        p.insert("responseStatusCode".into(), json!(c));
    }
    if let Some(e) = &st.response_error {
        p.insert("responseErrorReason".into(), json!(e));
    }
    if let Some(t) = &st.resource_type {
        p.insert("resourceType".into(), json!(t));
    }
    Value::Object(p)
}

fuzz_target!(|data: &[u8]| {
    let bridge = Bridge::with_token(TOKEN).expect("valid token");
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    if first & 1 == 1 {
        if let Ok(v) = serde_json::from_slice::<Value>(rest) {
            check(&bridge, &v);
        }
        return;
    }
    let mut u = Unstructured::new(rest);
    if let Ok(st) = Structured::arbitrary(&mut u) {
        check(&bridge, &build(&st));
    }
});
