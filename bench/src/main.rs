//! `cargo xtask bench`: latency, size and memory, each as a ratio to a
//! reference measured side by side in the same run (timings on a 2-core
//! machine move by up to a third between runs; ratios within one run do not).
//!
//! Run it with `cargo xtask bench` (release build; `--quick` for CI-sized runs).

use anyhow::{Context, Result};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

mod probe;
mod rows;
mod table;
use table::Table;

#[derive(Clone, Copy)]
pub(crate) struct Mode {
    pub(crate) quick: bool,
}

impl Mode {
    pub(crate) fn iters(&self, full: usize) -> usize {
        if self.quick {
            (full / 10).max(5)
        } else {
            full
        }
    }
}

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    // Profiling helpers (see probe.rs and docs/profiles/).
    let rest = args.get(1..).unwrap_or_default();
    match args.first().map(String::as_str) {
        Some("probe-eval") => rt.block_on(probe::probe_eval(rest)),
        Some("probe-snapshot") => rt.block_on(probe::probe_snapshot(rest)),
        Some("loop-eval") => rt.block_on(probe::loop_eval(rest)),
        Some("loop-snapshot") => rt.block_on(probe::loop_snapshot(rest)),
        Some("trace-eval") => rt.block_on(probe::trace_eval(rest)),
        _ => {
            // `--only scale,eval,dialog,hung,snapshot,mcp`: just those groups.
            let only: Option<Vec<String>> = args
                .iter()
                .position(|a| a == "--only")
                .and_then(|i| args.get(i + 1))
                .map(|s| s.split(',').map(str::to_string).collect());
            rt.block_on(run(Mode { quick }, only))
        }
    }
}

async fn run(mode: Mode, only: Option<Vec<String>>) -> Result<()> {
    let want = |g: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == g));
    let chrome = cdp_transport::LaunchedChrome::launch(
        cdp_transport::LaunchOptions::default().offline(true),
    )
    .await
    .context("launching Chromium (cargo xtask setup installs it)")?;
    let ws = chrome.ws_url().to_string();
    let mut table = Table::new(mode.quick);
    // Scale first: the process's RSS is then not inflated by earlier rows.
    if want("scale") {
        rows::scale(&ws, mode, &mut table).await?;
    }
    if want("eval") {
        eval_round_trip(&ws, mode, &mut table).await?;
    }
    if want("dialog") {
        rows::dialog_latency(&ws, mode, &mut table).await?;
    }
    if want("hung") {
        rows::hung_scripts(&ws, mode, &mut table).await?;
    }
    if want("snapshot") {
        rows::snapshots(&ws, mode, &mut table).await?;
    }
    if want("mcp") {
        rows::mcp_overhead(&ws, mode, &mut table).await?;
    }
    if only.is_some() {
        // A partial table is printed, never saved over the full one.
        println!("{}", table.render());
        return Ok(());
    }
    table.print_and_save()?;
    Ok(())
}

/// Minimal raw client: one WebSocket message each way per evaluate. The floor.
struct RawClient {
    ws: tokio_tungstenite::WebSocketStream<
        tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>,
    >,
    next: u64,
    session: String,
}

impl RawClient {
    async fn connect(ws_url: &str) -> Result<Self> {
        let (ws, _) = tokio_tungstenite::connect_async(ws_url).await?;
        let mut c = RawClient {
            ws,
            next: 1,
            session: String::new(),
        };
        let t = c
            .send(None, "Target.createTarget", json!({"url": "about:blank"}))
            .await?;
        let tid = t["targetId"].as_str().unwrap_or_default().to_string();
        let a = c
            .send(
                None,
                "Target.attachToTarget",
                json!({"targetId": tid, "flatten": true}),
            )
            .await?;
        c.session = a["sessionId"].as_str().unwrap_or_default().to_string();
        Ok(c)
    }

    async fn send(&mut self, session: Option<&str>, method: &str, params: Value) -> Result<Value> {
        let id = self.next;
        self.next += 1;
        let mut m = json!({"id": id, "method": method, "params": params});
        if let Some(s) = session {
            m["sessionId"] = json!(s);
        }
        self.ws
            .send(tokio_tungstenite::tungstenite::Message::Text(
                m.to_string().into(),
            ))
            .await?;
        loop {
            let msg = self.ws.next().await.context("socket ended")??;
            let tokio_tungstenite::tungstenite::Message::Text(t) = msg else {
                continue;
            };
            // Cheap id check before a full parse, as a minimal client would.
            let v: Value = serde_json::from_str(t.as_str())?;
            if v["id"].as_u64() == Some(id) {
                return Ok(v["result"].clone());
            }
        }
    }

    async fn eval_1_plus_1(&mut self) -> Result<()> {
        let s = self.session.clone();
        let r = self
            .send(
                Some(&s),
                "Runtime.evaluate",
                json!({"expression": "1+1", "returnByValue": true}),
            )
            .await?;
        anyhow::ensure!(r["result"]["value"] == 2, "raw: {r}");
        Ok(())
    }
}

async fn eval_round_trip(ws: &str, mode: Mode, table: &mut Table) -> Result<()> {
    let n = mode.iters(2000);
    let mut raw = RawClient::connect(ws).await?;

    let conn = cdp_transport::Connection::connect(ws, Default::default()).await?;
    let t = conn
        .browser()
        .call(
            "Target.createTarget",
            json!({"url": "about:blank"}),
            Duration::from_secs(10),
        )
        .await?;
    let tid = cdp_transport::TargetId::new(t["targetId"].as_str().unwrap_or_default());
    let sess = conn.attach(&tid, Duration::from_secs(10)).await?;

    let (browser, mut handler) = chromiumoxide::Browser::connect(ws.to_string()).await?;
    let h = tokio::spawn(async move { while handler.next().await.is_some() {} });
    let page = browser.new_page("about:blank").await?;

    let engine =
        evaluate::Engine::new(conn.clone(), tid.clone(), evaluate::EngineConfig::default());
    let tools = tool_surface::Tools::connect(ws, tool_surface::ToolsConfig::default()).await?;
    let tool_args = json!({"expression": "1+1"});
    // Warm up each client.
    for _ in 0..20 {
        raw.eval_1_plus_1().await?;
        sess.call(
            "Runtime.evaluate",
            json!({"expression": "1+1", "returnByValue": true}),
            Duration::from_secs(5),
        )
        .await?;
        let _: i64 = page.evaluate("1+1").await?.into_value()?;
        engine
            .evaluate(
                evaluate::EvalRequest::new("1+1"),
                &cdp_transport::Budget::new(Duration::from_secs(5)),
            )
            .await?;
        tools.call("browser_evaluate", tool_args.clone()).await;
    }
    let (mut floor, mut ours, mut peer) = (Vec::new(), Vec::new(), Vec::new());
    let (mut eng, mut tool) = (Vec::new(), Vec::new());
    // Interleave the clients so that drift hits all of them alike, and
    // rotate their order every round: on 2 cores the work a renderer still
    // does after answering (another tab's) lands on whichever client comes
    // next, so a fixed order would always charge it to the same one.
    for i in 0..n {
        for k in 0..5 {
            match (k + i) % 5 {
                0 => {
                    let t0 = Instant::now();
                    raw.eval_1_plus_1().await?;
                    floor.push(t0.elapsed());
                }
                1 => {
                    let t0 = Instant::now();
                    let r = sess
                        .call(
                            "Runtime.evaluate",
                            json!({"expression": "1+1", "returnByValue": true}),
                            Duration::from_secs(5),
                        )
                        .await?;
                    ours.push(t0.elapsed());
                    anyhow::ensure!(r["result"]["value"] == 2);
                }
                2 => {
                    let t0 = Instant::now();
                    let v: i64 = page.evaluate("1+1").await?.into_value()?;
                    peer.push(t0.elapsed());
                    anyhow::ensure!(v == 2);
                }
                3 => {
                    let t0 = Instant::now();
                    let o = engine
                        .evaluate(
                            evaluate::EvalRequest::new("1+1"),
                            &cdp_transport::Budget::new(Duration::from_secs(5)),
                        )
                        .await?;
                    eng.push(t0.elapsed());
                    anyhow::ensure!(o.value == json!(2), "engine: {:?}", o.value);
                }
                _ => {
                    let t0 = Instant::now();
                    let r = tools.call("browser_evaluate", tool_args.clone()).await;
                    tool.push(t0.elapsed());
                    anyhow::ensure!(r.to_string().contains('2'), "tool: {r}");
                }
            }
        }
    }
    table.timing(
        "evaluate 1+1 warm",
        "raw WebSocket client (floor)",
        &floor,
        None,
        None,
    );
    table.timing(
        "evaluate 1+1 warm",
        "cdp-transport Session::call",
        &ours,
        Some(&floor),
        Some(1.15),
    );
    table.timing(
        "evaluate 1+1 warm",
        "evaluate::Engine::evaluate",
        &eng,
        Some(&floor),
        Some(1.15),
    );
    table.timing(
        "evaluate 1+1 warm",
        "browser_evaluate tool (in process)",
        &tool,
        Some(&floor),
        None,
    );
    table.timing(
        "evaluate 1+1 warm",
        "chromiumoxide 0.9 page.evaluate (peer)",
        &peer,
        Some(&floor),
        None,
    );
    h.abort();
    Ok(())
}
