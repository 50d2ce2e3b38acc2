//! Console errors: `console.error` / `console.assert` calls and uncaught
//! exceptions, in a capped ring.

use super::{str_of, Now, State};
use crate::view::{ConsoleError, CONSOLE_ERRORS_CAP};
use cdp_transport::SessionId;
use serde_json::Value;

impl State {
    /// `Runtime.consoleAPICalled`: errors and failed asserts are kept.
    pub(super) fn on_console_api_called(
        &mut self,
        p: &Value,
        session_id: Option<SessionId>,
        now: Now,
    ) {
        let kind = str_of(p, "type");
        if kind == "error" || kind == "assert" {
            let text = p
                .get("args")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .map(remote_object_text)
                        .collect::<Vec<_>>()
                        .join(" ")
                })
                .unwrap_or_default();
            let url = p
                .pointer("/stackTrace/callFrames/0/url")
                .and_then(Value::as_str)
                .filter(|s| !s.is_empty())
                .map(String::from);
            self.push_console(kind, text, url, session_id, now);
        }
    }

    /// `Runtime.exceptionThrown`: every uncaught exception is kept.
    pub(super) fn on_exception_thrown(
        &mut self,
        p: &Value,
        session_id: Option<SessionId>,
        now: Now,
    ) {
        let d = &p["exceptionDetails"];
        let text = d
            .pointer("/exception/description")
            .and_then(Value::as_str)
            .map(String::from)
            .unwrap_or_else(|| str_of(d, "text"));
        let url = d
            .get("url")
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(String::from);
        self.push_console("exception".into(), text, url, session_id, now);
    }

    fn push_console(
        &mut self,
        kind: String,
        text: String,
        url: Option<String>,
        session_id: Option<SessionId>,
        now: Now,
    ) {
        self.console_total = self.console_total.saturating_add(1);
        if self.console.len() >= CONSOLE_ERRORS_CAP {
            self.console.pop_front();
        }
        const MAX_TEXT: usize = 2000;
        let text = if text.len() > MAX_TEXT {
            let mut cut = MAX_TEXT;
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{}…", &text[..cut])
        } else {
            text
        };
        self.console.push_back(ConsoleError {
            kind,
            text,
            url,
            session_id,
            at_ms: now.wall_ms,
        });
    }
}

fn remote_object_text(o: &Value) -> String {
    if let Some(v) = o.get("value") {
        return match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
    }
    o.get("description")
        .or_else(|| o.get("unserializableValue"))
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}
