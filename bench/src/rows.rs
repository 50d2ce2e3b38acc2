//! The table's rows beyond the evaluate round trip.

use crate::table::{stats, Row, Table};
use crate::Mode;
use anyhow::{Context, Result};
use cdp_transport::{Budget, Connection, TargetId};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(20);

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

fn row(
    group: &str,
    what: &str,
    median: String,
    p95: String,
    ratio: String,
    target: &str,
    ok: Option<bool>,
) -> Row {
    Row {
        group: group.into(),
        what: what.into(),
        median,
        p95,
        ratio,
        target: target.into(),
        ok,
    }
}

/// VmRSS of this process, KiB.
fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok()))
        })
        .unwrap_or(0)
}

async fn new_target(conn: &Connection) -> Result<TargetId> {
    let t = conn
        .browser()
        .call("Target.createTarget", json!({"url": "about:blank"}), T)
        .await?;
    Ok(TargetId::new(t["targetId"].as_str().unwrap_or_default()))
}

/// Dialog latency: CDP event arrival → supervisor view; `alert()` → view.
pub async fn dialog_latency(ws: &str, mode: Mode, table: &mut Table) -> Result<()> {
    let conn = Connection::connect(ws, Default::default()).await?;
    let sup =
        supervisor::Supervisor::new_tab(conn.clone(), supervisor::SupervisorConfig::default())
            .await?;
    let page = sup.page_session();
    let n = mode.iters(200);
    let (mut to_view, mut e2e) = (Vec::new(), Vec::new());
    for i in 0..n {
        let mut events = page.subscribe();
        let mut changes = sup.changes();
        let t0 = Instant::now();
        let p = page.clone();
        let fire = tokio::spawn(async move {
            p.call(
                "Runtime.evaluate",
                json!({"expression": format!("alert('bench {i}')")}),
                T,
            )
            .await
        });
        let ev = tokio::time::timeout(T, events.next_method("Page.javascriptDialogOpening"))
            .await
            .context("no dialog event")?;
        let t_event = Instant::now();
        drop(ev);
        loop {
            if !sup.snapshot().pending_dialogs.is_empty() {
                break;
            }
            tokio::time::timeout(T, changes.changed())
                .await
                .context("view never showed the dialog")??;
        }
        let t_view = Instant::now();
        to_view.push(t_view - t_event);
        e2e.push(t_view - t0);
        sup.respond(supervisor::DialogAction::Accept, None, None, T)
            .await?;
        let _ = fire.await;
    }
    let (_, p95) = stats(&to_view);
    let mut sorted = to_view.clone();
    sorted.sort();
    let p99 = sorted[((sorted.len() as f64 * 0.99) as usize).min(sorted.len() - 1)];
    table.push(row(
        "dialog latency",
        &format!("CDP event → supervisor view (n={n}), p99 {}", ms(p99)),
        ms(stats(&to_view).0),
        ms(p95),
        String::new(),
        "p99 ≤ 2 ms",
        Some(p99 <= Duration::from_millis(2)),
    ));
    table.timing(
        "dialog latency",
        "alert() sent → supervisor view",
        &e2e,
        None,
        None,
    );
    sup.stop(T).await;
    Ok(())
}

/// Hung scripts: time to return minus budget; time to the next good evaluate.
pub async fn hung_scripts(ws: &str, mode: Mode, table: &mut Table) -> Result<()> {
    let conn = Connection::connect(ws, Default::default()).await?;
    let tid = new_target(&conn).await?;
    let engine =
        evaluate::Engine::new(conn.clone(), tid.clone(), evaluate::EngineConfig::default());
    engine
        .evaluate(evaluate::EvalRequest::new("1"), &Budget::new(T))
        .await?;
    let reps = if mode.quick { 2 } else { 7 };
    for script in ["while(true){}", "new Promise(() => {})"] {
        for budget_ms in [200u64, 1000] {
            let (mut over, mut next) = (Vec::new(), Vec::new());
            for _ in 0..reps {
                let b = Budget::new(Duration::from_millis(budget_ms));
                let t0 = Instant::now();
                let r = engine
                    .evaluate(evaluate::EvalRequest::new(script), &b)
                    .await;
                let took = t0.elapsed();
                anyhow::ensure!(r.is_err(), "{script} returned a value");
                over.push(took.saturating_sub(Duration::from_millis(budget_ms)));
                let t1 = Instant::now();
                let o = engine
                    .evaluate(evaluate::EvalRequest::new("1+1"), &Budget::new(T))
                    .await?;
                next.push(t1.elapsed());
                anyhow::ensure!(o.value == json!(2));
            }
            let (m, p) = stats(&over);
            table.push(row(
                "hung script",
                &format!("`{script}` @ {budget_ms} ms: return − budget (n={reps})"),
                ms(m),
                ms(p),
                String::new(),
                "≤ 50 ms",
                Some(m <= Duration::from_millis(50)),
            ));
            let (m, p) = stats(&next);
            table.push(row(
                "hung script",
                &format!("`{script}` @ {budget_ms} ms: next evaluate (n={reps})"),
                ms(m),
                ms(p),
                String::new(),
                "≤ 20 ms",
                Some(m <= Duration::from_millis(20)),
            ));
        }
    }
    engine.close(&Budget::new(T)).await;
    let _ = conn
        .browser()
        .call("Target.closeTarget", json!({"targetId": tid.as_str()}), T)
        .await;
    Ok(())
}

struct PageFigures {
    bare: Vec<Duration>,
    full: Vec<Duration>,
    inter: Vec<Duration>,
    full_bytes: usize,
    inter_bytes: usize,
    refs: usize,
}

/// Snapshots of the saved pages: bare getFullAXTree, full, interactive-only, and Playwright's ariaSnapshot.
pub async fn snapshots(ws: &str, mode: Mode, table: &mut Table) -> Result<()> {
    let pages_dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/pages");
    let mut names: Vec<String> = std::fs::read_dir(&pages_dir)
        .with_context(|| format!("reading {}", pages_dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().to_string()))
        .filter(|n| n.ends_with(".html"))
        .collect();
    names.sort();
    let site = cdp_mock::FixtureServer::start().await;
    site.dir("/pages", &pages_dir);
    let conn = Connection::connect(ws, Default::default()).await?;
    let tid = new_target(&conn).await?;
    let snapper = evaluate::refs::AxSnapshotter::attach(&conn, &tid, T).await?;
    let page = snapper.page_session().clone();
    page.call("Page.enable", json!({}), T).await?;
    let reps = if mode.quick { 2 } else { 9 };
    let full_opts = evaluate::refs::RenderOptions::default();
    let inter_opts = evaluate::refs::RenderOptions {
        interactive_only: true,
        ..Default::default()
    };
    let mut figures = Vec::new();
    for name in &names {
        let url = site.url("localhost", &format!("/pages/{name}"));
        let mut load = page.subscribe();
        page.call("Page.navigate", json!({"url": url}), T).await?;
        let _ = tokio::time::timeout(
            Duration::from_secs(10),
            load.next_method("Page.loadEventFired"),
        )
        .await;
        let mut f = PageFigures {
            bare: vec![],
            full: vec![],
            inter: vec![],
            full_bytes: 0,
            inter_bytes: 0,
            refs: 0,
        };
        for _ in 0..reps {
            let t0 = Instant::now();
            page.call("Accessibility.getFullAXTree", json!({}), T)
                .await?;
            f.bare.push(t0.elapsed());
            let t0 = Instant::now();
            let s = snapper
                .snapshot(&evaluate::refs::SnapshotOptions::default(), T)
                .await?;
            let r = s.render(&full_opts);
            f.full.push(t0.elapsed());
            f.full_bytes = r.text.len();
            f.refs = r.refs.len();
            let t0 = Instant::now();
            let s = snapper
                .snapshot(&evaluate::refs::SnapshotOptions::default(), T)
                .await?;
            let r = s.render(&inter_opts);
            f.inter.push(t0.elapsed());
            f.inter_bytes = r.text.len();
        }
        figures.push((name.clone(), f));
    }
    let peer = playwright_aria(ws, &site, &names, reps).await;
    let (mut sb, mut sf, mut si) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let (mut tb_full, mut tb_inter, mut refs_total) = (0usize, 0usize, 0usize);
    for (name, f) in &figures {
        let (b, _) = stats(&f.bare);
        let (fm, fp) = stats(&f.full);
        let (im, _) = stats(&f.inter);
        sb += b;
        sf += fm;
        si += im;
        tb_full += f.full_bytes;
        tb_inter += f.inter_bytes;
        refs_total += f.refs;
        let peer_txt = match &peer {
            Ok(p) => p
                .get(name)
                .map(|(d, bytes)| format!("; playwright {} / {} B", ms(*d), bytes))
                .unwrap_or_default(),
            Err(_) => String::new(),
        };
        table.push(row(
            "snapshot",
            &format!("{name}: full {} B (~{} tok), interactive {} B, {} refs; bare getFullAXTree {}{peer_txt}", f.full_bytes, f.full_bytes / 4, f.inter_bytes, f.refs, ms(b)),
            ms(fm),
            ms(fp),
            format!("{:.2}× bare", fm.as_secs_f64() / b.as_secs_f64().max(1e-9)),
            "",
            None,
        ));
    }
    table.push(row(
        "snapshot",
        "sum of medians: bare getFullAXTree (reference)",
        ms(sb),
        String::new(),
        "1.00× (ref)".into(),
        "",
        None,
    ));
    table.push(row(
        "snapshot",
        &format!("sum of medians: ours, full ({tb_full} B, {refs_total} refs)"),
        ms(sf),
        String::new(),
        format!("{:.2}× bare", sf.as_secs_f64() / sb.as_secs_f64().max(1e-9)),
        "",
        None,
    ));
    table.push(row(
        "snapshot",
        &format!("sum of medians: ours, interactive-only ({tb_inter} B)"),
        ms(si),
        String::new(),
        format!("{:.2}× bare", si.as_secs_f64() / sb.as_secs_f64().max(1e-9)),
        "≤ 100 KB",
        Some(tb_inter <= 100 * 1024),
    ));
    match peer {
        Ok(p) => {
            let sp: Duration = p.values().map(|(d, _)| *d).sum();
            let bytes: usize = p.values().map(|(_, b)| *b).sum();
            table.push(row(
                "snapshot",
                &format!("sum of medians: Playwright ariaSnapshot (peer, {bytes} B)"),
                ms(sp),
                String::new(),
                format!("{:.2}× bare", sp.as_secs_f64() / sb.as_secs_f64().max(1e-9)),
                "",
                None,
            ));
            table.push(row(
                "snapshot",
                "ours full vs Playwright: time ratio, bytes ratio",
                String::new(),
                String::new(),
                format!(
                    "{:.2}× time, {:.2}× bytes",
                    sf.as_secs_f64() / sp.as_secs_f64().max(1e-9),
                    tb_full as f64 / bytes.max(1) as f64
                ),
                "< 1× time, ≤ 0.5× bytes",
                Some(sf < sp && tb_full * 2 <= bytes),
            ));
        }
        Err(e) => table.push(row(
            "snapshot",
            &format!("Playwright ariaSnapshot: skipped ({e})"),
            String::new(),
            String::new(),
            String::new(),
            "",
            None,
        )),
    }
    snapper.close(T).await;
    let _ = conn
        .browser()
        .call("Target.closeTarget", json!({"targetId": tid.as_str()}), T)
        .await;
    Ok(())
}

/// Runs playwright-core's `ariaSnapshot` on the same Chromium; installs it into target/bench with npm.
async fn playwright_aria(
    ws: &str,
    site: &cdp_mock::FixtureServer,
    names: &[String],
    reps: usize,
) -> Result<std::collections::HashMap<String, (Duration, usize)>> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bench/peer");
    std::fs::create_dir_all(&dir)?;
    if which("npm").is_none() || which("node").is_none() {
        anyhow::bail!("npm/node not found");
    }
    if !dir.join("node_modules/playwright-core").exists() {
        eprintln!("bench: installing playwright-core into {}", dir.display());
        let st = std::process::Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .arg("playwright-core@1")
            .env("PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD", "1")
            .status()?;
        anyhow::ensure!(st.success(), "npm install playwright-core failed");
    }
    let script = dir.join("aria.js");
    std::fs::write(&script, PW_SCRIPT)?;
    let urls: Vec<String> = names
        .iter()
        .map(|n| site.url("localhost", &format!("/pages/{n}")))
        .collect();
    let out = tokio::process::Command::new("node")
        .arg(&script)
        .arg(ws)
        .arg(reps.to_string())
        .args(&urls)
        .current_dir(&dir)
        .output()
        .await?;
    anyhow::ensure!(
        out.status.success(),
        "node failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout)?;
    let mut m = std::collections::HashMap::new();
    for (name, url) in names.iter().zip(&urls) {
        let e = &v[url];
        let mut times: Vec<Duration> = e["times_ms"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_f64())
                    .map(|x| Duration::from_secs_f64(x / 1e3))
                    .collect()
            })
            .unwrap_or_default();
        times.sort();
        let med = times.get(times.len() / 2).copied().unwrap_or_default();
        m.insert(
            name.clone(),
            (med, e["bytes"].as_u64().unwrap_or(0) as usize),
        );
    }
    Ok(m)
}

fn which(bin: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(bin))
            .find(|p| p.is_file())
    })
}

const PW_SCRIPT: &str = r#"
const { chromium } = require('playwright-core');
(async () => {
  const [ws, repsArg, ...urls] = process.argv.slice(2);
  const reps = Number(repsArg);
  const browser = await chromium.connectOverCDP(ws);
  const ctx = browser.contexts()[0] || await browser.newContext();
  const page = await ctx.newPage();
  const out = {};
  for (const url of urls) {
    await page.goto(url, { waitUntil: 'load', timeout: 30000 }).catch(() => {});
    const times = [];
    let bytes = 0;
    for (let i = 0; i < reps; i++) {
      const t0 = performance.now();
      const s = await page.locator('body').ariaSnapshot();
      times.push(performance.now() - t0);
      bytes = Buffer.byteLength(s);
    }
    out[url] = { times_ms: times, bytes };
  }
  await page.close();
  process.stdout.write(JSON.stringify(out));
  process.exit(0);
})().catch(e => { console.error(e); process.exit(1); });
"#;

/// Memory per supervised tab at 1, 50, 200 tabs; evaluate throughput over all tabs.
pub async fn scale(ws: &str, mode: Mode, table: &mut Table) -> Result<()> {
    let conn = Connection::connect(ws, Default::default()).await?;
    let steps: &[usize] = if mode.quick {
        &[1, 10, 20]
    } else {
        &[1, 50, 200]
    };
    let mut sups: Vec<supervisor::Supervisor> = Vec::new();
    let base = rss_kib();
    for &n in steps {
        while sups.len() < n {
            sups.push(
                supervisor::Supervisor::new_tab(
                    conn.clone(),
                    supervisor::SupervisorConfig::default(),
                )
                .await?,
            );
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = rss_kib();
        let per = (now.saturating_sub(base)) as f64 / n as f64;
        table.push(row(
            "scale",
            &format!(
                "RSS per supervised tab at {n} tabs (process {} MiB)",
                now / 1024
            ),
            format!("{:.0} KiB", per),
            String::new(),
            String::new(),
            "≤ 2 MiB",
            Some(per <= 2048.0),
        ));
    }
    let engines: Vec<evaluate::Engine> = sups
        .iter()
        .map(|s| {
            evaluate::Engine::new(
                conn.clone(),
                s.target_id().clone(),
                evaluate::EngineConfig::default(),
            )
        })
        .collect();
    let rounds = if mode.quick { 2 } else { 5 };
    let t0 = Instant::now();
    let mut total = 0usize;
    for _ in 0..rounds {
        let budget = Budget::new(T);
        let futs = engines
            .iter()
            .map(|e| e.evaluate(evaluate::EvalRequest::new("1+1"), &budget));
        let rs = futures_util::future::join_all(futs).await;
        for r in rs {
            r?;
            total += 1;
        }
    }
    let el = t0.elapsed();
    table.push(row(
        "scale",
        &format!(
            "evaluate throughput, {} tabs in parallel ({total} evaluates)",
            engines.len()
        ),
        format!("{:.0} eval/s", total as f64 / el.as_secs_f64()),
        String::new(),
        String::new(),
        "",
        None,
    ));
    for e in &engines {
        e.close(&Budget::new(T)).await;
    }
    for s in &sups {
        s.stop(T).await;
    }
    Ok(())
}

/// One browser_evaluate through `tabwarden mcp` over stdio vs in process.
pub async fn mcp_overhead(ws: &str, mode: Mode, table: &mut Table) -> Result<()> {
    use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
    let exe = std::env::current_exe()?.with_file_name("tabwarden");
    if !exe.exists() {
        table.push(row(
            "mcp",
            &format!(
                "skipped: {} not built (cargo build --release -p tabwarden)",
                exe.display()
            ),
            String::new(),
            String::new(),
            String::new(),
            "",
            None,
        ));
        return Ok(());
    }
    let mut child = tokio::process::Command::new(&exe)
        .args(["mcp", "--cdp-url", ws])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let mut stdin = child.stdin.take().context("stdin")?;
    let mut lines = BufReader::new(child.stdout.take().context("stdout")?).lines();
    let mut id = 0u64;
    let mut rpc = |method: &str, params: Value| {
        id += 1;
        (
            id,
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
                + "\n",
        )
    };
    let (iid, msg) = rpc(
        "initialize",
        json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}),
    );
    stdin.write_all(msg.as_bytes()).await?;
    wait_id(&mut lines, iid).await?;
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n")
        .await?;
    let args = json!({"name": "browser_evaluate", "arguments": {"expression": "1+1"}});
    let n = mode.iters(300);
    let tools = tool_surface::Tools::connect(ws, tool_surface::ToolsConfig::default()).await?;
    let (mut over_mcp, mut in_proc) = (Vec::new(), Vec::new());
    for i in 0..(n + 10) {
        let (cid, msg) = rpc("tools/call", args.clone());
        let t0 = Instant::now();
        stdin.write_all(msg.as_bytes()).await?;
        let r = wait_id(&mut lines, cid).await?;
        let d1 = t0.elapsed();
        anyhow::ensure!(r.to_string().contains('2'), "mcp: {r}");
        let t0 = Instant::now();
        tools
            .call("browser_evaluate", json!({"expression": "1+1"}))
            .await;
        let d2 = t0.elapsed();
        if i >= 10 {
            over_mcp.push(d1);
            in_proc.push(d2);
        }
    }
    table.timing(
        "mcp",
        "browser_evaluate in process (reference)",
        &in_proc,
        None,
        None,
    );
    table.timing(
        "mcp",
        "browser_evaluate through `tabwarden mcp` stdio",
        &over_mcp,
        Some(&in_proc),
        None,
    );
    let _ = child.kill().await;
    Ok(())
}

async fn wait_id(
    lines: &mut tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStdout>>,
    id: u64,
) -> Result<Value> {
    loop {
        let line = tokio::time::timeout(T, lines.next_line())
            .await
            .context("mcp server silent")??
            .context("mcp server ended")?;
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            continue;
        };
        if v["id"].as_u64() == Some(id) {
            return Ok(v);
        }
    }
}
