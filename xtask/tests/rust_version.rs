//! Tidy check: each package's `rust-version` is at least what its locked
//! dependency tree declares (normal and build dependencies, the ones a user
//! of the package compiles), so `cargo add` on an older toolchain fails
//! with cargo's clear message instead of a compile error deep in a
//! dependency.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// `1.88` / `1.88.0` as a comparable triple.
fn version(v: &str) -> (u32, u32, u32) {
    let mut it = v.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    (
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
        it.next().unwrap_or(0),
    )
}

#[test]
fn every_package_declares_the_rust_version_its_locked_tree_needs() {
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "cargo metadata --locked: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("metadata JSON");
    let packages: BTreeMap<&str, &Value> = meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .map(|p| (p["id"].as_str().expect("id"), p))
        .collect();
    // Node id -> the ids it depends on as a normal or build dependency.
    let mut edges: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for node in meta["resolve"]["nodes"].as_array().expect("resolve.nodes") {
        let id = node["id"].as_str().expect("node id");
        let deps = node["deps"]
            .as_array()
            .expect("deps")
            .iter()
            .filter(|d| {
                d["dep_kinds"].as_array().is_some_and(|ks| {
                    ks.iter()
                        .any(|k| k["kind"].is_null() || k["kind"] == "build")
                })
            })
            .map(|d| d["pkg"].as_str().expect("pkg"))
            .collect();
        edges.insert(id, deps);
    }
    let mut problems = Vec::new();
    let mut checked = 0;
    for member in meta["workspace_members"].as_array().expect("members") {
        let root = member.as_str().expect("member id");
        let pkg = packages[root];
        let name = pkg["name"].as_str().unwrap_or("?");
        let declared = pkg["rust_version"]
            .as_str()
            .unwrap_or_else(|| panic!("{name} declares no rust-version"));
        // The highest rust-version in the tree, and which package sets it.
        let mut seen = BTreeSet::new();
        let mut stack = vec![root];
        let mut need = ((0, 0, 0), String::new());
        while let Some(id) = stack.pop() {
            if !seen.insert(id) {
                continue;
            }
            if id != root {
                let p = packages[id];
                if let Some(v) = p["rust_version"].as_str() {
                    if version(v) > need.0 {
                        need = (version(v), format!("{} {} ({v})", p["name"], p["version"]));
                    }
                }
            }
            stack.extend(edges.get(id).into_iter().flatten());
        }
        checked += 1;
        if version(declared) < need.0 {
            problems.push(format!(
                "{name}: rust-version {declared}, but its locked tree needs {}",
                need.1
            ));
        }
    }
    assert!(checked >= 7, "only {checked} workspace members checked");
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
