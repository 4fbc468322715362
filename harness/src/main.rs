//! The `passel` command-line interface: the command enum and the dispatch; each command's
//! options and driver are in `passel_harness::cmd` (or `gen::cli`, `bench::cli`).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use passel_harness::args::check_input_shapes;
use passel_harness::cmd::{self, write_stdout};
use passel_harness::console::Console;
use passel_harness::{bench, gen, onnx};

/// passel: a parallel, incremental compiler pass engine.
#[derive(Parser)]
#[command(name = "passel", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse, verify and type-check a .pir file (or import a .onnx model); errors are shown with
    /// a source snippet (exit 1 if invalid).
    Check {
        /// The .pir file ("-" for stdin) or .onnx model.
        file: std::path::PathBuf,
        #[command(flatten)]
        shapes: onnx::InputShapeArgs,
    },
    /// Print a .pir file (or an imported .onnx model) in canonical form to stdout.
    Fmt {
        /// The .pir file ("-" for stdin) or .onnx model.
        file: std::path::PathBuf,
        #[command(flatten)]
        shapes: onnx::InputShapeArgs,
    },
    /// Import an ONNX model (opsets 9-21) and print it as .pir text.
    Import(onnx::ImportArgs),
    /// Run the reference interpreter on a model's entry function with inputs from .npy files
    /// (or seeded random inputs); write the outputs as DIR/output_K.npy and print a summary.
    Eval(cmd::eval::EvalArgs),
    /// Check passel against ONNX's own test data (written by scripts/onnx_data.sh): node cases
    /// per op and real models; exit 1 on a failure not listed as out of scope.
    Conformance(cmd::conformance::ConformanceArgs),
    /// Generate a deterministic workload as .pir text on stdout. Sizes whose estimated memory
    /// (module and text) exceeds half the physical memory, or half the cgroup's memory limit
    /// when lower, are refused up front; `chain` is made and printed one function at a time, so
    /// only one of its functions has to fit.
    #[command(subcommand)]
    Gen(gen::cli::GenCommand),
    /// Run a pass pipeline over a .pir file and print the resulting module (a crash reproducer
    /// written by --reproducer runs with the options of its header line).
    Run(Box<cmd::run::RunArgs>),
    /// Benchmark a pipeline on a generated workload, or on an ONNX model with `--model`
    /// (import, pipeline, print, peak memory vs weight bytes): serial vs parallel per thread
    /// count, with time, throughput, speedup and peak heap per row.
    Bench(bench::BenchArgs),
    /// Run a pipeline on a .pir file, then again incrementally on every save, printing
    /// which functions were recomputed.
    Watch(cmd::watch::WatchArgs),
    /// Binary-search the opt-bisect limit for the first pass execution after which CHECK fails:
    /// runs the pipeline with limits N, writes each output to a .pir file in a fresh private
    /// temporary directory and runs `sh -c 'CHECK "$1"' sh OUTPUT` (exit 0 = good). Prints the
    /// culprit's BISECT line. A pipeline that fails or panics even with every execution is an
    /// error naming the pass and function (exit 1).
    Bisect(Box<cmd::bisect::BisectArgs>),
    /// Inspect or trim a stage cache directory (`passel run --cache DIR`).
    #[command(subcommand)]
    Cache(passel_harness::cache::CacheCommand),
    /// List the registered passes with kind, opt level and required passes.
    Passes,
    /// List the registered PassContext config keys with their types.
    Configs,
}

/// Counts live heap bytes so `passel bench` can report peak heap per row.
#[global_allocator]
static HEAP: bench::CountingAlloc = bench::CountingAlloc;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let console = Console::new();
    let console = &console;
    match cli.command {
        Command::Check { file, shapes } => cmd::check::check(console, &file, &shapes),
        Command::Fmt { file, shapes } => cmd::check::fmt(console, &file, &shapes),
        Command::Eval(args) => cmd::eval::eval_cmd(console, args),
        Command::Conformance(args) => cmd::conformance::conformance(console, args),
        Command::Import(args) => {
            let imported = match check_input_shapes(&args.shapes) {
                Ok(()) => onnx::run_import(&args).map_err(|e| e.to_string()),
                Err(e) => Err(e.to_string()),
            };
            match imported {
                Ok(Some(text)) => write_stdout(console, &text),
                Ok(None) => console.exit_code(ExitCode::SUCCESS),
                Err(e) => console.error(&e),
            }
        }
        Command::Gen(cmd) => match gen::cli::check_size(&cmd, gen::cli::memory_limit()) {
            Ok(()) => {
                let _ = gen::cli::print_workload(&cmd, |text| console.out(text));
                console.exit_code(ExitCode::SUCCESS)
            }
            Err(e) => console.error(&e.to_string()),
        },
        Command::Run(args) => cmd::run::run(console, *args),
        Command::Bench(args) => match bench::run_cli(&args, Some(&HEAP), console) {
            Ok(table) => write_stdout(console, &table),
            Err(e) => console.error(&e.to_string()),
        },
        Command::Watch(args) => cmd::watch::watch(console, args),
        Command::Bisect(args) => cmd::bisect::bisect(console, *args),
        Command::Cache(c) => match passel_harness::cache::cache_command(&c) {
            Ok(text) => write_stdout(console, &text),
            Err(e) => console.error(&e.to_string()),
        },
        Command::Passes => write_stdout(console, &cmd::list::list_passes_text()),
        Command::Configs => write_stdout(console, &cmd::list::list_configs_text()),
    }
}
