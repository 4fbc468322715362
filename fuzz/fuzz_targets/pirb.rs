#![no_main]
//! Fuzz target `pirb`; the body is `passel_harness::fuzz::pirb` (see its docs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(bug) = passel_harness::fuzz::pirb(data) {
        panic!("{bug}");
    }
});
