//! The kernels constant folding spreads over workers (`engine/src/op/kernels/par.rs`) and
//! EliminateCommonSubexpr's comparison of large constants on workers, at 1 and 2 threads:
//! a broadcast multiply of a `[1024, 1024]` f32 constant by a `[1, 1024]` row (a weight
//! scaled per channel, what FoldScaleAxis leaves to FoldConstant), a sigmoid of the same
//! 1,048,576 elements, and CSE over a function binding `add(x, K)` for eight equal 1 MiB
//! constants `K` (separate buffers, so each is compared in full). Every run's output is the
//! same at both thread counts (the parity tests pin it); only the time differs.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use passel_engine::ir::{Attrs, Constant, DType, FunctionBuilder, NodeId, Tensor};
use passel_engine::op::{self, kernels::par::DEFAULT_MIN_PARALLEL_WORK, EvalLimits, KernelCtx};

fn ramp_tensor(shape: &[u64], seed: usize) -> Tensor {
    let n: u64 = shape.iter().product();
    let vals: Vec<f64> = (0..n as usize).map(|i| (((i + seed) % 97) as f64) * 0.01 - 0.5).collect();
    Tensor::from_f64s(shape, DType::F32, &vals).expect("tensor")
}

fn pool(threads: usize) -> Option<Arc<rayon::ThreadPool>> {
    (threads > 1).then(|| Arc::new(rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("pool")))
}

fn kernels(c: &mut Criterion) {
    let (w, row) = (ramp_tensor(&[1024, 1024], 0), ramp_tensor(&[1, 1024], 7));
    let mut g = c.benchmark_group("fold_kernels");
    g.throughput(Throughput::Elements(1 << 20));
    for threads in [1, 2] {
        let workers = pool(threads);
        let mut ctx = KernelCtx::seeded(0).with_workers(workers.clone(), DEFAULT_MIN_PARALLEL_WORK);
        let multiply = op::lookup("multiply").expect("multiply");
        let args = [w.clone(), row.clone()];
        g.bench_function(format!("multiply-1024x1024-by-row/{threads}"), |b| {
            b.iter(|| op::evaluate(multiply, &Attrs::new(), &args, EvalLimits::RUN, &mut ctx).expect("runs"))
        });
        let sigmoid = op::lookup("sigmoid").expect("sigmoid");
        let args = [w.clone()];
        g.bench_function(format!("sigmoid-1M/{threads}"), |b| {
            b.iter(|| op::evaluate(sigmoid, &Attrs::new(), &args, EvalLimits::RUN, &mut ctx).expect("runs"))
        });
    }
    g.finish();
}

fn cse_constants(c: &mut Criterion) {
    let mut b = FunctionBuilder::new();
    let x = b.var("x", None);
    let add = op::lookup("add").expect("add");
    let mut bindings = Vec::new();
    for i in 0..8 {
        // Equal values in separate buffers: numbering must compare each with the first.
        let k = b.constant(Constant::Dense(ramp_tensor(&[512, 512], 0)));
        let value = b.call(add, &[x, k], Attrs::new());
        let var = b.var(&format!("v{i}"), None);
        bindings.push((var, value));
    }
    let vars: Vec<NodeId> = bindings.iter().map(|&(v, _)| v).collect();
    let tup = b.tuple(&vars);
    let body = b.block(&bindings, tup);
    let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
    let mut g = c.benchmark_group("cse_constants");
    g.throughput(Throughput::Bytes(8 << 20));
    for threads in [1, 2] {
        let workers = pool(threads).map(|p| (p, passel_passes::eliminate_common_subexpr::DEFAULT_MIN_PARALLEL_BYTES));
        g.bench_function(format!("eight-equal-1MiB/{threads}"), |bch| {
            bch.iter(|| {
                passel_passes::eliminate_common_subexpr::eliminate_common_subexpr_with_workers(&func, workers.clone())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, kernels, cse_constants);
criterion_main!(benches);
