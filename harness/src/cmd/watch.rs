//! `passel watch`: a pipeline over one file, again incrementally on every save (the work is
//! `crate::watch`).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use passel_engine::MemoryMode;

use crate::args::{check_input_shapes, PipelineArgs, ThreadArgs};
use crate::cmd::CommandError;
use crate::console::{Console, Stream};
use crate::onnx;

#[derive(Args)]
pub struct WatchArgs {
    /// The .pir file or .onnx model.
    pub file: PathBuf,
    #[command(flatten)]
    pub shapes: onnx::InputShapeArgs,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    #[command(flatten)]
    pub threads: ThreadArgs,
    /// Stop after this many runs (for scripts and tests).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    pub max_runs: Option<u64>,
    /// Write the optimised module here after each successful run.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,
    /// Keep no intermediate functions between runs (about 0.7 KB per function instead of
    /// 13 KB on a 50-op chain). Body edits recompute the same functions at up to twice the
    /// cost; adding, removing or renaming a function re-runs the whole pipeline.
    #[arg(long)]
    pub lean: bool,
    #[command(flatten)]
    pub cache: crate::cache::CacheArgs,
}

pub fn watch(console: &Console, args: WatchArgs) -> ExitCode {
    let res = (|| -> Result<(), CommandError> {
        check_input_shapes(&args.shapes)?;
        let (pipeline, builder) = args.pipeline.pipeline_and_context()?;
        let builder = args.threads.apply(builder);
        let ctx = builder.build()?;
        if args.pipeline.names_passes() {
            for note in crate::notes::pipeline_notes(&pipeline, &ctx, args.pipeline.passes.is_some()) {
                console.err(&format!("note: {note}\n")).map_err(|_| CommandError::Stderr)?;
            }
        }
        let cache = args.cache.open_for(&ctx, false)?.map(std::sync::Arc::new);
        let opts = crate::watch::WatchOptions {
            file: args.file.clone(),
            pipeline,
            ctx,
            max_runs: args.max_runs.map(|n| n as usize),
            output: args.output.clone(),
            memory: if args.lean { MemoryMode::Lean } else { MemoryMode::Full },
            import: args.shapes.options()?,
            cache,
        };
        Ok(crate::watch::watch(&opts, &mut console.writer(Stream::Stdout))?)
    })();
    match res {
        Ok(()) => console.exit_code(ExitCode::SUCCESS),
        Err(e) => console.error(&e.to_string()),
    }
}
