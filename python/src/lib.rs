//! `passel._passel`: the native half of the `passel` Python package.
//!
//! The pure-Python modules (`passel/ir.py`, `transform.py`, `instrument.py`) give TVM's names
//! and decorators; this extension holds the objects they wrap: modules and functions (sharing
//! the Rust `Arc`s, never copied across the boundary), pass handles, the pass context, the
//! instrument adapter, sessions and the interpreter.
//!
//! Threads and the GIL: every call that may run passes releases the GIL (`py.detach`) for its
//! whole duration, so Rust passes fan out over the rayon pool without Python. A Python pass
//! body or instrument callback re-attaches for the duration of that one call. Every Python
//! callback runs on the thread that called the engine: instruments and module passes by
//! nature, function passes because they are built `on_calling_thread` (a stage of their own,
//! run one function after the other there, while the Rust stages around them fan out over the
//! pool). So Python calls never wait for each other on pool workers, the calling thread never
//! holds the GIL while it waits for the pool (no deadlock), and the engine's serial = parallel
//! invariant covers Python passes too (they are called per function and merged in module
//! order, like Rust ones).
//!
//! Errors: a Python exception raised in a callback becomes a pass error whose message carries
//! the Python traceback; the exception itself is kept (`errors::record`) and raised again, as
//! itself, when the run returns to Python (TVM's behaviour). A `KeyboardInterrupt`
//! (Ctrl-C) cancels the run: later Python callbacks of that run are not called, and the
//! `KeyboardInterrupt` itself is raised to the caller once the engine has unwound (contexts
//! exited, pool idle).

mod errors;
mod instrument;
mod ir;
mod pass_info;
mod prim_handle;
mod session;
mod tir;
mod transform;
mod visitor;

use pyo3::prelude::*;

/// The native module; see the package docs for the API.
#[pymodule]
fn _passel(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Link the standard passes so their registrations are in the registry.
    passel_passes::standard_pass_names();
    errors::register(m)?;
    ir::register(m)?;
    transform::register(m)?;
    instrument::register(m)?;
    session::register(m)?;
    visitor::register(m)?;
    tir::register(m)?;
    Ok(())
}
