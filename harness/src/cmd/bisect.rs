//! `passel bisect`: binary-search the opt-bisect limit for the first pass execution after which
//! a user's check fails (the search itself is `debug::bisect`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

use super::{load, write_stdout};
use crate::args::{PipelineArgs, ThreadArgs};
use crate::console::Console;
use crate::debug::bisect::BisectError;
use crate::{debug, onnx};

#[derive(Args)]
pub struct BisectArgs {
    /// The .pir file or .onnx model.
    pub file: PathBuf,
    #[command(flatten)]
    pub shapes: onnx::InputShapeArgs,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    #[command(flatten)]
    pub threads: ThreadArgs,
    /// Shell command that checks an output file (passed as its last argument); a nonzero exit
    /// means the output is bad. Must not be empty.
    #[arg(long, value_name = "CMD")]
    pub check: String,
}

pub fn bisect(console: &Console, args: BisectArgs) -> ExitCode {
    // `sh -c ' "$1"'` would run the output file itself as the command.
    if args.check.trim().is_empty() {
        return console.error("--check is empty: give a shell command that checks the output file (exit 0 = good)");
    }
    let (module, _) = match load(console, &args.file, &args.shapes) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let res = (|| -> Result<String, BisectError> {
        // Checked once here; the closure builds the same context for every run.
        let (pipeline, _) = args.pipeline.pipeline_and_context()?;
        let builder = || args.threads.apply(args.pipeline.context().unwrap_or_default());
        let full = debug::bisect::run_with_limit(&module, &pipeline, builder, u64::MAX)?;
        if let Err(error) = &full.output {
            // A failure is not a bad output for the check to find: it names its pass already.
            return Err(BisectError::PipelineFails { executions: full.executions, error: error.clone() });
        }
        // Outputs go to a fresh private directory (mode 0700, random name, removed on drop),
        // and each is created anew there: nobody else can plant a file or symlink in it.
        let dir = tempfile::Builder::new()
            .prefix("passel-bisect-")
            .tempdir()
            .map_err(|source| BisectError::TempDir { dir: std::env::temp_dir(), source })?;
        let out_path = dir.path().join("output.pir");
        let mut fails = |limit: u64| -> Result<bool, BisectError> {
            let run = debug::bisect::run_with_limit(&module, &pipeline, builder, limit)?;
            let text = run.output.unwrap_or_else(|e| format!("// pipeline failed: {e}\n"));
            debug::bisect::write_new(&out_path, &text)
                .map_err(|source| BisectError::Write { path: out_path.clone(), source })?;
            let status = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("{} \"$1\"", args.check))
                .arg("sh")
                .arg(&out_path)
                .status()
                .map_err(BisectError::Check)?;
            let _ = console.err(&format!("limit {limit}: {}\n", if status.success() { "good" } else { "bad" }));
            Ok(!status.success())
        };
        let found = debug::bisect::first_failing(full.executions, &mut fails);
        dir.close().map_err(BisectError::RemoveTempDir)?;
        Ok(match found? {
            None => format!("the check passes with all {} executions: nothing to bisect\n", full.executions),
            Some(k) => format!(
                "first bad execution ({k} of {}):\n{}\n",
                full.executions,
                debug::bisect::execution_line(&full.log, k).unwrap_or("(no line)")
            ),
        })
    })();
    match res {
        Ok(text) => write_stdout(console, &text),
        Err(e) => console.error(&e.to_string()),
    }
}
