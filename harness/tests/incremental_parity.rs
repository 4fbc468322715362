//! The standard pipeline in an incremental session (with the per-function forms of InferType
//! and DeadCodeElimination) prints the same module and reports the same diagnostics as a cold
//! serial run, after every edit of a random edit sequence.

use std::sync::Arc;

use passel_engine::ir::{parse_module, print_module, Function, Module};
use passel_engine::transform::{Diagnostic, PassContext};
use passel_engine::Pass;
use passel_harness::gen::{chain, ChainOptions};
use passel_harness::watch::standard_session;
use proptest::prelude::*;

fn ctx(opt_level: u32, threads: usize) -> PassContext {
    PassContext::builder().opt_level(opt_level).num_threads(threads).build().expect("context")
}

fn cold(module: &Module, opt_level: u32) -> (String, Vec<Diagnostic>) {
    let pipeline = passel_passes::default_pipeline(opt_level);
    let ctx = ctx(opt_level, 1);
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

#[derive(Clone, Debug)]
enum Edit {
    Replace(u8, u64),
    Remove(u8),
    AddMain,
    AddUndeclared,
    OptLevel(u8),
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        3 => (any::<u8>(), 0u64..1000).prop_map(|(i, s)| Edit::Replace(i, s)),
        1 => any::<u8>().prop_map(Edit::Remove),
        1 => Just(Edit::AddMain),
        1 => Just(Edit::AddUndeclared),
        1 => (0u8..4).prop_map(Edit::OptLevel),
    ]
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(16)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn random_edits_match_a_cold_serial_run(seed in 0u64..1000, edits in proptest::collection::vec(edit(), 1..8), threads in 1usize..3) {
        let mut module = chain(&ChainOptions { functions: 6, ops: 12, seed, ..Default::default() });
        let mut opt = 2;
        let mut s = standard_session(passel_passes::default_pipeline(opt), &ctx(opt, threads)).expect("session");
        s.load(&module);
        for e in edits {
            match e {
                Edit::Replace(i, seed) => {
                    let names: Vec<String> = module.iter().map(|(n, _)| n.to_string()).collect();
                    if let Some(name) = names.get(i as usize % names.len().max(1)) {
                        module.insert(name, chain_fn(seed, 12));
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
                    module.insert("main", main);
                }
                Edit::AddUndeclared => {
                    for (name, f) in parse_module(UNDECLARED).expect("parses").iter() {
                        module.insert(name, f.clone());
                    }
                }
                Edit::OptLevel(level) => {
                    opt = u32::from(level);
                    s.set_context(&ctx(opt, threads)).expect("context");
                    s.set_pipeline(passel_passes::default_pipeline(opt)).expect("pipeline");
                }
            }
            s.load(&module);
            let out = s.run().expect("session run succeeds");
            let (text, diags) = cold(&module, opt);
            prop_assert_eq!(print_module(&out.module), text);
            prop_assert_eq!(out.diagnostics, diags);
        }
    }
}
