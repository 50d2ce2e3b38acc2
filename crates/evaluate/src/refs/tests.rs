//! Pure tree → text tests on small AX fixtures.

use super::render::{self, RenderOptions};
use super::tree::{build, FrameAx};
use serde_json::{json, Value};
use std::collections::HashMap;

fn node(
    id: &str,
    parent: Option<&str>,
    role: &str,
    name: &str,
    children: &[&str],
    backend: Option<i64>,
) -> Value {
    let mut n = json!({
        "nodeId": id, "ignored": false, "role": {"type": "role", "value": role},
        "name": {"type": "computedString", "value": name},
        "childIds": children,
    });
    if let Some(p) = parent {
        n["parentId"] = json!(p);
    }
    if let Some(b) = backend {
        n["backendDOMNodeId"] = json!(b);
    }
    n
}

fn ignored(mut n: Value) -> Value {
    n["ignored"] = json!(true);
    n
}

fn with_prop(mut n: Value, name: &str, value: Value) -> Value {
    n["properties"] = json!([{"name": name, "value": {"type": "x", "value": value}}]);
    n
}

/// A main frame: ignored wrappers, a main with a button, a generic, duplicate
/// links, a checkbox, a heading, an iframe; and a child frame with a button.
fn fixture() -> Vec<FrameAx> {
    let main = vec![
        node("1", None, "RootWebArea", "Title", &["2"], Some(1)),
        ignored(node(
            "2",
            Some("1"),
            "none",
            "",
            &["3", "8", "9", "12", "13", "14", "15"],
            Some(2),
        )),
        node("3", Some("2"), "main", "", &["4"], Some(3)),
        node("4", Some("3"), "button", "OK", &["5"], Some(4)),
        node("5", Some("4"), "StaticText", "OK", &["6"], Some(5)),
        node("6", Some("5"), "InlineTextBox", "OK", &[], None),
        ignored(node("7", Some("2"), "button", "Hidden", &[], Some(7))),
        node("8", Some("2"), "generic", "", &["10", "11"], Some(8)),
        with_prop(
            node("9", Some("2"), "checkbox", "Agree", &[], Some(9)),
            "checked",
            json!("true"),
        ),
        node("10", Some("8"), "link", "More", &[], Some(10)),
        node("11", Some("8"), "link", "More", &[], Some(11)),
        with_prop(
            node("12", Some("2"), "heading", "News \"today\"", &[], Some(12)),
            "level",
            json!(2),
        ),
        node("13", Some("2"), "paragraph", "", &["16"], Some(13)),
        node("14", Some("2"), "Iframe", "Ad", &[], Some(14)),
        node("15", Some("2"), "button", "", &[], None),
        node("16", Some("13"), "StaticText", "Plain words", &[], Some(16)),
    ];
    let child = vec![
        node("1", None, "RootWebArea", "Child", &["2"], Some(1)),
        node("2", Some("1"), "button", "Inner", &[], Some(2)),
        node("3", Some("1"), "link", "More", &[], Some(3)),
    ];
    let mut iframes = HashMap::new();
    iframes.insert(14, 1);
    // The child's link is not a child of its root: it is never reached.
    vec![
        FrameAx {
            nodes: main,
            iframes,
        },
        FrameAx {
            nodes: child,
            iframes: HashMap::new(),
        },
    ]
}

fn text(frames: &[FrameAx], opts: &RenderOptions) -> String {
    let (nodes, _) = build(frames);
    let lines = render::lines(&nodes, opts);
    render::text_of(&lines, opts.max_chars).0
}

#[test]
fn full_text_hoists_wrappers_merges_text_and_splices_frames() {
    insta::assert_snapshot!(text(&fixture(), &RenderOptions::default()), @r#"
    - main
      - button "OK" [ref=e1]
    - link "More" [ref=e2]
    - link "More" [ref=e3] [nth=1]
    - checkbox "Agree" [checked] [ref=e4]
    - h2 "News \"today\"" [ref=e5]
    - paragraph: "Plain words"
    - Iframe "Ad" [ref=e6]
      - button "Inner" [ref=e7]
    - button [ref=e8]
    "#);
}

#[test]
fn nth_is_stored_for_every_duplicate_and_dropped_for_singletons() {
    let (_, drafts) = build(&fixture());
    let more: Vec<_> = drafts
        .iter()
        .filter(|d| d.name == "More")
        .map(|d| (d.nth, d.frame_nth))
        .collect();
    assert_eq!(more, vec![(Some(0), 0), (Some(1), 1)]);
    assert!(drafts
        .iter()
        .filter(|d| d.name != "More")
        .all(|d| d.nth.is_none()));
    let inner = drafts.iter().find(|d| d.name == "Inner").expect("inner");
    assert_eq!(inner.frame, 1);
    let unnamed = drafts
        .iter()
        .find(|d| d.name.is_empty())
        .expect("unnamed button");
    assert_eq!(unnamed.backend, None);
    assert!(
        !drafts.iter().any(|d| d.name == "Hidden"),
        "ignored nodes get no ref"
    );
}

#[test]
fn interactive_only_and_max_depth() {
    let inter = RenderOptions {
        interactive_only: true,
        ..Default::default()
    };
    insta::assert_snapshot!(text(&fixture(), &inter), @r#"
    - button "OK" [ref=e1]
    - link "More" [ref=e2]
    - link "More" [ref=e3] [nth=1]
    - checkbox "Agree" [checked] [ref=e4]
    - Iframe "Ad" [ref=e6]
      - button "Inner" [ref=e7]
    - button [ref=e8]
    "#);
    let shallow = RenderOptions {
        max_depth: Some(0),
        ..Default::default()
    };
    let t = text(&fixture(), &shallow);
    assert!(
        !t.contains("Inner") && !t.contains("\"OK\"") && t.contains("- Iframe \"Ad\""),
        "{t}"
    );
}

#[test]
fn char_cap_cuts_whole_lines_and_leaves_a_marker_within_the_cap() {
    let full = text(&fixture(), &RenderOptions::default());
    for cap in [0, 10, 80, 150, 200, full.len() - 1] {
        let opts = RenderOptions {
            max_chars: Some(cap),
            ..Default::default()
        };
        let (nodes, _) = build(&fixture());
        let lines = render::lines(&nodes, &opts);
        let (t, kept, truncated) = render::text_of(&lines, opts.max_chars);
        assert!(t.len() <= cap, "cap {cap}: {} bytes\n{t}", t.len());
        assert!(truncated, "cap {cap}");
        assert!(kept < lines.len());
        if cap >= 100 {
            assert!(t.contains("(truncated: "), "{t}");
        }
        // Every kept line is a prefix line of the full text.
        assert!(
            full.starts_with(t.split("- (truncated").next().unwrap_or("")),
            "{t}"
        );
    }
    let opts = RenderOptions {
        max_chars: Some(full.len()),
        ..Default::default()
    };
    let (nodes, _) = build(&fixture());
    let (t, _, truncated) = render::text_of(&render::lines(&nodes, &opts), opts.max_chars);
    assert!(!truncated);
    assert_eq!(t, full);
}

#[test]
fn json_form_has_the_same_content() {
    let (nodes, _) = build(&fixture());
    let lines = render::lines(&nodes, &RenderOptions::default());
    insta::assert_yaml_snapshot!(render::json_of(&lines));
}

#[test]
fn malformed_nodes_do_not_panic() {
    let frames = vec![FrameAx {
        nodes: vec![
            json!({"nodeId": "1", "childIds": ["1", "9", 3]}),
            json!("junk"),
            json!({"role": 5}),
        ],
        iframes: HashMap::new(),
    }];
    let (nodes, drafts) = build(&frames);
    assert!(nodes.is_empty() && drafts.is_empty());
    let (nodes, drafts) = build(&[]);
    assert!(nodes.is_empty() && drafts.is_empty());
}

/// A page with the shapes the compact form folds: list wrappers, separators,
/// a label before its control, a heading over a link of the same name, a
/// long paragraph, a formatting wrapper repeating its heading's name.
fn compact_fixture() -> Vec<FrameAx> {
    let long = "word ".repeat(40);
    let main = vec![
        node(
            "1",
            None,
            "RootWebArea",
            "T",
            &["2", "7", "9", "12", "14", "17"],
            Some(1),
        ),
        node("2", Some("1"), "list", "", &["3", "5"], Some(2)),
        node("3", Some("2"), "listitem", "", &["4"], Some(3)),
        node("4", Some("3"), "link", "News", &[], Some(4)),
        node("5", Some("2"), "listitem", "", &["6"], Some(5)),
        node("6", Some("5"), "link", "Sport", &[], Some(6)),
        node("7", Some("1"), "StaticText", " • ", &[], Some(7)),
        node("9", Some("1"), "StaticText", "Email", &[], Some(9)),
        node("12", Some("1"), "textbox", "Email", &[], Some(12)),
        with_prop(
            node("14", Some("1"), "heading", "Story", &["15"], Some(14)),
            "level",
            json!(3),
        ),
        node("15", Some("14"), "link", "Story", &["16"], Some(15)),
        node("16", Some("15"), "emphasis", "", &["18"], Some(16)),
        node("18", Some("16"), "StaticText", "Story", &[], Some(18)),
        node("17", Some("1"), "navigation", "", &["19"], Some(17)),
        node("19", Some("17"), "list", "", &["20", "21"], Some(19)),
        node("20", Some("19"), "link", "A", &[], Some(20)),
        node("21", Some("19"), "paragraph", "", &["22"], Some(21)),
        node("22", Some("21"), "StaticText", &long, &[], Some(22)),
    ];
    vec![FrameAx {
        nodes: main,
        iframes: HashMap::new(),
    }]
}

#[test]
fn compact_form_folds_wrappers_labels_repeats_and_caps_text() {
    let frames = compact_fixture();
    insta::assert_snapshot!(text(&frames, &RenderOptions::default()), @r#"
    - list
      - link "News" [ref=e1]
      - link "Sport" [ref=e2]
    - textbox "Email" [ref=e3]
    - h3 "Story" [ref=e4]
      - link [ref=e5]
    - navigation
      - link "A" [ref=e6]
      - paragraph: "word word word word word word word word word word word word word word…"
    "#);
    // The ref map and the JSON keep whole names and text.
    let (nodes, drafts) = build(&frames);
    assert_eq!(drafts.len(), 6);
    assert_eq!(drafts[4].name, "Story");
    let lines = render::lines(&nodes, &RenderOptions::default());
    let json = serde_json::to_value(render::json_of(&lines)).expect("json");
    assert_eq!(
        json[3]["children"][1]["text"].as_str().map(str::len),
        Some(199)
    );
}
