//! The fan-out over functions: one rayon pool per requested size, built on first use and
//! cached for the process (threads named `passel-worker-N`), and the calls that spread work
//! over a module's functions on it. The lowest layer of the pass manager: it knows functions
//! and modules, not passes or contexts (the context, the function-pass runner, the executor
//! and the incremental session all build on it).

use std::sync::atomic::{AtomicUsize, Ordering};
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

/// [`map_items`] with the items started largest first (longest-processing-time order): each
/// worker takes the heaviest item not yet started (by `weight`; equal weights in item order),
/// so one large item does not start last and hold up the stage while the others idle. Results
/// are in item order, as [`map_items`] returns them; inline on the calling thread when
/// `threads` is 1 or there is at most one item.
pub(crate) fn map_items_largest_first<I: Sync, T: Send>(
    threads: usize,
    items: &[I],
    weight: impl Fn(&I) -> usize,
    task: impl Fn(&I) -> T + Sync + Send,
) -> Vec<T> {
    let n_threads = threads.max(1);
    let pool = if n_threads == 1 || items.len() <= 1 { None } else { pool(n_threads) };
    let Some(pool) = pool else { return items.iter().map(task).collect() };
    let order = largest_first(items.iter().map(weight));
    let next = AtomicUsize::new(0);
    let slots: Vec<Mutex<Option<T>>> = items.iter().map(|_| Mutex::new(None)).collect();
    // Every worker takes the next item of `order` until none is left (a panic in `task`
    // propagates once all workers have stopped, as rayon's broadcast does).
    pool.broadcast(|_| {
        while let Some(&i) = order.get(next.fetch_add(1, Ordering::Relaxed)) {
            let out = task(&items[i]);
            *slots[i].lock().unwrap_or_else(PoisonError::into_inner) = Some(out);
        }
    });
    let mut out = Vec::with_capacity(items.len());
    for (slot, item) in slots.into_iter().zip(items) {
        // Every slot was filled above; run an item inline should one not have been.
        match slot.into_inner().unwrap_or_else(PoisonError::into_inner) {
            Some(r) => out.push(r),
            None => out.push(task(item)),
        }
    }
    out
}

/// The indices of `weights` by decreasing weight, equal weights in index order.
fn largest_first(weights: impl Iterator<Item = usize>) -> Vec<usize> {
    let mut order: Vec<(usize, usize)> = weights.enumerate().collect();
    order.sort_by_key(|&(i, w)| (std::cmp::Reverse(w), i));
    order.into_iter().map(|(i, _)| i).collect()
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

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::{largest_first, map_items_largest_first};

    #[test]
    fn largest_first_orders_by_decreasing_weight_then_index() {
        assert_eq!(largest_first([3, 50, 7, 1, 40, 7, 2, 9].into_iter()), [1, 4, 7, 2, 5, 0, 6, 3]);
        assert_eq!(largest_first(std::iter::empty()), Vec::<usize>::new());
    }

    #[test]
    fn largest_first_map_runs_every_item_once_and_returns_results_in_item_order() {
        let items: Vec<usize> = (0..200).map(|i| (i * 37) % 101).collect();
        for threads in [1, 2, 3] {
            let ran = Mutex::new(Vec::new());
            let out = map_items_largest_first(
                threads,
                &items,
                |&w| w,
                |&w| {
                    ran.lock().unwrap().push(w);
                    w * 10
                },
            );
            assert_eq!(out, items.iter().map(|w| w * 10).collect::<Vec<_>>(), "{threads} threads");
            let mut ran = ran.into_inner().unwrap();
            ran.sort_unstable();
            let mut want = items.clone();
            want.sort_unstable();
            assert_eq!(ran, want, "every item runs once at {threads} threads");
        }
    }
}
