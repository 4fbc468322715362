//! Measures the incremental session on the chain workload:
//! `cargo run --release -p passel-harness --example incremental_bench -- FUNCTIONS OPS THREADS`.

use passel_engine::transform::PassContext;
use passel_harness::gen::{chain, ChainOptions};
use passel_harness::incremental_bench::{measure_incremental, render_incremental};

fn rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmRSS:")).and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

fn main() {
    passel_passes::link();
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let (functions, ops, threads) = (
        args.first().copied().unwrap_or(10_000),
        args.get(1).copied().unwrap_or(50),
        args.get(2).copied().unwrap_or(2),
    );
    let module = chain(&ChainOptions { functions, ops, ..Default::default() });
    let edit = chain(&ChainOptions { functions: 1, ops, seed: 7, ..Default::default() }).entries()[0].1.clone();
    let pipeline = passel_passes::default_pipeline(2);
    let ctx = PassContext::builder().opt_level(2).num_threads(threads).build().expect("context");
    let name = format!("f{}", functions / 2);
    match measure_incremental(&module, &pipeline, &ctx, &name, edit, 3) {
        Ok(t) => print!("{}", render_incremental(&t)),
        Err(e) => eprintln!("error: {e}"),
    }
    // Memory: RSS of a plain run's result vs a session holding the same result.
    let before = rss_kib();
    let plain = ctx.scope(|| passel_engine::Pass::run(&pipeline, module.clone(), &ctx)).expect("scope").expect("run");
    let after_plain = rss_kib();
    drop(plain);
    let mut session = passel_engine::Session::new(pipeline.clone(), &ctx).expect("session");
    session.load(&module);
    let out = session.run().expect("run");
    let after_session = rss_kib();
    println!(
        "rss: plain result +{} KiB, session +{} KiB (session overhead ~{:.0} B/function, upper bound: allocator reuse makes RSS coarse)",
        after_plain.saturating_sub(before),
        after_session.saturating_sub(after_plain),
        (after_session.saturating_sub(after_plain) as f64 - after_plain.saturating_sub(before) as f64) * 1024.0 / functions as f64
    );
    drop(out);
}
