//! `cargo xtask bench`: latency, size and memory, each as a ratio to a
//! reference measured side by side in the same run (timings on a 2-core
//! machine move by up to a third between runs; ratios within one run do not).
//!
//! Run it with `cargo xtask bench` (release build; `--quick` for CI-sized runs).

use anyhow::{Context, Result};
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

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
    let quick = std::env::args().any(|a| a == "--quick");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(run(Mode { quick }))
}

async fn run(mode: Mode) -> Result<()> {
    let chrome = cdp_transport::LaunchedChrome::launch(
        cdp_transport::LaunchOptions::default().offline(true),
    )
    .await
    .context("launching Chromium (cargo xtask setup installs it)")?;
    let ws = chrome.ws_url().to_string();
    let mut table = Table::new(mode.quick);
    // Scale first: the process's RSS is then not inflated by earlier rows.
    rows::scale(&ws, mode, &mut table).await?;
    eval_round_trip(&ws, mode, &mut table).await?;
    rows::dialog_latency(&ws, mode, &mut table).await?;
    rows::hung_scripts(&ws, mode, &mut table).await?;
    rows::snapshots(&ws, mode, &mut table).await?;
    rows::mcp_overhead(&ws, mode, &mut table).await?;
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
    // Interleave the clients so that drift hits all of them alike.
    for _ in 0..n {
        let t0 = Instant::now();
        raw.eval_1_plus_1().await?;
        floor.push(t0.elapsed());
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
        let t0 = Instant::now();
        let v: i64 = page.evaluate("1+1").await?.into_value()?;
        peer.push(t0.elapsed());
        anyhow::ensure!(v == 2);
        let t0 = Instant::now();
        let o = engine
            .evaluate(
                evaluate::EvalRequest::new("1+1"),
                &cdp_transport::Budget::new(Duration::from_secs(5)),
            )
            .await?;
        eng.push(t0.elapsed());
        anyhow::ensure!(o.value == json!(2), "engine: {:?}", o.value);
        let t0 = Instant::now();
        let r = tools.call("browser_evaluate", tool_args.clone()).await;
        tool.push(t0.elapsed());
        anyhow::ensure!(r.to_string().contains('2'), "tool: {r}");
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
