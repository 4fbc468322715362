//! # passel-engine
//!
//! The IR, its text format, the operator library and interpreter, and the pass infrastructure
//! of passel. See `docs/architecture.md` for the code map and `docs/text-format.md` for the
//! grammar of `.pir` text.
//!
//! ## The IR in brief
//!
//! A [`Module`](ir::Module) is an ordered map from global names to
//! [`Function`](ir::Function)s. A function owns an arena of [`Node`](ir::Node)s addressed by
//! [`NodeId`](ir::NodeId) in post-order: every operand has a smaller id than its user, so a
//! forward loop over ids visits operands first and no traversal recurses.
//!
//! Expressions ([`ExprKind`](ir::ExprKind)) are variables, global references, constants,
//! operator calls with attributes, calls of function values, tuples, projections, `if`,
//! nested functions and blocks of let-bindings. Expressions are trees: only atoms (variables,
//! globals, constants) are referenced from several places, and a computed value is shared by
//! binding it to a variable. Types are tensors (static shape, dtype), tuples and functions.
//!
//! Functions are immutable, `Send + Sync` and shared by `Arc`; a pass that changes nothing
//! returns the same `Arc`.
#![warn(missing_docs)]

pub mod interp;
pub mod ir;
pub mod op;
mod util;

pub use util::{edit_distance, suggest};
