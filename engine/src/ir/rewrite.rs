//! The rewriting layer: the one way a pass changes a function.
//!
//! A function is immutable; a pass that changes one makes a new one from it, through one of
//! these entry points (cheapest first):
//!
//! - **Patch** ([`Function::substituted`], [`Function::with_constants_forwarded`],
//!   `patch.rs`): a copy of the arena with operands replaced, bindings removed or values
//!   turned into constants in place. Nothing is pushed and every id stays; `None` when the
//!   patch cannot be sure (a replacement would not precede its user, a block would lose every
//!   binding, two nodes share binding slots…).
//! - **[`substitute`]**: the patch with its fallback, for passes that only merge, forward or
//!   delete values (EliminateCommonSubexpr, DeadCodeElimination): tries
//!   [`Function::substituted`] and, when it refuses, makes the same change with a
//!   [`Rewriter`] copy.
//! - **[`Rewriter`]** (`rewriter.rs`): the arena-order copy with an old→new memo, for passes
//!   that replace compound nodes by new ones (FoldConstant, SimplifyExpr, FuseOps, …). Two
//!   modes, chosen from the input's garbage: *append* reuses every unchanged node by its id and
//!   pushes only what changed (and its users up to the enclosing binding); *compact* copies the
//!   live nodes into a fresh arena. [`Propagate`] chooses which let-bound atoms are substituted
//!   into their uses.
//! - **[`Copier`]** (`copier.rs`): the evaluation-order copy of a subtree into a builder that
//!   may belong to another function, with enter/exit hooks ([`CopyHooks`]), for passes that
//!   move code between functions or need a binding's value copied before every use of its
//!   variable (Inline, LambdaLift, ToANormalForm, ToGraphNormalForm).
//! - **[`ExprMutator`] + [`mutate`]** (`mutator.rs`): TVM's expression mutator, the public
//!   API for rewrites written outside this workspace; a copy into a fresh arena with hooks on
//!   every node, driven by the [`Rewriter`]'s memo and copies (see its header).
//!
//! Which to use: a pass that only removes or redirects values calls [`substitute`] (or a
//! patch directly when it has a different fallback: FoldConstant's is its own folding copy);
//! a pass that builds new nodes in place of old ones runs a [`Rewriter`]; a pass that copies
//! code into another function, or whose arena may be out of evaluation order after append
//! mode, uses the [`Copier`]. All of them are loops over ids or explicit stacks, never a
//! recursion over the input, and all return `None` (the pass then returns its input `Arc`)
//! when nothing changed.
//!
//! Every way to make a changed function, in one table (nothing else in `ir/` makes one):
//!
//! | entry point | changes | use it for |
//! |---|---|---|
//! | [`substitute`] / [`Function::substituted`] | operands redirected, bindings removed | merging, forwarding, deleting values (CSE, DCE, SimplifyExpr's forwarding identities) |
//! | [`Function::with_constants_forwarded`] | values turned into constants in place | FoldConstant's fast path |
//! | [`Rewriter`] | compound nodes replaced by new ones | folding, simplifying, fusing (FoldConstant, SimplifyExpr, FuseOps, …) |
//! | [`Copier`] / [`copy_function`] | a subtree copied into another builder | moving code between functions (Inline, LambdaLift, ToANormalForm, ToGraphNormalForm) |
//! | [`ExprMutator`] + [`mutate`] | any node, through hooks | rewrites written outside the workspace (TVM's `ExprMutator`; the Python `ExprMutator`) |
//! | [`Function::with_types`], [`Function::with_type_table`] | node types only (the arena is shared) | InferType and passes that retype without restructuring |
//! | [`Function::with_attrs`] | function attributes only | attribute passes (`Primitive`, `SkipOptimization`, …) |
//! | [`Function::to_builder`] / [`Function::builder_sharing_names`] | — (a builder to push into) | the [`Rewriter`]'s append and compact modes; building a stub that keeps the input's names |
//!
//! The helpers below ([`bound_values`], [`for_each_use`], [`eval_order`]) are the facts about
//! the input that these rewrites and the passes driving them share.

mod copier;
mod mutator;
mod patch;
mod rewriter;

pub use copier::{copy_function, copy_params, Copier, CopyHooks, NoHooks, MAX_PREFIXED_NAME};
pub use mutator::{mutate, ExprMutator, RewriteCx};
pub use rewriter::{Propagate, Rewriter};

use crate::ir::{ExprKind, Function, NodeId};

/// "No node" in memo tables (and "keep" in a patch's substitution table).
pub const NONE: NodeId = NodeId(u32::MAX);

/// `func` with every operand `o` replaced by `subst[o]` (followed to the end of a chain;
/// [`NONE`] keeps it) and the bindings of the variables `v` with `dropped[v]` removed: the
/// in-place patch [`Function::substituted`] when it applies, else the same change made by a
/// [`Rewriter`] copy (a dropped variable with a replacement is aliased to it, a replaced
/// compound node is replaced by the copy of its replacement). `None` when nothing changed or
/// the input is malformed (the caller keeps its input).
///
/// The copy cannot redirect the uses of a variable that keeps its binding (or of a
/// parameter): when the patch refuses such a change, the result is `None` too.
pub fn substitute(func: &Function, subst: &[NodeId], dropped: &[bool]) -> Option<Function> {
    func.substituted(subst, dropped).or_else(|| substitute_by_copy(func, subst, dropped))
}

/// The copying half of [`substitute`]: the same change made by a [`Rewriter`] copy, whatever
/// the arena's layout (tests pin it equal to the patch wherever the patch applies).
pub fn substitute_by_copy(func: &Function, subst: &[NodeId], dropped: &[bool]) -> Option<Function> {
    let n = func.num_nodes();
    if subst.len() != n || dropped.len() != n {
        return None;
    }
    let mut rw = Rewriter::new(func, Propagate::Nothing);
    let mut any_compound = false;
    for (i, (&target, &d)) in subst.iter().zip(dropped).enumerate() {
        let id = NodeId(i as u32);
        match (target != NONE, d) {
            (true, true) => rw.alias(id, target),
            (false, true) => rw.drop_binding(id),
            // A variable whose uses change but whose binding stays: not expressible as a copy.
            (true, false) if func.kind(id).is_atom() => return None,
            (true, false) => any_compound = true,
            (false, false) => {}
        }
    }
    if !any_compound {
        return rw.run(|_, _| None);
    }
    rw.run(|rw, id| {
        let target = subst[id.index()];
        (target != NONE).then(|| rw.map(target))
    })
}

/// Calls `f` on each node that `id` uses: a block's bound values and result (not its binder
/// variables), a nested function's body, and any other node's operands. Summed over the live
/// nodes, this gives every node's number of users.
#[inline]
pub fn for_each_use(func: &Function, id: NodeId, mut f: impl FnMut(NodeId)) {
    match *func.kind(id) {
        ExprKind::Block { bindings, result } => {
            for (_, value) in func.bindings(bindings) {
                f(value);
            }
            f(result);
        }
        ExprKind::Func { idx } => f(func.closure(idx).body),
        _ => func.for_each_operand(id, f),
    }
}

/// Old binding variable → its value, over the live blocks ([`NONE`] when unbound or bound
/// twice).
pub fn bound_values(func: &Function) -> Vec<NodeId> {
    bound_values_of_live(func, &func.live_mask())
}

/// [`bound_values`] with the function's [`Function::live_mask`] already at hand.
pub fn bound_values_of_live(func: &Function, live: &[bool]) -> Vec<NodeId> {
    let mut bound = Vec::new();
    bound_values_into(func, live, &mut bound);
    bound
}

/// [`bound_values_of_live`] into a caller's buffer (cleared first).
pub fn bound_values_into(func: &Function, live: &[bool], bound: &mut Vec<NodeId>) {
    bound.clear();
    bound.resize(func.num_nodes(), NONE);
    let mut twice = Vec::new();
    // Only live blocks count: append mode leaves the old copy of a rewritten block behind, and
    // its bindings must not make every variable look bound twice.
    for (node, _) in func.nodes().iter().zip(live).filter(|(_, &l)| l) {
        if let ExprKind::Block { bindings, .. } = node.kind {
            for (var, value) in func.bindings(bindings) {
                if bound[var.index()] != NONE {
                    twice.push(var);
                }
                bound[var.index()] = value;
            }
        }
    }
    for v in twice {
        bound[v.index()] = NONE;
    }
}

/// The live nodes in evaluation order: operands before their users and, in a block, each
/// binding's value before the later bindings and the result. Unlike arena order this puts a
/// let-bound value before every use of its variable also in arenas that append mode rewrote
/// (where an unchanged user keeps its small id and a rewritten value gets a large one).
/// Iterative, so any depth works.
pub fn eval_order(func: &Function) -> Vec<NodeId> {
    const NEW: u8 = 0;
    const OPEN: u8 = 1;
    const DONE: u8 = 2;
    let n = func.num_nodes();
    let mut state = vec![NEW; n];
    let mut out = Vec::with_capacity(n);
    // Parameters first, then the body.
    let mut stack = vec![func.body()];
    stack.extend(func.params().iter().rev());
    let mut operands = Vec::new();
    while let Some(&id) = stack.last() {
        let Some(s) = state.get(id.index()).copied() else {
            stack.pop();
            continue;
        };
        match s {
            NEW => {
                state[id.index()] = OPEN;
                operands.clear();
                // Operands have smaller ids in a well-formed arena; anything else is skipped
                // so that a malformed arena cannot loop.
                func.for_each_operand(id, |o| {
                    if o.0 < id.0 {
                        operands.push(o)
                    }
                });
                stack.extend(operands.iter().rev().filter(|o| state[o.index()] == NEW));
            }
            OPEN => {
                stack.pop();
                state[id.index()] = DONE;
                out.push(id);
            }
            _ => {
                stack.pop();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::ir::{structural_eq, verify_function, Attrs, Constant, FunctionBuilder, OpId};

    fn op(name: &str) -> OpId {
        crate::op::lookup(name).expect("built-in operator")
    }

    /// DeadCodeElimination only dropped and EliminateCommonSubexpr only aliased through their
    /// own copies; the one entry point does both in one copy, here where the patch refuses (the
    /// inner block would lose every binding).
    #[test]
    fn substitute_drops_and_aliases_in_one_copy_when_the_patch_refuses() {
        // fn (%x) { let %a = relu(%x); { let %b = relu(%x); let %d = sigmoid(%x); (%b, %a) } }
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let av = b.call(op("relu"), &[x], Attrs::new());
        let a = b.var("a", None);
        let bv = b.call(op("relu"), &[x], Attrs::new());
        let bb = b.var("b", None);
        let dv = b.call(op("sigmoid"), &[x], Attrs::new());
        let d = b.var("d", None);
        let tup = b.tuple(&[bb, a]);
        let inner = b.block(&[(bb, bv), (d, dv)], tup);
        let body = b.block(&[(a, av)], inner);
        let func = b.finish(&[x], body, None, Attrs::new());
        let n = func.num_nodes();
        let (mut subst, mut dropped) = (vec![NONE; n], vec![false; n]);
        subst[bb.index()] = a;
        dropped[bb.index()] = true;
        dropped[d.index()] = true;
        assert!(func.substituted(&subst, &dropped).is_none(), "the patch cannot empty a block");
        let out = substitute(&func, &subst, &dropped).expect("the copy can");
        assert!(verify_function(None, "main", &out).is_ok());

        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let av = b.call(op("relu"), &[x], Attrs::new());
        let a = b.var("a", None);
        let tup = b.tuple(&[a, a]);
        let body = b.block(&[(a, av)], tup);
        let expected = b.finish(&[x], body, None, Attrs::new());
        assert!(structural_eq(&out, &expected));
        // A variable that keeps its binding cannot be redirected by the copy: no result
        // rather than a wrong one.
        dropped[bb.index()] = false;
        assert!(substitute_by_copy(&func, &subst, &dropped).is_none());
    }

    /// Replaces the uses of one old variable by a constant.
    struct ConstFor(NodeId);

    impl ExprMutator for ConstFor {
        fn rewrite(&mut self, cx: &mut RewriteCx<'_>, old: NodeId, _: &ExprKind) -> Option<NodeId> {
            (old == self.0).then(|| cx.constant_node(Constant::scalar_f32(3.0)))
        }
    }

    /// The mutator's binder slots are the rewriter's: a substituted closure parameter stays a
    /// parameter (the old mutator kept its own copy per variable; the rewriter had no
    /// substitution of variables by new nodes before).
    #[test]
    fn mutate_keeps_a_substituted_closure_parameter_in_its_slot() {
        // fn (%x) { let %f = fn (%p) { add(%p, %x) }; %f }
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let p = b.var("p", None);
        let s = b.call(op("add"), &[p, x], Attrs::new());
        let fv = b.closure(&[p], s, None, Attrs::new());
        let f = b.var("f", None);
        let body = b.block(&[(f, fv)], f);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let out = mutate(&func, &mut ConstFor(p));
        assert!(verify_function(None, "main", &out).is_ok());

        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let p = b.var("p", None);
        let three = b.constant(Constant::scalar_f32(3.0));
        let s = b.call(op("add"), &[three, x], Attrs::new());
        let fv = b.closure(&[p], s, None, Attrs::new());
        let f = b.var("f", None);
        let body = b.block(&[(f, fv)], f);
        let expected = b.finish(&[x], body, None, Attrs::new());
        assert!(structural_eq(&out, &expected));
    }

    /// Replaces each call of `relu` by an application of the global `@act` to the same
    /// argument.
    struct ReluToGlobal;

    impl ExprMutator for ReluToGlobal {
        fn rewrite(&mut self, cx: &mut RewriteCx<'_>, _: NodeId, kind: &ExprKind) -> Option<NodeId> {
            let arg = cx.call_arg(kind, op("relu"), 0)?;
            let act = cx.global("act");
            Some(cx.apply(act, &[arg]))
        }
    }

    /// `RewriteCx::apply` builds a call of a global; an argument used twice stays a tree.
    #[test]
    fn mutate_can_replace_an_operator_call_by_an_apply_of_a_global() {
        // fn (%x) { let %a = relu(sigmoid(%x)); %a }
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let s = b.call(op("sigmoid"), &[x], Attrs::new());
        let r = b.call(op("relu"), &[s], Attrs::new());
        let a = b.var("a", None);
        let body = b.block(&[(a, r)], a);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let out = mutate(&func, &mut ReluToGlobal);
        assert!(verify_function(None, "main", &out).is_ok());

        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let s = b.call(op("sigmoid"), &[x], Attrs::new());
        let act = b.global("act");
        let r = b.apply(act, &[s]);
        let a = b.var("a", None);
        let body = b.block(&[(a, r)], a);
        let expected = b.finish(&[x], body, None, Attrs::new());
        assert!(structural_eq(&out, &expected));
    }
}
