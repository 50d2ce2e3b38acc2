//! Tidy check: the dependency edges between our crates are the ones SPEC.md allows.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const OURS: [&str; 7] = [
    "cdp-transport",
    "supervisor",
    "bridge-script",
    "evaluate",
    "tool-surface",
    "tabwarden",
    "cdp-mock",
];

fn allowed() -> BTreeMap<&'static str, BTreeSet<&'static str>> {
    let mut m = BTreeMap::new();
    m.insert("cdp-transport", BTreeSet::new());
    m.insert("bridge-script", BTreeSet::new());
    m.insert("cdp-mock", BTreeSet::new());
    m.insert("supervisor", ["cdp-transport", "bridge-script"].into());
    m.insert("evaluate", ["cdp-transport"].into());
    m.insert(
        "tool-surface",
        ["cdp-transport", "supervisor", "evaluate", "bridge-script"].into(),
    );
    m.insert(
        "tabwarden",
        [
            "cdp-transport",
            "supervisor",
            "evaluate",
            "tool-surface",
            "bridge-script",
        ]
        .into(),
    );
    m
}

#[test]
fn crate_dependency_edges_follow_the_layering() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root");
    let allowed = allowed();
    let mut seen = 0;
    let mut problems = Vec::new();
    for dir in std::fs::read_dir(root.join("crates")).expect("crates/") {
        let path = dir.expect("entry").path().join("Cargo.toml");
        let text = std::fs::read_to_string(&path).expect("read Cargo.toml");
        let doc: toml::Value = toml::from_str(&text).expect("parse Cargo.toml");
        let name = doc["package"]["name"]
            .as_str()
            .expect("package.name")
            .to_string();
        seen += 1;
        let Some(ok) = allowed.get(name.as_str()) else {
            problems.push(format!("{name}: a crate the layering does not know; add it to SPEC.md, ARCHITECTURE.md and this test"));
            continue;
        };
        // Normal dependencies must follow the layering. Dev-dependencies may use
        // cdp-mock (test support) and nothing above the crate itself.
        // bridge-script's end-to-end tests drive real Chromium through cdp-transport (a
        // test-only edge between two leaves; no cycle, nothing above it).
        let dev_extra = if name == "bridge-script" {
            BTreeSet::from(["cdp-mock", "cdp-transport"])
        } else {
            BTreeSet::from(["cdp-mock"])
        };
        for (section, extra) in [
            ("dependencies", BTreeSet::new()),
            ("dev-dependencies", dev_extra),
        ] {
            let Some(deps) = doc.get(section).and_then(|d| d.as_table()) else {
                continue;
            };
            for dep in deps.keys() {
                // A dev-dependency of a crate on itself only turns on its
                // own features for its tests (cdp-transport's `fuzz`).
                let itself = section == "dev-dependencies" && dep == &name;
                if OURS.contains(&dep.as_str())
                    && !itself
                    && !ok.contains(dep.as_str())
                    && !extra.contains(dep.as_str())
                {
                    problems.push(format!(
                        "{name} -> {dep} ({section}) is not an allowed edge"
                    ));
                }
            }
        }
    }
    assert_eq!(
        seen,
        OURS.len(),
        "expected {} crates under crates/",
        OURS.len()
    );
    assert!(
        problems.is_empty(),
        "layering violations:\n{}",
        problems.join("\n")
    );
}
