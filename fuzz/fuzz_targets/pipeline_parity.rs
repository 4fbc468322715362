#![no_main]
//! Fuzz target `pipeline_parity`; the body is `passel_harness::fuzz::pipeline_parity` (see its
//! docs): a byte-decoded module through a byte-decoded pipeline, parallel == serial.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(bug) = passel_harness::fuzz::pipeline_parity(data) {
        panic!("{bug}");
    }
});
