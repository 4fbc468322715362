//! Boundaries the code map (`docs/architecture.md`) states, checked on the sources: the files
//! of `transform/` import each other without a cycle (the fan-out is below the context, the
//! planner below the executor, the executor below `Sequential`'s runner), and `ir/` knows
//! nothing of passes, sessions, front ends or the interpreter; library crates depend on no
//! command-line crate.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The code lines of `text` (doc and line comments dropped).
fn code_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines().filter(|l| !l.trim_start().starts_with("//"))
}

/// The non-test code of a source file: its text up to a trailing `#[cfg(test)] mod …` (the
/// house layout puts unit tests last), then without comments.
fn production_code(text: &str) -> String {
    let end = text.find("#[cfg(test)]\nmod ").unwrap_or(text.len());
    code_lines(&text[..end]).collect::<Vec<_>>().join("\n")
}

/// The `.rs` files under `dir`, recursively, as (module path relative to `dir`, text): `a.rs`
/// is `a`, `a/b.rs` is `a::b`.
fn module_files(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for entry in std::fs::read_dir(&d).expect("readable") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let rel = path.strip_prefix(dir).expect("under dir").with_extension("");
                let name = rel.iter().map(|c| c.to_string_lossy().to_string()).collect::<Vec<_>>().join("::");
                out.insert(name, std::fs::read_to_string(&path).expect("readable"));
            }
        }
    }
    out
}

/// The lowercase path segments after each `prefix` in `code` (`super::a::b::Item` → `[a, b]`).
fn paths_after<'t>(code: &'t str, prefix: &str) -> Vec<Vec<&'t str>> {
    code.match_indices(prefix)
        .filter(|(i, _)| *i == 0 || !code.as_bytes()[i - 1].is_ascii_alphanumeric() && code.as_bytes()[i - 1] != b'_')
        .map(|(i, _)| {
            let rest = &code[i + prefix.len()..];
            rest.split("::")
                .map(|seg| &seg[..seg.find(|c: char| !(c.is_ascii_lowercase() || c == '_')).unwrap_or(seg.len())])
                .take_while(|seg| !seg.is_empty())
                .collect()
        })
        .collect()
}

/// The file-level import graph of the module at `dir` (named `crate_path`, e.g.
/// `crate::transform`): an edge from each file to each file of the same tree it names, through
/// `super::`, `self::` or the absolute `crate_path::` (the longest path that is a file).
fn import_graph(dir: &Path, crate_path: &str) -> BTreeMap<String, BTreeSet<String>> {
    let files = module_files(dir);
    let mut graph = BTreeMap::new();
    for (name, text) in &files {
        let code = production_code(text);
        let own: Vec<&str> = name.split("::").collect();
        let parent = &own[..own.len() - 1];
        let mut targets: Vec<Vec<&str>> = Vec::new();
        for path in paths_after(&code, "super::") {
            targets.push(parent.iter().copied().chain(path).collect());
        }
        for path in paths_after(&code, "self::") {
            targets.push(own.iter().copied().chain(path).collect());
        }
        for path in paths_after(&code, &format!("{crate_path}::")) {
            targets.push(path);
        }
        // A module and its own submodules (`parser` and `parser::literals`) refer to each other
        // by construction; the edges that matter are between files that do not contain each other.
        let related = |t: &str| t == name || t.starts_with(&format!("{name}::")) || name.starts_with(&format!("{t}::"));
        let mut deps = BTreeSet::new();
        for target in targets {
            let found = (1..=target.len()).rev().map(|n| target[..n].join("::")).find(|t| files.contains_key(t));
            if let Some(t) = found.filter(|t| !related(t)) {
                deps.insert(t);
            }
        }
        graph.insert(name.clone(), deps);
    }
    graph
}

/// Panics with the first cycle of `graph` (nodes outside the graph are leaves).
fn assert_acyclic(what: &str, graph: &BTreeMap<String, BTreeSet<String>>) {
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
        if let Some(cycle) = visit(node, graph, &mut Vec::new(), &mut done) {
            panic!("{what} imports in a circle: {}", cycle.join(" -> "));
        }
    }
}

fn src() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

#[test]
fn transform_files_import_each_other_without_a_cycle() {
    let graph = import_graph(&src().join("transform"), "crate::transform");
    assert!(graph.len() > 15 && graph.contains_key("instruments::print_ir"), "found only {:?}", graph.keys());
    // The graph sees both spellings: `print_ir.rs` names `super::line_diff` and
    // `crate::transform::instrument`.
    assert!(graph["instruments::print_ir"].contains("instruments::line_diff"));
    assert!(graph["instruments::print_ir"].contains("instrument"));
    assert_acyclic("transform/", &graph);
}

#[test]
fn ir_files_import_each_other_without_a_cycle() {
    let graph = import_graph(&src().join("ir"), "crate::ir");
    assert!(graph.contains_key("parser::prim") && graph.contains_key("lexer"), "found only {:?}", graph.keys());
    assert!(!graph["module"].contains("parser"), "the module's name check is the lexer's, not the parser's");
    assert_acyclic("ir/", &graph);
}

/// The operator registry sits between the IR's vocabulary and its structures, as MLIR's
/// operation registry sits between its type system and its parser and verifier: `op/` uses only
/// the vocabulary files of `ir/` (types, tensors, attributes, ids), and those never use `op`;
/// the builder, parser, printer and verifier above them look operators up in the registry.
#[test]
fn the_operator_registry_uses_only_the_ir_vocabulary_and_the_vocabulary_not_it() {
    const VOCABULARY: [&str; 4] = ["attrs", "ids", "tensor", "ty"];
    // The items `ir.rs` re-exports, by the file that defines them.
    let facade = std::fs::read_to_string(src().join("ir.rs")).expect("readable");
    let mut defined_in: BTreeMap<String, String> = BTreeMap::new();
    for line in code_lines(&facade) {
        if let Some(rest) = line.trim().strip_prefix("pub use ") {
            let (file, items) = rest.split_once("::").expect("pub use FILE::…");
            for item in items.trim_end_matches(';').trim_matches(|c| c == '{' || c == '}').split(',') {
                defined_in.insert(item.trim().to_string(), file.to_string());
            }
        }
    }
    assert!(defined_in.get("Function").is_some_and(|f| f == "function"), "{defined_in:?}");
    let mut op_files = module_files(&src().join("op"));
    op_files.insert(String::new(), std::fs::read_to_string(src().join("op.rs")).expect("readable"));
    for (name, text) in &op_files {
        let code = production_code(text);
        for (i, _) in code.match_indices("ir::") {
            let rest = &code[i + "ir::".len()..];
            let group =
                if let Some(inner) = rest.strip_prefix('{') { &inner[..inner.find('}').unwrap_or(0)] } else { rest };
            for item in group.split(',').map(|s| s.trim()) {
                let item: String = item.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                if let Some(file) = defined_in.get(&item) {
                    assert!(
                        VOCABULARY.contains(&file.as_str()),
                        "op/{name}.rs uses ir::{item}, defined in ir/{file}.rs, above the registry"
                    );
                }
            }
        }
    }
    for file in VOCABULARY {
        let code = production_code(&std::fs::read_to_string(src().join(format!("ir/{file}.rs"))).expect("readable"));
        assert!(!code.contains("op::"), "ir/{file}.rs uses the operator registry");
        for above in ["builder", "function", "parser", "printer", "verifier", "module"] {
            assert!(!code.contains(&format!("super::{above}")), "ir/{file}.rs uses ir/{above}.rs");
        }
    }
}

#[test]
fn python_extension_files_import_each_other_without_a_cycle() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../python/src");
    let graph = import_graph(&dir, "crate");
    assert!(graph.contains_key("instrument") && graph.contains_key("transform"), "found only {:?}", graph.keys());
    assert_acyclic("python/src/", &graph);
}

#[test]
fn ir_knows_nothing_of_passes_sessions_front_ends_or_the_interpreter() {
    let mut files = module_files(&src().join("ir"));
    files.insert("(ir.rs)".into(), std::fs::read_to_string(src().join("ir.rs")).expect("readable"));
    for (file, text) in files {
        for line in code_lines(&text) {
            for layer in ["crate::transform", "crate::session", "crate::frontend", "crate::interp"] {
                assert!(!line.contains(layer), "ir/{file} uses {layer}: {line}");
            }
        }
    }
}

#[test]
fn transform_knows_nothing_of_sessions() {
    // The session is built on `transform/` (its planner, stage runners and fan-out), not the
    // reverse: the executor's stage loop and the session's share those, and nothing of the
    // session's vocabulary (its stages' fingerprints, stores, results) reaches the executor.
    let mut files = module_files(&src().join("transform"));
    files.insert("(transform.rs)".into(), std::fs::read_to_string(src().join("transform.rs")).expect("readable"));
    assert!(files.contains_key("executor"), "found only {:?}", files.keys());
    for (file, text) in files {
        for line in production_code(&text).lines() {
            assert!(
                !line.contains("crate::session") && !line.contains("salsa"),
                "transform/{file} uses the session: {line}"
            );
        }
    }
}

/// The command-line crates among `krate`'s dependencies (its `[dependencies]` table).
fn command_line_dependencies(krate: &str) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let manifest = std::fs::read_to_string(root.join(krate).join("Cargo.toml")).expect("readable manifest");
    let deps = manifest.split("[dependencies]").nth(1).expect("a [dependencies] table");
    let deps = deps.split("\n[").next().unwrap_or(deps);
    deps.lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .map(|l| l.split(['=', '.', ' ']).next().unwrap_or("").trim().to_string())
        .filter(|name| ["passel-harness", "clap", "miette", "indicatif", "notify"].contains(&name.as_str()))
        .collect()
}

#[test]
fn library_crates_depend_on_no_command_line_crate() {
    // Library code lives below the CLI: the Python extension and the cache store reach the
    // engine, the passes and the store, never passel-harness or the crates only a command line
    // needs (argument parsing, terminal reports, file watching).
    for krate in ["engine", "passes", "cache", "python"] {
        let found = command_line_dependencies(krate);
        assert!(found.is_empty(), "{krate}/Cargo.toml depends on command-line crates {found:?}");
    }
    // The reading finds them where they are.
    assert!(command_line_dependencies("harness").contains(&"clap".to_string()));
}
