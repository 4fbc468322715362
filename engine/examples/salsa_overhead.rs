//! What salsa 0.28 itself costs per item, measured with a counting allocator:
//! `cargo run --release -p passel-engine --example salsa_overhead [ITEMS]`.
//!
//! The session (`engine/src/session/db.rs`) has, per function, one input, one interned
//! `(name, stage)` key per stage and one memo per stage. This prints what each of those costs
//! with values of a few bytes, so what is left is salsa's own bookkeeping, and the floor it
//! sets for a design with one query per (function, stage): see docs/incremental.md,
//! "Memory: where the bytes go".

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;

struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// Bytes allocated (net) by `f`, per item.
fn per_item<T>(items: usize, f: impl FnOnce() -> T) -> (T, isize) {
    let before = LIVE.load(Ordering::Relaxed);
    let out = f();
    (out, (LIVE.load(Ordering::Relaxed) - before) / items as isize)
}

#[salsa::input]
struct Src {
    #[returns(copy)]
    value: u64,
}

#[salsa::interned]
struct Key<'db> {
    #[returns(ref)]
    name: Arc<str>,
    #[returns(copy)]
    stage: u32,
    src: Src,
}

#[salsa::tracked]
fn on_input(db: &dyn salsa::Database, src: Src) -> u64 {
    src.value(db) + 1
}

#[salsa::tracked]
fn on_input_and_stage(db: &dyn salsa::Database, src: Src, stage: u32) -> u64 {
    src.value(db) + u64::from(stage)
}

/// Shaped like the session's `fn_stage`: keyed by an interned (name, stage), reading the
/// previous stage's memo and interning that stage's key.
#[salsa::tracked]
fn staged<'db>(db: &'db dyn salsa::Database, key: Key<'db>) -> u64 {
    match key.stage(db) {
        0 => key.src(db).value(db),
        k => staged(db, Key::new(db, key.name(db).clone(), k - 1, key.src(db))) + 1,
    }
}

fn main() {
    let items: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(10_000);
    let db = salsa::DatabaseImpl::new();
    let names: Vec<Arc<str>> = (0..items).map(|i| Arc::from(format!("f{i}"))).collect();

    let (srcs, input) = per_item(items, || (0..items).map(|i| Src::new(&db, i as u64)).collect::<Vec<_>>());
    let ((), memo) = per_item(items, || {
        for &s in &srcs {
            let _ = on_input(&db, s);
        }
    });
    let ((), memo2) = per_item(items, || {
        for &s in &srcs {
            let _ = on_input_and_stage(&db, s, 1);
        }
    });
    let (keys, key) =
        per_item(items, || names.iter().zip(&srcs).map(|(n, &s)| Key::new(&db, n.clone(), 0, s)).collect::<Vec<_>>());
    let ((), first) = per_item(items, || {
        for &k in &keys {
            let _ = staged(&db, k);
        }
    });
    let ((), four) = per_item(items, || {
        for (n, &s) in names.iter().zip(&srcs) {
            let _ = staged(&db, Key::new(&db, n.clone(), 4, s));
        }
    });

    println!("salsa 0.28 bookkeeping, bytes per item ({items} items, values of 8 bytes):");
    println!("  input (one u64 field)                               {input:>5}");
    println!("  memo of a tracked fn on an input (1 edge)           {memo:>5}");
    println!("  memo of a tracked fn on (input, u32) (interned)     {memo2:>5}");
    println!("  interned (name, stage, input) key                   {key:>5}");
    println!("  memo keyed by it (stage 0)                          {first:>5}");
    println!("  stages 1..=4 of that chain, keys included           {:>5} ({} per stage)", four, four / 4);
    println!(
        "floor of one query per (function, stage), 5 stages, before any value or side table: {} B per function",
        input + key + first + four
    );
}
