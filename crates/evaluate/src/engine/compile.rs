//! The compile check, on the error path only: `Runtime.compileScript`
//! (which runs nothing) on exactly the text sent tells a source that did not
//! parse (nothing ran) from a `SyntaxError` the script threw, and the
//! parser's answer becomes `invalid_source` with positions in the user's
//! source.

use super::reply::map_call_err;
use super::Engine;
use crate::error::{Error, Result};
use cdp_transport::{Budget, FrameId, Session};
use chromiumoxide_cdp::cdp::js_protocol::runtime::CompileScriptParams;
use serde_json::{json, Value};

impl Engine {
    /// `invalid_source` for statements whose function-body wrapper did not
    /// parse (`wrapper` is its compile failure): the source alone compiled
    /// as a script gives the parser's own words and positions, unless its
    /// complaint is one a function body does not have (`return`, `await`);
    /// then the wrapper's, mapped back to the source (its line 2 is the
    /// source's line 1), and without a position when it lies in the wrapper.
    pub(super) async fn invalid_statements(
        &self,
        session: &Session,
        ctx: Option<i64>,
        src: &str,
        wrapper: &Value,
        budget: &Budget,
        frame: &FrameId,
    ) -> Error {
        match compile_check(session, ctx, src.to_string(), budget, frame).await {
            Ok(Some(d)) if !body_only_syntax(&d) => invalid_source(&d, 0, src),
            _ => invalid_source(wrapper, 1, src),
        }
    }
}

/// Compiles exactly `text` with `Runtime.compileScript` (which runs nothing):
/// `None` when it parses, else the parser's `exceptionDetails`. Used only on
/// the error path, to tell a source that did not parse (nothing ran) from a
/// `SyntaxError` thrown while the script ran.
pub(super) async fn compile_check(
    session: &Session,
    ctx: Option<i64>,
    text: String,
    budget: &Budget,
    frame: &FrameId,
) -> Result<Option<Value>> {
    let mut p = json!({"expression": text, "sourceURL": "", "persistScript": false});
    if let Some(id) = ctx {
        p["executionContextId"] = json!(id);
    }
    // raw: the reply's exceptionDetails (the parser's SyntaxError as a RemoteObject) is read as JSON; a typed 0.9 decode fails on fields and subtypes Chromium 156 sends that it lacks
    session
        .call(CompileScriptParams::IDENTIFIER, p, budget.clone())
        .await
        .map(|v| v.get("exceptionDetails").cloned())
        .map_err(|e| map_call_err(e, frame, "compile-checking the source"))
}

/// `invalid_source` from the parser's `exceptionDetails` of a text in
/// which `src` starts on line `offset` (0-based), column 0. A position
/// outside `src` (in a wrapper around it) is left out.
pub(super) fn invalid_source(d: &Value, offset: u32, src: &str) -> Error {
    let mut message = syntax_message(d).to_string();
    let lines = u32::try_from(src.lines().count().max(1)).unwrap_or(u32::MAX);
    let raw_line = d["lineNumber"]
        .as_u64()
        .and_then(|l| u32::try_from(l).ok())
        .and_then(|l| l.checked_sub(offset));
    let line = raw_line.filter(|l| *l < lines);
    if offset > 0
        && raw_line.is_some_and(|l| l >= lines)
        && message.starts_with("SyntaxError: Unexpected token")
    {
        // The parser stopped at the wrapper's closing token, after the
        // source: to the user, the source ended too early.
        message = "SyntaxError: Unexpected end of input".into();
    }
    let column = line.and_then(|_| {
        d["columnNumber"]
            .as_u64()
            .and_then(|c| u32::try_from(c).ok())
    });
    Error::InvalidSource {
        message,
        line,
        column,
    }
}

/// The first line of a parser's `exceptionDetails` text.
fn syntax_message(d: &Value) -> &str {
    d["exception"]["description"]
        .as_str()
        .or_else(|| d["text"].as_str())
        .unwrap_or("SyntaxError")
        .lines()
        .next()
        .unwrap_or("SyntaxError")
}

/// True for a parser complaint that a function body does not have:
/// `return` or `await` at the top level of a script, `new.target`.
pub(super) fn body_only_syntax(d: &Value) -> bool {
    let m = syntax_message(d);
    m.contains("Illegal return") || m.contains("await is only valid") || m.contains("new.target")
}

/// True for `exceptionDetails` of a `SyntaxError` (thrown by the parser, or
/// by code at run time: only a compile check tells which).
pub(super) fn is_syntax_error(d: &Value) -> bool {
    d["exception"]["className"].as_str() == Some("SyntaxError")
        || d["exception"]["description"]
            .as_str()
            .is_some_and(|t| t.starts_with("SyntaxError"))
}
