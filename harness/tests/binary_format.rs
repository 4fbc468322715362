//! The binary module form (`.pirb`): text → binary → text gives the same bytes on generated
//! modules of every kind, on lowered modules (PrimFuncs), and on the real models of
//! `engine/tests/data/real_models/` (raw weights as imported, and dense ones as parsed);
//! damaged files are errors, not panics; and the CLI reads `.pirb` wherever it reads `.pir`
//! and writes it for `-o OUT.pirb`. `PASSEL_PIRB_CASES=N` runs more generated cases.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use bytes::Bytes;
use passel_engine::ir::{parse_module, print_module, read_module_binary, write_module_binary, BinaryError, Module};
use passel_engine::transform::{Pass, PassContext};
use passel_harness::gen::{workload, CnnOptions, MlpOptions, KINDS};
use proptest::prelude::*;

/// Writes `m`, reads it back, and checks the text is the same; returns the bytes.
fn round_trip(m: &Module) -> Result<Vec<u8>, String> {
    let text = print_module(m);
    let bytes = write_module_binary(m).map_err(|e| e.to_string())?;
    let back = read_module_binary(&Bytes::from(bytes.clone())).map_err(|e| e.to_string())?;
    let again = print_module(&back);
    if again != text {
        return Err(format!("binary round trip changed the text\n--- before:\n{text}\n--- after:\n{again}"));
    }
    let twice = write_module_binary(&back).map_err(|e| e.to_string())?;
    if twice != bytes {
        return Err("writing the module read back gives other bytes".into());
    }
    Ok(bytes)
}

/// text → module → binary → module → text.
fn text_round_trip(text: &str) -> Result<(), String> {
    let m = parse_module(text).map_err(|e| format!("{e:?}"))?;
    round_trip(&m).map(|_| ())
}

fn cases() -> u32 {
    std::env::var("PASSEL_PIRB_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(16)
}

fn lowered(m: Module) -> Module {
    passel_passes::link();
    let ctx = PassContext::builder().opt_level(3).num_threads(1).build().expect("valid context");
    ctx.scope(|| passel_passes::build_pipeline(3).run(m, &ctx)).expect("context enters").expect("pipeline runs")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn generated_modules_round_trip_through_binary_byte_exactly(
        kind in 0usize..KINDS.len(), functions in 1usize..8, seed in any::<u64>(),
    ) {
        let m = workload(KINDS[kind], functions, seed).map_err(|e| TestCaseError::fail(e.to_string()))?;
        // Through the text first, as `passel run x.pir -o x.pirb` does.
        text_round_trip(&print_module(&m)).map_err(TestCaseError::fail)?;
        round_trip(&m).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn lowered_modules_round_trip_through_binary_byte_exactly(kind in 0usize..2, seed in any::<u64>()) {
        let m = match kind {
            0 => passel_harness::gen::cnn(&CnnOptions { blocks: 1, batch: 1, channels: 3, image: 5, classes: 2, seed }),
            _ => passel_harness::gen::mlp(&MlpOptions { layers: 2, batch: 2, input: 4, width: 5, seed, ..Default::default() }),
        };
        let m = lowered(m);
        prop_assert!(m.prim_funcs().next().is_some(), "lowering made PrimFuncs");
        round_trip(&m).map_err(TestCaseError::fail)?;
        text_round_trip(&print_module(&m)).map_err(TestCaseError::fail)?;
    }
}

fn real_models() -> Vec<PathBuf> {
    let dir: PathBuf = [env!("CARGO_MANIFEST_DIR"), "..", "engine", "tests", "data", "real_models"].iter().collect();
    let mut models: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the real-model corpus is committed")
        .filter_map(|e| Some(e.ok()?.path().join("model.onnx")))
        .filter(|p| p.is_file())
        .collect();
    models.sort();
    models
}

#[test]
fn real_models_round_trip_through_binary_byte_exactly() {
    let options = passel_engine::frontend::onnx::ImportOptions::default();
    let mut done = 0;
    for path in real_models() {
        let Ok(m) = passel_harness::onnx::import_onnx(&path, &options) else { continue };
        // As imported: raw weights, slices of the model's bytes.
        round_trip(&m).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        // As parsed from the printed text: dense weights.
        text_round_trip(&print_module(&m)).unwrap_or_else(|e| panic!("{} (via text): {e}", path.display()));
        // And optimised.
        let ctx = PassContext::builder().opt_level(3).num_threads(1).build().expect("valid context");
        let o = ctx.scope(|| passel_passes::default_pipeline(3).run(m, &ctx)).expect("enters").expect("runs");
        round_trip(&o).unwrap_or_else(|e| panic!("{} (after -O3): {e}", path.display()));
        done += 1;
    }
    assert!(done >= 20, "only {done} real models imported");
}

const SMALL: &str = r#"def @f(%x: Tensor[(2, 20), f32], %c: Tensor[(), bool]) -> Tensor[(2, 20), f32] {
  let %k = fn (%y: Tensor[(2, 20), f32]) -> Tensor[(2, 20), f32] { relu(%y) };
  let %a = add(%x, resource<(2, 20), f32>(w));
  let %t = (%a, 1.5f, tensor<(2,), f32>[1.0, 2.0], full<(64, 3), f32>(0.5), uniform<(4, 3), f32>(seed=1, low=-0.1, high=0.1));
  let %p = %t.0;
  let %s = mean(%p, axis=[0], keepdims=true);
  let %z = if (%c) { %k(%p) } else { @g(%p) };
  add(%z, %s)
}

def @g(%x: Tensor[(2, 20), f32]) -> Tensor[(2, 20), f32] {
  add(%x, resource<(2, 20), f32>(w))
}
"#;

fn small_module() -> Module {
    let w: String = (0..40u32).map(|i| format!("{:08x}", (i as f32 * 0.5).to_bits().swap_bytes())).collect();
    let text = format!("{SMALL}\nresources {{\n  w = \"{w}\";\n}}\n");
    match parse_module(&text) {
        Ok(m) => m,
        Err(e) => panic!("{e:?}\n{text}"),
    }
}

#[test]
fn every_expression_kind_and_constant_kind_round_trips() {
    let m = small_module();
    let bytes = round_trip(&m).expect("round trips");
    assert!(passel_engine::ir::is_binary_module(&bytes));
}

#[test]
fn damaged_binary_modules_are_errors_not_panics() {
    let bytes = write_module_binary(&small_module()).expect("writes");
    for len in 0..bytes.len() {
        let cut = Bytes::copy_from_slice(&bytes[..len]);
        assert!(read_module_binary(&cut).is_err(), "a file cut at {len} of {} bytes reads", bytes.len());
    }
    for at in 0..bytes.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut damaged = bytes.clone();
            damaged[at] ^= flip;
            // Either an error or a module; never a panic or a huge allocation.
            let _ = read_module_binary(&Bytes::from(damaged));
        }
    }
}

#[test]
fn another_format_version_is_a_clear_error() {
    let mut bytes = write_module_binary(&small_module()).expect("writes");
    bytes[8..12].copy_from_slice(&7u32.to_le_bytes());
    let err = read_module_binary(&Bytes::from(bytes)).expect_err("version 7 is refused");
    assert!(matches!(err, BinaryError::Version { found: 7, expected: 1, .. }), "{err:?}");
    assert!(err.to_string().contains("format version 7"), "{err}");
    let err = read_module_binary(&Bytes::from_static(b"def @f() { 1f }")).expect_err("text is not binary");
    assert_eq!(err, BinaryError::NotBinary);
}

#[test]
fn a_count_larger_than_the_file_is_refused_before_allocating() {
    let mut bytes = write_module_binary(&small_module()).expect("writes");
    // The string table's count is the first word of the first section.
    let table = 8 + 4 + 4 + env!("CARGO_PKG_VERSION").len() + 4;
    let strings_at = u64::from_le_bytes(bytes[table + 8..table + 16].try_into().unwrap()) as usize;
    bytes[strings_at..strings_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    let err = read_module_binary(&Bytes::from(bytes)).expect_err("refused");
    assert!(err.to_string().contains("larger than the section"), "{err}");
}

// ---------------------------------------------------------------------------------------
// The CLI

fn passel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_passel")).args(args).stdin(Stdio::null()).output().expect("the passel binary runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn temp(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("passel-pirb-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir.join(name)
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf-8 temp path")
}

#[test]
fn cli_reads_binary_modules_by_magic_and_writes_them_for_pirb_outputs() {
    let text = print_module(&small_module());
    let pir = temp("m.pir");
    std::fs::write(&pir, &text).unwrap();
    // `run -O0 -o m.pirb` converts; the name, not a flag, picks the form.
    let pirb = temp("m.pirb");
    let o = passel(&["run", s(&pir), "-O0", "-o", s(&pirb)]);
    assert!(o.status.success(), "{}", stderr(&o));
    let bytes = std::fs::read(&pirb).unwrap();
    assert!(passel_engine::ir::is_binary_module(&bytes));
    // What `-O0` prints (InferType runs even there), and so what the binary file holds.
    let o = passel(&["run", s(&pir), "-O0"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    // A binary module under a text name is still read as binary: detection is by magic.
    let disguised = temp("disguised.pir");
    std::fs::write(&disguised, &bytes).unwrap();
    for file in [&pirb, &disguised] {
        let o = passel(&["fmt", s(file)]);
        assert!(o.status.success(), "{}", stderr(&o));
        assert_eq!(stdout(&o), text);
        let o = passel(&["check", s(file)]);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let from_text = passel(&["run", s(&pir), "-O3"]);
    let from_binary = passel(&["run", s(&pirb), "-O3"]);
    assert!(from_binary.status.success(), "{}", stderr(&from_binary));
    assert_eq!(stdout(&from_text), stdout(&from_binary));
    let o = passel(&["eval", s(&pirb), "--function", "f"]);
    let t = passel(&["eval", s(&pir), "--function", "f"]);
    assert_eq!(stdout(&o), stdout(&t), "{}", stderr(&o));
    assert_eq!(o.status.success(), t.status.success());

    // A damaged file: a clear error naming the file, no panic.
    let bad = temp("bad.pirb");
    std::fs::write(&bad, &bytes[..bytes.len() / 2]).unwrap();
    let o = passel(&["check", s(&bad)]);
    assert!(!o.status.success());
    let err = stderr(&o);
    assert!(err.contains("bad.pirb") && err.contains("damaged binary module"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}
