//! Lean mode's memory contract (`MemoryMode::Lean`): on the 50-op chain with the standard
//! pipeline, a lean session keeps under 1 KiB per function beyond the result a plain run
//! keeps, where the default mode keeps about 13 KB. Counted with the counting allocator on one
//! thread, so the counts are exact up to one `FLUSH` (64 KiB, about 20 B per function here).

use passel_engine::transform::PassContext;
use passel_engine::{MemoryMode, Pass};
use passel_harness::bench::CountingAlloc;
use passel_harness::gen::{chain, ChainOptions};
use passel_passes::standard_session;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

fn live() -> isize {
    ALLOC.live() as isize
}

#[test]
fn a_lean_session_keeps_under_1_kib_per_function() {
    passel_passes::link();
    let functions = 3000;
    let module = chain(&ChainOptions { functions, ops: 50, ..Default::default() });
    let pipeline = passel_passes::default_pipeline(2);
    let ctx = PassContext::builder().opt_level(2).num_threads(1).build().expect("context");
    let before = live();
    let plain = ctx.scope(|| pipeline.run(module.clone(), &ctx)).expect("scope").expect("plain run");
    let plain_bytes = live() - before;
    drop(plain);
    let mut per_function = Vec::new();
    for mode in [MemoryMode::Full, MemoryMode::Lean] {
        let before = live();
        let mut session = standard_session(pipeline.clone(), &ctx).expect("session");
        session.set_memory_mode(mode);
        session.load(&module);
        let out = session.run().expect("run");
        per_function.push((live() - before - plain_bytes) / functions as isize);
        drop((out, session));
    }
    let (full, lean) = (per_function[0], per_function[1]);
    // The default mode keeps every intermediate function: the count is real.
    assert!(full > 8 * 1024, "default mode: {full} B per function");
    assert!(lean < 1024, "lean mode: {lean} B per function (default mode: {full} B)");
}
