//! Measures the incremental session on the chain workload:
//! `cargo run --release -p passel-harness --example incremental_bench -- FUNCTIONS OPS THREADS`.
//! Memory is counted by a counting allocator: bytes live after a plain run versus after a
//! session run holding the same result.

use passel_engine::transform::PassContext;
use passel_engine::MemoryMode;
use passel_harness::bench::CountingAlloc;
use passel_harness::gen::{chain, ChainOptions};
use passel_harness::incremental_bench::{measure_incremental, render_incremental};
use passel_passes::standard_session;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Bytes live now (other threads' counts are exact to 64 KiB each).
fn live() -> isize {
    ALLOC.live() as isize
}

fn main() {
    passel_passes::link();
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let functions = args.first().copied().unwrap_or(10_000);
    let ops = args.get(1).copied().unwrap_or(50);
    let threads = args.get(2).copied().unwrap_or(2);
    let module = chain(&ChainOptions { functions, ops, ..Default::default() });
    let edit = chain(&ChainOptions { functions: 1, ops, seed: 7, ..Default::default() }).entries()[0].1.clone();
    let pipeline = passel_passes::default_pipeline(2);
    let ctx = PassContext::builder().opt_level(2).num_threads(threads).build().expect("context");
    let name = format!("f{}", functions / 2);
    // `MODE=lean` measures a session in `MemoryMode::Lean`.
    let mode = match std::env::var("MODE").as_deref() {
        Ok("lean") => MemoryMode::Lean,
        _ => MemoryMode::Full,
    };
    println!("memory mode: {mode:?}");
    match measure_incremental(&module, &pipeline, &ctx, mode, &name, edit.clone(), 5) {
        Ok(t) => print!("{}", render_incremental(&t)),
        Err(e) => eprintln!("error: {e}"),
    }
    let before = live();
    let plain = ctx.scope(|| passel_engine::Pass::run(&pipeline, module.clone(), &ctx)).expect("scope").expect("run");
    let plain_bytes = live() - before;
    drop(plain);
    let before = live();
    let mut session = standard_session(pipeline.clone(), &ctx).expect("session");
    session.set_memory_mode(mode);
    session.load(&module);
    let out = session.run().expect("run");
    let session_bytes = live() - before;
    drop(out);
    // Where an edit's time goes, stage by stage.
    let edit2 = chain(&ChainOptions { functions: 1, ops, seed: 8, ..Default::default() }).entries()[0].1.clone();
    let start = std::time::Instant::now();
    session.set_function(&name, edit2.clone());
    let set = start.elapsed();
    let out = session.run().expect("run");
    println!("edit: set {:?}, run {:?}", set, out.stats.total);
    for stage in &out.stats.stages {
        println!(
            "  {:<40} {:>6} recomputed {:>10.3} ms",
            stage.label,
            stage.recomputed.len(),
            stage.time.as_secs_f64() * 1e3
        );
    }
    println!(
        "memory: plain result {} KiB, session with result {} KiB; overhead {:.0} B per function",
        plain_bytes / 1024,
        session_bytes / 1024,
        (session_bytes - plain_bytes) as f64 / functions as f64
    );
    // Many edits (alternating two versions) and no-change runs, for a median on a noisy
    // machine: `EDITS=N` (default 40).
    let edits = std::env::var("EDITS").ok().and_then(|v| v.parse().ok()).unwrap_or(40usize);
    let versions = [edit, edit2];
    let (mut edit_times, mut same_times) = (Vec::new(), Vec::new());
    for i in 0..edits {
        let start = std::time::Instant::now();
        session.set_function(&name, versions[i % 2].clone());
        drop(session.run().expect("run"));
        edit_times.push(start.elapsed());
        let start = std::time::Instant::now();
        drop(session.run().expect("run"));
        same_times.push(start.elapsed());
    }
    // Signature changes: the function's parameter and result shapes change, and back. The
    // first one also builds the session's index of who references whom.
    let sig_edit = chain(&ChainOptions { functions: 1, ops, seed: 9, shape: vec![4, 4] }).entries()[0].1.clone();
    for (i, version) in [sig_edit, versions[0].clone(), versions[1].clone()].into_iter().enumerate() {
        let start = std::time::Instant::now();
        session.set_function(&name, version);
        let out = session.run().expect("run");
        println!("signature edit {} (set + run): {:?}, {} function stages recomputed", i + 1, start.elapsed(), {
            out.stats.stages.iter().filter(|s| !s.is_module_pass).map(|s| s.recomputed.len()).sum::<usize>()
        });
    }
    if edits > 0 {
        edit_times.sort();
        same_times.sort();
        println!(
            "{edits} edits (set + run): min {:?}, median {:?}; no-change runs: min {:?}, median {:?}",
            edit_times[0],
            edit_times[edits / 2],
            same_times[0],
            same_times[edits / 2]
        );
    }
}
