//! Serial vs parallel execution of the standard bench pipeline on the `chain` workload: the
//! plain serial path (1 thread), the parallel executor's planned, fused path on 1 thread (its
//! overhead), and the executor on 2 threads. Throughput is in bindings.
//! `PASSEL_BENCH_FUNCTIONS` sets the workload size (default 2000 functions of 50 ops).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use passel_engine::transform::{parse_pipeline, run_plain, run_sequential, PassContext, PassTimingInstrument};
use passel_harness::gen::{chain, ChainOptions};
use std::sync::Arc;

const PIPELINE: &str = "FoldConstant,EliminateCommonSubexpr,DeadCodeElimination,SimplifyExpr";

fn parallel(c: &mut Criterion) {
    passel_passes::link();
    let n_funcs: usize = std::env::var("PASSEL_BENCH_FUNCTIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    let module = chain(&ChainOptions { functions: n_funcs, ops: 50, ..Default::default() });
    let n_bindings: usize = module.iter().map(|(_, f)| f.num_bindings()).sum();
    let pipeline = parse_pipeline(PIPELINE).expect("registered passes");

    let mut g = c.benchmark_group(format!("parallel/chain-{n_funcs}x50"));
    g.throughput(Throughput::Elements(n_bindings as u64));
    let serial = PassContext::builder().opt_level(3).num_threads(1).build().expect("valid context");
    g.bench_function("serial-plain", |b| b.iter(|| run_plain(&pipeline, module.clone(), &serial).expect("runs")));
    for threads in [1, 2] {
        let ctx = PassContext::builder().opt_level(3).num_threads(threads).build().expect("valid context");
        g.bench_with_input(BenchmarkId::new("executor", threads), &threads, |b, _| {
            b.iter(|| run_sequential(&pipeline, module.clone(), &ctx).expect("runs"))
        });
    }
    // A timing instrument does not observe the IR, so stages stay fused under it.
    let timing = Arc::new(PassTimingInstrument::new());
    let ctx = PassContext::builder().opt_level(3).num_threads(2).instrument(timing).build().expect("valid context");
    g.bench_function("executor-2-with-timing", |b| {
        b.iter(|| ctx.scope(|| run_sequential(&pipeline, module.clone(), &ctx)).expect("enters").expect("runs"))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = parallel
}
criterion_main!(benches);
