//! Replays every committed fuzz corpus file through its target's body, so CI covers the corpus
//! without cargo-fuzz.

use std::path::Path;

fn replay(target: &str, body: fn(&[u8]) -> Result<(), String>) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus").join(target);
    let mut entries: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("corpus {} missing: {e}", dir.display()))
        .map(|e| e.expect("readable corpus entry").path())
        .collect();
    entries.sort();
    assert!(!entries.is_empty(), "corpus {} is empty", dir.display());
    for path in entries {
        let data = std::fs::read(&path).expect("readable corpus file");
        if let Err(bug) = body(&data) {
            panic!("{}: {bug}", path.display());
        }
    }
}

#[test]
fn parse_corpus_never_panics() {
    replay("parse", passel_harness::fuzz::parse);
}

#[test]
fn roundtrip_corpus_is_stable() {
    replay("roundtrip", passel_harness::fuzz::roundtrip);
}

#[test]
fn pipeline_parity_corpus_is_equal_to_serial() {
    replay("pipeline_parity", passel_harness::fuzz::pipeline_parity);
}

#[test]
fn onnx_import_corpus_never_panics() {
    replay("onnx_import", passel_harness::fuzz::onnx_import);
}

#[test]
fn pirb_corpus_never_panics() {
    replay("pirb", passel_harness::fuzz::pirb);
}

#[test]
fn tir_pipeline_parity_corpus_is_equal_to_serial() {
    replay("tir_pipeline_parity", passel_harness::fuzz::tir::tir_pipeline_parity);
}
