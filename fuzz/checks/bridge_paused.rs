//! The invariants of the `bridge_paused` fuzz target, shared with the replay
//! test `crates/bridge-script/tests/fuzz_regressions.rs` (included there by
//! `#[path]`), so the fuzzer and the committed regressions check the same thing.

use bridge_script::{Bridge, DialogKind, Paused, MAX_MESSAGE_BYTES, TRUNCATION_MARKER};
use serde_json::{json, Value};

/// The token of the bridge under test.
pub const TOKEN: &str = "fuzzTOKEN_0123456789-a";

/// Classifies `params` and checks the verdict against the wire format.
///
/// # Panics
/// When `parse_paused` panics or its verdict breaks an invariant.
pub fn check(bridge: &Bridge, params: &Value) {
    let Ok(paused) = bridge.parse_paused(params) else {
        // Malformed only when requestId or request.url is missing.
        let ok_id = params.get("requestId").and_then(Value::as_str).is_some();
        let ok_url = params
            .get("request")
            .and_then(|r| r.get("url"))
            .and_then(Value::as_str)
            .is_some();
        assert!(!(ok_id && ok_url), "well-formed params refused: {params}");
        return;
    };
    let request_id = params["requestId"].as_str().expect("parsed, so present");
    assert_eq!(paused.request_id(), request_id);
    let raw_url = params["request"]["url"]
        .as_str()
        .expect("parsed, so present");
    let response_stage =
        params.get("responseStatusCode").is_some() || params.get("responseErrorReason").is_some();
    let method = params["request"]
        .get("method")
        .and_then(Value::as_str)
        .unwrap_or("GET");
    let ours = || {
        let u = url::Url::parse(raw_url).ok()?;
        let host_ok = matches!(u.scheme(), "http" | "https")
            && u.host_str() == Some(bridge_script::BRIDGE_HOST);
        let mut segs = u.path_segments()?;
        Some(
            host_ok
                && segs.next() == Some(TOKEN)
                && segs.next() == Some("dialog")
                && segs.next().is_none(),
        )
    };
    match &paused {
        Paused::Dialog(d) => {
            assert!(
                !response_stage,
                "response stage taken as a dialog: {params}"
            );
            assert_eq!(
                ours(),
                Some(true),
                "dialog for a URL that is not ours: {raw_url}"
            );
            assert!(
                method.eq_ignore_ascii_case("GET"),
                "dialog for method {method}"
            );
            for text in std::iter::once(&d.message).chain(d.default_prompt.as_ref()) {
                assert!(
                    text.len() <= MAX_MESSAGE_BYTES + TRUNCATION_MARKER.len(),
                    "message over the cap: {} bytes",
                    text.len()
                );
            }
            assert_eq!(d.default_prompt.is_some(), d.kind == DialogKind::Prompt);
            if d.truncated {
                let cut = d.message.ends_with(TRUNCATION_MARKER)
                    || d.default_prompt
                        .as_deref()
                        .is_some_and(|p| p.ends_with(TRUNCATION_MARKER));
                assert!(cut, "truncated without the marker");
            }
            assert_eq!(
                d.frame_id.as_deref(),
                params.get("frameId").and_then(Value::as_str)
            );
            let a = bridge.fulfill_answer(&d.request_id, true, Some(&d.message));
            assert_eq!(a["requestId"], json!(request_id));
            assert_eq!(a["responseCode"], json!(200));
        }
        Paused::Preflight { .. } => {
            assert!(!response_stage);
            assert_eq!(
                ours(),
                Some(true),
                "preflight for a URL that is not ours: {raw_url}"
            );
            assert!(method.eq_ignore_ascii_case("OPTIONS"));
            let a = bridge.fulfill_preflight(request_id);
            assert_eq!(a["responseCode"], json!(204));
        }
        Paused::Forged { .. } => {
            assert!(!response_stage);
            let u = url::Url::parse(raw_url).expect("forged, so it parsed");
            assert_eq!(u.host_str(), Some(bridge_script::BRIDGE_HOST));
            let a = bridge.fulfill_forbidden(request_id);
            assert_eq!(a["responseCode"], json!(403));
        }
        Paused::NotOurs { .. } => {
            let host_ours = url::Url::parse(raw_url).is_ok_and(|u| {
                matches!(u.scheme(), "http" | "https")
                    && u.host_str() == Some(bridge_script::BRIDGE_HOST)
            });
            assert!(
                response_stage || !host_ours,
                "bridge-host request let through: {params}"
            );
            let c = bridge_script::continue_params(request_id);
            assert_eq!(c["requestId"], json!(request_id));
        }
        other => panic!("unknown verdict {other:?}"),
    }
}
