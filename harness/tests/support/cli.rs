//! Helpers the CLI integration tests share: run the built `passel` binary, read its stderr,
//! and make a fresh directory per test. Included with `#[path = "support/cli.rs"] mod cli;`
//! (a file under a directory, so cargo does not build it as a test of its own).

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

/// The built `passel` binary.
pub fn bin() -> Command {
    Command::new(env!("CARGO_BIN_EXE_passel"))
}

/// Runs `passel args…` with no standard input.
pub fn passel(args: &[&str]) -> Output {
    bin().args(args).stdin(Stdio::null()).output().expect("the passel binary runs")
}

/// The output's stderr as text.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A fresh directory for one test, named after the test binary, the process and `test`.
pub fn temp_dir(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("passel-{}-{}-{test}", env!("CARGO_CRATE_NAME"), std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// Writes `text` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    path
}
