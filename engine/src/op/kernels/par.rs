//! Output chunks of one kernel call spread over the workers of its [`KernelCtx`]: the
//! parallel variants of the kernels that dominate constant folding on real models
//! (broadcast arithmetic and comparisons through [`super::zip2`], unary float maps) split
//! their output into chunks and compute each chunk with the code the serial kernel runs on it.
//!
//! Invariant: a result is byte-identical at any thread count and chunk size. Each output
//! element is `f` of its own inputs, with no arithmetic across elements, so it is computed by
//! the same operations whatever the split (pinned by
//! `kernels_give_the_same_bits_on_workers_at_any_task_size`). A kernel whose elements share
//! arithmetic (a matrix product's blocking, a reduction's order) may only be split along
//! tiles chosen from its shapes, never from the thread count; `conv2d`, `matmul` and the
//! reductions are not split yet (constant folding of real models rarely runs them).
//!
//! Small calls stay on the calling thread (below [`KernelCtx::min_parallel_work`] element
//! operations, [`DEFAULT_MIN_PARALLEL_WORK`] unless the caller says otherwise): a fork-join
//! costs a few microseconds, which a call of a few thousand element operations does not
//! repay. Tasks have at least [`MIN_TASK_WORK`] element operations.

use rayon::prelude::*;
use rayon::ThreadPool;

use crate::op::KernelCtx;

/// The default of [`KernelCtx::min_parallel_work`]: two tasks' worth.
pub const DEFAULT_MIN_PARALLEL_WORK: usize = 2 * MIN_TASK_WORK;

/// Element operations one task should at least have (fewer only when the caller lowered
/// [`KernelCtx::min_parallel_work`] below it).
pub const MIN_TASK_WORK: usize = 1 << 15;

/// The pool a call of about `work` element operations should spread over, if any.
pub(crate) fn workers(ctx: &KernelCtx, work: usize) -> Option<&ThreadPool> {
    ctx.workers.as_deref().filter(|p| p.current_num_threads() > 1 && work >= ctx.min_parallel_work.max(1))
}

/// Fills `out` by calling `fill(start, chunk)` on consecutive chunks (`start` is the chunk's
/// offset in `out`): on `pool` in chunks of at least `min_chunk` elements, a few per worker,
/// else as one chunk on the calling thread. `fill` must give each element a value
/// that depends on its offset alone.
pub(crate) fn fill_chunks<T: Send>(
    pool: Option<&ThreadPool>,
    min_chunk: usize,
    out: &mut [T],
    fill: impl Fn(usize, &mut [T]) + Sync + Send,
) {
    let Some(pool) = pool else { return fill(0, out) };
    let per_worker = out.len().div_ceil(4 * pool.current_num_threads());
    let chunk = per_worker.max(min_chunk).max(1);
    pool.install(|| out.par_chunks_mut(chunk).enumerate().for_each(|(i, c)| fill(i * chunk, c)));
}

/// The elementwise map `f` over a row-major slice, on `pool` in chunks of at least
/// `min_chunk` elements when there is one.
pub(crate) fn map_slice<A: Copy + Sync, C: Copy + Default + Send>(
    pool: Option<&ThreadPool>,
    min_chunk: usize,
    xs: &[A],
    f: impl Fn(A) -> C + Sync + Send,
) -> Vec<C> {
    match pool {
        None => xs.iter().map(|&x| f(x)).collect(),
        Some(_) => {
            let mut out = vec![C::default(); xs.len()];
            fill_chunks(pool, min_chunk, &mut out, |start, chunk| {
                let end = start + chunk.len();
                for (o, &x) in chunk.iter_mut().zip(&xs[start..end]) {
                    *o = f(x);
                }
            });
            out
        }
    }
}

/// The smallest task of a call under `ctx`: [`MIN_TASK_WORK`], or less when the caller
/// lowered [`KernelCtx::min_parallel_work`] (tests use it to spread small calls).
pub(crate) fn min_chunk(ctx: &KernelCtx) -> usize {
    MIN_TASK_WORK.min(ctx.min_parallel_work).max(1)
}
