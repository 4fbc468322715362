#![no_main]
//! Fuzz target `roundtrip`; the body is `passel_harness::fuzz::roundtrip` (see its docs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(bug) = passel_harness::fuzz::roundtrip(data) {
        panic!("{bug}");
    }
});
