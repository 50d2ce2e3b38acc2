use super::*;

fn bridge() -> Bridge {
    Bridge::with_token("tok_EN-1").expect("valid token")
}

fn paused(url: &str, method: &str) -> Value {
    json!({
        "requestId": "interception-job-1.0",
        "frameId": "FRAME1",
        "resourceType": "XHR",
        "request": {"url": url, "method": method, "headers": {"Accept": "*/*"}},
    })
}

/// The answer params plus their decoded body, for readable snapshots.
fn with_body(v: Value) -> Value {
    let body = v["body"].as_str().expect("body");
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(body)
        .expect("base64");
    json!({"params": v, "decoded_body": String::from_utf8(bytes).expect("utf-8")})
}

#[test]
fn new_tokens_are_random_urlsafe_and_128_bits() {
    let (a, b) = (Bridge::new(), Bridge::new());
    assert_ne!(a.token(), b.token());
    assert_eq!(a.token().len(), 22);
    assert!(Bridge::with_token(a.token()).is_ok());
    assert!(
        !format!("{a:?}").contains(a.token()),
        "Debug must not show the token"
    );
}

#[test]
fn with_token_rejects_what_cannot_go_into_a_url_or_js_literal() {
    for bad in ["", "a'b", "a/b", "a b", "é", &"x".repeat(129)] {
        let err = Bridge::with_token(bad).expect_err(bad);
        assert!(matches!(err, Error::InvalidToken { .. }), "{bad}: {err}");
    }
}

#[test]
fn script_snapshot_with_the_random_token_redacted() {
    let b = Bridge::new();
    let script = b.script();
    assert!(
        !script.contains("__TABWARDEN_"),
        "every placeholder is filled"
    );
    assert_eq!(
        script.matches(b.token()).count(),
        1,
        "the token appears once, in the argument list"
    );
    // Tokens are [A-Za-z0-9_-], which a regex reads literally.
    insta::with_settings!({filters => vec![(b.token(), "[token]")]}, {
        insta::assert_snapshot!("bridge_script", script);
    });
}

#[test]
fn fetch_patterns_match_only_the_bridge_host_at_request_stage() {
    insta::assert_yaml_snapshot!("fetch_enable_params", bridge().fetch_enable_params());
}

#[test]
fn fulfill_answer_snapshots() {
    let b = bridge();
    insta::assert_yaml_snapshot!(
        "fulfill_answer_prompt_accept",
        with_body(b.fulfill_answer("r1", true, Some("Bob \"the\" agent ✓")))
    );
    insta::assert_yaml_snapshot!(
        "fulfill_answer_dismiss",
        with_body(b.fulfill_answer("r2", false, None))
    );
    insta::assert_yaml_snapshot!("fulfill_forbidden", with_body(b.fulfill_forbidden("r3")));
    insta::assert_yaml_snapshot!("fulfill_preflight", with_body(b.fulfill_preflight("r4")));
}

#[test]
fn parse_paused_cases() {
    let b = bridge();
    let base = "https://tabwarden-dialog-bridge.invalid";
    let cases = [
        (
            "prompt",
            paused(
                &format!(
                    "{base}/tok_EN-1/dialog?kind=prompt&message=Name%3F%20%E2%9C%93&default=Ann"
                ),
                "GET",
            ),
        ),
        (
            "alert over http",
            paused(
                "http://tabwarden-dialog-bridge.invalid/tok_EN-1/dialog?kind=alert&message=hi",
                "GET",
            ),
        ),
        (
            "confirm ignores default",
            paused(
                &format!("{base}/tok_EN-1/dialog?kind=confirm&message=ok%3F&default=x"),
                "GET",
            ),
        ),
        (
            "no token",
            paused(&format!("{base}/dialog?kind=alert&message=x"), "GET"),
        ),
        (
            "wrong token",
            paused(
                &format!("{base}/tok_EN-2/dialog?kind=alert&message=x"),
                "GET",
            ),
        ),
        (
            "token prefix",
            paused(
                &format!("{base}/tok_EN-/dialog?kind=alert&message=x"),
                "GET",
            ),
        ),
        (
            "extra path",
            paused(
                &format!("{base}/tok_EN-1/dialog/x?kind=alert&message=x"),
                "GET",
            ),
        ),
        (
            "unknown kind",
            paused(
                &format!("{base}/tok_EN-1/dialog?kind=beforeunload&message=x"),
                "GET",
            ),
        ),
        (
            "post",
            paused(
                &format!("{base}/tok_EN-1/dialog?kind=alert&message=x"),
                "POST",
            ),
        ),
        (
            "preflight",
            paused(
                &format!("{base}/tok_EN-1/dialog?kind=alert&message=x"),
                "OPTIONS",
            ),
        ),
        (
            "forged preflight",
            paused(&format!("{base}/nope/dialog"), "OPTIONS"),
        ),
        (
            "other host",
            paused(
                "https://example.com/tok_EN-1/dialog?kind=alert&message=x",
                "GET",
            ),
        ),
        (
            "lookalike host",
            paused(
                "https://tabwarden-dialog-bridge.invalid.example.com/tok_EN-1/dialog?kind=alert",
                "GET",
            ),
        ),
        (
            "userinfo trick",
            paused(
                "https://tabwarden-dialog-bridge.invalid@example.com/tok_EN-1/dialog?kind=alert",
                "GET",
            ),
        ),
    ];
    let out: Vec<Value> = cases
        .iter()
        .map(|(name, p)| json!({"case": name, "paused": b.parse_paused(p).expect("well-formed")}))
        .collect();
    insta::assert_yaml_snapshot!("parse_paused_cases", out);
}

#[test]
fn response_stage_pauses_are_not_ours() {
    let mut p = paused(
        "https://tabwarden-dialog-bridge.invalid/tok_EN-1/dialog?kind=alert&message=x",
        "GET",
    );
    p["responseStatusCode"] = json!(200);
    assert!(matches!(
        bridge().parse_paused(&p),
        Ok(Paused::NotOurs { .. })
    ));
}

#[test]
fn malformed_params_are_an_error_naming_the_field() {
    let err = bridge()
        .parse_paused(&json!({"request": {"url": "x"}}))
        .expect_err("no requestId");
    assert_eq!(
        err.to_string(),
        "malformed Fetch.requestPaused params: missing requestId"
    );
    let err = bridge()
        .parse_paused(&json!({"requestId": "r", "request": {}}))
        .expect_err("no url");
    assert_eq!(
        err.to_string(),
        "malformed Fetch.requestPaused params: missing request.url"
    );
}

#[test]
fn long_messages_are_cut_at_a_char_boundary_with_a_marker() {
    let b = bridge();
    // 3-byte characters: 8192 is not a multiple of 3, so the cut needs care.
    let long: String = "✓".repeat(5000);
    let enc: String = url::form_urlencoded::byte_serialize(long.as_bytes()).collect();
    let p = paused(&format!("https://tabwarden-dialog-bridge.invalid/tok_EN-1/dialog?kind=prompt&message={enc}&default={enc}"), "GET");
    let Ok(Paused::Dialog(d)) = b.parse_paused(&p) else {
        panic!("a dialog")
    };
    assert!(d.truncated);
    for text in [&d.message, d.default_prompt.as_ref().expect("default")] {
        let kept = text.strip_suffix(TRUNCATION_MARKER).expect("marker");
        assert!(
            kept.len() <= MAX_MESSAGE_BYTES && kept.len() > MAX_MESSAGE_BYTES - 3,
            "{}",
            kept.len()
        );
        assert!(kept.chars().all(|c| c == '✓'));
    }
    let short = paused(
        "https://tabwarden-dialog-bridge.invalid/tok_EN-1/dialog?kind=alert&message=hi",
        "GET",
    );
    let Ok(Paused::Dialog(d)) = b.parse_paused(&short) else {
        panic!("a dialog")
    };
    assert!(!d.truncated);
    assert_eq!(d.message, "hi");
}

#[test]
fn the_script_is_a_simple_get_and_keeps_beforeunload_native() {
    let s = bridge().script();
    assert!(s.contains("'GET'"));
    assert!(
        !s.contains("setRequestHeader"),
        "a custom header would need a CORS preflight"
    );
    assert!(
        !s.contains("addEventListener") && !s.contains("onbeforeunload"),
        "beforeunload stays native"
    );
}
