//! The built-in instruments: timing, printing and dumping IR, crash reproducers.

mod dump_ir;
mod line_diff;
mod print_ir;
mod reproducer;
mod timing;

pub use dump_ir::DumpIrInstrument;
pub use line_diff::unified_diff;
pub use print_ir::{PrintIr, PrintIrInstrument};
pub use reproducer::{reproducer_pipeline, PassFailure, ReproducerError, ReproducerInstrument};
pub use timing::PassTimingInstrument;
