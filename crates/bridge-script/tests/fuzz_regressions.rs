//! Replays the committed inputs of the `bridge_paused` fuzz target
//! (`fuzz/regressions/bridge_paused/`: a first byte, then the
//! `Fetch.requestPaused` params as JSON) through `Bridge::parse_paused`, with
//! the fuzz target's own invariants (`fuzz/checks/bridge_paused.rs`).

#[path = "../../../fuzz/checks/bridge_paused.rs"]
mod checks;

use bridge_script::Bridge;
use std::path::PathBuf;

#[test]
fn committed_inputs_keep_the_invariants() {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions/bridge_paused");
    let bridge = Bridge::with_token(checks::TOKEN).expect("valid token");
    let mut n = 0;
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        let bytes = std::fs::read(&path).expect("readable regression file");
        let params: serde_json::Value = serde_json::from_slice(bytes.get(1..).unwrap_or_default())
            .unwrap_or_else(|e| {
                panic!(
                    "{}: regressions are kept as byte + JSON: {e}",
                    path.display()
                )
            });
        checks::check(&bridge, &params);
        n += 1;
    }
    assert!(n > 0, "no regression inputs in {}", dir.display());
}
