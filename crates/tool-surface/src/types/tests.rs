//! Tests of the request types (integral numbers).

use super::*;
use crate::catalog::parse_args;
use serde_json::json;

fn timeout(v: Value) -> Result<Option<u64>, crate::ToolError> {
    parse_args::<SnapshotRequest>("browser_snapshot", json!({ "timeout_ms": v }))
        .map(|r| r.timeout_ms)
}

#[test]
fn integral_floats_are_integers() {
    assert_eq!(timeout(json!(5000)).unwrap(), Some(5000));
    assert_eq!(timeout(json!(5000.0)).unwrap(), Some(5000));
    assert_eq!(
        timeout(serde_json::from_str("11e3").unwrap()).unwrap(),
        Some(11000)
    );
    assert_eq!(timeout(json!(-0.0)).unwrap(), Some(0));
    assert_eq!(timeout(Value::Null).unwrap(), None);
    // u64::MAX and the largest float below 2^64 still fit.
    assert_eq!(timeout(json!(u64::MAX)).unwrap(), Some(u64::MAX));
    assert_eq!(
        timeout(json!(18_446_744_073_709_549_568.0_f64)).unwrap(),
        Some(18_446_744_073_709_549_568)
    );
}

#[test]
fn fractions_negatives_strings_and_out_of_range_are_refused_naming_the_field() {
    let big: Value = serde_json::from_str("18446744073709551616").unwrap();
    for bad in [
        json!(5000.5),
        json!(0.1),
        json!(-1),
        json!(-5000.0),
        json!(1e20),
        big,
        json!("NaN"),
        json!("5000"),
        json!("Infinity"),
        json!(true),
        json!([5000]),
        json!({"ms": 5000}),
    ] {
        let e = timeout(bad.clone()).unwrap_err();
        assert_eq!(e.code, crate::ErrorCode::InvalidArgument, "{bad}");
        assert_eq!(e.field.as_deref(), Some("timeout_ms"), "{bad}: {e:?}");
        assert!(e.message.contains("timeout_ms"), "{bad}: {}", e.message);
    }
    let e = timeout(json!(5000.5)).unwrap_err();
    assert!(
        e.message.contains("5000.5") && e.message.contains("no fractional part"),
        "{}",
        e.message
    );
}

#[test]
fn limit_takes_integral_floats_too() {
    let limit = |v: Value| {
        parse_args::<ConsoleRequest>("browser_console", json!({ "limit": v })).map(|r| r.limit)
    };
    assert_eq!(limit(json!(20.0)).unwrap(), Some(20));
    assert_eq!(limit(json!(0)).unwrap(), Some(0));
    for bad in [json!(2.5), json!(-1.0), json!(1e30), json!("20")] {
        let e = limit(bad.clone()).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("limit"), "{bad}: {e:?}");
    }
}

#[test]
fn every_request_with_timeout_ms_takes_an_integral_float() {
    fn ok<T: serde::de::DeserializeOwned>(tool: &str, mut args: Value) -> T {
        args["timeout_ms"] = json!(5000.0);
        parse_args::<T>(tool, args).unwrap_or_else(|e| panic!("{tool}: {e:?}"))
    }
    let r: NavigateRequest = ok("browser_navigate", json!({"url": "about:blank"}));
    assert_eq!(r.timeout_ms, Some(5000));
    let r: SnapshotRequest = ok("browser_snapshot", json!({}));
    assert_eq!(r.timeout_ms, Some(5000));
    let r: ClickRequest = ok("browser_click", json!({"ref": "e1"}));
    assert_eq!(r.timeout_ms, Some(5000));
    let r: TypeRequest = ok("browser_type", json!({"ref": "e1", "text": "x"}));
    assert_eq!(r.timeout_ms, Some(5000));
    let r: PressKeyRequest = ok("browser_press_key", json!({"key": "a"}));
    assert_eq!(r.timeout_ms, Some(5000));
    let r: EvaluateRequest = ok("browser_evaluate", json!({"expression": "1"}));
    assert_eq!(r.timeout_ms, Some(5000));
    let r: CdpRequest = ok("browser_cdp", json!({"method": "Browser.getVersion"}));
    assert_eq!(r.timeout_ms, Some(5000));
    let r: ScreenshotRequest = ok("browser_screenshot", json!({}));
    assert_eq!(r.timeout_ms, Some(5000));
    // Re-encoding gives a plain integer (what the fuzz round trip checks).
    assert_eq!(serde_json::to_value(&r).unwrap()["timeout_ms"], json!(5000));
}
