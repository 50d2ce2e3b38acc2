//! Console errors (kept, capped, cut) and events that are unknown or
//! malformed (ignored).

use super::*;
use crate::view::CONSOLE_ERRORS_CAP;

fn error(text: &str) -> Value {
    json!({"type": "error", "args": [{"type": "string", "value": text}]})
}

pub(super) fn rows() -> Vec<Row> {
    let long = format!("a{}", "é".repeat(1000));
    let mut capped: Vec<Step> = (0..CONSOLE_ERRORS_CAP as u64 + 5)
        .map(|i| page(i, "Runtime.consoleAPICalled", error(&format!("e{i}"))))
        .collect();
    capped.push(page(100, "Runtime.consoleAPICalled", error(&long)));
    vec![
        row("console_errors_asserts_and_exceptions_are_kept_and_logs_are_not")
            .steps(vec![
                page(1, "Runtime.consoleAPICalled", json!({"type": "log", "args": [{"type": "string", "value": "hello"}]})),
                page(2, "Runtime.consoleAPICalled", json!({"type": "error", "args": [
                    {"type": "string", "value": "a"},
                    {"type": "number", "value": 2},
                    {"type": "object", "description": "Error: x"},
                    {"type": "number", "unserializableValue": "NaN"},
                ], "stackTrace": {"callFrames": [{"url": "http://a.test/app.js"}]}})),
                page(3, "Runtime.consoleAPICalled", json!({"type": "assert", "args": [{"type": "string", "value": "Assertion failed"}]})),
                page(4, "Runtime.exceptionThrown", json!({"exceptionDetails": {"text": "Uncaught", "exception": {"description": "TypeError: y"}, "url": "http://a.test/b.js"}})),
                page(5, "Runtime.exceptionThrown", json!({"exceptionDetails": {"text": "Uncaught (in promise)", "url": ""}})),
            ])
            .expect(vec![
                ("/steps/0/view_changed", json!(false)),
                ("/view/console_errors/0", json!({"kind": "error", "text": "a 2 Error: x NaN", "url": "http://a.test/app.js", "session_id": "PAGE", "at_ms": BASE_MS + 2})),
                ("/view/console_errors/1/kind", json!("assert")),
                ("/view/console_errors/1/url", json!(ABSENT)),
                ("/view/console_errors/2", json!({"kind": "exception", "text": "TypeError: y", "url": "http://a.test/b.js", "session_id": "PAGE", "at_ms": BASE_MS + 4})),
                ("/view/console_errors/3/text", json!("Uncaught (in promise)")),
                ("/view/console_errors/3/url", json!(ABSENT)),
                ("/view/console_errors_total", json!(4)),
            ]),
        row("console_errors_are_capped_and_long_texts_cut_at_a_char_boundary")
            .steps(capped)
            .expect(vec![
                ("/view/console_errors/0/text", json!("e6")),
                ("/view/console_errors/0/at_ms", json!(BASE_MS + 6)),
                ("/view/console_errors/49/text", json!(format!("a{}…", "é".repeat(999)))),
                ("/view/console_errors/50", json!(ABSENT)),
                ("/view/console_errors_total", json!(CONSOLE_ERRORS_CAP + 6)),
            ]),
        row("unknown_methods_and_malformed_events_change_nothing")
            .bridge(BridgeMode::On)
            .steps(vec![
                main_frame(0),
                page(1, "Foo.bar", json!({"anything": [1, 2]})),
                page(2, "Network.requestWillBeSent", json!({"requestId": "1"})),
                page(3, "Target.attachedToTarget", Value::Null),
                page(4, "Target.detachedFromTarget", json!({})),
                page(5, "Runtime.executionContextCreated", json!({"context": 5})),
                page(6, "Runtime.executionContextDestroyed", json!({"executionContextId": "x"})),
                page(7, "Fetch.requestPaused", json!({})),
                browser(8, "Target.targetCreated", json!({})),
                browser(9, "Target.targetInfoChanged", json!("garbage")),
                browser(10, "Inspector.targetCrashed", json!({})),
                browser(11, "Page.javascriptDialogOpening", opening("alert", "browser level")),
                browser(12, "Page.frameDetached", json!({"frameId": "MAIN"})),
                on(13, "STRANGER", "Runtime.executionContextsCleared", json!({})),
            ])
            .expect(vec![
                ("/changed_steps", json!([0])),
                ("/steps/3/out", json!([])),
                ("/steps/7/out", json!([])),
                ("/steps/8/out", json!([])),
                ("/steps/11/out", json!([])),
                ("/view/pending_dialogs", json!([])),
                ("/view/frame_tree/top/frame_id", json!("MAIN")),
                ("/view/active", json!(true)),
                ("/frames/MAIN/ctx", json!(null)),
            ]),
    ]
}
