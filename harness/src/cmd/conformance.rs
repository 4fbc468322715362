//! `passel conformance`: passel against ONNX's own test data (the work is `crate::conformance`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::write_stdout;
use crate::console::Console;

#[derive(Args)]
pub struct ConformanceArgs {
    /// The data folder (default target/onnx-data, as scripts/onnx_data.sh writes it).
    #[arg(default_value = "target/onnx-data")]
    pub dir: PathBuf,
    /// The out-of-scope list: `case reason…` per line.
    #[arg(long, default_value = "docs/onnx-out-of-scope.txt")]
    pub out_of_scope: PathBuf,
    /// Only cases whose name contains this text.
    #[arg(long)]
    pub filter: Option<String>,
    /// Also lower each model after -O3 (LegalizeOps, FuseTIR, the tir passes) and check the lowered module's
    /// outputs (the loop-level interpreter is slow: meant for small models).
    #[arg(long)]
    pub lower: bool,
}

pub fn conformance(console: &Console, args: ConformanceArgs) -> ExitCode {
    if !args.dir.is_dir() {
        return console.error(&format!("{} does not exist: run scripts/onnx_data.sh first", args.dir.display()));
    }
    let oos = match crate::conformance::read_out_of_scope(&args.out_of_scope) {
        Ok(o) => o,
        Err(e) => return console.error(&e.to_string()),
    };
    let (report, ok) = crate::conformance::run_all(&args.dir, &oos, args.filter.as_deref(), args.lower);
    let code = write_stdout(console, &report);
    if ok {
        code
    } else {
        console.exit_code(ExitCode::FAILURE)
    }
}
