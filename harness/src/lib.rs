//! passel-harness: the `passel` CLI, deterministic workload generators shared by tests,
//! benches and fuzzing, and the bench runner. This is the only crate that does IO.

pub mod args;
pub mod bench;
pub mod cache;
pub mod cmd;
pub mod conformance;
pub mod console;
pub mod debug;
pub mod diag;
pub mod eval;
pub mod files;
pub mod fuzz;
pub mod gen;
pub mod incremental_bench;
pub mod notes;
pub mod npy;
pub mod onnx;
pub mod watch;
