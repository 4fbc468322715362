//! The built-in instruments: timing, printing and dumping IR.

mod dump_ir;
mod line_diff;
mod print_ir;
mod timing;

pub use dump_ir::DumpIrInstrument;
pub use line_diff::unified_diff;
pub use print_ir::{PrintIr, PrintIrInstrument};
pub use timing::PassTimingInstrument;
