//! The standard pipeline in an incremental session (with the per-function forms of InferType
//! and DeadCodeElimination) prints the same module and reports the same diagnostics as a cold
//! serial run, after every edit of a random edit sequence.
//! `PASSEL_INCREMENTAL_CASES=300 cargo test -p passel-harness --test incremental_parity` runs
//! more cases (`PROPTEST_CASES` is honoured too when the specific variable is unset).

use std::sync::Arc;

use passel_engine::ir::{parse_module, print_module, AttrValue, Function, Module};
use passel_engine::transform::{Diagnostic, PassContext};
use passel_engine::{MemoryMode, Pass};
use passel_harness::gen::{chain, ChainOptions};
use passel_passes::standard_session;
use proptest::prelude::*;

fn ctx(opt_level: u32, threads: usize) -> PassContext {
    ctx_max(opt_level, threads, 0)
}

/// A context with Inline's size limit `max_size`.
fn ctx_max(opt_level: u32, threads: usize, max_size: i64) -> PassContext {
    PassContext::builder()
        .opt_level(opt_level)
        .num_threads(threads)
        .config(passel_passes::inline::MAX_SIZE_KEY, max_size)
        .build()
        .expect("context")
}

fn cold(module: &Module, opt_level: u32) -> (String, Vec<Diagnostic>) {
    cold_max(module, opt_level, 0)
}

fn cold_max(module: &Module, opt_level: u32, max_size: i64) -> (String, Vec<Diagnostic>) {
    let pipeline = passel_passes::default_pipeline(opt_level);
    let ctx = ctx_max(opt_level, 1, max_size);
    let out = ctx.scope(|| pipeline.run(module.clone(), &ctx)).expect("scope").expect("cold run succeeds");
    (print_module(&out), ctx.diagnostics().take())
}

fn chain_fn(seed: u64, ops: usize) -> Arc<Function> {
    chain(&ChainOptions { functions: 1, ops, seed, ..Default::default() }).entries()[0].1.clone()
}

const MAIN: &str = "\
def @main(%x: Tensor[(8, 8), f32]) -> Tensor[(8, 8), f32] {
  let %a = @f0(%x);
  let %b = @f1(%a);
  let %c = add(%a, %b);
  %c
}
";

/// A function whose result type is not declared, so callers type their call through the
/// body's inferred type; and a caller with a type error when the callee is missing.
const UNDECLARED: &str = "\
def @helper(%x: Tensor[(8, 8), f32]) {
  negative(%x)
}

def @user(%x: Tensor[(8, 8), f32]) -> Tensor[(8, 8), f32] {
  let %h = @helper(%x);
  relu(%h)
}
";

#[test]
fn standard_pipeline_session_matches_cold_run_on_the_chain_workload() {
    let module = chain(&ChainOptions { functions: 40, ops: 20, ..Default::default() });
    for opt in 0..4 {
        let mut s = standard_session(passel_passes::default_pipeline(opt), &ctx(opt, 2)).expect("session");
        s.load(&module);
        let out = s.run().expect("run");
        let (text, diags) = cold(&module, opt);
        assert_eq!(print_module(&out.module), text, "opt level {opt}");
        assert_eq!(out.diagnostics, diags);
    }
}

#[test]
fn one_body_edit_recomputes_one_function_in_every_function_stage() {
    let module = chain(&ChainOptions { functions: 30, ops: 20, ..Default::default() });
    let mut s = standard_session(passel_passes::default_pipeline(2), &ctx(2, 2)).expect("session");
    s.load(&module);
    s.run().expect("run");
    s.set_function("f7", chain_fn(99, 20));
    let out = s.run().expect("run");
    for stage in &out.stats.stages {
        if stage.is_module_pass {
            continue;
        }
        assert_eq!(stage.recomputed.iter().map(|n| &**n).collect::<Vec<_>>(), ["f7"], "stage {}", stage.label);
    }
    let (text, _) = cold(&s.module(), 2);
    assert_eq!(print_module(&out.module), text);
}

/// Module stages that ran again (recomputed every function) in a run.
fn module_passes_run(out: &passel_engine::SessionOutput) -> Vec<String> {
    out.stats.stages.iter().filter(|s| s.is_module_pass && !s.recomputed.is_empty()).map(|s| s.label.clone()).collect()
}

/// `func` with the attribute `key` set to 1.
fn with_attr(func: &Function, key: &str) -> Arc<Function> {
    Arc::new(func.with_attrs(func.attrs().clone().with(key, AttrValue::Int(1))))
}

/// A function named `name` whose body calls `@callee` (and so references it).
fn caller_of(name: &str, callee: &str) -> Arc<Function> {
    caller_with(name, callee, 0)
}

/// A function named `name` whose body calls `@callee`, then applies an operator chosen by `op`.
fn caller_with(name: &str, callee: &str, op: u8) -> Arc<Function> {
    let op = ["negative", "relu", "tanh"][usize::from(op) % 3];
    let text = format!(
        "def @{name}(%x: Tensor[(8, 8), f32]) -> Tensor[(8, 8), f32] {{\n  let %a = @{callee}(%x);\n  {op}(%a)\n}}\n"
    );
    parse_module(&text).expect("parses").entries()[0].1.clone()
}

#[test]
fn a_body_edit_that_leaves_candidates_and_references_alone_skips_inline_and_reachability() {
    let mut module = chain(&ChainOptions { functions: 30, ops: 20, ..Default::default() });
    module.insert("main", parse_module(MAIN).expect("parses").entries()[0].1.clone()).expect("a valid name");
    let mut s = standard_session(passel_passes::default_pipeline(2), &ctx(2, 2)).expect("session");
    s.load(&module);
    s.run().expect("run");
    s.set_function("f1", chain_fn(99, 20));
    let out = s.run().expect("run");
    assert_eq!(module_passes_run(&out), Vec::<String>::new());
    assert_eq!(out.stats.recomputed_functions().iter().map(|n| &**n).collect::<Vec<_>>(), ["f1"]);
    let (text, diags) = cold(&s.module(), 2);
    assert_eq!(print_module(&out.module), text);
    assert_eq!(out.diagnostics, diags);
}

#[test]
fn an_edit_that_makes_a_function_inlinable_runs_inline_again() {
    let mut module = chain(&ChainOptions { functions: 10, ops: 8, ..Default::default() });
    module.insert("main", parse_module(MAIN).expect("parses").entries()[0].1.clone()).expect("a valid name");
    let mut s = standard_session(passel_passes::default_pipeline(2), &ctx(2, 1)).expect("session");
    s.load(&module);
    s.run().expect("run");
    let f1 = module.get("f1").expect("f1").clone();
    s.set_function("f1", with_attr(&f1, "Inline"));
    let out = s.run().expect("run");
    assert!(module_passes_run(&out).contains(&"Inline".to_string()), "{:?}", module_passes_run(&out));
    let (text, _) = cold(&s.module(), 2);
    assert_eq!(print_module(&out.module), text);
    assert!(!text.contains("@f1(%"), "f1 is inlined into main:\n{text}");
    // Editing the caller of an inlinable function runs Inline again too, whether its
    // references change or not.
    s.set_function("main", caller_of("main", "f1"));
    let out = s.run().expect("run");
    assert!(module_passes_run(&out).contains(&"Inline".to_string()));
    assert_eq!(print_module(&out.module), cold(&s.module(), 2).0);
    s.set_function("main", caller_with("main", "f1", 1));
    let out = s.run().expect("run");
    assert!(module_passes_run(&out).contains(&"Inline".to_string()));
    let text = cold(&s.module(), 2).0;
    assert_eq!(print_module(&out.module), text);
    assert!(text.contains("relu"), "{text}");
}

#[test]
fn an_edit_that_changes_what_main_references_runs_reachability_again() {
    let mut module = chain(&ChainOptions { functions: 10, ops: 8, ..Default::default() });
    module.insert("main", parse_module(MAIN).expect("parses").entries()[0].1.clone()).expect("a valid name");
    let mut s = standard_session(passel_passes::default_pipeline(2), &ctx(2, 1)).expect("session");
    s.load(&module);
    let out = s.run().expect("run");
    assert!(out.module.get("f5").is_none());
    s.set_function("main", caller_of("main", "f5"));
    let out = s.run().expect("run");
    // Inline's firewall needs the same references too.
    assert_eq!(module_passes_run(&out), ["Inline", "DeadCodeElimination"]);
    assert!(out.module.get("f5").is_some() && out.module.get("f0").is_none());
    assert_eq!(print_module(&out.module), cold(&s.module(), 2).0);
}

#[test]
fn an_edit_that_turns_a_reference_to_an_inlinable_function_into_a_call_runs_inline_again() {
    let mut module = chain(&ChainOptions { functions: 4, ops: 6, ..Default::default() });
    let f1 = module.get("f1").expect("f1").clone();
    module.insert("f1", with_attr(&f1, "Inline")).expect("a valid name");
    let indirect = "\
def @main(%x: Tensor[(8, 8), f32]) -> Tensor[(8, 8), f32] {
  let %g = @f1;
  let %a = %g(%x);
  negative(%a)
}
";
    module.insert("main", parse_module(indirect).expect("parses").entries()[0].1.clone()).expect("a valid name");
    let mut s = standard_session(passel_passes::default_pipeline(2), &ctx(2, 1)).expect("session");
    s.load(&module);
    let out = s.run().expect("run");
    assert_eq!(print_module(&out.module), cold(&s.module(), 2).0);
    // Same references (only @f1), but now a direct call, which Inline inlines.
    s.set_function("main", caller_of("main", "f1"));
    let out = s.run().expect("run");
    assert!(module_passes_run(&out).contains(&"Inline".to_string()));
    let text = cold(&s.module(), 2).0;
    assert_eq!(print_module(&out.module), text);
    assert!(!text.contains("@f1(%"), "f1 is inlined into main:\n{text}");
}

#[test]
fn a_signature_change_of_a_function_called_through_an_inlined_one_matches_a_cold_run() {
    let mut module = chain(&ChainOptions { functions: 3, ops: 6, ..Default::default() });
    module.insert("h", with_attr(&caller_of("h", "f0"), "Inline")).expect("a valid name");
    module.insert("main", caller_of("main", "h")).expect("a valid name");
    let mut s = standard_session(passel_passes::default_pipeline(2), &ctx(2, 1)).expect("session");
    s.load(&module);
    let out = s.run().expect("run");
    assert_eq!(print_module(&out.module), cold(&s.module(), 2).0);
    // @main references @f0 only after Inline; @f0's signature changes (its result type is
    // no longer declared): @h and, through Inline, @main are recomputed.
    let undeclared = "def @f0(%x: Tensor[(8, 8), f32]) {\n  negative(%x)\n}\n";
    s.set_function("f0", parse_module(undeclared).expect("parses").entries()[0].1.clone());
    let out = s.run().expect("run");
    let (text, diags) = cold(&s.module(), 2);
    assert_eq!(print_module(&out.module), text);
    assert_eq!(out.diagnostics, diags);
    let stages_with_main = out.stats.stages.iter().filter(|st| st.recomputed.iter().any(|n| &**n == "main")).count();
    assert!(stages_with_main > 0, "{:?}", out.stats.stages);
}

#[derive(Clone, Debug)]
enum Edit {
    Replace(u8, u64),
    Remove(u8),
    AddMain,
    AddUndeclared,
    OptLevel(u8),
    /// Toggles the `Inline` attribute of a function.
    MarkInline(u8),
    /// Toggles the `Exported` attribute of a function.
    Export(u8),
    /// Makes a function call another, then apply one of three operators.
    Call(u8, u8, u8),
    /// Sets Inline's size limit.
    MaxSize(u8),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => (any::<u8>(), 0u64..1000).prop_map(|(i, s)| Edit::Replace(i, s)),
        1 => any::<u8>().prop_map(Edit::Remove),
        1 => Just(Edit::AddMain),
        1 => Just(Edit::AddUndeclared),
        1 => (0u8..4).prop_map(Edit::OptLevel),
        2 => any::<u8>().prop_map(Edit::MarkInline),
        1 => any::<u8>().prop_map(Edit::Export),
        2 => (any::<u8>(), any::<u8>(), any::<u8>()).prop_map(|(i, j, op)| Edit::Call(i, j, op)),
        1 => prop_oneof![Just(0u8), Just(6), Just(40)].prop_map(Edit::MaxSize),
    ]
}

/// `func` with the attribute `key` toggled.
fn toggled(func: &Function, key: &str) -> Arc<Function> {
    if func.attrs().contains(key) {
        let mut attrs = passel_engine::ir::Attrs::default();
        for (k, v) in func.attrs().iter().filter(|(k, _)| *k != key) {
            attrs = attrs.with(k, v.clone());
        }
        Arc::new(func.with_attrs(attrs))
    } else {
        with_attr(func, key)
    }
}

fn cases() -> u32 {
    ["PASSEL_INCREMENTAL_CASES", "PROPTEST_CASES"]
        .iter()
        .find_map(|key| std::env::var(key).ok().and_then(|v| v.parse().ok()))
        .unwrap_or(16)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn random_edits_match_a_cold_serial_run(seed in 0u64..1000, edits in proptest::collection::vec(edit(), 1..8), threads in 1usize..3) {
        let mut module = chain(&ChainOptions { functions: 6, ops: 12, seed, ..Default::default() });
        let mut opt = 2;
        let mut max_size = 0i64;
        // The default session and a lean one ([`MemoryMode::Lean`]) take the same edits.
        let mut sessions = Vec::new();
        for mode in [MemoryMode::Full, MemoryMode::Lean] {
            let mut s = standard_session(passel_passes::default_pipeline(opt), &ctx(opt, threads)).expect("session");
            s.set_memory_mode(mode);
            s.load(&module);
            sessions.push(s);
        }
        for e in edits {
            let names: Vec<String> = module.iter().map(|(n, _)| n.to_string()).collect();
            let pick = |i: u8| names.get(i as usize % names.len().max(1)).cloned();
            match e {
                Edit::MarkInline(i) | Edit::Export(i) => {
                    let key = if matches!(e, Edit::MarkInline(_)) { "Inline" } else { "Exported" };
                    if let Some(name) = pick(i) {
                        let f = toggled(module.get(&name).expect("exists"), key);
                        module.insert(&name, f).expect("a valid name");
                    }
                }
                Edit::Call(i, j, op) => {
                    if let (Some(name), Some(callee)) = (pick(i), pick(j)) {
                        module.insert(&name, caller_with(&name, &callee, op)).expect("a valid name");
                    }
                }
                Edit::MaxSize(n) => {
                    max_size = i64::from(n);
                    for s in &mut sessions {
                        s.set_context(&ctx_max(opt, threads, max_size)).expect("context");
                    }
                }
                Edit::Replace(i, seed) => {
                    let names: Vec<String> = module.iter().map(|(n, _)| n.to_string()).collect();
                    if let Some(name) = names.get(i as usize % names.len().max(1)) {
                        module.insert(name, chain_fn(seed, 12)).expect("a valid name");
                    }
                }
                Edit::Remove(i) => {
                    let names: Vec<String> = module.iter().map(|(n, _)| n.to_string()).collect();
                    if let Some(name) = names.get(i as usize % names.len().max(1)) {
                        module.remove(name).expect("exists");
                    }
                }
                Edit::AddMain => {
                    let main = parse_module(MAIN).expect("parses").entries()[0].1.clone();
                    module.insert("main", main).expect("a valid name");
                }
                Edit::AddUndeclared => {
                    for (name, f) in parse_module(UNDECLARED).expect("parses").iter() {
                        module.insert(name, f.clone()).expect("a valid name");
                    }
                }
                Edit::OptLevel(level) => {
                    opt = u32::from(level);
                    for s in &mut sessions {
                        s.set_context(&ctx_max(opt, threads, max_size)).expect("context");
                        s.set_pipeline(passel_passes::default_pipeline(opt)).expect("pipeline");
                    }
                }
            }
            let (text, diags) = cold_max(&module, opt, max_size);
            for s in &mut sessions {
                s.load(&module);
                let out = s.run().expect("session run succeeds");
                prop_assert_eq!(print_module(&out.module), text.clone(), "{:?} mode", s.memory_mode());
                prop_assert_eq!(&out.diagnostics, &diags, "{:?} mode", s.memory_mode());
            }
        }
    }
}

/// A function with a type error (a call with one argument too few), so InferType reports a
/// diagnostic with a source span.
const ILL_TYPED: &str = "\
def @pair(%x: Tensor[(8, 8), f32], %y: Tensor[(8, 8), f32]) -> Tensor[(8, 8), f32] {
  add(%x, %y)
}

def @user(%x: Tensor[(8, 8), f32]) -> Tensor[(8, 8), f32] {
  let %p = @pair(%x);
  relu(%x)
}
";

/// Regression (found by the `pipeline_parity` fuzz target): a function that only moved in its
/// source (same body, shifted spans) must get its diagnostics at the new place even when
/// nothing else changed since the last run. The session used to hand back the previous run's
/// output unchanged, with the old spans.
#[test]
fn diagnostics_follow_a_function_that_only_moved() {
    let module = parse_module(ILL_TYPED).expect("parses");
    let mut s = standard_session(passel_passes::default_pipeline(2), &ctx(2, 2)).expect("session");
    s.load(&module);
    let out = s.run().expect("run");
    let (_, diags) = cold(&module, 2);
    assert!(!diags.is_empty() && diags.iter().all(|d| d.span.is_some()), "the test needs spanned diagnostics");
    assert_eq!(out.diagnostics, diags);
    // Blank lines and a comment above: every function moves, none changes.
    let moved = parse_module(&format!("\n\n// moved\n{ILL_TYPED}")).expect("parses");
    assert!(s.load(&moved).is_empty(), "nothing changed but positions");
    let out = s.run().expect("run");
    let (_, moved_diags) = cold(&moved, 2);
    assert_ne!(moved_diags, diags, "the spans moved");
    assert_eq!(out.diagnostics, moved_diags);
    // And one function alone, through set_function.
    let user = moved.get("user").expect("user").clone();
    let back = parse_module(ILL_TYPED).expect("parses");
    s.load(&back);
    assert_eq!(s.run().expect("run").diagnostics, diags);
    assert!(!s.set_function("user", user), "same function, moved");
    let mut mixed = back.clone();
    mixed.insert("user", moved.get("user").expect("user").clone()).expect("a valid name");
    assert_eq!(s.run().expect("run").diagnostics, cold(&mixed, 2).1);
}

/// A session's statistics are those of the work it did: a cold session run counts what a cold
/// serial run counts (at any thread count, in both memory modes), and a re-run with nothing
/// changed counts nothing.
#[test]
fn session_statistics_count_the_work_done_in_the_run() {
    let module = chain(&ChainOptions { functions: 30, ops: 20, ..Default::default() });
    let with_stats =
        |threads| PassContext::builder().opt_level(3).num_threads(threads).statistics(true).build().expect("context");
    let pipeline = passel_passes::default_pipeline(3);
    let serial = with_stats(1);
    serial.scope(|| pipeline.run(module.clone(), &serial)).expect("scope").expect("serial run");
    let expected = serial.take_statistics();
    assert!(expected.get("FoldConstant", "calls folded").is_some_and(|n| n > 0), "{expected:?}");
    for mode in [MemoryMode::Full, MemoryMode::Lean] {
        for threads in [1, 2, 8] {
            let mut s = standard_session(pipeline.clone(), &with_stats(threads)).expect("session");
            s.set_memory_mode(mode);
            s.load(&module);
            s.run().expect("cold run");
            assert_eq!(s.take_statistics(), expected, "{mode:?} mode, {threads} threads");
            s.run().expect("no-change run");
            assert!(s.take_statistics().is_empty(), "a no-change run does no work");
        }
    }
}
