//! What the launcher asks of the operating system, one implementation per
//! platform behind the same functions:
//!
//! * Linux: Chromium in its own process group, killed as a group; the group
//!   and owner probes read `/proc`; every launch is forked from a keeper
//!   thread with `PR_SET_PDEATHSIG`, so Chromium dies with this process.
//! * Other unix (macOS, the BSDs): the same process group and group kill;
//!   the probes use `kill(pid, 0)`; there is no death signal, so a process
//!   that dies without dropping its `LaunchedChrome` leaves Chromium running.
//! * Elsewhere (Windows): no process group; drop kills the child process
//!   only, and [`process_exists`] answers "yes" (never sweep a profile whose
//!   owner cannot be checked).

use std::io;
use std::process::{Child, Command};

pub(super) use imp::{group_alive, is_root, process_exists, spawn};

/// The process group to kill on drop: the child's pid, as it leads its own
/// group ([`own_process_group`]); `None` where there are no process groups.
pub(super) fn group_of(child: &Child) -> Option<i32> {
    if cfg!(unix) {
        i32::try_from(child.id()).ok()
    } else {
        None
    }
}

/// Makes `cmd` start a process group of its own, so that drop can kill every
/// helper process too.
#[cfg(unix)]
pub(super) fn own_process_group(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    cmd.process_group(0);
}

/// Makes `cmd` start a process group of its own (no-op: no process groups here).
#[cfg(not(unix))]
pub(super) fn own_process_group(_cmd: &mut Command) {}

/// Sends SIGKILL to every process of group `pgid`.
#[cfg(unix)]
#[allow(unsafe_code)]
pub(super) fn kill_group(pgid: i32) {
    if pgid <= 1 {
        return; // never kill(-1) or kill(0)
    }
    // SAFETY: kill(2) takes plain integers and touches no memory of ours;
    // a negative pid addresses the process group `pgid`, which is the group
    // Chromium was started in (`process_group(0)`). Errors (ESRCH) are ignored.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}

/// Kills process group `pgid` (no-op: [`group_of`] is always `None` here).
#[cfg(not(unix))]
pub(super) fn kill_group(_pgid: i32) {}

#[cfg(target_os = "linux")]
mod imp {
    use super::{io, Child, Command};

    /// Whether a process of group `pgid` is still running. Zombies do not count:
    /// they hold no files, and a container's pid 1 may never reap them.
    pub(in crate::launcher) fn group_alive(pgid: i32) -> bool {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return false;
        };
        dir.flatten().any(|e| {
            let is_pid = e
                .file_name()
                .to_str()
                .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
            is_pid
                && std::fs::read_to_string(e.path().join("stat"))
                    .ok()
                    .and_then(|s| parse_stat(&s))
                    .is_some_and(|(state, pgrp)| pgrp == pgid && state != 'Z' && state != 'X')
        })
    }

    /// `(state, pgrp)` from a `/proc/<pid>/stat` line (fields 3 and 5; the command
    /// name in field 2 may contain spaces and parentheses).
    fn parse_stat(s: &str) -> Option<(char, i32)> {
        let rest = &s[s.rfind(')')? + 1..];
        let mut f = rest.split_whitespace();
        let state = f.next()?.chars().next()?;
        let _ppid = f.next()?;
        let pgrp = f.next()?.parse().ok()?;
        Some((state, pgrp))
    }

    /// Whether this process runs as root (`Uid:` in `/proc/self/status`).
    pub(in crate::launcher) fn is_root() -> bool {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find(|l| l.starts_with("Uid:"))
                    .map(|l| l.split_whitespace().nth(1) == Some("0"))
            })
            .unwrap_or(false)
    }

    /// Whether process `pid` exists (has a `/proc` entry).
    pub(in crate::launcher) fn process_exists(pid: u32) -> bool {
        std::path::Path::new("/proc").join(pid.to_string()).exists()
    }

    type SpawnRequest = (Command, std::sync::mpsc::Sender<io::Result<Child>>);

    /// Spawns `cmd` with `PR_SET_PDEATHSIG = SIGKILL` from one thread that lives
    /// as long as the process. Linux sends the signal when the *thread* that
    /// forked the child exits, so forking from a short-lived blocking-pool thread
    /// would kill Chromium at a random later moment; forking from this keeper
    /// thread ties Chromium's life to the process's, however the process ends
    /// (SIGKILL included).
    pub(in crate::launcher) fn spawn(mut cmd: Command) -> io::Result<Child> {
        static KEEPER: std::sync::OnceLock<
            io::Result<std::sync::Mutex<std::sync::mpsc::Sender<SpawnRequest>>>,
        > = std::sync::OnceLock::new();
        let keeper = KEEPER.get_or_init(|| {
            let (tx, rx) = std::sync::mpsc::channel::<SpawnRequest>();
            std::thread::Builder::new()
                .name("tabwarden-chromium-keeper".into())
                .spawn(move || {
                    // `tx` lives in a static: `recv` never fails, and the thread
                    // (the parent of every Chromium) never exits.
                    while let Ok((mut cmd, reply)) = rx.recv() {
                        set_pdeathsig(&mut cmd);
                        let _ = reply.send(cmd.spawn());
                    }
                })
                .map(|_| std::sync::Mutex::new(tx))
        });
        let tx = match keeper {
            Ok(tx) => tx,
            Err(e) => {
                // No keeper thread: spawn here, without the death signal.
                tracing::warn!(error = %e, "cannot start the launcher thread; Chromium will not die with this process");
                return cmd.spawn();
            }
        };
        let (reply_tx, reply_rx) = std::sync::mpsc::channel();
        let sent = tx
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .send((cmd, reply_tx));
        if let Err(std::sync::mpsc::SendError((mut cmd, _))) = sent {
            return cmd.spawn();
        }
        reply_rx
            .recv()
            .unwrap_or_else(|_| Err(io::Error::other("the launcher thread ended")))
    }

    #[allow(unsafe_code)]
    fn set_pdeathsig(cmd: &mut Command) {
        use std::os::unix::process::CommandExt;
        // SAFETY: the closure runs in the forked child before exec and calls only
        // prctl(2), which is async-signal-safe; it touches no allocator or lock.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
                Ok(())
            });
        }
    }
}

#[cfg(all(unix, not(target_os = "linux")))]
mod imp {
    use super::{io, Child, Command};

    /// `kill(pid, 0)`: whether `pid` (negative: a process group) names a
    /// process we could signal, or one that exists but is not ours (EPERM).
    #[allow(unsafe_code)]
    fn probe(pid: i32) -> bool {
        // SAFETY: kill(2) with signal 0 sends nothing; it takes plain
        // integers and touches no memory of ours.
        let r = unsafe { libc::kill(pid, 0) };
        r == 0 || io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }

    /// Whether a process of group `pgid` is still there. Zombies count (no
    /// `/proc` to tell them apart); [`super::kill_group`]'s wait is bounded.
    pub(in crate::launcher) fn group_alive(pgid: i32) -> bool {
        pgid > 1 && probe(-pgid)
    }

    /// Whether this process runs as root (effective uid 0).
    #[allow(unsafe_code)]
    pub(in crate::launcher) fn is_root() -> bool {
        // SAFETY: geteuid(2) takes no arguments, always succeeds and touches
        // no memory of ours.
        unsafe { libc::geteuid() == 0 }
    }

    /// Whether process `pid` exists. A pid that is not a valid `pid_t`
    /// counts as existing (its profile is never swept).
    pub(in crate::launcher) fn process_exists(pid: u32) -> bool {
        i32::try_from(pid).map_or(true, probe)
    }

    /// Spawns `cmd` (no death signal on this platform).
    pub(in crate::launcher) fn spawn(mut cmd: Command) -> io::Result<Child> {
        cmd.spawn()
    }
}

#[cfg(not(unix))]
mod imp {
    use super::{io, Child, Command};

    /// No process groups here: nothing to wait for.
    pub(in crate::launcher) fn group_alive(_pgid: i32) -> bool {
        false
    }

    /// Not determined on this platform: `--no-sandbox` is never added.
    pub(in crate::launcher) fn is_root() -> bool {
        false
    }

    /// Cannot be checked here: every owner counts as running, so no profile
    /// is swept.
    pub(in crate::launcher) fn process_exists(_pid: u32) -> bool {
        true
    }

    /// Spawns `cmd`.
    pub(in crate::launcher) fn spawn(mut cmd: Command) -> io::Result<Child> {
        cmd.spawn()
    }
}
