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
//! reductions are not split (FoldConstant does not run them on the models of
//! docs/performance.md, "Real models on every core").
//!
//! The output is allocated uninitialised and each worker writes its own chunks
//! ([`collect_chunks`]): zero-filling it first on the calling thread (a `calloc` that clears
//! reused heap, then the first touch of every fresh page) cost as much as the arithmetic the
//! workers share.
//!
//! Small calls stay on the calling thread (below [`KernelCtx::min_parallel_work`] element
//! operations, [`DEFAULT_MIN_PARALLEL_WORK`] unless the caller says otherwise): a fork-join
//! costs a few microseconds, which a call of a few thousand element operations does not
//! repay. Tasks have at least [`MIN_TASK_WORK`] element operations.

use std::mem::MaybeUninit;
use std::ops::Range;

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

/// One chunk of [`collect_chunks`]'s output, written front to back through [`Extend`].
pub(crate) struct ChunkSink<'a, T> {
    out: &'a mut [MaybeUninit<T>],
    written: usize,
}

impl<T> Extend<T> for ChunkSink<'_, T> {
    fn extend<I: IntoIterator<Item = T>>(&mut self, items: I) {
        let mut items = items.into_iter();
        let mut n = 0;
        for (slot, v) in self.out[self.written..].iter_mut().zip(&mut items) {
            slot.write(v);
            n += 1;
        }
        self.written += n;
        // More elements than the chunk has room for is a kernel bug, never dropped silently.
        assert!(items.next().is_none(), "a parallel kernel wrote past its output chunk");
    }
}

/// A vector of `len` elements whose chunks are written on `pool` by `fill(range, sink)`:
/// `range` is the chunk's place in the output and `fill` extends `sink` with exactly its
/// elements, each depending on its offset alone. Chunks have at least `min_chunk` elements,
/// a few per worker. Nothing is written on the calling thread, so the output's pages are
/// first touched by the workers.
///
/// # Panics
/// If `fill` leaves part of a chunk unwritten (a bug in the kernel; no uninitialised
/// element is ever read).
pub(crate) fn collect_chunks<T: Send>(
    pool: &ThreadPool,
    min_chunk: usize,
    len: usize,
    fill: impl Fn(Range<usize>, &mut ChunkSink<'_, T>) + Sync + Send,
) -> Vec<T> {
    let mut out = Vec::with_capacity(len);
    let per_worker = len.div_ceil(4 * pool.current_num_threads());
    let chunk = per_worker.max(min_chunk).max(1);
    pool.install(|| {
        out.spare_capacity_mut()[..len].par_chunks_mut(chunk).enumerate().for_each(|(i, slots)| {
            let range = i * chunk..i * chunk + slots.len();
            let mut sink = ChunkSink { out: slots, written: 0 };
            fill(range.clone(), &mut sink);
            assert_eq!(
                sink.written,
                range.len(),
                "a parallel kernel left part of its output chunk {range:?} unwritten"
            );
        })
    });
    // SAFETY: the chunks partition the first `len` slots of the capacity and each was written
    // in full (asserted above; a failed assertion unwinds out of `install` before this line,
    // dropping `out` with length 0).
    unsafe { out.set_len(len) };
    out
}

/// The elementwise map `f` over a row-major slice, on `pool` in chunks of at least
/// `min_chunk` elements when there is one.
pub(crate) fn map_slice<A: Copy + Sync, C: Send>(
    pool: Option<&ThreadPool>,
    min_chunk: usize,
    xs: &[A],
    f: impl Fn(A) -> C + Sync + Send,
) -> Vec<C> {
    match pool {
        None => xs.iter().map(|&x| f(x)).collect(),
        Some(pool) => {
            collect_chunks(pool, min_chunk, xs.len(), |range, sink| sink.extend(xs[range].iter().map(|&x| f(x))))
        }
    }
}

/// The smallest task of a call under `ctx`: [`MIN_TASK_WORK`], or less when the caller
/// lowered [`KernelCtx::min_parallel_work`] (tests use it to spread small calls).
pub(crate) fn min_chunk(ctx: &KernelCtx) -> usize {
    MIN_TASK_WORK.min(ctx.min_parallel_work).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pool(threads: usize) -> ThreadPool {
        rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("a test pool")
    }

    #[test]
    fn collect_chunks_writes_every_element_at_its_offset() {
        let pool = pool(3);
        for (len, min_chunk) in [(0, 1), (1, 1), (7, 2), (1000, 1), (1000, 64), (1001, 1000)] {
            let got = collect_chunks(&pool, min_chunk, len, |range, sink| sink.extend(range.map(|i| i * 3)));
            assert_eq!(got, (0..len).map(|i| i * 3).collect::<Vec<_>>(), "len {len}, min_chunk {min_chunk}");
        }
    }

    #[test]
    fn collect_chunks_refuses_a_chunk_written_past_its_end() {
        let pool = pool(2);
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            collect_chunks(&pool, 4, 16, |range, sink| sink.extend(range.start as u64..range.end as u64 + 1))
        }));
        assert!(res.is_err());
    }

    #[test]
    fn collect_chunks_refuses_a_chunk_left_short() {
        let pool = pool(2);
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            collect_chunks(&pool, 4, 16, |range, sink| sink.extend(range.skip(1).map(|i| i as u64)))
        }));
        assert!(res.is_err());
    }
}
