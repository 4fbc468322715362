//! passel passes: the standard pass library.
//!
//! Each pass lives in its own file as a pure function over one function (or a module, for
//! module-level passes) that returns its input `Arc` untouched when it changes nothing. This
//! file is the registration table: one line per pass with its TVM name, kind, opt level and
//! required passes. `passel passes` lists it.
#![warn(missing_docs)]

mod census;
mod copy;
mod rewrite;
#[cfg(test)]
mod test_util;

pub mod canonicalize_bindings;
pub mod dead_code_elimination;
pub mod eliminate_common_subexpr;
pub mod fold_constant;
pub mod fold_scale_axis;
pub mod fuse_ops;
pub mod infer_type;
pub mod inline;
pub mod lambda_lift;
mod pipelines;
pub mod simplify_expr;
pub mod simplify_inference;
pub mod testing;
pub mod to_a_normal_form;
pub mod to_graph_normal_form;

pub use canonicalize_bindings::canonicalize_bindings;
pub use dead_code_elimination::{
    dead_code_elimination, dead_code_elimination_module, dead_code_elimination_pass, remove_unreachable_functions,
};
pub use eliminate_common_subexpr::eliminate_common_subexpr;
pub use fold_constant::fold_constant;
pub use fold_scale_axis::{backward_fold_scale_axis, forward_fold_scale_axis};
pub use fuse_ops::fuse_ops;
pub use infer_type::{infer_function, infer_module, infer_type_function, infer_type_pass, TypeDiagnostic};
pub use inline::inline_module;
pub use lambda_lift::lambda_lift_module;
pub use pipelines::{default_pipeline, run_pipeline_text, STANDARD_PIPELINE};
pub use simplify_expr::simplify_expr;
pub use simplify_inference::simplify_inference;
pub use to_a_normal_form::{is_a_normal_form, to_a_normal_form, to_a_normal_form_module};
pub use to_graph_normal_form::{to_graph_normal_form, to_graph_normal_form_module};

use census::{counted, counted_module};
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
    "InferType" => module_pass("InferType", 0, infer_type_pass).with_function_form(infer_type::infer_type_function);
    "FoldConstant" => function_pass("FoldConstant", 2, |func, _module, ctx| {
        let default = i64::try_from(fold_constant::DEFAULT_MAX_BYTES).unwrap_or(i64::MAX);
        let max_bytes = u64::try_from(ctx.get_config::<i64>(fold_constant::MAX_BYTES_KEY, default)).unwrap_or(0);
        let (out, hit) = fold_constant::fold_constant_within(&func, max_bytes);
        if hit {
            let message = format!(
                "constant folding stopped at {max_bytes} bytes of folded constants ({}); later calls were kept",
                fold_constant::MAX_BYTES_KEY
            );
            ctx.emit(passel_engine::transform::Diagnostic::warning("FoldConstant", message));
        }
        Ok(counted(ctx, &func, out, fold_constant::STATISTICS))
    });
    "DeadCodeElimination" => module_pass("DeadCodeElimination", 1, dead_code_elimination_pass)
        .with_prelude_and_function_form(
            dead_code_elimination::reachability_prelude,
            |func, _module, ctx| Ok(counted(ctx, &func, dead_code_elimination(&func), dead_code_elimination::STATISTICS)),
        )
        .with_required(&["InferType"]);
    "EliminateCommonSubexpr" => function_pass("EliminateCommonSubexpr", 3, |func, _module, ctx| {
        Ok(counted(ctx, &func, eliminate_common_subexpr(&func), eliminate_common_subexpr::STATISTICS))
    })
    .with_required(&["InferType"]);
    "SimplifyExpr" => function_pass("SimplifyExpr", 0, |func, _module, ctx| {
        Ok(counted(ctx, &func, simplify_expr(&func), simplify_expr::STATISTICS))
    })
        .with_required(&["InferType"]);
    "CanonicalizeBindings" => function_pass("CanonicalizeBindings", 1, |func, _module, ctx| {
        Ok(counted(ctx, &func, canonicalize_bindings(&func), canonicalize_bindings::STATISTICS))
    });
    "SimplifyInference" => function_pass("SimplifyInference", 0, |func, _module, ctx| {
        Ok(counted(ctx, &func, simplify_inference(&func), simplify_inference::STATISTICS))
    })
        .with_required(&["InferType"]);
    "BackwardFoldScaleAxis" => fold_scale_axis::backward_pass();
    "ForwardFoldScaleAxis" => fold_scale_axis::forward_pass();
    "FoldScaleAxis" => fold_scale_axis::fold_scale_axis_pass();
    "FuseOps" => function_pass("FuseOps", 0, |func, _module, ctx| {
        let depth = ctx.get_config(fuse_ops::MAX_DEPTH_KEY, fuse_ops::DEFAULT_MAX_DEPTH);
        let (out, too_deep) = fuse_ops::fuse_ops_within_nesting(&func, usize::try_from(depth).unwrap_or(0));
        if too_deep {
            let message = format!(
                "not fused: the primitive functions would nest `if` / closure bodies more than {} deep, \
                 deeper than the text format prints",
                passel_engine::ir::MAX_BODY_NESTING
            );
            ctx.emit(passel_engine::transform::Diagnostic::warning("FuseOps", message));
        }
        Ok(counted(ctx, &func, out, fuse_ops::STATISTICS))
    })
    .with_required(&["InferType"]);
    "ToANormalForm" => module_pass("ToANormalForm", 1, |module, ctx| {
        Ok(counted_module(ctx, &module, to_a_normal_form_module(&module), to_a_normal_form::STATISTICS))
    });
    "Inline" => module_pass("Inline", 1, |module, ctx| {
        let max_size = ctx.get_config::<i64>(inline::MAX_SIZE_KEY, 0).max(0);
        let default_growth = i64::try_from(inline::DEFAULT_MAX_GROWTH).unwrap_or(i64::MAX);
        let max_growth = ctx.get_config::<i64>(inline::MAX_GROWTH_KEY, default_growth).max(0);
        let max_growth = usize::try_from(max_growth).unwrap_or(usize::MAX);
        let inline::Inlined { module: out, budget_stop, too_deep } =
            inline::inline_module_with_budget(&module, usize::try_from(max_size).unwrap_or(usize::MAX), max_growth);
        if let Some(caller) = budget_stop {
            let message = format!(
                "inlining stopped at the growth budget of {max_growth} nodes ({}): @{caller} keeps a call, \
                 and so may later functions",
                inline::MAX_GROWTH_KEY
            );
            ctx.emit(passel_engine::transform::Diagnostic::warning("Inline", message).in_function(&caller));
        }
        if let Some(caller) = too_deep {
            let message = format!(
                "calls in @{caller} were not inlined: its `if` / closure bodies would nest more than {} deep, \
                 deeper than the text format prints (and so may later functions)",
                passel_engine::ir::MAX_BODY_NESTING
            );
            ctx.emit(passel_engine::transform::Diagnostic::warning("Inline", message).in_function(&caller));
        }
        Ok(counted_module(ctx, &module, out, inline::STATISTICS))
    })
    .with_required(&["InferType"]);
    "LambdaLift" => module_pass("LambdaLift", 1, |module, ctx| {
        Ok(counted_module(ctx, &module, lambda_lift_module(&module), lambda_lift::STATISTICS))
    })
        .with_required(&["InferType"]);
    "ToGraphNormalForm" => module_pass("ToGraphNormalForm", 1, |module, ctx| {
        Ok(counted_module(ctx, &module, to_graph_normal_form_module(&module), to_graph_normal_form::STATISTICS))
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
