//! The default bench pipeline, serial and parallel, on every workload kind (`passel gen KIND`).
//! Throughput is in bindings, so `cargo bench` reports bindings/s; the parallel rows use 2 and
//! all cores. `PASSEL_BENCH_FUNCTIONS` sets the function count (default 1000).

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use passel_engine::transform::{parse_pipeline, Pass, PassContext};
use passel_harness::bench::{count_bindings, DEFAULT_PIPELINE};
use passel_harness::gen::{workload, KINDS};

fn pipeline(c: &mut Criterion) {
    passel_passes::link();
    let n_funcs: usize = std::env::var("PASSEL_BENCH_FUNCTIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let mut thread_counts = vec![1, 2, cores];
    thread_counts.dedup();
    let pipeline = parse_pipeline(DEFAULT_PIPELINE).expect("registered passes");
    for kind in KINDS {
        let module = workload(kind, n_funcs, 0).expect("known workload");
        let mut g = c.benchmark_group(format!("pipeline/{kind}-{}", module.len()));
        g.throughput(Throughput::Elements(count_bindings(&module) as u64));
        for &threads in &thread_counts {
            let ctx = PassContext::builder().opt_level(3).num_threads(threads).build().expect("valid context");
            let mode = if threads == 1 { "serial".to_string() } else { format!("parallel-{threads}") };
            g.bench_with_input(BenchmarkId::from_parameter(mode), &threads, |b, _| {
                b.iter(|| {
                    ctx.scope(|| pipeline.run(module.clone(), &ctx)).expect("context enters").expect("pipeline runs")
                })
            });
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = pipeline
}
criterion_main!(benches);
