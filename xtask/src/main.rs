//! `cargo xtask`: project tasks (setup, test, demo, bench, e2e).
//!
//! Every task prints what it runs. `setup` installs Chromium when missing
//! (Debian's `chromium` package through apt-get, as root), so that a fresh
//! Debian machine runs `cargo xtask test` and `cargo xtask demo` with nothing
//! installed by hand.

use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let task = args.first().map(String::as_str).unwrap_or("help");
    let rest = &args[args.len().min(1)..];
    match task {
        "setup" => setup(),
        "test" => {
            setup()?;
            test(rest)
        }
        "demo" => {
            setup()?;
            run(cargo().args(["run", "--quiet", "-p", "tabwarden", "--", "demo"]).args(rest))
        }
        "bench" => {
            setup()?;
            run(cargo().args(["run", "--release", "-p", "tabwarden-bench", "--"]).args(rest))
        }
        "e2e" => e2e(rest),
        "help" | "--help" | "-h" => {
            println!("{HELP}");
            Ok(())
        }
        other => bail!("unknown task {other:?}\n{HELP}"),
    }
}

const HELP: &str = "cargo xtask <task>
  setup                 install Chromium when missing (apt-get install -y chromium, as root)
  test                  setup, then every test: unit, cdp-mock, real-Chromium end-to-end, docs, layering
  demo                  setup, then run `tabwarden demo` on the built-in fixture site
  bench [--quick]       setup, then the benchmark table (release build)
  e2e --backend browserbase
                        the bridge suite against a real Browserbase session; needs
                        BROWSERBASE_API_KEY and outside network (neither exists on CI here)";

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().map(Path::to_path_buf).unwrap_or_default()
}

fn cargo() -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.current_dir(root());
    c
}

fn run(cmd: &mut Command) -> Result<()> {
    eprintln!("xtask: running {:?}", cmd);
    let status = cmd.status().with_context(|| format!("cannot run {cmd:?}"))?;
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
    Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0").unwrap_or(false)
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
    run(Command::new("apt-get").args(["install", "-y", "--no-install-recommends", "chromium"]).env("DEBIAN_FRONTEND", "noninteractive"))?;
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
    run(cargo().args(["test", "--workspace", "--no-fail-fast"]).args(rest).env("RUST_BACKTRACE", "1"))
}

fn e2e(rest: &[String]) -> Result<()> {
    let backend = rest.iter().position(|a| a == "--backend").and_then(|i| rest.get(i + 1)).map(String::as_str);
    match backend {
        Some("browserbase") => {
            if std::env::var_os("BROWSERBASE_API_KEY").is_none() {
                bail!("BROWSERBASE_API_KEY is not set. This run needs a Browserbase account and outside network, which CI here has neither of; the loopback dismissing proxy in the test suite stands in for it (cargo xtask test)");
            }
            bail!("the Browserbase run connects to a hosted session over wss://, which this build does not include; see README 'Hosted browsers'")
        }
        Some("local") | None => {
            setup()?;
            test(&[])
        }
        Some(other) => bail!("unknown backend {other:?}: use local or browserbase"),
    }
}
