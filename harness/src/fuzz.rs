//! Fuzz-target bodies. They live here, not in `fuzz/`, so that `cargo test` replays the
//! committed corpus (`fuzz/corpus/<target>/*`) on every CI run without cargo-fuzz, and
//! `cargo fuzz run <target>` explores further on demand.
//!
//! Each function returns `Err` with a description when it finds a bug; the fuzz targets turn
//! that into a panic, which is how libFuzzer recognises a failure.

use passel_engine::ir::{module_structural_eq, parse_module, print_module};

/// `parse`: arbitrary bytes never panic the parser; when they parse, the module prints.
pub fn parse(data: &[u8]) -> Result<(), String> {
    let Ok(src) = std::str::from_utf8(data) else { return Ok(()) };
    if let Ok(m) = parse_module(src) {
        let _ = print_module(&m);
    }
    Ok(())
}

/// `roundtrip`: whenever text parses, printing it and parsing again gives a structurally
/// equal module, and printing that gives the same bytes.
pub fn roundtrip(data: &[u8]) -> Result<(), String> {
    let Ok(src) = std::str::from_utf8(data) else { return Ok(()) };
    let Ok(m1) = parse_module(src) else { return Ok(()) };
    let t1 = print_module(&m1);
    let m2 = parse_module(&t1).map_err(|e| format!("printed text does not parse: {e}\n--- text:\n{t1}"))?;
    if !module_structural_eq(&m1, &m2) {
        return Err(format!("parse(print(m)) differs from m\n--- text:\n{t1}"));
    }
    let t2 = print_module(&m2);
    if t1 != t2 {
        return Err(format!("printing is not stable\n--- first:\n{t1}\n--- second:\n{t2}"));
    }
    Ok(())
}
