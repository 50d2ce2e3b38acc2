//! Tests of the agent errors and of the mapping of the lower crates' errors.

use super::{map_eval, map_supervisor, map_transport};
use crate::ErrorCode;
use std::time::Duration;

#[test]
fn messages_do_not_repeat_the_code_or_name_internal_calls() {
    let t = map_supervisor(
        &supervisor::Error::NoDialog { recent: vec![] },
        "browser_dialog",
    );
    assert!(
        t.message.starts_with("no dialog is pending"),
        "{}",
        t.message
    );
    let t = map_supervisor(
        &supervisor::Error::UnknownFrame {
            frame_id: "NOPE".into(),
        },
        "browser_cdp",
    );
    assert!(!t.message.contains("snapshot()"), "{}", t.message);
    assert!(t.message.contains("NOPE"), "{}", t.message);
    let a = crate::error::ToolError::dialog_pending(
        crate::types::DialogView {
            id: "d-1".into(),
            kind: "alert".into(),
            message: "m".into(),
            default_prompt: None,
            frame_id: None,
            url: None,
            message_truncated: false,
        },
        "browser_click",
    );
    assert!(
        a.message.starts_with("an alert dialog (d-1)"),
        "{}",
        a.message
    );
    assert_eq!(crate::error::a_dialog_kind("confirm"), "a confirm");
    assert_eq!(crate::error::a_dialog_kind("unknown"), "an unknown");
}

#[test]
fn evaluate_errors_keep_the_tool_codes_and_say_what_next() {
    let cases = [
        (
            evaluate::Error::UnknownRef {
                ref_id: "e9".into(),
            },
            ErrorCode::UnknownRef,
        ),
        (
            evaluate::Error::StaleRef {
                ref_id: "e1".into(),
                role: "button".into(),
                name: "OK".into(),
                reason: "frame loaded a new document".into(),
            },
            ErrorCode::StaleRef,
        ),
        (
            evaluate::Error::InvalidKey { key: "Nope".into() },
            ErrorCode::InvalidArgument,
        ),
        (
            evaluate::Error::Timeout {
                kind: evaluate::TimeoutKind::Script,
                budget: Duration::from_millis(500),
                elapsed: Duration::from_millis(510),
                terminated: true,
            },
            ErrorCode::Timeout,
        ),
        (
            evaluate::Error::JsException {
                name: "Error".into(),
                message: "boom".into(),
                location: None,
            },
            ErrorCode::ScriptError,
        ),
        (
            evaluate::Error::InvalidSource {
                message: "SyntaxError".into(),
                line: Some(0),
                column: Some(3),
            },
            ErrorCode::ScriptError,
        ),
        (
            evaluate::Error::EvaluateDisabled,
            ErrorCode::EvaluateDisabled,
        ),
        (
            evaluate::Error::PageBusy {
                method: "Runtime.enable".into(),
                budget: Duration::from_millis(2000),
                elapsed: Duration::from_millis(2001),
                stopped: true,
                consequence: "the script never ran".into(),
            },
            ErrorCode::Timeout,
        ),
        (
            evaluate::Error::NotEditable {
                ref_id: "e2".into(),
                role: "button".into(),
                name: "B1".into(),
                reason: "it is a <button> element that is not contenteditable".into(),
            },
            ErrorCode::NotInteractable,
        ),
        (
            evaluate::Error::Navigated {
                frame_id: "F".into(),
                message: "context gone".into(),
            },
            ErrorCode::Navigated,
        ),
    ];
    for (e, code) in cases {
        let t = map_eval(&e, "browser_evaluate");
        assert_eq!(t.code, code, "{e}");
        assert!(t.next_step.is_some(), "{e}: no next step");
        // No word said twice in a row ("the script threw: script threw").
        let words: Vec<&str> = t.message.split_whitespace().collect();
        assert!(
            !words
                .windows(4)
                .any(|w| w[0] == w[2] && w[1].trim_end_matches(':') == w[3]),
            "{}",
            t.message
        );
    }
    let thrown = map_eval(
        &evaluate::Error::JsException {
            name: "Error".into(),
            message: "boom".into(),
            location: None,
        },
        "browser_evaluate",
    );
    assert_eq!(
        thrown.message,
        "browser_evaluate: the script threw Error: boom"
    );
    let never_ran = map_eval(
        &evaluate::Error::Timeout {
            kind: evaluate::TimeoutKind::Setup,
            budget: Duration::from_millis(500),
            elapsed: Duration::from_millis(510),
            terminated: false,
        },
        "browser_evaluate",
    );
    assert!(
        !never_ran
            .next_step
            .as_deref()
            .unwrap_or("")
            .contains("fix the script"),
        "{never_ran:?}"
    );
    let key = map_eval(
        &evaluate::Error::InvalidKey { key: "Nope".into() },
        "browser_press_key",
    );
    assert_eq!(key.field.as_deref(), Some("key"));
    let stale = map_eval(
        &evaluate::Error::StaleRef {
            ref_id: "e1".into(),
            role: "button".into(),
            name: "OK".into(),
            reason: "gone".into(),
        },
        "browser_click",
    );
    assert!(stale
        .next_step
        .is_some_and(|s| s.contains("browser_snapshot")));
}

#[test]
fn supervisor_errors_keep_the_tool_codes() {
    let cases = [
        (
            supervisor::Error::NoDialog { recent: vec![] },
            ErrorCode::NoDialog,
        ),
        (
            supervisor::Error::UnknownDialog {
                id: "d-42".into(),
                closed_by: None,
                pending: vec![],
            },
            ErrorCode::NoDialog,
        ),
        (
            supervisor::Error::AmbiguousDialog {
                candidates: vec!["d-1".into(), "d-2".into()],
            },
            ErrorCode::AmbiguousDialog,
        ),
        (
            supervisor::Error::UnknownFrame {
                frame_id: "NOPE".into(),
            },
            ErrorCode::UnknownFrame,
        ),
        (
            supervisor::Error::SameProcessFrame {
                frame_id: "F".into(),
                parent_frame_id: None,
                execution_context_id: None,
            },
            ErrorCode::NotOopif,
        ),
    ];
    for (e, code) in cases {
        let t = map_supervisor(&e, "browser_cdp");
        assert_eq!(t.code, code, "{e}");
        assert!(t.next_step.is_some(), "{e}: no next step");
    }
}

/// A transport error for the variants that carry one.
fn transport_timeout() -> cdp_transport::Error {
    cdp_transport::Error::Timeout {
        method: "Runtime.evaluate".into(),
        elapsed: Duration::from_millis(510),
        budget: Duration::from_millis(500),
    }
}

#[test]
fn every_evaluate_error_keeps_the_code_its_code_string_gave() {
    let errors = [
        evaluate::Error::Timeout {
            kind: evaluate::TimeoutKind::Promise,
            budget: Duration::from_millis(500),
            elapsed: Duration::from_millis(510),
            terminated: false,
        },
        evaluate::Error::PageBusy {
            method: "Runtime.enable".into(),
            budget: Duration::from_millis(2000),
            elapsed: Duration::from_millis(2001),
            stopped: false,
            consequence: "the script never ran".into(),
        },
        evaluate::Error::Cancelled {
            budget: Duration::from_millis(500),
            elapsed: Duration::from_millis(10),
            sent: false,
            terminated: false,
        },
        evaluate::Error::DialogOpened {
            dialog: Box::new(evaluate::DialogInfo {
                dialog_type: "alert".into(),
                message: "m".into(),
                default_prompt: None,
                frame_id: None,
                url: None,
                id: None,
            }),
        },
        evaluate::Error::Navigated {
            frame_id: "F".into(),
            message: "gone".into(),
        },
        evaluate::Error::ContextDestroyed {
            frame_id: "F".into(),
            message: "gone".into(),
        },
        evaluate::Error::InvalidSource {
            message: "SyntaxError".into(),
            line: None,
            column: None,
        },
        evaluate::Error::JsException {
            name: "Error".into(),
            message: "boom".into(),
            location: None,
        },
        evaluate::Error::EvaluateDisabled,
        evaluate::Error::UnknownFrame {
            frame_id: "F".into(),
            target_id: cdp_transport::TargetId::new("T"),
        },
        evaluate::Error::Transport {
            context: "attaching".into(),
            source: transport_timeout(),
        },
        evaluate::Error::Transport {
            context: "attaching".into(),
            source: cdp_transport::Error::ConnectionClosed {
                reason: "peer closed".into(),
            },
        },
        evaluate::Error::UnexpectedReply {
            method: "Runtime.evaluate".into(),
            detail: "no result".into(),
        },
        evaluate::Error::UnknownRef {
            ref_id: "e9".into(),
        },
        evaluate::Error::StaleRef {
            ref_id: "e1".into(),
            role: "button".into(),
            name: "OK".into(),
            reason: "gone".into(),
        },
        evaluate::Error::NotInteractable {
            ref_id: "e1".into(),
            role: "button".into(),
            name: "OK".into(),
            reason: "no box".into(),
        },
        evaluate::Error::NotEditable {
            ref_id: "e1".into(),
            role: "button".into(),
            name: "OK".into(),
            reason: "a button".into(),
        },
        evaluate::Error::InvalidKey { key: "Nope".into() },
    ];
    for e in errors {
        // The mapping as it was, by `code()`.
        let was = match e.code() {
            "unknown_ref" => ErrorCode::UnknownRef,
            "stale_ref" => ErrorCode::StaleRef,
            "not_interactable" | "not_editable" => ErrorCode::NotInteractable,
            "invalid_key" => ErrorCode::InvalidArgument,
            "timeout" | "page_busy" => ErrorCode::Timeout,
            "navigated" | "context_destroyed" => ErrorCode::Navigated,
            "invalid_source" | "js_exception" => ErrorCode::ScriptError,
            "evaluate_disabled" => ErrorCode::EvaluateDisabled,
            "unknown_frame" => ErrorCode::UnknownFrame,
            "dialog_opened" => ErrorCode::DialogPending,
            "transport" => match &e {
                evaluate::Error::Transport { source, .. } => map_transport(source, "x").code,
                _ => unreachable!(),
            },
            _ => ErrorCode::Internal,
        };
        assert_eq!(map_eval(&e, "browser_evaluate").code, was, "{e}");
    }
}

#[test]
fn every_supervisor_error_keeps_the_code_its_code_string_gave() {
    let errors = [
        supervisor::Error::InvalidPolicy { given: "x".into() },
        supervisor::Error::InvalidBridgeMode { given: "x".into() },
        supervisor::Error::InvalidAction { given: "x".into() },
        supervisor::Error::NoDialog {
            recent: vec!["d-1".into()],
        },
        supervisor::Error::UnknownDialog {
            id: "d-9".into(),
            closed_by: None,
            pending: vec![],
        },
        supervisor::Error::AmbiguousDialog {
            candidates: vec!["d-1".into(), "d-2".into()],
        },
        supervisor::Error::Answer {
            id: "d-1".into(),
            source: transport_timeout(),
        },
        supervisor::Error::UnknownFrame {
            frame_id: "NOPE".into(),
        },
        supervisor::Error::SameProcessFrame {
            frame_id: "F".into(),
            parent_frame_id: None,
            execution_context_id: None,
        },
        supervisor::Error::Inactive {
            target_id: cdp_transport::TargetId::new("T"),
            reason: "target crashed".into(),
        },
        supervisor::Error::Inactive {
            target_id: cdp_transport::TargetId::new("T"),
            reason: "detached".into(),
        },
        supervisor::Error::WaitTimeout {
            budget: Duration::from_millis(500),
        },
        supervisor::Error::Cdp {
            what: "Page.enable".into(),
            source: cdp_transport::Error::ConnectionClosed {
                reason: "peer closed".into(),
            },
        },
    ];
    for e in errors {
        // The mapping as it was, by `code()` (and the message for `inactive`).
        let was = match e.code() {
            "no_dialog" | "unknown_dialog" => ErrorCode::NoDialog,
            "ambiguous_dialog" => ErrorCode::AmbiguousDialog,
            "unknown_frame" => ErrorCode::UnknownFrame,
            "same_process_frame" => ErrorCode::NotOopif,
            "inactive" if e.to_string().contains("crash") => ErrorCode::TargetCrashed,
            "inactive" => ErrorCode::BrowserClosed,
            "timeout" => ErrorCode::Timeout,
            "answer_failed" | "cdp_error" => match &e {
                supervisor::Error::Answer { source, .. }
                | supervisor::Error::Cdp { source, .. } => map_transport(source, "x").code,
                _ => unreachable!(),
            },
            _ => ErrorCode::Internal,
        };
        let t = map_supervisor(&e, "browser_cdp");
        assert_eq!(t.code, was, "{e}");
        if e.code() == "no_dialog" {
            assert!(
                t.message.starts_with("no dialog is pending"),
                "{}",
                t.message
            );
        }
    }
}
