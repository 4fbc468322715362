//! The PrimFunc interpreter against the graph-level interpreter's kernels (issue #31: a lowered
//! model should evaluate within 5x of the graph level). Two workloads: an elementwise add of
//! 1,048,576 f32 elements, and a 256 x 256 x 256 f32 matmul with a local accumulator (the
//! shape lowering produces). The graph-level side runs the same operator's kernel.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use passel_engine::interp::{eval_call, run_prim_func, PrimArg};
use passel_engine::ir::{parse_module, Attrs, DType, Tensor};

fn ramp_tensor(shape: &[u64], n: usize) -> Tensor {
    let vals: Vec<f64> = (0..n).map(|i| ((i % 97) as f64) * 0.01 - 0.5).collect();
    Tensor::from_f64s(shape, DType::F32, &vals).expect("tensor")
}

fn add(c: &mut Criterion) {
    let n = 1usize << 20;
    let src = format!(
        "prim @add(%A: Buffer[({n},), f32], %B: Buffer[({n},), f32], %C: Buffer[({n},), f32]) {{
  for %i in serial(0, {n}) {{ %C[%i] = add(%A[%i], %B[%i]); }}
}}"
    );
    let m = parse_module(&src).expect("parses");
    let f = m.get_prim("add").expect("prim").clone();
    let (a, b) = (ramp_tensor(&[n as u64], n), ramp_tensor(&[n as u64], n));
    let op = passel_engine::op::lookup("add").expect("add");
    let mut g = c.benchmark_group("tir_interp/add-1M-f32");
    g.throughput(Throughput::Elements(n as u64));
    g.bench_function("prim", |bch| {
        bch.iter(|| {
            run_prim_func("add", &f, vec![PrimArg::Buffer(a.clone()), PrimArg::Buffer(b.clone())]).expect("runs")
        })
    });
    g.bench_function("graph", |bch| bch.iter(|| eval_call(op, &Attrs::new(), &[a.clone(), b.clone()]).expect("runs")));
    g.finish();
}

fn matmul(c: &mut Criterion) {
    let n = 256usize;
    let src = format!(
        "prim @mm(%A: Buffer[({n}, {n}), f32], %B: Buffer[({n}, {n}), f32], %C: Buffer[({n}, {n}), f32]) {{
  for %i in serial(0, {n}) {{
    for %j in serial(0, {n}) {{
      alloc %acc: Buffer[(1,), f32, scope=\"local\"];
      for %k in serial(0, {n}) {{
        %acc[0] = add(%acc[0], mul(%A[%i, %k], %B[%k, %j]));
      }}
      %C[%i, %j] = %acc[0];
    }}
  }}
}}"
    );
    let m = parse_module(&src).expect("parses");
    let f = m.get_prim("mm").expect("prim").clone();
    let shape = [n as u64, n as u64];
    let (a, b) = (ramp_tensor(&shape, n * n), ramp_tensor(&shape, n * n));
    let op = passel_engine::op::lookup("matmul").expect("matmul");
    let mut g = c.benchmark_group("tir_interp/matmul-256-f32");
    g.throughput(Throughput::Elements((n * n * n) as u64));
    g.bench_function("prim", |bch| {
        bch.iter(|| {
            run_prim_func("mm", &f, vec![PrimArg::Buffer(a.clone()), PrimArg::Buffer(b.clone())]).expect("runs")
        })
    });
    g.bench_function("graph", |bch| bch.iter(|| eval_call(op, &Attrs::new(), &[a.clone(), b.clone()]).expect("runs")));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = add, matmul
}
criterion_main!(benches);
