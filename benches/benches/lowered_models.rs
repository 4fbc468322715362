//! The lowering passes, one at a time, on real models and on generated MLPs (issue #31: time
//! LegalizeOps, FuseTIR and the tir pipeline; cost linear in the number of PrimFuncs).
//!
//! Each model is imported and run through the `-O3` graph pipeline once; then each row times
//! one step on that step's input, as `passel run -O3 --lower` runs it: `LegalizeOps` (on the
//! `-O3` output), `FuseTIR` (on LegalizeOps' output) and the tir pipeline (`tir-j1`, `tir-j2`:
//! the ten loop-level passes at 1 and 2 threads, on FuseTIR's output; consecutive PrimFunc
//! passes run fused, one task per PrimFunc). Real models: `engine/tests/data/real_models`
//! (a ViT, a ConvNeXt, a YOLO and its QDQ-quantized export). Generated: `passel gen mlp
//! --layers L --varied-widths --batch 1 --input 16 --width 64` for L in
//! `PASSEL_BENCH_MLP_LAYERS` (comma-separated, default `250,500,1000`), whose every layer
//! lowers to kernels of its own; throughput is in PrimFuncs of the lowered module, so a cost
//! linear in size shows as equal PrimFuncs/s across L.

use std::sync::Arc;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use passel_engine::ir::Module;
use passel_engine::transform::{get_pass, Pass, PassContext, Sequential};
use passel_harness::gen::{mlp, Activation, MlpOptions};

/// The steps of the lowering, each with its input: (row name, passes, input module).
fn steps(graph: Module) -> Vec<(&'static str, Sequential, Module)> {
    let ctx = PassContext::builder().opt_level(3).num_threads(1).build().expect("context");
    let seq = |name: &str, names: &[&str]| {
        Sequential::new(
            name,
            names.iter().map(|n| get_pass(n).expect("registered pass")).collect::<Vec<Arc<dyn Pass>>>(),
        )
    };
    let run = |p: &Sequential, m: Module| ctx.scope(|| p.run(m, &ctx)).expect("context enters").expect("pass runs");
    let legalize = seq("LegalizeOps", &["LegalizeOps"]);
    let fuse = seq("FuseTIR", &["FuseTIR"]);
    let tir = seq("tir", passel_passes::TIR_PIPELINE);
    let legalized = run(&legalize, graph.clone());
    let fused = run(&fuse, legalized.clone());
    vec![("LegalizeOps", legalize, graph), ("FuseTIR", fuse, legalized), ("tir", tir, fused)]
}

/// One group: every step at 1 thread, the tir pipeline at 1 and 2.
fn bench_steps(c: &mut Criterion, group: &str, graph: Module, throughput: Option<u64>) {
    let mut g = c.benchmark_group(group);
    if let Some(n) = throughput {
        g.throughput(Throughput::Elements(n));
    }
    for (name, passes, input) in steps(graph) {
        let threads: &[usize] = if name == "tir" { &[1, 2] } else { &[1] };
        for &t in threads {
            let ctx = PassContext::builder().opt_level(3).num_threads(t).build().expect("context");
            let id = if name == "tir" { format!("tir-j{t}") } else { name.to_string() };
            g.bench_function(BenchmarkId::from_parameter(id), |b| {
                b.iter(|| ctx.scope(|| passes.run(input.clone(), &ctx)).expect("context enters").expect("pass runs"))
            });
        }
    }
    g.finish();
}

fn real_models(c: &mut Criterion) {
    passel_passes::link();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../engine/tests/data/real_models");
    let ctx = PassContext::builder().opt_level(3).num_threads(1).build().expect("context");
    for name in ["vit_dynamo", "convnext_dynamo", "yolo_dynamo", "yolo_dynamo_qdq"] {
        let module = passel_harness::onnx::import_onnx(&dir.join(name).join("model.onnx"), &Default::default())
            .expect("imports");
        let pipeline = passel_passes::default_pipeline(3);
        let graph = ctx.scope(|| pipeline.run(module, &ctx)).expect("context enters").expect("-O3 runs");
        bench_steps(c, &format!("lowered_models/{name}"), graph, None);
    }
}

fn generated(c: &mut Criterion) {
    passel_passes::link();
    let layers: Vec<usize> = std::env::var("PASSEL_BENCH_MLP_LAYERS")
        .unwrap_or_else(|_| "250,500,1000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let ctx = PassContext::builder().opt_level(3).num_threads(1).build().expect("context");
    for l in layers {
        let opts = MlpOptions {
            layers: l,
            batch: 1,
            input: 16,
            width: 64,
            activation: Activation::Mixed,
            seed: 0,
            varied_widths: true,
        };
        let pipeline = passel_passes::default_pipeline(3);
        let graph = ctx.scope(|| pipeline.run(mlp(&opts), &ctx)).expect("context enters").expect("-O3 runs");
        let lowered = {
            let lower = passel_passes::lower_pipeline();
            ctx.scope(|| lower.run(graph.clone(), &ctx)).expect("context enters").expect("lowers")
        };
        let prims = lowered.num_prims() as u64;
        bench_steps(c, &format!("lowered_models/mlp-{l}-layers-{prims}-primfuncs"), graph, Some(prims));
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(10).warm_up_time(std::time::Duration::from_millis(500));
    targets = real_models, generated
}
criterion_main!(benches);
