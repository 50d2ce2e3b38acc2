//! The tool catalogue: names, descriptions, input schemas, argument parsing.

use crate::error::ToolError;
use crate::types::*;
use schemars::JsonSchema;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// One tool as an agent runtime lists it (MCP `tools/list`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolInfo {
    /// Tool name, e.g. `browser_snapshot`.
    pub name: &'static str,
    /// What it does and when to use it.
    pub description: &'static str,
    /// JSON Schema (draft 2020-12) of the arguments object, generated from the request type.
    pub input_schema: Value,
}

/// Every tool name, in the order [`crate::Tools::list`] gives them.
pub const TOOL_NAMES: [&str; 11] = [
    "browser_navigate",
    "browser_snapshot",
    "browser_click",
    "browser_type",
    "browser_press_key",
    "browser_evaluate",
    "browser_dialog",
    "browser_cdp",
    "browser_screenshot",
    "browser_console",
    "browser_tabs",
];

fn schema_of<T: JsonSchema>() -> Value {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|s| {
        s.inline_subschemas = true;
    });
    let mut v = settings
        .into_generator()
        .into_root_schema_for::<T>()
        .to_value();
    if let Some(o) = v.as_object_mut() {
        // Runtimes want a plain object schema; `title` repeats the Rust type name.
        o.remove("title");
        o.remove("$schema");
        o.entry("properties")
            .or_insert_with(|| Value::Object(Default::default()));
    }
    v
}

pub(crate) fn description(name: &str) -> &'static str {
    match name {
        "browser_navigate" => "Load a URL in the current tab. Returns when the page has loaded (status \"loaded\", with a note when the document is ready but a subresource still loads at timeout_ms), or at once with status \"dialog_opened\" and the dialog when a native dialog blocks the load (answer it with browser_dialog). A server that never answers is given up at timeout_ms and the tab stays on its previous page.",
        "browser_snapshot" => "The page as accessibility text with refs (`- button \"OK\" [ref=e3]`; cross-site iframes inlined), plus pending_dialogs, recent_dialogs, frame_tree (frame ids, oopif flags), console_errors and supervisor health. Call it first and after every navigation; refs come from the latest snapshot. While a dialog is pending it still answers, without the accessibility text. On a large page the text is cut at 48 KiB: interactive_only: true keeps only buttons, links, form fields and iframes.",
        "browser_click" => "Click an element by ref from the latest browser_snapshot. If the click opens a dialog, returns status \"dialog_opened\" with it.",
        "browser_type" => "Type text into an element (input, textarea, contenteditable) by ref; `submit: true` presses Enter afterwards.",
        "browser_press_key" => "Press one key (KeyboardEvent.key names: Enter, Tab, Escape, ArrowDown, a, ...), optionally focusing a ref first.",
        "browser_evaluate" => "Run a JavaScript expression in the page (or in `frame_id`'s frame, cross-site iframes included), or a function `el => ...` on a ref's element. Statements return the value of the last one, as in the DevTools console. Promises are awaited. A script still running after timeout_ms (default 20000) is terminated and the tab stays usable.",
        "browser_dialog" => "Answer a pending native dialog (alert/confirm/prompt/beforeunload): action accept or dismiss, prompt_text for prompts. With several pending, pass dialog_id. Accepting a beforeunload waits for the navigation it releases and returns its url.",
        "browser_cdp" => "Send a raw Chrome DevTools Protocol command on the page session, or on a cross-site iframe's own session with frame_id (a frame with oopif: true in frame_tree). When the server runs with evaluate disabled, only methods that cannot run script are accepted (reads such as DOM.getDocument, Page.getFrameTree; the error lists them).",
        "browser_screenshot" => "Capture the viewport (or the full page) as PNG or JPEG.",
        "browser_console" => "Console errors, failed asserts and uncaught exceptions of the current tab, newest last.",
        "browser_tabs" => "List tabs, open a new one (its url is loaded as browser_navigate loads it, with the same status and dialog), select one for the other tools, or close one.",
        _ => "",
    }
}

pub(crate) fn input_schema(name: &str) -> Option<Value> {
    Some(match name {
        "browser_navigate" => schema_of::<NavigateRequest>(),
        "browser_snapshot" => schema_of::<SnapshotRequest>(),
        "browser_click" => schema_of::<ClickRequest>(),
        "browser_type" => schema_of::<TypeRequest>(),
        "browser_press_key" => schema_of::<PressKeyRequest>(),
        "browser_evaluate" => schema_of::<EvaluateRequest>(),
        "browser_dialog" => schema_of::<DialogRequest>(),
        "browser_cdp" => schema_of::<CdpRequest>(),
        "browser_screenshot" => schema_of::<ScreenshotRequest>(),
        "browser_console" => schema_of::<ConsoleRequest>(),
        "browser_tabs" => schema_of::<TabsRequest>(),
        _ => return None,
    })
}

/// Every tool with its description and input schema.
pub fn list() -> Vec<ToolInfo> {
    TOOL_NAMES
        .iter()
        .map(|&name| ToolInfo {
            name,
            description: description(name),
            input_schema: input_schema(name).unwrap_or(Value::Null),
        })
        .collect()
}

/// The text between the first pair of backticks of a serde message
/// (``missing field `url` `` → `url`).
fn backticked(msg: &str) -> Option<&str> {
    let start = msg.find('`')? + 1;
    let len = msg[start..].find('`')?;
    Some(&msg[start..start + len])
}

/// Parses a tool's arguments; `null` counts as `{}`.
///
/// # Errors
/// `invalid_argument` naming the field (`field` is a dotted path).
pub fn parse_args<T: DeserializeOwned>(tool: &str, args: Value) -> Result<T, ToolError> {
    let args = match args {
        Value::Null => Value::Object(Default::default()),
        Value::Object(o) => Value::Object(o),
        other => {
            return Err(ToolError::invalid(
                "arguments",
                format!(
                    "{tool} takes a JSON object of arguments, got {}",
                    json_type(&other)
                ),
            ))
        }
    };
    // The keys given, to name an unknown one exactly: serde quotes it in
    // backticks, and a key may hold backticks itself (found by the `tool_args`
    // fuzz target: {"a`b": 1} was reported as field `a`).
    let keys: Vec<String> = args
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    serde_path_to_error::deserialize::<_, T>(args).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.inner().to_string();
        let field = if path == "." || path.is_empty() {
            keys.iter()
                .map(String::as_str)
                .find(|k| inner.starts_with(&format!("unknown field `{k}`,")))
                .or_else(|| backticked(&inner))
                .unwrap_or("arguments")
                .to_string()
        } else {
            path
        };
        // serde's unknown-field message lists every field; keep it, it helps.
        ToolError::invalid(
            field.clone(),
            format!("{tool}: argument `{field}`: {inner}"),
        )
    })
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests;
