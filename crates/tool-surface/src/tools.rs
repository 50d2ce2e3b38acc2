//! [`Tools`]: dispatch, the dialog gate, and each tool's implementation.

use crate::catalog::{self, parse_args, ToolInfo};
use crate::error::{Error, ErrorCode, Result, ToolError};
use crate::tab::{map_transport, Raced, RefRec, Tab};
use crate::types::*;
use cdp_transport::{Budget, ConnectOptions, Connection, Session, TargetId};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Largest serialized evaluate result kept, bytes; longer ones are cut with a marker.
pub const MAX_RESULT_BYTES: usize = 64 * 1024;
/// Largest AX text kept in a snapshot, bytes; longer text is cut with a marker line.
pub const MAX_SNAPSHOT_BYTES: usize = 48 * 1024;

/// CDP methods that run page script; refused when evaluate is disabled.
pub const SCRIPT_METHODS: [&str; 8] = [
    "Runtime.evaluate",
    "Runtime.callFunctionOn",
    "Runtime.compileScript",
    "Runtime.runScript",
    "Page.addScriptToEvaluateOnNewDocument",
    "Runtime.addBinding",
    "Debugger.evaluateOnCallFrame",
    "Debugger.setScriptSource",
];

/// How [`Tools`] is set up. Every field documents its default.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ToolsConfig {
    /// Allow `browser_evaluate` and script-running `browser_cdp` methods. Default true.
    pub evaluate_enabled: bool,
    /// Dialog policy: `must_respond` (default), `auto_dismiss`, `auto_accept`.
    pub dialog_policy: String,
    /// `must_respond` watchdog: a dialog pending this long is dismissed. Default 300 s.
    pub dialog_timeout: Duration,
    /// Dialog bridge: `off` (default), `on`, `auto`.
    pub bridge: String,
    /// Open a fresh tab (default true) instead of taking over the first page tab.
    pub new_tab: bool,
    /// Options for the CDP connection.
    pub connect_options: ConnectOptions,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        Self {
            evaluate_enabled: true,
            dialog_policy: "must_respond".into(),
            dialog_timeout: Duration::from_secs(300),
            bridge: "off".into(),
            new_tab: true,
            connect_options: ConnectOptions::default(),
        }
    }
}

impl ToolsConfig {
    /// Sets [`ToolsConfig::evaluate_enabled`].
    pub fn evaluate_enabled(mut self, on: bool) -> Self {
        self.evaluate_enabled = on;
        self
    }
    /// Sets [`ToolsConfig::dialog_policy`] (validated by [`Tools::connect`]).
    pub fn dialog_policy(mut self, p: impl Into<String>) -> Self {
        self.dialog_policy = p.into();
        self
    }
    /// Sets [`ToolsConfig::dialog_timeout`].
    pub fn dialog_timeout(mut self, d: Duration) -> Self {
        self.dialog_timeout = d;
        self
    }
    /// Sets [`ToolsConfig::bridge`] (validated by [`Tools::connect`]).
    pub fn bridge(mut self, b: impl Into<String>) -> Self {
        self.bridge = b.into();
        self
    }
    /// Sets [`ToolsConfig::new_tab`].
    pub fn new_tab(mut self, on: bool) -> Self {
        self.new_tab = on;
        self
    }
    fn validate(&self) -> Result<()> {
        if !["must_respond", "auto_dismiss", "auto_accept"].contains(&self.dialog_policy.as_str()) {
            return Err(Error::Config {
                field: "dialog_policy".into(),
                reason: format!(
                    "{:?} is not one of must_respond, auto_dismiss, auto_accept",
                    self.dialog_policy
                ),
            });
        }
        if !["off", "on", "auto"].contains(&self.bridge.as_str()) {
            return Err(Error::Config {
                field: "bridge".into(),
                reason: format!("{:?} is not one of off, on, auto", self.bridge),
            });
        }
        Ok(())
    }
}

/// The agent tools over one browser connection and its current tab.
///
/// Cheap to share behind an `Arc`; calls may run concurrently (a snapshot
/// while an evaluate is pending is fine).
pub struct Tools {
    conn: Connection,
    config: ToolsConfig,
    tab: Mutex<Arc<Tab>>,
    next_ref: Mutex<u64>,
}

impl std::fmt::Debug for Tools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tools")
            .field("endpoint", &self.conn.endpoint().to_string())
            .finish_non_exhaustive()
    }
}

fn to_json<T: Serialize>(r: std::result::Result<T, ToolError>) -> Value {
    match r {
        Ok(v) => serde_json::to_value(v).unwrap_or_else(|e| {
            ToolError::internal(format!("cannot encode the response: {e}")).to_json()
        }),
        Err(e) => e.to_json(),
    }
}

fn budget_of(timeout_ms: Option<u64>) -> std::result::Result<Budget, ToolError> {
    Budget::from_timeout_ms(timeout_ms).map_err(|e| ToolError::invalid("timeout_ms", e.to_string()))
}

impl Tools {
    /// Connects to a CDP endpoint (`ws://…` or `http://host:port`) and opens
    /// (or takes over) a tab.
    ///
    /// # Errors
    /// [`Error::Config`] for a bad policy or bridge name; [`Error::Browser`]
    /// when connecting or attaching fails.
    ///
    /// # Cancel safety
    /// Not cancel safe: a dropped future may leave a new blank tab open.
    pub async fn connect(endpoint: &str, config: ToolsConfig) -> Result<Tools> {
        config.validate()?;
        let conn = Connection::connect(endpoint, config.connect_options.clone()).await?;
        let budget = Budget::new(Duration::from_secs(20));
        let target = if config.new_tab {
            None
        } else {
            let v = conn
                .browser()
                .call("Target.getTargets", json!({}), budget.clone())
                .await?;
            v["targetInfos"]
                .as_array()
                .and_then(|a| a.iter().find(|t| t["type"] == "page"))
                .and_then(|t| t["targetId"].as_str())
                .map(TargetId::new)
        };
        let target = match target {
            Some(t) => t,
            None => {
                let v = conn
                    .browser()
                    .call(
                        "Target.createTarget",
                        json!({"url": "about:blank"}),
                        budget.clone(),
                    )
                    .await?;
                TargetId::new(v["targetId"].as_str().unwrap_or_default())
            }
        };
        let tab = Tab::attach(conn.clone(), target, config.clone(), &budget)
            .await
            .map_err(|e| Error::Supervisor { reason: e.message })?;
        Ok(Tools {
            conn,
            config,
            tab: Mutex::new(tab),
            next_ref: Mutex::new(0),
        })
    }

    /// Every tool with its description and input schema.
    pub fn list() -> Vec<ToolInfo> {
        catalog::list()
    }

    /// The connection in use.
    pub fn connection(&self) -> &Connection {
        &self.conn
    }

    fn tab(&self) -> Arc<Tab> {
        self.tab.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Calls tool `name` with `args` (a JSON object; `null` means `{}`).
    ///
    /// Returns the tool's response object, or `{"error": ToolError}`. Never
    /// panics; bad arguments give `invalid_argument` naming the field.
    ///
    /// # Cancel safety
    /// Cancel safe with respect to this crate's state; the browser may still
    /// run a command that was already sent.
    pub async fn call(&self, name: &str, args: Value) -> Value {
        let start = Instant::now();
        let out = match name {
            "browser_navigate" => match parse_args(name, args) {
                Ok(r) => to_json(self.navigate(r).await),
                Err(e) => e.to_json(),
            },
            "browser_snapshot" => match parse_args(name, args) {
                Ok(r) => to_json(self.snapshot(r).await),
                Err(e) => e.to_json(),
            },
            "browser_click" => match parse_args(name, args) {
                Ok(r) => to_json(self.click(r).await),
                Err(e) => e.to_json(),
            },
            "browser_type" => match parse_args(name, args) {
                Ok(r) => to_json(self.type_text(r).await),
                Err(e) => e.to_json(),
            },
            "browser_press_key" => match parse_args(name, args) {
                Ok(r) => to_json(self.press_key(r).await),
                Err(e) => e.to_json(),
            },
            "browser_evaluate" => match parse_args(name, args) {
                Ok(r) => to_json(self.evaluate(r).await),
                Err(e) => e.to_json(),
            },
            "browser_dialog" => match parse_args(name, args) {
                Ok(r) => to_json(self.dialog(r).await),
                Err(e) => e.to_json(),
            },
            "browser_cdp" => match parse_args(name, args) {
                Ok(r) => to_json(self.cdp(r).await),
                Err(e) => e.to_json(),
            },
            "browser_screenshot" => match parse_args(name, args) {
                Ok(r) => to_json(self.screenshot(r).await),
                Err(e) => e.to_json(),
            },
            "browser_console" => match parse_args(name, args) {
                Ok(r) => to_json(Ok(self.console(r))),
                Err(e) => e.to_json(),
            },
            "browser_tabs" => match parse_args(name, args) {
                Ok(r) => to_json(self.tabs(r).await),
                Err(e) => e.to_json(),
            },
            other => ToolError::new(ErrorCode::UnknownTool, format!("no tool named {other:?}"))
                .next(format!("use one of: {}", catalog::TOOL_NAMES.join(", ")))
                .to_json(),
        };
        let code = out
            .get("error")
            .and_then(|e| e.get("code"))
            .and_then(Value::as_str)
            .unwrap_or("ok");
        tracing::info!(
            tool = name,
            code,
            elapsed_ms = start.elapsed().as_millis() as u64,
            "tool call"
        );
        out
    }

    // ------------------------------------------------------------ navigate

    /// `browser_navigate`.
    ///
    /// # Errors
    /// `invalid_argument`, `navigation_failed`, `timeout`, `browser_closed`.
    ///
    /// # Cancel safety
    /// Cancel safe; the navigation may still happen.
    pub async fn navigate(
        &self,
        req: NavigateRequest,
    ) -> std::result::Result<NavigateResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let url = req.url.trim();
        if url.is_empty() || !url.contains(':') || url.contains(char::is_whitespace) {
            return Err(
                ToolError::invalid("url", format!("{url:?} is not an absolute URL")).next(
                    "pass an absolute URL such as https://example.com/ or file:///path/page.html",
                ),
            );
        }
        let tab = self.tab();
        if let Some(r) = self.conn.closed_reason() {
            return Err(ToolError::browser_closed(r));
        }
        let before = tab.load_seq();
        let nav = tab
            .page
            .call("Page.navigate", json!({"url": url}), budget.clone());
        let reply = match tab.race_dialog(nav).await {
            Raced::Dialog(d) => {
                return Ok(NavigateResponse {
                    url: url.into(),
                    status: "dialog_opened".into(),
                    title: None,
                    dialog: Some(d),
                })
            }
            Raced::Done(r) => r.map_err(|e| map_transport(&e, "browser_navigate"))?,
        };
        if let Some(err) = reply["errorText"].as_str().filter(|s| !s.is_empty()) {
            return Err(ToolError::new(ErrorCode::NavigationFailed, format!("Chromium could not load {url}: {err}"))
                .next("check the URL (scheme, host, port) and that the server is up, then call browser_navigate again"));
        }
        if reply.get("loaderId").is_none() {
            // Same-document navigation: no load event comes.
            return Ok(NavigateResponse {
                url: url.into(),
                status: "loaded".into(),
                title: None,
                dialog: None,
            });
        }
        if let Some(d) = tab.wait_load_or_dialog(before, &budget).await? {
            return Ok(NavigateResponse {
                url: url.into(),
                status: "dialog_opened".into(),
                title: None,
                dialog: Some(d),
            });
        }
        let title = tab
            .page
            .call(
                "Runtime.evaluate",
                json!({"expression": "document.title", "returnByValue": true}),
                budget.child(Duration::from_secs(2)),
            )
            .await
            .ok()
            .and_then(|v| v["result"]["value"].as_str().map(String::from))
            .filter(|t| !t.is_empty());
        Ok(NavigateResponse {
            url: tab.main_url(),
            status: "loaded".into(),
            title,
            dialog: None,
        })
    }

    // ------------------------------------------------------------ snapshot

    /// `browser_snapshot`.
    ///
    /// # Errors
    /// `invalid_argument` (timeout_ms); AX failures become a `note`, not an error.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn snapshot(
        &self,
        req: SnapshotRequest,
    ) -> std::result::Result<SnapshotResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let tab = self.tab();
        let (snapshot, note) = if let Some(d) = tab.first_pending() {
            (None, Some(format!("accessibility text omitted: dialog {} blocks the page; answer it with browser_dialog", d.id)))
        } else if let Some(r) = self.conn.closed_reason() {
            (None, Some(format!("browser connection closed: {r}")))
        } else {
            match tab.race_dialog(self.ax_text(&tab, &budget)).await {
                Raced::Done(Ok(t)) => (Some(t), None),
                Raced::Done(Err(e)) => (None, Some(format!("accessibility text unavailable: {}", e.message))),
                Raced::Dialog(d) => (None, Some(format!("accessibility text omitted: dialog {} opened; answer it with browser_dialog", d.id))),
            }
        };
        let (_, console_total) = tab.console();
        Ok(SnapshotResponse {
            schema_version: crate::SCHEMA_VERSION,
            url: tab.main_url(),
            snapshot,
            note,
            pending_dialogs: tab.pending(),
            recent_dialogs: tab.recent(),
            frame_tree: tab.frame_tree(),
            console_errors: console_total,
            supervisor: tab.supervisor(),
        })
    }

    async fn ax_text(
        &self,
        tab: &Arc<Tab>,
        budget: &Budget,
    ) -> std::result::Result<String, ToolError> {
        let frames = tab.frames_for_ax();
        let Some((main_id, _, main_session, _)) = frames.iter().find(|f| f.1.is_none()).cloned()
        else {
            return Err(ToolError::internal("the tab has no main frame yet"));
        };
        let generation = tab.generation();
        // Refs are numbered afresh per snapshot; the previous snapshot's refs are replaced.
        *self.next_ref.lock().unwrap_or_else(|p| p.into_inner()) = 0;
        let mut refs: HashMap<String, RefRec> = HashMap::new();
        let mut out = String::new();
        let mut visited = Vec::new();
        self.render_frame(
            &frames,
            &main_id,
            &main_session,
            true,
            0,
            budget,
            generation,
            &mut refs,
            &mut out,
            &mut visited,
        )
        .await?;
        tab.store_refs(refs);
        if out.len() > MAX_SNAPSHOT_BYTES {
            let mut cut = MAX_SNAPSHOT_BYTES;
            while !out.is_char_boundary(cut) {
                cut -= 1;
            }
            out.truncate(cut);
            out.push_str("\n- … (snapshot truncated)\n");
        }
        Ok(out)
    }

    #[allow(clippy::too_many_arguments)]
    fn render_frame<'a>(
        &'a self,
        frames: &'a [(String, Option<String>, Session, bool)],
        frame_id: &'a str,
        session: &'a Session,
        root_of_session: bool,
        depth: usize,
        budget: &'a Budget,
        generation: u64,
        refs: &'a mut HashMap<String, RefRec>,
        out: &'a mut String,
        visited: &'a mut Vec<String>,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = std::result::Result<(), ToolError>> + Send + 'a>,
    > {
        Box::pin(async move {
            if visited.iter().any(|v| v == frame_id) || visited.len() > 40 {
                return Ok(());
            }
            visited.push(frame_id.to_string());
            let params = if root_of_session {
                json!({})
            } else {
                json!({"frameId": frame_id})
            };
            let tree = session
                .call("Accessibility.getFullAXTree", params, budget.clone())
                .await
                .map_err(|e| map_transport(&e, "reading the accessibility tree"))?;
            let nodes = tree["nodes"].as_array().cloned().unwrap_or_default();
            let by_id: HashMap<&str, &Value> = nodes
                .iter()
                .filter_map(|n| Some((n["nodeId"].as_str()?, n)))
                .collect();
            let Some(root) = nodes.first() else {
                return Ok(());
            };
            // Walk with an explicit stack of (node, depth, parent name).
            let mut lines: Vec<(usize, &Value, String)> = Vec::new();
            flatten(root, &by_id, depth, "", &mut lines);
            for (d, node, _) in lines {
                let role = node["role"]["value"].as_str().unwrap_or_default();
                let name = node["name"]["value"].as_str().unwrap_or_default();
                let backend = node["backendDOMNodeId"].as_i64();
                let indent = "  ".repeat(d);
                let shown_role = match role {
                    "StaticText" => "text",
                    "Iframe" => "iframe",
                    r => r,
                };
                let mut line = format!("{indent}- {shown_role}");
                if !name.is_empty() {
                    line.push_str(&format!(
                        " {}",
                        serde_json::Value::String(name.chars().take(200).collect())
                    ));
                }
                if let Some(v) = node["value"]["value"].as_str().filter(|v| !v.is_empty()) {
                    line.push_str(&format!(
                        " value={}",
                        Value::String(v.chars().take(100).collect())
                    ));
                }
                if let (true, Some(b)) = (wants_ref(role), backend) {
                    let id = {
                        let mut n = self.next_ref.lock().unwrap_or_else(|p| p.into_inner());
                        *n += 1;
                        format!("e{}", *n)
                    };
                    line.push_str(&format!(" [ref={id}]"));
                    refs.insert(
                        id,
                        RefRec {
                            backend_node_id: b,
                            session: session.clone(),
                            generation,
                        },
                    );
                }
                out.push_str(&line);
                out.push('\n');
                if role == "Iframe" {
                    if let Some(b) = backend {
                        let desc = session
                            .call(
                                "DOM.describeNode",
                                json!({"backendNodeId": b}),
                                budget.clone(),
                            )
                            .await;
                        let child = desc
                            .ok()
                            .and_then(|v| v["node"]["frameId"].as_str().map(String::from));
                        if let Some(child) = child {
                            if let Some((cid, _, csess, is_oopif)) =
                                frames.iter().find(|f| f.0 == child)
                            {
                                let r = self
                                    .render_frame(
                                        frames,
                                        cid,
                                        csess,
                                        *is_oopif,
                                        d + 1,
                                        budget,
                                        generation,
                                        refs,
                                        out,
                                        visited,
                                    )
                                    .await;
                                if let Err(e) = r {
                                    out.push_str(&format!(
                                        "{indent}  - (frame content unavailable: {})\n",
                                        e.message
                                    ));
                                }
                            }
                        }
                    }
                }
            }
            Ok(())
        })
    }

    // ------------------------------------------------------------ click / type / key

    async fn on_ref(
        &self,
        tool: &str,
        target: &str,
        function: &str,
        args: Vec<Value>,
        budget: &Budget,
    ) -> std::result::Result<Option<DialogView>, ToolError> {
        let tab = self.tab();
        tab.gate(tool)?;
        let rec = tab.lookup_ref(target)?;
        let resolved = rec
            .session
            .call(
                "DOM.resolveNode",
                json!({"backendNodeId": rec.backend_node_id}),
                budget.clone(),
            )
            .await
            .map_err(|e| match e.protocol_message() {
                Some(_) => ToolError::new(
                    ErrorCode::StaleRef,
                    format!("ref {target:?} no longer exists in the page ({e})"),
                )
                .next("call browser_snapshot for fresh refs"),
                None => map_transport(&e, tool),
            })?;
        let Some(object_id) = resolved["object"]["objectId"].as_str() else {
            return Err(ToolError::new(
                ErrorCode::StaleRef,
                format!("ref {target:?} could not be resolved"),
            )
            .next("call browser_snapshot for fresh refs"));
        };
        let call = rec.session.call(
            "Runtime.callFunctionOn",
            json!({"objectId": object_id, "functionDeclaration": function, "arguments": args, "awaitPromise": false, "returnByValue": true, "userGesture": true}),
            budget.clone(),
        );
        match tab.race_dialog(call).await {
            Raced::Dialog(d) => Ok(Some(d)),
            Raced::Done(Ok(v)) => {
                if let Some(ex) = v.get("exceptionDetails") {
                    return Err(ToolError::new(
                        ErrorCode::ScriptError,
                        format!("{tool} failed in the page: {}", exception_text(ex)),
                    ));
                }
                Ok(None)
            }
            Raced::Done(Err(e)) if e.is_timeout() => {
                let terminated = terminate(&rec.session).await;
                Err(ToolError::new(
                    ErrorCode::Timeout,
                    format!(
                        "{tool} did not finish within timeout_ms={}: the page's script kept running{}",
                        budget.total().as_millis(),
                        if terminated { " and was terminated (Runtime.terminateExecution); the tab is usable" } else { "" }
                    ),
                )
                .next("call browser_snapshot to see the page state"))
            }
            Raced::Done(Err(e)) => Err(map_transport(&e, tool)),
        }
    }

    fn action(target: Option<String>, dialog: Option<DialogView>) -> ActionResponse {
        ActionResponse {
            status: if dialog.is_some() {
                "dialog_opened".into()
            } else {
                "done".into()
            },
            target,
            dialog,
        }
    }

    /// `browser_click`.
    ///
    /// # Errors
    /// `dialog_pending`, `unknown_ref`, `stale_ref`, `timeout`, `browser_closed`.
    ///
    /// # Cancel safety
    /// Cancel safe; the click may still happen.
    pub async fn click(&self, req: ClickRequest) -> std::result::Result<ActionResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let f =
            "function(){ this.scrollIntoView({block:'center', inline:'center'}); this.click(); }";
        let d = self
            .on_ref("browser_click", &req.target, f, vec![], &budget)
            .await?;
        Ok(Self::action(Some(req.target), d))
    }

    /// `browser_type`.
    ///
    /// # Errors
    /// As [`Tools::click`].
    ///
    /// # Cancel safety
    /// Cancel safe; the text may still be typed.
    pub async fn type_text(
        &self,
        req: TypeRequest,
    ) -> std::result::Result<ActionResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let f = "function(t){ this.focus(); if ('value' in this) { this.value = t; this.dispatchEvent(new Event('input', {bubbles:true})); this.dispatchEvent(new Event('change', {bubbles:true})); } else { document.execCommand('insertText', false, t); } }";
        let d = self
            .on_ref(
                "browser_type",
                &req.target,
                f,
                vec![json!({"value": req.text})],
                &budget,
            )
            .await?;
        if d.is_some() || !req.submit {
            return Ok(Self::action(Some(req.target), d));
        }
        let d = self.key(&self.tab(), "Enter", &budget).await?;
        Ok(Self::action(Some(req.target), d))
    }

    /// `browser_press_key`.
    ///
    /// # Errors
    /// As [`Tools::click`], and `invalid_argument` for an unknown key.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn press_key(
        &self,
        req: PressKeyRequest,
    ) -> std::result::Result<ActionResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        if key_info(&req.key).is_none() {
            return Err(ToolError::invalid("key", format!("unknown key {:?}", req.key))
                .next("use a KeyboardEvent.key name: Enter, Tab, Escape, Backspace, Delete, ArrowUp/Down/Left/Right, Home, End, PageUp, PageDown, Space, or one character"));
        }
        if let Some(t) = &req.target {
            if let Some(d) = self
                .on_ref(
                    "browser_press_key",
                    t,
                    "function(){ this.focus(); }",
                    vec![],
                    &budget,
                )
                .await?
            {
                return Ok(Self::action(req.target.clone(), Some(d)));
            }
        }
        let tab = self.tab();
        tab.gate("browser_press_key")?;
        let d = self.key(&tab, &req.key, &budget).await?;
        Ok(Self::action(req.target, d))
    }

    async fn key(
        &self,
        tab: &Arc<Tab>,
        key: &str,
        budget: &Budget,
    ) -> std::result::Result<Option<DialogView>, ToolError> {
        let Some((code, vk, text)) = key_info(key) else {
            return Ok(None);
        };
        let key_name = if key == "Space" { " " } else { key };
        let mut down = json!({"type": if text.is_some() { "keyDown" } else { "rawKeyDown" }, "key": key_name, "code": code, "windowsVirtualKeyCode": vk});
        if let Some(t) = &text {
            down["text"] = json!(t);
        }
        let up =
            json!({"type": "keyUp", "key": key_name, "code": code, "windowsVirtualKeyCode": vk});
        let page = tab.page.clone();
        let b = budget.clone();
        let send = async move {
            page.call("Input.dispatchKeyEvent", down, b.clone()).await?;
            page.call("Input.dispatchKeyEvent", up, b).await
        };
        match tab.race_dialog(send).await {
            Raced::Dialog(d) => Ok(Some(d)),
            Raced::Done(Ok(_)) => Ok(None),
            Raced::Done(Err(e)) => Err(map_transport(&e, "browser_press_key")),
        }
    }

    // ------------------------------------------------------------ evaluate

    /// `browser_evaluate`.
    ///
    /// # Errors
    /// `evaluate_disabled`, `dialog_pending`, `timeout` (script terminated),
    /// `script_error`, `unknown_frame`, `unknown_ref`, `stale_ref`, `invalid_argument`.
    ///
    /// # Cancel safety
    /// Cancel safe; a script already sent may keep running until its deadline.
    pub async fn evaluate(
        &self,
        req: EvaluateRequest,
    ) -> std::result::Result<EvaluateResponse, ToolError> {
        if !self.config.evaluate_enabled {
            return Err(evaluate_disabled("browser_evaluate"));
        }
        let budget = budget_of(req.timeout_ms)?;
        let start = Instant::now();
        let tab = self.tab();
        tab.gate("browser_evaluate")?;
        let (session, call) = if let Some(r) = &req.target {
            if req.frame_id.is_some() {
                return Err(ToolError::invalid(
                    "frame_id",
                    "give either ref or frame_id, not both (a ref already names its frame)",
                ));
            }
            let rec = tab.lookup_ref(r)?;
            let resolved = rec
                .session
                .call(
                    "DOM.resolveNode",
                    json!({"backendNodeId": rec.backend_node_id}),
                    budget.clone(),
                )
                .await
                .map_err(|e| {
                    ToolError::new(
                        ErrorCode::StaleRef,
                        format!("ref {r:?} no longer exists in the page ({e})"),
                    )
                    .next("call browser_snapshot for fresh refs")
                })?;
            let oid = resolved["object"]["objectId"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let p = json!({"objectId": oid, "functionDeclaration": req.expression, "arguments": [{"objectId": oid}], "awaitPromise": true, "returnByValue": true, "userGesture": true});
            (rec.session.clone(), ("Runtime.callFunctionOn", p))
        } else {
            let mut p = json!({"expression": req.expression, "awaitPromise": true, "returnByValue": true, "userGesture": true, "replMode": true});
            let session = match &req.frame_id {
                None => tab.page.clone(),
                Some(fid) => {
                    let (session, oopif_root) = tab.frame_session(fid)?;
                    if !oopif_root && !tab.is_main_frame(fid) {
                        let ctx = tab.context_for(&session, fid).ok_or_else(|| {
                            ToolError::new(
                                ErrorCode::UnknownFrame,
                                format!(
                                    "frame {fid:?} has no JavaScript context yet (still loading?)"
                                ),
                            )
                            .next("call browser_snapshot, then retry")
                        })?;
                        p["contextId"] = json!(ctx);
                    }
                    session
                }
            };
            (session, ("Runtime.evaluate", p))
        };
        let fut = session.call(call.0, call.1, budget.clone());
        let v = match tab.race_dialog(fut).await {
            Raced::Dialog(d) => return Err(ToolError::dialog_pending(d, "browser_evaluate")),
            Raced::Done(Ok(v)) => v,
            Raced::Done(Err(e)) if e.is_timeout() => {
                let terminated = terminate(&session).await;
                return Err(ToolError::new(
                    ErrorCode::Timeout,
                    format!(
                        "evaluate did not finish within timeout_ms={}: {}",
                        budget.total().as_millis(),
                        if terminated {
                            "the script was terminated (Runtime.terminateExecution); the tab is usable"
                        } else {
                            "its promise never settled (nothing was running)"
                        }
                    ),
                )
                .next("fix the script (an endless loop or a promise that never settles?) or raise timeout_ms (max 120000)"));
            }
            Raced::Done(Err(e)) => {
                if let Some(m) = e.protocol_message() {
                    let hint = if m.contains("serialize")
                        || m.contains("reference chain")
                        || m.contains("by value")
                    {
                        "; the result cannot be returned as JSON (DOM node, cycle, window): return a plain value, e.g. el.outerHTML or JSON.stringify(...)"
                    } else {
                        ""
                    };
                    return Err(ToolError::new(ErrorCode::ScriptError, format!("{m}{hint}")));
                }
                return Err(map_transport(&e, "browser_evaluate"));
            }
        };
        if let Some(ex) = v.get("exceptionDetails") {
            return Err(ToolError::new(
                ErrorCode::ScriptError,
                format!("the script threw: {}", exception_text(ex)),
            )
            .next("fix the expression and call browser_evaluate again"));
        }
        let r = &v["result"];
        let kind = r["subtype"]
            .as_str()
            .filter(|s| *s == "node" || *s == "bigint")
            .unwrap_or(r["type"].as_str().unwrap_or("undefined"));
        let mut value = if let Some(u) = r.get("unserializableValue") {
            u.clone()
        } else if kind == "undefined" {
            json!("undefined")
        } else {
            r.get("value").cloned().unwrap_or(Value::Null)
        };
        let mut truncated = false;
        let text = value.to_string();
        if text.len() > MAX_RESULT_BYTES {
            let mut cut = MAX_RESULT_BYTES;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            value = Value::String(format!(
                "{}… (truncated from {} bytes)",
                &text[..cut],
                text.len()
            ));
            truncated = true;
        }
        Ok(EvaluateResponse {
            value,
            kind: kind.into(),
            truncated,
            elapsed_ms: start.elapsed().as_millis() as u64,
        })
    }

    // ------------------------------------------------------------ dialog

    /// `browser_dialog`.
    ///
    /// # Errors
    /// `no_dialog`, `ambiguous_dialog` (with `candidates`), `browser_closed`.
    ///
    /// # Cancel safety
    /// Not cancel safe: the answer may be sent and not recorded.
    pub async fn dialog(
        &self,
        req: DialogRequest,
    ) -> std::result::Result<DialogResponse, ToolError> {
        let budget = Budget::new(Duration::from_secs(10));
        let tab = self.tab();
        let d = tab.respond(&req, &budget).await?;
        Ok(DialogResponse {
            dialog: d,
            action: req.action,
            pending_dialogs: tab.pending(),
        })
    }

    // ------------------------------------------------------------ cdp

    /// `browser_cdp`.
    ///
    /// # Errors
    /// `evaluate_disabled`, `dialog_pending`, `unknown_frame`, `not_oopif`, `cdp_error`, `timeout`.
    ///
    /// # Cancel safety
    /// Cancel safe; the command may still run.
    pub async fn cdp(&self, req: CdpRequest) -> std::result::Result<CdpResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let m = req.method.as_str();
        if !m.contains('.') || m.starts_with('.') || m.ends_with('.') {
            return Err(
                ToolError::invalid("method", format!("{m:?} is not a CDP method name"))
                    .next("use Domain.method, e.g. DOM.getDocument"),
            );
        }
        if !self.config.evaluate_enabled
            && (SCRIPT_METHODS.contains(&m) || m.starts_with("Debugger."))
        {
            return Err(evaluate_disabled(m));
        }
        let tab = self.tab();
        let browser_level = ["Target.", "Browser.", "SystemInfo.", "Storage."]
            .iter()
            .any(|p| m.starts_with(p));
        let session = match &req.frame_id {
            None => tab.page.clone(),
            Some(fid) => {
                let (s, oopif_root) = tab.frame_session(fid)?;
                if !oopif_root && !tab.is_main_frame(fid) {
                    return Err(ToolError::new(
                        ErrorCode::NotOopif,
                        format!("frame {fid:?} runs in its parent's process and has no CDP session of its own"),
                    )
                    .next("use browser_evaluate with this frame_id, or browser_cdp without frame_id and pass frameId in params"));
                }
                s
            }
        };
        if !browser_level && m != "Page.handleJavaScriptDialog" {
            tab.gate("browser_cdp")?;
        }
        let params = Value::Object(req.params.unwrap_or_default());
        let session = if browser_level {
            self.conn.browser()
        } else {
            session
        };
        let fut = session.call(m, params, budget.clone());
        let r = if browser_level || m == "Page.handleJavaScriptDialog" {
            fut.await
        } else {
            match tab.race_dialog(fut).await {
                Raced::Dialog(d) => return Err(ToolError::dialog_pending(d, "browser_cdp")),
                Raced::Done(r) => r,
            }
        };
        match r {
            Ok(result) => Ok(CdpResponse { result }),
            Err(e @ cdp_transport::Error::Protocol { .. }) => Err(ToolError::new(ErrorCode::CdpError, e.to_string())
                .next("check the method name and params against the CDP reference (chromedevtools.github.io/devtools-protocol)")),
            Err(e) => Err(map_transport(&e, m)),
        }
    }

    // ------------------------------------------------------------ screenshot

    /// `browser_screenshot`.
    ///
    /// # Errors
    /// `dialog_pending`, `timeout`, `browser_closed`.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn screenshot(
        &self,
        req: ScreenshotRequest,
    ) -> std::result::Result<ScreenshotResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let tab = self.tab();
        tab.gate("browser_screenshot")?;
        let (fmt, mime) = match req.format {
            ImageFormat::Png => ("png", "image/png"),
            ImageFormat::Jpeg => ("jpeg", "image/jpeg"),
        };
        let mut p = json!({"format": fmt});
        if req.format == ImageFormat::Jpeg {
            p["quality"] = json!(80);
        }
        if req.full_page {
            p["captureBeyondViewport"] = json!(true);
            if let Ok(m) = tab
                .page
                .call("Page.getLayoutMetrics", json!({}), budget.clone())
                .await
            {
                let s = &m["cssContentSize"];
                if let (Some(w), Some(h)) = (s["width"].as_f64(), s["height"].as_f64()) {
                    p["clip"] =
                        json!({"x": 0, "y": 0, "width": w, "height": h.min(16384.0), "scale": 1});
                }
            }
        }
        let fut = tab.page.call("Page.captureScreenshot", p, budget.clone());
        let v = match tab.race_dialog(fut).await {
            Raced::Dialog(d) => return Err(ToolError::dialog_pending(d, "browser_screenshot")),
            Raced::Done(r) => r.map_err(|e| map_transport(&e, "browser_screenshot"))?,
        };
        let data = v["data"].as_str().unwrap_or_default().to_string();
        let bytes = data.len() / 4 * 3;
        Ok(ScreenshotResponse {
            mime_type: mime.into(),
            bytes,
            data,
        })
    }

    // ------------------------------------------------------------ console

    /// `browser_console`. Never fails.
    pub fn console(&self, req: ConsoleRequest) -> ConsoleResponse {
        let (mut errors, total) = self.tab().console();
        let limit = req.limit.unwrap_or(20);
        if errors.len() > limit {
            errors.drain(..errors.len() - limit);
        }
        ConsoleResponse { errors, total }
    }

    // ------------------------------------------------------------ tabs

    /// `browser_tabs`.
    ///
    /// # Errors
    /// `unknown_tab`, `invalid_argument`, `browser_closed`.
    ///
    /// # Cancel safety
    /// Not cancel safe: a tab may be opened or closed without the switch.
    pub async fn tabs(&self, req: TabsRequest) -> std::result::Result<TabsResponse, ToolError> {
        let budget = Budget::new(Duration::from_secs(15));
        match req.action {
            TabsAction::List => {}
            TabsAction::New => {
                let url = req.url.clone().unwrap_or_else(|| "about:blank".into());
                let v = self
                    .conn
                    .browser()
                    .call("Target.createTarget", json!({"url": url}), budget.clone())
                    .await
                    .map_err(|e| map_transport(&e, "opening a tab"))?;
                let id = TargetId::new(v["targetId"].as_str().unwrap_or_default());
                self.switch(id, &budget).await?;
            }
            TabsAction::Select | TabsAction::Close => {
                let Some(id) = req.tab_id.clone() else {
                    return Err(ToolError::invalid("tab_id", "select and close need tab_id")
                        .next("call browser_tabs to list tab ids"));
                };
                let tabs = self.list_tabs(&budget).await?;
                if !tabs.iter().any(|t| t.tab_id == id) {
                    return Err(
                        ToolError::new(ErrorCode::UnknownTab, format!("no tab {id:?}"))
                            .next("call browser_tabs to list tab ids"),
                    );
                }
                if req.action == TabsAction::Select {
                    if self.tab().target_id.as_str() != id {
                        self.switch(TargetId::new(&id), &budget).await?;
                    }
                } else {
                    let _ = self
                        .conn
                        .browser()
                        .call(
                            "Target.closeTarget",
                            json!({"targetId": id}),
                            budget.clone(),
                        )
                        .await;
                    if self.tab().target_id.as_str() == id {
                        let next = tabs
                            .iter()
                            .find(|t| t.tab_id != id)
                            .map(|t| TargetId::new(&t.tab_id));
                        let next = match next {
                            Some(n) => n,
                            None => {
                                let v = self
                                    .conn
                                    .browser()
                                    .call(
                                        "Target.createTarget",
                                        json!({"url": "about:blank"}),
                                        budget.clone(),
                                    )
                                    .await
                                    .map_err(|e| map_transport(&e, "opening a tab"))?;
                                TargetId::new(v["targetId"].as_str().unwrap_or_default())
                            }
                        };
                        self.switch(next, &budget).await?;
                    }
                }
            }
        }
        Ok(TabsResponse {
            tabs: self.list_tabs(&budget).await?,
        })
    }

    async fn switch(&self, id: TargetId, budget: &Budget) -> std::result::Result<(), ToolError> {
        let tab = Tab::attach(self.conn.clone(), id, self.config.clone(), budget).await?;
        *self.tab.lock().unwrap_or_else(|p| p.into_inner()) = tab;
        Ok(())
    }

    async fn list_tabs(&self, budget: &Budget) -> std::result::Result<Vec<TabView>, ToolError> {
        let v = self
            .conn
            .browser()
            .call("Target.getTargets", json!({}), budget.clone())
            .await
            .map_err(|e| map_transport(&e, "listing tabs"))?;
        let current = self.tab().target_id.clone();
        Ok(v["targetInfos"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter(|t| t["type"] == "page")
                    .map(|t| TabView {
                        tab_id: t["targetId"].as_str().unwrap_or_default().into(),
                        url: t["url"].as_str().unwrap_or_default().into(),
                        title: t["title"].as_str().unwrap_or_default().into(),
                        current: t["targetId"].as_str() == Some(current.as_str()),
                    })
                    .collect()
            })
            .unwrap_or_default())
    }
}

fn evaluate_disabled(what: &str) -> ToolError {
    ToolError::new(
        ErrorCode::EvaluateDisabled,
        format!(
            "{what} runs page script, and this server runs with evaluate disabled (--no-evaluate)"
        ),
    )
    .next("use browser_snapshot, browser_click, browser_type and browser_press_key instead")
}

async fn terminate(session: &Session) -> bool {
    session
        .call(
            "Runtime.terminateExecution",
            json!({}),
            Budget::new(Duration::from_secs(2)),
        )
        .await
        .is_ok()
}

fn exception_text(ex: &Value) -> String {
    ex["exception"]["description"]
        .as_str()
        .or(ex["exception"]["value"].as_str())
        .or(ex["text"].as_str())
        .unwrap_or("exception")
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}

fn wants_ref(role: &str) -> bool {
    matches!(
        role,
        "button"
            | "link"
            | "textbox"
            | "searchbox"
            | "checkbox"
            | "radio"
            | "combobox"
            | "listbox"
            | "option"
            | "menuitem"
            | "menuitemcheckbox"
            | "menuitemradio"
            | "tab"
            | "switch"
            | "slider"
            | "spinbutton"
            | "Iframe"
            | "heading"
            | "textarea"
    )
}

fn transparent(node: &Value) -> bool {
    if node["ignored"].as_bool() == Some(true) {
        return true;
    }
    let role = node["role"]["value"].as_str().unwrap_or_default();
    let name = node["name"]["value"].as_str().unwrap_or_default();
    matches!(
        role,
        "none" | "presentation" | "InlineTextBox" | "LineBreak" | "RootWebArea" | "WebArea" | ""
    ) || (matches!(
        role,
        "generic" | "paragraph" | "Section" | "div" | "LayoutTableCell" | "group"
    ) && name.is_empty())
}

fn flatten<'a>(
    node: &'a Value,
    by_id: &HashMap<&str, &'a Value>,
    depth: usize,
    parent_name: &str,
    out: &mut Vec<(usize, &'a Value, String)>,
) {
    if out.len() > 5000 {
        return;
    }
    let name = node["name"]["value"].as_str().unwrap_or_default();
    let role = node["role"]["value"].as_str().unwrap_or_default();
    let (child_depth, pname) = if transparent(node)
        || (role == "StaticText" && (name.trim().is_empty() || name == parent_name))
    {
        (depth, parent_name.to_string())
    } else {
        out.push((depth, node, parent_name.to_string()));
        (depth + 1, name.to_string())
    };
    if role == "StaticText" {
        return;
    }
    if let Some(children) = node["childIds"].as_array() {
        for c in children {
            if let Some(child) = c.as_str().and_then(|id| by_id.get(id)) {
                flatten(child, by_id, child_depth, &pname, out);
            }
        }
    }
}

/// `(code, windowsVirtualKeyCode, text)` for a key name.
fn key_info(key: &str) -> Option<(String, i64, Option<String>)> {
    let named = |code: &str, vk: i64, text: Option<&str>| {
        Some((code.to_string(), vk, text.map(String::from)))
    };
    match key {
        "Enter" => named("Enter", 13, Some("\r")),
        "Tab" => named("Tab", 9, None),
        "Escape" => named("Escape", 27, None),
        "Backspace" => named("Backspace", 8, None),
        "Delete" => named("Delete", 46, None),
        "ArrowLeft" => named("ArrowLeft", 37, None),
        "ArrowUp" => named("ArrowUp", 38, None),
        "ArrowRight" => named("ArrowRight", 39, None),
        "ArrowDown" => named("ArrowDown", 40, None),
        "Home" => named("Home", 36, None),
        "End" => named("End", 35, None),
        "PageUp" => named("PageUp", 33, None),
        "PageDown" => named("PageDown", 34, None),
        "Space" | " " => named("Space", 32, Some(" ")),
        k => {
            let mut chars = k.chars();
            let c = chars.next()?;
            if chars.next().is_some() {
                return None;
            }
            let up = c.to_ascii_uppercase();
            let code = if up.is_ascii_alphabetic() {
                format!("Key{up}")
            } else if c.is_ascii_digit() {
                format!("Digit{c}")
            } else {
                String::new()
            };
            Some((
                code,
                if up.is_ascii_alphanumeric() {
                    up as i64
                } else {
                    0
                },
                Some(c.to_string()),
            ))
        }
    }
}
