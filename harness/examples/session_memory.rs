//! Where an incremental session's memory goes, measured with a counting allocator:
//! `cargo run --release -p passel-harness --example session_memory [FUNCTIONS]`.
//!
//! Part 1 runs the standard pipeline's stages one after another without a session and prints
//! what each stage's output adds to the module it was given (its parts shared with the input,
//! such as constant tables, cost nothing). A session keeps the output of every stage before a
//! module barrier, so these are the intermediates it holds. Part 2 prints a session's overhead
//! (bytes live with the session and its result, minus those of a plain run's result) for
//! growing prefixes of the pipeline, in the default memory mode and in lean mode. See
//! docs/incremental.md, "Memory: where the bytes go".

use passel_engine::ir::Module;
use passel_engine::transform::{get_pass, Pass, PassContext, Sequential};
use passel_engine::MemoryMode;
use passel_harness::bench::CountingAlloc;
use passel_harness::gen::{chain, ChainOptions};
use passel_passes::standard_session;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Bytes live now (other threads' counts are exact to 64 KiB each).
fn live() -> isize {
    ALLOC.live() as isize
}

fn pipeline(names: &[&str]) -> Sequential {
    let passes = names.iter().map(|p| get_pass(p).unwrap_or_else(|e| panic!("{e}"))).collect();
    Sequential::new("probe", passes)
}

fn main() {
    passel_passes::link();
    let functions: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let per_fn = |bytes: isize| bytes / functions as isize;
    let module = chain(&ChainOptions { functions, ops: 50, ..Default::default() });
    let ctx = PassContext::builder().opt_level(2).num_threads(2).build().expect("context");
    let run = |names: &[&str], m: &Module| -> Module {
        ctx.scope(|| pipeline(names).run(m.clone(), &ctx)).expect("scope").expect("run")
    };

    println!("1. what each stage's output adds, bytes per function ({functions}-function chain, 50 ops):");
    let stages: [&[&str]; 5] = [
        &["InferType"],
        &["Inline"],
        &[
            "InferType",
            "SimplifyInference",
            "FoldConstant",
            "FoldConstant",
            "InferType",
            "SimplifyExpr",
            "CanonicalizeBindings",
            "InferType",
        ],
        &["DeadCodeElimination"],
        &["DeadCodeElimination", "InferType", "FuseOps"],
    ];
    let mut outputs = vec![module.clone()];
    for names in stages {
        let input = outputs.last().expect("the module");
        let before = live();
        let out = run(names, input);
        let added = per_fn(live() - before);
        let nodes: usize = out.entries().iter().map(|(_, f)| f.num_nodes()).sum();
        let live_nodes: usize =
            out.entries().iter().map(|(_, f)| f.live_mask().into_iter().filter(|&l| l).count()).sum();
        let per = |n: usize| n / functions.max(1);
        println!("  {:<80} +{added:>5} B  ({} nodes, {} live)", names.join(","), per(nodes), per(live_nodes));
        outputs.push(out);
    }
    drop(outputs);

    println!("2. session overhead for prefixes of the standard pipeline, bytes per function:");
    let prefixes: [&[&str]; 6] = [
        &["InferType"],
        &["InferType", "SimplifyInference"],
        &["InferType", "Inline"],
        &["InferType", "Inline", "SimplifyInference"],
        &["InferType", "Inline", "SimplifyInference", "DeadCodeElimination"],
        &["InferType", "Inline", "SimplifyInference", "DeadCodeElimination", "FuseOps"],
    ];
    for names in prefixes {
        let pipeline = pipeline(names);
        let before = live();
        let plain = ctx.scope(|| pipeline.run(module.clone(), &ctx)).expect("scope").expect("run");
        let plain_bytes = live() - before;
        drop(plain);
        let mut overhead = Vec::new();
        let mut stages = 0;
        for mode in [MemoryMode::Full, MemoryMode::Lean] {
            let before = live();
            let mut session = standard_session(pipeline.clone(), &ctx).expect("session");
            session.set_memory_mode(mode);
            session.load(&module);
            let out = session.run().expect("run");
            overhead.push(per_fn(live() - before - plain_bytes));
            stages = out.stats.stages.len();
        }
        println!(
            "  {:<62} {stages} stages: result {:>5} B, overhead {:>5} B (lean mode {:>4} B)",
            names.join(","),
            per_fn(plain_bytes),
            overhead[0],
            overhead[1]
        );
    }
}
