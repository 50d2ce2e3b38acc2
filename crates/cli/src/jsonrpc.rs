//! JSON-RPC 2.0 checks of `tabwarden mcp`'s line filter, in front of rmcp.
//!
//! rmcp 3.11's stdio transport (`AsyncRwTransport::receive`,
//! `src/transport/async_rw.rs`) drops a line that is not JSON without a reply
//! (its rust-sdk issue #938) and answers a JSON line it cannot decode as a
//! client message with `-32600` and *no* `id`, so a client waiting for that
//! id waits forever. [`classify`] looks at every line first and decides:
//!
//! - not JSON (or a number, string, … instead of an object): `-32700` parse
//!   error / `-32600`, `"id": null` (JSON-RPC 2.0 §5.1: the id cannot be read);
//! - an object that is not a JSON-RPC 2.0 request, notification or response
//!   (`"jsonrpc"` not `"2.0"`, an `id` that is not a string or a 64-bit
//!   integer, a `method` that is not a string, neither `method` nor
//!   `result`/`error`): `-32600` carrying the request's `id` when it can be
//!   read (a string or a number), else `null`;
//! - a request whose `params` are present but not an object (MCP params are
//!   objects), or whose `params` do not decode for a method this server
//!   serves (`initialize`, `ping`, `tools/list`, `tools/call`): `-32602`
//!   with the id and the decoding error;
//! - any other request that rmcp's `ClientJsonRpcMessage` does not decode
//!   (decoded here from the same bytes): `-32600` with the id;
//! - a notification or response that does not decode: dropped, no reply
//!   (JSON-RPC 2.0 §4.1: a notification is never answered);
//! - a batch (a JSON array): MCP 2025-06-18 removed JSON-RPC batching and rmcp
//!   has none, so each request in it gets `-32600` with its id, in one reply
//!   array (JSON-RPC 2.0 §6); an empty array gets one `-32600`.
//!
//! Everything else goes to rmcp unchanged and decodes there, so rmcp's
//! id-less `-32600` is never sent.

use rmcp::model::{
    CallToolRequestParams, ClientJsonRpcMessage, ClientRequest, InitializeRequestParams,
    JsonRpcMessage, PaginatedRequestParams,
};
use serde_json::{json, Value};

/// JSON-RPC 2.0 §5.1 parse error: the line is not JSON.
pub const PARSE_ERROR: i64 = -32700;
/// JSON-RPC 2.0 §5.1: the JSON is not a valid request object.
pub const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC 2.0 §5.1: invalid method parameters.
pub const INVALID_PARAMS: i64 = -32602;

/// Methods this server serves whose params rmcp decodes into a typed
/// request; a request for one of them that rmcp would take as a *custom*
/// request had params that do not decode.
pub const SERVED_METHODS: [&str; 4] = ["initialize", "ping", "tools/list", "tools/call"];

/// What the line filter does with one line of stdin.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Hand the line to rmcp unchanged (it decodes as a client message).
    Forward,
    /// Write this reply (an error object, or an array of them for a batch)
    /// and do not hand the line to rmcp.
    Reply(Value),
    /// Neither forward nor answer (a blank line, a notification or response
    /// that does not decode); the reason is for the debug log.
    Drop(String),
}

/// A JSON-RPC 2.0 error response.
pub fn error(id: Value, code: i64, message: impl Into<String>) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message.into()}})
}

/// The reply's `id`: the request's `id` when it is a string or a number
/// (echoed as sent), else `null` (JSON-RPC 2.0 §5: an id that cannot be read).
fn reply_id(obj: &serde_json::Map<String, Value>) -> Value {
    match obj.get("id") {
        Some(v @ (Value::String(_) | Value::Number(_))) => v.clone(),
        _ => Value::Null,
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The line without its newline, carriage return and UTF-8 BOM (rmcp strips
/// the same before decoding).
fn trim(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line)
}

/// Decides what happens to one line of stdin (see the module docs). Never
/// panics; the line may be anything.
pub fn classify(line: &[u8]) -> Verdict {
    let line = trim(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return Verdict::Drop("a blank line".into());
    }
    let v: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => {
            return Verdict::Reply(error(Value::Null, PARSE_ERROR, format!("Parse error: {e}")))
        }
    };
    match v {
        Value::Object(obj) => single(&obj, line),
        Value::Array(items) => batch(&items),
        other => Verdict::Reply(error(
            Value::Null,
            INVALID_REQUEST,
            format!(
                "Invalid request: a JSON-RPC message is an object, got {}",
                kind(&other)
            ),
        )),
    }
}

/// One message object; `bytes` is the line it came from.
fn single(obj: &serde_json::Map<String, Value>, bytes: &[u8]) -> Verdict {
    let id = reply_id(obj);
    let invalid = |why: String| {
        Verdict::Reply(error(
            id.clone(),
            INVALID_REQUEST,
            format!("Invalid request: {why}"),
        ))
    };
    match obj.get("jsonrpc") {
        Some(Value::String(s)) if s == "2.0" => {}
        Some(other) => return invalid(format!("\"jsonrpc\" must be \"2.0\", got {other}")),
        None => return invalid("\"jsonrpc\": \"2.0\" is missing".into()),
    }
    let has_id = obj.contains_key("id");
    match obj.get("id") {
        None | Some(Value::String(_)) => {}
        Some(Value::Number(n)) if n.as_i64().is_some() => {}
        Some(Value::Number(_)) => {
            return invalid(
                "\"id\" must be a string or an integer in the signed 64-bit range".into(),
            )
        }
        Some(Value::Null) => {
            return invalid("\"id\" must not be null (MCP: a string or an integer)".into())
        }
        Some(other) => {
            return invalid(format!(
                "\"id\" must be a string or an integer, got {}",
                kind(other)
            ))
        }
    }
    let method = match obj.get("method") {
        Some(Value::String(m)) => m.as_str(),
        Some(other) => return invalid(format!("\"method\" must be a string, got {}", kind(other))),
        None if obj.contains_key("result") || obj.contains_key("error") => {
            // A response to a request of the server's.
            return match serde_json::from_slice::<ClientJsonRpcMessage>(bytes) {
                Ok(_) => Verdict::Forward,
                Err(e) => Verdict::Drop(format!("a response that does not decode: {e}")),
            };
        }
        None => return invalid(
            "no \"method\" (a request or notification) and no \"result\" or \"error\" (a response)"
                .into(),
        ),
    };
    if let Some(p) = obj.get("params") {
        if !p.is_object() && !p.is_null() {
            return if has_id {
                Verdict::Reply(error(
                    id,
                    INVALID_PARAMS,
                    format!(
                        "invalid params for {method}: params must be an object, got {}",
                        kind(p)
                    ),
                ))
            } else {
                Verdict::Drop(format!(
                    "notification {method} with params that are not an object"
                ))
            };
        }
    }
    match serde_json::from_slice::<ClientJsonRpcMessage>(bytes) {
        Ok(JsonRpcMessage::Request(r)) => match &r.request {
            ClientRequest::CustomRequest(c) if SERVED_METHODS.contains(&c.method.as_str()) => {
                Verdict::Reply(error(
                    id,
                    INVALID_PARAMS,
                    invalid_params_message(&c.method, c.params.as_ref()),
                ))
            }
            _ => Verdict::Forward,
        },
        Ok(_) => Verdict::Forward,
        Err(e) if has_id => {
            if SERVED_METHODS.contains(&method) {
                Verdict::Reply(error(
                    id,
                    INVALID_PARAMS,
                    invalid_params_message(method, obj.get("params")),
                ))
            } else {
                invalid(e.to_string())
            }
        }
        Err(e) => Verdict::Drop(format!("notification {method} that does not decode: {e}")),
    }
}

/// `-32602`'s message for a served `method` whose `params` do not decode:
/// `invalid params for METHOD: WHY`, WHY from decoding them into the
/// method's params type.
pub fn invalid_params_message(method: &str, params: Option<&Value>) -> String {
    fn why<T: serde::de::DeserializeOwned>(p: Option<&Value>, required: &str) -> String {
        match p.filter(|p| !p.is_null()) {
            None if !required.is_empty() => format!("params are required: {required}"),
            None => "params do not match the method".into(),
            Some(p) => match serde_json::from_value::<T>(p.clone()) {
                Err(e) => e.to_string(),
                Ok(_) => "params do not match the method".into(),
            },
        }
    }
    let why = match method {
        "tools/call" => why::<CallToolRequestParams>(
            params,
            "{\"name\": …, \"arguments\": {…}}",
        ),
        "tools/list" => why::<PaginatedRequestParams>(params, ""),
        "initialize" => why::<InitializeRequestParams>(
            params,
            "{\"protocolVersion\": …, \"capabilities\": {…}, \"clientInfo\": {\"name\": …, \"version\": …}}",
        ),
        _ => "params do not match the method".into(),
    };
    format!("invalid params for {method}: {why}")
}

/// Why a batch is refused, in each of its error objects.
const NO_BATCHES: &str = "Invalid request: JSON-RPC batches are not supported (MCP 2025-06-18 removed them); send each message on its own line";

/// A batch: one `-32600` per request (its id) or per element that is no
/// message (`null` id); notifications and responses in it get nothing
/// (JSON-RPC 2.0 §6). An empty batch is one `-32600`.
fn batch(items: &[Value]) -> Verdict {
    if items.is_empty() {
        return Verdict::Reply(error(
            Value::Null,
            INVALID_REQUEST,
            "Invalid request: an empty batch",
        ));
    }
    let replies: Vec<Value> = items
        .iter()
        .filter_map(|item| match item {
            Value::Object(o) if !o.contains_key("id") && o.contains_key("method") => None,
            Value::Object(o)
                if !o.contains_key("method")
                    && (o.contains_key("result") || o.contains_key("error")) =>
            {
                None
            }
            Value::Object(o) => Some(error(reply_id(o), INVALID_REQUEST, NO_BATCHES)),
            _ => Some(error(Value::Null, INVALID_REQUEST, NO_BATCHES)),
        })
        .collect();
    if replies.is_empty() {
        Verdict::Drop("a batch of notifications or responses (batches are not supported)".into())
    } else {
        Verdict::Reply(Value::Array(replies))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reply(line: &str) -> Value {
        match classify(line.as_bytes()) {
            Verdict::Reply(v) => v,
            other => panic!("{line}: expected a reply, got {other:?}"),
        }
    }

    fn code_and_id(line: &str) -> (i64, Value) {
        let v = reply(line);
        (v["error"]["code"].as_i64().unwrap_or(0), v["id"].clone())
    }

    #[test]
    fn valid_messages_go_to_rmcp() {
        for line in [
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            r#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#,
            r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"browser_tabs","arguments":{}}}"#,
            r#"{"jsonrpc":"2.0","id":4,"method":"nope/nope","params":{}}"#,
            r#"{"jsonrpc":"2.0","id":5,"result":{}}"#,
            "\u{feff}{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\"}\r\n",
        ] {
            assert_eq!(classify(line.as_bytes()), Verdict::Forward, "{line}");
        }
    }

    #[test]
    fn bad_params_are_32602_with_the_id() {
        let v = reply(r#"{"jsonrpc":"2.0","id":36,"method":"tools/call","params":"str"}"#);
        assert_eq!(v["id"], 36);
        assert_eq!(v["error"]["code"], INVALID_PARAMS);
        let m = v["error"]["message"].as_str().unwrap_or_default();
        assert!(m.contains("tools/call") && m.contains("a string"), "{m}");

        let v = reply(r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{}}"#);
        assert_eq!(
            (v["id"].clone(), v["error"]["code"].clone()),
            (json!(7), json!(-32602))
        );
        let m = v["error"]["message"].as_str().unwrap_or_default();
        assert!(
            m.contains("initialize") && m.contains("missing field"),
            "{m}"
        );

        assert_eq!(
            code_and_id(r#"{"jsonrpc":"2.0","id":"x","method":"initialize"}"#),
            (INVALID_PARAMS, json!("x"))
        );
        assert_eq!(
            code_and_id(r#"{"jsonrpc":"2.0","id":9,"method":"ping","params":5}"#),
            (INVALID_PARAMS, json!(9))
        );
        assert_eq!(
            code_and_id(r#"{"jsonrpc":"2.0","id":10,"method":"tools/call","params":[1]}"#),
            (INVALID_PARAMS, json!(10))
        );
        let v = reply(r#"{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":5}}"#);
        assert_eq!(v["error"]["code"], INVALID_PARAMS);
        assert!(v["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("expected a string")));
        let v = reply(r#"{"jsonrpc":"2.0","id":12,"method":"tools/call"}"#);
        assert_eq!(
            (v["id"].clone(), v["error"]["code"].clone()),
            (json!(12), json!(-32602))
        );
    }

    #[test]
    fn invalid_requests_are_32600_with_the_id_when_it_can_be_read() {
        assert_eq!(
            code_and_id(r#"{"jsonrpc":"2.0","id":100}"#),
            (INVALID_REQUEST, json!(100))
        );
        assert_eq!(
            code_and_id(r#"{"jsonrpc":"1.0","id":5,"method":"ping"}"#),
            (INVALID_REQUEST, json!(5))
        );
        assert_eq!(
            code_and_id(r#"{"id":"s","method":"ping"}"#),
            (INVALID_REQUEST, json!("s"))
        );
        assert_eq!(
            code_and_id(r#"{"jsonrpc":"2.0","id":8,"method":5}"#),
            (INVALID_REQUEST, json!(8))
        );
        assert_eq!(
            code_and_id(r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#),
            (INVALID_REQUEST, json!(1.5))
        );
        assert_eq!(
            code_and_id(r#"{"jsonrpc":"2.0","id":18446744073709551615,"method":"ping"}"#),
            (INVALID_REQUEST, json!(18446744073709551615u64))
        );
        assert_eq!(
            code_and_id(r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#),
            (INVALID_REQUEST, Value::Null)
        );
        assert_eq!(
            code_and_id(r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#),
            (INVALID_REQUEST, Value::Null)
        );
        assert_eq!(code_and_id(r#"{"foo":1}"#), (INVALID_REQUEST, Value::Null));
        assert_eq!(code_and_id("5"), (INVALID_REQUEST, Value::Null));
        assert_eq!(code_and_id("\"ping\""), (INVALID_REQUEST, Value::Null));
    }

    #[test]
    fn not_json_is_32700_with_id_null() {
        for line in ["nope", "{\"jsonrpc\":\"2.0\",\"id\":", "[1,2", "\u{0}"] {
            assert_eq!(code_and_id(line), (PARSE_ERROR, Value::Null), "{line:?}");
        }
        assert!(matches!(classify(b" \r\n"), Verdict::Drop(_)));
        assert!(matches!(classify(b""), Verdict::Drop(_)));
        assert_eq!(code_and_id("\u{1}").0, PARSE_ERROR);
        // Not UTF-8.
        let v = match classify(b"{\"a\":\"\xff\"}") {
            Verdict::Reply(v) => v,
            other => panic!("{other:?}"),
        };
        assert_eq!(v["error"]["code"], PARSE_ERROR);
    }

    #[test]
    fn notifications_and_responses_that_do_not_decode_get_no_reply() {
        for line in [
            r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":5}"#,
            r#"{"jsonrpc":"2.0","method":"x/y","params":[1]}"#,
            r#"{"jsonrpc":"2.0","id":3,"error":5}"#,
        ] {
            assert!(
                matches!(classify(line.as_bytes()), Verdict::Drop(_)),
                "{line}"
            );
        }
        // rmcp decodes this one (as a custom notification) and answers nothing.
        assert_eq!(
            classify(
                br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{}}}"#
            ),
            Verdict::Forward
        );
    }

    #[test]
    fn batches_get_one_error_per_request_with_its_id() {
        let v = reply(
            r#"[{"jsonrpc":"2.0","id":8,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":"b","method":"tools/list"},3]"#,
        );
        let a = v.as_array().cloned().unwrap_or_default();
        assert_eq!(a.len(), 3, "{v}");
        assert_eq!(a[0]["id"], 8);
        assert_eq!(a[1]["id"], "b");
        assert_eq!(a[2]["id"], Value::Null);
        for e in &a {
            assert_eq!(e["error"]["code"], INVALID_REQUEST);
            assert!(e["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("batches are not supported")));
        }
        assert_eq!(code_and_id("[]"), (INVALID_REQUEST, Value::Null));
        assert!(matches!(
            classify(br#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#),
            Verdict::Drop(_)
        ));
    }
}
