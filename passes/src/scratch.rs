//! Per-thread scratch buffers of the passes: one way to keep a pass's per-node buffers between
//! the functions a worker thread runs it on, so that a function costs no allocation for them.
//!
//! A pass puts its buffers in a struct that implements [`Scratch`], declares one
//! `thread_local!` `RefCell` of it, and runs through [`with_scratch`], which hands the buffers
//! out, gives a re-entrant call buffers of its own (no pass makes one, but a borrow panic must
//! not be the way to find out), lets the pass drop what the output now owns, and frees buffers
//! that grew past [`KEEP_SCRATCH`] entries, so one huge function does not pin its memory in
//! every worker thread for the rest of the run.

use std::cell::RefCell;
use std::thread::LocalKey;

/// Buffers holding more than this many entries are freed after use rather than kept.
pub(crate) const KEEP_SCRATCH: usize = 1 << 16;

/// A pass's per-thread buffers.
pub(crate) trait Scratch: Default + 'static {
    /// The entries its largest buffer can hold (what keeping it costs).
    fn retained(&self) -> usize;

    /// Drops what must not outlive the call (values the output now owns); the buffers stay.
    fn finish(&mut self) {}
}

/// Runs `f` with this thread's buffers from `pool` (fresh ones on a re-entrant call), then
/// finishes them and frees them when they grew past [`KEEP_SCRATCH`].
pub(crate) fn with_scratch<S: Scratch, R>(pool: &'static LocalKey<RefCell<S>>, f: impl FnOnce(&mut S) -> R) -> R {
    pool.with(|cell| {
        let mut own = S::default();
        let mut guard = cell.try_borrow_mut();
        let s = match guard.as_deref_mut() {
            Ok(s) => s,
            Err(_) => &mut own,
        };
        let out = f(s);
        s.finish();
        if s.retained() > KEEP_SCRATCH {
            *s = S::default();
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Buf(Vec<u32>);

    impl Scratch for Buf {
        fn retained(&self) -> usize {
            self.0.capacity()
        }
    }

    thread_local! {
        static POOL: RefCell<Buf> = RefCell::new(Buf::default());
    }

    #[test]
    fn scratch_is_kept_when_small_freed_when_large_and_fresh_when_reentered() {
        with_scratch(&POOL, |b| b.0.resize(16, 7));
        assert_eq!(POOL.with(|p| p.borrow().0.len()), 16);
        let inner = with_scratch(&POOL, |outer| {
            outer.0.push(1);
            with_scratch(&POOL, |inner| inner.0.len())
        });
        assert_eq!(inner, 0);
        with_scratch(&POOL, |b| b.0.resize(KEEP_SCRATCH + 1, 0));
        assert_eq!(POOL.with(|p| p.borrow().0.capacity()), 0);
    }
}
