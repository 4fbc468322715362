//! Boundaries the code map (`docs/architecture.md`) states, checked on the sources: the files
//! of `transform/` import each other without a cycle (the fan-out is below the context, the
//! planner below the executor, the executor below `Sequential`'s runner), and `ir/` knows
//! nothing of passes, sessions, front ends or the interpreter.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The code lines of `text` (doc and line comments dropped).
fn code_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter(|l| !l.trim_start().starts_with("//"))
}

/// Every `super::NAME` a file of `transform/` mentions in code, NAME lowercase (a sibling file).
fn siblings(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in code_lines(text) {
        for (i, _) in line.match_indices("super::") {
            let rest = &line[i + "super::".len()..];
            let name: String = rest.chars().take_while(|c| c.is_ascii_lowercase() || *c == '_').collect();
            if !name.is_empty() {
                out.insert(name);
            }
        }
    }
    out
}

#[test]
fn transform_files_import_each_other_without_a_cycle() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/transform");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).expect("transform/ is readable") {
        let path = entry.expect("entry").path();
        if path.extension().is_some_and(|e| e == "rs") {
            let name = path.file_stem().expect("a file name").to_string_lossy().to_string();
            let text = std::fs::read_to_string(&path).expect("readable");
            graph.insert(name, siblings(&text));
        }
    }
    assert!(graph.len() > 10, "found only {:?}", graph.keys());
    // Depth-first search for a back edge, reporting the cycle.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(i) = path.iter().position(|p| p == node) {
            let mut cycle = path[i..].to_vec();
            cycle.push(node.to_string());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_string());
        for dep in graph.get(node).into_iter().flatten() {
            if graph.contains_key(dep) {
                if let Some(c) = visit(dep, graph, path, done) {
                    return Some(c);
                }
            }
        }
        path.pop();
        done.insert(node.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(cycle) = visit(node, &graph, &mut Vec::new(), &mut done) {
            panic!("transform/ imports in a circle: {}", cycle.join(" -> "));
        }
    }
}

#[test]
fn ir_knows_nothing_of_passes_sessions_front_ends_or_the_interpreter() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = vec![root.join("ir.rs")];
    let mut dirs = vec![root.join("ir")];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("readable") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable");
        for line in code_lines(&text) {
            for layer in ["crate::transform", "crate::session", "crate::frontend", "crate::interp"] {
                assert!(!line.contains(layer), "{} uses {layer}: {line}", file.display());
            }
        }
    }
}
