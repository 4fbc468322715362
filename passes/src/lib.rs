//! passel passes: the standard pass library. Each pass is a pure function over one function
//! (or a module, for module-level passes) that returns its input `Arc` untouched when it
//! changes nothing. This file will become the registration table; it only declares modules
//! and re-exports their entry points.
#![warn(missing_docs)]

mod rewrite;

pub mod canonicalize_bindings;
pub mod dead_code_elimination;
pub mod eliminate_common_subexpr;
pub mod fold_constant;
pub mod infer_type;
pub mod simplify_expr;

pub use canonicalize_bindings::canonicalize_bindings;
pub use dead_code_elimination::{dead_code_elimination, dead_code_elimination_module, remove_unreachable_functions};
pub use eliminate_common_subexpr::eliminate_common_subexpr;
pub use fold_constant::fold_constant;
pub use infer_type::{infer_function, infer_module, TypeDiagnostic};
pub use simplify_expr::simplify_expr;
