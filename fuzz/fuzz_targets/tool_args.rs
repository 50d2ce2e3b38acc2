//! `tool-surface`'s argument decoding, the part of `Tools::call` that runs
//! before any browser I/O: `parse_args::<Request>(name, args)` for the tool
//! `name` (the same dispatch as `Tools::call`), then the `timeout_ms` check
//! (`Budget::from_timeout_ms`, what every tool does first).
//!
//! Input: first byte picks the tool, the rest is the JSON text of `args`.
//! Checked: no panic; a refusal is `invalid_argument` naming a field and
//! encodes as `{"error": …}`; an accepted request round-trips through serde;
//! and the published input schema (`Tools::list`) agrees with the parser:
//! what the parser and the timeout check accept the schema allows, and what
//! the schema allows the parser accepts.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../checks/tool_args.rs"]
mod checks;

fuzz_target!(|data: &[u8]| {
    checks::check_input(data);
});
