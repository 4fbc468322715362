//! passel passes: the standard pass library.
//!
//! Each pass lives in its own file as a pure function over one function (or a module, for
//! module-level passes) that returns its input `Arc` untouched when it changes nothing, and
//! with everything else about the pass: its registry name (`NAME`), its registration, and
//! `pass()`, the registered pass with its opt level, required passes and, for a module pass,
//! its per-function forms and incremental-session firewall. This file only names each pass
//! once ([`standard_pass_names`]); `passel passes` lists the registry.
#![warn(missing_docs)]

mod census;
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
pub mod legalize_ops;
mod pipelines;
pub mod simplify_expr;
pub mod simplify_inference;
pub mod testing;
pub mod tir;
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
pub use legalize_ops::legalize_ops;
pub use pipelines::{default_pipeline, run_pipeline_text, STANDARD_PIPELINE};
pub use simplify_expr::simplify_expr;
pub use simplify_inference::simplify_inference;
pub use to_a_normal_form::{is_a_normal_form, to_a_normal_form, to_a_normal_form_module};
pub use to_graph_normal_form::{to_graph_normal_form, to_graph_normal_form_module};

/// Names of the standard passes, in declaration order. Each pass file declares its own name,
/// registration, opt level, required passes, per-function forms and session firewall; this
/// list names each pass once.
pub fn standard_pass_names() -> Vec<&'static str> {
    vec![
        infer_type::NAME,
        fold_constant::NAME,
        dead_code_elimination::NAME,
        eliminate_common_subexpr::NAME,
        simplify_expr::NAME,
        canonicalize_bindings::NAME,
        simplify_inference::NAME,
        fold_scale_axis::BACKWARD_NAME,
        fold_scale_axis::FORWARD_NAME,
        fold_scale_axis::NAME,
        fuse_ops::NAME,
        to_a_normal_form::NAME,
        inline::NAME,
        lambda_lift::NAME,
        to_graph_normal_form::NAME,
        legalize_ops::NAME,
        tir::simplify::NAME,
        tir::remove_no_op::NAME,
        tir::unroll_loop::NAME,
    ]
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

    /// Each pass file's header states the pass's kind, opt level and required passes as its
    /// `pass()` declares them: `Name (function pass, opt level 2, requires InferType)`.
    #[test]
    fn pass_headers_agree_with_the_registry() {
        let sources = [
            (infer_type::NAME, include_str!("infer_type.rs")),
            (fold_constant::NAME, include_str!("fold_constant.rs")),
            (dead_code_elimination::NAME, include_str!("dead_code_elimination.rs")),
            (eliminate_common_subexpr::NAME, include_str!("eliminate_common_subexpr.rs")),
            (simplify_expr::NAME, include_str!("simplify_expr.rs")),
            (canonicalize_bindings::NAME, include_str!("canonicalize_bindings.rs")),
            (simplify_inference::NAME, include_str!("simplify_inference.rs")),
            (fold_scale_axis::BACKWARD_NAME, include_str!("fold_scale_axis.rs")),
            (fold_scale_axis::FORWARD_NAME, include_str!("fold_scale_axis.rs")),
            (fold_scale_axis::NAME, include_str!("fold_scale_axis.rs")),
            (fuse_ops::NAME, include_str!("fuse_ops.rs")),
            (to_a_normal_form::NAME, include_str!("to_a_normal_form.rs")),
            (inline::NAME, include_str!("inline.rs")),
            (lambda_lift::NAME, include_str!("lambda_lift.rs")),
            (to_graph_normal_form::NAME, include_str!("to_graph_normal_form.rs")),
            (legalize_ops::NAME, include_str!("legalize_ops.rs")),
            (tir::simplify::NAME, include_str!("tir/simplify.rs")),
            (tir::remove_no_op::NAME, include_str!("tir/remove_no_op.rs")),
            (tir::unroll_loop::NAME, include_str!("tir/unroll_loop.rs")),
        ];
        assert_eq!(sources.iter().map(|(n, _)| *n).collect::<Vec<_>>(), standard_pass_names());
        for (name, source) in sources {
            let header: String = source
                .lines()
                .take_while(|l| l.starts_with("//!"))
                .map(|l| l.trim_start_matches("//!").trim())
                .collect::<Vec<_>>()
                .join(" ");
            // The first parenthesis after the name (written plain or in backticks).
            let at = [format!("{name} ("), format!("`{name}` (")]
                .iter()
                .filter_map(|p| header.find(p.as_str()).map(|i| i + p.len()))
                .min()
                .unwrap_or_else(|| panic!("{name}: its header does not say `{name} (…)`"));
            let facts = &header[at..at + header[at..].find(')').expect("closing parenthesis")];
            let pass = passel_engine::transform::get_pass(name).expect("registered");
            let info = pass.info();
            assert!(facts.contains(&format!("opt level {}", info.opt_level)), "{name}: header says ({facts})");
            let kind = match pass.kind() {
                passel_engine::transform::PassKind::Sequential => None,
                kind => Some(format!("{kind} pass")),
            };
            if let Some(kind) = kind {
                assert!(facts.contains(&kind), "{name}: header says ({facts}), the registry {kind}");
            }
            let stated: Vec<&str> =
                facts.split(", ").filter_map(|f| f.strip_prefix("requires ")).flat_map(|r| r.split(" and ")).collect();
            assert_eq!(stated, info.required, "{name}: header says ({facts})");
        }
    }
}
