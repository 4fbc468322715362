//! Times ONNX import (decode + convert, no printing) of each model given on the command line:
//! `cargo run --release -p passel-engine --example onnx_import_time -- MODEL.onnx…`. Prints
//! the best of 20 imports per model. (Examples may read files; the library does not.)

use std::time::Instant;

use passel_engine::frontend::onnx::{import_onnx_bytes, ImportOptions};

fn main() {
    for path in std::env::args().skip(1) {
        let bytes = match std::fs::read(&path) {
            Ok(b) => bytes::Bytes::from(b),
            Err(e) => {
                eprintln!("{path}: {e}");
                continue;
            }
        };
        let mut best = f64::INFINITY;
        let mut bindings = 0;
        for _ in 0..20 {
            let t = Instant::now();
            match import_onnx_bytes(bytes.clone(), &ImportOptions::default()) {
                Ok(m) => bindings = m.get("main").map_or(0, |f| f.num_bindings()),
                Err(e) => {
                    eprintln!("{path}: {e}");
                    break;
                }
            }
            best = best.min(t.elapsed().as_secs_f64());
        }
        println!("{path}: {:.2} ms ({bindings} bindings, {} bytes)", best * 1e3, bytes.len());
    }
}
