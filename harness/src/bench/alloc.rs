//! A counting global allocator: the system allocator plus two relaxed atomic counters, live
//! heap bytes and their peak since the last reset. `passel` installs it so `passel bench` can
//! report peak heap per row; other binaries and tests do not, and then every reading is zero.
//!
//! Cost per allocation: one `fetch_add` and one relaxed load; the `fetch_max` runs only when
//! a new peak is reached, which after warm-up is rare. Deallocation is one `fetch_sub`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

/// The counting allocator; install it with `#[global_allocator]`.
pub struct CountingAlloc;

impl CountingAlloc {
    /// Live heap bytes now.
    pub fn live(&self) -> u64 {
        LIVE.load(Relaxed) as u64
    }

    /// Peak live heap bytes since the last [`CountingAlloc::reset_peak`].
    pub fn peak(&self) -> u64 {
        PEAK.load(Relaxed) as u64
    }

    /// Starts a new peak measurement at the current live size and returns that size.
    pub fn reset_peak(&self) -> u64 {
        let live = LIVE.load(Relaxed);
        PEAK.store(live, Relaxed);
        live as u64
    }
}

#[inline]
fn grew(bytes: usize) {
    let now = LIVE.fetch_add(bytes, Relaxed).wrapping_add(bytes);
    if now > PEAK.load(Relaxed) {
        PEAK.fetch_max(now, Relaxed);
    }
}

#[inline]
fn shrank(bytes: usize) {
    LIVE.fetch_sub(bytes, Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged and only
// adds counter updates, which neither allocate nor touch the returned memory.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded with the caller's guarantees.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        p
    }
}
