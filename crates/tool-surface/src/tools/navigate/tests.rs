//! Tests of the navigation helpers (load watch, title, probe timing).

use super::{is_url_as_title, probe_lead, LoadWatch};
use serde_json::json;
use std::time::Duration;

fn ev(method: &str, params: serde_json::Value) -> cdp_transport::Event {
    cdp_transport::Event {
        method: method.into(),
        session_id: None,
        params,
    }
}

fn committed(loader: &str, url: &str) -> cdp_transport::Event {
    ev(
        "Page.frameNavigated",
        json!({"frame": {"id": "MAIN", "loaderId": loader, "url": url}}),
    )
}

#[test]
fn only_the_load_of_the_navigations_own_document_counts() {
    let mut w = LoadWatch::new("L2");
    // The page before finishes loading while the new navigation is sent.
    assert!(!w.on_event(&ev("Page.domContentEventFired", json!({}))));
    assert!(!w.on_event(&ev("Page.loadEventFired", json!({}))));
    assert!(!w.dom_ready && w.committed_url.is_none());
    // Another document's commit is not ours either.
    assert!(!w.on_event(&committed("L1", "http://a/two")));
    assert!(!w.on_event(&ev("Page.loadEventFired", json!({}))));
    // A child frame's commit never counts.
    assert!(!w.on_event(&ev(
        "Page.frameNavigated",
        json!({"frame": {"id": "C", "parentId": "MAIN", "loaderId": "L2", "url": "http://a/child"}}),
    )));
    assert!(w.committed_url.is_none());
    assert!(!w.on_event(&ev(
        "Page.frameNavigated",
        json!({"frame": {"id": "MAIN", "loaderId": "L2", "url": "http://a/three", "urlFragment": "#x"}}),
    )));
    assert_eq!(w.committed_url.as_deref(), Some("http://a/three#x"));
    assert!(!w.on_event(&ev("Page.domContentEventFired", json!({}))));
    assert!(w.dom_ready);
    // A client redirect after ours carries on from there.
    assert!(!w.on_event(&committed("L3", "http://a/four")));
    assert_eq!(w.committed_url.as_deref(), Some("http://a/four"));
    assert!(!w.dom_ready);
    assert!(w.on_event(&ev("Page.loadEventFired", json!({}))));
}

#[test]
fn chromiums_url_stand_in_is_not_a_title() {
    assert!(is_url_as_title(
        "127.0.0.1:8765/p.html",
        "http://127.0.0.1:8765/p.html"
    ));
    assert!(is_url_as_title("about:blank", "about:blank"));
    assert!(!is_url_as_title("D", "data:text/html,<title>D</title>"));
    assert!(!is_url_as_title("Home", "http://a/Home"));
}

#[test]
fn the_probe_goes_a_quarter_of_the_budget_early_at_most_a_second() {
    assert_eq!(
        probe_lead(Duration::from_millis(2000)),
        Duration::from_millis(500)
    );
    assert_eq!(probe_lead(Duration::from_secs(20)), Duration::from_secs(1));
}
