//! The `passel bench` command line: arguments, the progress bar, and writing the report, for
//! a generated workload or (`--model`) an ONNX model.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use super::cache::cache_rows;
use super::model::{run_model_bench, ModelBench};
use super::{
    count_bindings, run_bench, BenchConfig, BenchError, BenchReport, BenchRow, CacheSize, CountingAlloc, Machine,
    ModelInfo, ThreadListError,
};
use crate::args::PipelineArgs;
use crate::console::Console;
use crate::files::FileError;
use crate::{gen, onnx};

/// The default pipeline of `passel bench`.
pub const DEFAULT_PIPELINE: &str = "FoldConstant,EliminateCommonSubexpr,DeadCodeElimination,SimplifyExpr";

/// Arguments of `passel bench`.
#[derive(Args, Debug)]
#[command(mut_arg("passes", |a| a.help(
    "Pipeline to run (default: with --model the standard pipeline of the opt level, else the bench pipeline \
     `FoldConstant,EliminateCommonSubexpr,DeadCodeElimination,SimplifyExpr`)"
)))]
pub struct BenchArgs {
    /// Workload kind (`passel gen KIND --help` describes each).
    #[arg(long, default_value = "chain", value_parser = clap::builder::PossibleValuesParser::new(gen::KINDS))]
    pub workload: String,
    /// About this many functions in the workload (mlp and cnn: layers or blocks + @main;
    /// transformer: three per layer + @main).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub functions: u64,
    /// Operations per function of the chain workload (default 50; only with `--workload chain`).
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub ops: Option<u64>,
    /// Thread counts for the parallel rows, comma-separated (default: 2, 4, … up to the cores).
    #[arg(long, value_name = "LIST", value_parser = parse_threads)]
    pub threads: Option<ThreadList>,
    /// Bench this ONNX model instead of a generated workload: rows `import` (map, decode,
    /// verify), `serial` and `parallel` (the pipeline), `print` (the output as .pir text), and
    /// peak heap and peak RSS of import + the serial run against the model's weight bytes.
    /// No session rows.
    #[arg(long, value_name = "FILE.onnx", conflicts_with_all = ["workload", "functions", "ops", "seed"])]
    pub model: Option<PathBuf>,
    #[command(flatten)]
    pub shapes: onnx::InputShapeArgs,
    #[command(flatten)]
    pub pipeline: PipelineArgs,
    /// Repetitions per row (the best time is reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub repeats: u64,
    /// Seed of the workload.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Skip the incremental-session rows (cold, no-change and one-edit re-runs, for the
    /// default and the lean memory mode).
    #[arg(long)]
    pub no_incremental: bool,
    /// Also measure whole runs (parse, pipeline, print) with a persistent stage cache in a fresh
    /// temporary directory, as `passel run --cache DIR` does them: rows `cache-cold` (no cache),
    /// `cache-fill` (an empty cache), `cache-nochange` (a new session over the filled cache,
    /// same text) and `cache-edit` (after a body edit of one function), and the cache's size
    /// per function.
    #[arg(long, conflicts_with = "model")]
    pub cache: bool,
    /// Also write the results as JSON (workload, pipeline, machine, rows) to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also write a bar chart of the rows as SVG to FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// A parsed `--threads` list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadList(pub Vec<usize>);

/// Parses a comma-separated list of thread counts, each in `1..=1024`.
pub fn parse_threads(text: &str) -> Result<ThreadList, ThreadListError> {
    let mut out = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(ThreadListError::Empty { list: text.to_string() });
        }
        let n: usize = part
            .parse()
            .map_err(|_| ThreadListError::NotANumber { entry: part.to_string(), list: text.to_string() })?;
        if !(1..=1024).contains(&n) {
            return Err(ThreadListError::OutOfRange(n));
        }
        out.push(n);
    }
    Ok(ThreadList(out))
}

/// Thread counts for the default rows: powers of two from 2 up to the cores, and the cores.
fn default_threads(cores: usize) -> Vec<usize> {
    let mut out = Vec::new();
    let mut t = 2;
    while t < cores {
        out.push(t);
        t *= 2;
    }
    out.push(cores.max(2));
    out
}

/// A file opened for writing before the (possibly long) run, so a bad path fails at once.
fn create(path: &Path) -> Result<File, FileError> {
    File::create(path).map_err(|source| FileError::Write { path: path.to_path_buf(), source })
}

fn write_all(mut file: File, path: &Path, text: &str) -> Result<(), FileError> {
    file.write_all(text.as_bytes())
        .and_then(|_| file.flush())
        .map_err(|source| FileError::Write { path: path.to_path_buf(), source })
}

/// Runs `passel bench`: returns the table for stdout; progress and the workload summary go to
/// stderr. `heap` is the installed counting allocator, if any (then rows report peak heap).
pub fn run_cli(args: &BenchArgs, heap: Option<&CountingAlloc>, console: &Console) -> Result<String, BenchError> {
    if args.ops.is_some() && args.workload != "chain" {
        return Err(BenchError::OpsWithoutChain(args.workload.clone()));
    }
    if args.model.is_none() && !args.shapes.input_shape.is_empty() {
        return Err(BenchError::InputShapeWithoutModel);
    }
    let machine = Machine::current();
    let threads = match &args.threads {
        Some(ThreadList(t)) => t.clone(),
        None => default_threads(machine.cores),
    };
    // Check the pipeline, the shapes and the output paths before spending time on the workload.
    passel_passes::link();
    let mut options = args.pipeline.clone();
    let passes = match (&options.passes, &args.model) {
        (Some(p), _) => p.clone(),
        (None, Some(_)) => format!("default -O{}", options.opt_level()),
        (None, None) => options.passes.insert(DEFAULT_PIPELINE.to_string()).clone(),
    };
    let (pipeline, context) = options.pipeline_and_context()?;
    if options.names_passes() {
        let ctx = context.build()?;
        for note in crate::notes::pipeline_notes(&pipeline, &ctx, options.passes.is_some()) {
            console.err(&format!("note: {note}\n")).map_err(|_| BenchError::Stderr)?;
        }
    }
    crate::args::check_input_shapes(&args.shapes)?;
    let import = args.shapes.options()?;
    let json_file = args.json.as_deref().map(create).transpose()?;
    let svg_file = args.svg.as_deref().map(create).transpose()?;
    let progress_bar = |rows: usize| {
        let bar = indicatif::ProgressBar::new(rows as u64 * args.repeats);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} runs {elapsed}")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    };

    #[allow(clippy::type_complexity)]
    let (workload, functions, bindings, rows, model, cache): (
        String,
        usize,
        usize,
        Vec<BenchRow>,
        Option<ModelInfo>,
        Option<CacheSize>,
    ) = if let Some(path) = &args.model {
        let bar = progress_bar(3 + threads.len());
        let cfg = ModelBench {
            path,
            import: &import,
            pipeline: &pipeline,
            options: &options,
            threads: &threads,
            repeats: args.repeats as usize,
            heap,
        };
        let result = run_model_bench(&cfg, &mut || bar.inc(1));
        bar.finish_and_clear();
        let (rows, info) = result?;
        let (functions, bindings) = rows.first().map(|r| (r.functions, r.bindings)).unwrap_or_default();
        (format!("model {}", path.display()), functions, bindings, rows, Some(info), None)
    } else {
        let spinner =
            indicatif::ProgressBar::new_spinner().with_message(format!("generating {} workload", args.workload));
        spinner.enable_steady_tick(std::time::Duration::from_millis(120));
        let functions = args.functions as usize;
        let module = match (args.workload.as_str(), args.ops) {
            ("chain", Some(ops)) => {
                gen::chain(&gen::ChainOptions { functions, ops: ops as usize, seed: args.seed, ..Default::default() })
            }
            (kind, _) => gen::workload(kind, functions, args.seed)?,
        };
        spinner.finish_and_clear();
        let bindings = count_bindings(&module);
        let workload = match args.workload.as_str() {
            "chain" => format!("chain {}x{}", module.len(), args.ops.unwrap_or(50)),
            kind => kind.to_string(),
        };
        console
            .err(&format!(
                "workload: {workload}, {} functions, {bindings} bindings; pipeline: {passes}\n",
                module.len(),
            ))
            .map_err(|_| BenchError::Stderr)?;
        let bar =
            progress_bar(1 + threads.len() + if args.no_incremental { 0 } else { 6 } + if args.cache { 4 } else { 0 });
        let cfg = BenchConfig {
            module: &module,
            pipeline: &pipeline,
            options: &options,
            threads: &threads,
            repeats: args.repeats as usize,
            incremental: !args.no_incremental,
            heap,
        };
        let rows = run_bench(&cfg, &mut || bar.inc(1)).and_then(|rows| {
            if !args.cache {
                return Ok((rows, None));
            }
            let threads = threads.iter().copied().max().unwrap_or(1);
            let (more, size) = cache_rows(&cfg, threads, &mut || bar.inc(1))?;
            Ok((rows.into_iter().chain(more).collect(), Some(size)))
        });
        bar.finish_and_clear();
        let (rows, cache) = rows?;
        (workload, module.len(), bindings, rows, None, cache)
    };
    let report = BenchReport { workload, functions, bindings, pipeline: passes, machine, rows, model, cache };
    if let (Some(file), Some(path)) = (json_file, &args.json) {
        write_all(file, path, &report.to_json())?;
    }
    if let (Some(file), Some(path)) = (svg_file, &args.svg) {
        write_all(file, path, &report.to_svg())?;
    }
    Ok(report.table())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_lists_parse_and_bad_entries_say_which() {
        assert_eq!(parse_threads("1, 2,4"), Ok(ThreadList(vec![1, 2, 4])));
        assert_eq!(
            parse_threads("2,x"),
            Err(ThreadListError::NotANumber { entry: "x".to_string(), list: "2,x".to_string() })
        );
        assert!(parse_threads("2,x").unwrap_err().to_string().contains("`x`"));
        assert!(parse_threads("2,,4").unwrap_err().to_string().contains("empty entry"));
        assert_eq!(parse_threads("0"), Err(ThreadListError::OutOfRange(0)));
        assert!(parse_threads("5000").unwrap_err().to_string().contains("out of range"));
    }

    #[test]
    fn default_threads_go_up_to_the_cores() {
        assert_eq!(default_threads(1), vec![2]);
        assert_eq!(default_threads(2), vec![2]);
        assert_eq!(default_threads(6), vec![2, 4, 6]);
        assert_eq!(default_threads(8), vec![2, 4, 8]);
    }
}
