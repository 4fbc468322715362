#![no_main]
//! Fuzz target `onnx_import`; the body is `passel_harness::fuzz::onnx_import` (see its docs).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(bug) = passel_harness::fuzz::onnx_import(data) {
        panic!("{bug}");
    }
});
