//! The built-in instruments: timing, printing and dumping IR.

mod dump_ir;
mod print_ir;
mod timing;

pub use dump_ir::DumpIrInstrument;
pub use print_ir::{PrintIr, PrintIrInstrument};
pub use timing::PassTimingInstrument;
