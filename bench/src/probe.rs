//! Breakdowns and load loops for profiling (`docs/profiles/`), next to the
//! table: `tabwarden-bench probe-eval`, `probe-snapshot`, `loop-eval`,
//! `loop-snapshot`. Each launches its own Chromium (extra flags from
//! `TW_BENCH_CHROME_ARGS`, e.g. `--js-flags=--perf-basic-prof` so `perf`
//! names V8's JIT frames) and prints the process ids to profile.

use crate::table::stats;
use anyhow::{bail, Context, Result};
use cdp_transport::{Budget, Connection, LaunchOptions, LaunchedChrome, Session, TargetId};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(20);

/// A trace event's (pid, tid).
type ThreadKey = (Option<i64>, Option<i64>);

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

async fn launch() -> Result<LaunchedChrome> {
    let mut opts = LaunchOptions::default().offline(true);
    if let Ok(extra) = std::env::var("TW_BENCH_CHROME_ARGS") {
        for a in extra.split_whitespace() {
            opts = opts.arg(a);
        }
    }
    LaunchedChrome::launch(opts)
        .await
        .context("launching Chromium")
}

/// Process ids below `root` (inclusive) whose command line contains `needle`.
fn descendants(root: u32, needle: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return out;
    };
    let parent_of = |pid: u32| -> Option<u32> {
        let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        s.lines()
            .find(|l| l.starts_with("PPid:"))?
            .split_whitespace()
            .nth(1)?
            .parse()
            .ok()
    };
    for e in dir.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if !String::from_utf8_lossy(&cmd).contains(needle) {
            continue;
        }
        let mut p = pid;
        for _ in 0..16 {
            if p == root {
                out.push(pid);
                break;
            }
            match parent_of(p) {
                Some(q) if q > 1 => p = q,
                _ => break,
            }
        }
    }
    out.sort();
    out
}

/// CPU time (user + system, clock ticks) of `pid`.
fn cpu_ticks(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let rest = &s[s.rfind(')')? + 2..];
            let f: Vec<&str> = rest.split_whitespace().collect();
            Some(f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?)
        })
        .unwrap_or(0)
}

fn print_pids(chrome: &LaunchedChrome) {
    let root = chrome.pid().unwrap_or(0);
    println!(
        "{}",
        json!({
            "bench": std::process::id(),
            "browser": root,
            "renderers": descendants(root, "--type=renderer"),
        })
    );
}

async fn new_tab(conn: &Connection, url: &str) -> Result<(TargetId, Session)> {
    let t = conn
        .browser()
        .call("Target.createTarget", json!({"url": url}), T)
        .await?;
    let tid = TargetId::new(t["targetId"].as_str().unwrap_or_default());
    let s = conn.attach(&tid, T).await?;
    Ok((tid, s))
}

/// `probe-eval VARIANTS.json [--n N]`: interleaved timings of `Runtime.evaluate`
/// variants on one tab, each as a ratio to the first.
///
/// A variant is one of
/// - `{"name", "session": "bare"|"enabled", "params": {...}}`: `Runtime.evaluate`
///   on a session with nothing enabled, or with `Runtime`+`Page` enabled;
/// - `{"name", "engine_params": SRC, "remove": [keys], "set": {...}}`: the exact
///   params of the engine's warm evaluate of SRC (`Engine::warm_page_params`),
///   edited, sent on the engine's own session;
/// - `{"name", "engine": SRC}`: `Engine::evaluate(SRC)` itself.
///
/// Budgets are 5 s, as in the table.
pub async fn probe_eval(args: &[String]) -> Result<()> {
    let file = args.first().context("probe-eval VARIANTS.json [--n N]")?;
    let variants: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(file)?)?;
    let n: usize = arg(args, "--n").map_or(Ok(2000), |s| s.parse())?;
    let chrome = launch().await?;
    let conn = Connection::connect(chrome.ws_url(), Default::default()).await?;
    let (tid, bare) = new_tab(&conn, "about:blank").await?;
    let enabled = conn.attach(&tid, T).await?;
    enabled.call("Runtime.enable", json!({}), T).await?;
    enabled.call("Page.enable", json!({}), T).await?;
    let engine = evaluate::Engine::new(conn.clone(), tid.clone(), Default::default());
    let five = Duration::from_secs(5);
    engine
        .evaluate(evaluate::EvalRequest::new("1+1"), &Budget::new(five))
        .await?;
    let engine_session = engine.session(&tid).context("engine session")?;
    // The helper's key, and its object id (for `call_on_helper` variants).
    let key = engine
        .warm_page_params("1+1", five)
        .and_then(|p| {
            p["expression"]
                .as_str()?
                .split("globalThis.")
                .nth(1)?
                .split(|c: char| !(c.is_alphanumeric() || c == '_'))
                .next()
                .map(str::to_string)
        })
        .unwrap_or_default();
    let ctx_params = engine.warm_page_params("1+1", five).unwrap_or_default();
    let eval_in_ctx = |expr: String, by_value: bool| {
        let mut p = json!({"expression": expr, "returnByValue": by_value, "objectGroup": "probe"});
        for k in ["uniqueContextId", "contextId"] {
            if let Some(x) = ctx_params.get(k) {
                p[k] = x.clone();
            }
        }
        let s = engine_session.clone();
        async move { s.call("Runtime.evaluate", p, T).await }
    };
    for v in &variants {
        for e in v["setup"].as_array().into_iter().flatten() {
            let r = eval_in_ctx(e.as_str().unwrap_or_default().replace("{K}", &key), true).await?;
            println!("setup {e}: {r}");
        }
    }
    let helper_obj = eval_in_ctx(format!("globalThis.{key}"), false).await?;
    let helper_id = helper_obj["result"]["objectId"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    print_pids(&chrome);
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); variants.len()];
    let mut checked = vec![false; variants.len()];
    let k = variants.len();
    for round in 0..(n + 50) {
        // Rotate the order every round: no variant always follows the same one.
        for i in (0..k).map(|j| (j + round) % k) {
            let v = &variants[i];
            let name = v["name"].as_str().unwrap_or("?");
            let t0;
            let reply: Value;
            if let Some(decl) = v["call_on_helper"].as_str() {
                let p = json!({
                    "functionDeclaration": decl,
                    "objectId": helper_id,
                    "arguments": v["args"].clone(),
                    "returnByValue": true,
                    "awaitPromise": true,
                });
                t0 = Instant::now();
                reply = engine_session
                    .call("Runtime.callFunctionOn", p, five)
                    .await?;
            } else if let Some(src) = v["engine"].as_str() {
                t0 = Instant::now();
                let o = engine
                    .evaluate(evaluate::EvalRequest::new(src), &Budget::new(five))
                    .await?;
                reply = o.value;
            } else if let Some(src) = v["engine_params"].as_str() {
                let mut p = engine
                    .warm_page_params(src, five)
                    .context("engine not warm")?;
                for k in v["remove"].as_array().into_iter().flatten() {
                    if let (Some(o), Some(k)) = (p.as_object_mut(), k.as_str()) {
                        o.remove(k);
                    }
                }
                if let (Some(o), Some(set)) = (p.as_object_mut(), v["set"].as_object()) {
                    for (k, x) in set {
                        o.insert(k.clone(), x.clone());
                    }
                }
                for r in v["replace"].as_array().into_iter().flatten() {
                    // `[from, to]` on the expression text.
                    if let (Some(a), Some(b)) = (r[0].as_str(), r[1].as_str()) {
                        let e = p["expression"].as_str().unwrap_or_default().replace(a, b);
                        p["expression"] = json!(e);
                    }
                }
                if let Some(f) = v["expr_fn"].as_str() {
                    // Replace the expression: `{E}` stands for the engine's
                    // text, `{K}` for the helper's registered-symbol key.
                    let e = p["expression"].as_str().unwrap_or_default().to_string();
                    let key = e
                        .split("globalThis.")
                        .nth(1)
                        .and_then(|r| r.split(|c: char| !(c.is_alphanumeric() || c == '_')).next())
                        .unwrap_or_default()
                        .to_string();
                    p["expression"] = json!(f.replace("{E}", &e).replace("{K}", &key));
                }
                t0 = Instant::now();
                reply = engine_session.call("Runtime.evaluate", p, five).await?;
            } else {
                let s = match v["session"].as_str() {
                    Some("enabled") => &enabled,
                    Some("engine") => &engine_session,
                    _ => &bare,
                };
                let p = v["params"].clone();
                t0 = Instant::now();
                reply = s.call("Runtime.evaluate", p, five).await?;
            }
            let took = t0.elapsed();
            if !checked[i] {
                println!("{name}: first reply {reply}");
                checked[i] = true;
            }
            if round >= 50 {
                samples[i].push(took);
            }
        }
    }
    let (base, _) = stats(&samples[0]);
    println!("| variant | median | p95 | ratio to first | delta |");
    println!("|---|---|---|---|---|");
    for (v, s) in variants.iter().zip(&samples) {
        let (m, p) = stats(s);
        println!(
            "| {} | {:.1} µs | {:.1} µs | {:.2}× | {:+.1} µs |",
            v["name"].as_str().unwrap_or("?"),
            m.as_secs_f64() * 1e6,
            p.as_secs_f64() * 1e6,
            m.as_secs_f64() / base.as_secs_f64().max(1e-9),
            (m.as_secs_f64() - base.as_secs_f64()) * 1e6
        );
    }
    Ok(())
}

/// `loop-eval --what engine|session|wrapper [--secs S] [--src SRC]`: a tight
/// loop of one kind of evaluate for a profiler to attach to (pids printed first).
pub async fn loop_eval(args: &[String]) -> Result<()> {
    let what = arg(args, "--what").unwrap_or_else(|| "engine".into());
    let secs: u64 = arg(args, "--secs").map_or(Ok(20), |s| s.parse())?;
    let src = arg(args, "--src").unwrap_or_else(|| "1+1".into());
    let chrome = launch().await?;
    let conn = Connection::connect(chrome.ws_url(), Default::default()).await?;
    let (tid, session) = new_tab(&conn, "about:blank").await?;
    let engine = evaluate::Engine::new(conn.clone(), tid.clone(), Default::default());
    let five = Duration::from_secs(5);
    engine
        .evaluate(evaluate::EvalRequest::new(src.as_str()), &Budget::new(five))
        .await?;
    let engine_session = engine.session(&tid).context("engine session")?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    print_pids(&chrome);
    // Give the profiler time to attach.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let renderers = descendants(chrome.pid().unwrap_or(0), "--type=renderer");
    let cpu0: Vec<u64> = renderers.iter().map(|p| cpu_ticks(*p)).collect();
    let me0 = cpu_ticks(std::process::id());
    let br0 = cpu_ticks(chrome.pid().unwrap_or(0));
    let t0 = Instant::now();
    let mut n = 0u64;
    while t0.elapsed() < Duration::from_secs(secs) {
        match what.as_str() {
            "engine" => {
                engine
                    .evaluate(evaluate::EvalRequest::new(src.as_str()), &Budget::new(five))
                    .await?;
            }
            "session" => {
                session
                    .call(
                        "Runtime.evaluate",
                        json!({"expression": src, "returnByValue": true}),
                        five,
                    )
                    .await?;
            }
            "wrapper" => {
                let p = engine
                    .warm_page_params(&src, five)
                    .context("engine not warm")?;
                engine_session.call("Runtime.evaluate", p, five).await?;
            }
            other => bail!("unknown --what {other}"),
        }
        n += 1;
    }
    let el = t0.elapsed().as_secs_f64();
    let hz = 100.0; // USER_HZ on Linux
    let per = |d: u64| d as f64 / hz / n.max(1) as f64 * 1e6;
    println!(
        "{}",
        json!({
            "what": what, "evaluates": n, "per_eval_us": el / n.max(1) as f64 * 1e6,
            "cpu_us_per_eval": {
                "bench": per(cpu_ticks(std::process::id()) - me0),
                "browser": per(cpu_ticks(chrome.pid().unwrap_or(0)) - br0),
                "renderers": renderers.iter().zip(&cpu0).map(|(p, c)| json!({"pid": p, "us": per(cpu_ticks(*p) - c)})).collect::<Vec<_>>(),
            }
        })
    );
    Ok(())
}

fn pages_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata/pages")
}

async fn load(page: &Session, url: &str) -> Result<()> {
    let mut ev = page.subscribe();
    page.call("Page.navigate", json!({"url": url}), T).await?;
    let _ = tokio::time::timeout(
        Duration::from_secs(10),
        ev.next_method("Page.loadEventFired"),
    )
    .await;
    Ok(())
}

/// `probe-snapshot [--reps N] [--pages a.html,b.html]`: per page, interleaved,
/// `Accessibility.getFullAXTree` on a session without `Accessibility.enable`,
/// on one with it, our full snapshot, and the snapshot's own share (build +
/// render of an already fetched tree), plus the reply size.
pub async fn probe_snapshot(args: &[String]) -> Result<()> {
    let reps: usize = arg(args, "--reps").map_or(Ok(9), |s| s.parse())?;
    let mut names: Vec<String> = match arg(args, "--pages") {
        Some(p) => p.split(',').map(str::to_string).collect(),
        None => std::fs::read_dir(pages_dir())?
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().to_string()))
            .filter(|n| n.ends_with(".html"))
            .collect(),
    };
    names.sort();
    let site = cdp_mock::FixtureServer::start().await;
    site.dir("/pages", pages_dir());
    let chrome = launch().await?;
    let conn = Connection::connect(chrome.ws_url(), Default::default()).await?;
    let (tid, page) = new_tab(&conn, "about:blank").await?;
    page.call("Page.enable", json!({}), T).await?;
    let snapper = evaluate::refs::AxSnapshotter::attach(&conn, &tid, T).await?;
    let ax_on = conn.attach(&tid, T).await?;
    print_pids(&chrome);
    println!("| page | reply bytes | nodes | bare (no enable) | with Accessibility.enable | ours full | ours: JSON parse of the reply | ours: build+render only |");
    println!("|---|---|---|---|---|---|---|---|");
    let mut sums = [Duration::ZERO; 5];
    for name in &names {
        load(&page, &site.url("localhost", &format!("/pages/{name}"))).await?;
        let mut bare = Vec::new();
        let mut enabled = Vec::new();
        let mut ours = Vec::new();
        let mut build = Vec::new();
        let mut parse = Vec::new();
        let mut bytes = 0usize;
        let mut nodes = 0usize;
        for _ in 0..reps {
            let t0 = Instant::now();
            let v = page
                .call("Accessibility.getFullAXTree", json!({}), T)
                .await?;
            bare.push(t0.elapsed());
            let text = v.to_string();
            bytes = text.len();
            let t0 = Instant::now();
            let parsed: Value = serde_json::from_str(&text)?;
            parse.push(t0.elapsed());
            drop(parsed);
            nodes = v["nodes"].as_array().map_or(0, Vec::len);
            let t0 = Instant::now();
            let s = snapper
                .snapshot(&evaluate::refs::SnapshotOptions::default(), T)
                .await?;
            let r = s.render(&evaluate::refs::RenderOptions::default());
            ours.push(t0.elapsed());
            // The client-side share: the same tree built and rendered again.
            let owned = v.clone();
            let t0 = Instant::now();
            let r2 = evaluate::refs::bench_build_and_render(owned);
            build.push(t0.elapsed());
            anyhow::ensure!(!r.text.is_empty() && r2 > 0);
        }
        // Then with `Accessibility.enable` on a session of the page (the
        // renderer keeps the document's accessibility tree alive while any
        // session has it enabled, so this is measured after the rest).
        ax_on.call("Accessibility.enable", json!({}), T).await?;
        for _ in 0..reps {
            let t0 = Instant::now();
            ax_on
                .call("Accessibility.getFullAXTree", json!({}), T)
                .await?;
            enabled.push(t0.elapsed());
        }
        ax_on.call("Accessibility.disable", json!({}), T).await?;
        let m: Vec<Duration> = [&bare, &enabled, &ours, &parse, &build]
            .iter()
            .map(|s| stats(s).0)
            .collect();
        for (s, x) in sums.iter_mut().zip(&m) {
            *s += *x;
        }
        println!(
            "| {name} | {bytes} | {nodes} | {:.1} ms | {:.1} ms | {:.1} ms | {:.2} ms | {:.2} ms |",
            m[0].as_secs_f64() * 1e3,
            m[1].as_secs_f64() * 1e3,
            m[2].as_secs_f64() * 1e3,
            m[3].as_secs_f64() * 1e3,
            m[4].as_secs_f64() * 1e3
        );
    }
    println!(
        "| sum of medians | | | {:.1} ms | {:.1} ms | {:.1} ms | {:.2} ms | {:.2} ms |",
        sums[0].as_secs_f64() * 1e3,
        sums[1].as_secs_f64() * 1e3,
        sums[2].as_secs_f64() * 1e3,
        sums[3].as_secs_f64() * 1e3,
        sums[4].as_secs_f64() * 1e3
    );
    snapper.close(T).await;
    Ok(())
}

/// `loop-snapshot --page NAME [--what ours|bare] [--secs S]`: snapshots of one
/// saved page in a loop for a profiler (pids printed first).
pub async fn loop_snapshot(args: &[String]) -> Result<()> {
    let name = arg(args, "--page").unwrap_or_else(|| "wikipedia.html".into());
    let what = arg(args, "--what").unwrap_or_else(|| "ours".into());
    let secs: u64 = arg(args, "--secs").map_or(Ok(20), |s| s.parse())?;
    let site = cdp_mock::FixtureServer::start().await;
    site.dir("/pages", pages_dir());
    let chrome = launch().await?;
    let conn = Connection::connect(chrome.ws_url(), Default::default()).await?;
    let (tid, page) = new_tab(&conn, "about:blank").await?;
    page.call("Page.enable", json!({}), T).await?;
    load(&page, &site.url("localhost", &format!("/pages/{name}"))).await?;
    let snapper = evaluate::refs::AxSnapshotter::attach(&conn, &tid, T).await?;
    snapper
        .snapshot(&evaluate::refs::SnapshotOptions::default(), T)
        .await?;
    tokio::time::sleep(Duration::from_millis(300)).await;
    print_pids(&chrome);
    tokio::time::sleep(Duration::from_secs(2)).await;
    let root = chrome.pid().unwrap_or(0);
    let renderers = descendants(root, "--type=renderer");
    let cpu0: Vec<u64> = renderers.iter().map(|p| cpu_ticks(*p)).collect();
    let me0 = cpu_ticks(std::process::id());
    let br0 = cpu_ticks(root);
    let t0 = Instant::now();
    let mut times = Vec::new();
    while t0.elapsed() < Duration::from_secs(secs) {
        let t = Instant::now();
        match what.as_str() {
            "ours" => {
                let s = snapper
                    .snapshot(&evaluate::refs::SnapshotOptions::default(), T)
                    .await?;
                let _ = s.render(&evaluate::refs::RenderOptions::default());
            }
            "bare" => {
                page.call("Accessibility.getFullAXTree", json!({}), T)
                    .await?;
            }
            other => bail!("unknown --what {other}"),
        }
        times.push(t.elapsed());
    }
    let n = times.len() as f64;
    let per = |d: u64| d as f64 / 100.0 / n.max(1.0) * 1e3;
    let (m, p) = stats(&times);
    println!(
        "{}",
        json!({
            "what": what, "page": name, "snapshots": times.len(),
            "median_ms": m.as_secs_f64() * 1e3, "p95_ms": p.as_secs_f64() * 1e3,
            "cpu_ms_per_snapshot": {
                "bench": per(cpu_ticks(std::process::id()) - me0),
                "browser": per(cpu_ticks(root) - br0),
                "renderers": renderers.iter().zip(&cpu0).map(|(p, c)| json!({"pid": p, "ms": per(cpu_ticks(*p) - c)})).collect::<Vec<_>>(),
            }
        })
    );
    snapper.close(T).await;
    Ok(())
}

/// `trace-eval VARIANTS.json --variant NAME [--n N] [--categories C]`: runs one
/// variant of `probe-eval` N times under Chromium tracing and sums the trace
/// events by thread and name (named costs from a stripped Chromium).
pub async fn trace_eval(args: &[String]) -> Result<()> {
    let file = args
        .first()
        .context("trace-eval VARIANTS.json --variant NAME")?;
    let variants: Vec<Value> = serde_json::from_str(&std::fs::read_to_string(file)?)?;
    let want = arg(args, "--variant").context("--variant NAME")?;
    let v = variants
        .iter()
        .find(|v| v["name"].as_str() == Some(want.as_str()))
        .context("no such variant")?
        .clone();
    let n: usize = arg(args, "--n").map_or(Ok(500), |s| s.parse())?;
    let cats = arg(args, "--categories").unwrap_or_else(|| {
        "devtools.timeline,disabled-by-default-devtools.timeline,v8,v8.execute,disabled-by-default-v8.compile,toplevel,mojom,ipc,devtools,disabled-by-default-devtools.protocol".into()
    });
    let chrome = launch().await?;
    let conn = Connection::connect(chrome.ws_url(), Default::default()).await?;
    let (tid, bare) = new_tab(&conn, "about:blank").await?;
    let engine = evaluate::Engine::new(conn.clone(), tid.clone(), Default::default());
    let five = Duration::from_secs(5);
    engine
        .evaluate(evaluate::EvalRequest::new("1+1"), &Budget::new(five))
        .await?;
    let engine_session = engine.session(&tid).context("engine session")?;
    let run_one = |warm: bool| {
        let v = v.clone();
        let engine = engine.clone();
        let engine_session = engine_session.clone();
        let bare = bare.clone();
        async move {
            let _ = warm;
            if let Some(src) = v["engine"].as_str() {
                engine
                    .evaluate(evaluate::EvalRequest::new(src), &Budget::new(five))
                    .await?;
            } else if let Some(src) = v["engine_params"].as_str() {
                let mut p = engine.warm_page_params(src, five).context("not warm")?;
                for k in v["remove"].as_array().into_iter().flatten() {
                    if let (Some(o), Some(k)) = (p.as_object_mut(), k.as_str()) {
                        o.remove(k);
                    }
                }
                for r in v["replace"].as_array().into_iter().flatten() {
                    if let (Some(a), Some(b)) = (r[0].as_str(), r[1].as_str()) {
                        let e = p["expression"].as_str().unwrap_or_default().replace(a, b);
                        p["expression"] = json!(e);
                    }
                }
                if let Some(f) = v["expr_fn"].as_str() {
                    let e = p["expression"].as_str().unwrap_or_default().to_string();
                    p["expression"] = json!(f.replace("{E}", &e));
                }
                engine_session.call("Runtime.evaluate", p, five).await?;
            } else {
                let s = if v["session"].as_str() == Some("engine") {
                    &engine_session
                } else {
                    &bare
                };
                s.call("Runtime.evaluate", v["params"].clone(), five)
                    .await?;
            }
            anyhow::Ok(())
        }
    };
    for _ in 0..200 {
        run_one(true).await?;
    }
    let browser = conn.browser();
    let mut events = browser.subscribe();
    browser
        .call(
            "Tracing.start",
            json!({"transferMode": "ReturnAsStream", "traceConfig": {
                "includedCategories": cats.split(',').collect::<Vec<_>>(),
                "excludedCategories": ["*"],
            }}),
            T,
        )
        .await?;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let t0 = Instant::now();
    for _ in 0..n {
        run_one(false).await?;
    }
    let wall = t0.elapsed();
    browser.call("Tracing.end", json!({}), T).await?;
    let done = tokio::time::timeout(
        Duration::from_secs(60),
        events.next_method("Tracing.tracingComplete"),
    )
    .await
    .context("no Tracing.tracingComplete")?
    .context("events ended")?;
    let stream = done.params["stream"]
        .as_str()
        .context("no stream")?
        .to_string();
    let mut text = Vec::new();
    loop {
        let r = browser
            .call("IO.read", json!({"handle": stream, "size": 1 << 20}), T)
            .await?;
        let chunk = r["data"].as_str().unwrap_or_default();
        if r["base64Encoded"].as_bool() == Some(true) {
            bail!("base64 trace chunks are not handled");
        }
        text.extend_from_slice(chunk.as_bytes());
        if r["eof"].as_bool() == Some(true) {
            break;
        }
    }
    let _ = browser.call("IO.close", json!({"handle": stream}), T).await;
    std::fs::write(format!("/tmp/trace-{}.json", want.replace(' ', "_")), &text)?;
    let trace: Value = serde_json::from_slice(&text)?;
    let evs = trace["traceEvents"]
        .as_array()
        .or_else(|| trace.as_array())
        .cloned()
        .unwrap_or_default();
    // Thread names.
    let mut names = std::collections::HashMap::new();
    for e in &evs {
        if e["ph"] == "M" && e["name"] == "thread_name" {
            names.insert(
                (e["pid"].as_i64(), e["tid"].as_i64()),
                e["args"]["name"].as_str().unwrap_or("?").to_string(),
            );
        }
    }
    // Inclusive and exclusive (self) durations by (thread, name): events of
    // one thread sorted by start, nested by a stack.
    let mut by_thread: HashMap<ThreadKey, Vec<(f64, f64, String)>> = Default::default();
    let mut open: HashMap<ThreadKey, Vec<(String, f64)>> = Default::default();
    for e in &evs {
        let key = (e["pid"].as_i64(), e["tid"].as_i64());
        let name = e["name"].as_str().unwrap_or("?").to_string();
        let ts = e["ts"].as_f64().unwrap_or(0.0);
        match e["ph"].as_str() {
            Some("X") => {
                by_thread
                    .entry(key)
                    .or_default()
                    .push((ts, e["dur"].as_f64().unwrap_or(0.0), name))
            }
            Some("B") => open.entry(key).or_default().push((name, ts)),
            Some("E") => {
                if let Some((n0, t0)) = open.entry(key).or_default().pop() {
                    by_thread.entry(key).or_default().push((t0, ts - t0, n0));
                }
            }
            _ => {}
        }
    }
    // (thread label, name) -> (count, inclusive, self)
    let mut sums: std::collections::HashMap<(String, String), (u64, f64, f64)> = Default::default();
    for (key, mut list) in by_thread {
        let thread = format!(
            "{}:{}",
            key.0.unwrap_or(0),
            names.get(&key).cloned().unwrap_or_else(|| "?".into())
        );
        list.sort_by(|a, b| {
            a.0.partial_cmp(&b.0)
                .unwrap_or(std::cmp::Ordering::Equal)
                .then(b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal))
        });
        // Stack of (end, index into `selfs`).
        let mut stack: Vec<(f64, usize)> = Vec::new();
        let mut selfs: Vec<(String, f64, f64)> = Vec::new();
        for (ts, dur, name) in list {
            while stack.last().is_some_and(|(end, _)| *end <= ts) {
                stack.pop();
            }
            if let Some((_, parent)) = stack.last() {
                selfs[*parent].2 -= dur;
            }
            selfs.push((name, dur, dur));
            stack.push((ts + dur, selfs.len() - 1));
        }
        for (name, incl, slf) in selfs {
            let s = sums.entry((thread.clone(), name)).or_default();
            s.0 += 1;
            s.1 += incl;
            s.2 += slf.max(0.0);
        }
    }
    let mut rows: Vec<_> = sums.into_iter().collect();
    rows.sort_by(|a, b| {
        b.1 .2
            .partial_cmp(&a.1 .2)
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    println!(
        "variant {want:?}: {n} evaluates in {:.1} ms ({:.1} µs each) under tracing",
        wall.as_secs_f64() * 1e3,
        wall.as_secs_f64() * 1e6 / n as f64
    );
    println!("| thread | event | count per evaluate | µs per evaluate, self | µs per evaluate, inclusive |");
    println!("|---|---|---|---|---|");
    for ((thread, name), (count, incl, slf)) in rows.iter().take(45) {
        println!(
            "| {thread} | {name} | {:.2} | {:.2} | {:.2} |",
            *count as f64 / n as f64,
            slf / n as f64,
            incl / n as f64
        );
    }
    Ok(())
}
