//! Every tool's input schema, pinned; the error shape, pinned.

use serde_json::json;
use tool_surface::{ErrorCode, ToolError, Tools};

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
