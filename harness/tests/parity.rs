//! Serial = parallel: for generated modules, pipelines drawn from the registry and thread counts
//! {1, 2, 3, 8}, the printed output, the diagnostics and the pass statistic totals of a parallel
//! run are identical to a serial run's, and so is the crash reproducer of a failing run.
//! `PASSEL_PARITY_CASES=5000 cargo test -p passel-harness --test parity` runs more.
//!
//! Two generators: `gen::chain` (big regular functions) and the fuzz decoder
//! `fuzz::shaped_module` over random bytes (calls between functions, constants, duplicates,
//! dead code, nested functions, `if`, type errors, `SkipOptimization`, entry points).

use passel_engine::ir::{print_module, AttrValue, Module};
use std::sync::Arc;

use passel_engine::ir::{parse_module, verify_module};
use passel_engine::transform::{parse_pipeline, run_plain, run_sequential, Pass, PassContext, PassTimingInstrument};
use passel_harness::fuzz::{shaped_module, shaped_pipeline, Bytes};
use passel_harness::gen::{chain, ChainOptions};
use proptest::prelude::*;

/// Every standard pass: pipelines are drawn from the whole registry, so a pass added later is
/// covered without editing this test.
fn passes() -> Vec<&'static str> {
    passel_passes::standard_pass_names()
}

/// With one thread the plain pass-by-pass algorithm (the serial baseline: no stages, no fusion,
/// every module pass as a barrier); with more, `Pass::run` of the pipeline (the executor).
fn run(module: Module, pipeline: &str, threads: usize) -> (String, Vec<String>) {
    passel_passes::link();
    let seq = parse_pipeline(pipeline).expect("registered passes");
    let ctx = PassContext::builder().opt_level(3).num_threads(threads).statistics(true).build().expect("valid context");
    let res = ctx
        .scope(|| if threads == 1 { run_plain(&seq, module, &ctx) } else { seq.run(module, &ctx) })
        .expect("context enters");
    let out = match res {
        Ok(m) => print_module(&m),
        Err(e) => format!("error: {e}"),
    };
    (out, diags_and_statistics(&ctx))
}

/// The run's diagnostics, then its statistic totals, one line each.
fn diags_and_statistics(ctx: &PassContext) -> Vec<String> {
    let mut lines: Vec<String> = ctx.diagnostics().take().into_iter().map(|d| format!("{d:?}")).collect();
    lines.extend(ctx.take_statistics().iter().map(|(pass, name, n)| format!("stat {pass} {name} {n}")));
    lines
}

/// The executor on `threads` threads (also with 1: the fused, planned path) under a timing
/// instrument, which allows fusion.
fn run_executor(module: Module, pipeline: &str, threads: usize) -> (String, Vec<String>) {
    passel_passes::link();
    let seq = parse_pipeline(pipeline).expect("registered passes");
    let timing = Arc::new(PassTimingInstrument::new());
    let ctx = PassContext::builder()
        .opt_level(3)
        .num_threads(threads)
        .instrument(timing.clone())
        .statistics(true)
        .build()
        .expect("valid context");
    let res = ctx.scope(|| run_sequential(&seq, module, &ctx)).expect("context enters");
    let out = match res {
        Ok(m) => print_module(&m),
        Err(e) => format!("error: {e}"),
    };
    (out, diags_and_statistics(&ctx))
}

fn shaped(data: &[u8]) -> (Module, String) {
    let mut bytes = Bytes::new(data);
    let pipeline = shaped_pipeline(&mut bytes);
    let text = shaped_module(&mut bytes);
    (parse_module(&text).expect("decoded modules parse"), pipeline)
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
        picks in proptest::collection::vec(0..passes().len(), 1..6),
    ) {
        let module = chain(&ChainOptions { functions, ops, seed, ..Default::default() });
        let pipeline = picks.iter().map(|&i| passes()[i]).collect::<Vec<_>>().join(",");
        let serial = run(module.clone(), &pipeline, 1);
        for threads in [2, 3, 8] {
            let parallel = run(module.clone(), &pipeline, threads);
            prop_assert_eq!(&serial, &parallel, "pipeline {} with {} threads", pipeline, threads);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn parallel_output_equals_serial_on_varied_module_shapes(
        data in proptest::collection::vec(any::<u8>(), 0..400),
    ) {
        let (module, pipeline) = shaped(&data);
        let serial = run(module.clone(), &pipeline, 1);
        for threads in [1, 2, 3, 8] {
            let parallel = run_executor(module.clone(), &pipeline, threads);
            prop_assert_eq!(&serial, &parallel, "pipeline {} with {} threads", pipeline, threads);
        }
    }
}

#[test]
fn shaped_modules_are_mostly_well_typed_and_the_pipelines_mostly_succeed() {
    // Guards against a decoder that only produces errors, which would make parity vacuous.
    let mut verified = 0;
    let mut succeeded = 0;
    for seed in 0..200u32 {
        let data: Vec<u8> =
            (0..300u32).map(|i| (seed.wrapping_mul(2_654_435_761) ^ i.wrapping_mul(40_503)) as u8).collect();
        let (module, pipeline) = shaped(&data);
        verified += usize::from(verify_module(&module).is_ok());
        succeeded += usize::from(!run(module, &pipeline, 2).0.starts_with("error:"));
    }
    assert!(verified >= 60, "only {verified} of 200 decoded modules verify");
    assert!(succeeded >= 100, "only {succeeded} of 200 pipelines succeed");
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

/// The crash reproducer of `pipeline` on `module` at `threads` threads (what `passel run
/// --reproducer` writes) and whether it replays to the same failure, or `None` when no pass
/// failed.
fn reproducer_text(
    module: Module,
    pipeline: &str,
    threads: usize,
    local: bool,
) -> Option<Result<(String, bool), String>> {
    use passel_harness::args::PipelineArgs;
    use passel_harness::debug::reproducer::reproducer;
    passel_passes::link();
    let seq = parse_pipeline(pipeline).expect("registered passes");
    let inst = Arc::new(passel_engine::transform::ReproducerInstrument::new());
    let ctx =
        PassContext::builder().opt_level(3).num_threads(threads).instrument(inst.clone()).build().expect("context");
    let res = ctx.scope(|| seq.run(module, &ctx)).expect("context enters");
    let options = PipelineArgs { opt_level: Some(3), ..PipelineArgs::default() };
    inst.failure().map(|f| {
        reproducer(&f, res.as_ref().err(), &seq, &ctx, &options, local)
            .map(|r| (r.text, r.reproduces))
            .map_err(|e| e.to_string())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    /// Shaped modules fail with type errors (InferType's error diagnostics); `testing.FailOn`
    /// inserted into the pipeline fails on the functions marked `testing.fail`.
    #[test]
    fn reproducer_is_the_same_at_any_thread_count(
        data in proptest::collection::vec(any::<u8>(), 0..400),
        marks in proptest::collection::vec((0usize..64, 0usize..3), 0..3),
        at in 0usize..8,
        local in any::<bool>(),
    ) {
        let (mut module, pipeline) = shaped(&data);
        // `passel run` verifies its input, so a reproducer's input verifies too.
        if verify_module(&module).is_err() {
            return Ok(());
        }
        for &(i, mode) in &marks {
            let Some((name, func)) = module.iter().nth(i % module.len().max(1)).map(|(n, f)| (n.to_string(), f.clone())) else {
                continue;
            };
            let mode = ["error", "panic", "diagnostic"][mode];
            let attrs = func.attrs().clone().with("testing.fail", AttrValue::Str(mode.into()));
            module.insert(&name, func.with_attrs(attrs)).expect("valid name");
        }
        let mut names: Vec<&str> = pipeline.split(',').collect();
        // Any place between two items is valid pipeline text, inside a group too.
        if !marks.is_empty() {
            names.insert(at % (names.len() + 1), "testing.FailOn");
        }
        let pipeline = names.join(",");
        let serial = reproducer_text(module.clone(), &pipeline, 1, local);
        match &serial {
            Some(Ok((text, reproduces))) => {
                prop_assert!(reproduces, "the reproducer of {} does not replay to the same failure:\n{}", pipeline, text)
            }
            Some(Err(e)) => prop_assert!(false, "no reproducer for {}: {}", pipeline, e),
            None => {}
        }
        for threads in [2, 8] {
            let parallel = reproducer_text(module.clone(), &pipeline, threads, local);
            prop_assert_eq!(&serial, &parallel, "pipeline {} with {} threads", pipeline, threads);
        }
    }
}

#[test]
fn shaped_runs_often_fail_and_their_reproducers_replay() {
    // Guards against a property that never sees a failure, which would make it vacuous.
    let (mut failed, mut reduced) = (0, 0);
    for seed in 0..100u32 {
        let data: Vec<u8> =
            (0..300u32).map(|i| (seed.wrapping_mul(2_654_435_761) ^ i.wrapping_mul(40_503)) as u8).collect();
        let (mut module, pipeline) = shaped(&data);
        if verify_module(&module).is_err() {
            continue;
        }
        let (name, func) = module.iter().last().map(|(n, f)| (n.to_string(), f.clone())).expect("a function");
        let attrs = func.attrs().clone().with("testing.fail", AttrValue::Str("error".into()));
        module.insert(&name, func.with_attrs(attrs)).expect("valid name");
        if let Some(res) = reproducer_text(module, &format!("{pipeline},testing.FailOn"), 2, seed % 2 == 0) {
            let (text, reproduces) = res.expect("a reproducer");
            assert!(reproduces, "{text}");
            failed += 1;
            reduced += usize::from(text.contains("// Reduced to"));
        }
    }
    assert!(failed >= 50, "only {failed} of 100 runs failed");
    assert!(reduced >= 30, "only {reduced} of {failed} reproducers were reduced");
}

/// The real models (`engine/tests/data/real_models`, written by torch.onnx and onnxruntime's
/// tools), imported and run through the `-O3` pipeline: serially, and on two threads with
/// every folded call's kernel and every comparison of large constants spread over the
/// workers however small (`relay.FoldConstant.min_parallel_work=1`,
/// `relay.EliminateCommonSubexpr.min_parallel_bytes=0`), which a model (one function) reaches
/// only through the parallelism inside passes. Output and diagnostics are identical.
#[test]
fn real_models_optimise_the_same_at_any_thread_count() {
    passel_passes::link();
    let dir: std::path::PathBuf =
        [env!("CARGO_MANIFEST_DIR"), "..", "engine", "tests", "data", "real_models"].iter().collect();
    let mut models: Vec<std::path::PathBuf> = std::fs::read_dir(&dir)
        .expect("the real-model corpus is committed")
        .filter_map(|e| Some(e.ok()?.path().join("model.onnx")))
        .filter(|p| p.is_file())
        .collect();
    models.sort();
    let options = passel_engine::frontend::onnx::ImportOptions::default();
    let mut done = 0;
    for path in &models {
        let Ok(module) = passel_harness::onnx::import_onnx(path, &options) else { continue };
        let run = |threads: usize, spread: bool| {
            let mut builder = PassContext::builder().opt_level(3).num_threads(threads).statistics(true);
            if spread {
                builder = builder
                    .config("relay.FoldConstant.min_parallel_work", 1i64)
                    .config("relay.EliminateCommonSubexpr.min_parallel_bytes", 0i64);
            }
            let ctx = builder.build().expect("valid context");
            let pipeline = passel_passes::default_pipeline(3);
            let res = ctx.scope(|| pipeline.run(module.clone(), &ctx)).expect("context enters");
            let out = match res {
                Ok(m) => print_module(&m),
                Err(e) => format!("error: {e}"),
            };
            (out, diags_and_statistics(&ctx))
        };
        let serial = run(1, false);
        assert_eq!(run(2, true), serial, "{}: two threads, work spread inside passes", path.display());
        assert_eq!(run(3, true), serial, "{}: three threads", path.display());
        done += 1;
    }
    assert!(done >= 20, "only {done} of {} real models imported", models.len());
}
