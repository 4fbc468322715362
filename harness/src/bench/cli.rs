//! The `passel bench` command line: arguments, the progress bar, and writing the report.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use super::{count_bindings, run_bench, BenchConfig, BenchReport, CountingAlloc, Machine};
use crate::console::Console;
use crate::gen;

/// The default pipeline of `passel bench`.
pub const DEFAULT_PIPELINE: &str = "FoldConstant,EliminateCommonSubexpr,DeadCodeElimination,SimplifyExpr";

/// Arguments of `passel bench`.
#[derive(Args, Debug)]
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
    /// Pipeline to run.
    #[arg(long, default_value = DEFAULT_PIPELINE)]
    pub passes: String,
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
pub fn parse_threads(text: &str) -> Result<ThreadList, String> {
    let mut out = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        if part.is_empty() {
            return Err(format!("empty entry in thread list `{text}` (expected e.g. `1,2,4`)"));
        }
        let n: usize = part.parse().map_err(|_| format!("`{part}` in thread list `{text}` is not a number"))?;
        if !(1..=1024).contains(&n) {
            return Err(format!("thread count {n} is out of range 1..=1024"));
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
fn create(path: &Path) -> Result<File, String> {
    File::create(path).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn write_all(mut file: File, path: &Path, text: &str) -> Result<(), String> {
    file.write_all(text.as_bytes())
        .and_then(|_| file.flush())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// Runs `passel bench`: returns the table for stdout; progress and the workload summary go to
/// stderr. `heap` is the installed counting allocator, if any (then rows report peak heap).
pub fn run_cli(args: &BenchArgs, heap: Option<&CountingAlloc>, console: &Console) -> Result<String, String> {
    if args.ops.is_some() && args.workload != "chain" {
        return Err(format!("--ops applies only to --workload chain, not `{}`", args.workload));
    }
    let machine = Machine::current();
    let threads = match &args.threads {
        Some(ThreadList(t)) => t.clone(),
        None => default_threads(machine.cores),
    };
    // Check the pipeline and the output paths before spending time on the workload.
    passel_passes::link();
    passel_engine::transform::parse_pipeline(&args.passes).map_err(|e| e.to_string())?;
    let json_file = args.json.as_deref().map(create).transpose()?;
    let svg_file = args.svg.as_deref().map(create).transpose()?;

    let spinner = indicatif::ProgressBar::new_spinner().with_message(format!("generating {} workload", args.workload));
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
            "workload: {workload}, {} functions, {bindings} bindings; pipeline: {}\n",
            module.len(),
            args.passes
        ))
        .map_err(|_| "cannot write to stderr".to_string())?;

    let rows = 1 + threads.len() + if args.no_incremental { 0 } else { 6 };
    let bar = indicatif::ProgressBar::new(rows as u64 * args.repeats);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} runs {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let cfg = BenchConfig {
        module: &module,
        pipeline: &args.passes,
        threads: &threads,
        repeats: args.repeats as usize,
        incremental: !args.no_incremental,
        heap,
    };
    let rows = run_bench(&cfg, &mut || bar.inc(1));
    bar.finish_and_clear();
    let report = BenchReport {
        workload,
        functions: module.len(),
        bindings,
        pipeline: args.passes.clone(),
        machine,
        rows: rows?,
    };
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
        assert!(parse_threads("2,x").unwrap_err().contains("`x`"));
        assert!(parse_threads("2,,4").unwrap_err().contains("empty entry"));
        assert!(parse_threads("0").unwrap_err().contains("out of range"));
        assert!(parse_threads("5000").unwrap_err().contains("out of range"));
    }

    #[test]
    fn default_threads_go_up_to_the_cores() {
        assert_eq!(default_threads(1), vec![2]);
        assert_eq!(default_threads(2), vec![2]);
        assert_eq!(default_threads(6), vec![2, 4, 6]);
        assert_eq!(default_threads(8), vec![2, 4, 8]);
    }
}
