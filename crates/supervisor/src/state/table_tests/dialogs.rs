//! Native dialogs: opening (alert, confirm, prompt, beforeunload, an unknown
//! type; on the page, a same-process child frame, an OOPIF), closed by the
//! agent, the policy, the watchdog or someone else, answers refused or lost.

use super::*;
use crate::state::HANDLE_DIALOG;

pub(super) fn rows() -> Vec<Row> {
    vec![
        row("alert_opens_pending_on_the_top_frame_and_starts_the_watchdog")
            .steps(vec![main_frame(0), page(5, "Page.javascriptDialogOpening", opening("alert", "hi"))])
            .expect(vec![
                ("/view/pending_dialogs/0/id", json!("d-1")),
                ("/view/pending_dialogs/0/type", json!("alert")),
                ("/view/pending_dialogs/0/message", json!("hi")),
                ("/view/pending_dialogs/0/frame_id", json!("MAIN")),
                ("/view/pending_dialogs/0/target_id", json!("T1")),
                ("/view/pending_dialogs/0/session_id", json!("PAGE")),
                ("/view/pending_dialogs/0/opened_at_ms", json!(BASE_MS + 5)),
                ("/view/pending_dialogs/0/opened_via", json!("native")),
                ("/steps/1/out", json!([{"watchdog": "d-1", "after_ms": 30_000}])),
            ]),
        row("confirm_closed_by_someone_else_is_remote")
            .steps(vec![
                main_frame(0),
                page(5, "Page.javascriptDialogOpening", opening("confirm", "sure?")),
                page(40, "Page.javascriptDialogClosed", closed(true)),
            ])
            .expect(vec![
                ("/view/pending_dialogs", json!([])),
                ("/view/recent_dialogs/0/type", json!("confirm")),
                ("/view/recent_dialogs/0/closed_by", json!("remote")),
                ("/view/recent_dialogs/0/accepted", json!(true)),
                ("/view/recent_dialogs/0/closed_at_ms", json!(BASE_MS + 40)),
                ("/view/recent_dialogs/0/user_input", json!(ABSENT)),
                ("/steps/2/out", json!([])),
            ]),
        row("prompt_under_auto_accept_is_answered_with_its_default_and_its_close_swallowed")
            .policy(DialogPolicy::AutoAccept)
            .steps(vec![
                main_frame(0),
                page(5, "Page.javascriptDialogOpening", json!({"type": "prompt", "message": "name?", "defaultPrompt": "dflt", "url": "http://a.test/"})),
                policy_answer(6, "d-1", true, Some("dflt")),
                Step::Replied(8),
                page(9, "Page.javascriptDialogClosed", json!({"result": true, "userInput": "dflt"})),
            ])
            .expect(vec![
                ("/steps/1/out", json!([{"answer": "d-1", "accept": true, "prompt": "dflt", "by": "auto_policy"}])),
                ("/steps/2/out/0", json!({"call": HANDLE_DIALOG, "on": "PAGE", "params": {"accept": true, "promptText": "dflt"}})),
                ("/steps/3/out/0/closed/closed_by", json!("auto_policy")),
                ("/view/recent_dialogs/0/user_input", json!("dflt")),
                ("/view/recent_dialogs/0/closed_at_ms", json!(BASE_MS + 8)),
                ("/view/recent_dialogs/1", json!(ABSENT)),
                ("/steps/4/view_changed", json!(false)),
                ("/swallow_close/PAGE", json!(0)),
            ]),
        row("beforeunload_under_auto_dismiss_closed_before_the_reply_is_the_policys")
            .policy(DialogPolicy::AutoDismiss)
            .steps(vec![
                main_frame(0),
                page(5, "Page.javascriptDialogOpening", opening("beforeunload", "")),
                policy_answer(6, "d-1", false, None),
                page(7, "Page.javascriptDialogClosed", closed(false)),
                Step::Replied(9),
            ])
            .expect(vec![
                ("/steps/1/out", json!([{"answer": "d-1", "accept": false, "prompt": null, "by": "auto_policy"}])),
                ("/steps/2/out/0/params", json!({"accept": false})),
                ("/view/recent_dialogs/0/type", json!("beforeunload")),
                ("/view/recent_dialogs/0/closed_by", json!("auto_policy")),
                ("/view/recent_dialogs/0/accepted", json!(false)),
                ("/view/recent_dialogs/0/closed_at_ms", json!(BASE_MS + 7)),
                ("/steps/4/out/0/closed/closed_by", json!("auto_policy")),
                ("/view/recent_dialogs/1", json!(ABSENT)),
                ("/swallow_close/PAGE", json!(ABSENT)),
            ]),
        row("the_agent_accepts_a_prompt_with_its_text")
            .steps(vec![
                main_frame(0),
                page(5, "Page.javascriptDialogOpening", json!({"type": "prompt", "message": "p", "defaultPrompt": "d"})),
                agent(100, None, true, Some("typed")),
                Step::Replied(120),
                page(130, "Page.javascriptDialogClosed", json!({"result": true, "userInput": "typed"})),
            ])
            .expect(vec![
                ("/view/pending_dialogs/0", json!(ABSENT)),
                ("/steps/2/out/0/params", json!({"accept": true, "promptText": "typed"})),
                ("/view/recent_dialogs/0/closed_by", json!("agent")),
                ("/view/recent_dialogs/0/user_input", json!("typed")),
                ("/view/recent_dialogs/0/default_prompt", json!("d")),
                ("/view/recent_dialogs/0/closed_at_ms", json!(BASE_MS + 120)),
                ("/view/recent_dialogs/1", json!(ABSENT)),
                ("/swallow_close/PAGE", json!(0)),
            ]),
        row("the_watchdog_dismisses_a_dialog_nobody_answered")
            .steps(vec![
                main_frame(0),
                page(0, "Page.javascriptDialogOpening", opening("confirm", "c")),
                Step::Watchdog(30_000, "d-1"),
                Step::Replied(30_010),
            ])
            .expect(vec![
                ("/steps/2/out/0", json!({"call": HANDLE_DIALOG, "on": "PAGE", "params": {"accept": false}})),
                ("/view/recent_dialogs/0/closed_by", json!("watchdog")),
                ("/view/recent_dialogs/0/accepted", json!(false)),
                ("/view/recent_dialogs/0/closed_at_ms", json!(BASE_MS + 30_010)),
                ("/swallow_close/PAGE", json!(1)),
            ]),
        row("the_watchdog_leaves_a_dialog_being_answered_or_closed_alone")
            .steps(vec![
                main_frame(0),
                page(0, "Page.javascriptDialogOpening", opening("alert", "a")),
                page(1, "Page.javascriptDialogOpening", opening("alert", "b")),
                agent(10, Some("d-1"), true, None),
                page(20, "Page.javascriptDialogClosed", closed(true)),
                Step::Watchdog(30_000, "d-1"),
                Step::Watchdog(30_001, "d-2"),
            ])
            .expect(vec![
                ("/steps/4/view_changed", json!(true)),
                ("/view/recent_dialogs/0/id", json!("d-1")),
                ("/view/recent_dialogs/0/closed_by", json!("agent")),
                ("/view/pending_dialogs/0/id", json!("d-2")),
                ("/steps/5/out", json!([{"watchdog": "d-1", "due": false}])),
                ("/steps/6/out/0/call", json!(HANDLE_DIALOG)),
                ("/answering/d-2", json!("watchdog")),
            ]),
        row("a_dialog_of_a_missing_or_unknown_type_is_recorded_as_unknown")
            .steps(vec![
                main_frame(0),
                page(1, "Page.javascriptDialogOpening", opening("custom", "x")),
                page(2, "Page.javascriptDialogOpening", json!({"message": "no type"})),
            ])
            .expect(vec![
                ("/view/pending_dialogs/0/type", json!("unknown")),
                ("/view/pending_dialogs/1/type", json!("unknown")),
                ("/view/pending_dialogs/1/message", json!("no type")),
                ("/view/pending_dialogs/1/url", json!("")),
                ("/view/pending_dialogs/1/default_prompt", json!(ABSENT)),
            ]),
        row("a_dialog_in_a_same_process_child_frame_names_that_frame")
            .steps(vec![
                main_frame(0),
                frame_attached(1, "PAGE", "SAME", "MAIN"),
                page(2, "Page.javascriptDialogOpening", json!({"type": "alert", "message": "m", "frameId": "SAME"})),
            ])
            .expect(vec![
                ("/view/pending_dialogs/0/frame_id", json!("SAME")),
                ("/view/pending_dialogs/0/session_id", json!("PAGE")),
            ]),
        row("a_dialog_in_an_oopif_is_answered_on_the_page_session")
            .steps([vec![main_frame(0)], oopif(1), vec![
                on(5, "SX", "Page.javascriptDialogOpening", json!({"type": "alert", "message": "from x", "frameId": "X", "url": "http://b.test/x"})),
                agent(6, None, true, None),
                on(7, "SX", "Page.javascriptDialogClosed", closed(true)),
                Step::Replied(8),
            ]].concat())
            .expect(vec![
                ("/steps/3/out/0/watchdog", json!("d-1")),
                ("/steps/4/out/0/on", json!("PAGE")),
                ("/steps/4/out/0/call", json!(HANDLE_DIALOG)),
                ("/view/recent_dialogs/0/frame_id", json!("X")),
                ("/view/recent_dialogs/0/url", json!("http://b.test/x")),
                ("/view/recent_dialogs/0/session_id", json!("PAGE")),
                ("/view/recent_dialogs/0/target_id", json!("T1")),
                ("/view/recent_dialogs/0/closed_by", json!("agent")),
                ("/view/recent_dialogs/0/closed_at_ms", json!(BASE_MS + 7)),
            ]),
        row("a_close_event_without_an_opening_is_ignored")
            .steps(vec![main_frame(0), page(1, "Page.javascriptDialogClosed", closed(true))])
            .expect(vec![
                ("/view/recent_dialogs", json!([])),
                ("/view/pending_dialogs", json!([])),
                ("/steps/1/out", json!([])),
                ("/steps/1/view_changed", json!(false)),
            ]),
        row("an_answer_with_no_dialog_several_or_one_already_closed_is_refused")
            .steps(vec![
                main_frame(0),
                agent(1, None, true, None),
                page(2, "Page.javascriptDialogOpening", opening("alert", "a")),
                page(3, "Page.javascriptDialogOpening", opening("alert", "b")),
                agent(4, None, true, None),
                page(5, "Page.javascriptDialogClosed", closed(true)),
                agent(6, Some("d-1"), true, None),
                agent(7, Some("d-9"), true, None),
            ])
            .expect(vec![
                ("/steps/1/out/0/error", json!("no_dialog")),
                ("/steps/4/out/0/error", json!("ambiguous_dialog")),
                ("/steps/6/out/0/error", json!("unknown_dialog")),
                ("/steps/6/out/0/message", json!("dialog \"d-1\" is not pending (already closed by remote); pending dialogs: [d-2]")),
                ("/steps/7/out/0/error", json!("unknown_dialog")),
                ("/view/pending_dialogs/0/id", json!("d-2")),
                ("/answering", json!({})),
            ]),
        row("an_answer_the_browser_refuses_retires_the_dialog_as_remote")
            .steps(vec![
                main_frame(0),
                page(1, "Page.javascriptDialogOpening", opening("alert", "a")),
                agent(2, None, false, None),
                Step::Failed(3, true),
            ])
            .expect(vec![
                ("/view/pending_dialogs", json!([])),
                ("/view/recent_dialogs/0/closed_by", json!("remote")),
                ("/view/recent_dialogs/0/accepted", json!(null)),
                ("/view/recent_dialogs/0/closed_at_ms", json!(BASE_MS + 3)),
            ]),
        row("an_answer_lost_in_transport_leaves_the_dialog_to_the_watchdog")
            .steps(vec![
                main_frame(0),
                page(1, "Page.javascriptDialogOpening", opening("alert", "a")),
                agent(2, None, true, None),
                Step::Failed(3, false),
                Step::Watchdog(30_001, "d-1"),
                Step::Replied(30_002),
            ])
            .expect(vec![
                ("/steps/3/view_changed", json!(false)),
                ("/steps/4/out/0/params", json!({"accept": false})),
                ("/view/recent_dialogs/0/closed_by", json!("watchdog")),
            ]),
        row("a_close_credited_to_an_answer_that_then_failed_was_someone_elses")
            .steps(vec![
                main_frame(0),
                page(1, "Page.javascriptDialogOpening", opening("confirm", "c")),
                agent(2, None, true, None),
                page(3, "Page.javascriptDialogClosed", closed(false)),
                Step::Failed(4, false),
            ])
            .expect(vec![
                ("/view/recent_dialogs/0/closed_by", json!("remote")),
                ("/view/recent_dialogs/0/accepted", json!(false)),
                ("/view/recent_dialogs/1", json!(ABSENT)),
            ]),
        row("stopping_and_reconnecting_retire_dialogs_and_start_a_new_generation")
            .steps(vec![
                main_frame(0),
                page(1, "Page.javascriptDialogOpening", opening("alert", "a")),
                Step::Inactive(10, "stopped"),
                Step::Reset(20, "PAGE2"),
                page(30, "Page.javascriptDialogOpening", opening("alert", "old session")),
                on(31, "PAGE2", "Page.frameNavigated", nav("MAIN", None, "http://a.test/", "L2")),
                on(32, "PAGE2", "Page.javascriptDialogOpening", opening("alert", "new session")),
            ])
            .expect(vec![
                ("/steps/2/view_changed", json!(true)),
                ("/view/recent_dialogs/0/closed_by", json!("remote")),
                ("/view/recent_dialogs/0/closed_at_ms", json!(BASE_MS + 10)),
                ("/view/generation", json!(2)),
                ("/view/active", json!(true)),
                ("/view/reason", json!(ABSENT)),
                ("/steps/4/view_changed", json!(false)),
                ("/view/pending_dialogs/0/id", json!("d-2")),
                ("/view/pending_dialogs/0/session_id", json!("PAGE2")),
                ("/sessions/PAGE", json!(ABSENT)),
                ("/frames/MAIN/owner", json!("PAGE2")),
            ]),
    ]
}
