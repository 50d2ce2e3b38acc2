//! Sessions and targets: OOPIFs and their frames (attached paused, detached
//! for a moment, too deep), other child targets, popups (after
//! `Target.targetCreated`, or claimed through the target gate), crashes, the
//! page gone.

use super::*;

/// A popup `P1` (session `SP`) opened by our page, without the gate.
fn popup() -> Vec<Step> {
    vec![
        browser(
            1,
            "Target.targetCreated",
            json!({"targetInfo": {"targetId": "P1", "type": "page", "openerId": "T1", "attached": false, "url": ""}}),
        ),
        browser(
            2,
            "Target.attachedToTarget",
            popup_attached("SP", "P1", "T1", false),
        ),
    ]
}

fn created(tid: &str, ttype: &str, opener: Option<&str>, attached: bool) -> Value {
    let mut ti = json!({"targetId": tid, "type": ttype, "attached": attached, "url": ""});
    if let Some(o) = opener {
        ti["openerId"] = json!(o);
    }
    json!({"targetInfo": ti})
}

pub(super) fn rows() -> Vec<Row> {
    vec![
        row("an_oopif_attaches_paused_and_its_own_session_reports_its_frames")
            .steps([vec![main_frame(0)], oopif(1), vec![
                on(2, "SX", "Page.frameNavigated", nav("X", None, "http://b.test/x", "LX")),
                frame_attached(3, "SX", "XIN", "X"),
            ]].concat())
            .expect(vec![
                ("/steps/2/out", json!([{"setup": "SX", "kind": "Iframe", "paused": true, "skip": false}])),
                ("/frames/X/owner", json!("SX")),
                ("/frames/X/oopif_session", json!("SX")),
                ("/frames/X/parent", json!("MAIN")),
                ("/frames/X/depth", json!(1)),
                ("/frames/X/loader", json!("LX")),
                ("/frames/XIN/owner", json!("SX")),
                ("/frames/XIN/depth", json!(1)),
                ("/view/frame_tree/children/0", json!({"frame_id": "X", "parent_frame_id": "MAIN", "url": "http://b.test/x", "origin": "http://b.test", "is_oopif": true, "session_id": "SX", "oopif_depth": 1})),
                ("/view/frame_tree/children/1/is_oopif", json!(false)),
                ("/sessions/SX", json!({"target": "X", "kind": "Iframe", "root": "PAGE", "depth": 1, "url": "http://b.test/x"})),
            ]),
        row("the_parent_process_does_not_take_back_an_oopifs_loader")
            .steps([vec![main_frame(0)], oopif(1), vec![
                on(2, "SX", "Page.frameNavigated", nav("X", None, "http://b.test/x", "LX")),
                page(3, "Page.frameNavigated", nav("X", Some("MAIN"), "http://b.test/x2", "LP")),
            ]].concat())
            .expect(vec![
                ("/frames/X/loader", json!("LX")),
                ("/frames/X/owner", json!("SX")),
                ("/view/frame_tree/children/0/url", json!("http://b.test/x2")),
            ]),
        row("a_transient_oopif_detach_keeps_the_frame_in_its_parent_process")
            .steps([vec![main_frame(0)], oopif(1), vec![
                on(2, "SX", "Page.frameNavigated", nav("X", None, "http://b.test/x", "LX")),
                frame_attached(3, "SX", "XIN", "X"),
                page(4, "Runtime.executionContextCreated", context(5, "X", true)),
                on(4, "SX", "Runtime.executionContextCreated", context(7, "X", true)),
                page(5, "Target.detachedFromTarget", detached("SX")),
            ]].concat())
            .expect(vec![
                ("/frames/X/owner", json!("PAGE")),
                ("/frames/X/oopif_session", json!(null)),
                ("/frames/X/depth", json!(0)),
                ("/frames/X/loader", json!("LX")),
                ("/frames/X/ctx", json!(5)),
                ("/frames/X/route_session", json!("PAGE")),
                ("/frames/XIN", json!(ABSENT)),
                ("/sessions/SX", json!(ABSENT)),
                ("/view/frame_tree/children/0/is_oopif", json!(false)),
                ("/steps/7/out", json!([])),
            ]),
        row("an_oopif_attached_again_forgets_the_loader_its_parent_reported")
            .steps([vec![main_frame(0)], oopif(1), vec![
                page(2, "Target.detachedFromTarget", detached("SX")),
                page(3, "Page.frameNavigated", nav("X", Some("MAIN"), "http://b.test/x", "LP")),
                page(4, "Target.attachedToTarget", attached("SX2", "X", "iframe", "http://b.test/x", true)),
            ]].concat())
            .expect(vec![
                ("/frames/X/loader", json!(null)),
                ("/frames/X/owner", json!("SX2")),
                ("/frames/X/oopif_session", json!("SX2")),
                ("/view/frame_tree/children/0/session_id", json!("SX2")),
            ]),
        row("an_oopif_whose_parent_frame_is_unknown_goes_with_its_session")
            .steps(vec![
                main_frame(0),
                page(1, "Target.attachedToTarget", attached("SY", "Y", "iframe", "http://c.test/", false)),
                page(2, "Target.detachedFromTarget", detached("SY")),
            ])
            .expect(vec![
                ("/steps/1/out/0", json!({"setup": "SY", "kind": "Iframe", "paused": false, "skip": false})),
                ("/changed_steps", json!([0, 1, 2])),
                ("/frames/Y", json!(ABSENT)),
                ("/view/frame_tree/children", json!([])),
            ]),
        row("oopifs_deeper_than_the_limit_are_resumed_but_not_supervised")
            .steps(vec![
                main_frame(0),
                page(1, "Target.attachedToTarget", attached("S1", "F1", "iframe", "http://b.test/", true)),
                on(2, "S1", "Target.attachedToTarget", attached("S2", "F2", "iframe", "http://c.test/", true)),
                on(3, "S2", "Target.attachedToTarget", attached("S3", "F3", "iframe", "http://d.test/", true)),
                on(4, "S3", "Page.frameNavigated", nav("F3", None, "http://d.test/", "L3")),
                frame_attached(5, "S2", "F3", "F2"),
            ])
            .expect(vec![
                ("/steps/3/out", json!([{"setup": "S3", "kind": "Iframe", "paused": true, "skip": true}])),
                ("/frames/F2/depth", json!(2)),
                ("/frames/F3", json!(ABSENT)),
                ("/skipped_frames", json!(["F3"])),
                ("/sessions/S3", json!(ABSENT)),
                ("/sessions/S2/root", json!("PAGE")),
                ("/view/frame_tree/truncated", json!(true)),
                ("/changed_steps", json!([0, 1, 2, 3])),
            ]),
        row("a_worker_is_set_up_without_a_frame_and_dropped_on_detach")
            .steps(vec![
                main_frame(0),
                page(1, "Target.attachedToTarget", attached("SW", "W", "worker", "http://a.test/w.js", false)),
                on(2, "SW", "Runtime.consoleAPICalled", json!({"type": "error", "args": [{"type": "string", "value": "w"}]})),
                page(3, "Target.detachedFromTarget", detached("SW")),
            ])
            .expect(vec![
                ("/steps/1/out", json!([{"setup": "SW", "kind": "Other", "paused": false, "skip": false}])),
                ("/frames/W", json!(ABSENT)),
                ("/view/console_errors/0/session_id", json!("SW")),
                ("/sessions/SW", json!(ABSENT)),
            ]),
        row("events_of_sessions_not_ours_and_repeated_attaches_are_ignored")
            .steps([vec![
                main_frame(0),
                on(1, "STRANGER", "Page.frameNavigated", nav("Z", None, "http://z.test/", "LZ")),
                on(2, "STRANGER", "Page.javascriptDialogOpening", opening("alert", "z")),
                page(3, "Target.attachedToTarget", json!({"targetInfo": {"targetId": "N", "type": "iframe"}})),
            ], oopif(4), vec![
                page(6, "Target.attachedToTarget", attached("SX", "X", "iframe", "http://b.test/x", true)),
            ]].concat())
            .expect(vec![
                ("/changed_steps", json!([0, 4, 5])),
                ("/steps/2/out", json!([])),
                ("/steps/3/out", json!([])),
                ("/steps/6/out", json!([])),
                ("/frames/Z", json!(ABSENT)),
                ("/sessions/STRANGER", json!(ABSENT)),
            ]),
        row("without_the_gate_a_popup_is_attached_after_target_created")
            .steps(vec![
                main_frame(0),
                browser(1, "Target.targetCreated", created("P1", "page", Some("T1"), false)),
                browser(1, "Target.targetCreated", created("P1", "page", Some("T1"), false)),
                browser(2, "Target.attachedToTarget", popup_attached("SP", "P1", "T1", false)),
                browser(4, "Target.targetInfoChanged", json!({"targetInfo": {"targetId": "P1", "type": "page", "url": "http://p.test/2"}})),
                on(5, "SP", "Page.frameNavigated", nav("PM", None, "http://p.test/3", "LP")),
            ])
            .expect(vec![
                ("/steps/1/out", json!([{"attach_popup": "P1"}])),
                ("/steps/2/out", json!([])),
                ("/steps/3/out", json!([{"setup": "SP", "kind": "Popup", "paused": false, "skip": false}])),
                ("/steps/4/view_changed", json!(true)),
                ("/view/popups", json!([{"target_id": "P1", "session_id": "SP", "url": "http://p.test/3"}])),
                ("/sessions/SP/root", json!("SP")),
                ("/frames/PM/root", json!("SP")),
                ("/view/frame_tree/children", json!([])),
            ]),
        row("target_created_for_targets_that_are_not_our_popups_is_ignored")
            .steps(vec![
                main_frame(0),
                browser(1, "Target.targetCreated", created("Q1", "page", Some("OTHER"), false)),
                browser(2, "Target.targetCreated", created("Q2", "iframe", Some("T1"), false)),
                browser(3, "Target.targetCreated", created("Q3", "page", Some("T1"), true)),
                browser(4, "Target.targetCreated", created("Q4", "page", None, false)),
                page(5, "Target.targetCreated", created("Q5", "page", Some("T1"), false)),
                browser(6, "Target.attachedToTarget", popup_attached("SQ", "Q6", "T1", false)),
            ])
            .expect(vec![
                ("/changed_steps", json!([0])),
                ("/steps/1/out", json!([])),
                ("/steps/2/out", json!([])),
                ("/steps/3/out", json!([])),
                ("/steps/4/out", json!([])),
                ("/steps/5/out", json!([])),
                ("/steps/6/out", json!([])),
                ("/sessions/SQ", json!(ABSENT)),
            ]),
        row("a_popups_dialog_is_answered_on_the_popup_and_goes_with_it")
            .steps([vec![main_frame(0)], popup(), vec![
                on(3, "SP", "Page.javascriptDialogOpening", opening("alert", "from popup")),
                page(4, "Page.javascriptDialogOpening", opening("alert", "from page")),
                agent(5, Some("d-1"), true, None),
                browser(6, "Target.detachedFromTarget", detached("SP")),
                on(7, "SP", "Page.javascriptDialogClosed", closed(true)),
            ]].concat())
            .expect(vec![
                ("/steps/5/out/0/on", json!("SP")),
                ("/view/popups", json!([])),
                ("/view/recent_dialogs/0/target_id", json!("P1")),
                ("/view/recent_dialogs/0/session_id", json!("SP")),
                ("/view/recent_dialogs/0/closed_by", json!("remote")),
                ("/view/recent_dialogs/0/closed_at_ms", json!(BASE_MS + 6)),
                ("/view/pending_dialogs/0/id", json!("d-2")),
                ("/steps/7/view_changed", json!(false)),
                ("/sessions/SP", json!(ABSENT)),
            ]),
        row("a_popups_crash_retires_only_its_dialogs")
            .steps([vec![main_frame(0)], popup(), vec![
                on(3, "SP", "Page.javascriptDialogOpening", opening("alert", "p")),
                page(4, "Page.javascriptDialogOpening", opening("alert", "page")),
                on(5, "SP", "Inspector.targetCrashed", json!({})),
            ]].concat())
            .expect(vec![
                ("/view/active", json!(true)),
                ("/view/recent_dialogs/0/id", json!("d-1")),
                ("/view/recent_dialogs/0/closed_by", json!("remote")),
                ("/view/pending_dialogs/0/id", json!("d-2")),
                ("/view/popups/0/target_id", json!("P1")),
            ]),
        row("with_the_gate_paused_popups_of_ours_and_of_our_popups_are_claimed")
            .gate()
            .steps(vec![
                main_frame(0),
                browser(1, "Target.targetCreated", created("gate.P", "page", Some("T1"), false)),
                browser(2, "Target.attachedToTarget", popup_attached("SG", "gate.P", "T1", true)),
                browser(3, "Target.attachedToTarget", popup_attached("SG2", "gate.P", "T1", true)),
                browser(4, "Target.attachedToTarget", popup_attached("SGG", "gate.PP", "gate.P", true)),
                browser(5, "Target.attachedToTarget", popup_attached("SQ", "gate.Q", "OTHER", true)),
                browser(6, "Target.attachedToTarget", popup_attached("SR", "gate.R", "T1", false)),
            ])
            .expect(vec![
                ("/steps/1/out", json!([])),
                ("/steps/2/out", json!([{"setup": "SG", "kind": "Popup", "paused": true, "skip": false}])),
                ("/steps/3/out", json!([{"release": "SG2", "paused": true}])),
                ("/steps/4/out", json!([{"setup": "SGG", "kind": "Popup", "paused": true, "skip": false}])),
                ("/steps/5/out", json!([])),
                ("/steps/6/out", json!([])),
                ("/view/popups/0/target_id", json!("gate.P")),
                ("/view/popups/1/target_id", json!("gate.PP")),
                ("/view/popups/2", json!(ABSENT)),
            ]),
        row("with_the_gate_a_detached_popup_opens_no_more_popups_of_ours")
            .gate()
            .steps(vec![
                main_frame(0),
                browser(1, "Target.attachedToTarget", popup_attached("SG", "gate2.P", "T1", true)),
                browser(2, "Target.detachedFromTarget", detached("SG")),
                browser(3, "Target.attachedToTarget", popup_attached("SGG", "gate2.PP", "gate2.P", true)),
            ])
            .expect(vec![
                ("/steps/1/out/0/setup", json!("SG")),
                ("/steps/3/out", json!([])),
                ("/view/popups", json!([])),
            ]),
        row("a_page_crash_retires_dialogs_and_the_reload_after_it_revives")
            .steps(vec![
                main_frame(0),
                page(1, "Page.javascriptDialogOpening", opening("alert", "a")),
                page(2, "Inspector.targetCrashed", json!({})),
                page(3, "Inspector.targetReloadedAfterCrash", json!({})),
            ])
            .expect(vec![
                ("/changed_steps", json!([0, 1, 2, 3])),
                ("/view/active", json!(true)),
                ("/view/reason", json!(ABSENT)),
                ("/view/recent_dialogs/0/closed_by", json!("remote")),
                ("/view/recent_dialogs/0/closed_at_ms", json!(BASE_MS + 2)),
            ]),
        row("a_browser_level_crash_of_our_target_makes_the_supervisor_inactive")
            .steps(vec![
                main_frame(0),
                browser(1, "Target.targetCrashed", json!({"targetId": "OTHER", "status": "crashed"})),
                browser(2, "Target.targetCrashed", json!({"targetId": "T1", "status": "crashed"})),
            ])
            .expect(vec![
                ("/changed_steps", json!([0, 2])),
                ("/view/active", json!(false)),
                ("/view/reason", json!("target crashed")),
            ]),
        row("a_crashed_pages_new_document_revives_it_but_never_undoes_a_stop")
            .steps(vec![
                main_frame(0),
                browser(1, "Target.targetCrashed", json!({"targetId": "T1"})),
                page(2, "Page.frameNavigated", nav("MAIN", None, "http://a.test/", "L2")),
                Step::Inactive(3, "stopped"),
                page(4, "Inspector.targetReloadedAfterCrash", json!({})),
                page(5, "Page.frameNavigated", nav("MAIN", None, "http://a.test/", "L3")),
            ])
            .expect(vec![
                ("/changed_steps", json!([0, 1, 2, 3])),
                ("/view/active", json!(false)),
                ("/view/reason", json!("stopped")),
                ("/frames/MAIN/loader", json!("L3")),
            ]),
        row("our_targets_destruction_and_the_page_sessions_detach_report_the_page_gone")
            .steps(vec![
                main_frame(0),
                browser(1, "Target.targetDestroyed", json!({"targetId": "OTHER"})),
                browser(2, "Target.targetDestroyed", json!({"targetId": "T1"})),
                browser(3, "Target.detachedFromTarget", detached("NOT-OURS")),
                browser(4, "Target.detachedFromTarget", detached("PAGE")),
            ])
            .expect(vec![
                ("/steps/1/out", json!([])),
                ("/steps/2/out", json!([{"page_gone": "target destroyed", "reconnect": false}])),
                ("/steps/3/out", json!([])),
                ("/steps/4/out", json!([{"page_gone": "page session detached", "reconnect": true}])),
                ("/changed_steps", json!([0])),
                ("/view/active", json!(true)),
            ]),
    ]
}
