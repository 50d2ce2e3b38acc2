//! `cargo xtask`: project tasks (setup, test, demo, bench, e2e, fuzz).
//!
//! `e2e --backend browserbase` runs [`xtask::browserbase::run`] (the library
//! part of this crate, so that a test can run it against a fake API).
//!
//! Every task prints what it runs. `setup` installs Chromium when missing
//! (Debian's `chromium` package through apt-get, as root), so that a fresh
//! Debian machine runs `cargo xtask test` and `cargo xtask demo` with nothing
//! installed by hand.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

fn main() -> ExitCode {
    match run_task() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("Error: {e:?}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the task named by the first argument; `Ok` carries the exit code
/// (`e2e` uses 2 for a usage error and 1 for a failed scenario).
fn run_task() -> Result<ExitCode> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let task = args.first().map(String::as_str).unwrap_or("help");
    let rest = &args[args.len().min(1)..];
    if task == "e2e" {
        return e2e(rest);
    }
    match task {
        "setup" => setup(),
        "test" => {
            setup()?;
            test(rest)
        }
        "demo" => {
            setup()?;
            run(cargo()
                .args(["run", "--quiet", "-p", "tabwarden", "--", "demo"])
                .args(rest))
        }
        "bench" => {
            setup()?;
            // `--dev` reuses the test build (CI's quick run, so the bench never
            // rots); figures worth quoting come from the default release build.
            let dev = rest.iter().any(|a| a == "--dev");
            let passed: Vec<&String> = rest.iter().filter(|a| *a != "--dev").collect();
            let profile: &[&str] = if dev { &[] } else { &["--release"] };
            // The MCP row drives the `tabwarden` binary of the same profile.
            run(cargo()
                .args(["build", "-q", "-p", "tabwarden"])
                .args(profile))?;
            run(cargo()
                .args(["run", "-q"])
                .args(profile)
                .args(["-p", "tabwarden-bench", "--"])
                .args(passed))
        }
        "fuzz" => fuzz(rest),
        "help" | "--help" | "-h" => {
            println!("{HELP}");
            Ok(())
        }
        other => bail!("unknown task {other:?}\n{HELP}"),
    }
    .map(|()| ExitCode::SUCCESS)
}

const HELP: &str = "cargo xtask <task>
  setup                 install Chromium when missing (apt-get install -y chromium, as root)
  test                  setup, then every test: unit, cdp-mock, real-Chromium end-to-end, docs, layering
  demo                  setup, then run `tabwarden demo` on the built-in fixture site
  bench [--quick] [--dev]
                        setup, then the benchmark table (release build; --dev: debug build)
  e2e [--backend local]  setup, then `test` (`--backend=X` works too; a missing value
                        or any other argument is a usage error, exit 2)
  e2e --backend browserbase
                        the dialog-bridge scenarios against real Browserbase sessions:
                        creates a session per bridge mode (POST /v1/sessions), connects
                        the tools to its connectUrl, runs on data: pages: bridge off, a
                        prompt closed by the provider (page gets null, recorded remote);
                        bridge on, alert/prompt/confirm/confirm answered 4/4 by the agent
                        in the main frame, in a data: iframe and in an about:blank popup;
                        releases each session (REQUEST_RELEASE) and prints a table.
                        Env: BROWSERBASE_API_KEY (required), BROWSERBASE_PROJECT_ID,
                        BROWSERBASE_API_URL (default https://api.browserbase.com); needs
                        outside network. Exit 0 all passed, 1 a failure, 2 no API key.
                        Tested offline against a loopback fake API
                        (xtask/tests/browserbase_fake.rs)
  fuzz --minutes N [--target NAME]
                        build the cargo-fuzz targets in fuzz/ and run each (or NAME) for
                        N minutes, nice'd, one at a time; not part of `test`. Needs
                        cargo-fuzz (cargo install cargo-fuzz --locked); on stable Rust
                        it sets RUSTC_BOOTSTRAP=1 for the nightly-only flags";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("xtask: running {:?}", cmd);
    let status = cmd
        .status()
        .with_context(|| format!("cannot run {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} failed with {status}");
    }
    Ok(())
}

/// The same search order as `cdp_transport::launcher::find_chrome`.
fn find_chrome() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("TABWARDEN_CHROME").map(PathBuf::from) {
        if p.is_file() {
            return Some(p);
        }
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    ["chromium", "chromium-browser", "google-chrome"]
        .iter()
        .flat_map(|n| std::env::split_paths(&path).map(move |d| d.join(n)))
        .find(|p| p.is_file())
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

fn setup() -> Result<()> {
    if let Some(p) = find_chrome() {
        eprintln!("xtask: Chromium found at {}", p.display());
        return Ok(());
    }
    let cmd = "apt-get update && apt-get install -y chromium";
    if !Path::new("/usr/bin/apt-get").exists() {
        bail!("Chromium is missing and this is not a Debian-like system; install Chromium and set TABWARDEN_CHROME to its path");
    }
    if !is_root() {
        bail!("Chromium is missing; run as root: {cmd}  (or set TABWARDEN_CHROME)");
    }
    eprintln!("xtask: Chromium is missing; running: {cmd}");
    run(Command::new("apt-get").arg("update"))?;
    run(Command::new("apt-get")
        .args(["install", "-y", "--no-install-recommends", "chromium"])
        .env("DEBIAN_FRONTEND", "noninteractive"))?;
    match find_chrome() {
        Some(p) => {
            eprintln!("xtask: Chromium installed at {}", p.display());
            Ok(())
        }
        None => bail!("apt-get finished but no chromium binary is on PATH"),
    }
}

fn test(rest: &[String]) -> Result<()> {
    // Build every test binary once, then run them; the real-Chromium suites
    // share one Chromium per test binary.
    run(cargo()
        .args(["test", "--workspace", "--no-fail-fast"])
        .args(rest)
        .env("RUST_BACKTRACE", "1"))
}

/// Where `cargo xtask e2e` runs its scenarios.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Backend {
    /// `setup`, then `test` (the local real-Chromium suite).
    Local,
    /// [`xtask::browserbase::run`] against the Browserbase API.
    Browserbase,
}

/// What `e2e`'s arguments ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum E2e {
    Run(Backend),
    Help,
}

/// Parses `e2e`'s arguments: nothing (local), `--backend X` or
/// `--backend=X` with X `local` or `browserbase` (at most once), or
/// `-h`/`--help`. `Err` is the usage error to print (exit 2): a missing or
/// empty value, an unknown backend, a repeated `--backend`, any other
/// argument.
fn parse_e2e_args(args: &[String]) -> std::result::Result<E2e, String> {
    let mut backend: Option<Backend> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let value = if a == "--backend" {
            match it.next() {
                Some(v) if !v.starts_with('-') => v.as_str(),
                _ => return Err("--backend needs a value: local or browserbase".into()),
            }
        } else if let Some(v) = a.strip_prefix("--backend=") {
            v
        } else if a == "-h" || a == "--help" {
            return Ok(E2e::Help);
        } else {
            return Err(format!("unknown argument {a:?} for e2e"));
        };
        let b = match value {
            "local" => Backend::Local,
            "browserbase" => Backend::Browserbase,
            "" => return Err("--backend needs a value: local or browserbase".into()),
            other => {
                return Err(format!(
                    "unknown backend {other:?}: use local or browserbase"
                ))
            }
        };
        if backend.replace(b).is_some() {
            return Err("--backend given more than once".into());
        }
    }
    Ok(E2e::Run(backend.unwrap_or(Backend::Local)))
}

/// `e2e [--backend local|browserbase]` (also `--backend=X`). For
/// `browserbase` see [`xtask::browserbase`]: exit 2 when
/// `BROWSERBASE_API_KEY` is missing (with what is needed), 1 when any
/// scenario failed or a session was not released, 0 when all passed. A bad
/// argument ([`parse_e2e_args`]) is exit 2 with the help text, before
/// anything runs.
fn e2e(rest: &[String]) -> Result<ExitCode> {
    let backend = match parse_e2e_args(rest) {
        Ok(E2e::Run(b)) => b,
        Ok(E2e::Help) => {
            println!("{HELP}");
            return Ok(ExitCode::SUCCESS);
        }
        Err(why) => {
            eprintln!("xtask: {why}\n{HELP}");
            return Ok(ExitCode::from(2));
        }
    };
    match backend {
        Backend::Browserbase => {
            let Some(opts) = xtask::browserbase::Options::from_env() else {
                eprintln!(
                    "xtask: BROWSERBASE_API_KEY is not set.\n{}",
                    xtask::browserbase::USAGE
                );
                return Ok(ExitCode::from(2));
            };
            eprintln!(
                "xtask: Browserbase e2e against {} (project {})",
                opts.api_url,
                opts.project_id.as_deref().unwrap_or("not set")
            );
            let rt = tokio::runtime::Builder::new_multi_thread()
                .enable_all()
                .build()
                .context("starting the async runtime")?;
            let report = rt.block_on(xtask::browserbase::run(&opts));
            rt.shutdown_timeout(std::time::Duration::from_secs(2));
            print!("{}", report.table());
            Ok(if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Backend::Local => {
            setup()?;
            test(&[])?;
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// The cargo-fuzz targets in `fuzz/fuzz_targets/`, in run order.
const FUZZ_TARGETS: [&str; 3] = ["transport_envelope", "bridge_paused", "tool_args"];

/// `cargo xtask fuzz --minutes N [--target NAME]`: builds the targets once and
/// runs each for N minutes under `nice -n 19`, one process at a time. New
/// corpus entries go to `fuzz/corpus/<target>` (ignored by git); the committed
/// `fuzz/seeds/<target>` and `fuzz/regressions/<target>` are read as extra
/// corpus; a crash is saved under `fuzz/artifacts/<target>` and stops the run.
/// Sanitizer off (`-s none`): the workspace denies `unsafe`, so what we look
/// for is panics, broken invariants, hangs (`-timeout`) and memory blow-ups
/// (`-rss_limit_mb`); debug assertions and overflow checks are on (`-a`).
fn fuzz(rest: &[String]) -> Result<()> {
    let value = |flag: &str| {
        rest.iter()
            .position(|a| a == flag)
            .and_then(|i| rest.get(i + 1))
    };
    let minutes: f64 = match value("--minutes") {
        Some(m) => m
            .parse()
            .ok()
            .filter(|m: &f64| *m > 0.0)
            .with_context(|| format!("--minutes {m:?} is not a positive number"))?,
        None => bail!("usage: cargo xtask fuzz --minutes N [--target NAME]"),
    };
    let targets: Vec<&str> = match value("--target") {
        Some(t) if FUZZ_TARGETS.contains(&t.as_str()) => vec![t.as_str()],
        Some(t) => bail!(
            "unknown fuzz target {t:?}: use one of {}",
            FUZZ_TARGETS.join(", ")
        ),
        None => FUZZ_TARGETS.to_vec(),
    };
    let dir = root().join("fuzz");
    let cargo_fuzz = || {
        let mut c = Command::new("nice");
        c.args(["-n", "19"])
            .arg(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
            .arg("fuzz")
            .current_dir(&dir)
            // cargo-fuzz passes -Z flags; this lets the stable toolchain take them.
            .env("RUSTC_BOOTSTRAP", "1");
        c
    };
    if !cargo_fuzz()
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
    {
        bail!("cargo-fuzz is missing: run `cargo install cargo-fuzz --locked`");
    }
    // Same flags for build and run, so `run` does not rebuild.
    let flags = ["-s", "none", "-a", "--features", "tool-surface"];
    run(cargo_fuzz().arg("build").args(flags))?;
    let secs = ((minutes * 60.0).round() as u64).max(1);
    for t in targets {
        let corpus = dir.join("corpus").join(t);
        std::fs::create_dir_all(&corpus)
            .with_context(|| format!("cannot create {}", corpus.display()))?;
        let mut c = cargo_fuzz();
        c.args(["run", t]).args(flags).arg(&corpus);
        for extra in ["seeds", "regressions"] {
            let d = dir.join(extra).join(t);
            if d.is_dir() {
                c.arg(d);
            }
        }
        c.arg("--").arg(format!("-max_total_time={secs}")).args([
            "-jobs=1",
            "-workers=1",
            "-timeout=10",
            "-rss_limit_mb=2048",
            "-print_final_stats=1",
        ]);
        let dict = dir.join("dicts").join(format!("{t}.dict"));
        if dict.is_file() {
            c.arg(format!("-dict={}", dict.display()));
        }
        // With -jobs libFuzzer writes the worker's output to fuzz-0.log in the
        // working directory; show its end (the final stats) either way.
        let log = dir.join("fuzz-0.log");
        let _ = std::fs::remove_file(&log);
        let r = run(&mut c);
        if let Ok(text) = std::fs::read_to_string(&log) {
            let lines: Vec<&str> = text.lines().collect();
            eprintln!("xtask: {t}: last lines of {}:", log.display());
            for l in &lines[lines.len().saturating_sub(15)..] {
                eprintln!("  {l}");
            }
            let _ = std::fs::rename(&log, dir.join(format!("{t}.log")));
        }
        r.with_context(|| {
            format!("fuzz target {t} failed: see fuzz/artifacts/{t}/ and fuzz/{t}.log")
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> std::result::Result<E2e, String> {
        let v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        parse_e2e_args(&v)
    }

    #[test]
    fn both_spellings_of_backend_parse() {
        assert_eq!(parse(&[]), Ok(E2e::Run(Backend::Local)));
        assert_eq!(parse(&["--backend", "local"]), Ok(E2e::Run(Backend::Local)));
        assert_eq!(parse(&["--backend=local"]), Ok(E2e::Run(Backend::Local)));
        assert_eq!(
            parse(&["--backend", "browserbase"]),
            Ok(E2e::Run(Backend::Browserbase))
        );
        assert_eq!(
            parse(&["--backend=browserbase"]),
            Ok(E2e::Run(Backend::Browserbase))
        );
        assert_eq!(parse(&["--help"]), Ok(E2e::Help));
        assert_eq!(parse(&["-h"]), Ok(E2e::Help));
    }

    #[test]
    fn a_missing_value_or_another_argument_is_a_usage_error() {
        for (args, needle) in [
            (&["--backend"][..], "needs a value"),
            (&["--backend="][..], "needs a value"),
            (&["--backend", "--help"][..], "needs a value"),
            (&["--backend=nope"][..], "unknown backend \"nope\""),
            (&["--backend", "nope"][..], "unknown backend \"nope\""),
            (
                &["--backend", "local", "--backend=browserbase"][..],
                "more than once",
            ),
            (
                &["--bakend=browserbase"][..],
                "unknown argument \"--bakend=browserbase\"",
            ),
            (&["browserbase"][..], "unknown argument \"browserbase\""),
            (
                &["--backend", "local", "extra"][..],
                "unknown argument \"extra\"",
            ),
        ] {
            match parse(args) {
                Err(e) => assert!(e.contains(needle), "{args:?}: {e}"),
                Ok(r) => panic!("{args:?}: parsed as {r:?}"),
            }
        }
    }
}
