//! `passel eval`: the reference interpreter on a model's entry function (the work is
//! `crate::eval`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::{load, write_stdout};
use crate::console::Console;
use crate::onnx;

#[derive(Args)]
pub struct EvalArgs {
    /// The .pir file or .onnx model.
    pub file: PathBuf,
    #[command(flatten)]
    pub shapes: onnx::InputShapeArgs,
    /// An input: `NAME=FILE.npy` for the parameter NAME (an ONNX input's own name, e.g.
    /// `gpu_0/data_0`, or its printed spelling `gpu_0_data_0`), or `FILE.npy` for the next
    /// parameter in order. Repeatable; parameters without a file get seeded random values.
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    pub inputs: Vec<String>,
    /// Seed of the random inputs (floats uniform in [-1, 1), integers in [-5, 5]).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write each output as DIR/output_K.npy.
    #[arg(long = "output-dir", value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// Compare each output with EXPECTED_DIR/output_K.npy (exit 1 on a mismatch).
    #[arg(long, value_name = "EXPECTED_DIR")]
    pub compare: Option<PathBuf>,
    /// Relative tolerance of --compare (ONNX's backend tests use 1e-3).
    #[arg(long, default_value_t = 1e-3)]
    pub rtol: f64,
    /// Absolute tolerance of --compare (ONNX's backend tests use 1e-7).
    #[arg(long, default_value_t = 1e-7)]
    pub atol: f64,
    /// The entry function.
    #[arg(long, default_value = "main")]
    pub function: String,
}

pub fn eval_cmd(console: &Console, args: EvalArgs) -> ExitCode {
    let module = match load(console, &args.file, &args.shapes) {
        Ok((m, _)) => m,
        Err(code) => return code,
    };
    let inputs = args
        .inputs
        .iter()
        .map(|s| match s.split_once('=') {
            Some((name, file)) => (Some(name.to_string()), PathBuf::from(file)),
            None => (None, PathBuf::from(s)),
        })
        .collect();
    let opts = crate::eval::EvalOptions {
        function: args.function,
        inputs,
        seed: args.seed,
        output_dir: args.output_dir,
        compare: args.compare,
        rtol: args.rtol,
        atol: args.atol,
    };
    match crate::eval::eval(&module, &opts) {
        Ok((report, ok)) => {
            let code = write_stdout(console, &report);
            if ok {
                code
            } else {
                console.exit_code(ExitCode::FAILURE)
            }
        }
        Err(e) => console.error(&e.to_string()),
    }
}
