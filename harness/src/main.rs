//! The `passel` command-line interface.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use passel_engine::ir::{parse_module, print_module, Module};
use passel_harness::{diag, gen};

/// passel: a parallel, incremental compiler pass engine.
#[derive(Parser)]
#[command(name = "passel", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse and verify a .pir file; errors are shown with a source snippet (exit 1 if invalid).
    Check {
        /// The .pir file ("-" for stdin).
        file: PathBuf,
    },
    /// Print a .pir file in canonical form to stdout.
    Fmt {
        /// The .pir file ("-" for stdin).
        file: PathBuf,
    },
    /// Generate a deterministic workload as .pir text on stdout.
    #[command(subcommand)]
    Gen(GenCommand),
}

#[derive(Subcommand)]
enum GenCommand {
    /// N independent functions, each a chain of K elementwise ops on a small tensor, with
    /// constant subexpressions, duplicated subexpressions, dead values and identities mixed in.
    Chain(ChainArgs),
}

#[derive(Args)]
struct ChainArgs {
    /// Number of functions.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    functions: u64,
    /// Operations on each function's main chain.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    ops: u64,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

fn read_source(path: &PathBuf) -> Result<String, String> {
    if path.as_os_str() == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).map_err(|e| format!("cannot read stdin: {e}"))?;
        Ok(s)
    } else {
        std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
    }
}

/// Parses and verifies `path`, printing rendered errors to stderr.
fn load(path: &PathBuf) -> Result<Module, ExitCode> {
    let src = read_source(path).map_err(|e| {
        eprintln!("error: {e}");
        ExitCode::FAILURE
    })?;
    let name = path.display().to_string();
    let module = parse_module(&src).map_err(|errors| {
        eprint!("{}", diag::render(&name, &src, &diag::parse_errors(&errors)));
        ExitCode::FAILURE
    })?;
    Ok(module)
}

fn write_stdout(text: &str) -> ExitCode {
    let mut out = std::io::stdout().lock();
    // A closed pipe (`passel gen … | head`) is not an error worth a message.
    match out.write_all(text.as_bytes()).and_then(|_| out.flush()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: cannot write output: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Check { file } => match load(&file) {
            Ok(m) => {
                eprintln!("{}: ok ({} functions)", file.display(), m.len());
                ExitCode::SUCCESS
            }
            Err(code) => code,
        },
        Command::Fmt { file } => match load(&file) {
            Ok(m) => write_stdout(&print_module(&m)),
            Err(code) => code,
        },
        Command::Gen(GenCommand::Chain(a)) => {
            let m = gen::chain(&gen::ChainOptions {
                functions: a.functions as usize,
                ops: a.ops as usize,
                seed: a.seed,
                ..Default::default()
            });
            write_stdout(&print_module(&m))
        }
    }
}
