//! Parse, parse + verify, and print throughput on the `chain` workload (`passel gen chain`).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use passel_engine::ir::{parse_module, print_module, verify_module};
use passel_harness::gen::{chain, ChainOptions};

fn frontend(c: &mut Criterion) {
    let module = chain(&ChainOptions { functions: 1000, ops: 50, ..Default::default() });
    let text = print_module(&module);
    let n_bindings: usize = module.iter().map(|(_, f)| f.num_bindings()).sum();

    let mut g = c.benchmark_group("frontend/chain-1000x50");
    g.throughput(Throughput::Elements(n_bindings as u64));
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

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20);
    targets = frontend
}
criterion_main!(benches);
