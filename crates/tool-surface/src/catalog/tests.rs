//! Tests of the argument parsing and the catalog.

use super::*;
use serde_json::json;

#[test]
fn missing_field_is_named() {
    let e = parse_args::<NavigateRequest>("browser_navigate", json!({})).unwrap_err();
    assert_eq!(e.code, crate::ErrorCode::InvalidArgument);
    assert_eq!(e.field.as_deref(), Some("url"));
}

#[test]
fn wrong_type_is_named() {
    let e = parse_args::<NavigateRequest>(
        "browser_navigate",
        json!({"url": "x", "timeout_ms": "soon"}),
    )
    .unwrap_err();
    assert_eq!(e.field.as_deref(), Some("timeout_ms"));
    assert!(e.message.contains("invalid type"), "{}", e.message);
}

#[test]
fn unknown_field_is_named() {
    let e = parse_args::<SnapshotRequest>("browser_snapshot", json!({"timeoutMs": 5})).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("timeoutMs"));
}

#[test]
fn unknown_field_with_backticks_is_named_exactly() {
    let e = parse_args::<SnapshotRequest>("browser_snapshot", json!({"a`b": 1})).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("a`b"));
}

#[test]
fn bad_enum_value_is_named() {
    let e = parse_args::<DialogRequest>("browser_dialog", json!({"action": "maybe"})).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("action"));
}

#[test]
fn null_is_empty_object_and_non_object_is_refused() {
    assert!(parse_args::<SnapshotRequest>("browser_snapshot", Value::Null).is_ok());
    let e = parse_args::<SnapshotRequest>("browser_snapshot", json!([1])).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("arguments"));
}
