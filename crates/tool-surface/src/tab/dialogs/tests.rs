//! Tests of the dialog views.

use super::message_at_cap;

#[test]
fn dialog_messages_at_chromiums_cap_count_utf16_units() {
    assert!(message_at_cap(&"x".repeat(10_240)));
    assert!(!message_at_cap(&"x".repeat(10_239)));
    // 5,120 emoji are 10,240 UTF-16 code units: what Chromium cuts 6,000 to.
    assert!(message_at_cap(&"\u{1F600}".repeat(5_120)));
    assert!(!message_at_cap("short"));
}
