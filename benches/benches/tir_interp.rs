//! The PrimFunc interpreter against the graph-level interpreter's kernels (issue #31: a lowered
//! model should evaluate within 5x of the graph level). Two kernels: an elementwise add of
//! 1,048,576 f32 elements, and a 256 x 256 x 256 f32 matmul with a local accumulator (the
//! shape lowering produces); the graph-level side runs the same operator's kernel. Then whole
//! real models (`engine/tests/data/real_models`: a ViT, a ConvNeXt and a YOLO export): `main`
//! after `-O3` on the graph interpreter against `main` after `-O3` and the lowering pipeline
//! (what `passel run -O3 --lower` prints), on the same seeded inputs.

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

fn lowered_models(c: &mut Criterion) {
    use passel_engine::interp::{eval_function, random_args};
    use passel_engine::transform::{Pass, PassContext};
    passel_passes::link();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/data/real_models");
    let ctx = PassContext::builder().opt_level(3).num_threads(1).build().expect("context");
    let run = |module, pipeline: &dyn Pass| {
        ctx.scope(|| pipeline.run(module, &ctx)).expect("context enters").expect("pipeline runs")
    };
    for name in ["vit_dynamo", "convnext_dynamo", "yolo_dynamo"] {
        let path = dir.join(name).join("model.onnx");
        let module = passel_harness::onnx::import_onnx(&path, &Default::default()).expect("imports");
        let graph = run(module.clone(), &passel_passes::default_pipeline(3));
        let lowered = run(module, &passel_passes::build_pipeline(3));
        let args = random_args(graph.get("main").expect("main"), 0).expect("inputs");
        let mut g = c.benchmark_group(format!("tir_interp/model-{name}"));
        g.bench_function("graph", |b| b.iter(|| eval_function(&graph, "main", &args).expect("runs")));
        g.bench_function("lowered", |b| b.iter(|| eval_function(&lowered, "main", &args).expect("runs")));
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10);
    targets = add, matmul, lowered_models
}
criterion_main!(benches);
