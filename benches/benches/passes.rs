//! Per-pass throughput on every workload kind (`passel gen KIND`), single-threaded, in
//! bindings/s. Each module is typed once up front, so a pass that requires InferType pays only
//! InferType's quick "already typed" scan. `PASSEL_BENCH_FUNCTIONS` sets the function count
//! (default 1000).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use passel_engine::transform::{parse_pipeline, Pass, PassContext};
use passel_harness::bench::count_bindings;
use passel_harness::gen::{workload, KINDS};

fn passes(c: &mut Criterion) {
    passel_passes::link();
    let n_funcs: usize = std::env::var("PASSEL_BENCH_FUNCTIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    let ctx = PassContext::builder().opt_level(3).num_threads(1).build().expect("valid context");
    for kind in KINDS {
        let (module, diags) = passel_passes::infer_module(&workload(kind, n_funcs, 0).expect("known workload"));
        assert!(diags.is_empty(), "{kind} does not type-check");
        let mut g = c.benchmark_group(format!("passes/{kind}-{}", module.len()));
        g.throughput(Throughput::Elements(count_bindings(&module) as u64));
        for name in passel_passes::standard_pass_names() {
            let pass = parse_pipeline(name).expect("registered pass");
            g.bench_function(name, |b| {
                b.iter(|| ctx.scope(|| pass.run(module.clone(), &ctx)).expect("context enters").expect("pass runs"))
            });
        }
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = passes
}
criterion_main!(benches);
