//! Parse, parse + verify, and print throughput on every workload kind (`passel gen KIND`), in
//! bindings/s. `PASSEL_BENCH_FUNCTIONS` sets the function count (default 1000).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use passel_engine::ir::{parse_module, print_module, verify_module};
use passel_harness::bench::count_bindings;
use passel_harness::gen::{workload, KINDS};

fn frontend(c: &mut Criterion) {
    let n_funcs: usize = std::env::var("PASSEL_BENCH_FUNCTIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000);
    for kind in KINDS {
        let module = workload(kind, n_funcs, 0).expect("known workload");
        let text = print_module(&module);
        let mut g = c.benchmark_group(format!("frontend/{kind}-{}", module.len()));
        g.throughput(Throughput::Elements(count_bindings(&module) as u64));
        g.bench_function("print", |b| b.iter(|| print_module(&module)));
        g.bench_function("parse", |b| b.iter(|| parse_module(&text).expect("generated text parses")));
        // What `passel check` does: parse, then verify the module.
        g.bench_function("parse+verify", |b| {
            b.iter(|| {
                let m = parse_module(&text).expect("generated text parses");
                verify_module(&m).expect("generated module verifies");
                m
            })
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = frontend
}
criterion_main!(benches);
