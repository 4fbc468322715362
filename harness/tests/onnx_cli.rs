//! `passel import`, `passel bench --model`, and `.onnx` models given to `check`, `fmt`, `run` and `watch`, on the
//! fixtures in `engine/tests/data/onnx/` (written by `scripts/onnx_fixtures.py`).

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn passel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_passel")).args(args).stdin(Stdio::null()).output().expect("the passel binary runs")
}

fn fixture(name: &str) -> String {
    let p: PathBuf =
        [env!("CARGO_MANIFEST_DIR"), "..", "engine", "tests", "data", "onnx", &format!("{name}.onnx")].iter().collect();
    p.display().to_string()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn import_prints_the_module_and_writes_it_with_o() {
    let o = passel(&["import", &fixture("shape_subgraph")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stdout(&o),
        "def @main(%x: Tensor[(2, 3, 4), f32]) -> Tensor[(2, 12), f32] {\n  let %y: Tensor[(2, 12), f32] = reshape(%x, newshape=[2, 12]);\n  %y\n}\n"
    );
    let out = std::env::temp_dir().join(format!("passel-import-{}.pir", std::process::id()));
    let o = passel(&["import", &fixture("conv_relu"), "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
    // The written text is a valid module: `check` and `fmt` accept it, and `fmt` is a fixed point.
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(text.contains("conv2d("), "{text}");
    let o = passel(&["fmt", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), text);
    std::fs::remove_file(&out).unwrap();
}

#[test]
fn input_shape_flag_binds_symbolic_dims() {
    let o = passel(&["import", &fixture("symbolic_batch")]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(
            "graph input `x`: dimension 0 is symbolic (`batch`); give the shape with --input-shape x=d0,d1,…"
        ),
        "{}",
        stderr(&o)
    );
    let o = passel(&["import", &fixture("symbolic_batch"), "--input-shape", "x=7,3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("%x: Tensor[(7, 3), f32]"), "{}", stdout(&o));
    let o = passel(&["import", &fixture("symbolic_batch"), "--input-shape", "x=7;3"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--input-shape \"x=7;3\""), "{}", stderr(&o));
}

#[test]
fn check_and_run_accept_onnx_models() {
    let o = passel(&["check", &fixture("symbolic_batch"), "--input-shape", "x=2,3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("ok (1 functions)"), "{}", stderr(&o));
    let o = passel(&["run", &fixture("transformer_block"), "-O3"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.starts_with("def @main(%ids: Tensor[(3,), i64], %mask: Tensor[(3, 3), bool])"), "{text}");
    let o = passel(&["run", &fixture("bad_unsupported")]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("unsupported ONNX operators: custom::LSTMish"), "{}", stderr(&o));
}

#[test]
fn external_data_outside_the_model_folder_is_refused() {
    let o = passel(&["import", &fixture("bad_external_outside")]);
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains(
            "tensor `w`: external data `../outside.bin`: the location must be a relative path inside the model's folder"
        ),
        "{}",
        stderr(&o)
    );
    let o = passel(&["import", &fixture("bad_external_missing")]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("external data `missing_weights.bin`: cannot open"), "{}", stderr(&o));
}

#[test]
fn bench_model_reports_rows_and_memory_against_weight_bytes() {
    let json = std::env::temp_dir().join(format!("passel-bench-model-{}.json", std::process::id()));
    let o = passel(&[
        "bench",
        "--model",
        &fixture("conv_relu"),
        "--threads",
        "2",
        "--repeats",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let table = stdout(&o);
    let modes: Vec<&str> = table.lines().skip(1).take(4).filter_map(|l| l.split_whitespace().next()).collect();
    assert_eq!(modes, ["import", "serial", "parallel", "print"], "{table}");
    // The weights: conv 4×3×3×3 + bias 4 + fc 5×4 + bias 5 f32 = 548 bytes.
    assert!(table.contains("weights 0.5 KiB, ops 9 -> 9"), "{table}");
    assert!(table.contains("import + serial pipeline: peak heap "), "{table}");
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).unwrap();
    assert_eq!(report["pipeline"], "default -O3");
    let rows = report["rows"].as_array().unwrap();
    let mode = |i: usize| rows[i]["mode"].as_str().unwrap().to_string();
    assert_eq!((0..rows.len()).map(mode).collect::<Vec<_>>(), ["import", "serial", "parallel", "print"]);
    assert_eq!(rows[2]["threads"], 2);
    // Import and print are not pipeline runs: no speedup.
    assert!(rows[0]["speedup"].is_null() && rows[3]["speedup"].is_null() && rows[1]["speedup"] == 1.0);
    for r in rows {
        assert!(r["time_ms"].as_f64().unwrap() >= 0.0 && r["functions"] == 1, "{r}");
    }
    let m = &report["model"];
    assert_eq!(m["weight_bytes"], 548);
    assert_eq!(m["file_bytes"], std::fs::metadata(fixture("conv_relu")).unwrap().len());
    assert_eq!((m["ops_before"].as_u64(), m["ops_after"].as_u64()), (Some(9), Some(9)));
    // The binary installs the counting allocator: the peak holds at least the weights decoded.
    let heap = m["peak_heap_bytes"].as_u64().unwrap();
    assert!(heap >= 548, "{m}");
    let ratio = m["peak_heap_per_weight_byte"].as_f64().unwrap();
    assert!((ratio - heap as f64 / 548.0).abs() < 1e-2, "{m}");
    if cfg!(target_os = "linux") {
        assert!(m["peak_rss_bytes"].as_u64().unwrap() > heap, "{m}");
    }
}

#[test]
fn bench_model_counts_fills_as_weights_and_takes_opt_level_and_shapes() {
    let json = std::env::temp_dir().join(format!("passel-bench-fill-{}.json", std::process::id()));
    let o = passel(&[
        "bench",
        "--model",
        &fixture("constant_of_shape_weights"),
        "-O1",
        "--threads",
        "1",
        "--repeats",
        "1",
        "--json",
        json.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let report: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    std::fs::remove_file(&json).unwrap();
    assert_eq!(report["pipeline"], "default -O1");
    // A ConstantOfShape weight of 4×3×1×1 f32 counts at its materialized size.
    assert_eq!(report["model"]["weight_bytes"], 48);
    let o = passel(&["bench", "--model", &fixture("symbolic_batch"), "--input-shape", "x=4,3", "--repeats", "1"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("model: "), "{}", stdout(&o));
}

#[test]
fn bench_model_bad_input_is_a_clear_error() {
    let missing = std::env::temp_dir().join("passel-no-such-model.onnx");
    let o = passel(&["bench", "--model", missing.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("cannot read") && stderr(&o).contains("passel-no-such-model.onnx"), "{}", stderr(&o));
    let pir = std::env::temp_dir().join(format!("passel-bench-not-onnx-{}.pir", std::process::id()));
    std::fs::write(&pir, "def @main() -> Tensor[(), f32] {\n  1.0f\n}\n").unwrap();
    let o = passel(&["bench", "--model", pir.to_str().unwrap()]);
    std::fs::remove_file(&pir).unwrap();
    assert!(!o.status.success());
    assert!(stderr(&o).contains("expected an ONNX model (a .onnx file)"), "{}", stderr(&o));
    let o = passel(&["bench", "--model", &fixture("symbolic_batch")]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("graph input `x`: dimension 0 is symbolic"), "{}", stderr(&o));
    let o = passel(&["bench", "--model", &fixture("symbolic_batch"), "--input-shape", "x=4;3"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--input-shape \"x=4;3\""), "{}", stderr(&o));
    let o = passel(&["bench", "--model", &fixture("bad_unsupported")]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("unsupported ONNX operators"), "{}", stderr(&o));
    let o = passel(&["bench", "--input-shape", "x=1", "--functions", "2"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("--input-shape applies only to --model"), "{}", stderr(&o));
    let o = passel(&["bench", "--model", &fixture("conv_relu"), "--workload", "cnn"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("cannot be used with"), "{}", stderr(&o));
}
