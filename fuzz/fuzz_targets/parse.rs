#![no_main]
//! Fuzz target `parse`; the body is `passel_harness::fuzz::parse` (see its docs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(bug) = passel_harness::fuzz::parse(data) {
        panic!("{bug}");
    }
});
