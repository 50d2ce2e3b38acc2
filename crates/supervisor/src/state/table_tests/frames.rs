//! Frames of the page: attached, navigated (a new loader), detached, the
//! `Page.getFrameTree` bootstrap, and the execution contexts per frame.

use super::*;

pub(super) fn rows() -> Vec<Row> {
    let tree = json!({
        "frame": {"id": "MAIN", "loaderId": "LT", "url": "http://a.test/tree", "securityOrigin": "http://a.test"},
        "childFrames": [
            {"frame": {"id": "SAME", "parentId": "MAIN", "loaderId": "LS", "url": "http://a.test/same", "securityOrigin": "http://a.test", "name": "s"}},
            {"frame": {"id": "", "url": "http://a.test/no-id"}},
        ],
    });
    vec![
        row("a_frame_event_without_a_frame_id_records_no_frame")
            .steps(vec![
                main_frame(0),
                page(1, "Page.frameNavigated", json!({"frame": {"parentId": "MAIN", "loaderId": "LX", "url": "http://a.test/x"}})),
                page(2, "Page.frameAttached", json!({"parentFrameId": "MAIN"})),
            ])
            .expect(vec![
                ("/frames/", json!(ABSENT)),
                ("/view/frame_tree/children", json!([])),
                ("/changed_steps", json!([0])),
            ]),
        row("frames_attach_and_navigate_with_origin_name_and_fragment")
            .steps(vec![
                main_frame(0),
                frame_attached(1, "PAGE", "CHILD", "MAIN"),
                page(2, "Page.frameNavigated", json!({"frame": {"id": "CHILD", "parentId": "MAIN", "loaderId": "LC", "url": "http://a.test/c", "urlFragment": "#x", "securityOrigin": "http://a.test", "name": "kid"}})),
            ])
            .expect(vec![
                ("/view/frame_tree/top/frame_id", json!("MAIN")),
                ("/view/frame_tree/top/url", json!("http://a.test/")),
                ("/view/frame_tree/top/origin", json!("http://a.test")),
                ("/view/frame_tree/children", json!([{"frame_id": "CHILD", "parent_frame_id": "MAIN", "url": "http://a.test/c#x", "origin": "http://a.test", "name": "kid", "is_oopif": false, "oopif_depth": 0}])),
                ("/frames/CHILD/loader", json!("LC")),
                ("/frames/MAIN/loader", json!("L1")),
                ("/sessions/PAGE/url", json!("http://a.test/")),
                ("/changed_steps", json!([0, 1, 2])),
            ]),
        row("a_new_top_document_drops_the_old_subframes_and_brings_a_new_loader")
            .steps(vec![
                main_frame(0),
                frame_attached(1, "PAGE", "CHILD", "MAIN"),
                frame_attached(2, "PAGE", "GRAND", "CHILD"),
                page(3, "Page.frameNavigated", nav("MAIN", None, "http://a.test/2", "L2")),
            ])
            .expect(vec![
                ("/frames/CHILD", json!(ABSENT)),
                ("/frames/GRAND", json!(ABSENT)),
                ("/frames/MAIN/loader", json!("L2")),
                ("/view/frame_tree/top/url", json!("http://a.test/2")),
                ("/view/frame_tree/children", json!([])),
                ("/sessions/PAGE/url", json!("http://a.test/2")),
            ]),
        row("a_subframes_new_document_drops_only_its_own_subframes")
            .steps(vec![
                main_frame(0),
                frame_attached(1, "PAGE", "CHILD", "MAIN"),
                frame_attached(2, "PAGE", "GRAND", "CHILD"),
                frame_attached(3, "PAGE", "SIB", "MAIN"),
                page(4, "Page.frameNavigated", nav("CHILD", Some("MAIN"), "http://a.test/c2", "LC2")),
            ])
            .expect(vec![
                ("/frames/GRAND", json!(ABSENT)),
                ("/frames/SIB/parent", json!("MAIN")),
                ("/frames/CHILD/loader", json!("LC2")),
                ("/frames/MAIN/loader", json!("L1")),
                ("/sessions/PAGE/url", json!("http://a.test/")),
                ("/view/frame_tree/children/0/frame_id", json!("CHILD")),
                ("/view/frame_tree/children/1/frame_id", json!("SIB")),
            ]),
        row("a_detached_frame_takes_its_subtree_and_a_swap_detach_keeps_it")
            .steps(vec![
                main_frame(0),
                frame_attached(1, "PAGE", "CHILD", "MAIN"),
                frame_attached(2, "PAGE", "GRAND", "CHILD"),
                page(3, "Page.frameDetached", json!({"frameId": "CHILD", "reason": "swap"})),
                page(4, "Page.frameDetached", json!({"frameId": "CHILD", "reason": "remove"})),
            ])
            .expect(vec![
                ("/steps/3/view_changed", json!(false)),
                ("/frames/CHILD", json!(ABSENT)),
                ("/frames/GRAND", json!(ABSENT)),
                ("/frames/MAIN/loader", json!("L1")),
                ("/view/frame_tree/children", json!([])),
            ]),
        row("the_frame_tree_bootstrap_fills_in_only_what_events_have_not_reported")
            .steps(vec![
                page(0, "Page.frameNavigated", nav("MAIN", None, "http://a.test/", "LE")),
                frame_attached(1, "PAGE", "SAME", "MAIN"),
                Step::Tree(2, "PAGE", tree.clone()),
                Step::Tree(3, "NOT-OURS", tree),
            ])
            .expect(vec![
                ("/frames/MAIN/loader", json!("LE")),
                ("/view/frame_tree/top/url", json!("http://a.test/")),
                ("/frames/SAME/loader", json!("LS")),
                ("/view/frame_tree/children/0/url", json!("http://a.test/same")),
                ("/view/frame_tree/children/0/name", json!("s")),
                ("/frames/", json!(ABSENT)),
                ("/changed_steps", json!([0, 1, 2])),
            ]),
        row("execution_contexts_are_kept_per_frame_main_world_only")
            .steps(vec![
                main_frame(0),
                frame_attached(1, "PAGE", "SAME", "MAIN"),
                page(2, "Runtime.executionContextCreated", context(1, "MAIN", true)),
                page(3, "Runtime.executionContextCreated", context(2, "MAIN", false)),
                page(4, "Runtime.executionContextCreated", context(3, "SAME", true)),
                page(5, "Runtime.executionContextCreated", context(4, "GONE", true)),
                page(6, "Runtime.executionContextDestroyed", json!({"executionContextId": 3})),
            ])
            .expect(vec![
                ("/frames/MAIN/ctx", json!(1)),
                ("/frames/MAIN/route_session", json!("PAGE")),
                ("/frames/SAME/ctx", json!(null)),
                ("/changed_steps", json!([0, 1])),
            ]),
        row("clearing_contexts_on_one_session_leaves_the_other_sessions_alone")
            .steps([vec![main_frame(0)], oopif(1), vec![
                page(2, "Runtime.executionContextCreated", context(1, "MAIN", true)),
                on(3, "SX", "Runtime.executionContextCreated", context(7, "X", true)),
                page(4, "Runtime.executionContextsCleared", json!({})),
            ]].concat())
            .expect(vec![
                ("/frames/MAIN/ctx", json!(null)),
                ("/frames/X/ctx", json!(7)),
                ("/frames/X/route_session", json!("SX")),
            ]),
    ]
}
