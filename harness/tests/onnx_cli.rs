//! `passel import`, and `.onnx` models given to `check`, `fmt`, `run` and `watch`, on the
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
