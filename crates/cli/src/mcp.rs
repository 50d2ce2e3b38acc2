//! `tabwarden mcp`: the tools as an MCP server over stdio (rmcp).

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    InitializeResult, ListToolsResult, PaginatedRequestParams, ServerCapabilities, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;
use std::sync::Arc;
use tool_surface::Tools;

/// The MCP handler: every call goes to [`Tools::call`].
#[derive(Clone)]
pub struct Server {
    tools: Arc<Tools>,
}

const INSTRUCTIONS: &str = "Browser tools over Chromium that never hang on native dialogs, cross-site iframes or endless scripts. \
Start with browser_navigate, then browser_snapshot (refs like e3 for click/type). \
If a tool returns error code dialog_pending, answer the dialog with browser_dialog. \
Errors are {\"error\": {code, message, next_step}}; follow next_step.";

fn tool_list() -> Vec<Tool> {
    Tools::list()
        .into_iter()
        .map(|t| {
            let schema = match t.input_schema {
                Value::Object(o) => o,
                _ => Default::default(),
            };
            Tool::new(t.name, t.description, Arc::new(schema))
        })
        .collect()
}

impl ServerHandler for Server {
    fn get_info(&self) -> InitializeResult {
        InitializeResult::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("tabwarden", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "{INSTRUCTIONS} (schema_version {})",
                tool_surface::SCHEMA_VERSION
            ))
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult {
            tools: tool_list(),
            ..Default::default()
        })
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = request.arguments.map(Value::Object).unwrap_or(Value::Null);
        let out = self.tools.call(&request.name, args).await;
        let mut out = out;
        let is_error = out.get("error").is_some();
        // A screenshot's base64 goes once, in the image block; the text and
        // structuredContent keep the rest of the response without `data`.
        let mut image = None;
        if request.name == "browser_screenshot" && !is_error {
            if let Some(obj) = out.as_object_mut() {
                if let (Some(Value::String(data)), Some(mime)) = (
                    obj.remove("data"),
                    obj.get("mime_type")
                        .and_then(Value::as_str)
                        .map(String::from),
                ) {
                    obj.insert("bytes_base64".into(), Value::from(data.len()));
                    obj.insert(
                        "note".into(),
                        Value::from("the image is in this result's image content block"),
                    );
                    image = Some(ContentBlock::image(data, mime));
                }
            }
        }
        let text = serde_json::to_string(&out).unwrap_or_else(|_| "{}".into());
        let mut content = vec![ContentBlock::text(text)];
        content.extend(image);
        let mut result = if is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        };
        result.structured_content = Some(out);
        Ok(result.into())
    }
}

/// Serves MCP on stdin/stdout until the client closes it.
///
/// # Errors
/// When the MCP handshake or transport fails.
///
/// # Cancel safety
/// Cancel safe: dropping it closes the transport.
pub async fn serve(tools: Tools) -> anyhow::Result<()> {
    let server = Server {
        tools: Arc::new(tools),
    };
    let running = server.serve(rmcp::transport::stdio()).await?;
    let reason = running.waiting().await?;
    tracing::info!(?reason, "MCP client closed the session");
    Ok(())
}
