//! The invariants of the `tool_args` fuzz target, shared with the replay test
//! `crates/tool-surface/tests/fuzz_regressions.rs` (included there by
//! `#[path]`), so the fuzzer and the committed regressions check the same thing.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::sync::OnceLock;
use tool_surface::types::*;
use tool_surface::{parse_args, ErrorCode, TOOL_NAMES};

mod schema {
    use serde_json::Value;

    fn is_type(v: &Value, t: &str) -> bool {
        match t {
            "null" => v.is_null(),
            "boolean" => v.is_boolean(),
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "number" => v.is_number(),
            // JSON Schema: a number with a zero fractional part (1.0 included).
            "integer" => v.as_f64().is_some_and(|f| f.fract() == 0.0) || v.is_i64() || v.is_u64(),
            _ => true,
        }
    }

    /// The subset of JSON Schema 2020-12 that schemars emits for our requests.
    pub fn valid(s: &Value, v: &Value) -> bool {
        let Some(s) = s.as_object() else {
            return s.as_bool().unwrap_or(true);
        };
        if let Some(t) = s.get("type") {
            let ok = match t {
                Value::String(t) => is_type(v, t),
                Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(|t| is_type(v, t)),
                _ => true,
            };
            if !ok {
                return false;
            }
        }
        if let Some(c) = s.get("const") {
            if c != v {
                return false;
            }
        }
        if let Some(Value::Array(e)) = s.get("enum") {
            if !e.contains(v) {
                return false;
            }
        }
        if let Some(n) = v.as_f64() {
            if s.get("minimum")
                .and_then(Value::as_f64)
                .is_some_and(|m| n < m)
            {
                return false;
            }
            if s.get("maximum")
                .and_then(Value::as_f64)
                .is_some_and(|m| n > m)
            {
                return false;
            }
        }
        if let Some(Value::Array(alts)) = s.get("oneOf") {
            if alts.iter().filter(|a| valid(a, v)).count() != 1 {
                return false;
            }
        }
        if let Some(Value::Array(alts)) = s.get("anyOf") {
            if !alts.iter().any(|a| valid(a, v)) {
                return false;
            }
        }
        if let Some(o) = v.as_object() {
            let props = s.get("properties").and_then(Value::as_object);
            if let Some(Value::Array(req)) = s.get("required") {
                if req
                    .iter()
                    .filter_map(Value::as_str)
                    .any(|r| !o.contains_key(r))
                {
                    return false;
                }
            }
            for (k, x) in o {
                let sub = props
                    .and_then(|p| p.get(k))
                    .or_else(|| s.get("additionalProperties"));
                if sub.is_some_and(|sub| !valid(sub, x)) {
                    return false;
                }
            }
        }
        true
    }
}

fn schemas() -> &'static Vec<Value> {
    static S: OnceLock<Vec<Value>> = OnceLock::new();
    S.get_or_init(|| {
        tool_surface::list()
            .into_iter()
            .map(|t| t.input_schema)
            .collect()
    })
}

/// `timeout_ms` of a request, through its JSON form (every request that has one
/// names it so).
fn timeout_ok<T: Serialize>(req: &T) -> bool {
    let v = serde_json::to_value(req).expect("a request encodes");
    let t = v.get("timeout_ms").and_then(Value::as_u64);
    cdp_transport::Budget::from_timeout_ms(t).is_ok()
}

fn check<T>(tool_index: usize, args: Value)
where
    T: DeserializeOwned + Serialize + PartialEq + std::fmt::Debug,
{
    let name = TOOL_NAMES[tool_index];
    let schema = &schemas()[tool_index];
    // `Tools::call` treats null as {} and refuses other non-objects before serde.
    let as_object = if args.is_null() {
        Value::Object(Default::default())
    } else {
        args.clone()
    };
    let schema_ok = as_object.is_object() && schema::valid(schema, &as_object);
    match parse_args::<T>(name, args.clone()) {
        Ok(req) => {
            let again: T = parse_args(name, serde_json::to_value(&req).expect("encodes"))
                .unwrap_or_else(|e| panic!("{name}: a parsed request does not re-parse: {e:?}"));
            assert_eq!(again, req, "{name}: round trip changed the request");
            if timeout_ok(&req) {
                assert!(
                    schema_ok,
                    "{name}: parser accepts what the schema forbids: {args}"
                );
            }
        }
        Err(e) => {
            assert_eq!(e.code, ErrorCode::InvalidArgument, "{name}: {e:?}");
            // `field` names something real: a key the agent sent (exactly,
            // even an odd one such as "" or "a`b"), a property of the schema
            // (a missing or mistyped one, maybe as a path), or `arguments`.
            let field = e
                .field
                .as_deref()
                .unwrap_or_else(|| panic!("{name}: no field: {e:?}"));
            let first = field.split(['.', '[']).next().unwrap_or(field);
            let sent = args.as_object().is_some_and(|o| o.contains_key(field));
            let declared = schema["properties"].get(first).is_some();
            assert!(
                sent || declared || field == "arguments",
                "{name}: field {field:?} names neither a key sent nor a declared one: {args} -> {}",
                e.message
            );
            let j = e.to_json();
            assert_eq!(j["error"]["code"], "invalid_argument", "{j}");
            // Known divergence: JSON Schema's `integer` has no upper bound,
            // but `u64`/`usize` fields end at 2^64 (`{"limit": 1e20}` passes
            // the schema and is refused by name). Integral floats below that
            // are accepted since tool-surface's `types::integral`
            // (regressions/tool_args/integral_float_timeout).
            let integral_float = as_object.as_object().is_some_and(|o| {
                o.values().any(|v| {
                    v.as_f64()
                        .is_some_and(|f| f.fract() == 0.0 && f >= 18_446_744_073_709_551_616.0)
                })
            });
            assert!(
                !schema_ok || integral_float,
                "{name}: schema allows what the parser refuses: {args} -> {}",
                e.message
            );
        }
    }
}

/// One fuzz input: first byte picks the tool, the rest is the JSON of `args`
/// (inputs that are not JSON are skipped: `Tools::call` gets a parsed value).
///
/// # Panics
/// When decoding panics or breaks an invariant.
pub fn check_input(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let Ok(args) = serde_json::from_slice::<Value>(rest) else {
        return;
    };
    let i = usize::from(first) % TOOL_NAMES.len();
    match TOOL_NAMES[i] {
        "browser_navigate" => check::<NavigateRequest>(i, args),
        "browser_snapshot" => check::<SnapshotRequest>(i, args),
        "browser_click" => check::<ClickRequest>(i, args),
        "browser_type" => check::<TypeRequest>(i, args),
        "browser_press_key" => check::<PressKeyRequest>(i, args),
        "browser_evaluate" => check::<EvaluateRequest>(i, args),
        "browser_dialog" => check::<DialogRequest>(i, args),
        "browser_cdp" => check::<CdpRequest>(i, args),
        "browser_screenshot" => check::<ScreenshotRequest>(i, args),
        "browser_console" => check::<ConsoleRequest>(i, args),
        "browser_tabs" => check::<TabsRequest>(i, args),
        other => panic!("a tool without a request type in the fuzz target: {other}"),
    }
}
