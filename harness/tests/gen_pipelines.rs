//! The standard passes on every workload kind: for random pipelines over generated modules,
//! serial and parallel runs print the same module and diagnostics, and the result still
//! verifies and type-checks. `PASSEL_GEN_CASES=500` runs more cases.

use passel_engine::ir::{print_module, verify_module, Module};
use passel_engine::transform::{parse_pipeline, Pass, PassContext};
use passel_harness::gen::{workload, KINDS};
use proptest::prelude::*;

/// Every standard pass: pipelines are drawn from the whole registry, so a pass added later is
/// covered without editing this test.
fn passes() -> Vec<&'static str> {
    passel_passes::standard_pass_names()
}

fn run(module: Module, pipeline: &str, threads: usize) -> (Result<Module, String>, Vec<String>) {
    passel_passes::link();
    let seq = parse_pipeline(pipeline).expect("registered passes");
    let ctx = PassContext::builder().opt_level(3).num_threads(threads).build().expect("valid context");
    let res = ctx.scope(|| seq.run(module, &ctx)).expect("context enters").map_err(|e| e.to_string());
    let diags = ctx.diagnostics().take().into_iter().map(|d| format!("{d:?}")).collect();
    (res, diags)
}

fn cases() -> u32 {
    std::env::var("PASSEL_GEN_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(12)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn passes_on_generated_workloads_are_deterministic_and_keep_modules_well_typed(
        kind in 0usize..KINDS.len(),
        functions in 1usize..16,
        seed in any::<u64>(),
        picks in proptest::collection::vec(0..passes().len(), 1..7),
    ) {
        let module = workload(KINDS[kind], functions, seed).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let pipeline = picks.iter().map(|&i| passes()[i]).collect::<Vec<_>>().join(",");
        let (serial, serial_diags) = run(module.clone(), &pipeline, 1);
        let out = serial.map_err(|e| TestCaseError::fail(format!("{pipeline} failed: {e}")))?;
        prop_assert!(serial_diags.is_empty(), "{} on {}: {:?}", pipeline, KINDS[kind], serial_diags);
        let text = print_module(&out);
        prop_assert!(verify_module(&out).is_ok(), "{} broke a {} module:\n{}", pipeline, KINDS[kind], text);
        let (_, diags) = passel_passes::infer_module(&out);
        prop_assert!(diags.is_empty(), "{} left a {} module ill-typed: {:?}", pipeline, KINDS[kind], diags.iter().map(|d| &d.message).collect::<Vec<_>>());
        for threads in [2, 3] {
            let (parallel, diags) = run(module.clone(), &pipeline, threads);
            let parallel = parallel.map_err(|e| TestCaseError::fail(format!("{pipeline} failed with {threads} threads: {e}")))?;
            prop_assert_eq!(&print_module(&parallel), &text, "{} with {} threads", pipeline, threads);
            prop_assert!(diags.is_empty());
        }
    }
}
