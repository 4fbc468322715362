//! Serial = parallel: for generated modules, pipelines drawn from the registry and thread counts
//! {1, 2, 3, 8}, the printed output and the diagnostics of a parallel run are byte-identical to a
//! serial run. `PASSEL_PARITY_CASES=5000 cargo test -p passel-harness --test parity` runs more.

use passel_engine::ir::{print_module, Module};
use passel_engine::transform::{parse_pipeline, Pass, PassContext};
use passel_harness::gen::{chain, ChainOptions};
use proptest::prelude::*;

const PASSES: &[&str] = &[
    "FoldConstant",
    "SimplifyExpr",
    "CanonicalizeBindings",
    "EliminateCommonSubexpr",
    "DeadCodeElimination",
    "InferType",
];

fn run(module: Module, pipeline: &str, threads: usize) -> (String, Vec<String>) {
    passel_passes::link();
    let seq = parse_pipeline(pipeline).expect("registered passes");
    let ctx = PassContext::builder().opt_level(3).num_threads(threads).build().expect("valid context");
    let res = ctx.scope(|| seq.run(module, &ctx)).expect("context enters");
    let out = match res {
        Ok(m) => print_module(&m),
        Err(e) => format!("error: {e}"),
    };
    let diags = ctx.diagnostics().take().into_iter().map(|d| format!("{d:?}")).collect();
    (out, diags)
}

fn cases() -> u32 {
    std::env::var("PASSEL_PARITY_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn parallel_output_equals_serial(
        functions in 1usize..40,
        ops in 0usize..30,
        seed in any::<u64>(),
        picks in proptest::collection::vec(0..PASSES.len(), 1..6),
    ) {
        let module = chain(&ChainOptions { functions, ops, seed, ..Default::default() });
        let pipeline = picks.iter().map(|&i| PASSES[i]).collect::<Vec<_>>().join(",");
        let serial = run(module.clone(), &pipeline, 1);
        for threads in [2, 3, 8] {
            let parallel = run(module.clone(), &pipeline, threads);
            prop_assert_eq!(&serial, &parallel, "pipeline {} with {} threads", pipeline, threads);
        }
    }
}

#[test]
fn standard_pipeline_is_idempotent_on_chain() {
    let module = chain(&ChainOptions { functions: 20, ops: 30, seed: 3, ..Default::default() });
    let pipeline = passel_passes::STANDARD_PIPELINE.join(",");
    let (once, _) = run(module, &pipeline, 2);
    let again = passel_engine::ir::parse_module(&once).expect("output parses");
    let (twice, _) = run(again, &pipeline, 2);
    let first_diff = once.lines().zip(twice.lines()).find(|(a, b)| a != b);
    assert!(once == twice, "second run changed the output; first difference: {first_diff:?}");
}
