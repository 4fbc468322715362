//! Per-pass and pipeline throughput on the `chain` workload, single-threaded and parallel.
//! Throughput is in bindings, so `cargo bench` reports bindings/s.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use passel_engine::transform::{parse_pipeline, Pass, PassContext};
use passel_harness::gen::{chain, ChainOptions};

const PIPELINE: &str = "FoldConstant,EliminateCommonSubexpr,DeadCodeElimination,SimplifyExpr";

fn passes(c: &mut Criterion) {
    passel_passes::link();
    let n_funcs: usize = std::env::var("PASSEL_BENCH_FUNCTIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    let module = chain(&ChainOptions { functions: n_funcs, ops: 50, ..Default::default() });
    let n_bindings: usize = module.iter().map(|(_, f)| f.num_bindings()).sum();

    let mut g = c.benchmark_group(format!("passes/chain-{n_funcs}x50"));
    g.throughput(Throughput::Elements(n_bindings as u64));
    for name in ["InferType", "FoldConstant", "EliminateCommonSubexpr", "DeadCodeElimination", "SimplifyExpr"] {
        let pass = parse_pipeline(name).expect("registered pass");
        let ctx = PassContext::builder().opt_level(3).num_threads(1).build().expect("valid context");
        g.bench_function(name, |b| b.iter(|| pass.run(module.clone(), &ctx).expect("pass runs")));
    }
    let pipeline = parse_pipeline(PIPELINE).expect("registered passes");
    for threads in [1, 2] {
        let ctx = PassContext::builder().opt_level(3).num_threads(threads).build().expect("valid context");
        g.bench_with_input(BenchmarkId::new("pipeline", format!("{threads}-threads")), &threads, |b, _| {
            b.iter(|| pipeline.run(module.clone(), &ctx).expect("pipeline runs"))
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = passes
}
criterion_main!(benches);
