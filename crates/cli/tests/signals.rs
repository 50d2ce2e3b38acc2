//! Signals and argument checks of the `tabwarden` binary: SIGTERM ends
//! `tabwarden mcp` like stdin EOF (its Chromium killed, its profile
//! removed); after SIGKILL its Chromium dies too and the next run removes
//! the profile; bad arguments exit 2 before a browser is launched or reached.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tabwarden"));
    c.env_remove("TABWARDEN_CDP_URL");
    c
}

/// `(pid, ppid, cmdline)` of every process readable in `/proc`.
fn processes() -> Vec<(u32, u32, String)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // pid (comm) state ppid …; comm may hold spaces or parentheses.
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut f = rest.split_whitespace();
        let state = f.next().unwrap_or_default();
        if state == "Z" {
            continue;
        }
        let ppid = f.next().and_then(|p| p.parse().ok()).unwrap_or(0);
        let cmd = std::fs::read(e.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        out.push((pid, ppid, cmd));
    }
    out
}

/// The `--user-data-dir` of a Chromium descending from `root`.
fn chromium_profile_under(root: u32) -> Option<String> {
    let procs = processes();
    let mut ours = vec![root];
    let mut i = 0;
    while i < ours.len() {
        let p = ours[i];
        ours.extend(procs.iter().filter(|x| x.1 == p).map(|x| x.0));
        i += 1;
    }
    procs
        .iter()
        .filter(|x| ours.contains(&x.0) && x.0 != root)
        .find_map(|x| {
            x.2.split_whitespace()
                .find_map(|a| a.strip_prefix("--user-data-dir="))
                .map(String::from)
        })
}

#[test]
fn sigterm_to_mcp_kills_its_chromium_and_exits_143() {
    let mut child = bin()
        .args(["mcp", "--offline"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn tabwarden mcp: {e}"));
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-03-26","capabilities":{{}},"clientInfo":{{"name":"signals-test","version":"0"}}}}}}"#
    )
    .unwrap_or_else(|e| panic!("write initialize: {e}"));
    stdin.flush().unwrap_or_else(|e| panic!("{e}"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let reply = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("no initialize reply: {e}"));
    assert!(reply.contains("\"result\""), "initialize: {reply}");
    assert!(reply.contains("tabwarden"), "initialize: {reply}");

    let profile = chromium_profile_under(pid)
        .unwrap_or_else(|| panic!("no Chromium with --user-data-dir under pid {pid}"));

    let killed = Command::new("kill")
        .arg("-TERM")
        .arg(pid.to_string())
        .status()
        .unwrap_or_else(|e| panic!("kill: {e}"));
    assert!(killed.success());

    let start = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap_or_else(|e| panic!("{e}")) {
            break s;
        }
        if start.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            panic!("tabwarden mcp still running 5 s after SIGTERM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(stdin);
    assert_eq!(status.code(), Some(143), "exit status {status:?}");

    // Chromium's helpers may take a moment to go after the browser process.
    let start = Instant::now();
    loop {
        let left: Vec<_> = processes()
            .into_iter()
            .filter(|p| p.2.contains(&profile))
            .collect();
        if left.is_empty() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "Chromium left running after SIGTERM: {left:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        !processes().iter().any(|p| p.1 == pid),
        "a process still has tabwarden ({pid}) as parent"
    );
    assert!(
        !std::path::Path::new(&profile).exists(),
        "the Chromium profile {profile} was not removed"
    );
}

/// Exit 2 with a message on stderr; `--cdp-url` points at nothing, so a
/// check made after connecting would exit 3 instead.
fn usage_error(args: &[&str], needle: &str) {
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--cdp-url", "ws://127.0.0.1:1/devtools/browser/x"]);
    let out = bin().args(&all).output().unwrap_or_else(|e| panic!("{e}"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {needle:?} not in {err}");
}

#[test]
fn bad_arguments_exit_2_before_a_browser_is_used() {
    usage_error(
        &["eval", "about:blank", "1", "--timeout-ms", "0"],
        "timeout-ms",
    );
    usage_error(
        &["eval", "about:blank", "1", "--timeout-ms", "120001"],
        "timeout-ms",
    );
    usage_error(
        &["snapshot", "about:blank", "--timeout-ms", "0"],
        "timeout-ms",
    );
    usage_error(
        &["eval", "/nonexistent/page.html", "1"],
        "/nonexistent/page.html",
    );
    usage_error(&["mcp", "--dialog-policy", "bogus"], "auto_dismiss");
    usage_error(
        &["screenshot", "about:blank", "-o", "/nonexistent/dir/x.png"],
        "/nonexistent/dir",
    );
    usage_error(&["eval", "http://[::1", "1"], "invalid IPv6");
    usage_error(&["snapshot", "chrome://version"], "scheme \"chrome\"");
    usage_error(&["snapshot", "http://"], "not a valid URL");
    // Without --cdp-url: still exit 2, and quickly (no Chromium launched).
    for args in [
        &["eval", "/nonexistent/page.html", "1"][..],
        &["snapshot", "http://[::1"][..],
        &["screenshot", "ftp://example.com/", "-o", "/tmp/x.png"][..],
    ] {
        let start = Instant::now();
        let out = bin().args(args).output().unwrap_or_else(|e| panic!("{e}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(!err.contains("cdp_error"), "{args:?}: {err}");
        assert!(start.elapsed() < Duration::from_secs(5), "{args:?}");
    }
}

#[test]
fn a_bad_cdp_url_is_a_usage_error_for_every_command() {
    for args in [
        &["snapshot", "--cdp-url", "notaurl", "X"][..],
        &["eval", "--cdp-url", "ftp://127.0.0.1/", "about:blank", "1"][..],
        &[
            "screenshot",
            "--cdp-url",
            "http://[::1",
            "about:blank",
            "-o",
            "/tmp/x.png",
        ][..],
        &["demo", "--cdp-url", "ws://"][..],
        &["mcp", "--cdp-url", "wss://user:secret@?apiKey=secret"][..],
    ] {
        let start = Instant::now();
        let out = bin().args(args).output().unwrap_or_else(|e| panic!("{e}"));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("--cdp-url"), "{args:?}: {err}");
        assert!(!err.contains("secret"), "{args:?}: {err}");
        assert!(start.elapsed() < Duration::from_secs(5), "{args:?}");
    }
    // TABWARDEN_CDP_URL is checked the same way.
    let out = bin()
        .env("TABWARDEN_CDP_URL", "notaurl")
        .args(["eval", "about:blank", "1"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn dialog_policy_values_are_listed_in_help() {
    let out = bin()
        .args(["mcp", "--help"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    let help = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0));
    for v in ["must_respond", "auto_dismiss", "auto_accept"] {
        assert!(help.contains(v), "{v} not in mcp --help:\n{help}");
    }
}

fn using_profile(profile: &str) -> Vec<(u32, u32, String)> {
    processes()
        .into_iter()
        .filter(|p| p.2.contains(profile))
        .collect()
}

/// A `tabwarden` killed with SIGKILL runs no destructor and no signal
/// handler. Its Chromium dies anyway (the launcher forks Chromium with
/// `PR_SET_PDEATHSIG` from a thread that lives as long as the process), and
/// the next launch removes the profile it left (`launcher::sweep_stale_profiles`).
#[test]
fn sigkill_of_tabwarden_takes_its_chromium_and_the_next_run_removes_the_profile() {
    let mut child = bin()
        .args(["mcp", "--offline"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn tabwarden mcp: {e}"));
    let pid = child.id();
    let mut stdin = child.stdin.take().unwrap_or_else(|| panic!("no stdin"));
    let stdout = child.stdout.take().unwrap_or_else(|| panic!("no stdout"));
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-03-26","capabilities":{{}},"clientInfo":{{"name":"sigkill-test","version":"0"}}}}}}"#
    )
    .unwrap_or_else(|e| panic!("write initialize: {e}"));
    stdin.flush().unwrap_or_else(|e| panic!("{e}"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let reply = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("no initialize reply: {e}"));
    assert!(reply.contains("\"result\""), "initialize: {reply}");
    let profile = chromium_profile_under(pid)
        .unwrap_or_else(|| panic!("no Chromium under tabwarden ({pid})"));

    // The launch ran on a tokio blocking-pool thread, which exits after 10 s
    // idle: Chromium must not die with that thread.
    std::thread::sleep(Duration::from_secs(11));
    assert!(
        !using_profile(&profile).is_empty(),
        "Chromium died while tabwarden was still running"
    );

    child.kill().unwrap_or_else(|e| panic!("SIGKILL: {e}"));
    let _ = child.wait();
    drop(stdin);
    let t0 = Instant::now();
    while !using_profile(&profile).is_empty() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let left = using_profile(&profile);
    assert!(left.is_empty(), "Chromium outlived the SIGKILL: {left:?}");
    println!(
        "Chromium gone {:?} after SIGKILL of tabwarden",
        t0.elapsed()
    );
    assert!(
        std::path::Path::new(&profile).exists(),
        "nothing could remove the profile yet"
    );

    // The next launch sweeps the orphaned profile.
    let out = bin()
        .args(["eval", "about:blank", "1+1", "--offline"])
        .output()
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !std::path::Path::new(&profile).exists(),
        "the next launch did not remove the orphaned profile {profile}"
    );
}
