//! The LSTM / GRU / RNN models of `engine/tests/data/onnx/rnn/` (expected outputs from
//! onnxruntime, written by `scripts/onnx_rnn_fixtures.py`) through the CLI as a user runs them:
//! `passel run MODEL.onnx -O3 --verify-each` and `passel eval` of the result against
//! onnxruntime's outputs, so the unrolled layers stay right after every standard pass.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn passel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_passel")).args(args).stdin(Stdio::null()).output().expect("the passel binary runs")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn cases() -> Vec<PathBuf> {
    let dir: PathBuf = [env!("CARGO_MANIFEST_DIR"), "..", "engine", "tests", "data", "onnx", "rnn"].iter().collect();
    let mut cases: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("model.onnx").exists())
        .collect();
    cases.sort();
    cases
}

fn inputs(case: &Path) -> Vec<String> {
    (0..)
        .map(|k| case.join(format!("input_{k}.npy")))
        .take_while(|p| p.exists())
        .map(|p| p.display().to_string())
        .collect()
}

#[test]
fn recurrent_models_after_o3_still_match_onnxruntime() {
    let cases = cases();
    assert!(cases.len() >= 10, "found only {} cases", cases.len());
    let tmp = std::env::temp_dir().join(format!("passel-rnn-o3-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    for case in &cases {
        let name = case.file_name().unwrap().to_string_lossy().into_owned();
        let out = tmp.join(format!("{name}.pir"));
        let model = case.join("model.onnx");
        let o = passel(&["run", model.to_str().unwrap(), "-O3", "--verify-each", "-o", out.to_str().unwrap()]);
        assert!(o.status.success(), "{name}: run -O3: {}", stderr(&o));
        let mut args = vec!["eval".to_string(), out.display().to_string()];
        for input in inputs(case) {
            args.extend(["--input".to_string(), input]);
        }
        args.extend(["--compare", case.to_str().unwrap(), "--rtol", "1e-4", "--atol", "1e-7"].map(String::from));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let o = passel(&args);
        assert!(o.status.success(), "{name}: eval after -O3: {}{}", String::from_utf8_lossy(&o.stdout), stderr(&o));
    }
    std::fs::remove_dir_all(&tmp).unwrap();
}
