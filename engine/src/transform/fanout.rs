//! The fan-out over functions: one rayon pool per requested size, built on first use and
//! cached for the process (threads named `passel-worker-N`), and the calls that spread work
//! over a module's functions on it. The lowest layer of the pass manager: it knows functions
//! and modules, not passes or contexts (the context, the function-pass runner, the executor
//! and the incremental session all build on it).

use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rayon::prelude::*;

use crate::ir::{Function, Module};

/// Calls `task` on every function of `module` and returns the results in module order
/// ([`map_items`] over its entries).
pub(crate) fn map_entries<T: Send>(
    threads: usize,
    module: &Module,
    task: impl Fn(&str, &Arc<Function>) -> T + Sync + Send,
) -> Vec<T> {
    map_items(threads, module.entries(), |(name, func)| task(name, func))
}

/// Calls `task` on every item and returns the results in order: inline on the calling thread
/// when `threads` is 1 or there is at most one item, else on the cached pool of that size with
/// rayon work stealing over single items.
pub(crate) fn map_items<I: Sync, T: Send>(threads: usize, items: &[I], task: impl Fn(&I) -> T + Sync + Send) -> Vec<T> {
    let n_threads = threads.max(1);
    if n_threads == 1 || items.len() <= 1 {
        return items.iter().map(task).collect();
    }
    match pool(n_threads) {
        Some(pool) => pool.install(|| items.par_iter().map(task).collect()),
        None => items.iter().map(task).collect(),
    }
}

/// [`map_items`] with a per-worker state: each rayon job gets its own clone of `state` (the
/// incremental session's database handle: salsa's handles are `Send`, not `Sync`), the calling
/// thread the original when the items run inline.
pub(crate) fn map_items_with<I: Sync, S: Clone + Send, T: Send>(
    threads: usize,
    items: &[I],
    mut state: S,
    task: impl Fn(&mut S, &I) -> T + Sync + Send,
) -> Vec<T> {
    let n_threads = threads.max(1);
    let pool = if n_threads == 1 || items.len() <= 1 { None } else { pool(n_threads) };
    match pool {
        Some(pool) => pool.install(|| items.par_iter().map_with(state, |s, item| task(s, item)).collect()),
        None => items.iter().map(|item| task(&mut state, item)).collect(),
    }
}

/// Drops `funcs` on the pool of `threads` workers when there is one and the list is long
/// enough to pay for it (see `PassContext::replace_functions`).
pub(crate) fn release(threads: usize, funcs: Vec<Arc<Function>>) {
    let n_threads = threads.max(1);
    if n_threads == 1 || funcs.len() < 64 {
        return;
    }
    if let Some(pool) = pool(n_threads) {
        pool.install(|| funcs.into_par_iter().with_min_len(64).for_each(drop));
    }
}

/// The cached pool of `n` workers, built on first use. `None` when the OS refuses threads (the
/// caller then runs serially).
pub(crate) fn pool(n: usize) -> Option<Arc<rayon::ThreadPool>> {
    type Pools = Mutex<Vec<(usize, Arc<rayon::ThreadPool>)>>;
    static POOLS: OnceLock<Pools> = OnceLock::new();
    let mut pools = POOLS.get_or_init(|| Mutex::new(Vec::new())).lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, p)) = pools.iter().find(|(size, _)| *size == n) {
        return Some(p.clone());
    }
    let built =
        rayon::ThreadPoolBuilder::new().num_threads(n).thread_name(|i| format!("passel-worker-{i}")).build().ok()?;
    let built = Arc::new(built);
    pools.push((n, built.clone()));
    Some(built)
}
