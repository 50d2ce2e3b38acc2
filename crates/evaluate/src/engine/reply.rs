//! Reading the wrapper's reply (a value, the script's exception with its
//! position in the user's source, a promise timeout, a termination), and the
//! engine's error mapping: timeouts, setup failures, failed calls on the
//! evaluating session.

use super::{SourceForm, Work};
use crate::error::{Error, TimeoutKind};
use cdp_transport::{Budget, FrameId};
use serde_json::Value;
use std::time::Instant;

pub(super) fn timeout_err(
    kind: TimeoutKind,
    budget: &Budget,
    start: Instant,
    terminated: bool,
) -> Error {
    Error::Timeout {
        kind,
        budget: budget.total(),
        elapsed: start.elapsed(),
        terminated,
    }
}

pub(super) fn cancelled_setup(budget: &Budget, start: Instant) -> Error {
    Error::Cancelled {
        budget: budget.total(),
        elapsed: start.elapsed(),
        sent: false,
        terminated: false,
    }
}

/// A transport error before the script was sent.
pub(super) fn setup_err(
    e: cdp_transport::Error,
    budget: &Budget,
    start: Instant,
    context: &str,
) -> Error {
    if e.is_timeout() {
        timeout_err(TimeoutKind::Setup, budget, start, false)
    } else if e.is_cancelled() {
        cancelled_setup(budget, start)
    } else {
        Error::transport(context, e)
    }
}

/// Maps a failed call on the evaluating session (C10 texts, gone sessions).
pub(super) fn map_call_err(e: cdp_transport::Error, frame: &FrameId, context: &str) -> Error {
    if let Some(msg) = e.protocol_message() {
        if msg.contains("Inspected target navigated or closed") {
            return Error::Navigated {
                frame_id: frame.clone(),
                message: msg.to_string(),
            };
        }
        if msg.contains("Cannot find context with specified id")
            || msg.contains("Execution context was destroyed")
            || msg.contains("Cannot find default execution context")
            || msg.contains("uniqueContextId not found")
        {
            return Error::ContextDestroyed {
                frame_id: frame.clone(),
                message: msg.to_string(),
            };
        }
    }
    if e.is_session_gone() {
        return Error::ContextDestroyed {
            frame_id: frame.clone(),
            message: e.to_string(),
        };
    }
    Error::transport(context, e)
}

/// True for `exceptionDetails` of a terminated execution
/// (`Runtime.terminateExecution`, or Chromium's own `timeout`).
pub(super) fn is_termination(d: &Value) -> bool {
    d["exception"]["description"]
        .as_str()
        .or_else(|| d["text"].as_str())
        .is_some_and(|t| t.contains("Execution was terminated"))
        || d["text"].as_str().is_some_and(|t| t.contains("terminated"))
}

/// Reads the wrapper's answer to `method`.
pub(super) fn read_reply(
    mut reply: Value,
    form: SourceForm,
    src: &str,
    method: &str,
    budget: &Budget,
    start: Instant,
) -> Work {
    if let Some(d) = reply.get("exceptionDetails") {
        // The wrapper catches the script's exceptions, so this is a termination
        // (Chromium's own `timeout`), code that escaped the wrapper, or a
        // failure of the wrapper itself.
        if is_termination(d) {
            return Err(timeout_err(TimeoutKind::Script, budget, start, true));
        }
        let text = d["exception"]["description"]
            .as_str()
            .or_else(|| d["text"].as_str())
            .unwrap_or("exception");
        let name = d["exception"]["className"]
            .as_str()
            .unwrap_or("Error")
            .to_string();
        return Err(Error::JsException {
            name,
            message: text.lines().next().unwrap_or(text).to_string(),
            location: None,
        });
    }
    let result = &mut reply["result"];
    // A plain JSON primitive comes back as itself (see `js`).
    let primitive = match result["type"].as_str() {
        Some("boolean" | "string") => true,
        Some("number") => result["value"].is_number(),
        Some("object") => result["subtype"] == "null" && result["value"].is_null(),
        _ => false,
    };
    if primitive {
        return Ok((result["value"].take(), false, form));
    }
    let v = &mut result["value"];
    match v["$tw"].as_str() {
        Some("ok") => Ok((
            v.get_mut("value").map(Value::take).unwrap_or(Value::Null),
            v["truncated"].as_bool().unwrap_or(false),
            form,
        )),
        Some("exception") => {
            let stack = v["stack"].as_str().unwrap_or("");
            Err(Error::JsException {
                name: v["name"].as_str().unwrap_or("Error").to_string(),
                message: v["message"].as_str().unwrap_or("").to_string(),
                location: first_frame(stack, form, src),
            })
        }
        Some("promise_timeout") => Err(timeout_err(TimeoutKind::Promise, budget, start, false)),
        _ => Err(Error::UnexpectedReply {
            method: method.into(),
            detail: format!(
                "the page returned no wrapper result: {}",
                excerpt(&reply.to_string(), 200)
            ),
        }),
    }
}

fn excerpt(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let mut t: String = s.chars().take(n).collect();
        t.push('…');
        t
    }
}

/// Where the exception was thrown, from a V8 stack: the first frame that
/// is no builtin. In the user's source it is `line L, column C` (1-based,
/// the wrapper's offset taken off; with the function name when the user's
/// code named it, e.g. `f (line 2, column 5)`); in another script it is the
/// frame as V8 prints it (`f (http://a/b.js:10:2)`). A position inside the
/// wrapper, or a stack with no frame, gives `None`.
///
/// The source sits on line 2 of the wrapper (column 1), or, for
/// [`SourceForm::Script`], on line 2 of the text its `eval` runs (frames
/// `(eval at …, <anonymous>:L:C)`).
pub(super) fn first_frame(stack: &str, form: SourceForm, src: &str) -> Option<String> {
    let lines = src.lines().count().max(1);
    for frame in stack
        .lines()
        .map(str::trim)
        .filter_map(|l| l.strip_prefix("at "))
    {
        let (name, loc) = match frame.find(" (") {
            Some(p) if frame.ends_with(')') => (Some(&frame[..p]), &frame[p + 2..frame.len() - 1]),
            _ => (None, frame),
        };
        let (in_eval, pos) = match loc.strip_prefix("eval at ") {
            Some(rest) => (true, rest.rsplit(", ").next().unwrap_or(rest)),
            None => (false, loc),
        };
        let Some(at) = pos.strip_prefix("<anonymous>") else {
            // Another script (a URL), or `native`.
            if pos == "native" {
                continue;
            }
            return Some(frame.to_string());
        };
        let mut nums = at.split(':').skip(1).map(|n| n.parse::<usize>().ok());
        let (Some(Some(line)), Some(Some(col))) = (nums.next(), nums.next()) else {
            // A builtin (`JSON.parse (<anonymous>)`): look further.
            continue;
        };
        let ours = in_eval == (form == SourceForm::Script);
        let user_line = line
            .checked_sub(1)
            .filter(|l| ours && (1..=lines).contains(l))?;
        let named =
            name.filter(|n| !matches!(*n, "__tw_run" | "eval" | "<anonymous>" | "async __tw_run"));
        return Some(match named {
            Some(n) => format!("{n} (line {user_line}, column {col})"),
            None => format!("line {user_line}, column {col}"),
        });
    }
    None
}
