//! `browser_evaluate` through the tab's engine, and the engine's tagged
//! value as the tool's `{value, type}`.

use super::{budget_of, Tools};
use crate::error::{evaluate_disabled, map_eval, ToolError};
use crate::tab::Raced;
use crate::types::*;
use evaluate::{EvalRequest, EvalTarget};
use serde_json::{json, Value};

impl Tools {
    /// `browser_evaluate` through the tab's [`evaluate::Engine`]: `frame_id`
    /// is routed with the supervisor (OOPIF → its own target, same-process
    /// frame → that frame), `ref` becomes an element evaluate
    /// ([`evaluate::refs::RefMap::evaluate`]).
    ///
    /// # Errors
    /// `evaluate_disabled`, `dialog_pending`, `timeout` (script terminated),
    /// `script_error`, `navigated`, `unknown_frame`, `unknown_ref`,
    /// `stale_ref`, `invalid_argument`.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the evaluate without terminating the
    /// script (the engine ends it at its deadline in the page).
    pub async fn evaluate(
        &self,
        req: EvaluateRequest,
    ) -> std::result::Result<EvaluateResponse, ToolError> {
        let budget = budget_of(req.timeout_ms)?;
        let tab = self.tab();
        let engine = tab.engine();
        if !engine.config().evaluate_enabled {
            return Err(evaluate_disabled("browser_evaluate"));
        }
        tab.ready("browser_evaluate", &budget).await?;
        let target = match (&req.target, &req.frame_id) {
            (Some(_), Some(_)) => {
                return Err(ToolError::invalid(
                    "frame_id",
                    "give either ref or frame_id, not both (a ref already names its frame)",
                ))
            }
            (None, Some(f)) => tab.eval_target(f)?,
            _ => EvalTarget::MainFrame,
        };
        let refs = match &req.target {
            Some(r) => Some(tab.refs_for(r)?),
            None => None,
        };
        // After `ready`: the engine of the supervisor's current connection.
        let engine = tab.engine();
        let run = async {
            match (&refs, &req.target) {
                (Some(m), Some(r)) => m.evaluate(&engine, r, &req.expression, &budget).await,
                _ => {
                    let er = EvalRequest::new(req.expression.clone()).target(target);
                    engine.evaluate(er, &budget).await
                }
            }
        };
        // A dialog already pending blocks the page: nothing is sent. One
        // that opens from here on was opened while the script ran (by it,
        // most likely): the script waits on it. Under an auto policy the
        // supervisor answers every dialog at once, and the engine (told so
        // through the page facts) lets the script go on to its value.
        if !tab.auto_policy() {
            if let Some(d) = tab.first_pending() {
                return Err(ToolError::dialog_pending(d, "browser_evaluate"));
            }
        }
        let out = match tab.race_dialog(run).await {
            Raced::Dialog(d) => {
                return Err(ToolError::dialog_opened_by_script(d, "browser_evaluate"))
            }
            Raced::Done(Ok(out)) => out,
            Raced::Done(Err(e)) => {
                if let Some(info) = e.dialog() {
                    let d = tab.recorded_dialog(info)?;
                    return Err(ToolError::dialog_opened_by_script(d, "browser_evaluate"));
                }
                return Err(tab
                    .closed_or(map_eval(&e, "browser_evaluate"), &budget)
                    .await);
            }
        };
        let (value, kind) = untag(out.value);
        Ok(EvaluateResponse {
            value,
            kind,
            truncated: out.truncated,
            elapsed_ms: out.elapsed.as_millis() as u64,
        })
    }
}

/// The engine's tagged value as the tool's `{value, type}`: JSON values as
/// themselves with their JS type; `undefined`, non-JSON numbers and BigInt
/// as their text (`"undefined"`, `"NaN"`, `"-0"`, `"12n"`) with `type`
/// naming the JS type; other tagged values (nodes, functions, maps, …) as the
/// engine's tagged object with `type` from the tag.
fn untag(v: Value) -> (Value, String) {
    let kind = match &v {
        Value::Null | Value::Array(_) => "object",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Object(o) => match o.get("$type").and_then(Value::as_str) {
            Some("undefined") => return (json!("undefined"), "undefined".into()),
            Some(t @ ("number" | "bigint")) => {
                let repr = o.get("repr").cloned().unwrap_or(Value::Null);
                return (repr, t.into());
            }
            Some(t @ ("node" | "function" | "symbol")) => t,
            _ => "object",
        },
    }
    .to_string();
    (v, kind)
}

#[cfg(test)]
mod tests;
