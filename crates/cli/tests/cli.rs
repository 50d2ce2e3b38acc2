//! The `tabwarden` binary: demo, snapshot on saved pages, eval, screenshot, exit codes.

use serde_json::Value;
use std::process::Command;

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tabwarden"));
    c.env_remove("TABWARDEN_CDP_URL");
    c
}

fn shared() -> String {
    cdp_transport::launcher::shared_chrome().unwrap_or_else(|e| panic!("no Chromium: {e}"))
}

/// Replaces what changes between runs: ports, frame ids, times.
fn redact(v: &mut Value, port: &str) {
    match v {
        Value::String(s) => {
            if s.len() == 32 && s.chars().all(|c| c.is_ascii_hexdigit()) {
                *s = "[frame_id]".into();
            } else if !port.is_empty() && s.contains(port) {
                *s = s.replace(port, "[port]");
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| redact(x, port)),
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                if k == "elapsed_ms" {
                    *x = Value::String("[ms]".into());
                } else {
                    redact(x, port);
                }
            }
        }
        _ => {}
    }
}

#[test]
fn demo_plays_every_step_and_exits_0() {
    let out = bin()
        .args(["demo", "--jsonl"])
        .output()
        .unwrap_or_else(|e| panic!("run demo: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "demo failed ({:?}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let steps: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    assert_eq!(steps.len(), 11, "{stdout}");
    let port = steps[0]["args"]["url"]
        .as_str()
        .and_then(|u| u.split(':').nth(2))
        .and_then(|p| p.split('/').next())
        .unwrap_or_default()
        .to_string();
    assert!(!port.is_empty());
    for mut s in steps {
        assert_eq!(s["ok"], true, "{s:#}");
        redact(&mut s, &port);
        let name = format!("demo_step_{:02}", s["step"].as_u64().unwrap_or(0));
        insta::assert_yaml_snapshot!(name, s);
    }
}

#[test]
fn demo_readable_output_exits_0() {
    let out = bin()
        .arg("demo")
        .output()
        .unwrap_or_else(|e| panic!("run demo: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("every step behaved as expected"),
        "{stdout}"
    );
    assert!(stdout.contains("→ browser_dialog"), "{stdout}");
}

#[test]
fn snapshot_of_each_saved_page_exits_0() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/pages");
    let mut n = 0;
    let ws = shared();
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "html"))
    {
        let out = bin()
            .args(["snapshot", "--cdp-url", &ws, "--timeout-ms", "15000"])
            .arg(&path)
            .output()
            .unwrap_or_else(|e| panic!("run snapshot: {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "{}: {:?}\n{stdout}\n{}",
            path.display(),
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value =
            serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(v["schema_version"], 1);
        assert!(
            v["snapshot"]
                .as_str()
                .is_some_and(|s| s.lines().count() > 5),
            "{}: {v}",
            path.display()
        );
        assert!(v["frame_tree"]["top"]["frame_id"].is_string());
        n += 1;
    }
    assert!(n >= 5, "expected the saved pages in {}", dir.display());
}

#[test]
fn eval_prints_the_value_and_a_hung_script_times_out_with_exit_1() {
    let ws = shared();
    let out = bin()
        .args([
            "eval",
            "--cdp-url",
            &ws,
            "data:text/html,<title>T</title>",
            "document.title + 1",
        ])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["value"], "T1");

    let t0 = std::time::Instant::now();
    let out = bin()
        .args([
            "eval",
            "--cdp-url",
            &ws,
            "--timeout-ms",
            "500",
            "data:text/html,x",
            "while(true){}",
        ])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["error"]["code"], "timeout", "{v}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(10));

    let out = bin()
        .args([
            "eval",
            "--cdp-url",
            &ws,
            "--timeout-ms",
            "0",
            "data:text/html,x",
            "1",
        ])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    // Checked by the command line before any browser is used: a usage error.
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("timeout-ms"));
}

#[test]
fn eval_metrics_prints_the_engine_counters_as_json_on_stderr() {
    let ws = shared();
    let out = bin()
        .args([
            "eval",
            "--cdp-url",
            &ws,
            "--metrics",
            "data:text/html,<title>M</title>",
            "document.title",
        ])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["value"], "M", "stdout keeps only the result");
    let metrics: Value = stderr
        .lines()
        .find_map(|l| {
            serde_json::from_str::<Value>(l)
                .ok()
                .filter(|j| j.get("metrics").is_some())
        })
        .unwrap_or_else(|| panic!("no metrics line on stderr: {stderr}"))["metrics"]
        .clone();
    assert_eq!(metrics["evaluations"], 1, "{metrics}");
    assert_eq!(metrics["succeeded"], 1, "{metrics}");
    assert_eq!(metrics["timeouts"], 0, "{metrics}");

    // Without the flag, nothing of the kind.
    let out = bin()
        .args(["eval", "--cdp-url", &ws, "data:text/html,x", "1"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!String::from_utf8_lossy(&out.stderr).contains("\"metrics\""));
}

#[test]
fn screenshot_writes_a_png() {
    let ws = shared();
    let dir = std::env::temp_dir().join(format!("tabwarden-shot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    let file = dir.join("shot.png");
    let out = bin()
        .args([
            "screenshot",
            "--cdp-url",
            &ws,
            "data:text/html,<h1>hi</h1>",
            "-o",
        ])
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let bytes = std::fs::read(&file).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn exit_codes_mean_something() {
    let out = bin()
        .args(["snapshot"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(2), "usage error");
    let out = bin()
        .args([
            "snapshot",
            "--cdp-url",
            "ws://127.0.0.1:1/devtools/browser/x",
            "about:blank",
        ])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "no browser: {err}");
    // Each cause once (it used to be `…: X: X`).
    assert_eq!(err.matches("Connection refused").count(), 1, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let ws = shared();
    let out = bin()
        .args(["snapshot", "--cdp-url", &ws, "http://127.0.0.1:1/"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["error"]["code"], "navigation_failed", "{v}");
}

#[test]
fn a_pending_dialog_points_at_dialog_policy_which_answers_it() {
    let ws = shared();
    let page =
        "data:text/html,<title>D</title><script>document.title = String(confirm('sure?'))</script>";
    let step = |v: &Value| {
        v["error"]["next_step"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    };

    // must_respond (default): eval and screenshot exit 1 with dialog_pending
    // and a next_step the CLI can follow; snapshot shows the dialog.
    let out = bin()
        .args(["eval", "--cdp-url", &ws, page, "document.title"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["error"]["code"], "dialog_pending", "{v}");
    assert_eq!(v["error"]["dialog"]["type"], "confirm", "{v}");
    assert!(step(&v).contains("--dialog-policy auto_dismiss"), "{v}");
    assert!(
        v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("confirm")),
        "{v}"
    );
    let out = bin()
        .args(["snapshot", "--cdp-url", &ws, page])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["pending_dialogs"][0]["type"], "confirm", "{v}");
    let note = v["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("--dialog-policy") && !note.contains("browser_dialog"),
        "{v}"
    );
    let file = std::env::temp_dir().join(format!("tw-dialog-shot-{}.png", std::process::id()));
    let out = bin()
        .args(["screenshot", "--cdp-url", &ws, page, "-o"])
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["error"]["code"], "dialog_pending", "{v}");
    assert!(step(&v).contains("--dialog-policy"), "{v}");

    // The policies answer it and the command goes on.
    for (policy, title) in [("auto_dismiss", "false"), ("auto_accept", "true")] {
        let out = bin()
            .args([
                "eval",
                "--cdp-url",
                &ws,
                "--dialog-policy",
                policy,
                page,
                "document.title",
            ])
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}"));
        assert!(out.status.success(), "{policy}: {v}");
        assert_eq!(v["value"], title, "{policy}: {v}");
    }
    let out = bin()
        .args([
            "screenshot",
            "--cdp-url",
            &ws,
            "--dialog-policy",
            "auto_dismiss",
            page,
            "-o",
        ])
        .arg(&file)
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let _ = std::fs::remove_file(&file);
    let out = bin()
        .args(["eval", "--help"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let help = String::from_utf8_lossy(&out.stdout);
    for v in [
        "--dialog-policy",
        "must_respond",
        "auto_dismiss",
        "auto_accept",
    ] {
        assert!(help.contains(v), "{v} not in eval --help:\n{help}");
    }
}

#[test]
fn logs_to_a_pipe_carry_no_ansi_colour_codes() {
    let ws = shared();
    let out = bin()
        .env("RUST_LOG", "info")
        .args(["eval", "--cdp-url", &ws, "data:text/html,x", "1"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("INFO"), "expected info logs: {err}");
    assert!(
        !err.contains('\u{1b}'),
        "ANSI escape in piped stderr: {err:?}"
    );
}
