#![no_main]
//! Fuzz target `tir_pipeline_parity`; the body is `passel_harness::fuzz::tir::tir_pipeline_parity`
//! (see its docs): a generated model lowered to PrimFuncs through a byte-decoded pipeline of tir
//! passes and configs, parallel == serial, the lowered module still computing the same.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(bug) = passel_harness::fuzz::tir::tir_pipeline_parity(data) {
        panic!("{bug}");
    }
});
