//! Dropping a `LaunchedChrome` kills Chromium's whole process group and
//! removes its profile, including Chromium's `org.chromium.Chromium.*` dir
//! (created in `TMPDIR`, which the launcher points into the profile).
//!
//! Linux only: it reads process groups from `/proc` (other unix systems have
//! none, and elsewhere the launcher has no process group to check).
#![cfg(target_os = "linux")]

use cdp_transport::{ConnectOptions, Connection, LaunchOptions, LaunchedChrome};
use serde_json::json;
use std::path::Path;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(10);

/// `(pid, state, pgrp)` of every process, from `/proc/*/stat`.
fn processes() -> Vec<(i32, char, i32)> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in dir.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<i32>().ok()) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        let Some(close) = stat.rfind(')') else {
            continue;
        };
        let f: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        if let (Some(state), Some(pgrp)) = (
            f.first().and_then(|s| s.chars().next()),
            f.get(2).and_then(|s| s.parse::<i32>().ok()),
        ) {
            out.push((pid, state, pgrp));
        }
    }
    out
}

/// Live (not zombie) members of process group `pgid`.
fn live_group(pgid: i32) -> Vec<i32> {
    processes()
        .into_iter()
        .filter(|&(_, state, pgrp)| pgrp == pgid && state != 'Z' && state != 'X')
        .map(|(pid, _, _)| pid)
        .collect()
}

fn singleton_dirs(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with("org.chromium.Chromium."))
                .collect()
        })
        .unwrap_or_default()
}

async fn launch_use_and_drop(round: usize) {
    let chrome = LaunchedChrome::launch(LaunchOptions::default().offline(true))
        .await
        .unwrap_or_else(|e| panic!("Chromium is needed for this test: {e}"));
    let pgid = i32::try_from(chrome.pid().expect("pid")).expect("pid fits i32");
    let profile = chrome.profile_dir().to_path_buf();

    let conn = Connection::connect(chrome.ws_url(), ConnectOptions::default())
        .await
        .expect("connect");
    let v = conn
        .browser()
        .call("Target.createTarget", json!({"url": "about:blank"}), T)
        .await
        .expect("createTarget");
    assert!(v["targetId"].is_string(), "round {round}: {v}");

    let group = live_group(pgid);
    assert!(
        group.contains(&pgid),
        "round {round}: chromium {pgid} leads its own process group; group: {group:?}"
    );
    assert!(
        group.len() > 1,
        "round {round}: a page means helper processes in the group: {group:?}"
    );
    assert!(
        !singleton_dirs(&profile.join("tmp")).is_empty(),
        "round {round}: chromium's singleton dir is inside the profile's tmp"
    );

    drop(chrome);
    let start = Instant::now();
    loop {
        let left = live_group(pgid);
        let gone = left.is_empty() && !profile.exists();
        if gone {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "round {round}: 3 s after drop, group {pgid} still has {left:?} \
             (was {group:?}); profile {} exists: {}",
            profile.display(),
            profile.exists()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    conn.close();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_kills_the_process_group_and_removes_the_profile() {
    for round in 0..3 {
        launch_use_and_drop(round).await;
    }
}

/// Profiles outlive a process that dies without dropping its `LaunchedChrome`
/// (SIGKILL, `exit`); the next launch's sweep removes the ones whose owner is
/// gone, and nothing else.
#[test]
fn sweep_removes_only_profiles_of_exited_owners() {
    use cdp_transport::launcher::{sweep_stale_profiles, OWNER_FILE};
    let dir = tempfile::tempdir().expect("temp dir");
    // A pid that has exited: a child we started and reaped.
    let mut child = std::process::Command::new("true")
        .spawn()
        .expect("spawn true");
    let dead = child.id();
    child.wait().expect("wait");
    let mk = |name: &str, owner: Option<String>| {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.join("Default")).expect("mkdir");
        if let Some(o) = owner {
            std::fs::write(p.join(OWNER_FILE), o).expect("write owner");
        }
        p
    };
    let gone = mk("tabwarden-profile-gone", Some(dead.to_string()));
    let garbage = mk("tabwarden-profile-garbage", Some("not a pid".into()));
    let mine = mk(
        "tabwarden-profile-mine",
        Some(std::process::id().to_string()),
    );
    let unmarked = mk("tabwarden-profile-unmarked", None);
    let other = mk("someone-else", Some(dead.to_string()));

    assert_eq!(sweep_stale_profiles(dir.path()), 1);
    assert!(!gone.exists());
    assert!(
        garbage.exists(),
        "an owner file that is not a pid is never taken for a dead owner"
    );
    assert!(mine.exists(), "a live owner's profile stays");
    assert!(
        unmarked.exists(),
        "a LaunchedChrome profile (no owner file) stays"
    );
    assert!(
        other.exists(),
        "only tabwarden-profile-* dirs are considered"
    );
    assert_eq!(sweep_stale_profiles(dir.path()), 0);
    assert_eq!(sweep_stale_profiles(&dir.path().join("missing")), 0);
}
