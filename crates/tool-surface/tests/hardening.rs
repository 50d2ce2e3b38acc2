//! Hardening found by a new-user test: `javascript:` URLs cannot bypass
//! `--no-evaluate`, a hung `onload` does not wedge the tab, and navigating
//! while a dialog is pending is refused. Integer arguments take integral
//! floats (`5000.0`), as JSON Schema's `integer` does (issue 8).

use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tool_surface::{Tools, ToolsConfig};

async fn tools(config: ToolsConfig) -> Tools {
    let ws =
        cdp_transport::launcher::shared_chrome().unwrap_or_else(|e| panic!("no Chromium: {e}"));
    Tools::connect(&ws, config.new_tab(true))
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"))
}

fn code(v: &Value) -> &str {
    v["error"]["code"].as_str().unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn navigate_refuses_javascript_urls() {
    let t = tools(ToolsConfig::default()).await;
    for url in [
        "javascript:alert(1)",
        "JavaScript:void(document.title='x')",
        "  javascript:1",
        "java\tscript:1",
    ] {
        let r = t.call("browser_navigate", json!({ "url": url })).await;
        assert_eq!(code(&r), "invalid_argument", "{url}: {r:#}");
        assert_eq!(r["error"]["field"], "url", "{r:#}");
        let next = r["error"]["next_step"].as_str().unwrap_or_default();
        assert!(next.contains("browser_evaluate"), "{r:#}");
    }
    let ok = t
        .call("browser_navigate", json!({"url": "about:blank"}))
        .await;
    assert_eq!(ok["status"], "loaded", "{ok:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cdp_javascript_urls_are_refused_without_evaluate() {
    let t = tools(ToolsConfig::default().evaluate_enabled(false)).await;
    let nav = t
        .call("browser_navigate", json!({"url": "about:blank"}))
        .await;
    assert_eq!(nav["status"], "loaded", "{nav:#}");
    for (method, url) in [
        ("Page.navigate", "javascript:document.title='pwned'"),
        ("Page.navigate", " JAVASCRIPT:1"),
        ("Target.createTarget", "javascript:document.title='pwned'"),
    ] {
        let r = t
            .call(
                "browser_cdp",
                json!({"method": method, "params": {"url": url}}),
            )
            .await;
        assert_eq!(code(&r), "evaluate_disabled", "{method} {url}: {r:#}");
    }
    // An ordinary URL still navigates through browser_cdp.
    let r = t
        .call(
            "browser_cdp",
            json!({"method": "Page.navigate", "params": {"url": "about:blank"}}),
        )
        .await;
    assert!(r.get("error").is_none(), "{r:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hung_onload_is_stopped_after_the_navigate_timeout() {
    let fx = cdp_mock::FixtureServer::start().await;
    fx.page(
        "/hung.html",
        r#"<!doctype html><title>Hung</title><body onload="while(true){}"><p>spin</p></body>"#,
    );
    let t = tools(ToolsConfig::default()).await;
    let url = fx.url("127.0.0.1", "/hung.html");
    let nav = t
        .call("browser_navigate", json!({"url": url, "timeout_ms": 2000}))
        .await;
    assert_eq!(code(&nav), "timeout", "{nav:#}");
    let msg = nav["error"]["message"].as_str().unwrap_or_default();
    assert!(msg.contains("script") && msg.contains("stopped"), "{nav:#}");
    let start = Instant::now();
    let ev = t
        .call(
            "browser_evaluate",
            json!({"expression": "1+1", "timeout_ms": 5000}),
        )
        .await;
    assert_eq!(ev["value"], 2, "{ev:#}");
    assert!(start.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn navigate_while_a_dialog_is_pending_is_dialog_pending() {
    let fx = cdp_mock::FixtureServer::start().await;
    fx.page(
        "/alert.html",
        r#"<!doctype html><title>Alert</title><script>alert('first page')</script>"#,
    );
    fx.page(
        "/next.html",
        r#"<!doctype html><title>Next</title><p>next</p>"#,
    );
    let t = tools(ToolsConfig::default()).await;
    let nav = t
        .call(
            "browser_navigate",
            json!({"url": fx.url("127.0.0.1", "/alert.html")}),
        )
        .await;
    assert_eq!(nav["status"], "dialog_opened", "{nav:#}");
    let id = nav["dialog"]["id"].clone();

    let again = t
        .call(
            "browser_navigate",
            json!({"url": fx.url("127.0.0.1", "/next.html")}),
        )
        .await;
    assert_eq!(code(&again), "dialog_pending", "{again:#}");
    assert_eq!(again["error"]["dialog"]["id"], id, "{again:#}");
    let next = again["error"]["next_step"].as_str().unwrap_or_default();
    assert!(next.contains("browser_dialog"), "{again:#}");
    assert!(next.contains("auto_dismiss"), "{again:#}");
    assert!(next.contains("browser_tabs"), "{again:#}");

    // The page did not move; answering the dialog lets navigate run.
    let ans = t.call("browser_dialog", json!({"action": "accept"})).await;
    assert!(ans.get("error").is_none(), "{ans:#}");
    let nav = t
        .call(
            "browser_navigate",
            json!({"url": fx.url("127.0.0.1", "/next.html")}),
        )
        .await;
    assert_eq!(nav["status"], "loaded", "{nav:#}");
}

/// JSON Schema's `integer` includes numbers with a zero fractional part, and
/// runtimes that hold numbers as doubles send them (issue 8): `5000.0` is a
/// `timeout_ms` of 5000 on every path, through `Tools::call` against a real
/// tab; a fraction, a negative, a string or a value past the range is still
/// `invalid_argument` naming the field, before anything is sent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn integral_float_arguments_are_integers_and_the_rest_is_refused_by_name() {
    let t = tools(ToolsConfig::default()).await;
    let nav = t
        .call(
            "browser_navigate",
            json!({"url": "about:blank", "timeout_ms": 5000.0}),
        )
        .await;
    assert_eq!(nav["status"], "loaded", "{nav:#}");
    let ev = t
        .call(
            "browser_evaluate",
            json!({"expression": "6 * 7", "timeout_ms": 5000.0}),
        )
        .await;
    assert_eq!(ev["value"], 42, "{ev:#}");
    let exp: Value = serde_json::from_str(r#"{"timeout_ms": 5e3}"#).expect("json");
    let snap = t.call("browser_snapshot", exp).await;
    assert_eq!(snap["supervisor"]["active"], true, "{snap:#}");
    let shot = t
        .call("browser_screenshot", json!({"timeout_ms": 20000.0}))
        .await;
    assert_eq!(shot["mime_type"], "image/png", "{shot:#}");
    let con = t.call("browser_console", json!({"limit": 5.0})).await;
    assert!(con.get("error").is_none(), "{con:#}");

    for (tool, args, field) in [
        (
            "browser_evaluate",
            json!({"expression": "1", "timeout_ms": 5000.5}),
            "timeout_ms",
        ),
        (
            "browser_evaluate",
            json!({"expression": "1", "timeout_ms": -5000.0}),
            "timeout_ms",
        ),
        (
            "browser_evaluate",
            json!({"expression": "1", "timeout_ms": "NaN"}),
            "timeout_ms",
        ),
        (
            "browser_snapshot",
            json!({"timeout_ms": 1e20}),
            "timeout_ms",
        ),
        // In u64 but past the tool's own range: the range check names it too.
        (
            "browser_snapshot",
            json!({"timeout_ms": 120001.0}),
            "timeout_ms",
        ),
        ("browser_snapshot", json!({"timeout_ms": 0.0}), "timeout_ms"),
        ("browser_console", json!({"limit": 2.5}), "limit"),
        ("browser_console", json!({"limit": -1}), "limit"),
    ] {
        let r = t.call(tool, args.clone()).await;
        assert_eq!(code(&r), "invalid_argument", "{tool} {args}: {r:#}");
        assert_eq!(r["error"]["field"], field, "{tool} {args}: {r:#}");
        let msg = r["error"]["message"].as_str().unwrap_or_default();
        assert!(msg.contains(field), "{tool} {args}: {r:#}");
    }
    let r = t
        .call(
            "browser_evaluate",
            json!({"expression": "1", "timeout_ms": 5000.5}),
        )
        .await;
    println!("[issue 8] 5000.5 -> {}", r["error"]["message"]);
}
