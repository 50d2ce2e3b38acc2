//! End-to-end: the budgeted evaluate engine against real headless Chromium.

use cdp_mock::FixtureServer;
use cdp_transport::launcher::shared_chrome;
use cdp_transport::{BackendNodeId, ConnectOptions, Connection, FrameId, Session, TargetId};
use evaluate::{Budget, Engine, EngineConfig, Error, EvalRequest, EvalTarget, TimeoutKind};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(10);

/// The suite runs its tests one at a time: the timing assertions (1,150 ms,
/// 100 ms, 650 ms) would otherwise measure the other tests' load on 2 cores.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn connect() -> Connection {
    let ws = shared_chrome().unwrap_or_else(|e| panic!("Chromium is needed for this test: {e}"));
    Connection::connect(&ws, ConnectOptions::default())
        .await
        .expect("connect")
}

/// A tab with the test's own session (Page enabled), loaded with `url`.
struct Tab {
    conn: Connection,
    target: TargetId,
    page: Session,
}

impl Tab {
    async fn open(conn: &Connection, url: &str) -> Tab {
        let v = conn
            .browser()
            .call("Target.createTarget", json!({"url": "about:blank"}), T)
            .await
            .expect("createTarget");
        let target = TargetId::new(v["targetId"].as_str().expect("targetId"));
        let page = conn.attach(&target, T).await.expect("attach");
        page.call("Page.enable", json!({}), T)
            .await
            .expect("Page.enable");
        let mut ev = page.subscribe();
        page.call("Page.navigate", json!({"url": url}), T)
            .await
            .expect("navigate");
        tokio::time::timeout(T, ev.next_method("Page.loadEventFired"))
            .await
            .expect("load")
            .expect("events");
        Tab {
            conn: conn.clone(),
            target,
            page,
        }
    }
    fn engine(&self, config: EngineConfig) -> Engine {
        Engine::new(self.conn.clone(), self.target.clone(), config)
    }
    async fn close(self) {
        let _ = self
            .conn
            .browser()
            .call(
                "Target.closeTarget",
                json!({"targetId": self.target.as_str()}),
                T,
            )
            .await;
    }
    /// A left click at the centre of the element matching `selector`, through `Input.dispatchMouseEvent`.
    async fn click(&self, selector: &str) {
        let r = self
            .page
            .call(
                "Runtime.evaluate",
                json!({"expression": format!("(() => {{ const r = document.querySelector({selector:?}).getBoundingClientRect(); return [r.x + r.width / 2, r.y + r.height / 2]; }})()"), "returnByValue": true}),
                T,
            )
            .await
            .expect("rect");
        let (x, y) = (
            r["result"]["value"][0].as_f64().expect("x"),
            r["result"]["value"][1].as_f64().expect("y"),
        );
        for kind in ["mousePressed", "mouseReleased"] {
            self.page
                .call(
                    "Input.dispatchMouseEvent",
                    json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}),
                    T,
                )
                .await
                .expect("dispatchMouseEvent");
        }
    }
}

async fn eval(engine: &Engine, src: &str, budget_ms: u64) -> Result<Value, Error> {
    engine
        .evaluate(
            EvalRequest::new(src),
            &Budget::new(Duration::from_millis(budget_ms)),
        )
        .await
        .map(|o| o.value)
}

const CLICK_PAGE: &str = "<title>C13</title><button id=b onclick='window.clicks = (window.clicks || 0) + 1'>Click me</button>";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_loop_times_out_within_budget_and_tab_stays_usable() {
    let _serial = SERIAL.lock().await;
    let site = FixtureServer::start().await;
    site.page("/c13.html", CLICK_PAGE);
    let conn = connect().await;
    let tab = Tab::open(&conn, &site.url("localhost", "/c13.html")).await;
    let engine = tab.engine(EngineConfig::default());
    engine.warm_up(&Budget::new(T)).await.expect("warm up");

    let t0 = Instant::now();
    let err = eval(&engine, "while (true) {}", 1000)
        .await
        .expect_err("a busy loop cannot finish");
    let took = t0.elapsed();
    assert!(
        matches!(
            err,
            Error::Timeout {
                kind: TimeoutKind::Script,
                ..
            }
        ),
        "{err:?}"
    );
    assert_eq!(err.code(), "timeout");
    let text = err.to_string();
    assert!(
        text.contains("terminated") && text.contains("budget 1s"),
        "{text}"
    );
    assert!(took < Duration::from_millis(1150), "timeout took {took:?}");

    let t1 = Instant::now();
    let title = eval(&engine, "document.title", 5000)
        .await
        .expect("title after recovery");
    let took_title = t1.elapsed();
    assert_eq!(title, json!("C13"));
    assert!(
        took_title < Duration::from_millis(200),
        "document.title took {took_title:?}"
    );

    tab.click("#b").await;
    assert_eq!(
        eval(&engine, "window.clicks", 5000).await.expect("clicks"),
        json!(1)
    );
    let m = engine.metrics();
    // The termination took (the loop ended within the grace), so the session
    // was kept warm: nothing detached, nothing reattached.
    assert_eq!((m.timeouts, m.terminations, m.detaches), (1, 1, 0), "{m:?}");
    println!("busy loop: timeout after {took:?}, next evaluate {took_title:?}");
    tab.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn never_settling_promise_times_out_and_tab_stays_usable() {
    let _serial = SERIAL.lock().await;
    let site = FixtureServer::start().await;
    site.page("/c14.html", CLICK_PAGE);
    let conn = connect().await;
    let tab = Tab::open(&conn, &site.url("localhost", "/c14.html")).await;
    let engine = tab.engine(EngineConfig::default());
    engine.warm_up(&Budget::new(T)).await.expect("warm up");

    let t0 = Instant::now();
    let err = eval(&engine, "new Promise(() => {})", 500)
        .await
        .expect_err("never settles");
    let took = t0.elapsed();
    assert!(
        matches!(
            err,
            Error::Timeout {
                kind: TimeoutKind::Promise,
                terminated: false,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(took < Duration::from_millis(650), "took {took:?}");
    // The JS thread was idle: nothing was terminated, nothing replaced.
    let m = engine.metrics();
    assert_eq!(
        (m.promise_timeouts, m.terminations, m.detaches),
        (1, 0, 0),
        "{m:?}"
    );
    assert_eq!(
        eval(&engine, "document.title", 5000).await.expect("usable"),
        json!("C13")
    );
    tab.click("#b").await;
    assert_eq!(
        eval(&engine, "window.clicks", 5000).await.expect("clicks"),
        json!(1)
    );
    println!("never-settling promise: {err} after {took:?}");
    tab.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_promise_whose_in_page_timer_never_fires_is_still_a_promise_timeout() {
    let _serial = SERIAL.lock().await;
    let site = FixtureServer::start().await;
    // The page replaces setTimeout with one that never calls back: the
    // helper's settle timer never fires, as on a loaded machine or in a
    // throttled background tab. The kind must come from what was running
    // (C14), and nothing may be terminated.
    site.page(
        "/late.html",
        "<title>late</title><script>window.setTimeout = () => 0; window.never = () => new Promise(() => {});</script>",
    );
    let conn = connect().await;
    let tab = Tab::open(&conn, &site.url("localhost", "/late.html")).await;
    let engine = tab.engine(EngineConfig::default());
    engine.warm_up(&Budget::new(T)).await.expect("warm up");
    for budget_ms in [300, 1000] {
        let t0 = Instant::now();
        let err = eval(&engine, "never()", budget_ms)
            .await
            .expect_err("never settles");
        let took = t0.elapsed();
        assert!(
            matches!(
                err,
                Error::Timeout {
                    kind: TimeoutKind::Promise,
                    terminated: false,
                    ..
                }
            ),
            "{budget_ms} ms: {err:?}"
        );
        // The deadline plus one idle probe (bounded by the grace).
        assert!(
            took < Duration::from_millis(budget_ms + 100 + 150),
            "{budget_ms} ms: took {took:?}"
        );
        assert_eq!(
            eval(&engine, "document.title", 5000).await.expect("usable"),
            json!("late")
        );
    }
    let m = engine.metrics();
    assert_eq!(
        (m.promise_timeouts, m.terminations, m.detaches),
        (2, 0, 0),
        "{m:?}"
    );
    tab.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_started_by_a_promise_is_terminated_and_the_tab_stays_usable() {
    let _serial = SERIAL.lock().await;
    let site = FixtureServer::start().await;
    site.page("/c13.html", CLICK_PAGE);
    let conn = connect().await;
    let tab = Tab::open(&conn, &site.url("localhost", "/c13.html")).await;
    let engine = tab.engine(EngineConfig::default());
    engine.warm_up(&Budget::new(T)).await.expect("warm up");
    // The synchronous part returns a promise at once; its continuation
    // loops from 50 ms on, so at the deadline the page is busy.
    let t0 = Instant::now();
    let err = eval(
        &engine,
        "await new Promise(r => setTimeout(r, 50)); while (true) {}",
        1000,
    )
    .await
    .expect_err("never ends");
    let took = t0.elapsed();
    // Its promise never settled, and what it started was terminated.
    assert!(
        matches!(
            err,
            Error::Timeout {
                kind: TimeoutKind::Promise,
                terminated: true,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(took < Duration::from_millis(1000 + 250), "took {took:?}");
    assert_eq!(engine.metrics().terminations, 1);
    // The loop was ended: the tab answers again.
    assert_eq!(
        eval(&engine, "document.title", 5000).await.expect("usable"),
        json!("C13")
    );
    tab.click("#b").await;
    assert_eq!(
        eval(&engine, "window.clicks", 5000).await.expect("clicks"),
        json!(1)
    );
    println!("loop in a continuation: {err} after {took:?}");
    tab.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caller_cancellation_ends_a_running_loop_quickly() {
    let _serial = SERIAL.lock().await;
    let site = FixtureServer::start().await;
    site.page("/c13.html", CLICK_PAGE);
    let conn = connect().await;
    let tab = Tab::open(&conn, &site.url("localhost", "/c13.html")).await;
    let engine = tab.engine(EngineConfig::default());
    engine.warm_up(&Budget::new(T)).await.expect("warm up");

    let budget = Budget::new(Duration::from_secs(20));
    let task = {
        let (engine, budget) = (engine.clone(), budget.clone());
        tokio::spawn(async move {
            engine
                .evaluate(
                    EvalRequest::new("window.started = true; while (true) {}"),
                    &budget,
                )
                .await
        })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    let t0 = Instant::now();
    budget.cancel();
    let err = task.await.expect("join").expect_err("cancelled");
    let took = t0.elapsed();
    assert!(
        matches!(
            err,
            Error::Cancelled {
                sent: true,
                terminated: true,
                ..
            }
        ),
        "{err:?}"
    );
    assert!(took < Duration::from_millis(100), "cancel took {took:?}");
    assert_eq!(
        eval(&engine, "window.started", 5000).await.expect("usable"),
        json!(true)
    );
    println!("cancel: {err} after {took:?}");
    tab.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn confirm_from_the_script_returns_dialog_opened_at_once() {
    let _serial = SERIAL.lock().await;
    let site = FixtureServer::start().await;
    site.page(
        "/c03.html",
        "<title>C03</title><output id=out>idle</output>",
    );
    let conn = connect().await;
    let tab = Tab::open(&conn, &site.url("localhost", "/c03.html")).await;
    let engine = tab.engine(EngineConfig::default());
    engine.warm_up(&Budget::new(T)).await.expect("warm up");
    let mut events = tab.page.subscribe();

    let t0 = Instant::now();
    let err = eval(
        &engine,
        "out.textContent = confirm('x') ? 'yes' : 'no'",
        10_000,
    )
    .await
    .expect_err("a dialog");
    let took = t0.elapsed();
    let opened = tokio::time::timeout(T, events.next_method("Page.javascriptDialogOpening"))
        .await
        .expect("event")
        .expect("stream");
    let d = err.dialog().expect("dialog_opened").clone();
    assert_eq!(err.code(), "dialog_opened");
    assert_eq!(
        (d.dialog_type.as_str(), d.message.as_str()),
        ("confirm", "x")
    );
    assert_eq!(
        d.frame_id.as_ref().map(FrameId::as_str),
        opened.str_param("frameId")
    );
    assert!(
        took < Duration::from_millis(100),
        "dialog_opened after {took:?}"
    );

    // No supervisor here: the test answers the dialog; the script then goes on.
    tab.page
        .call("Page.handleJavaScriptDialog", json!({"accept": true}), T)
        .await
        .expect("answer");
    // The engine learns of the close from `Page.javascriptDialogClosed` on its
    // own session, which can arrive a moment after the answer's reply on the
    // test's session: until then it refuses at once with `dialog_opened`
    // (field case C02). Give it up to a second.
    let deadline = std::time::Instant::now() + Duration::from_secs(1);
    let mut refused = 0;
    let out = loop {
        match eval(
            &engine,
            "new Promise(r => setTimeout(() => r(out.textContent), 50))",
            5000,
        )
        .await
        {
            Err(e) if e.code() == "dialog_opened" && std::time::Instant::now() < deadline => {
                refused += 1;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => break other.expect("usable"),
        }
    };
    assert_eq!(out, json!("yes"));
    assert_eq!(engine.metrics().dialog_interruptions, 1 + refused);
    println!("confirm: dialog_opened after {took:?}");
    tab.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn navigation_during_an_evaluate_is_a_typed_error() {
    let _serial = SERIAL.lock().await;
    let site = FixtureServer::start().await;
    site.page("/c10.html", "<title>C10</title>");
    site.page("/other.html", "<title>other</title>");
    let conn = connect().await;
    let tab = Tab::open(&conn, &site.url("localhost", "/c10.html")).await;
    let engine = tab.engine(EngineConfig::default());
    engine.warm_up(&Budget::new(T)).await.expect("warm up");

    // The script navigates its own frame, then awaits for ever.
    let t0 = Instant::now();
    let err = eval(
        &engine,
        "setTimeout(() => { location.href = '/other.html' }, 100); await new Promise(() => {})",
        10_000,
    )
    .await
    .expect_err("navigated");
    let took = t0.elapsed();
    println!("first: {err:?} after {took:?}");
    assert!(
        matches!(
            err,
            Error::Navigated { .. } | Error::ContextDestroyed { .. }
        ),
        "{err:?}"
    );
    assert!(took < Duration::from_secs(1), "took {took:?}");

    // Navigation from outside while an evaluate waits.
    let task = {
        let engine = engine.clone();
        tokio::spawn(
            async move { eval(&engine, "new Promise(r => setTimeout(r, 5000))", 10_000).await },
        )
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let t1 = Instant::now();
    tab.page
        .call(
            "Page.navigate",
            json!({"url": site.url("localhost", "/c10.html")}),
            T,
        )
        .await
        .expect("navigate");
    let r2 = task.await.expect("join");
    println!("second: {r2:?} after {:?}", t1.elapsed());
    let err2 = r2.expect_err("navigated");
    assert!(
        matches!(
            err2,
            Error::Navigated { .. } | Error::ContextDestroyed { .. }
        ),
        "{err2:?}"
    );
    assert!(
        t1.elapsed() < Duration::from_secs(1),
        "took {:?}",
        t1.elapsed()
    );
    // The new document is reachable. An evaluate sent while the navigation
    // is still committing may land in the old document's context as it goes
    // away (`navigated`: its outcome is unknown); the next one runs in the
    // new document.
    let t2 = Instant::now();
    let title = loop {
        match eval(&engine, "document.title", 5000).await {
            Ok(t) => break t,
            Err(e @ (Error::Navigated { .. } | Error::ContextDestroyed { .. }))
                if t2.elapsed() < Duration::from_secs(5) =>
            {
                println!("evaluate during the commit: {e}");
            }
            Err(e) => panic!("new document: {e:?}"),
        }
    };
    assert!(title == json!("C10") || title == json!("other"), "{title}");
    println!("navigation: {err} after {took:?}; {err2}");
    tab.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn same_expression_in_three_realms_returns_each_realms_value() {
    let _serial = SERIAL.lock().await;
    let site = FixtureServer::start().await;
    site.page(
        "/child.html",
        "<script>window.marker = 'cross-site-child'</script>",
    );
    let child = site.url("127.0.0.1", "/child.html");
    site.page(
        "/c12.html",
        &format!(
            "<script>window.marker = 'top'</script><iframe id=same srcdoc=\"<script>window.marker='srcdoc-child'</script>\"></iframe><iframe id=cross src='{child}'></iframe>"
        ),
    );
    let conn = connect().await;
    let tab = Tab::open(&conn, &site.url("localhost", "/c12.html")).await;
    let tree = tab
        .page
        .call("Page.getFrameTree", json!({}), T)
        .await
        .expect("frame tree");
    let srcdoc = tree["frameTree"]["childFrames"]
        .as_array()
        .expect("children")
        .iter()
        .find(|c| {
            c["frame"]["url"]
                .as_str()
                .is_some_and(|u| u.starts_with("about:srcdoc"))
        })
        .map(|c| FrameId::new(c["frame"]["id"].as_str().expect("id")))
        .expect("srcdoc frame");
    let targets = conn
        .browser()
        .call("Target.getTargets", json!({}), T)
        .await
        .expect("targets");
    let oopif = targets["targetInfos"]
        .as_array()
        .expect("infos")
        .iter()
        .find(|t| t["type"] == "iframe" && t["url"].as_str() == Some(child.as_str()))
        .map(|t| TargetId::new(t["targetId"].as_str().expect("id")))
        .expect("an OOPIF target for the cross-site child");

    let engine = tab.engine(EngineConfig::default());
    let b = || Budget::new(T);
    let run = |target: EvalTarget| {
        let engine = engine.clone();
        async move {
            engine
                .evaluate(EvalRequest::new("window.marker").target(target), &b())
                .await
                .expect("evaluate")
        }
    };
    let top = run(EvalTarget::MainFrame).await;
    let same = run(EvalTarget::Frame(srcdoc.clone())).await;
    let cross = run(EvalTarget::Oopif {
        target_id: oopif.clone(),
        frame_id: None,
    })
    .await;
    let cross_by_frame = run(EvalTarget::Frame(FrameId::new(oopif.as_str()))).await;
    assert_eq!(top.value, json!("top"));
    assert_eq!(same.value, json!("srcdoc-child"));
    assert_eq!(same.frame_id, srcdoc);
    assert_eq!(cross.value, json!("cross-site-child"));
    assert_eq!(cross.target_id, oopif);
    assert_eq!(cross_by_frame.value, json!("cross-site-child"));
    let unknown = engine
        .evaluate(
            EvalRequest::new("1").target(EvalTarget::Frame(FrameId::new("NOPE"))),
            &b(),
        )
        .await
        .expect_err("unknown frame");
    assert_eq!(unknown.code(), "unknown_frame", "{unknown}");
    tab.close().await;
}

const C15: &str = r#"<title>C15</title><ul id="list" class="a b"><li>a</li><li>b</li></ul>
<script>
  window.samples = {
    nan: () => NaN, posInf: () => Infinity, negInf: () => -Infinity, negZero: () => -0,
    bigint: () => 2n ** 70n, undef: () => undefined, nul: () => null, str: () => 'text', num: () => 1.5, bool: () => true,
    symbol: () => Symbol('tag'), func: () => function namedFn(a) { return a; },
    date: () => new Date(0), regexp: () => /a+b/gi, map: () => new Map([[1, 'one'], ['k', { x: 1 }]]),
    set: () => new Set([1, 2]), typed: () => new Uint8Array([1, 2, 3]), error: () => new Error('boom'),
    element: () => document.getElementById('list'), nodeList: () => document.querySelectorAll('li'),
    win: () => window, circular: () => { const a = { name: 'a' }; a.self = a; return a; },
    deep: () => { const root = {}; let o = root; for (let i = 0; i < 5000; i++) { o.next = {}; o = o.next; } return root; },
    sparse: () => { const a = [1]; a[3] = 4; return a; },
    getterThrows: () => ({ get bad() { throw new Error('getter'); }, ok: 1 }),
    classInstance: () => new (class Point { constructor() { this.x = 1; this.y = 2; } })(),
    dollarType: () => ({ $type: 'not ours' }),
    nested: () => ({ list: [NaN, -0, 10n, undefined], when: new Date(86400000) }),
  };
</script>"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_value_kind_comes_back_explained() {
    let _serial = SERIAL.lock().await;
    let site = FixtureServer::start().await;
    site.page("/c15.html", C15);
    let conn = connect().await;
    let tab = Tab::open(&conn, &site.url("localhost", "/c15.html")).await;
    let engine = tab.engine(EngineConfig::default().max_depth(8));
    let keys = eval(&engine, "Object.keys(samples)", 5000)
        .await
        .expect("keys");
    let mut all = serde_json::Map::new();
    for k in keys.as_array().expect("array") {
        let k = k.as_str().expect("key");
        let v = eval(&engine, &format!("samples.{k}()"), 5000)
            .await
            .unwrap_or_else(|e| panic!("{k}: {e}"));
        all.insert(k.to_string(), v);
    }
    insta::with_settings!({sort_maps => true}, {
        insta::assert_yaml_snapshot!("c15_values", Value::Object(all), {
            ".win.url" => "[url]",
            ".error.stack" => "[stack]",
        });
    });
    tab.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_megabyte_string_is_capped_with_a_marker() {
    let _serial = SERIAL.lock().await;
    let conn = connect().await;
    let tab = Tab::open(&conn, "about:blank").await;
    let engine = tab.engine(EngineConfig::default().max_result_chars(1 << 20));
    let out = engine
        .evaluate(
            EvalRequest::new("'x'.repeat(50 * 1024 * 1024)"),
            &Budget::new(Duration::from_secs(30)),
        )
        .await
        .expect("evaluate");
    assert!(out.truncated);
    assert_eq!(out.value["$type"], "truncated");
    assert_eq!(out.value["kind"], "string");
    assert_eq!(out.value["length"], 50 * 1024 * 1024);
    let kept = out.value["value"].as_str().expect("prefix").len();
    assert!(kept > 1_000_000 && kept <= 1 << 20, "kept {kept}");

    // A cap above the size returns the whole string.
    let engine = tab.engine(EngineConfig::default().max_result_chars(64 << 20));
    let out = engine
        .evaluate(
            EvalRequest::new("'y'.repeat(50 * 1024 * 1024)"),
            &Budget::new(Duration::from_secs(60)),
        )
        .await
        .expect("evaluate");
    assert!(!out.truncated);
    assert_eq!(out.value.as_str().map(str::len), Some(50 * 1024 * 1024));
    tab.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_script_runs_twice_over_a_hundred_evaluations() {
    let _serial = SERIAL.lock().await;
    let site = FixtureServer::start().await;
    site.page(
        "/count.html",
        "<title>count</title><script>window.runs = 0</script>",
    );
    let conn = connect().await;
    let tab = Tab::open(&conn, &site.url("localhost", "/count.html")).await;
    let engine = tab.engine(EngineConfig::default());
    let mut codes = std::collections::BTreeMap::<&str, u32>::new();
    for i in 0..100u32 {
        let (src, budget_ms) = match i % 10 {
            0 if i % 20 == 0 => ("window.runs++; while (true) {}", 300),
            0 => ("window.runs++; await new Promise(() => {})", 200),
            1 | 2 => ("window.runs++; throw new Error('no ' + window.runs)", 5000),
            3 => ("() => window.runs++", 5000),
            4 => ("window.runs++; return window.runs", 5000),
            5 => (
                "async () => { window.runs++; await null; throw new TypeError('late') }",
                5000,
            ),
            _ => ("window.runs++", 5000),
        };
        let r = eval(&engine, src, budget_ms).await;
        if let Err(e) = &r {
            if !matches!(e.code(), "timeout" | "js_exception") {
                println!("evaluation {i} ({src}): {e:?}");
            }
        }
        *codes
            .entry(r.as_ref().map(|_| "ok").unwrap_or_else(|e| e.code()))
            .or_default() += 1;
    }
    let runs = eval(&engine, "window.runs", 5000).await.expect("runs");
    assert_eq!(runs, json!(100), "codes {codes:?}");
    assert_eq!(codes.get("timeout"), Some(&10), "{codes:?}");
    assert_eq!(codes.get("js_exception"), Some(&30), "{codes:?}");
    assert_eq!(codes.get("ok"), Some(&60), "{codes:?}");
    let m = engine.metrics();
    assert_eq!(m.evaluations, 101);
    assert_eq!(m.js_exceptions, 30);
    tab.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hundred_concurrent_evaluates_over_ten_tabs() {
    let _serial = SERIAL.lock().await;
    let site = FixtureServer::start().await;
    site.page(
        "/tab.html",
        "<script>window.tab = Number(new URLSearchParams(location.search).get('t'))</script>",
    );
    let conn = connect().await;
    let mut tabs = Vec::new();
    for t in 0..10 {
        tabs.push(Tab::open(&conn, &site.url("localhost", &format!("/tab.html?t={t}"))).await);
    }
    let t0 = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for (t, tab) in tabs.iter().enumerate() {
        let engine = tab.engine(EngineConfig::default());
        for i in 0..10 {
            let engine = engine.clone();
            set.spawn(async move {
                let v = eval(
                    &engine,
                    &format!(
                        "await new Promise(r => setTimeout(r, 20)); return window.tab * 100 + {i}"
                    ),
                    20_000,
                )
                .await;
                (t, i, v)
            });
        }
    }
    let mut n = 0;
    while let Some(r) = set.join_next().await {
        let (t, i, v) = r.expect("join");
        assert_eq!(v.expect("evaluate"), json!(t * 100 + i));
        n += 1;
    }
    assert_eq!(n, 100);
    println!("100 concurrent evaluates over 10 tabs: {:?}", t0.elapsed());
    for tab in tabs {
        tab.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn source_forms_errors_element_evaluate_and_the_gate() {
    let _serial = SERIAL.lock().await;
    let site = FixtureServer::start().await;
    site.page(
        "/f.html",
        "<title>forms</title><button id=b class='x y'>Press</button>",
    );
    let conn = connect().await;
    let tab = Tab::open(&conn, &site.url("localhost", "/f.html")).await;
    let engine = tab.engine(EngineConfig::default());
    let run = |src: &str| {
        let engine = engine.clone();
        let src = src.to_string();
        async move {
            engine
                .evaluate(EvalRequest::new(src), &Budget::new(T))
                .await
        }
    };
    let o = run("() => document.title").await.expect("function");
    assert_eq!(
        (o.value.clone(), o.form),
        (json!("forms"), evaluate::SourceForm::Function)
    );
    let o = run("const a = 2; return a * 21").await.expect("statements");
    assert_eq!(
        (o.value.clone(), o.form),
        (json!(42), evaluate::SourceForm::Statements)
    );
    // Statements without a top-level `return` give their completion value.
    let o = run("var x = 20; x + 22").await.expect("script");
    assert_eq!(
        (o.value.clone(), o.form),
        (json!(42), evaluate::SourceForm::Script)
    );
    let o = run("document.title; document.title.length")
        .await
        .expect("script");
    assert_eq!(o.value, json!(5));
    let e = run("let a = 1;\nnull.x").await.expect_err("throws");
    assert!(
        matches!(&e, Error::JsException { location: Some(l), .. } if l == "line 2, column 6"),
        "{e:?}"
    );
    let e = run("1+").await.expect_err("syntax");
    assert!(
        matches!(
            &e,
            Error::InvalidSource {
                line: Some(0),
                column: Some(2),
                ..
            }
        ),
        "{e:?}"
    );
    let o = run("await Promise.resolve(7)")
        .await
        .expect("await expression");
    assert_eq!(
        (o.value.clone(), o.form),
        (json!(7), evaluate::SourceForm::Expression)
    );
    let e = run("1 +* 2").await.expect_err("syntax");
    assert!(matches!(e, Error::InvalidSource { .. }), "{e:?}");
    let e = run("null.x").await.expect_err("throws");
    assert!(
        matches!(&e, Error::JsException { name, location: Some(_), .. } if name == "TypeError"),
        "{e:?}"
    );

    let doc = tab
        .page
        .call("DOM.getDocument", json!({}), T)
        .await
        .expect("doc");
    let q = tab
        .page
        .call(
            "DOM.querySelector",
            json!({"nodeId": doc["root"]["nodeId"], "selector": "#b"}),
            T,
        )
        .await
        .expect("query");
    let d = tab
        .page
        .call("DOM.describeNode", json!({"nodeId": q["nodeId"]}), T)
        .await
        .expect("describe");
    let node = BackendNodeId(d["node"]["backendNodeId"].as_i64().expect("backend id"));
    let o = engine
        .evaluate_on_node(
            EvalTarget::MainFrame,
            node,
            "(el) => el.textContent + ':' + el.className",
            &Budget::new(T),
        )
        .await
        .expect("element evaluate");
    assert_eq!(o.value, json!("Press:x y"));
    let o = engine
        .evaluate_on_node(EvalTarget::MainFrame, node, "el => el", &Budget::new(T))
        .await
        .expect("node value");
    assert_eq!(o.value["$type"], "node");
    assert_eq!(o.value["tag"], "button");

    let off = tab.engine(EngineConfig::default().evaluate_enabled(false));
    let e = off
        .evaluate(EvalRequest::new("1"), &Budget::new(T))
        .await
        .expect_err("disabled");
    assert_eq!(e.code(), "evaluate_disabled");
    tab.close().await;
}

/// A page whose own script never yields holds every renderer-bound command.
/// `Runtime.terminateExecution` ends it only on a session the renderer bound
/// before it got busy (the test's own, attached at open): through that
/// session (the terminate route) a cold engine's evaluate stops the loop
/// half-way through its budget and returns the value with a note. Without
/// a route, the termination goes on the engine's own session, attached
/// while the loop runs, and does not reach the renderer: `page_busy`, not
/// claiming a stop (Chromium 156).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_page_script_is_stopped_through_a_session_bound_before_it() {
    let _serial = SERIAL.lock().await;
    let site = FixtureServer::start().await;
    site.page(
        "/hang.html",
        "<title>MH</title><button>B1</button><script>setTimeout(() => { while (true) {} }, 300)</script>",
    );
    let conn = connect().await;

    // Without a route.
    let tab = Tab::open(&conn, &site.url("127.0.0.1", "/hang.html")).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let engine = tab.engine(EngineConfig::default());
    let t0 = Instant::now();
    let err = eval(&engine, "document.title", 1500)
        .await
        .expect_err("the fresh session cannot reach the busy renderer");
    println!("no route: {err} after {:?}", t0.elapsed());
    assert!(
        matches!(&err, Error::PageBusy { stopped: false, .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("the script never ran"), "{err}");
    tab.close().await;

    // With the test's own session (bound at open) as the route.
    let tab = Tab::open(&conn, &site.url("127.0.0.1", "/hang.html")).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    let engine = tab.engine(EngineConfig::default());
    let (page, target) = (tab.page.clone(), tab.target.clone());
    engine.set_facts(std::sync::Arc::new(TerminateOn(target, page)));
    let t0 = Instant::now();
    let out = engine
        .evaluate(
            EvalRequest::new("document.title"),
            &Budget::new(Duration::from_millis(2000)),
        )
        .await
        .expect("the loop is stopped and the evaluate runs");
    let took = t0.elapsed();
    println!(
        "route: {:?} after {took:?}; notes {:?}",
        out.value, out.notes
    );
    assert_eq!(out.value, json!("MH"));
    assert!(
        took >= Duration::from_millis(900) && took < Duration::from_millis(1900),
        "{took:?}"
    );
    assert!(
        out.notes
            .iter()
            .any(|n| n.contains("it was stopped with Runtime.terminateExecution")),
        "{:?}",
        out.notes
    );
    assert_eq!(engine.metrics().succeeded, 1);
    let again = eval(&engine, "document.title", 1000).await.expect("usable");
    assert_eq!(again, json!("MH"));
    tab.close().await;

    // A warm engine: its script is sent and waits behind the page's loop.
    // Which script runs cannot be told until the deadline; then the
    // termination stops the page's loop, the queued script runs to its
    // value within the grace, and a note says what happened.
    let tab = Tab::open(&conn, &site.url("127.0.0.1", "/hang.html?late")).await;
    let engine = tab.engine(EngineConfig::default());
    engine
        .warm_up(&Budget::new(T))
        .await
        .expect("warm before the loop");
    tokio::time::sleep(Duration::from_millis(600)).await;
    let t0 = Instant::now();
    let out = engine
        .evaluate(
            EvalRequest::new("document.title"),
            &Budget::new(Duration::from_millis(1500)),
        )
        .await
        .expect("the loop is stopped at the deadline");
    println!(
        "warm: {:?} after {:?}; notes {:?}",
        out.value,
        t0.elapsed(),
        out.notes
    );
    assert_eq!(out.value, json!("MH"));
    assert!(
        out.notes
            .iter()
            .any(|n| n.contains("most likely the page's own")),
        "{:?}",
        out.notes
    );
    tab.close().await;
}

/// Page facts that name one session for terminations of one target (and
/// none for any other), as a supervisor does.
struct TerminateOn(TargetId, cdp_transport::Session);

impl evaluate::PageFacts for TerminateOn {
    fn terminate_via(&self, t: &TargetId) -> Option<evaluate::TerminateVia> {
        Some(if *t == self.0 {
            evaluate::TerminateVia::Session(self.1.clone())
        } else {
            evaluate::TerminateVia::Hold
        })
    }
}
