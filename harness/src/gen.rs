//! Deterministic, seeded workload generators. The same options and seed always give the same
//! module, byte for byte once printed. Each generator is a pure function from an options struct
//! (with a `Default`) to a [`Module`] that verifies and type-checks (InferType reports nothing);
//! tests, benches, fuzzing and `passel gen` / `passel bench` share them.
//!
//! - [`chain`]: many independent functions, each a chain of elementwise ops with work for the
//!   standard passes mixed in.
//! - [`mlp`]: a multi-layer perceptron, one function per dense layer, called in turn by `@main`.
//! - [`cnn`]: a residual convolutional network, one function per residual block.
//! - [`transformer`]: transformer encoder layers (attention + feed-forward), one function per
//!   layer or per block.
//! - [`random`]: well-typed random graphs with calls between functions, nested functions, ifs
//!   and tuples.
//!
//! Large weights are compact seeded fills (`uniform<…>(seed=…)`), so modules stay small in
//! memory and in text whatever the model size.

mod chain;
pub mod cli;
mod cnn;
mod emit;
mod mlp;
mod random;
mod transformer;

pub use chain::{chain, chain_functions, ChainOptions};
pub use cnn::{cnn, CnnOptions};
pub use mlp::{mlp, Activation, MlpOptions};
pub use random::{random, RandomOptions};
pub use transformer::{transformer, TransformerOptions};

use passel_engine::ir::{Module, OpId};

/// The operator `name`, which the generators only ever ask for by constant names.
pub(crate) fn op(name: &str) -> OpId {
    passel_engine::op::lookup(name).unwrap_or_else(|| panic!("operator `{name}` is not registered"))
}

/// Why a workload cannot be generated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GenError {
    /// A workload kind that does not exist (`hint` suggests the nearest one).
    #[error("unknown workload `{name}`{hint}; expected one of: {}", KINDS.join(", "))]
    UnknownWorkload {
        /// The kind asked for.
        name: String,
        /// ` (did you mean `…`?)`, or empty.
        hint: String,
    },
    /// The workload would need more memory than the limit ([`cli::check_size`]).
    #[error("this workload needs about {need} of memory, more than the limit of {limit} (half the physical or cgroup memory): ask for fewer functions or ops")]
    TooLarge {
        /// The estimate, human-readable.
        need: String,
        /// The limit, human-readable.
        limit: String,
    },
}

impl From<GenError> for String {
    fn from(e: GenError) -> String {
        e.to_string()
    }
}

/// The workload kinds, by their CLI names.
pub const KINDS: &[&str] = &["chain", "mlp", "cnn", "transformer", "random"];

/// Builds workload `kind` with its default options except for the function count (about
/// `functions` functions) and the seed. This is what `passel bench --workload` uses.
pub fn workload(kind: &str, functions: usize, seed: u64) -> Result<Module, GenError> {
    Ok(match kind {
        "chain" => chain(&ChainOptions { functions, seed, ..Default::default() }),
        "mlp" => mlp(&MlpOptions { layers: functions.saturating_sub(1).max(1), seed, ..Default::default() }),
        "cnn" => cnn(&CnnOptions { blocks: functions.saturating_sub(1).max(1), seed, ..Default::default() }),
        "transformer" => transformer(&TransformerOptions {
            layers: (functions.saturating_sub(1) / 3).max(1),
            per_block: true,
            seed,
            ..Default::default()
        }),
        "random" => random(&RandomOptions { functions, seed, ..Default::default() }),
        other => {
            let hint = passel_engine::suggest(other, KINDS.iter().copied())
                .first()
                .map(|s| format!(" (did you mean `{s}`?)"))
                .unwrap_or_default();
            return Err(GenError::UnknownWorkload { name: other.to_string(), hint });
        }
    })
}
