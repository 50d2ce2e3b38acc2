//! Envelope decoding: one incoming text frame into a reply, an event or
//! something that is not a CDP message. Pure: no routing state, no I/O.
//!
//! The routing table (`routing`) acts on what this returns; the
//! fuzz hook (`fuzz_decode_envelope`, feature `fuzz`) reaches it through the
//! real incoming path.

use crate::event::Event;
use crate::ids::SessionId;
use serde::Deserialize;
use serde_json::Value;

#[derive(Deserialize)]
struct Envelope {
    id: Option<u64>,
    method: Option<String>,
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
    result: Option<Value>,
    error: Option<ProtoError>,
    params: Option<Value>,
}

#[derive(Deserialize)]
struct ProtoError {
    #[serde(default)]
    code: i64,
    #[serde(default)]
    message: String,
    #[serde(default)]
    data: Option<Value>,
}

/// One incoming text message with its envelope decoded (the pure half of
/// `routing::Core::on_text`: no state, no I/O).
#[derive(Debug)]
pub(crate) enum Incoming {
    /// A reply to call `id`: its `result` (`null` when absent), or why not.
    Reply {
        id: u64,
        outcome: std::result::Result<Value, ReplyError>,
    },
    /// An event; `params` stays raw.
    Event(Event),
    /// Not a CDP message; logged and skipped.
    Malformed { reason: String },
}

/// Why a reply is not a result.
#[derive(Debug)]
pub(crate) enum ReplyError {
    /// The protocol error's `code` and `message[: data]`.
    Protocol(i64, String),
    /// A JSON object with a call's `id` whose envelope does not decode (a
    /// non-string `sessionId`, a duplicate key, a fractional error `code`...).
    /// Found by the `transport_envelope` fuzz target: such a reply used to be
    /// skipped, so its call waited out its whole budget.
    Malformed(serde_json::Error),
}

/// Replaces every unpaired `\uD800`–`\uDFFF` escape in JSON text with
/// `\uFFFD`; `None` when there is none (the text is left to fail as it is).
fn repair_lone_surrogates(text: &str) -> Option<String> {
    fn hex4(b: &[u8]) -> Option<u16> {
        let s = std::str::from_utf8(b.get(..4)?).ok()?;
        u16::from_str_radix(s, 16).ok()
    }
    let b = text.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        if b.get(i + 1) != Some(&b'u') {
            i += 2;
            continue;
        }
        let Some(unit) = hex4(&b[i + 2..]) else {
            i += 2;
            continue;
        };
        let lone = match unit {
            0xD800..=0xDBFF => {
                let next_is_low = b.get(i + 6) == Some(&b'\\')
                    && b.get(i + 7) == Some(&b'u')
                    && matches!(hex4(&b[(i + 8).min(b.len())..]), Some(0xDC00..=0xDFFF));
                if next_is_low {
                    i += 12;
                    continue;
                }
                true
            }
            0xDC00..=0xDFFF => true,
            _ => false,
        };
        if lone {
            let o = out.get_or_insert_with(|| String::with_capacity(text.len()));
            o.push_str(&text[copied..i]);
            o.push_str("\\uFFFD");
            copied = i + 6;
        }
        i += 6;
    }
    let mut o = out?;
    o.push_str(&text[copied..]);
    Some(o)
}

/// Decodes the envelope of one incoming text message.
pub(crate) fn decode_envelope(text: &str) -> Incoming {
    let parsed = serde_json::from_str::<Envelope>(text).or_else(|e| {
        // Chromium sends JavaScript strings as they are, so a lone UTF-16
        // surrogate (`'\ud800'`) arrives as an unpaired `\uD800` escape,
        // which is not valid JSON text for serde. Decode it leniently (as
        // U+FFFD) instead of losing the message and leaving its call waiting.
        match repair_lone_surrogates(text) {
            Some(fixed) => serde_json::from_str::<Envelope>(&fixed).map_err(|_| e),
            None => Err(e),
        }
    });
    let env: Envelope = match parsed {
        Ok(e) => e,
        Err(e) => {
            // Still answer the call it names, if any: fail it now.
            let id = serde_json::from_str::<Value>(text)
                .ok()
                .and_then(|v| v.get("id").and_then(Value::as_u64));
            return match id {
                Some(id) => Incoming::Reply {
                    id,
                    outcome: Err(ReplyError::Malformed(e)),
                },
                None => Incoming::Malformed {
                    reason: e.to_string(),
                },
            };
        }
    };
    if let Some(id) = env.id {
        let outcome = match env.error {
            Some(err) => {
                let mut message = err.message;
                if let Some(Value::String(d)) = err.data {
                    message = format!("{message}: {d}");
                }
                Err(ReplyError::Protocol(err.code, message))
            }
            None => Ok(env.result.unwrap_or(Value::Null)),
        };
        return Incoming::Reply { id, outcome };
    }
    let Some(method) = env.method else {
        return Incoming::Malformed {
            reason: "neither id nor method".into(),
        };
    };
    Incoming::Event(Event {
        method,
        session_id: env.session_id.map(SessionId::new),
        params: env.params.unwrap_or(Value::Null),
    })
}
