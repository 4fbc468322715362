//! The loop-level pass library: PrimFunc passes with TVM's `tir.transform` names, configs and
//! semantics, one pass per file.

mod copy;
pub mod remove_no_op;
pub mod simplify;
pub mod unroll_loop;
