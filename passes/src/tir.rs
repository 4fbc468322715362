//! The loop-level pass library: PrimFunc passes with TVM's `tir.transform` names, configs and
//! semantics, one pass per file (`tir/<pass>.rs`), each declared once below.

pub(crate) mod copy;

use std::sync::Arc;

use passel_engine::tir::PrimFunc;

/// What a loop-level pass returns from its rebuild of `func`: the new PrimFunc, or `func`
/// itself (the same `Arc`) when the rebuild changed nothing (`Ok(None)`) or was refused
/// (`Err`: the builder refuses only what the input's own verifier would, and the pass then
/// leaves the function as it was). The passes' one exit.
pub(crate) fn rebuilt(func: &Arc<PrimFunc>, result: Result<Option<PrimFunc>, String>) -> Arc<PrimFunc> {
    match result {
        Ok(Some(f)) => Arc::new(f),
        _ => func.clone(),
    }
}

/// Declares the loop-level passes, each once: `file { NAMES };` makes `pub mod file`
/// (`tir/file.rs`) and lists its registry NAMES in [`PASS_NAMES`] (which the crate's
/// `standard_pass_names` appends) and, for the header test, with the file's source.
macro_rules! declare_tir_passes {
    ($($file:ident { $($name:ident),+ };)+) => {
        $(pub mod $file;)+

        /// Names of the loop-level passes, in declaration order.
        pub const PASS_NAMES: &[&str] = &[$($($file::$name),+),+];

        /// Each loop-level pass's name with the source of the file that declares it.
        #[cfg(test)]
        pub(crate) const PASS_SOURCES: &[(&str, &str)] =
            &[$($(($file::$name, include_str!(concat!("tir/", stringify!($file), ".rs")))),+),+];
    };
}

declare_tir_passes! {
    simplify { NAME };
    remove_no_op { NAME };
    unroll_loop { NAME };
    vectorize_loop { NAME };
    loop_partition { NAME };
    flatten_buffer { NAME };
    storage_rewrite { NAME };
    common_subexpr_elim { NAME };
    narrow_datatype { NAME };
}
