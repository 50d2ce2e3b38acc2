//! Tests of the evaluate value conversion.

use super::untag;
use serde_json::json;

fn check(engine_value: serde_json::Value, value: serde_json::Value, kind: &str) {
    assert_eq!(untag(engine_value), (value, kind.to_string()));
}

#[test]
fn plain_json_keeps_its_value_and_names_its_js_type() {
    check(json!(42), json!(42), "number");
    check(json!("x"), json!("x"), "string");
    check(json!(true), json!(true), "boolean");
    check(json!(null), json!(null), "object");
    check(json!([1, 2]), json!([1, 2]), "object");
    check(json!({"a": 1}), json!({"a": 1}), "object");
}

#[test]
fn values_json_cannot_hold_come_as_text_with_their_type() {
    check(
        json!({"$type": "undefined"}),
        json!("undefined"),
        "undefined",
    );
    check(
        json!({"$type": "number", "repr": "NaN"}),
        json!("NaN"),
        "number",
    );
    check(
        json!({"$type": "number", "repr": "-0"}),
        json!("-0"),
        "number",
    );
    check(
        json!({"$type": "bigint", "repr": "12n"}),
        json!("12n"),
        "bigint",
    );
}

#[test]
fn other_tagged_values_stay_tagged() {
    let node = json!({"$type": "node", "nodeName": "BUTTON", "connected": true});
    check(node.clone(), node, "node");
    let f = json!({"$type": "function", "name": "f"});
    check(f.clone(), f, "function");
    let w = json!({"$type": "window", "url": "about:blank"});
    check(w.clone(), w, "object");
}
