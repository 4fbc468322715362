//! `passel run`: a pipeline over one file, with the pipeline debugging options (README:
//! "Debugging a pipeline"); a crash reproducer replays with its header's options.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::Args;
use passel_engine::ir::{print_module, Module};
use passel_engine::transform::{
    chrome_trace_json, parse_config_assignment, trace_channel, ConfigValue, DumpIrInstrument, OptBisect, Pass,
    PassContext, PassError, PassFailure, PassTimingInstrument, PrintIrInstrument, ReproducerInstrument, Sequential,
    Severity, VERIFY_EACH,
};

use crate::args::{check_distinct_outputs, resolve_pass_name, PipelineArgs, ThreadArgs};
use crate::cmd::CommandError;
use crate::console::Console;
use crate::files::FileError;
use crate::{debug, diag, onnx};

#[derive(Args)]
pub struct RunArgs {
    /// The .pir file ("-" for stdin) or .onnx model.
    pub file: PathBuf,
    #[command(flatten)]
    pub shapes: onnx::InputShapeArgs,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    #[command(flatten)]
    pub threads: ThreadArgs,
    /// Print a timing tree of every pass to stderr.
    #[arg(long)]
    pub timing: bool,
    /// Print the module to stderr before this pass. Repeatable; `all` for every pass.
    #[arg(long = "print-ir-before", value_name = "NAME")]
    pub print_ir_before: Vec<String>,
    /// Print the module to stderr after this pass. Repeatable; `all` for every pass.
    #[arg(long = "print-ir-after", value_name = "NAME")]
    pub print_ir_after: Vec<String>,
    /// Print to stderr, after every pass that changed the module, the functions it changed
    /// (header: `PrintIR(after PASS, changed: @f, @g; removed: @h):`).
    #[arg(long)]
    pub print_ir_after_change: bool,
    /// Write the module after each pass to DIR/NNN_PASS.pir (NNN counts the passes from 000,
    /// PASS is the pass name).
    #[arg(long, value_name = "DIR")]
    pub dump_ir: Option<PathBuf>,
    /// Write a Chrome trace (JSON, open in Perfetto) of every per-function task, one track per
    /// worker thread.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Write the result here instead of stdout, in binary form when OUT ends in `.pirb`. -o,
    /// --trace, --stats-json and --reproducer must name different files.
    #[arg(short = 'o', long = "output", value_name = "OUT")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub cache: crate::cache::CacheArgs,
    /// With a cache, write to FILE which functions each function stage (and which PrimFuncs each
    /// PrimFunc stage) recomputed (the others came from the cache): one line per stage,
    /// `STAGE<TAB>@f @g …`, in module order (empty when a run entry answered).
    #[arg(long = "cache-report", value_name = "FILE")]
    pub cache_report: Option<PathBuf>,
    #[command(flatten)]
    pub debug: DebugArgs,
}

/// `passel run`'s pipeline debugging options (README: "Debugging a pipeline"). Each gives the
/// same output at any thread count.
#[derive(Args)]
pub struct DebugArgs {
    /// Count pass statistics (FoldConstant: calls folded, bytes materialized; DeadCodeElimination:
    /// bindings removed, functions removed; …) and print their totals to stderr after the run,
    /// sorted by pass, then counter. Counters that stayed 0 are not shown.
    #[arg(long)]
    pub stats: bool,
    /// Write the statistic totals as JSON (`{"PASS": {"counter": N}}`) to FILE.
    #[arg(long = "stats-json", value_name = "FILE")]
    pub stats_json: Option<PathBuf>,
    /// Run only the first N optional pass executions, counted per (function pass, function) and
    /// per module pass call in the serial order (the same at any -j), and print
    /// `BISECT: running pass (K) NAME on @func` / `BISECT: NOT running …` to stderr. Required
    /// passes (--require, and opt level 0 passes such as InferType) always run, unnumbered.
    #[arg(long = "opt-bisect-limit", value_name = "N")]
    pub opt_bisect_limit: Option<u64>,
    /// With --print-ir-after-change, print the whole module instead of the changed functions
    /// (MLIR's module scope).
    #[arg(long)]
    pub print_ir_module_scope: bool,
    /// When a pass fails or panics, print its input module to stderr (innermost failing pass).
    #[arg(long)]
    pub print_ir_after_failure: bool,
    /// Print only this function in every --print-ir-* output (`@name` or `name`). Repeatable.
    /// A name no function of the input has draws a warning (a pass may still create it).
    #[arg(long = "print-ir-filter", value_name = "@NAME")]
    pub print_ir_filter: Vec<String>,
    /// After every pass that changed the module, print a unified diff of each function it
    /// changed, added or removed to stderr.
    #[arg(long)]
    pub print_ir_diff: bool,
    /// When a pass fails (returns an error, panics, or reports an error diagnostic), write a crash
    /// reproducer to FILE: one .pir file holding the failing pass's input — cut down to the
    /// failing function and the functions it references when a function pass failed on one
    /// function — under a header line with the pipeline from the failing pass on, -O, --require,
    /// --disable and --config. `passel run FILE` replays it (options given on that command line
    /// win over the header's). The file is the same at any -j; nothing is written when no pass
    /// fails. Runs the pipeline pass by pass (no fusion).
    #[arg(long, value_name = "FILE", conflicts_with = "opt_bisect_limit")]
    pub reproducer: Option<PathBuf>,
    /// With --reproducer, the header's pipeline is the failing pass alone (MLIR's local
    /// reproducer) instead of the failing pass and every pass after it.
    #[arg(long, requires = "reproducer")]
    pub reproducer_local: bool,
    /// Verify the IR after every pass and fail naming the first pass whose output does not
    /// verify (the function and the verifier's errors); IR that was already broken when a pass
    /// got it is not blamed on that pass. Same as `--config testing.verify_each=true` (and an
    /// error together with `--config testing.verify_each=false`); function passes then run pass
    /// by pass (no fusion).
    #[arg(long)]
    pub verify_each: bool,
}

pub fn run(console: &Console, args: RunArgs) -> ExitCode {
    match try_run(console, args) {
        Ok(code) => console.exit_code(code),
        Err(e) => console.error(&e.to_string()),
    }
}

pub fn try_run(console: &Console, mut args: RunArgs) -> Result<ExitCode, CommandError> {
    check_distinct_outputs(&[
        ("-o", &args.output),
        ("--trace", &args.trace),
        ("--stats-json", &args.debug.stats_json),
        ("--reproducer", &args.debug.reproducer),
        ("--cache-report", &args.cache_report),
    ])?;
    let cache = args.cache.open()?;
    if args.cache_report.is_some() && cache.is_none() {
        return Err(CommandError::ReportWithoutCache);
    }
    let threads = args
        .threads
        .threads
        .map_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()), |n| n as usize);
    // With a cache, a .pir file's text is read first and parsed only when no run entry for it
    // answers (below); anything else is loaded now.
    let mut loaded = None;
    let src = match cache.as_ref().and_then(|_| crate::cache::read_text(&args.file, &args.shapes)) {
        Some(src) => src,
        None => match crate::cache::load(console, &args.file, &args.shapes, cache.as_ref(), threads) {
            Ok((module, src, parsed)) => {
                loaded = Some((module, parsed));
                src
            }
            Err(code) => return Ok(code),
        },
    };
    if !args.debug.print_ir_filter.is_empty() && loaded.is_none() {
        match crate::cache::parse_text(console, &args.file, src.clone(), cache.as_ref(), threads) {
            Ok((module, _, parsed)) => loaded = Some((module, parsed)),
            Err(code) => return Ok(code),
        }
    }
    let filter_module = loaded.as_ref().map(|(m, _)| m);
    for (name, module) in args.debug.print_ir_filter.iter().zip(std::iter::repeat(filter_module).flatten()) {
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
        let file = || args.file.clone();
        let words = words.map_err(|source| CommandError::ReproducerHeader { file: file(), source })?;
        let header = debug::reproducer::parse_header(&words)
            .map_err(|source| CommandError::ReproducerOptions { file: file(), source })?;
        args.pipeline.fill_from(header);
        let note = format!(
            "note: {} is a crash reproducer: running it with its header's options (options given here win)\n",
            args.file.display()
        );
        if console.err(&note).is_err() {
            return Ok(console.exit_code(ExitCode::FAILURE));
        }
    }
    // From here the text serves a cache (its keys and record) and the rendering of diagnostics
    // only. Without a cache, a file's text is not held while the pipeline runs (it is a third
    // of the parsed module's size): it is read again if a diagnostic is shown, and `src` is
    // empty.
    let (src, reread) = match (&cache, crate::cmd::FileStamp::of(&args.file, &src)) {
        (None, Some(stamp)) => {
            // Freed here: a shadowed binding would live to the end of the function.
            drop(src);
            (String::new(), Some(stamp))
        }
        _ => (src, None),
    };
    if args.debug.verify_each {
        for entry in &args.pipeline.config {
            if let Ok((key, ConfigValue::Bool(false))) = parse_config_assignment(entry) {
                if key == VERIFY_EACH {
                    return Err(CommandError::VerifyEachContradicts { entry: entry.trim().to_string() });
                }
            }
        }
        // As a config entry, so that a crash reproducer's header records it.
        args.pipeline.config.push(format!("{VERIFY_EACH}=true"));
    }
    let (pipeline, builder) = args.pipeline.pipeline_and_context()?;
    let mut builder = args.threads.apply(builder);
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
    let ctx = builder.build()?;
    if args.pipeline.names_passes() {
        for note in crate::notes::pipeline_notes(&pipeline, &ctx, args.pipeline.passes.is_some()) {
            if console.err(&format!("note: {note}\n")).is_err() {
                return Ok(console.exit_code(ExitCode::FAILURE));
            }
        }
    }
    let use_cache = args.cache.location_for(&ctx, args.trace.is_some())?.is_some();
    // A run entry: the output of an earlier run of this very text under these options. Not
    // when the run must report statistics (they count the work a run does).
    let stats_wanted = args.debug.stats || args.debug.stats_json.is_some();
    // Nor when the output is a binary module: an entry holds the printed text.
    let binary_output = args.output.as_deref().is_some_and(crate::files::wants_binary);
    let settings = match (&cache, use_cache && !stats_wanted && !binary_output, &loaded) {
        (Some(_), true, None) => Some(args.pipeline.canonical()?.to_words().join("\n")),
        _ => None,
    };
    let run_key = match (&cache, &settings) {
        (Some(c), Some(settings)) => Some(c.run_key(settings, &src)),
        _ => None,
    };
    if let (Some(key), Some(c)) = (&run_key, &cache) {
        if let Some(output) = c.get_run(key) {
            let n = passel_cache::function_texts(&src).map_or(0, |t| t.len());
            let note = format!(
                "cache {}: 0 of {n} functions recomputed; the output of an earlier run of the same text and options reused\n",
                c.label
            );
            return write_cached_output(console, &args, &note, "", &output);
        }
    }
    // The record of the last run on this text's lineage (the same functions under the same
    // options): only what the edits since reach is recomputed (passel-cache's `record.rs`).
    let lineage = match (&settings, &cache) {
        (Some(settings), Some(c)) => c.lineage(settings, &src),
        _ => None,
    };
    if let (Some(key), Some(c), Some(lineage)) = (&run_key, &cache, &lineage) {
        if let Some(hit) = passel_cache::run_from_record(&pipeline, &ctx, c, lineage) {
            c.put_run(key, &hit.output);
            c.trim();
            let report = crate::cache::report(&hit.recomputed);
            return write_cached_output(console, &args, &hit.note, &report, &hit.output);
        }
    }
    let (module, parsed) = match loaded {
        Some(loaded) => loaded,
        None => match crate::cache::parse_text(console, &args.file, src.clone(), cache.as_ref(), threads) {
            Ok((module, _, parsed)) => (module, parsed),
            Err(code) => return Ok(code),
        },
    };
    let mut record = None;
    let (res, report, cached_diags) = if let (true, Some(cache)) = (use_cache, &cache) {
        let mut run = passel_cache::run_cached(&pipeline, &ctx, &module, cache, parsed, lineage.as_ref())?;
        record = run.record.take();
        if console.err(&run.note).is_err() {
            return Ok(console.exit_code(ExitCode::FAILURE));
        }
        if let Some(path) = &args.cache_report {
            std::fs::write(path, crate::cache::report(&run.recomputed)).map_err(|source| CommandError::Report {
                what: "cache report",
                path: path.clone(),
                source,
            })?;
        }
        // The process exits after the output is written: freeing the session's memos one by
        // one would only delay that (a tenth of a warm run on 10k functions).
        std::mem::forget(run.session);
        std::mem::forget(module);
        (run.result, None, Some(run.diagnostics))
    } else {
        let (res, report) = ctx.scope(|| {
            let res = pipeline.run(module, &ctx);
            let report = if args.timing { timing.render().ok() } else { None };
            (res, report)
        })?;
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
        std::fs::write(path, chrome_trace_json(&events)).map_err(|source| CommandError::Report {
            what: "trace",
            path: path.clone(),
            source,
        })?;
    }
    if let Some(report) = report {
        if console.err(&report).is_err() {
            return Ok(console.exit_code(ExitCode::FAILURE));
        }
    }
    let diags = cached_diags.unwrap_or_else(|| ctx.diagnostics().take());
    if !diags.is_empty() {
        let rendered = crate::cmd::render_again(&args.file, &src, reread.as_ref(), diag::pass_diagnostics(&diags));
        if console.err(&rendered).is_err() {
            return Ok(console.exit_code(ExitCode::FAILURE));
        }
    }
    let stats = ctx.take_statistics();
    if args.debug.stats && console.err(&debug::stats::table(&stats)).is_err() {
        return Ok(console.exit_code(ExitCode::FAILURE));
    }
    if let Some(path) = &args.debug.stats_json {
        std::fs::write(path, debug::stats::json(&stats)).map_err(|source| CommandError::Report {
            what: "statistics",
            path: path.clone(),
            source,
        })?;
    }
    let module = res?;
    // `-o OUT.pirb` writes the binary form, which needs no text.
    let text = if binary_output { String::new() } else { print_module(&module) };
    if let (Some(key), Some(c), true) = (&run_key, &cache, diags.is_empty()) {
        c.put_run(key, &text);
        if let (Some(lineage), Some(record)) = (&lineage, &record) {
            c.keep_record(lineage, record, &module, &text);
        }
        c.trim();
    }
    match &args.output {
        Some(path) => crate::files::write_module(path, &module, Some(text.as_str()).filter(|_| !binary_output))?,
        None => {
            if console.out(&text).is_err() {
                return Ok(console.exit_code(ExitCode::FAILURE));
            }
        }
    }
    // As with the session above: the process exits next, so the module is not freed node by node.
    std::mem::forget(module);
    let failed = reproducer_failed || diags.iter().any(|d| d.severity == Severity::Error);
    Ok(if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Finishes a run that the cache answered without running the whole module (a run entry, or
/// a run from a record): the note, the `--cache-report` and the output.
fn write_cached_output(
    console: &Console,
    args: &RunArgs,
    note: &str,
    report: &str,
    output: &str,
) -> Result<ExitCode, CommandError> {
    if console.err(note).is_err() {
        return Ok(console.exit_code(ExitCode::FAILURE));
    }
    if let Some(path) = &args.cache_report {
        std::fs::write(path, report).map_err(|source| CommandError::Report {
            what: "cache report",
            path: path.clone(),
            source,
        })?;
    }
    match &args.output {
        Some(path) => std::fs::write(path, output).map_err(|source| FileError::Write { path: path.clone(), source })?,
        None => {
            if console.out(output).is_err() {
                return Ok(console.exit_code(ExitCode::FAILURE));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// Builds the crash reproducer of `failure` and writes it to `path`, with a note on stderr.
pub fn write_reproducer(
    console: &Console,
    path: &PathBuf,
    failure: &PassFailure,
    res: &Result<Module, PassError>,
    pipeline: &Sequential,
    ctx: &PassContext,
    args: &RunArgs,
) -> Result<(), CommandError> {
    let options = args.pipeline.canonical()?;
    let r = debug::reproducer::reproducer(
        failure,
        res.as_ref().err(),
        pipeline,
        ctx,
        &options,
        args.debug.reproducer_local,
    )?;
    std::fs::write(path, &r.text).map_err(|source| CommandError::Report {
        what: "reproducer",
        path: path.clone(),
        source,
    })?;
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
    console.err(&note).map_err(|_| CommandError::Stderr)
}
