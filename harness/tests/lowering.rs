//! The lowering pipeline (`passel run --lower`: the standard `-O3` pipeline, then LegalizeOps,
//! FuseTIR and the tir passes) on generated models of every kind: the lowered module verifies,
//! evaluates to the graph-level result (the loop-level interpreter against the graph one),
//! prints the same at 1 and 2 threads, and FuseTIR leaves no fused group as a graph function
//! when all its operators lower; and, on larger models with many distinct kernels (so that
//! LegalizeOps and FuseTIR split their work over both workers), that the lowered text is the
//! same at 1 and 2 threads. `PASSEL_LOWERING_CASES=N` runs more cases.

use passel_engine::interp::{eval_function, random_args, Value};
use passel_engine::ir::{print_module, verify_module, ExprKind, Module};
use passel_engine::transform::{Pass, PassContext};
use passel_harness::gen::{cnn, mlp, random, transformer, CnnOptions, MlpOptions, RandomOptions, TransformerOptions};
use proptest::prelude::*;

fn run(module: Module, pipeline: &dyn Pass, threads: usize) -> Module {
    passel_passes::link();
    let ctx = PassContext::builder().opt_level(3).num_threads(threads).build().expect("valid context");
    ctx.scope(|| pipeline.run(module, &ctx)).expect("context enters").expect("pipeline runs")
}

/// Small models (the loop-level interpreter walks every element), one per kind.
fn model(kind: usize, size: usize, seed: u64) -> Module {
    match kind {
        0 => cnn(&CnnOptions { blocks: size, batch: 1, channels: 4, image: 6, classes: 3, seed }),
        1 => mlp(&MlpOptions { layers: size, batch: 2, input: 5, width: 6, seed, ..Default::default() }),
        2 => transformer(&TransformerOptions { layers: size, seq: 3, hidden: 8, ffn: 12, per_block: true, seed }),
        _ => random(&RandomOptions { functions: size + 1, seed, ..Default::default() }),
    }
}

fn close(a: &Value, b: &Value) -> Result<(), String> {
    passel_engine::interp::assert_values_close(a, b, 1e-4, 1e-5)
}

/// Primitive functions still applied as graph functions in `module`.
fn unfused_groups(module: &Module) -> usize {
    module
        .iter()
        .map(|(_, f)| {
            let live = f.live_mask();
            f.nodes().iter().enumerate().filter(|(i, n)| live[*i] && matches!(n.kind, ExprKind::Func { .. })).count()
        })
        .sum()
}

fn cases() -> u32 {
    std::env::var("PASSEL_LOWERING_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(6)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn lowered_models_evaluate_as_the_graph_and_print_the_same_at_any_thread_count(
        kind in 0usize..4,
        size in 1usize..3,
        seed in any::<u64>(),
    ) {
        let module = model(kind, size, seed);
        let optimised = run(module.clone(), &passel_passes::default_pipeline(3), 1);
        let lowered = run(module.clone(), &passel_passes::build_pipeline(3), 1);
        prop_assert!(verify_module(&lowered).is_ok(), "{:?}", verify_module(&lowered).err());
        prop_assert!(lowered.num_prims() > 0, "nothing lowered:\n{}", print_module(&lowered));
        let text = print_module(&lowered);
        let parallel = run(module, &passel_passes::build_pipeline(3), 2);
        prop_assert_eq!(print_module(&parallel), text.clone(), "2 threads");
        if kind != 3 {
            // Every operator these generators use lowers, so every group fuses.
            prop_assert_eq!(unfused_groups(&lowered), 0, "a group stayed a graph function:\n{}", text);
        }
        // The entry: `@main`, or the random workload's first function.
        let entry = match optimised.get("main") {
            Some(_) => "main".to_string(),
            None => optimised.iter().next().map(|(n, _)| n.to_string()).expect("a function"),
        };
        let func = optimised.get(&entry).expect("the entry");
        let args = random_args(func, seed).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let want = eval_function(&optimised, &entry, &args).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let got = eval_function(&lowered, &entry, &args).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        close(&got, &want).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
    }
}

/// Models with dozens of distinct kernels (varied widths, several blocks), too large to
/// evaluate per case but enough that LegalizeOps and FuseTIR fan their per-call and per-group
/// work out over both workers.
fn larger_model(kind: usize, size: usize, seed: u64) -> Module {
    match kind {
        0 => cnn(&CnnOptions { blocks: size, batch: 1, channels: 4, image: 6, classes: 3, seed }),
        1 => mlp(&MlpOptions {
            layers: 4 * size,
            batch: 2,
            input: 5,
            width: 6,
            seed,
            varied_widths: true,
            ..Default::default()
        }),
        2 => transformer(&TransformerOptions { layers: size, seq: 3, hidden: 8, ffn: 12, per_block: true, seed }),
        _ => random(&RandomOptions { functions: 4 * size, seed, ..Default::default() }),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn lowering_many_kernels_prints_the_same_at_1_and_2_threads(
        kind in 0usize..4,
        size in 4usize..12,
        seed in any::<u64>(),
    ) {
        let module = larger_model(kind, size, seed);
        let serial = run(module.clone(), &passel_passes::build_pipeline(3), 1);
        prop_assert!(serial.num_prims() > 1, "fewer than two kernels:\n{}", print_module(&serial));
        let text = print_module(&serial);
        for _ in 0..2 {
            let parallel = run(module.clone(), &passel_passes::build_pipeline(3), 2);
            prop_assert_eq!(print_module(&parallel), text.clone(), "2 threads");
        }
    }
}
