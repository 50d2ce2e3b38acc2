//! End-to-end, field case C28 ("borrowed pristine functions"): a page takes
//! `alert`/`confirm`/`prompt` from a fresh iframe (the bridge installed there
//! too), removes the iframe, and calls them on its own window. The functions
//! then run in a detached realm, where the bridge's XHR throws ("Document is
//! already detached") and the native function shows nothing for its own
//! window. Chromium's native function acts on `this` when `this` is a
//! window, so a native borrowed `alert.call(window, …)` shows on `window`;
//! the bridge must do no worse: it hands the call to `this`'s own function.

mod common;

use bridge_script::Bridge;
use cdp_mock::FixtureServer;
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

/// Page script: borrow the three functions from a removed iframe.
const BORROW: &str = "const f = document.createElement('iframe'); f.style.display = 'none'; \
     document.body.appendChild(f); const w = f.contentWindow; \
     const [a, c, p] = [w.alert, w.confirm, w.prompt]; f.remove();";

async fn page_with_bridge() -> (
    FixtureServer,
    cdp_transport::Connection,
    cdp_transport::Session,
    Answerer,
) {
    let site = FixtureServer::start().await;
    site.page("/borrow.html", "<title>borrow</title><p>borrow</p>");
    let conn = connect().await;
    let page = new_page(&conn).await;
    let bridge = Bridge::new();
    let answerer = install(&page, &bridge).await;
    navigate(&page, &site.url("localhost", "/borrow.html")).await;
    (site, conn, page, answerer)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn borrowed_functions_called_on_a_live_window_go_through_that_windows_bridge() {
    let (_site, _conn, page, answerer) = page_with_bridge().await;
    let mut events = page.subscribe();
    let main_frame = page.target_id().expect("target").as_str().to_string();
    let got = eval(
        &page,
        &format!(
            "(() => {{ {BORROW} return JSON.stringify([w.closed, String(a).includes('[native code]'), \
             typeof a.call(window, 'borrowed alert'), c.call(window, 'borrowed confirm'), \
             c.call(window, 'no borrowed confirm'), p.call(window, 'borrowed prompt', 'd'), \
             p.call(window, 'no borrowed prompt', 'd')]); }})()"
        ),
    )
    .await;
    assert_eq!(
        got, r#"[true,false,"undefined",true,false,"agent:borrowed prompt",null]"#,
        "the frame is gone, the borrowed function is the bridge, and every call was answered"
    );
    let seen = answerer.dialogs();
    assert_eq!(
        seen.iter()
            .map(|d| (d.kind.to_string(), d.message.as_str()))
            .collect::<Vec<_>>(),
        [
            ("alert".to_string(), "borrowed alert"),
            ("confirm".to_string(), "borrowed confirm"),
            ("confirm".to_string(), "no borrowed confirm"),
            ("prompt".to_string(), "borrowed prompt"),
            ("prompt".to_string(), "no borrowed prompt"),
        ]
    );
    assert_eq!(seen[3].default_prompt.as_deref(), Some("d"));
    for d in &seen {
        assert_eq!(
            d.frame_id.as_deref(),
            Some(main_frame.as_str()),
            "asked by the top window's bridge: {d:?}"
        );
    }
    let methods = drain_methods(&mut events);
    assert!(
        !methods
            .iter()
            .any(|m| m.starts_with("Page.javascriptDialog")),
        "no native dialog: {methods:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_live_window_as_this_a_detached_call_does_what_the_native_one_does() {
    let (_site, _conn, page, answerer) = page_with_bridge().await;
    let mut events = page.subscribe();
    // `this` undefined, the detached window itself, or an object that is no
    // window: the native function shows nothing there, and neither do we
    // (the XHR throws, the native fallback returns at once).
    let t0 = Instant::now();
    let got = eval(
        &page,
        &format!(
            "(() => {{ {BORROW} return JSON.stringify([typeof a('plain call'), \
             typeof a.call(w, 'on the detached window'), c('plain confirm'), p('plain prompt', 'd'), \
             typeof a.call({{window: 1}}, 'on an object')]); }})()"
        ),
    )
    .await;
    assert_eq!(got, r#"["undefined","undefined",false,null,"undefined"]"#);
    assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(answerer.dialogs().is_empty(), "{:?}", answerer.dialogs());
    let methods = drain_methods(&mut events);
    assert!(
        !methods
            .iter()
            .any(|m| m.starts_with("Page.javascriptDialog")),
        "no native dialog: {methods:?}"
    );
}

/// Runs `expr` (which must end in a native dialog on the page) and answers
/// that dialog with `accept`; returns the evaluate's value and the opening.
async fn through_a_native_dialog(
    page: &cdp_transport::Session,
    expr: String,
) -> (serde_json::Value, serde_json::Value) {
    let mut events = page.subscribe();
    let call = tokio::spawn({
        let page = page.clone();
        async move { eval(&page, &expr).await }
    });
    let opening = tokio::time::timeout(T, events.next_method("Page.javascriptDialogOpening"))
        .await
        .expect("a native dialog opens")
        .expect("stream");
    page.call(
        "Page.handleJavaScriptDialog",
        json!({"accept": true, "promptText": "native answer"}),
        T,
    )
    .await
    .expect("handleJavaScriptDialog");
    let v = tokio::time::timeout(T, call)
        .await
        .expect("evaluate ends")
        .expect("join");
    (v, opening.params.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_that_installs_the_borrowed_function_or_a_wrapper_of_it_gets_a_native_dialog_not_a_loop(
) {
    let (_site, _conn, page, answerer) = page_with_bridge().await;
    // `window.alert = a; window.alert(…)`: `this`'s own function is the
    // caller itself, so the native function acts on the live window.
    let (v, opening) = through_a_native_dialog(
        &page,
        format!(
            "(() => {{ {BORROW} window.alert = a; return typeof window.alert('installed'); }})()"
        ),
    )
    .await;
    assert_eq!(v, "undefined");
    assert_eq!(opening["type"], "alert");
    assert_eq!(opening["message"], "installed");
    // A wrapper that calls the borrowed function again: the second entry
    // does not forward again (no endless recursion), it goes native.
    let (v, opening) = through_a_native_dialog(
        &page,
        format!(
            "(() => {{ {BORROW} window.prompt = function (m, d) {{ return p.call(window, m, d); }}; \
             return p.call(window, 'wrapped', 'd'); }})()"
        ),
    )
    .await;
    assert_eq!(v, "native answer");
    assert_eq!(opening["type"], "prompt");
    assert_eq!(opening["message"], "wrapped");
    assert!(answerer.dialogs().is_empty(), "{:?}", answerer.dialogs());
}
