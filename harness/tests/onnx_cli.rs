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
    // -O defaults to 2 in every command, bench included.
    assert_eq!(report["pipeline"], "default -O2");
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

/// A fresh directory under the system temp dir for test `tag`.
fn scratch_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("passel-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Runs `passel args…` with a deadline: a command that blocks (reading a FIFO) is killed and
/// reported as `None`.
fn passel_within(args: &[&str], secs: u64) -> Option<Output> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_passel"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the passel binary runs");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    while std::time::Instant::now() < deadline {
        if child.try_wait().unwrap().is_some() {
            return Some(child.wait_with_output().unwrap());
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    None
}

/// The child half of `a_model_truncated_after_import_still_prints`: imports a copy of
/// `conv_relu` (its 108-element conv weight stays a raw slice of the model's buffer), truncates
/// the file to nothing as a re-export in place would, then prints the module, which reads
/// every weight byte. With the file memory-mapped, that read dies with SIGBUS.
fn import_truncate_print() {
    let dir = scratch_dir("truncate");
    let model = dir.join("m.onnx");
    std::fs::copy(fixture("conv_relu"), &model).unwrap();
    let module = passel_harness::onnx::import_onnx(&model, &Default::default()).expect("imports");
    std::fs::OpenOptions::new().write(true).open(&model).unwrap().set_len(0).unwrap();
    let text = passel_engine::ir::print_module(&module);
    assert!(text.contains("conv2d("), "{text}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Check that a model file truncated by another process after import cannot kill passel: the
/// importer works on its own copy of the bytes. The work runs in a child process (this test
/// binary again) so that a signal shows as this test's failure, not as a crashed test run.
#[test]
fn a_model_truncated_after_import_still_prints() {
    if std::env::var_os("PASSEL_TEST_TRUNCATE_CHILD").is_some() {
        import_truncate_print();
        return;
    }
    let o = Command::new(std::env::current_exe().unwrap())
        .args(["a_model_truncated_after_import_still_prints", "--exact", "--nocapture", "--test-threads=1"])
        .env("PASSEL_TEST_TRUNCATE_CHILD", "1")
        .output()
        .unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(o.status.signal(), None, "the child died from a signal: {}{}", stdout(&o), stderr(&o));
    }
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("1 passed"), "{}", stdout(&o));
}

/// Check that `passel watch` survives its model being rewritten in place (truncated, then
/// written shorter) between runs: every run imports the bytes it read. With the file mapped,
/// run 2 died with SIGBUS comparing the new module with run 1's.
#[test]
fn watch_survives_a_model_rewritten_in_place() {
    let dir = scratch_dir("watch-rewrite");
    let model = dir.join("m.onnx");
    // `conv_relu` behind an unknown 12 KiB field (which decoders skip), so its weights sit
    // past the first pages, beyond the end of the plain `conv_relu` written over it.
    let mut bytes = vec![0xc2, 0x3e, 0x80, 0x60]; // field 1000, length-delimited, 12288 bytes
    bytes.resize(4 + 12288, 0);
    bytes.extend(std::fs::read(fixture("conv_relu")).unwrap());
    std::fs::write(&model, &bytes).unwrap();
    let m = model.to_str().unwrap().to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_passel"))
        .args(["watch", &m, "-O3", "--max-runs", "2"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait for the first run's report, then rewrite the same inode with a smaller model.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut first = String::new();
    {
        use std::io::BufRead;
        let mut lines = std::io::BufReader::new(child.stdout.as_mut().unwrap());
        while !first.contains("run 1") && std::time::Instant::now() < deadline {
            if lines.read_line(&mut first).unwrap() == 0 {
                break;
            }
        }
    }
    assert!(first.contains("run 1"), "{first}");
    // The same model re-exported without the padding: the session compares the new @main
    // with the old one, reading the old weights (past the new end of the file).
    std::fs::write(&model, std::fs::read(fixture("conv_relu")).unwrap()).unwrap();
    let o = child.wait_with_output().unwrap();
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(o.status.signal(), None, "watch died from a signal: {}", stderr(&o));
    }
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("run 2"), "{}", stdout(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Check that a FIFO or a directory given as the model, or a FIFO as an external-data
/// location, is refused with a clear error instead of blocking forever.
#[cfg(unix)]
#[test]
fn non_regular_model_and_external_files_are_refused() {
    let dir = scratch_dir("fifo");
    let fifo = dir.join("m.onnx");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let o = passel_within(&["import", fifo.to_str().unwrap()], 60).expect("a FIFO model does not block");
    assert!(!o.status.success());
    assert!(stderr(&o).contains("m.onnx: it is a fifo, not a regular file"), "{}", stderr(&o));

    let sub = dir.join("d.onnx");
    std::fs::create_dir(&sub).unwrap();
    let o = passel_within(&["run", sub.to_str().unwrap()], 60).expect("a directory does not block");
    assert!(!o.status.success());
    assert!(stderr(&o).contains("d.onnx: it is a directory, not a regular file"), "{}", stderr(&o));

    // `bad_external_missing` keeps its weight in `missing_weights.bin`, here a FIFO.
    let model = dir.join("ext.onnx");
    std::fs::copy(fixture("bad_external_missing"), &model).unwrap();
    assert!(Command::new("mkfifo").arg(dir.join("missing_weights.bin")).status().unwrap().success());
    let o = passel_within(&["import", model.to_str().unwrap()], 60).expect("a FIFO external file does not block");
    assert!(!o.status.success());
    assert!(
        stderr(&o).contains("external data `missing_weights.bin`: cannot read")
            && stderr(&o).contains("it is a fifo, not a regular file"),
        "{}",
        stderr(&o)
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Check that the CLI's external-data reader also serves a `Constant` node whose `value` is
/// stored as external data (onnx's `save_model(..., convert_attribute=True)`).
#[test]
fn a_constant_value_in_external_data_imports_from_the_cli() {
    let o = passel(&["import", &fixture("constant_external_value")]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("tensor<(8,), f32>[0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75]"), "{}", stdout(&o));
}

/// `eval --input NAME=…` takes an ONNX graph input by its own name (`gpu_0/data_0`) and by the
/// name `passel import` prints for it (`gpu_0_data_0`); an unknown name is still an error.
#[test]
fn eval_inputs_answer_to_onnx_names_and_their_text_spelling() {
    let dir = scratch_dir("onnx-names");
    let x = dir.join("x.npy");
    let t = passel_engine::ir::Tensor::from_f64s(&[2], passel_engine::ir::DType::F32, &[-1.0, 2.0]).unwrap();
    passel_harness::npy::write(&x, &t).unwrap();
    let o = passel(&["import", &fixture("onnx_names")]);
    assert!(stdout(&o).contains("%gpu_0_data_0: Tensor[(2,), f32]"), "{}", stdout(&o));
    for name in ["gpu_0/data_0", "gpu_0_data_0"] {
        let arg = format!("{name}={}", x.display());
        let o = passel(&["eval", &fixture("onnx_names"), "--input", &arg]);
        assert!(o.status.success(), "{name}: {}", stderr(&o));
        assert!(stdout(&o).starts_with("output_0: Tensor[(2,), f32]  min 0.000000  max 2.000000"), "{}", stdout(&o));
    }
    let arg = format!("gpu_1/data_0={}", x.display());
    let o = passel(&["eval", &fixture("onnx_names"), "--input", &arg]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("`@main` has no parameter `gpu_1/data_0`"), "{}", stderr(&o));
    std::fs::remove_dir_all(&dir).unwrap();
}
