//! passel passes: the standard pass library.
//!
//! Each pass lives in its own file as a pure function over one function (or a module, for
//! module-level passes) that returns its input `Arc` untouched when it changes nothing. This
//! file is the registration table: one line per pass with its TVM name, kind, opt level and
//! required passes. `passel passes` lists it.
#![warn(missing_docs)]

mod rewrite;

pub mod canonicalize_bindings;
pub mod dead_code_elimination;
pub mod eliminate_common_subexpr;
pub mod fold_constant;
pub mod infer_type;
mod pipelines;
pub mod simplify_expr;

pub use canonicalize_bindings::canonicalize_bindings;
pub use dead_code_elimination::{
    dead_code_elimination, dead_code_elimination_module, dead_code_elimination_pass, remove_unreachable_functions,
};
pub use eliminate_common_subexpr::eliminate_common_subexpr;
pub use fold_constant::fold_constant;
pub use infer_type::{infer_function, infer_module, infer_type_pass, TypeDiagnostic};
pub use pipelines::{default_pipeline, run_pipeline_text, STANDARD_PIPELINE};
pub use simplify_expr::simplify_expr;

use passel_engine::transform::{function_pass, module_pass};

/// Declares the standard passes: registers each constructor and lists the names.
macro_rules! declare_passes {
    ($($name:literal => $make:expr;)*) => {
        /// Names of the standard passes, in declaration order.
        pub fn standard_pass_names() -> Vec<&'static str> {
            vec![$($name),*]
        }
        $(passel_engine::register_pass!($name, || Box::new($make));)*
    };
}

declare_passes! {
    "InferType" => module_pass("InferType", 0, infer_type_pass);
    "FoldConstant" => function_pass("FoldConstant", 2, |func, _module, _ctx| Ok(fold_constant(&func)));
    "DeadCodeElimination" => module_pass("DeadCodeElimination", 1, dead_code_elimination_pass)
        .with_required(&["InferType"]);
    "EliminateCommonSubexpr" => function_pass("EliminateCommonSubexpr", 3, |func, _module, _ctx| {
        Ok(eliminate_common_subexpr(&func))
    })
    .with_required(&["InferType"]);
    "SimplifyExpr" => function_pass("SimplifyExpr", 0, |func, _module, _ctx| Ok(simplify_expr(&func)))
        .with_required(&["InferType"]);
    "CanonicalizeBindings" => function_pass("CanonicalizeBindings", 1, |func, _module, _ctx| {
        Ok(canonicalize_bindings(&func))
    });
}

/// Makes sure the registrations of this crate are linked into binaries that only call
/// `passel_engine::transform::get_pass`.
pub fn link() {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_pass_names_are_unique_and_registered() {
        let names = standard_pass_names();
        let mut sorted = names.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), names.len(), "duplicate pass name");
        for name in names {
            let pass = passel_engine::transform::get_pass(name).expect("registered");
            assert_eq!(pass.info().name, name);
        }
    }
}
