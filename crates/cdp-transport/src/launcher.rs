//! Finds and starts a headless Chromium with a fresh profile on a free port.
//!
//! The OS-specific parts (process groups, `/proc`, `PR_SET_PDEATHSIG`) are in
//! `sys`: Linux has all of them, other unix systems process groups only, and
//! elsewhere drop kills the child process itself.

mod sys;

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Environment variable naming the Chromium binary to use.
pub const CHROME_ENV: &str = "TABWARDEN_CHROME";

/// Binary names tried on `PATH`, in order, after [`CHROME_ENV`].
pub const CHROME_NAMES: [&str; 3] = ["chromium", "chromium-browser", "google-chrome"];

/// Flags every launch gets. `--no-sandbox` is added when running as root.
pub const BASE_FLAGS: [&str; 12] = [
    "--headless=new",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--no-default-browser-check",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--mute-audio",
    "--remote-debugging-port=0",
    "--remote-allow-origins=*",
];

/// Flags that keep saved real pages from reaching the network in tests and
/// benchmarks (CHROMIUM-FACTS.md, "Test environment"). Not for real users.
pub const OFFLINE_FLAGS: [&str; 2] = [
    "--proxy-server=http://127.0.0.1:9",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.0.0.1 , EXCLUDE 127.0.0.2",
];

/// Options for [`LaunchedChrome::launch`].
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct LaunchOptions {
    /// Binary to run; default: [`find_chrome`].
    pub executable: Option<PathBuf>,
    /// Extra flags appended after [`BASE_FLAGS`].
    pub extra_args: Vec<String>,
    /// Add [`OFFLINE_FLAGS`]. Default false.
    pub offline: bool,
    /// How long to wait for `DevToolsActivePort`. Default 20 s.
    pub startup_timeout: Option<Duration>,
}

impl LaunchOptions {
    /// Adds [`OFFLINE_FLAGS`].
    pub fn offline(mut self, on: bool) -> Self {
        self.offline = on;
        self
    }
    /// Adds one flag.
    pub fn arg(mut self, a: impl Into<String>) -> Self {
        self.extra_args.push(a.into());
        self
    }
}

/// Finds a Chromium binary: `$TABWARDEN_CHROME`, then `chromium`,
/// `chromium-browser`, `google-chrome` on `PATH`.
///
/// # Errors
/// [`Error::ChromeNotFound`], naming what was tried, `TABWARDEN_CHROME` and `cargo xtask setup`.
pub fn find_chrome() -> Result<PathBuf> {
    let mut tried = Vec::new();
    if let Some(p) = std::env::var_os(CHROME_ENV) {
        let p = PathBuf::from(p);
        if p.is_file() {
            return Ok(p);
        }
        tried.push(format!("{CHROME_ENV}={}", p.display()));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for name in CHROME_NAMES {
        for dir in std::env::split_paths(&path) {
            let cand = dir.join(name);
            if cand.is_file() {
                return Ok(cand);
            }
        }
        tried.push(name.to_string());
    }
    Err(Error::ChromeNotFound {
        tried: tried.join(", "),
    })
}

/// A running Chromium. Dropping it kills the process and removes its profile
/// (also during a panic's unwinding).
///
/// Chromium runs with `TMPDIR` set to `<profile>/tmp`, so that removing the
/// profile also removes Chromium's `org.chromium.Chromium.*` singleton dir.
/// On unix it runs in its own process group (its pid is the group id), so
/// that killing the group stops every helper process; elsewhere drop kills
/// the main process only.
///
/// When the process dies without dropping it (SIGKILL, `exit`), the next
/// launch removes the profile ([`sweep_stale_profiles`]); on Linux Chromium
/// dies too (`PR_SET_PDEATHSIG` from a keeper thread that lives as long as
/// the process), on other systems it is left running.
#[derive(Debug)]
pub struct LaunchedChrome {
    child: Option<Child>,
    pgid: Option<i32>,
    profile: Option<tempfile::TempDir>,
    ws_url: String,
    port: u16,
}

impl LaunchedChrome {
    /// Starts Chromium and waits for its DevTools endpoint.
    ///
    /// Blocking parts (spawn, polling the port file) run on a blocking thread.
    ///
    /// # Errors
    /// [`Error::ChromeNotFound`]; [`Error::Launch`] when the process exits or no
    /// `DevToolsActivePort` appears in time (the message has the stderr tail).
    ///
    /// # Cancel safety
    /// Cancel safe: a dropped future kills the process it started.
    pub async fn launch(options: LaunchOptions) -> Result<Self> {
        tokio::task::spawn_blocking(move || Self::launch_blocking(options))
            .await
            .map_err(|e| Error::Launch {
                reason: format!("launcher thread failed: {e}"),
            })?
    }

    /// Blocking form of [`LaunchedChrome::launch`].
    ///
    /// # Errors
    /// As [`LaunchedChrome::launch`].
    pub fn launch_blocking(options: LaunchOptions) -> Result<Self> {
        let exe = match options.executable.clone() {
            Some(p) => p,
            None => find_chrome()?,
        };
        let profile = tempfile::Builder::new()
            .prefix("tabwarden-profile-")
            .tempdir()
            .map_err(|e| Error::Launch {
                reason: format!("cannot create a profile dir: {e}"),
            })?;
        let stderr_path = profile.path().join("chrome-stderr.log");
        let stderr = std::fs::File::create(&stderr_path).map_err(|e| Error::Launch {
            reason: format!("cannot create a log file: {e}"),
        })?;
        let tmp_dir = profile.path().join("tmp");
        std::fs::create_dir(&tmp_dir).map_err(|e| Error::Launch {
            reason: format!("cannot create a temp dir in the profile: {e}"),
        })?;
        let mut cmd = Command::new(&exe);
        // Its own group, so that drop can kill every helper process too.
        sys::own_process_group(&mut cmd);
        cmd.env("TMPDIR", &tmp_dir);
        cmd.args(BASE_FLAGS);
        if sys::is_root() {
            cmd.arg("--no-sandbox");
        }
        if options.offline {
            cmd.args(OFFLINE_FLAGS);
        }
        cmd.arg(format!("--user-data-dir={}", profile.path().display()));
        cmd.args(&options.extra_args);
        cmd.arg("about:blank");
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(stderr));
        sweep_stale_profiles(profile.path().parent().unwrap_or(Path::new("/tmp")));
        // Marks the profile so that, if this process dies without dropping
        // `self` (SIGKILL, `exit`), a later launch removes it.
        write_owner_file(profile.path());
        let child = sys::spawn(cmd).map_err(|e| Error::Launch {
            reason: format!("cannot start {}: {e}", exe.display()),
        })?;
        let pgid = sys::group_of(&child);
        let mut me = LaunchedChrome {
            child: Some(child),
            pgid,
            profile: Some(profile),
            ws_url: String::new(),
            port: 0,
        };
        let timeout = options.startup_timeout.unwrap_or(Duration::from_secs(20));
        let port_file = me.profile_dir().join("DevToolsActivePort");
        let start = Instant::now();
        loop {
            if let Ok(text) = std::fs::read_to_string(&port_file) {
                let mut lines = text.lines();
                if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                    if let Ok(port) = port.trim().parse::<u16>() {
                        me.port = port;
                        me.ws_url = format!("ws://127.0.0.1:{port}{}", path.trim());
                        tracing::debug!(port, exe = %exe.display(), "chromium started");
                        return Ok(me);
                    }
                }
            }
            if let Some(child) = me.child.as_mut() {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(Error::Launch {
                        reason: format!(
                            "{} exited with {status} before opening DevTools: {}",
                            exe.display(),
                            tail(&stderr_path)
                        ),
                    });
                }
            }
            if start.elapsed() > timeout {
                return Err(Error::Launch {
                    reason: format!(
                        "no DevToolsActivePort after {timeout:?}: {}",
                        tail(&stderr_path)
                    ),
                });
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The browser's WebSocket URL, `ws://127.0.0.1:PORT/devtools/browser/…`.
    pub fn ws_url(&self) -> &str {
        &self.ws_url
    }
    /// The DevTools HTTP port.
    pub fn port(&self) -> u16 {
        self.port
    }
    /// The process id, when still running.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(|c| c.id())
    }
    /// The temporary profile directory.
    pub fn profile_dir(&self) -> &Path {
        self.profile
            .as_ref()
            .map(|p| p.path())
            .unwrap_or(Path::new("/nonexistent"))
    }
    /// Kills the process and its whole process group now (SIGKILL), waits for
    /// the main process, and gives the rest of the group up to
    /// [`GROUP_EXIT_WAIT`] to go; idempotent. Without process groups (not
    /// unix), kills and waits for the main process only.
    pub fn kill(&mut self) {
        let pgid = self.pgid.take();
        if let Some(pgid) = pgid {
            // While the main process is not yet reaped its pid (= the group id)
            // cannot be reused, so this signal reaches only our group.
            sys::kill_group(pgid);
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        if let Some(pgid) = pgid {
            let start = Instant::now();
            while sys::group_alive(pgid) && start.elapsed() < GROUP_EXIT_WAIT {
                // A straggler that joined after the first signal.
                sys::kill_group(pgid);
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// How long [`LaunchedChrome::kill`] waits for the process group to go.
pub const GROUP_EXIT_WAIT: Duration = Duration::from_secs(2);

/// How often, at most, drop tries to remove the profile directory.
const REMOVE_ATTEMPTS: u32 = 5;

impl Drop for LaunchedChrome {
    fn drop(&mut self) {
        self.kill();
        if let Some(p) = self.profile.take() {
            let path = p.path().to_path_buf();
            if p.close().is_ok() {
                return;
            }
            for attempt in 1..=REMOVE_ATTEMPTS {
                match std::fs::remove_dir_all(&path) {
                    Ok(()) => return,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
                    Err(e) if attempt == REMOVE_ATTEMPTS => {
                        tracing::warn!(
                            profile = %path.display(),
                            error = %e,
                            "cannot remove the chromium profile"
                        );
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(50 * u64::from(attempt))),
                }
            }
        }
    }
}

fn tail(path: &Path) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().rev().take(5).collect();
    if lines.is_empty() {
        "no stderr output".into()
    } else {
        lines.into_iter().rev().collect::<Vec<_>>().join(" | ")
    }
}

struct Shared {
    ws_url: String,
    pid: Option<u32>,
}

static SHARED: std::sync::OnceLock<std::result::Result<Shared, String>> =
    std::sync::OnceLock::new();

/// One Chromium per process, started on first use with [`OFFLINE_FLAGS`] and
/// never dropped: on Linux it is killed when the process exits
/// (`PR_SET_PDEATHSIG`, as every launch) and its profile removed by a later
/// launch. Returns its WebSocket URL.
///
/// Meant for test suites and benchmarks, where every test connects its own
/// [`crate::Connection`] (a connection belongs to the tokio runtime that made it).
///
/// # Errors
/// The launch error, as text, on every call after a failed launch.
pub fn shared_chrome() -> std::result::Result<String, String> {
    let r = SHARED.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("tabwarden-shared-chrome".into())
            .spawn(move || {
                let o = LaunchOptions::default().offline(true);
                match LaunchedChrome::launch_blocking(o) {
                    Ok(c) => {
                        let _ = tx.send(Ok(Shared {
                            ws_url: c.ws_url().to_string(),
                            pid: c.pid(),
                        }));
                        // Keep the process (and its profile) for the life of the program.
                        loop {
                            std::thread::park();
                        }
                    }
                    Err(e) => {
                        let _ = tx.send(Err(e.to_string()));
                    }
                }
            });
        match spawned {
            Ok(_) => rx
                .recv()
                .unwrap_or_else(|_| Err("shared chrome thread ended".into())),
            Err(e) => Err(format!("cannot start the shared chrome thread: {e}")),
        }
    });
    match r {
        Ok(s) => Ok(s.ws_url.clone()),
        Err(e) => Err(e.clone()),
    }
}

/// Writes [`OWNER_FILE`] (this process's pid) into `profile` by rename, so a
/// concurrent [`sweep_stale_profiles`] never reads it half written.
fn write_owner_file(profile: &Path) {
    let tmp = profile.join(format!("{OWNER_FILE}.tmp"));
    if std::fs::write(&tmp, std::process::id().to_string()).is_ok() {
        let _ = std::fs::rename(&tmp, profile.join(OWNER_FILE));
    }
}

/// File in every launched profile naming the pid of the process that launched it.
pub const OWNER_FILE: &str = "tabwarden-owner";

/// Removes the `tabwarden-profile-*` directories under `dir` whose launching
/// process has exited without removing them: killed with SIGKILL, or ended
/// with `exit` (a test binary's [`shared_chrome`]). On Linux their Chromium is
/// already gone (`PR_SET_PDEATHSIG`, see [`LaunchedChrome`]). Only directories
/// holding [`OWNER_FILE`] whose pid is not running are removed (Linux: no
/// `/proc` entry; other unix: `kill(pid, 0)` finds none; elsewhere an owner is
/// never taken for exited, so nothing is removed); profiles of running
/// processes are left alone. Called by every launch; returns how many were
/// removed. Never fails: a directory that cannot be read or removed is
/// skipped.
///
/// Caveat: processes in another pid namespace sharing the same temp dir look
/// exited from here; give such setups their own `TMPDIR`.
pub fn sweep_stale_profiles(dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        if !e
            .file_name()
            .to_string_lossy()
            .starts_with("tabwarden-profile-")
        {
            continue;
        }
        let path = e.path();
        let Ok(owner) = std::fs::read_to_string(path.join(OWNER_FILE)) else {
            continue;
        };
        // Unreadable content is never taken for a dead owner (the file is
        // written by rename, so a live owner's is always whole).
        let Ok(pid) = owner.trim().parse::<u32>() else {
            continue;
        };
        let alive = sys::process_exists(pid);
        if !alive && std::fs::remove_dir_all(&path).is_ok() {
            removed += 1;
        }
    }
    if removed > 0 {
        tracing::debug!(removed, dir = %dir.display(), "removed profiles left by exited processes");
    }
    removed
}

/// The process id of the [`shared_chrome`] instance, once started.
pub fn shared_chrome_pid() -> Option<u32> {
    match SHARED.get() {
        Some(Ok(s)) => s.pid,
        _ => None,
    }
}
