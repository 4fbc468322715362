//! The loop level (TVM's tir): [`PrimFunc`]s — functions over buffers whose bodies are loops,
//! stores and scalar expressions.
//!
//! A second floor of the IR, not a second engine: a [`Module`](crate::ir::Module) holds graph
//! functions and PrimFuncs side by side, the graph level calls a PrimFunc with `call_tir`
//! (destination passing, as Relax does), and PrimFunc passes go through the same planner,
//! runner, fan-out, instruments and session as graph function passes.
//!
//! ## The IR in brief
//!
//! A PrimFunc owns four arenas, each in post-order like a graph function's (every operand or
//! child has a smaller id than its user, so a forward loop visits operands first and nothing
//! recurses on input depth):
//! - scalar and vector expressions ([`PExpr`], addressed by [`PExprId`]): integer and float
//!   immediates, variables, arithmetic (`floordiv` / `floormod` included), min / max,
//!   comparisons, logic, `select`, casts, buffer loads, intrinsic calls ([`Intrinsic`]),
//!   `ramp` / `broadcast` vectors and `let`;
//! - statements ([`Stmt`], addressed by [`StmtId`]): `for` (serial, parallel, vectorized,
//!   unrolled), buffer stores, `let`, `if`, sequences, `alloc` (a fresh buffer), `decl` (a view
//!   of another buffer's data), `eval` and `attr`;
//! - variables ([`Var`]) and buffers ([`Buffer`]: name, dtype, static shape, strides, element
//!   offset, scope).
//!
//! Expressions are trees, as at the graph level: only variables are shared. Types are a dtype
//! and a lane count ([`PType`]).
//!
//! Text: `prim @name(%A: Buffer[(4, 4), f32], %n: i64) { … }` in a `.pir` module
//! (parsed by [`parse_module`](crate::ir::parse_module), printed by [`print_prim_func`]; the
//! grammar is in `docs/tir.md`).

mod builder;
pub mod compute;
mod ir;
pub mod lower;
mod printer;
mod structural;
mod verifier;

pub use builder::PrimFuncBuilder;
pub(crate) use ir::PrimFuncParts;
pub use ir::{
    BinOp, BufId, Buffer, ForKind, IdRange, Intrinsic, PExpr, PExprId, PExprKind, PType, Param, PrimFunc, Stmt, StmtId,
    StmtKind, Var, VarId, MAX_LANES,
};
pub use printer::{print_prim_func, write_prim_func};
pub use structural::{prim_structural_eq, prim_structural_hash, prim_structural_key, tree_verdict};
pub use verifier::{verify_prim_func, TirVerifyError, MAX_STMT_DEPTH};
