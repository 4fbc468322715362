//! `passel gen KIND [options]`: the command-line options of each generator.

use clap::{Args, Subcommand};
use passel_engine::ir::{print_function, print_module, Module};

use super::{
    chain, chain_functions, cnn, mlp, random, transformer, Activation, ChainOptions, CnnOptions, MlpOptions,
    RandomOptions, TransformerOptions,
};

/// Largest count (functions, layers, blocks) the CLI accepts.
const MAX_COUNT: u64 = 1_000_000;
/// Largest tensor dimension the CLI accepts. Weights are fills, so big dimensions cost nothing
/// until something evaluates them.
const MAX_DIM: u64 = 1 << 20;

/// The workload kinds of `passel gen`.
#[derive(Subcommand, Debug)]
pub enum GenCommand {
    /// N independent functions, each a chain of K elementwise ops on a small tensor, with
    /// constant subexpressions, duplicated subexpressions, dead values and identities mixed in.
    Chain(ChainArgs),
    /// A multi-layer perceptron: @main calls @layer0..@layerN-1 in turn, each
    /// act(bias_add(dense(x, W), b)), then softmax. Functions: layers + 1.
    Mlp(MlpArgs),
    /// A residual CNN on NCHW images: @main (stem conv, blocks, global mean pool, dense) and one
    /// function per residual block (conv2d + batch_norm + relu, twice, plus a residual add).
    /// Functions: blocks + 1.
    Cnn(CnnArgs),
    /// A transformer encoder on a (seq, hidden) activation: per layer, attention (layer_norm,
    /// q/k/v dense, matmul, softmax, matmul, dense, residual add) and feed-forward (layer_norm,
    /// dense, bias_add, gelu, dense, residual add). Functions: layers + 1, or 3 x layers + 1
    /// with --per-block.
    Transformer(TransformerArgs),
    /// Well-typed random graphs: calls between functions, nested functions, ifs, tuples,
    /// reductions, broadcasting, dense and matmul on (n, n) and (n,) tensors.
    Random(RandomArgs),
}

/// Options of `passel gen chain`.
#[derive(Args, Debug)]
pub struct ChainArgs {
    /// Number of functions.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    pub functions: u64,
    /// Operations on each function's main chain.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u64).range(0..=10_000_000))]
    pub ops: u64,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Options of `passel gen mlp`.
#[derive(Args, Debug)]
pub struct MlpArgs {
    /// Dense layers (one function each).
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u64).range(0..=MAX_COUNT))]
    pub layers: u64,
    /// Rows of the input batch.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=MAX_DIM))]
    pub batch: u64,
    /// Input features.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=MAX_DIM))]
    pub input: u64,
    /// Hidden width.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=MAX_DIM))]
    pub width: u64,
    /// Activation after each layer: relu, gelu, or mixed (chosen per layer from the seed).
    #[arg(long, default_value = "mixed", value_parser = ["relu", "gelu", "mixed"])]
    pub activation: String,
    /// Seed of the weights.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Give each layer but the last its own output width, drawn from the seed in
    /// [width/2, 2*width] (every layer then lowers to its own kernels: `run --lower` makes
    /// about one PrimFunc per layer).
    #[arg(long)]
    pub varied_widths: bool,
}

/// Options of `passel gen cnn`.
#[derive(Args, Debug)]
pub struct CnnArgs {
    /// Residual blocks (one function each).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(0..=MAX_COUNT))]
    pub blocks: u64,
    /// Images per batch.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=MAX_DIM))]
    pub batch: u64,
    /// Channels of every block.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=MAX_DIM))]
    pub channels: u64,
    /// Image height and width.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=MAX_DIM))]
    pub image: u64,
    /// Output classes.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u64).range(1..=MAX_DIM))]
    pub classes: u64,
    /// Seed of the weights.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Options of `passel gen transformer`.
#[derive(Args, Debug)]
pub struct TransformerArgs {
    /// Encoder layers.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(0..=MAX_COUNT))]
    pub layers: u64,
    /// Sequence length.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u64).range(1..=MAX_DIM))]
    pub seq: u64,
    /// Hidden size.
    #[arg(long, default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=MAX_DIM))]
    pub hidden: u64,
    /// Inner size of the feed-forward block.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u64).range(1..=MAX_DIM))]
    pub ffn: u64,
    /// One function per block (@attentionI, @ffnI, called by @layerI) instead of per layer.
    #[arg(long)]
    pub per_block: bool,
    /// Seed of the weights.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Options of `passel gen random`.
#[derive(Args, Debug)]
pub struct RandomArgs {
    /// Number of functions; @fI may call @fJ for J < I.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=MAX_COUNT))]
    pub functions: u64,
    /// Random steps in each function's top-level block (nested blocks get a third as many).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub bindings: u64,
    /// n of the tensor types (n, n) and (n,).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=MAX_DIM))]
    pub size: u64,
    /// Deepest nesting of if branches and nested functions.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(0..=super::random::MAX_DEPTH as u64))]
    pub max_depth: u64,
    /// Seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// Peak bytes of `passel gen` (the module plus its printed text) per unit of each workload,
/// deliberately high. Measured for chain: `/usr/bin/time -v passel gen chain --functions 2000
/// --ops 50` peaks at 28.8 MB resident against 6.8 MB for `--functions 1 --ops 1`, about
/// 225 bytes per op; the other kinds' figures are generous guesses, not yet measured.
mod per_unit {
    /// One op of a chain function's main chain (with the extra work mixed in).
    pub const CHAIN_OP: f64 = 700.0;
    /// One chain function, beyond its ops.
    pub const CHAIN_FUNCTION: f64 = 2000.0;
    /// One dense layer of `mlp`.
    pub const MLP_LAYER: f64 = 4000.0;
    /// One residual block of `cnn`.
    pub const CNN_BLOCK: f64 = 12000.0;
    /// One encoder layer of `transformer`.
    pub const TRANSFORMER_LAYER: f64 = 30000.0;
    /// One step of `random` (one to a few bindings).
    pub const RANDOM_STEP: f64 = 700.0;
}

/// Estimated peak bytes of generating and printing `cmd`'s workload, from the requested sizes
/// (tensor dimensions cost nothing: weights are fills).
pub fn estimate_bytes(cmd: &GenCommand) -> f64 {
    match cmd {
        // Printed one function at a time ([`print_workload`]): one function and the buffer.
        GenCommand::Chain(a) => a.ops as f64 * per_unit::CHAIN_OP + per_unit::CHAIN_FUNCTION + STREAM_BUFFER as f64,
        GenCommand::Mlp(a) => (a.layers as f64 + 1.0) * per_unit::MLP_LAYER,
        GenCommand::Cnn(a) => (a.blocks as f64 + 1.0) * per_unit::CNN_BLOCK,
        GenCommand::Transformer(a) => (a.layers as f64 + 1.0) * per_unit::TRANSFORMER_LAYER,
        GenCommand::Random(a) => {
            // A step opens nested blocks with probability 3/16 (an `if`: two blocks; a closure:
            // one), each of on average bindings / 6 steps, down to max_depth levels: the expected
            // step count grows by this factor per level.
            let b = a.bindings as f64;
            let growth = 1.0 + 3.0 / 16.0 * (b / 6.0 + 1.0);
            let depth = a.max_depth.min(super::random::MAX_DEPTH as u64) as i32;
            a.functions as f64 * (b.max(1.0) * growth.powi(depth) + 1.0) * per_unit::RANDOM_STEP
        }
    }
}

/// The most memory `passel gen` will plan to use: half the physical memory, or half the
/// cgroup's memory limit when that is lower; 8 GiB when neither can be read.
pub fn memory_limit() -> u64 {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok().and_then(|text| {
        let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
        let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
        kb.checked_mul(1024)
    });
    let cgroup = std::fs::read_to_string("/sys/fs/cgroup/memory.max").ok().and_then(|t| t.trim().parse::<u64>().ok());
    match (meminfo, cgroup) {
        (None, None) => 8 << 30,
        (a, b) => a.unwrap_or(u64::MAX).min(b.unwrap_or(u64::MAX)) / 2,
    }
}

/// Refuses a workload whose estimated memory ([`estimate_bytes`]) exceeds `limit` bytes: it
/// would otherwise build for a while and then abort when an allocation fails.
pub fn check_size(cmd: &GenCommand, limit: u64) -> Result<(), super::GenError> {
    let need = estimate_bytes(cmd);
    if need > limit as f64 {
        return Err(super::GenError::TooLarge { need: human_bytes(need), limit: human_bytes(limit as f64) });
    }
    Ok(())
}

/// `1.5 GiB`, `12.0 MiB`, `3.0e+21 B`.
fn human_bytes(b: f64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b;
    for unit in UNITS {
        if v < 1024.0 {
            return format!("{v:.1} {unit}");
        }
        v /= 1024.0;
    }
    format!("{b:.1e} B")
}

/// Bytes of text [`print_workload`] gathers before writing them.
const STREAM_BUFFER: usize = 1 << 20;

/// Prints `cmd`'s workload through `out`, in pieces of about a megabyte, stopping at the first
/// failed write. The chain workload is made and printed one function at a time — its functions
/// are independent and hold only scalar constants, so the text is [`print_module`]'s while the
/// memory is one function's, whatever `--functions` is; the other kinds print one module.
pub fn print_workload<E>(cmd: &GenCommand, mut out: impl FnMut(&str) -> Result<(), E>) -> Result<(), E> {
    let GenCommand::Chain(a) = cmd else {
        return out(&print_module(&generate(cmd)));
    };
    let opts =
        ChainOptions { functions: a.functions as usize, ops: a.ops as usize, seed: a.seed, ..Default::default() };
    let mut text = String::with_capacity(STREAM_BUFFER + (STREAM_BUFFER >> 2));
    for (i, (name, func)) in chain_functions(&opts).enumerate() {
        if i > 0 {
            text.push('\n');
        }
        text.push_str(&print_function(&name, &func));
        if text.len() >= STREAM_BUFFER {
            out(&text)?;
            text.clear();
        }
    }
    if text.is_empty() {
        return Ok(());
    }
    out(&text)
}

/// Builds the module `cmd` asks for.
pub fn generate(cmd: &GenCommand) -> Module {
    match cmd {
        GenCommand::Chain(a) => chain(&ChainOptions {
            functions: a.functions as usize,
            ops: a.ops as usize,
            seed: a.seed,
            ..Default::default()
        }),
        GenCommand::Mlp(a) => mlp(&MlpOptions {
            layers: a.layers as usize,
            batch: a.batch,
            input: a.input,
            width: a.width,
            activation: match a.activation.as_str() {
                "relu" => Activation::Relu,
                "gelu" => Activation::Gelu,
                _ => Activation::Mixed,
            },
            seed: a.seed,
            varied_widths: a.varied_widths,
        }),
        GenCommand::Cnn(a) => cnn(&CnnOptions {
            blocks: a.blocks as usize,
            batch: a.batch,
            channels: a.channels,
            image: a.image,
            classes: a.classes,
            seed: a.seed,
        }),
        GenCommand::Transformer(a) => transformer(&TransformerOptions {
            layers: a.layers as usize,
            seq: a.seq,
            hidden: a.hidden,
            ffn: a.ffn,
            per_block: a.per_block,
            seed: a.seed,
        }),
        GenCommand::Random(a) => random(&RandomOptions {
            functions: a.functions as usize,
            bindings: a.bindings as usize,
            size: a.size,
            max_depth: a.max_depth as usize,
            seed: a.seed,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::{generate, print_workload, ChainArgs, GenCommand, MlpArgs, STREAM_BUFFER};
    use passel_engine::ir::print_module;

    fn pieces(cmd: &GenCommand) -> Vec<String> {
        let mut out = Vec::new();
        print_workload(cmd, |text| {
            out.push(text.to_string());
            Ok::<(), ()>(())
        })
        .expect("no write fails");
        out
    }

    #[test]
    fn a_printed_chain_is_the_printed_module_in_pieces() {
        for (functions, ops, seed) in [(0, 50, 1), (1, 0, 0), (7, 3, 2), (1_500, 50, 1)] {
            let cmd = GenCommand::Chain(ChainArgs { functions, ops, seed });
            let pieces = pieces(&cmd);
            assert_eq!(pieces.concat(), print_module(&generate(&cmd)), "{functions} × {ops}, seed {seed}");
            assert!(pieces.iter().all(|p| !p.is_empty() && p.len() < 2 * STREAM_BUFFER));
            if functions == 1_500 {
                assert!(pieces.len() >= 3, "{} pieces for a 3 MB workload", pieces.len());
            }
        }
        let mlp = GenCommand::Mlp(MlpArgs {
            layers: 3,
            batch: 2,
            input: 8,
            width: 8,
            activation: "mixed".into(),
            seed: 0,
            varied_widths: false,
        });
        assert_eq!(pieces(&mlp), [print_module(&generate(&mlp))]);
    }

    #[test]
    fn printing_stops_at_the_first_failed_write() {
        let cmd = GenCommand::Chain(ChainArgs { functions: 3_000, ops: 50, seed: 1 });
        let mut writes = 0;
        let result = print_workload(&cmd, |_| {
            writes += 1;
            Err("closed")
        });
        assert_eq!((result, writes), (Err("closed"), 1));
    }
}
