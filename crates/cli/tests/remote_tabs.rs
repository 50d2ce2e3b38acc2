//! With `--cdp-url`, `tabwarden eval|snapshot|screenshot` close the tab
//! they opened before exiting: on success, on a tool error (exit 1) and on
//! SIGINT/SIGTERM (exit 130/143). Each test launches its own Chromium
//! (`LaunchedChrome`) and counts its page targets (`Target.getTargets`)
//! before and after.

use cdp_transport::{Budget, ConnectOptions, Connection, LaunchOptions, LaunchedChrome};
use serde_json::{json, Value};
use std::process::Output;
use std::time::{Duration, Instant};

async fn launch() -> LaunchedChrome {
    LaunchedChrome::launch(LaunchOptions::default().offline(true))
        .await
        .unwrap_or_else(|e| panic!("launch Chromium: {e}"))
}

/// The browser's page targets, counted on a connection of the test's own.
async fn pages(conn: &Connection) -> usize {
    let v = conn
        .browser()
        .call(
            "Target.getTargets",
            json!({}),
            Budget::new(Duration::from_secs(10)),
        )
        .await
        .unwrap_or_else(|e| panic!("Target.getTargets: {e}"));
    v["targetInfos"]
        .as_array()
        .map(|a| a.iter().filter(|t| t["type"] == "page").count())
        .unwrap_or(0)
}

/// The titles of the browser's page targets.
async fn titles(conn: &Connection) -> Vec<String> {
    let v = conn
        .browser()
        .call(
            "Target.getTargets",
            json!({}),
            Budget::new(Duration::from_secs(10)),
        )
        .await
        .unwrap_or_else(|e| panic!("Target.getTargets: {e}"));
    v["targetInfos"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|t| t["type"] == "page")
                .filter_map(|t| t["title"].as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Waits (bounded) until the browser has `n` page targets; returns the count
/// it last saw.
async fn settle(conn: &Connection, n: usize, within: Duration) -> usize {
    let t0 = Instant::now();
    loop {
        let got = pages(conn).await;
        if got == n || t0.elapsed() > within {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn tabwarden(args: &[&str]) -> Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_tabwarden"))
        .env_remove("TABWARDEN_CDP_URL")
        .args(args)
        .output()
        .await
        .unwrap_or_else(|e| panic!("run tabwarden: {e}"))
}

fn stdout_json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_command_closes_the_tab_it_opened_whatever_its_exit_code() {
    let chrome = launch().await;
    let ws = chrome.ws_url().to_string();
    let conn = Connection::connect(&ws, ConnectOptions::default())
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    let base = pages(&conn).await;
    assert!(base >= 1, "Chromium starts with about:blank");
    let dir = std::env::temp_dir().join(format!("tw-remote-tabs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let shot = dir.join("s.png");
    let shot = shot.to_str().unwrap_or_default();

    let runs: Vec<(Vec<&str>, i32)> = vec![
        (
            vec!["eval", "data:text/html,<title>T</title>", "document.title"],
            0,
        ),
        (
            vec!["eval", "data:text/html,x", "throw new Error('boom')"],
            1,
        ),
        (
            vec!["eval", "data:text/html,<script>alert(1)</script>", "1"],
            1,
        ),
        (vec!["snapshot", "data:text/html,<button>B</button>"], 0),
        (vec!["snapshot", "http://127.0.0.1:1/"], 1),
        (
            vec!["screenshot", "data:text/html,<h1>S</h1>", "-o", shot],
            0,
        ),
        (
            vec![
                "screenshot",
                "data:text/html,<script>confirm('c')</script>",
                "-o",
                shot,
            ],
            1,
        ),
    ];
    for (args, code) in runs {
        let mut all = args.clone();
        all.extend(["--cdp-url", &ws]);
        let t0 = Instant::now();
        let out = tabwarden(&all).await;
        let took = t0.elapsed();
        assert_eq!(
            out.status.code(),
            Some(code),
            "{args:?}: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if code == 1 {
            let v = stdout_json(&out);
            assert!(v["error"]["code"].is_string(), "{args:?}: {v}");
        }
        // Closed before exit; the short wait only absorbs the browser's own
        // bookkeeping (a leaked tab would stay forever).
        let after = settle(&conn, base, Duration::from_secs(5)).await;
        println!("{args:?}: exit {code} after {took:?}; page targets {base} → {after}");
        assert_eq!(after, base, "{args:?} left a tab open");
    }
    conn.close();
    drop(chrome);
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigint_and_sigterm_close_the_tab_before_exiting() {
    let chrome = launch().await;
    let ws = chrome.ws_url().to_string();
    let conn = Connection::connect(&ws, ConnectOptions::default())
        .await
        .unwrap_or_else(|e| panic!("connect: {e}"));
    let base = pages(&conn).await;
    for (signal, code) in [("-INT", 130), ("-TERM", 143)] {
        let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_tabwarden"))
            .env_remove("TABWARDEN_CDP_URL")
            .args([
                "eval",
                "--cdp-url",
                &ws,
                "--timeout-ms",
                "60000",
                "data:text/html,<title>hang</title>",
                "new Promise(() => {})",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("spawn: {e}"));
        let pid = child.id().unwrap_or_else(|| panic!("no pid"));
        // SIGINT as soon as the tab exists (tabwarden is likely still in
        // its connect: supervising the new tab); SIGTERM once the page
        // loaded and the evaluate hangs.
        let opened = settle(&conn, base + 1, Duration::from_secs(30)).await;
        assert_eq!(opened, base + 1, "the eval never opened its tab");
        if signal == "-TERM" {
            let t0 = Instant::now();
            while !titles(&conn).await.iter().any(|t| t == "hang") {
                assert!(
                    t0.elapsed() < Duration::from_secs(30),
                    "the page never loaded"
                );
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
        let st = std::process::Command::new("kill")
            .args([signal, &pid.to_string()])
            .status()
            .unwrap_or_else(|e| panic!("kill: {e}"));
        assert!(st.success());
        let t0 = Instant::now();
        let status = tokio::time::timeout(Duration::from_secs(15), child.wait())
            .await
            .unwrap_or_else(|_| panic!("tabwarden still running 15 s after kill {signal}"))
            .unwrap_or_else(|e| panic!("{e}"));
        let took = t0.elapsed();
        assert_eq!(status.code(), Some(code), "{signal}: {status:?}");
        let after = settle(&conn, base, Duration::from_secs(5)).await;
        println!("kill {signal} during a hung eval: exit {code} after {took:?}; page targets {} → {after}", base + 1);
        assert_eq!(after, base, "{signal} left the tab open");
    }
    conn.close();
    drop(chrome);
}
