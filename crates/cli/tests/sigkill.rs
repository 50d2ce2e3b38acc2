//! A `tabwarden` process killed with SIGKILL runs no destructor and no signal
//! handler. Its Chromium must die anyway (the launcher forks Chromium with
//! `PR_SET_PDEATHSIG` from a thread that lives as long as the process), and
//! the next `tabwarden` launch removes the profile it left behind
//! (`launcher::sweep_stale_profiles`).

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tabwarden"));
    c.env_remove("TABWARDEN_CDP_URL");
    c
}

/// `(pid, ppid, cmdline)` of every live (not zombie) process in `/proc`.
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
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
            continue;
        };
        let mut f = rest.split_whitespace();
        if matches!(f.next(), Some("Z" | "X")) {
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

/// The `--user-data-dir` of the Chromium whose parent is `parent`.
fn child_profile(parent: u32) -> Option<String> {
    processes()
        .into_iter()
        .filter(|p| p.1 == parent)
        .find_map(|p| {
            p.2.split_whitespace()
                .find_map(|a| a.strip_prefix("--user-data-dir="))
                .map(String::from)
        })
}

fn using_profile(profile: &str) -> Vec<(u32, u32, String)> {
    processes()
        .into_iter()
        .filter(|p| p.2.contains(profile))
        .collect()
}

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
    let profile =
        child_profile(pid).unwrap_or_else(|| panic!("no Chromium child of tabwarden ({pid})"));

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
