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
//!
//! ## Passes in brief
//!
//! [`transform`] holds the pass infrastructure: a [`Pass`] is a module-to-module
//! transformation with a [`PassInfo`]; it runs under a [`PassContext`] (opt level, required and
//! disabled passes, typed config, diagnostics, instruments) entered as a per-thread scope.
//! Passes are written with [`function_pass`], [`module_pass`] and [`sequential`], registered
//! with [`register_pass!`] and looked up with [`get_pass`]; textual pipelines such as
//! `FoldConstant,[EliminateCommonSubexpr,DeadCodeElimination]` parse with
//! [`transform::parse_pipeline`].
#![warn(missing_docs)]

pub mod frontend;
pub mod interp;
pub mod ir;
pub mod op;
pub mod session;
pub mod tir;
pub mod transform;
mod util;

pub use session::{
    decode_source, encode_source, prints_alone, source_key, FirewallCheck, MemoryMode, MemoryStore, ModuleFirewall,
    ModuleSplit, PendingRun, RecordRun, RunRecord, RunStats, Session, SessionError, SessionOutput, StageKey,
    StageStats, StageStore, STORE_FORMAT,
};
pub use transform::{
    function_pass, get_pass, module_pass, sequential, Instrument, Pass, PassContext, PassError, PassInfo, Sequential,
};
pub use util::{edit_distance, escape_invisible, shown_message, shown_name, suggest, MAX_SHOWN_NAME_CHARS};

#[doc(hidden)]
pub use inventory;
