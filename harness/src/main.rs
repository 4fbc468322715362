//! The `passel` command-line interface.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use std::sync::Arc;

use passel_engine::ir::{parse_module, print_module, verify_module, Module};
use passel_engine::transform::{
    chrome_trace_json, get_pass, list_configs, list_passes, parse_config_assignment, parse_pipeline, trace_channel,
    ConfigValue, DumpIrInstrument, OptBisect, Pass, PassContext, PassContextBuilder, PassError, PassFailure,
    PassTimingInstrument, PrintIrInstrument, ReproducerInstrument, Sequential, Severity, MAX_THREADS, VERIFY_EACH,
};
use passel_engine::MemoryMode;
use passel_harness::args::{check_distinct_outputs, check_input_shapes};
use passel_harness::console::{Console, Stream};
use passel_harness::{bench, debug, diag, gen, onnx};

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
        file: PathBuf,
        #[command(flatten)]
        shapes: onnx::InputShapeArgs,
    },
    /// Print a .pir file (or an imported .onnx model) in canonical form to stdout.
    Fmt {
        /// The .pir file ("-" for stdin) or .onnx model.
        file: PathBuf,
        #[command(flatten)]
        shapes: onnx::InputShapeArgs,
    },
    /// Import an ONNX model (opsets 9-21) and print it as .pir text.
    Import(onnx::ImportArgs),
    /// Run the reference interpreter on a model's entry function with inputs from .npy files
    /// (or seeded random inputs); write the outputs as DIR/output_K.npy and print a summary.
    Eval(EvalArgs),
    /// Check passel against ONNX's own test data (written by scripts/onnx_data.sh): node cases
    /// per op and real models; exit 1 on a failure not listed as out of scope.
    Conformance(ConformanceArgs),
    /// Generate a deterministic workload as .pir text on stdout. Sizes whose estimated memory
    /// (module and text) exceeds half the physical memory, or half the cgroup's memory limit
    /// when lower, are refused up front.
    #[command(subcommand)]
    Gen(gen::cli::GenCommand),
    /// Run a pass pipeline over a .pir file and print the resulting module (a crash reproducer
    /// written by --reproducer runs with the options of its header line).
    Run(Box<RunArgs>),
    /// Benchmark a pipeline on a generated workload, or on an ONNX model with `--model`
    /// (import, pipeline, print, peak memory vs weight bytes): serial vs parallel per thread
    /// count, with time, throughput, speedup and peak heap per row.
    Bench(bench::BenchArgs),
    /// Run a pipeline on a .pir file, then again incrementally on every save, printing
    /// which functions were recomputed.
    Watch(WatchArgs),
    /// Binary-search the opt-bisect limit for the first pass execution after which CHECK fails:
    /// runs the pipeline with limits N, writes each output to a .pir file in a fresh private
    /// temporary directory and runs `sh -c 'CHECK "$1"' sh OUTPUT` (exit 0 = good). Prints the
    /// culprit's BISECT line. A pipeline that fails or panics even with every execution is an
    /// error naming the pass and function (exit 1).
    Bisect(Box<BisectArgs>),
    /// Inspect or trim a stage cache directory (`passel run --cache DIR`).
    #[command(subcommand)]
    Cache(passel_harness::cache::CacheCommand),
    /// List the registered passes with kind, opt level and required passes.
    Passes,
    /// List the registered PassContext config keys with their types.
    Configs,
}

/// The pipeline and context options `run` and `watch` share.
#[derive(Args)]
struct PipelineArgs {
    /// Pipeline, e.g. `FoldConstant,EliminateCommonSubexpr,[SimplifyExpr,DeadCodeElimination]`
    /// (brackets nest a group); default: the standard pipeline for the opt level.
    #[arg(long)]
    passes: Option<String>,
    /// Optimization level: passes with a higher opt level are skipped by pipelines [default: 2].
    #[arg(short = 'O', long = "opt-level", value_parser = clap::value_parser!(u32).range(0..=3))]
    opt_level: Option<u32>,
    /// Never run this pass (beats --require). Repeatable.
    #[arg(long = "disable", value_name = "NAME")]
    disable: Vec<String>,
    /// Run this pass whatever the opt level. Repeatable.
    #[arg(long = "require", value_name = "NAME")]
    require: Vec<String>,
    /// Set a config key (`passel configs` lists them), e.g. `--config testing.immutable_module=true`.
    #[arg(long = "config", value_name = "KEY=VALUE")]
    config: Vec<String>,
    /// Worker threads for function passes (1 = serial; default: all cores).
    #[arg(short = 'j', long = "threads", value_parser = clap::value_parser!(u64).range(1..=MAX_THREADS as u64))]
    threads: Option<u64>,
}

impl PipelineArgs {
    /// The pipeline to run and a context builder with every option but instruments applied.
    fn pipeline_and_context(&self) -> Result<(Sequential, PassContextBuilder), String> {
        let pipeline = match &self.passes {
            Some(text) => parse_pipeline(text).map_err(|e| e.to_string())?,
            None => passel_passes::default_pipeline(self.opt_level()),
        };
        let mut builder = PassContext::builder().opt_level(self.opt_level());
        for name in &self.disable {
            builder = builder.disable(&resolve_pass_name(name)?);
        }
        for name in &self.require {
            builder = builder.require(&resolve_pass_name(name)?);
        }
        for entry in &self.config {
            let (key, value) = parse_config_assignment(entry).map_err(|e| e.to_string())?;
            builder = builder.config(&key, value);
        }
        if let Some(n) = self.threads {
            builder = builder.num_threads(n as usize);
        }
        Ok((pipeline, builder))
    }

    fn opt_level(&self) -> u32 {
        self.opt_level.unwrap_or(2)
    }

    /// The options a crash reproducer's header records (pass names in their registry spelling).
    fn reproducer_settings(&self) -> Result<debug::reproducer::Settings, String> {
        let resolve = |names: &[String]| names.iter().map(|n| resolve_pass_name(n)).collect::<Result<Vec<_>, _>>();
        Ok(debug::reproducer::Settings {
            opt_level: self.opt_level(),
            require: resolve(&self.require)?,
            disable: resolve(&self.disable)?,
            config: self.config.iter().map(|c| c.trim().to_string()).collect(),
        })
    }

    /// Fills every option not given on the command line from a reproducer header's.
    fn fill_from_header(&mut self, passes: Option<String>, header: debug::reproducer::Settings) {
        self.passes = self.passes.take().or(passes);
        self.opt_level = self.opt_level.or(Some(header.opt_level));
        for (mine, theirs) in [
            (&mut self.require, header.require),
            (&mut self.disable, header.disable),
            (&mut self.config, header.config),
        ] {
            if mine.is_empty() {
                *mine = theirs;
            }
        }
    }
}

#[derive(Args)]
struct RunArgs {
    /// The .pir file ("-" for stdin) or .onnx model.
    file: PathBuf,
    #[command(flatten)]
    shapes: onnx::InputShapeArgs,
    #[command(flatten)]
    pipeline: PipelineArgs,
    /// Print a timing tree of every pass to stderr.
    #[arg(long)]
    timing: bool,
    /// Print the module to stderr before this pass. Repeatable; `all` for every pass.
    #[arg(long = "print-ir-before", value_name = "NAME")]
    print_ir_before: Vec<String>,
    /// Print the module to stderr after this pass. Repeatable; `all` for every pass.
    #[arg(long = "print-ir-after", value_name = "NAME")]
    print_ir_after: Vec<String>,
    /// Print to stderr, after every pass that changed the module, the functions it changed
    /// (header: `PrintIR(after PASS, changed: @f, @g; removed: @h):`).
    #[arg(long)]
    print_ir_after_change: bool,
    /// Write the module after each pass to DIR/NNN_PASS.pir (NNN counts the passes from 000,
    /// PASS is the pass name).
    #[arg(long, value_name = "DIR")]
    dump_ir: Option<PathBuf>,
    /// Write a Chrome trace (JSON, open in Perfetto) of every per-function task, one track per
    /// worker thread.
    #[arg(long, value_name = "FILE")]
    trace: Option<PathBuf>,
    /// Write the result here instead of stdout. -o, --trace, --stats-json and --reproducer must
    /// name different files.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: Option<PathBuf>,
    #[command(flatten)]
    cache: passel_harness::cache::CacheArgs,
    #[command(flatten)]
    debug: DebugArgs,
}

/// `passel run`'s pipeline debugging options (README: "Debugging a pipeline"). Each gives the
/// same output at any thread count.
#[derive(Args)]
struct DebugArgs {
    /// Count pass statistics (FoldConstant: calls folded, bytes materialized; DeadCodeElimination:
    /// bindings removed, functions removed; …) and print their totals to stderr after the run,
    /// sorted by pass, then counter. Counters that stayed 0 are not shown.
    #[arg(long)]
    stats: bool,
    /// Write the statistic totals as JSON (`{"PASS": {"counter": N}}`) to FILE.
    #[arg(long = "stats-json", value_name = "FILE")]
    stats_json: Option<PathBuf>,
    /// Run only the first N optional pass executions, counted per (function pass, function) and
    /// per module pass call in the serial order (the same at any -j), and print
    /// `BISECT: running pass (K) NAME on @func` / `BISECT: NOT running …` to stderr. Required
    /// passes (--require, and opt level 0 passes such as InferType) always run, unnumbered.
    #[arg(long = "opt-bisect-limit", value_name = "N")]
    opt_bisect_limit: Option<u64>,
    /// With --print-ir-after-change, print the whole module instead of the changed functions
    /// (MLIR's module scope).
    #[arg(long)]
    print_ir_module_scope: bool,
    /// When a pass fails or panics, print its input module to stderr (innermost failing pass).
    #[arg(long)]
    print_ir_after_failure: bool,
    /// Print only this function in every --print-ir-* output (`@name` or `name`). Repeatable.
    /// A name no function of the input has draws a warning (a pass may still create it).
    #[arg(long = "print-ir-filter", value_name = "@NAME")]
    print_ir_filter: Vec<String>,
    /// After every pass that changed the module, print a unified diff of each function it
    /// changed, added or removed to stderr.
    #[arg(long)]
    print_ir_diff: bool,
    /// When a pass fails (returns an error, panics, or reports an error diagnostic), write a crash
    /// reproducer to FILE: one .pir file holding the failing pass's input — cut down to the
    /// failing function and the functions it references when a function pass failed on one
    /// function — under a header line with the pipeline from the failing pass on, -O, --require,
    /// --disable and --config. `passel run FILE` replays it (options given on that command line
    /// win over the header's). The file is the same at any -j; nothing is written when no pass
    /// fails. Runs the pipeline pass by pass (no fusion).
    #[arg(long, value_name = "FILE", conflicts_with = "opt_bisect_limit")]
    reproducer: Option<PathBuf>,
    /// With --reproducer, the header's pipeline is the failing pass alone (MLIR's local
    /// reproducer) instead of the failing pass and every pass after it.
    #[arg(long, requires = "reproducer")]
    reproducer_local: bool,
    /// Verify the IR after every pass and fail naming the first pass whose output does not
    /// verify (the function and the verifier's errors); IR that was already broken when a pass
    /// got it is not blamed on that pass. Same as `--config testing.verify_each=true` (and an
    /// error together with `--config testing.verify_each=false`); function passes then run pass
    /// by pass (no fusion).
    #[arg(long)]
    verify_each: bool,
}

#[derive(Args)]
struct BisectArgs {
    /// The .pir file or .onnx model.
    file: PathBuf,
    #[command(flatten)]
    shapes: onnx::InputShapeArgs,
    #[command(flatten)]
    pipeline: PipelineArgs,
    /// Shell command that checks an output file (passed as its last argument); a nonzero exit
    /// means the output is bad. Must not be empty.
    #[arg(long, value_name = "CMD")]
    check: String,
}

fn bisect(console: &Console, args: BisectArgs) -> ExitCode {
    // `sh -c ' "$1"'` would run the output file itself as the command.
    if args.check.trim().is_empty() {
        return console.error("--check is empty: give a shell command that checks the output file (exit 0 = good)");
    }
    let (module, _) = match load(console, &args.file, &args.shapes) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let res = (|| -> Result<String, String> {
        let (pipeline, _) = args.pipeline.pipeline_and_context()?;
        let builder = || args.pipeline.pipeline_and_context().map(|(_, b)| b).unwrap_or_default();
        let full = debug::bisect::run_with_limit(&module, &pipeline, builder, u64::MAX)?;
        if let Err(e) = &full.output {
            // A failure is not a bad output for the check to find: it names its pass already.
            return Err(format!("the pipeline fails with all {} executions: {e}", full.executions));
        }
        // Outputs go to a fresh private directory (mode 0700, random name, removed on drop),
        // and each is created anew there: nobody else can plant a file or symlink in it.
        let dir = tempfile::Builder::new()
            .prefix("passel-bisect-")
            .tempdir()
            .map_err(|e| format!("cannot create a temporary directory in {}: {e}", std::env::temp_dir().display()))?;
        let out_path = dir.path().join("output.pir");
        let mut fails = |limit: u64| -> Result<bool, String> {
            let run = debug::bisect::run_with_limit(&module, &pipeline, builder, limit)?;
            let text = run.output.unwrap_or_else(|e| format!("// pipeline failed: {e}\n"));
            debug::bisect::write_new(&out_path, &text)
                .map_err(|e| format!("cannot write {}: {e}", out_path.display()))?;
            let status = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!("{} \"$1\"", args.check))
                .arg("sh")
                .arg(&out_path)
                .status()
                .map_err(|e| format!("cannot run the check: {e}"))?;
            let _ = console.err(&format!("limit {limit}: {}\n", if status.success() { "good" } else { "bad" }));
            Ok(!status.success())
        };
        let found = debug::bisect::first_failing(full.executions, &mut fails);
        dir.close().map_err(|e| format!("cannot remove the temporary directory: {e}"))?;
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
        Err(e) => console.error(&e),
    }
}

#[derive(Args)]
struct EvalArgs {
    /// The .pir file or .onnx model.
    file: PathBuf,
    #[command(flatten)]
    shapes: onnx::InputShapeArgs,
    /// An input: `NAME=FILE.npy` for the parameter NAME (an ONNX input's own name, e.g.
    /// `gpu_0/data_0`, or its printed spelling `gpu_0_data_0`), or `FILE.npy` for the next
    /// parameter in order. Repeatable; parameters without a file get seeded random values.
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    inputs: Vec<String>,
    /// Seed of the random inputs (floats uniform in [-1, 1), integers in [-5, 5]).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Write each output as DIR/output_K.npy.
    #[arg(long = "output-dir", value_name = "DIR")]
    output_dir: Option<PathBuf>,
    /// Compare each output with EXPECTED_DIR/output_K.npy (exit 1 on a mismatch).
    #[arg(long, value_name = "EXPECTED_DIR")]
    compare: Option<PathBuf>,
    /// Relative tolerance of --compare (ONNX's backend tests use 1e-3).
    #[arg(long, default_value_t = 1e-3)]
    rtol: f64,
    /// Absolute tolerance of --compare (ONNX's backend tests use 1e-7).
    #[arg(long, default_value_t = 1e-7)]
    atol: f64,
    /// The entry function.
    #[arg(long, default_value = "main")]
    function: String,
}

#[derive(Args)]
struct ConformanceArgs {
    /// The data folder (default target/onnx-data, as scripts/onnx_data.sh writes it).
    #[arg(default_value = "target/onnx-data")]
    dir: PathBuf,
    /// The out-of-scope list: `case reason…` per line.
    #[arg(long, default_value = "docs/onnx-out-of-scope.txt")]
    out_of_scope: PathBuf,
    /// Only cases whose name contains this text.
    #[arg(long)]
    filter: Option<String>,
}

fn eval_cmd(console: &Console, args: EvalArgs) -> ExitCode {
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
    let opts = passel_harness::eval::EvalOptions {
        function: args.function,
        inputs,
        seed: args.seed,
        output_dir: args.output_dir,
        compare: args.compare,
        rtol: args.rtol,
        atol: args.atol,
    };
    match passel_harness::eval::eval(&module, &opts) {
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

fn conformance(console: &Console, args: ConformanceArgs) -> ExitCode {
    if !args.dir.is_dir() {
        return console.error(&format!("{} does not exist: run scripts/onnx_data.sh first", args.dir.display()));
    }
    let oos = match passel_harness::conformance::read_out_of_scope(&args.out_of_scope) {
        Ok(o) => o,
        Err(e) => return console.error(&e.to_string()),
    };
    let (report, ok) = passel_harness::conformance::run_all(&args.dir, &oos, args.filter.as_deref());
    let code = write_stdout(console, &report);
    if ok {
        code
    } else {
        console.exit_code(ExitCode::FAILURE)
    }
}

#[derive(Args)]
struct WatchArgs {
    /// The .pir file or .onnx model.
    file: PathBuf,
    #[command(flatten)]
    shapes: onnx::InputShapeArgs,
    #[command(flatten)]
    pipeline: PipelineArgs,
    /// Stop after this many runs (for scripts and tests).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    max_runs: Option<u64>,
    /// Write the optimised module here after each successful run.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    output: Option<PathBuf>,
    /// Keep no intermediate functions between runs (about 0.7 KB per function instead of
    /// 13 KB on a 50-op chain). Body edits recompute the same functions at up to twice the
    /// cost; adding, removing or renaming a function re-runs the whole pipeline.
    #[arg(long)]
    lean: bool,
}

fn watch(console: &Console, args: WatchArgs) -> ExitCode {
    let res = (|| -> Result<(), String> {
        check_input_shapes(&args.shapes)?;
        let (pipeline, builder) = args.pipeline.pipeline_and_context()?;
        let ctx = builder.build().map_err(|e| e.to_string())?;
        if args.pipeline.passes.is_some() || !args.pipeline.disable.is_empty() {
            for note in passel_harness::notes::pipeline_notes(&pipeline, &ctx, args.pipeline.passes.is_some()) {
                console.err(&format!("note: {note}\n")).map_err(|_| "cannot write to stderr".to_string())?;
            }
        }
        let opts = passel_harness::watch::WatchOptions {
            file: args.file.clone(),
            pipeline,
            ctx,
            max_runs: args.max_runs.map(|n| n as usize),
            output: args.output.clone(),
            memory: if args.lean { MemoryMode::Lean } else { MemoryMode::Full },
            import: args.shapes.options().map_err(|e| e.to_string())?,
        };
        passel_harness::watch::watch(&opts, &mut console.writer(Stream::Stdout)).map_err(|e| e.to_string())
    })();
    match res {
        Ok(()) => console.exit_code(ExitCode::SUCCESS),
        Err(message) => console.error(&message),
    }
}

fn read_source(path: &PathBuf) -> Result<String, String> {
    let (name, bytes) = if path.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::Read::read_to_end(&mut std::io::stdin(), &mut bytes).map_err(|e| format!("cannot read stdin: {e}"))?;
        ("<stdin>".to_string(), bytes)
    } else {
        passel_harness::files::source_file(path)?;
        let bytes = std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        (path.display().to_string(), bytes)
    };
    diag::utf8(&name, &bytes)?;
    // Checked just above: the bytes are UTF-8, so this takes them without a copy.
    String::from_utf8(bytes).map_err(|e| e.to_string())
}

/// Parses and verifies `path` (or imports it when it is a `.onnx` model), printing rendered
/// errors to stderr; returns the module and its source text (empty for an imported model).
fn load(console: &Console, path: &PathBuf, shapes: &onnx::InputShapeArgs) -> Result<(Module, String), ExitCode> {
    check_input_shapes(shapes).map_err(|e| console.error(&e))?;
    if onnx::is_onnx(path) {
        return shapes
            .options()
            .and_then(|o| onnx::import_onnx(path, &o))
            .map(|m| (m, String::new()))
            .map_err(|e| console.error(&e.to_string()));
    }
    let src = read_source(path).map_err(|e| console.error(&e))?;
    let name = path.display().to_string();
    let module = parse_module(&src).map_err(|errors| {
        let _ = console.err(&diag::render_parse_errors(&name, &src, &errors));
        console.exit_code(ExitCode::FAILURE)
    })?;
    verify_module(&module).map_err(|errors| {
        let _ = console.err(&diag::render(&name, &src, &diag::verify_errors(&errors)));
        console.exit_code(ExitCode::FAILURE)
    })?;
    Ok((module, src))
}

/// `passel check`: parses, verifies and type-checks (InferType's inference, so every type
/// error `run` would report is reported here too, with its location).
fn check(console: &Console, path: &PathBuf, shapes: &onnx::InputShapeArgs) -> ExitCode {
    let (module, src) = match load(console, path, shapes) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let (typed, type_errors) = passel_passes::infer_module(&module);
    if !type_errors.is_empty() {
        let _ = console.err(&diag::render(&path.display().to_string(), &src, &diag::type_errors(&type_errors)));
        return console.exit_code(ExitCode::FAILURE);
    }
    let _ = console.err(&format!("{}: ok ({} functions)\n", path.display(), module.len()));
    // The process ends right here, and the modules hold memory only (no files or buffers to
    // flush): freeing their million nodes one allocation at a time would only add time (1.5%
    // of `check` on a 700k-binding file). The OS reclaims it.
    std::mem::forget(module);
    std::mem::forget(typed);
    console.exit_code(ExitCode::SUCCESS)
}

fn write_stdout(console: &Console, text: &str) -> ExitCode {
    let _ = console.out(text);
    console.exit_code(ExitCode::SUCCESS)
}

fn run(console: &Console, args: RunArgs) -> ExitCode {
    match try_run(console, args) {
        Ok(code) => console.exit_code(code),
        Err(message) => console.error(&message),
    }
}

fn try_run(console: &Console, mut args: RunArgs) -> Result<ExitCode, String> {
    check_distinct_outputs(&[
        ("-o", &args.output),
        ("--trace", &args.trace),
        ("--stats-json", &args.debug.stats_json),
        ("--reproducer", &args.debug.reproducer),
    ])?;
    let (module, src) = match load(console, &args.file, &args.shapes) {
        Ok(loaded) => loaded,
        Err(code) => return Ok(code),
    };
    for name in &args.debug.print_ir_filter {
        // A warning, not an error: a pass may create the function (LambdaLift, FuseOps).
        let name = name.trim_start_matches('@');
        if module.get(name).is_none() {
            let hint = passel_engine::suggest(name, module.iter().map(|(n, _)| n))
                .first()
                .map(|s| format!(" (did you mean `@{s}`?)"))
                .unwrap_or_default();
            let warning = format!(
                "warning: --print-ir-filter @{name} matches no function of {}{hint}: only a function a pass creates can match it\n",
                args.file.display()
            );
            if console.err(&warning).is_err() {
                return Ok(console.exit_code(ExitCode::FAILURE));
            }
        }
    }
    if let Some(words) = debug::reproducer::header_args(&src) {
        let bad = |e: String| format!("{}: {e}", args.file.display());
        let (passes, header) = debug::reproducer::parse_header(&words.map_err(bad)?).map_err(bad)?;
        args.pipeline.fill_from_header(passes, header);
        let note = format!(
            "note: {} is a crash reproducer: running it with its header's options (options given here win)\n",
            args.file.display()
        );
        if console.err(&note).is_err() {
            return Ok(console.exit_code(ExitCode::FAILURE));
        }
    }
    if args.debug.verify_each {
        for entry in &args.pipeline.config {
            if let Ok((key, ConfigValue::Bool(false))) = parse_config_assignment(entry) {
                if key == VERIFY_EACH {
                    return Err(format!("--verify-each contradicts --config {}", entry.trim()));
                }
            }
        }
        // As a config entry, so that a crash reproducer's header records it.
        args.pipeline.config.push(format!("{VERIFY_EACH}=true"));
    }
    let (pipeline, mut builder) = args.pipeline.pipeline_and_context()?;
    let timing = Arc::new(PassTimingInstrument::new());
    if args.timing {
        builder = builder.instrument(timing.clone());
    }
    let d = &args.debug;
    if !args.print_ir_before.is_empty()
        || !args.print_ir_after.is_empty()
        || args.print_ir_after_change
        || d.print_ir_after_failure
        || d.print_ir_diff
    {
        let mut p = PrintIrInstrument::new().to_sink(console.stderr_sink());
        if !d.print_ir_module_scope {
            p = p.changed_functions();
        }
        if d.print_ir_after_failure {
            p = p.after_failure();
        }
        if d.print_ir_diff {
            p = p.diff();
        }
        for name in &d.print_ir_filter {
            p = p.filter(name);
        }
        for name in &args.print_ir_before {
            p = if name == "all" { p.before_all() } else { p.before(&resolve_pass_name(name)?) };
        }
        for name in &args.print_ir_after {
            p = if name == "all" { p.after_all() } else { p.after(&resolve_pass_name(name)?) };
        }
        if args.print_ir_after_change {
            p = p.after_change();
        }
        builder = builder.instrument(Arc::new(p));
    }
    if let Some(dir) = &args.dump_ir {
        builder = builder.instrument(Arc::new(DumpIrInstrument::new(dir)));
    }
    let mut trace_rx = None;
    if args.trace.is_some() {
        let (tracer, rx) = trace_channel();
        builder = builder.trace(tracer);
        trace_rx = Some(rx);
    }
    if args.debug.stats || args.debug.stats_json.is_some() {
        builder = builder.statistics(true);
    }
    if let Some(limit) = args.debug.opt_bisect_limit {
        builder = builder.opt_bisect(Arc::new(OptBisect::new(limit, console.stderr_sink())));
    }
    let reproducer = Arc::new(ReproducerInstrument::new());
    if args.debug.reproducer.is_some() {
        builder = builder.instrument(reproducer.clone());
    }
    let ctx = builder.build().map_err(|e| e.to_string())?;
    if args.pipeline.passes.is_some() || !args.pipeline.disable.is_empty() {
        for note in passel_harness::notes::pipeline_notes(&pipeline, &ctx, args.pipeline.passes.is_some()) {
            if console.err(&format!("note: {note}\n")).is_err() {
                return Ok(console.exit_code(ExitCode::FAILURE));
            }
        }
    }
    let cache_dir = args.cache.dir_for(&ctx, args.trace.is_some())?;
    let (res, report, cached_diags) = if let Some(dir) = &cache_dir {
        let run = passel_harness::cache::run_cached(&pipeline, &ctx, &module, dir, args.cache.max_size()?)?;
        if console.err(&run.note).is_err() {
            return Ok(console.exit_code(ExitCode::FAILURE));
        }
        (run.result, None, Some(run.diagnostics))
    } else {
        let (res, report) = ctx
            .scope(|| {
                let res = pipeline.run(module, &ctx);
                let report = if args.timing { timing.render().ok() } else { None };
                (res, report)
            })
            .map_err(|e| e.to_string())?;
        (res, report, None)
    };
    let mut reproducer_failed = false;
    if let (Some(path), Some(failure)) = (&args.debug.reproducer, reproducer.failure()) {
        if let Err(e) = write_reproducer(console, path, &failure, &res, &pipeline, &ctx, &args) {
            if console.err(&format!("error: {e}\n")).is_err() {
                return Ok(console.exit_code(ExitCode::FAILURE));
            }
            reproducer_failed = true;
        }
    }
    if let (Some(path), Some(rx)) = (&args.trace, trace_rx) {
        // Every task has finished, so every event is already in the channel.
        let events: Vec<_> = rx.try_iter().collect();
        std::fs::write(path, chrome_trace_json(&events))
            .map_err(|e| format!("cannot write trace {}: {e}", path.display()))?;
    }
    if let Some(report) = report {
        if console.err(&report).is_err() {
            return Ok(console.exit_code(ExitCode::FAILURE));
        }
    }
    let diags = cached_diags.unwrap_or_else(|| ctx.diagnostics().take());
    if !diags.is_empty() {
        let rendered = diag::render(&args.file.display().to_string(), &src, &diag::pass_diagnostics(&diags));
        if console.err(&rendered).is_err() {
            return Ok(console.exit_code(ExitCode::FAILURE));
        }
    }
    let stats = ctx.take_statistics();
    if args.debug.stats && console.err(&debug::stats::table(&stats)).is_err() {
        return Ok(console.exit_code(ExitCode::FAILURE));
    }
    if let Some(path) = &args.debug.stats_json {
        std::fs::write(path, debug::stats::json(&stats))
            .map_err(|e| format!("cannot write statistics {}: {e}", path.display()))?;
    }
    let module = res.map_err(|e| e.to_string())?;
    let text = print_module(&module);
    match &args.output {
        Some(path) => std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?,
        None => {
            if console.out(&text).is_err() {
                return Ok(console.exit_code(ExitCode::FAILURE));
            }
        }
    }
    let failed = reproducer_failed || diags.iter().any(|d| d.severity == Severity::Error);
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Builds the crash reproducer of `failure` and writes it to `path`, with a note on stderr.
fn write_reproducer(
    console: &Console,
    path: &PathBuf,
    failure: &PassFailure,
    res: &Result<Module, PassError>,
    pipeline: &Sequential,
    ctx: &PassContext,
    args: &RunArgs,
) -> Result<(), String> {
    let settings = args.pipeline.reproducer_settings()?;
    let r = debug::reproducer::reproducer(
        failure,
        res.as_ref().err(),
        pipeline,
        ctx,
        &settings,
        args.debug.reproducer_local,
    )?;
    std::fs::write(path, &r.text).map_err(|e| format!("cannot write reproducer {}: {e}", path.display()))?;
    let on = r.function.as_ref().map(|f| format!(" on @{f}")).unwrap_or_default();
    let mut note = format!(
        "note: wrote crash reproducer {} (pass {}{on}; {} of {} functions; --passes={}); replay: passel run {}\n",
        path.display(),
        r.pass,
        r.functions.0,
        r.functions.1,
        r.passes,
        path.display()
    );
    if !r.reproduces {
        note.push_str("warning: replaying the reproducer does not fail the same way\n");
    }
    console.err(&note).map_err(|_| "cannot write to stderr".to_string())
}

/// Resolves a pass name in either spelling to its registry name, with suggestions on error.
fn resolve_pass_name(name: &str) -> Result<String, String> {
    get_pass(name).map(|p| p.info().name.clone()).map_err(|e| e.to_string())
}

fn list_passes_text() -> String {
    let mut out = String::from("name                      kind        opt  runs as                   required\n");
    for p in list_passes() {
        out.push_str(&format!(
            "{:<25} {:<11} {:<4} {:<25} {}\n",
            p.name,
            format!("{:?}", p.kind).to_lowercase(),
            p.opt_level,
            p.runs_as.to_string(),
            p.required.join(",")
        ));
    }
    out.push_str(
        "\n`runs as`: fused passes run together on each function in one task; a barrier sees the whole\n\
         module between stages (see docs/parallel.md). `testing.*` passes are testing-only: they fail on\n\
         functions marked #[testing.fail=\"error\"|\"panic\"|\"diagnostic\"] (to try --reproducer).\n",
    );
    out
}

fn list_configs_text() -> String {
    let mut out = String::new();
    for c in list_configs() {
        out.push_str(&format!("{:<32} {:<6} {}\n", c.key, c.ty.name(), c.doc_with_range()));
    }
    out
}

/// Counts live heap bytes so `passel bench` can report peak heap per row.
#[global_allocator]
static HEAP: bench::CountingAlloc = bench::CountingAlloc;

fn bench(console: &Console, args: bench::BenchArgs) -> ExitCode {
    match bench::run_cli(&args, Some(&HEAP), console) {
        Ok(table) => write_stdout(console, &table),
        Err(e) => console.error(&e),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let console = Console::new();
    let console = &console;
    match cli.command {
        Command::Check { file, shapes } => check(console, &file, &shapes),
        Command::Fmt { file, shapes } => match load(console, &file, &shapes) {
            Ok((m, _)) => write_stdout(console, &print_module(&m)),
            Err(code) => code,
        },
        Command::Eval(args) => eval_cmd(console, args),
        Command::Conformance(args) => conformance(console, args),
        Command::Import(args) => match check_input_shapes(&args.shapes).and_then(|()| onnx::run_import(&args)) {
            Ok(Some(text)) => write_stdout(console, &text),
            Ok(None) => console.exit_code(ExitCode::SUCCESS),
            Err(e) => console.error(&e.to_string()),
        },
        Command::Gen(cmd) => match gen::cli::check_size(&cmd, gen::cli::memory_limit()) {
            Ok(()) => write_stdout(console, &print_module(&gen::cli::generate(&cmd))),
            Err(e) => console.error(&e),
        },
        Command::Run(args) => run(console, *args),
        Command::Bench(args) => bench(console, args),
        Command::Watch(args) => watch(console, args),
        Command::Bisect(args) => bisect(console, *args),
        Command::Cache(cmd) => match passel_harness::cache::cache_command(&cmd) {
            Ok(text) => write_stdout(console, &text),
            Err(e) => console.error(&e),
        },
        Command::Passes => write_stdout(console, &list_passes_text()),
        Command::Configs => write_stdout(console, &list_configs_text()),
    }
}
