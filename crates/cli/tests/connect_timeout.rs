//! Connect bounds. `--cdp-url`: an endpoint that accepts TCP and never
//! answers fails at `--connect-timeout-ms`, else at `--timeout-ms` raised to
//! 5 s (exit 3), not after the fixed 10 s default. A Chromium tabwarden
//! launched itself is never held to a short `--timeout-ms`.

use std::net::TcpListener;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// A loopback port that accepts connections and never sends a byte; the
/// accepted sockets are kept open until the test ends.
fn silent_endpoint() -> (u16, std::thread::JoinHandle<()>) {
    let listener =
        TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("bind 127.0.0.1:0: {e}"));
    let port = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("local_addr: {e}"))
        .port();
    let t = std::thread::spawn(move || {
        let mut held = Vec::new();
        // Bounded: the tests below make one connection each.
        for s in listener.incoming().take(4) {
            match s {
                Ok(s) => held.push(s),
                Err(_) => break,
            }
        }
        std::thread::sleep(Duration::from_secs(30));
    });
    (port, t)
}

fn run(args: &[&str]) -> (Output, Duration) {
    let t0 = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_tabwarden"))
        .env_remove("TABWARDEN_CDP_URL")
        .env_remove("TABWARDEN_CONNECT_TIMEOUT_MS")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run tabwarden: {e}"));
    (out, t0.elapsed())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn eval_timeout_ms_bounds_a_websocket_handshake_that_never_answers_but_not_under_5s() {
    let (port, _t) = silent_endpoint();
    let url = format!("ws://127.0.0.1:{port}/devtools/browser/silent");
    let (out, took) = run(&[
        "eval",
        "about:blank",
        "1",
        "--timeout-ms",
        "1200",
        "--cdp-url",
        &url,
    ]);
    println!(
        "eval --timeout-ms 1200 against a silent ws endpoint: exit {:?} after {took:?}",
        out.status.code()
    );
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    // A 1.2 s call budget is raised to the 5 s floor for the handshake.
    assert!(err.contains("timed out after 5s"), "{err}");
    assert!(took >= Duration::from_secs(5), "{took:?}");
    // Under the 10 s default (process start and a loaded machine included).
    assert!(took < Duration::from_secs(10), "{took:?}");
    // The message says the cause once.
    assert_eq!(err.matches("timed out after").count(), 1, "{err}");
}

#[test]
fn a_tiny_timeout_ms_does_not_bound_connecting_to_the_chromium_tabwarden_launched() {
    // Before: `connecting to ws://127.0.0.1:…/devtools/browser/… timed out after 1ms`, exit 3.
    let (out, took) = run(&[
        "eval",
        "--offline",
        "data:text/html,<title>T</title>",
        "document.title",
        "--timeout-ms",
        "1",
    ]);
    let err = stderr(&out);
    println!(
        "eval --timeout-ms 1 on a launched Chromium: exit {:?} after {took:?}",
        out.status.code()
    );
    assert!(!err.contains("timed out after 1ms"), "{err}");
    assert!(!err.contains("no browser"), "{err}");
    // The page work itself may well not fit in 1 ms: then it is the tool's
    // timeout (exit 1, JSON on stdout), never "no browser" (exit 3).
    match out.status.code() {
        Some(0) => {}
        Some(1) => {
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)
                .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
            assert_eq!(v["error"]["code"], "timeout", "{v}");
        }
        other => panic!("exit {other:?}: {err}"),
    }
}

#[test]
fn connect_timeout_ms_bounds_discovery_that_never_answers_for_any_command() {
    let (port, _t) = silent_endpoint();
    let url = format!("http://127.0.0.1:{port}");
    let dir = std::env::temp_dir().join(format!("tw-connect-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let shot = dir.join("shot.png");
    let (out, took) = run(&[
        "screenshot",
        "about:blank",
        "-o",
        shot.to_str().unwrap_or_default(),
        "--connect-timeout-ms",
        "800",
        "--cdp-url",
        &url,
    ]);
    println!("screenshot --connect-timeout-ms 800 against a silent http endpoint: exit {:?} after {took:?}", out.status.code());
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains("timed out after 800ms"), "{err}");
    assert!(took >= Duration::from_millis(800), "{took:?}");
    assert!(took < Duration::from_secs(7), "{took:?}");
    assert!(!shot.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn connect_timeout_ms_out_of_range_is_a_usage_error() {
    for bad in ["0", "120001", "x"] {
        let (out, _) = run(&[
            "snapshot",
            "about:blank",
            "--connect-timeout-ms",
            bad,
            "--cdp-url",
            "ws://127.0.0.1:9/x",
        ]);
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("--connect-timeout-ms"),
            "{}",
            stderr(&out)
        );
    }
}
