//! passel passes: the standard pass library.
//!
//! Each pass lives in its own file as a pure function over one function (or a module, for
//! module-level passes) that returns its input `Arc` untouched when it changes nothing, and
//! with everything else about the pass: its registry name (`NAME`), its registration, and
//! `pass()`, the registered pass with its opt level, required passes and, for a module pass,
//! its per-function forms and incremental-session firewall. This file only names each pass
//! once (`declare_passes!`, which also makes [`standard_pass_names`]); `passel passes` lists the registry.
#![warn(missing_docs)]

mod census;
#[cfg(test)]
mod test_util;

mod pipelines;
mod scratch;
pub mod testing;

pub use pipelines::{
    build_pipeline, default_pipeline, lower_pass_names, lower_pipeline, run_pipeline_text, standard_session,
    tir_pipeline, STANDARD_PIPELINE, TIR_PIPELINE,
};

/// Declares the standard passes, each once: `file { NAMES } => { ITEMS };` makes `pub mod file`
/// (`file.rs`), re-exports its ITEMS, and lists its registry NAMES in
/// [`standard_pass_names`] (in table order) and, for the header test, with the file's source.
macro_rules! declare_passes {
    ($($file:ident { $($name:ident),+ } => { $($item:ident),* };)+) => {
        $(pub mod $file;)+
        $(pub use $file::{$($item),*};)+

        /// Names of the standard passes, in declaration order. Each pass file declares its own
        /// name, registration, opt level, required passes, per-function forms and session
        /// firewall; `declare_passes!` names each pass once.
        pub fn standard_pass_names() -> Vec<&'static str> {
            let mut names = vec![$($($file::$name),+),+];
            names.extend_from_slice(tir::PASS_NAMES);
            names
        }

        /// Each standard pass's name with the source of the file that declares it.
        #[cfg(test)]
        const PASS_SOURCES: &[(&str, &str)] =
            &[$($(($file::$name, include_str!(concat!(stringify!($file), ".rs")))),+),+];
    };
}

declare_passes! {
    infer_type { NAME } => { infer_function, infer_module, infer_type_function, infer_type_pass, type_errors, TypeDiagnostic };
    fold_constant { NAME } => { fold_constant };
    dead_code_elimination { NAME } => {
        dead_code_elimination, dead_code_elimination_module, dead_code_elimination_pass, remove_unreachable_functions
    };
    eliminate_common_subexpr { NAME } => { eliminate_common_subexpr };
    simplify_expr { NAME } => { simplify_expr };
    canonicalize_bindings { NAME } => { canonicalize_bindings };
    simplify_inference { NAME } => { simplify_inference };
    fold_scale_axis { BACKWARD_NAME, FORWARD_NAME, NAME } => { backward_fold_scale_axis, forward_fold_scale_axis };
    fuse_ops { NAME } => { fuse_ops };
    to_a_normal_form { NAME } => { is_a_normal_form, to_a_normal_form, to_a_normal_form_module };
    inline { NAME } => { inline_module };
    lambda_lift { NAME } => { lambda_lift_module };
    to_graph_normal_form { NAME } => { to_graph_normal_form, to_graph_normal_form_module };
    legalize_ops { NAME } => { legalize_ops };
    fuse_tir { NAME } => { fuse_tir };
}

/// The loop-level passes, declared once in `tir.rs` the same way.
pub mod tir;

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
        let sources: Vec<(&str, &str)> = PASS_SOURCES.iter().chain(tir::PASS_SOURCES).copied().collect();
        assert_eq!(sources.iter().map(|(n, _)| *n).collect::<Vec<_>>(), standard_pass_names());
        for &(name, source) in &sources {
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
