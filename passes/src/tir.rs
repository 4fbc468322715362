//! The loop-level pass library: PrimFunc passes with TVM's `tir.transform` names, configs and
//! semantics, one pass per file.

pub mod simplify;
