//! Replays the committed inputs of the `tool_args` fuzz target
//! (`fuzz/regressions/tool_args/`: a byte picking the tool, then the JSON
//! arguments) through the argument decoding of `Tools::call`, with the fuzz
//! target's own invariants (`fuzz/checks/tool_args.rs`).

#[path = "../../../fuzz/checks/tool_args.rs"]
mod checks;

use std::path::PathBuf;

#[test]
fn committed_inputs_keep_the_invariants() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/regressions/tool_args");
    let mut n = 0;
    let entries =
        std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        let bytes = std::fs::read(&path).expect("readable regression file");
        let r = std::panic::catch_unwind(|| checks::check_input(&bytes));
        assert!(
            r.is_ok(),
            "{} broke an invariant (see the panic above)",
            path.display()
        );
        n += 1;
    }
    assert!(n > 0, "no regression inputs in {}", dir.display());
}
