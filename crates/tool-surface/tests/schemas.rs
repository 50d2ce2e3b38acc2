//! Every tool's input schema, pinned; the error shape, pinned.

use serde_json::{json, Value};
use tool_surface::types::*;
use tool_surface::{parse_args, ErrorCode, ToolError, Tools};

#[test]
fn every_tool_schema() {
    let list = Tools::list();
    assert_eq!(list.len(), 11);
    for t in list {
        assert_eq!(t.input_schema["type"], "object", "{}", t.name);
        assert!(!t.description.is_empty());
        insta::assert_yaml_snapshot!(format!("schema_{}", t.name), t.input_schema);
    }
}

#[test]
fn required_fields_follow_the_types() {
    let req = |name: &str| {
        Tools::list()
            .into_iter()
            .find(|t| t.name == name)
            .map(|t| t.input_schema["required"].clone())
            .unwrap_or_default()
    };
    assert_eq!(req("browser_navigate"), json!(["url"]));
    assert_eq!(req("browser_click"), json!(["ref"]));
    assert_eq!(req("browser_dialog"), json!(["action"]));
    assert_eq!(req("browser_cdp"), json!(["method"]));
}

#[test]
fn error_shape() {
    let e = ToolError::invalid(
        "timeout_ms",
        "timeout_ms 0 is out of range: use 1 to 120000 ms (default 20000)",
    );
    insta::assert_yaml_snapshot!("error_invalid_argument", e.to_json());
    assert_eq!(
        serde_json::to_value(ErrorCode::DialogPending).unwrap_or_default(),
        "dialog_pending"
    );
    assert_eq!(ErrorCode::NotOopif.as_str(), "not_oopif");
}

/// Parses `args` as tool `name`'s request and encodes it back.
fn parse_as(name: &str, args: Value) -> Result<Value, ToolError> {
    fn p<T: serde::de::DeserializeOwned + serde::Serialize>(
        name: &str,
        args: Value,
    ) -> Result<Value, ToolError> {
        parse_args::<T>(name, args).map(|r| serde_json::to_value(r).unwrap_or_default())
    }
    match name {
        "browser_navigate" => p::<NavigateRequest>(name, args),
        "browser_snapshot" => p::<SnapshotRequest>(name, args),
        "browser_click" => p::<ClickRequest>(name, args),
        "browser_type" => p::<TypeRequest>(name, args),
        "browser_press_key" => p::<PressKeyRequest>(name, args),
        "browser_evaluate" => p::<EvaluateRequest>(name, args),
        "browser_dialog" => p::<DialogRequest>(name, args),
        "browser_cdp" => p::<CdpRequest>(name, args),
        "browser_screenshot" => p::<ScreenshotRequest>(name, args),
        "browser_console" => p::<ConsoleRequest>(name, args),
        "browser_tabs" => p::<TabsRequest>(name, args),
        other => panic!("a tool without a request type here: {other}"),
    }
}

/// The smallest arguments the schema accepts: each required property with a
/// value of its type (the first `const` of a `oneOf`, else a string).
fn minimal_args(schema: &Value) -> Value {
    let mut args = serde_json::Map::new();
    for r in schema["required"].as_array().into_iter().flatten() {
        let name = r.as_str().unwrap_or_default();
        let prop = &schema["properties"][name];
        let v = prop["oneOf"][0]["const"].clone();
        args.insert(name.to_string(), if v.is_null() { json!("x") } else { v });
    }
    Value::Object(args)
}

fn is_integer(prop: &Value) -> bool {
    match &prop["type"] {
        Value::String(t) => t == "integer",
        Value::Array(ts) => ts.iter().any(|t| t == "integer"),
        _ => false,
    }
}

/// Every property a schema declares `integer` takes what JSON Schema calls an
/// integer, an integral float included (`7.0` reads as 7, issue 8), and
/// refuses a fraction naming the property. Walks the published schemas, so a
/// new integer field without the `integral` helper fails here.
#[test]
fn every_integer_property_takes_integral_floats_and_refuses_fractions() {
    let mut seen = Vec::new();
    for t in Tools::list() {
        let props = t.input_schema["properties"]
            .as_object()
            .cloned()
            .unwrap_or_default();
        for (prop, s) in props.iter().filter(|(_, s)| is_integer(s)) {
            let min = s["minimum"].as_u64().unwrap_or(0);
            let max = s["maximum"].as_u64().unwrap_or(u64::from(u32::MAX));
            let n = (min + 6).min(max);
            let mut args = minimal_args(&t.input_schema);
            args[prop.as_str()] = json!(n as f64);
            let r = parse_as(t.name, args.clone())
                .unwrap_or_else(|e| panic!("{} {args}: {e:?}", t.name));
            assert_eq!(r[prop.as_str()], json!(n), "{} {prop}", t.name);
            args[prop.as_str()] = json!(n as f64 + 0.5);
            let e = parse_as(t.name, args.clone()).expect_err("a fraction is refused");
            assert_eq!(e.code, ErrorCode::InvalidArgument, "{} {args}", t.name);
            assert_eq!(
                e.field.as_deref(),
                Some(prop.as_str()),
                "{} {args}: {e:?}",
                t.name
            );
            seen.push(format!("{}.{prop}", t.name));
        }
    }
    // 8 tools have timeout_ms; browser_console has limit.
    assert_eq!(seen.len(), 9, "{seen:?}");
}
