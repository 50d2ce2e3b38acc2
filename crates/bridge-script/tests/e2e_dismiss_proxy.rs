//! End-to-end through `cdp_mock::dismiss_proxy::DismissProxy`, the loopback
//! stand-in for a hosted browser's proxy that closes native dialogs by itself.

mod common;

use bridge_script::Bridge;
use cdp_mock::dismiss_proxy::DismissProxy;
use cdp_mock::FixtureServer;
use common::*;
use serde_json::json;
use std::time::{Duration, Instant};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_proxy_a_native_prompt_is_dismissed_and_returns_null() {
    let site = FixtureServer::start().await;
    site.page("/p.html", "<title>p</title>");
    let proxy = DismissProxy::start(&chrome_ws()).await;
    let conn = connect_to(&proxy.ws_url()).await;
    let page = new_page(&conn).await;
    page.call("Page.enable", json!({}), T)
        .await
        .expect("Page.enable");
    navigate(&page, &site.url("localhost", "/p.html")).await;
    let mut events = page.subscribe();
    let t0 = Instant::now();
    let v = eval(&page, "JSON.stringify([prompt('native?', 'd')])").await;
    let took = t0.elapsed();
    println!("prompt() dismissed by the proxy; the evaluate took {took:?}");
    assert_eq!(v, "[null]", "the proxy dismissed the prompt");
    assert!(took < Duration::from_secs(2), "{took:?}");
    let opening = tokio::time::timeout(T, events.next_method("Page.javascriptDialogOpening"))
        .await
        .expect("opening")
        .expect("stream");
    let closed = tokio::time::timeout(T, events.next_method("Page.javascriptDialogClosed"))
        .await
        .expect("closed")
        .expect("stream");
    assert_eq!(opening.params["message"], "native?");
    assert_eq!(closed.params["result"], false);
    assert_eq!(proxy.dismissed(), 1);
    // The proxy's own command replies never reach the client: a later call
    // still gets its own reply.
    assert_eq!(eval(&page, "1 + 1").await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn through_the_proxy_the_bridge_answers_four_of_four() {
    let site = FixtureServer::start().await;
    site.page("/b.html", "<title>b</title>");
    let proxy = DismissProxy::start(&chrome_ws()).await;
    let conn = connect_to(&proxy.ws_url()).await;
    let page = new_page(&conn).await;
    let bridge = Bridge::new();
    let answerer = install(&page, &bridge).await;
    navigate(&page, &site.url("localhost", "/b.html")).await;
    assert_eq!(eval(&page, FOUR_DIALOGS).await, FOUR_ANSWERS);
    assert_four_dialogs(
        &answerer.dialogs(),
        page.target_id().expect("target").as_str(),
    );
    assert_eq!(
        proxy.dismissed(),
        0,
        "no native dialog for the proxy to close"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_fault_switches_delay_stall_and_cut() {
    let proxy = DismissProxy::start(&chrome_ws()).await;
    let conn = connect_to(&proxy.ws_url()).await;
    let browser = conn.browser();
    browser
        .call("Browser.getVersion", json!({}), T)
        .await
        .expect("relayed");

    proxy.set_delay(Duration::from_millis(150));
    let t0 = Instant::now();
    browser
        .call("Browser.getVersion", json!({}), T)
        .await
        .expect("delayed");
    assert!(
        t0.elapsed() >= Duration::from_millis(300),
        "150 ms each way, took {:?}",
        t0.elapsed()
    );
    proxy.set_delay(Duration::ZERO);

    proxy.set_stalled(true);
    let err = browser
        .call("Browser.getVersion", json!({}), Duration::from_millis(300))
        .await
        .expect_err("stalled");
    assert!(err.is_timeout(), "{err}");
    assert!(!conn.is_closed(), "a stall keeps the socket open");
    proxy.set_stalled(false);
    browser
        .call("Browser.getVersion", json!({}), T)
        .await
        .expect("flows again");

    proxy.cut();
    let reason = tokio::time::timeout(Duration::from_secs(2), conn.closed())
        .await
        .expect("the client sees the cut");
    println!("after cut: {reason}");
    // The proxy still accepts new clients.
    let again = connect_to(&proxy.ws_url()).await;
    again
        .browser()
        .call("Browser.getVersion", json!({}), T)
        .await
        .expect("a new client works");
    assert_eq!(proxy.connections(), 2);
}
