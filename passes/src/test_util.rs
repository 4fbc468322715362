//! Helpers shared by the passes' unit tests.

use passel_engine::ir::{parse_module, ExprKind, Function, Module};

/// Parses `text` and types it with InferType; panics (failing the test) on a parse or type
/// error, naming the errors.
pub(crate) fn typed(text: &str) -> Module {
    let module = parse_module(text).expect("test input parses");
    let (module, diags) = crate::infer_module(&module);
    assert!(diags.is_empty(), "type errors: {:?}", diags.iter().map(|d| &d.message).collect::<Vec<_>>());
    module
}

/// Number of bindings in live blocks (dead arena nodes left by append mode do not count).
pub(crate) fn live_bindings(func: &Function) -> usize {
    let live = func.live_mask();
    func.nodes()
        .iter()
        .zip(live)
        .map(|(n, l)| match n.kind {
            ExprKind::Block { bindings, .. } if l => bindings.len as usize / 2,
            _ => 0,
        })
        .sum()
}
