//! End-to-end: the supervisor against real headless Chromium on loopback pages.

use cdp_mock::FixtureServer;
use cdp_transport::launcher::shared_chrome;
use cdp_transport::{ConnectOptions, Connection, FrameId, Session};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use supervisor::{
    ClosedBy, DialogAction, DialogPolicy, Error, Registry, Supervisor, SupervisorConfig,
};

const T: Duration = Duration::from_secs(10);

fn ws() -> String {
    shared_chrome().unwrap_or_else(|e| panic!("Chromium is needed for this test: {e}"))
}

async fn sup(config: SupervisorConfig) -> Supervisor {
    let conn = Connection::connect(&ws(), ConnectOptions::default())
        .await
        .expect("connect");
    Supervisor::new_tab(conn, config).await.expect("new tab")
}

async fn navigate(page: &Session, url: &str) -> Value {
    page.call("Page.navigate", json!({"url": url}), T)
        .await
        .expect("Page.navigate")
}

async fn eval(s: &Session, expr: &str) -> Value {
    let v = s
        .call(
            "Runtime.evaluate",
            json!({"expression": expr, "returnByValue": true, "awaitPromise": true}),
            T,
        )
        .await
        .expect("evaluate");
    v["result"]["value"].clone()
}

/// Waits until `document.readyState` is complete on the page.
async fn loaded(s: &Session) {
    let t0 = Instant::now();
    while eval(s, "document.readyState").await != "complete" {
        assert!(t0.elapsed() < T, "page did not load");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn case(name: &str) -> &'static str {
    match name {
        "C01" => include_str!("fixtures/C01.html"),
        "C04" => include_str!("fixtures/C04.html"),
        "C06" => include_str!("fixtures/C06.html"),
        "C07" => include_str!("fixtures/C07.html"),
        "C08" => include_str!("fixtures/C08.html"),
        "C24" => include_str!("fixtures/C24.html"),
        other => panic!("no fixture {other}"),
    }
}

async fn site() -> FixtureServer {
    let s = FixtureServer::start().await;
    for c in ["C01", "C04", "C06", "C07", "C08", "C24"] {
        s.page(&format!("/{c}.html"), case(c));
    }
    s.page("/plain.html", "<title>plain</title><p>plain</p>");
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn main_frame_alert_confirm_prompt_are_detected_and_answered() {
    let site = site().await;
    let sup = sup(SupervisorConfig::default()).await;
    let page = sup.page_session();
    navigate(&page, &site.url("localhost", "/plain.html")).await;
    loaded(&page).await;

    eval(
        &page,
        "setTimeout(() => { window.r1 = alert('hello') === undefined }, 0); 1",
    )
    .await;
    let d = sup.wait_for_dialog(T).await.expect("alert seen");
    assert_eq!((d.kind.as_str(), d.message.as_str()), ("alert", "hello"));
    assert_eq!(
        d.frame_id,
        sup.snapshot()
            .frame_tree
            .top
            .as_ref()
            .map(|t| t.frame_id.clone())
    );
    let c = sup
        .respond(DialogAction::Accept, None, None, T)
        .await
        .expect("answer alert");
    assert_eq!(c.closed_by, ClosedBy::Agent);

    eval(
        &page,
        "setTimeout(() => { window.r2 = confirm('sure?') }, 0); 1",
    )
    .await;
    let d = sup.wait_for_dialog(T).await.expect("confirm seen");
    assert_eq!(d.kind, "confirm");
    sup.respond(DialogAction::Dismiss, None, Some(&d.id), T)
        .await
        .expect("dismiss confirm");
    assert_eq!(eval(&page, "window.r2").await, json!(false));

    eval(
        &page,
        "setTimeout(() => { window.r3 = prompt('name?', 'dflt') }, 0); 1",
    )
    .await;
    let d = sup.wait_for_dialog(T).await.expect("prompt seen");
    assert_eq!(
        (d.kind.as_str(), d.default_prompt.as_deref()),
        ("prompt", Some("dflt"))
    );
    let c = sup
        .respond(DialogAction::Accept, Some("from the agent"), None, T)
        .await
        .expect("accept prompt");
    assert_eq!(c.user_input.as_deref(), Some("from the agent"));
    assert_eq!(eval(&page, "window.r3").await, json!("from the agent"));
    assert_eq!(eval(&page, "window.r1").await, json!(true));

    let v = sup.snapshot();
    assert!(v.pending_dialogs.is_empty());
    let by: Vec<_> = v
        .recent_dialogs
        .iter()
        .map(|r| (r.dialog.kind.as_str(), r.closed_by, r.accepted))
        .collect();
    assert_eq!(
        by,
        vec![
            ("alert", ClosedBy::Agent, Some(true)),
            ("confirm", ClosedBy::Agent, Some(false)),
            ("prompt", ClosedBy::Agent, Some(true))
        ]
    );
    let err = sup
        .respond(DialogAction::Accept, None, None, T)
        .await
        .expect_err("nothing pending");
    assert_eq!(err.code(), "no_dialog");
    sup.stop(T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c07_confirm_in_cross_site_iframe_is_reported_with_its_frame_id_and_answered() {
    let site = site().await;
    let sup = sup(SupervisorConfig::default()).await;
    let page = sup.page_session();
    navigate(&page, &site.url("localhost", "/C07.html")).await;
    let v = sup
        .wait_until(T, |v| {
            v.frame_tree
                .children
                .iter()
                .any(|f| f.is_oopif && f.url.contains("127.0.0.1"))
        })
        .await
        .expect("the OOPIF is in the frame tree");
    let child = v
        .frame_tree
        .children
        .iter()
        .find(|f| f.is_oopif)
        .expect("oopif")
        .clone();
    assert_eq!(
        child.parent_frame_id,
        v.frame_tree.top.as_ref().map(|t| t.frame_id.clone())
    );
    let route = sup.route(&child.frame_id).expect("route to the OOPIF");
    assert!(route.is_oopif);
    loaded(&route.session).await;
    eval(
        &route.session,
        "setTimeout(() => document.getElementById('child-confirm').click(), 0); 1",
    )
    .await;
    let d = sup
        .wait_for_dialog(T)
        .await
        .expect("confirm from the child");
    assert_eq!(d.kind, "confirm");
    assert_eq!(
        d.frame_id.as_ref(),
        Some(&child.frame_id),
        "reported with the iframe's frame id"
    );
    assert_eq!(
        d.session_id.as_ref(),
        page.id(),
        "answered on the top-level page session"
    );
    sup.respond(DialogAction::Accept, None, None, T)
        .await
        .expect("answer");
    assert_eq!(
        eval(
            &route.session,
            "document.getElementById('child-confirm').textContent"
        )
        .await,
        json!("child confirm -> true")
    );
    sup.stop(T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c08_three_cross_site_levels_are_in_the_tree_and_evaluate_routes_into_the_grandchild() {
    let site = site().await;
    let sup = sup(SupervisorConfig::default()).await;
    let page = sup.page_session();
    navigate(&page, &site.url("localhost", "/C08.html")).await;
    let v = sup
        .wait_until(T, |v| {
            v.frame_tree
                .children
                .iter()
                .filter(|f| f.is_oopif && f.url.contains("level="))
                .count()
                == 2
        })
        .await
        .expect("both OOPIF levels appear");
    assert!(v
        .frame_tree
        .top
        .as_ref()
        .is_some_and(|t| t.url.contains("localhost")));
    let l1 = v
        .frame_tree
        .children
        .iter()
        .find(|f| f.url.contains("127.0.0.1"))
        .expect("level 1");
    let l2 = v
        .frame_tree
        .children
        .iter()
        .find(|f| f.url.contains("127.0.0.2"))
        .expect("level 2");
    assert_eq!((l1.oopif_depth, l2.oopif_depth), (1, 2));
    assert_eq!(l2.parent_frame_id.as_ref(), Some(&l1.frame_id));
    let r = sup.route(&l2.frame_id).expect("route grandchild");
    loaded(&r.session).await;
    assert_eq!(
        eval(&r.session, "document.title").await,
        json!("C08 level 2")
    );
    assert_eq!(
        eval(&r.session, "window.marker")
            .await
            .as_str()
            .map(|s| s.starts_with("level-2@127.0.0.2")),
        Some(true)
    );
    sup.stop(T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c01_alert_during_load_is_reported_at_once_and_answering_lets_the_load_finish() {
    let site = site().await;
    let sup = sup(SupervisorConfig::default()).await;
    let page = sup.page_session();
    let mut events = page.subscribe();
    let t0 = Instant::now();
    let nav = tokio::spawn({
        let page = page.clone();
        let url = site.url("localhost", "/C01.html");
        async move { page.call("Page.navigate", json!({"url": url}), T).await }
    });
    let d = sup
        .wait_for_dialog(T)
        .await
        .expect("the caller learns of the dialog");
    let seen = t0.elapsed();
    assert!(seen < Duration::from_secs(3), "dialog seen after {seen:?}");
    assert_eq!(d.kind, "alert");
    assert!(d.message.contains("C01"));
    nav.await.expect("join").expect("navigate commits");
    sup.respond(DialogAction::Accept, None, None, T)
        .await
        .expect("answer");
    tokio::time::timeout(T, events.next_method("Page.loadEventFired"))
        .await
        .expect("load finishes")
        .expect("stream");
    assert_eq!(eval(&page, "document.title").await, json!("C01 loaded"));
    eprintln!("C01: dialog seen {seen:?} after Page.navigate was sent");
    sup.stop(T).await;
}

async fn arm_beforeunload(page: &Session) {
    let rect = eval(
        page,
        "(() => { const r = draft.getBoundingClientRect(); return [r.x + 5, r.y + 5] })()",
    )
    .await;
    let (x, y) = (
        rect[0].as_f64().unwrap_or(10.0),
        rect[1].as_f64().unwrap_or(10.0),
    );
    for t in ["mousePressed", "mouseReleased"] {
        page.call(
            "Input.dispatchMouseEvent",
            json!({"type": t, "x": x, "y": y, "button": "left", "clickCount": 1}),
            T,
        )
        .await
        .expect("click");
    }
    page.call("Input.insertText", json!({"text": "draft"}), T)
        .await
        .expect("type");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c06_beforeunload_dismiss_cancels_and_accept_lets_navigation_go_on() {
    let site = site().await;
    let sup = sup(SupervisorConfig::default()).await;
    let page = sup.page_session();
    navigate(&page, &site.url("localhost", "/C06.html")).await;
    loaded(&page).await;
    arm_beforeunload(&page).await;

    let away = site.url("localhost", "/C06.html?left=1");
    let nav = tokio::spawn({
        let (page, away) = (page.clone(), away.clone());
        async move { page.call("Page.navigate", json!({"url": away}), T).await }
    });
    let d = sup.wait_for_dialog(T).await.expect("beforeunload seen");
    assert_eq!(d.kind, "beforeunload");
    sup.respond(DialogAction::Dismiss, None, None, T)
        .await
        .expect("dismiss");
    let r = nav.await.expect("join").expect("navigate replies");
    assert!(
        r["errorText"]
            .as_str()
            .is_some_and(|e| e.contains("ABORTED")),
        "{r}"
    );
    assert_eq!(
        eval(&page, "location.search").await,
        json!(""),
        "still on the page"
    );

    let nav = tokio::spawn({
        let page = page.clone();
        async move { page.call("Page.navigate", json!({"url": away}), T).await }
    });
    let d = sup.wait_for_dialog(T).await.expect("beforeunload again");
    sup.respond(DialogAction::Accept, None, Some(&d.id), T)
        .await
        .expect("accept");
    let r = nav.await.expect("join").expect("navigate");
    assert!(r.get("errorText").is_none(), "{r}");
    loaded(&page).await;
    assert_eq!(
        eval(&page, "document.getElementById('state').textContent").await,
        json!("navigation went through")
    );
    sup.stop(T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c04_dialog_answered_by_another_client_is_recorded_remote() {
    let site = site().await;
    let sup = sup(SupervisorConfig::default()).await;
    let page = sup.page_session();
    navigate(&page, &site.url("localhost", "/C04.html")).await;
    loaded(&page).await;
    let other = Connection::connect(&ws(), ConnectOptions::default())
        .await
        .expect("second client");
    let other_page = other
        .attach(sup.target_id(), T)
        .await
        .expect("second attach");
    other_page
        .call("Page.enable", json!({}), T)
        .await
        .expect("Page.enable");

    eval(
        &page,
        "setTimeout(() => document.getElementById('one').click(), 0); 1",
    )
    .await;
    let d = sup.wait_for_dialog(T).await.expect("dialog");
    other_page
        .call("Page.handleJavaScriptDialog", json!({"accept": true}), T)
        .await
        .expect("other client answers");
    let v = sup
        .wait_until(T, |v| v.recent_dialogs.iter().any(|r| r.dialog.id == d.id))
        .await
        .expect("close recorded");
    assert!(v.pending_dialogs.is_empty());
    assert_eq!(
        v.recent_dialogs.last().map(|r| r.closed_by),
        Some(ClosedBy::Remote)
    );

    let err = sup
        .respond(DialogAction::Accept, None, Some(&d.id), T)
        .await
        .expect_err("old id");
    assert!(
        matches!(
            &err,
            Error::UnknownDialog {
                closed_by: Some(ClosedBy::Remote),
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains(&d.id), "{err}");
    // The page is not wedged: the next dialog is ours to answer.
    eval(
        &page,
        "setTimeout(() => document.getElementById('one').click(), 0); 1",
    )
    .await;
    let d2 = sup.wait_for_dialog(T).await.expect("second dialog");
    assert_ne!(d2.id, d.id);
    sup.respond(DialogAction::Accept, None, None, T)
        .await
        .expect("answer");
    sup.stop(T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn c24_crash_shows_within_a_second_fails_pending_calls_and_next_navigation_works() {
    let site = site().await;
    let sup = sup(SupervisorConfig::default()).await;
    let page = sup.page_session();
    navigate(&page, &site.url("localhost", "/C24.html")).await;
    loaded(&page).await;
    let pending = tokio::spawn({
        let page = page.clone();
        async move {
            page.call(
                "Runtime.evaluate",
                json!({"expression": "window.pending()", "awaitPromise": true}),
                Duration::from_secs(30),
            )
            .await
        }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t0 = Instant::now();
    let crash = tokio::spawn({
        let page = page.clone();
        async move {
            page.call("Page.crash", json!({}), Duration::from_secs(2))
                .await
        }
    });
    let v = sup
        .wait_until(Duration::from_secs(1), |v| !v.active)
        .await
        .expect("the view says crashed within 1 s");
    let crashed_after = t0.elapsed();
    assert_eq!(v.reason.as_deref(), Some("target crashed"));
    let r = tokio::time::timeout(Duration::from_secs(2), pending)
        .await
        .expect("pending call ends")
        .expect("join");
    let err = r.expect_err("pending evaluate fails");
    assert!(err.to_string().contains("crashed"), "{err}");
    let _ = crash.await;
    navigate(&page, &site.url("localhost", "/plain.html")).await;
    sup.wait_until(T, |v| v.active)
        .await
        .expect("active again after navigation");
    loaded(&page).await;
    assert_eq!(eval(&page, "document.title").await, json!("plain"));
    eprintln!("C24: crash visible after {crashed_after:?}");
    sup.stop(T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn popup_alert_is_detected_and_answered_and_the_opener_is_not_frozen() {
    let site = site().await;
    site.page("/opener.html", "<title>opener</title><button style='position:fixed;left:0;top:0;width:50px;height:50px' id=b onclick=\"window.open('/popup.html')\">open</button>");
    site.page(
        "/popup.html",
        "<title>popup</title><script>alert('from the popup')</script>",
    );
    let sup = sup(SupervisorConfig::default()).await;
    let page = sup.page_session();
    navigate(&page, &site.url("localhost", "/opener.html")).await;
    loaded(&page).await;
    // A real click: window.open needs a user gesture.
    for t in ["mousePressed", "mouseReleased"] {
        page.call(
            "Input.dispatchMouseEvent",
            json!({"type": t, "x": 15, "y": 15, "button": "left", "clickCount": 1}),
            T,
        )
        .await
        .expect("click");
    }
    let d = sup.wait_for_dialog(T).await.expect("popup alert seen");
    assert_eq!(d.message, "from the popup");
    assert_ne!(&d.target_id, sup.target_id(), "raised in the popup");
    assert_eq!(sup.snapshot().popups.len(), 1);
    sup.respond(DialogAction::Accept, None, None, T)
        .await
        .expect("answer");
    let t0 = Instant::now();
    assert_eq!(eval(&page, "1 + 1").await, json!(2));
    assert!(
        t0.elapsed() < Duration::from_secs(2),
        "opener answered after {:?}",
        t0.elapsed()
    );
    sup.stop(T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn policies_auto_dismiss_auto_accept_and_watchdog() {
    let site = site().await;
    for (policy, expr, expect) in [
        (DialogPolicy::AutoDismiss, "confirm('ok?')", json!(false)),
        (
            DialogPolicy::AutoAccept,
            "prompt('name?', 'the default')",
            json!("the default"),
        ),
    ] {
        let sup = sup(SupervisorConfig::default().policy(policy)).await;
        let page = sup.page_session();
        navigate(&page, &site.url("localhost", "/plain.html")).await;
        loaded(&page).await;
        assert_eq!(eval(&page, expr).await, expect, "{policy:?}");
        let v = sup
            .wait_until(T, |v| !v.recent_dialogs.is_empty())
            .await
            .expect("recorded");
        assert_eq!(
            v.recent_dialogs[0].closed_by,
            ClosedBy::AutoPolicy,
            "{policy:?}"
        );
        sup.stop(T).await;
    }
    let sup = sup(SupervisorConfig::default().dialog_timeout(Duration::from_millis(500))).await;
    let page = sup.page_session();
    navigate(&page, &site.url("localhost", "/plain.html")).await;
    loaded(&page).await;
    let t0 = Instant::now();
    assert_eq!(eval(&page, "confirm('nobody answers')").await, json!(false));
    let waited = t0.elapsed();
    assert!(waited >= Duration::from_millis(450), "{waited:?}");
    let v = sup
        .wait_until(T, |v| !v.recent_dialogs.is_empty())
        .await
        .expect("recorded");
    assert_eq!(v.recent_dialogs[0].closed_by, ClosedBy::Watchdog);
    eprintln!("watchdog of 500 ms: evaluate returned after {waited:?}");
    sup.stop(T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caps_sixty_iframes_oopif_depth_and_console_errors() {
    let site = site().await;
    let frames: String = (0..60)
        .map(|i| format!("<iframe srcdoc='<p>{i}</p>' width=10 height=10></iframe>"))
        .collect();
    site.page("/many.html", &format!("<title>many</title>{frames}<script>for (let i = 0; i < 200; i++) console.error('e' + i)</script>"));
    // Four cross-site levels: localhost -> 127.0.0.1 -> 127.0.0.2 -> localhost.
    site.page(
        "/chain.html",
        "<script>const hosts = ['localhost', '127.0.0.1', '127.0.0.2', 'localhost'];
         const l = Number(new URLSearchParams(location.search).get('l') || 0);
         document.title = 'chain ' + l;
         if (l < 3) { const f = document.createElement('iframe');
           f.src = `${location.protocol}//${hosts[l + 1]}:${location.port}/chain.html?l=${l + 1}`;
           document.documentElement.appendChild(f); }</script>",
    );
    let sup = sup(SupervisorConfig::default()).await;
    let page = sup.page_session();
    navigate(&page, &site.url("localhost", "/many.html")).await;
    loaded(&page).await;
    let v = sup
        .wait_until(T, |v| {
            v.frame_tree.truncated
                && v.console_errors.len() == 50
                && v.console_errors[49].text == "e199"
        })
        .await;
    let v = v.unwrap_or_else(|_| panic!("caps: {:?}", sup.snapshot().frame_tree.children.len()));
    assert_eq!(v.frame_tree.children.len(), 30);
    assert_eq!(v.console_errors[0].text, "e150");

    navigate(&page, &site.url("localhost", "/chain.html")).await;
    loaded(&page).await;
    let v = sup
        .wait_until(T, |v| {
            v.frame_tree.children.iter().filter(|f| f.is_oopif).count() == 2
                && v.frame_tree.truncated
        })
        .await
        .unwrap_or_else(|_| panic!("depth cap: {:#?}", sup.snapshot().frame_tree));
    assert!(
        v.frame_tree.children.iter().all(|f| f.oopif_depth <= 2),
        "{:#?}",
        v.frame_tree
    );
    assert!(
        !v.frame_tree.children.iter().any(|f| f.url.contains("l=3")),
        "level 3 is skipped"
    );
    // The skipped level was still resumed: level 2's load completes only after its child loads.
    let l2 = v
        .frame_tree
        .children
        .iter()
        .find(|f| f.url.contains("l=2"))
        .expect("level 2");
    let r = sup.route(&l2.frame_id).expect("route");
    loaded(&r.session).await;
    sup.stop(T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_process_frame_route_says_how_to_reach_it() {
    let site = site().await;
    site.page(
        "/inner.html",
        "<title>inner</title><iframe name=kid srcdoc='<p>kid</p>'></iframe>",
    );
    let sup = sup(SupervisorConfig::default()).await;
    let page = sup.page_session();
    navigate(&page, &site.url("localhost", "/inner.html")).await;
    loaded(&page).await;
    let v = sup
        .wait_until(T, |v| !v.frame_tree.children.is_empty())
        .await
        .expect("child frame");
    let kid = &v.frame_tree.children[0];
    assert!(!kid.is_oopif);
    let err = sup.route(&kid.frame_id).expect_err("same-process");
    assert!(err.to_string().contains("contentDocument"), "{err}");
    let ctx = sup.frame_context(&kid.frame_id).expect("context");
    let ctx_id = ctx.execution_context_id.expect("context id reported");
    let r = ctx
        .session
        .call("Runtime.evaluate", json!({"expression": "document.body.textContent", "contextId": ctx_id.0, "returnByValue": true}), T)
        .await
        .expect("evaluate in the frame's context");
    assert_eq!(r["result"]["value"], "kid");
    let err = sup.route(&FrameId::new("nope")).expect_err("unknown");
    assert_eq!(err.code(), "unknown_frame");
    sup.stop(T).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registry_runs_twenty_tasks_in_parallel_each_with_its_own_tab() {
    let site = site().await;
    let ws = ws();
    let reg = Registry::new();
    let t0 = Instant::now();
    let starts = (0..20).map(|i| {
        let (reg, ws) = (reg.clone(), ws.clone());
        let url = site.url("localhost", &format!("/plain.html?task={i}"));
        tokio::spawn(async move {
            let s = reg
                .get_or_start(&format!("task-{i}"), &ws, SupervisorConfig::default())
                .await
                .expect("start");
            let page = s.page_session();
            navigate(&page, &url).await;
            s.wait_until(T, |v| {
                v.frame_tree
                    .top
                    .as_ref()
                    .is_some_and(|t| t.url.ends_with(&format!("task={i}")))
            })
            .await
            .expect("own state");
            s
        })
    });
    let mut sups = Vec::new();
    for h in starts {
        sups.push(h.await.expect("join"));
    }
    let elapsed = t0.elapsed();
    let mut targets: Vec<String> = sups.iter().map(|s| s.target_id().to_string()).collect();
    targets.sort();
    targets.dedup();
    assert_eq!(targets.len(), 20, "each task has its own tab");
    for (i, s) in sups.iter().enumerate() {
        let top = s.snapshot().frame_tree.top.clone().expect("top");
        assert!(top.url.ends_with(&format!("task={i}")), "{}", top.url);
    }
    let again = reg
        .get_or_start("task-3", &ws, SupervisorConfig::default())
        .await
        .expect("idempotent");
    assert_eq!(again.target_id(), sups[3].target_id());
    let port = url::Url::parse(&ws).expect("ws url").port().expect("port");
    let moved = reg
        .get_or_start(
            "task-3",
            &format!("http://127.0.0.1:{port}"),
            SupervisorConfig::default(),
        )
        .await
        .expect("new endpoint");
    assert_ne!(moved.target_id(), sups[3].target_id());
    assert_eq!(
        sups[3].snapshot().reason.as_deref(),
        Some("stopped"),
        "the old supervisor was stopped first"
    );
    assert!(reg.stop("task-0").await);
    assert!(!reg.stop("task-0").await);
    reg.stop_all().await;
    assert!(reg.tasks().await.is_empty());
    eprintln!("registry: 20 tasks started and navigated in {elapsed:?}");
}
