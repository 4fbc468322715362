//! The cold session run against the plain parallel run, alternated to average out machine
//! drift, on the chain workload with the standard pipeline at -O2:
//! `cargo run --release -p passel-harness --example cold_ratio -- [MODE] [ITERATIONS]`.
//!
//! MODE is `alt` (default: a plain run, then a session's load + first run, ITERATIONS times),
//! `plain` or `session` (only that kind of run, for a profiler:
//! `valgrind --tool=callgrind target/release/examples/cold_ratio session 1`, minus a `plain 0`
//! run for the workload generation). `N` sets the number of functions (default 10000), `T` the
//! threads (default 2), `LEAN=1` runs the session in `MemoryMode::Lean`. Prints the best time of each kind and the ratio of their best and of
//! their total times.

use std::time::{Duration, Instant};

use passel_engine::transform::PassContext;
use passel_engine::{MemoryMode, Pass};
use passel_harness::gen::{chain, ChainOptions};
use passel_passes::standard_session;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    passel_passes::link();
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "alt".to_string());
    if !["alt", "plain", "session"].contains(&mode.as_str()) {
        eprintln!("error: unknown mode `{mode}` (expected alt, plain or session)");
        std::process::exit(2);
    }
    let iterations = args.next().and_then(|a| a.parse().ok()).unwrap_or(5usize);
    let module = chain(&ChainOptions { functions: env("N", 10_000), ops: 50, ..Default::default() });
    let pipeline = passel_passes::default_pipeline(2);
    let ctx = PassContext::builder().opt_level(2).num_threads(env("T", 2)).build().expect("context");
    let lean = env("LEAN", 0) == 1;
    let (mut plain, mut session) = (Vec::new(), Vec::new());
    for _ in 0..iterations {
        if mode != "session" {
            let start = Instant::now();
            let out = ctx.scope(|| pipeline.run(module.clone(), &ctx)).expect("scope").expect("plain run");
            plain.push(start.elapsed());
            drop(out);
        }
        if mode != "plain" {
            let start = Instant::now();
            let mut s = standard_session(pipeline.clone(), &ctx).expect("session");
            if lean {
                s.set_memory_mode(MemoryMode::Lean);
            }
            s.load(&module);
            let out = s.run().expect("session run");
            session.push(start.elapsed());
            drop(out);
            drop(s);
        }
    }
    let best = |v: &[Duration]| v.iter().min().copied().unwrap_or_default();
    let total = |v: &[Duration]| v.iter().sum::<Duration>();
    let ratio = |a: Duration, b: Duration| if b.is_zero() { 0.0 } else { a.as_secs_f64() / b.as_secs_f64() };
    println!(
        "{iterations} iterations: best plain {:?}, best session (load + run) {:?}; best ratio {:.3}, total ratio {:.3}",
        best(&plain),
        best(&session),
        ratio(best(&session), best(&plain)),
        ratio(total(&session), total(&plain))
    );
}
