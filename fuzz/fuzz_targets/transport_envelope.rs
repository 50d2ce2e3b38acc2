//! Incoming CDP text through `cdp-transport`'s real envelope decoding and
//! routing (`Core::on_text` on a connection without a socket).
//!
//! Input: UTF-8 text, one WebSocket text frame per line (at most 64 frames).
//! Non-UTF-8 input is skipped: the socket task drops non-UTF-8 frames before
//! `on_text`. Invariants are checked inside `cdp_transport::fuzz_decode_envelope`
//! (no panic, no lost reply, the connection still answers a call and delivers
//! an event); a broken one panics here so libFuzzer records the input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let frames: Vec<&str> = text.split('\n').take(64).collect();
    if let Err(e) = cdp_transport::fuzz_decode_envelope(&frames) {
        panic!("invariant broken: {e}");
    }
});
