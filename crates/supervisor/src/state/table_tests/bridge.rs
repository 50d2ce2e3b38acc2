//! Bridge dialogs (a paused `Fetch.requestPaused` of the bridge script) and
//! the `bridge: auto` switch.

use super::*;
use base64::Engine as _;
use bridge_script::{BRIDGE_HOST, MAX_PENDING_DIALOGS};

fn b64(s: &str) -> Value {
    json!(base64::engine::general_purpose::STANDARD.encode(s))
}

fn request(rid: &str, url: &str, method: &str) -> Value {
    json!({"requestId": rid, "frameId": "MAIN", "resourceType": "XHR", "request": {"url": url, "method": method, "headers": {}}})
}

pub(super) fn rows() -> Vec<Row> {
    let mut preflight = paused("r-p", "kind=alert&message=x", "MAIN");
    preflight["request"]["method"] = json!("OPTIONS");
    let mut over_cap = vec![main_frame(0)];
    over_cap.extend((0..=MAX_PENDING_DIALOGS as u64).map(|i| {
        let rid = format!("c-{i}");
        page(
            1 + i,
            "Fetch.requestPaused",
            paused(&rid, "kind=alert&message=m", "MAIN"),
        )
    }));
    let last = MAX_PENDING_DIALOGS;
    vec![
        row("a_bridge_dialog_is_pending_until_its_request_is_fulfilled")
            .bridge(BridgeMode::On)
            .steps(vec![
                main_frame(0),
                page(1, "Fetch.requestPaused", paused("r-1", "kind=prompt&message=p&default=dflt", "MAIN")),
                agent(2, None, true, None),
                Step::Replied(3),
            ])
            .expect(vec![
                ("/steps/1/out", json!([{"watchdog": "d-1", "after_ms": 30_000}])),
                ("/steps/2/out/0/call", json!(bridge_script::FULFILL_METHOD)),
                ("/steps/2/out/0/on", json!("PAGE")),
                ("/steps/2/out/0/params/requestId", json!("r-1")),
                ("/steps/2/out/0/params/responseCode", json!(200)),
                ("/steps/2/out/0/params/body", b64(r#"{"accept":true,"promptText":null}"#)),
                ("/view/recent_dialogs/0/opened_via", json!("bridge")),
                ("/view/recent_dialogs/0/bridge_request_id", json!("r-1")),
                ("/view/recent_dialogs/0/type", json!("prompt")),
                ("/view/recent_dialogs/0/url", json!("http://a.test/")),
                ("/view/recent_dialogs/0/closed_by", json!("agent")),
                ("/view/recent_dialogs/0/user_input", json!("dflt")),
                ("/swallow_close", json!({})),
            ]),
        row("bridge_requests_that_are_no_dialog_are_answered_at_once")
            .bridge(BridgeMode::On)
            .steps(vec![
                main_frame(0),
                page(1, "Fetch.requestPaused", request("r-f", &format!("https://{BRIDGE_HOST}/wrong-token/dialog?kind=alert&message=x"), "GET")),
                page(2, "Fetch.requestPaused", preflight),
                page(3, "Fetch.requestPaused", request("r-n", "http://a.test/data.json", "GET")),
                page(4, "Fetch.requestPaused", json!({"requestId": "r-m"})),
                page(5, "Fetch.requestPaused", json!({"request": {"url": "http://a.test/"}})),
            ])
            .expect(vec![
                ("/steps/1/out/0/send", json!(bridge_script::FULFILL_METHOD)),
                ("/steps/1/out/0/params/responseCode", json!(403)),
                ("/steps/2/out/0/params/responseCode", json!(204)),
                ("/steps/3/out", json!([{"send": bridge_script::CONTINUE_METHOD, "on": "PAGE", "params": {"requestId": "r-n"}}])),
                ("/steps/4/out", json!([{"send": bridge_script::CONTINUE_METHOD, "on": "PAGE", "params": {"requestId": "r-m"}}])),
                ("/steps/5/out", json!([])),
                ("/view/bridge_refused", json!(1)),
                ("/view/pending_dialogs", json!([])),
            ]),
        row("bridge_dialogs_over_the_cap_are_dismissed_at_once")
            .bridge(BridgeMode::On)
            .steps(over_cap)
            .expect(vec![
                ("/view/pending_dialogs/31/bridge_request_id", json!(format!("c-{}", last - 1))),
                ("/view/pending_dialogs/32", json!(ABSENT)),
                ("/view/recent_dialogs/0/bridge_request_id", json!(format!("c-{last}"))),
                ("/view/recent_dialogs/0/closed_by", json!("auto_policy")),
                ("/view/recent_dialogs/0/accepted", json!(false)),
                ("/steps/33/out/0/send", json!(bridge_script::FULFILL_METHOD)),
                ("/steps/33/out/0/params/body", b64(r#"{"accept":false,"promptText":null}"#)),
                ("/steps/33/out/1", json!(ABSENT)),
            ]),
        row("a_bridge_dialog_goes_when_the_session_that_paused_it_detaches")
            .bridge(BridgeMode::On)
            .steps([vec![main_frame(0)], oopif(1), vec![
                page(4, "Page.javascriptDialogOpening", opening("alert", "native")),
                on(5, "SX", "Fetch.requestPaused", paused("x-1", "kind=confirm&message=ok%3F", "X")),
                page(6, "Target.detachedFromTarget", detached("SX")),
            ]].concat())
            .expect(vec![
                ("/steps/4/out/0/watchdog", json!("d-2")),
                ("/view/recent_dialogs/0/id", json!("d-2")),
                ("/view/recent_dialogs/0/message", json!("ok?")),
                ("/view/recent_dialogs/0/session_id", json!("SX")),
                ("/view/recent_dialogs/0/url", json!("http://b.test/x")),
                ("/view/recent_dialogs/0/closed_by", json!("remote")),
                ("/view/recent_dialogs/0/closed_at_ms", json!(BASE_MS + 6)),
                ("/view/pending_dialogs/0/id", json!("d-1")),
            ]),
        row("bridge_auto_switches_on_when_a_native_dialog_is_closed_by_someone_else_at_once")
            .bridge(BridgeMode::Auto)
            .steps([vec![main_frame(0)], oopif(1), vec![
                page(10, "Page.javascriptDialogOpening", opening("alert", "a")),
                page(60, "Page.javascriptDialogClosed", closed(true)),
            ]].concat())
            .expect(vec![
                ("/steps/4/out", json!([{"install_bridge": ["PAGE", "SX"]}])),
                ("/bridge_on", json!(true)),
                ("/view/bridge_active", json!(false)),
                ("/view/recent_dialogs/0/closed_by", json!("remote")),
            ]),
        row("bridge_auto_stays_off_for_a_close_at_the_window_or_our_own_answer")
            .bridge(BridgeMode::Auto)
            .steps(vec![
                main_frame(0),
                page(10, "Page.javascriptDialogOpening", opening("alert", "a")),
                page(110, "Page.javascriptDialogClosed", closed(true)),
                page(300, "Page.javascriptDialogOpening", opening("alert", "b")),
                agent(301, None, true, None),
                page(302, "Page.javascriptDialogClosed", closed(true)),
            ])
            .expect(vec![
                ("/steps/2/out", json!([])),
                ("/steps/5/out", json!([])),
                ("/bridge_on", json!(false)),
                ("/view/recent_dialogs/0/closed_by", json!("remote")),
                ("/view/recent_dialogs/1/closed_by", json!("agent")),
            ]),
    ]
}
