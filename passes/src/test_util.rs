//! Helpers shared by the passes' unit tests.

use passel_engine::ir::{parse_module, Module};

/// Parses `text` and types it with InferType; panics (failing the test) on a parse or type
/// error, naming the errors.
pub(crate) fn typed(text: &str) -> Module {
    let module = parse_module(text).expect("test input parses");
    let (module, diags) = crate::infer_module(&module);
    assert!(diags.is_empty(), "type errors: {:?}", diags.iter().map(|d| &d.message).collect::<Vec<_>>());
    module
}
