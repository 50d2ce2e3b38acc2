//! Refs against the scripted CDP server: resolution rules and the ref map of a capped render.

use cdp_mock::{Action, MockServer};
use cdp_transport::{ConnectOptions, Connection};
use evaluate::refs::{AxSnapshotter, RenderOptions, SnapshotOptions};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

const T: Duration = Duration::from_secs(5);

fn ax(
    id: &str,
    parent: Option<&str>,
    role: &str,
    name: &str,
    children: &[&str],
    backend: Option<i64>,
) -> Value {
    let mut n = json!({"nodeId": id, "ignored": false, "role": {"type": "role", "value": role},
        "name": {"type": "computedString", "value": name}, "childIds": children});
    if let Some(p) = parent {
        n["parentId"] = json!(p);
    }
    if let Some(b) = backend {
        n["backendDOMNodeId"] = json!(b);
    }
    n
}

/// A page with two buttons (one without a backend id) and a loader that the test can change.
async fn page() -> (MockServer, Connection, Arc<AtomicUsize>) {
    let mock = MockServer::start().await;
    let loader = Arc::new(AtomicUsize::new(1));
    let l = loader.clone();
    mock.on_fn("Page.getFrameTree", move |_| {
        let n = l.load(Ordering::SeqCst);
        Some(Action::Reply(json!({"frameTree": {"frame": {"id": "F1", "loaderId": format!("L{n}"), "url": "http://x/"}}})))
    });
    mock.on(
        "Accessibility.getFullAXTree",
        json!({"nodes": [
            {"nodeId": "1", "ignored": false, "role": {"type": "internalRole", "value": "RootWebArea"}, "childIds": ["2", "3", "4"], "backendDOMNodeId": 1, "frameId": "F1"},
            ax("2", Some("1"), "button", "Save", &[], Some(20)),
            ax("3", Some("1"), "button", "Generated", &[], None),
            ax("4", Some("1"), "heading", "Section", &[], Some(40)),
        ]}),
    );
    mock.on("Runtime.releaseObjectGroup", json!({}));
    mock.on(
        "DOM.resolveNode",
        json!({"object": {"type": "object", "objectId": "obj-1"}}),
    );
    mock.on(
        "Runtime.callFunctionOn",
        json!({"result": {"type": "boolean", "value": true}}),
    );
    mock.on(
        "Accessibility.getPartialAXTree",
        json!({"nodes": [ax("2", None, "button", "Save", &[], Some(20))]}),
    );
    mock.on(
        "Accessibility.queryAXTree",
        json!({"nodes": [ax("3", None, "button", "Generated", &[], Some(30))]}),
    );
    mock.on("DOM.scrollIntoViewIfNeeded", json!({}));
    mock.on(
        "DOM.getContentQuads",
        json!({"quads": [[10.0, 20.0, 30.0, 20.0, 30.0, 40.0, 10.0, 40.0]]}),
    );
    mock.on("Input.dispatchMouseEvent", json!({}));
    let conn = Connection::connect(&mock.ws_url(), ConnectOptions::default())
        .await
        .expect("connect");
    (mock, conn, loader)
}

#[tokio::test]
async fn click_resolves_then_dispatches_at_the_quad_centre() {
    let (mock, conn, _) = page().await;
    let snap = AxSnapshotter::from_session(conn.browser())
        .snapshot(&SnapshotOptions::default(), T)
        .await
        .expect("snapshot");
    insta::assert_snapshot!(snap.text(), @r#"
    - button "Save" [ref=e1]
    - button "Generated" [ref=e2]
    - heading "Section" [ref=e3]
    "#);
    let e = snap.refs().get("e1").expect("e1");
    assert_eq!(e.loader_id.as_ref().map(|l| l.as_str()), Some("L1"));
    assert_eq!(e.frame_id.as_str(), "F1");
    let p = snap.refs().click("e1", T).await.expect("click");
    assert_eq!((p.x, p.y), (20.0, 30.0));
    let ev: Vec<String> = mock
        .received_method("Input.dispatchMouseEvent")
        .iter()
        .map(|r| r.params["type"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(ev, vec!["mouseMoved", "mousePressed", "mouseReleased"]);
}

#[tokio::test]
async fn a_ref_without_a_backend_id_is_found_with_query_ax_tree() {
    let (mock, conn, _) = page().await;
    let snap = AxSnapshotter::from_session(conn.browser())
        .snapshot(&SnapshotOptions::default(), T)
        .await
        .expect("snapshot");
    let r = snap
        .refs()
        .resolve("e2", T)
        .await
        .expect("resolve by query");
    assert!(r.by_query);
    assert_eq!(r.backend_node_id.0, 30);
    let q = mock.received_method("Accessibility.queryAXTree");
    assert_eq!(
        q[0].params,
        json!({"backendNodeId": 1, "role": "button", "accessibleName": "Generated"})
    );
}

#[tokio::test]
async fn a_new_loader_makes_refs_stale_and_nothing_is_dispatched() {
    let (mock, conn, loader) = page().await;
    let snap = AxSnapshotter::from_session(conn.browser())
        .snapshot(&SnapshotOptions::default(), T)
        .await
        .expect("snapshot");
    loader.store(2, Ordering::SeqCst);
    let err = snap.refs().click("e1", T).await.expect_err("stale");
    assert_eq!(err.code(), "stale_ref");
    assert!(err.to_string().contains("loader L1 -> L2"), "{err}");
    assert!(mock.received_method("Input.dispatchMouseEvent").is_empty());
    assert!(mock.received_method("DOM.resolveNode").is_empty());
    let err = snap.refs().click("e42", T).await.expect_err("unknown");
    assert_eq!(err.code(), "unknown_ref");
}

#[tokio::test]
async fn a_disconnected_node_is_stale() {
    let (mock, conn, _) = page().await;
    mock.on(
        "Runtime.callFunctionOn",
        json!({"result": {"type": "boolean", "value": false}}),
    );
    let snap = AxSnapshotter::from_session(conn.browser())
        .snapshot(&SnapshotOptions::default(), T)
        .await
        .expect("snapshot");
    let err = snap.refs().click("e1", T).await.expect_err("stale");
    assert_eq!(err.code(), "stale_ref", "{err}");
    assert!(mock.received_method("Input.dispatchMouseEvent").is_empty());
}

#[tokio::test]
async fn refs_on_cut_lines_leave_the_rendered_ref_map() {
    let (_mock, conn, _) = page().await;
    let snap = AxSnapshotter::from_session(conn.browser())
        .snapshot(&SnapshotOptions::default(), T)
        .await
        .expect("snapshot");
    let r = snap.render(&RenderOptions {
        max_chars: Some(60),
        ..Default::default()
    });
    assert!(r.truncated);
    assert!(r.text.len() <= 60, "{}", r.text);
    assert_eq!(
        r.refs.iter().map(|e| e.ref_id.as_str()).collect::<Vec<_>>(),
        vec!["e1"],
        "{}",
        r.text
    );
    let err = r.refs.click("e3", T).await.expect_err("cut ref");
    assert_eq!(err.code(), "unknown_ref");
    let inter = snap.render(&RenderOptions {
        interactive_only: true,
        ..Default::default()
    });
    assert_eq!(inter.refs.len(), 2);
    assert_eq!(
        serde_json::to_value(&inter.json).expect("json"),
        json!([
            {"role": "button", "name": "Save", "ref": "e1"},
            {"role": "button", "name": "Generated", "ref": "e2"}
        ])
    );
}

/// A renderer that never answers: half-way the snapshot sends
/// `Runtime.terminateExecution` (once) on the session it queried, and at
/// the budget it is `page_busy`, naming the command that had no answer.
#[tokio::test]
async fn a_hung_page_ends_at_the_budget() {
    let mock = MockServer::start().await;
    mock.on_action("Page.getFrameTree", Action::Never);
    let conn = Connection::connect(&mock.ws_url(), ConnectOptions::default())
        .await
        .expect("connect");
    let t0 = std::time::Instant::now();
    let err = AxSnapshotter::from_session(conn.browser())
        .snapshot(&SnapshotOptions::default(), Duration::from_millis(300))
        .await
        .expect_err("budget");
    assert!(t0.elapsed() < Duration::from_secs(2));
    assert_eq!(err.code(), "page_busy", "{err}");
    let text = err.to_string();
    assert!(
        text.contains("Page.getFrameTree") && text.contains("no snapshot was taken"),
        "{text}"
    );
    assert_eq!(mock.received_method("Runtime.terminateExecution").len(), 1);
}
