//! Printer of the `.pir` text format. (Interim: replaced by the real printer.)

use super::function::Function;
use super::module::Module;

/// Prints a module in canonical text.
pub fn print_module(m: &Module) -> String {
    let mut out = String::new();
    for (name, f) in m.iter() {
        out.push_str(&print_function(name, f));
    }
    out
}

/// Prints one global function `@name` in canonical text.
pub fn print_function(name: &str, f: &Function) -> String {
    format!("def @{name} {f:?}\n")
}
