//! Deterministic, seeded workload generators. The same options and seed always give the same
//! module, byte for byte once printed.

mod chain;

pub use chain::{chain, ChainOptions};

use passel_engine::ir::OpId;

/// The operator `name`, which the generators only ever ask for by constant names.
pub(crate) fn op(name: &str) -> OpId {
    passel_engine::op::lookup(name).unwrap_or_else(|| panic!("operator `{name}` is not registered"))
}
