//! The incremental session on the `chain` workload with the standard pipeline at 2 threads:
//! a cold session run, a re-run with no change, and a re-run after one function's body was
//! edited (alternating between two versions, so every iteration has a real edit), in the
//! default memory mode (`incremental/…`) and in `MemoryMode::Lean` (`incremental-lean/…`).
//! `PASSEL_BENCH_FUNCTIONS` sets the function count (default 2000).

use criterion::{criterion_group, criterion_main, Criterion};
use passel_engine::transform::PassContext;
use passel_engine::MemoryMode;
use passel_harness::gen::{chain, ChainOptions};
use passel_passes::standard_session;

fn incremental(c: &mut Criterion) {
    passel_passes::link();
    let n_funcs: usize = std::env::var("PASSEL_BENCH_FUNCTIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(2000);
    let module = chain(&ChainOptions { functions: n_funcs, ops: 50, ..Default::default() });
    let pipeline = passel_passes::default_pipeline(2);
    let ctx = PassContext::builder().opt_level(2).num_threads(2).build().expect("valid context");
    let name = format!("f{}", n_funcs / 2);
    let versions = [
        module.get(&name).cloned().expect("generated function"),
        chain(&ChainOptions { functions: 1, ops: 50, seed: 7, ..Default::default() }).entries()[0].1.clone(),
    ];

    for (mode, group) in [(MemoryMode::Full, "incremental"), (MemoryMode::Lean, "incremental-lean")] {
        let session = || {
            let mut s = standard_session(pipeline.clone(), &ctx).expect("session");
            s.set_memory_mode(mode);
            s.load(&module);
            s
        };
        let mut g = c.benchmark_group(format!("{group}/chain-{n_funcs}x50"));
        g.bench_function("cold", |b| b.iter(|| session().run().expect("run")));
        let mut s = session();
        s.run().expect("run");
        g.bench_function("no-change", |b| b.iter(|| s.run().expect("run")));
        let mut i = 0usize;
        g.bench_function("one-edit", |b| {
            b.iter(|| {
                i += 1;
                s.set_function(&name, versions[i % 2].clone());
                s.run().expect("run")
            })
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = incremental
}
criterion_main!(benches);
