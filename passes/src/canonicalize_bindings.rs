//! CanonicalizeBindings (function pass, opt level 1): removes trivial rebindings.
//!
//! What it does: a binding whose value is an atom — `let %y = %x;`, `let %y = @f;`,
//! `let %y = 1f;` — is removed and its variable replaced by the atom in every use, following
//! chains (`let b = a; let c = b;`) to their end.
//!
//! What it deliberately does not do: remove bindings of compound values (even unused ones:
//! that is DeadCodeElimination), or flatten nested blocks.
//!
//! Phases:
//! 1. Quick scan for a live binding whose value is an atom; none → the same `Arc`.
//! 2. One copy of the live nodes ([`passel_engine::ir::rewrite::Rewriter`] with atom propagation).

use std::sync::Arc;

use passel_engine::ir::{ExprKind, Function};

use crate::census::{fewer, Counter};
use passel_engine::ir::rewrite::{Propagate, Rewriter};
use passel_engine::transform::Statistic;

/// This pass's statistics (`passel run --stats`), read off the census of each function it
/// changed (net counts: before − after).
/// The registry name.
pub const NAME: &str = "CanonicalizeBindings";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// The `CanonicalizeBindings` pass as registered: name, opt level, required passes and, for a module pass,
/// its per-function forms and session firewall.
pub fn pass() -> passel_engine::transform::FunctionPass {
    passel_engine::transform::function_pass(NAME, 1, |func, _module, ctx| {
        Ok(crate::census::counted(ctx, &func, canonicalize_bindings(&func), STATISTICS))
    })
}

pub(crate) static STATISTICS: &[Counter] = &[(&BINDINGS_REMOVED, |b, a| fewer(b.bindings, a.bindings))];
static BINDINGS_REMOVED: Statistic =
    Statistic::new("CanonicalizeBindings", "bindings removed", "var-to-var rebindings forwarded away");

/// Runs CanonicalizeBindings on `func`; returns `func` itself when there is no rebinding.
pub fn canonicalize_bindings(func: &Arc<Function>) -> Arc<Function> {
    let has_rebinding = func.nodes().iter().any(|n| match n.kind {
        ExprKind::Block { bindings, .. } => func.bindings(bindings).any(|(_, value)| func.kind(value).is_atom()),
        _ => false,
    });
    if !has_rebinding || !func.is_well_formed() {
        return Arc::clone(func);
    }
    match Rewriter::new(func, Propagate::Atoms).run(|_, _| None) {
        Some(f) => Arc::new(f),
        None => Arc::clone(func),
    }
}

#[cfg(test)]
mod tests {
    use passel_engine::ir::{Attrs, FunctionBuilder};
    use passel_engine::op;

    use super::*;

    #[test]
    fn canonicalize_bindings_keeps_compound_bindings() {
        let relu = op::lookup("relu").unwrap();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let v = b.call(relu, &[x], Attrs::new());
        let a = b.var("a", None);
        let dead = b.call(relu, &[x], Attrs::new());
        let d = b.var("d", None);
        let body = b.block(&[(a, v), (d, dead)], a);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        assert!(Arc::ptr_eq(&canonicalize_bindings(&func), &func));
    }

    #[test]
    fn canonicalize_bindings_follows_long_chains_without_recursion() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let mut pairs = Vec::new();
        let mut cur = x;
        for i in 0..200_000 {
            let v = b.var(&format!("v{i}"), None);
            pairs.push((v, cur));
            cur = v;
        }
        let body = b.block(&pairs, cur);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let out = canonicalize_bindings(&func);
        assert_eq!(out.body(), out.params()[0]);
    }
}
