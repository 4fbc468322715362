//! DeadCodeElimination (module pass, opt level 1, requires InferType): removes bindings whose
//! variable is never used, and global functions that no entry point reaches.
//!
//! What it does:
//! - per function ([`dead_code_elimination`]): removes `let %v = value;` when `%v` has no
//!   use, including uses that only became dead because another binding was removed
//!   (`let a = f(x); let b = g(a);` with `b` unused removes both);
//! - per module ([`remove_unreachable_functions`]): keeps the entry points — `@main` and every
//!   function with the `Exported` attribute ([`fn_attr::EXPORTED`]) — and every function they
//!   reach through global references (calls or function values), removing the rest.
//!
//! What it deliberately does not do:
//! - remove a binding whose value contains a stateful operator call, or an `Apply` of any
//!   function value: the callee might have effects and a function pass cannot see its body,
//!   so such calls are conservatively kept;
//! - remove anything from a module without entry points: that is a library, and every
//!   function in it may be used from outside;
//! - remove unused function parameters (that changes the signature) or simplify expressions.
//!
//! Phases (function level):
//! 1. Count the uses of every variable among live nodes and mark the values that contain an
//!    effect.
//! 2. One backward sweep over each block's bindings, innermost blocks first (they have
//!    smaller ids): a pure binding with no uses is removed, and the uses inside its value
//!    are uncounted (a walk with an explicit stack), so earlier bindings that only it used
//!    are removed in the same sweep. Inner blocks go first because removing a binding there
//!    can free a variable of an enclosing block, never the other way round (a removed outer
//!    value is uncounted as a whole, skipping the inner bindings already removed).
//! 3. Cut the removed bindings out ([`rewrite::substitute`]: a patched copy of the arena, or,
//!    when the patch is refused, a copy of the live nodes without them); nothing removed →
//!    the same `Arc`.

use std::cell::RefCell;
use std::collections::HashSet;
use std::sync::Arc;

use passel_engine::ir::{fn_attr, AttrValue, ExprKind, Function, Module, NodeId};
use passel_engine::op;
use passel_engine::transform::{PassContext, PassError};

use crate::scratch::{self, with_scratch};
use crate::census::{counted, fewer, Counter};
use passel_engine::ir::rewrite::{self, NONE};
use passel_engine::transform::Statistic;

/// This pass's statistics (`passel run --stats`), read off the census of each function it
/// changed (net counts: before − after).
/// The registry name.
pub const NAME: &str = "DeadCodeElimination";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// The `DeadCodeElimination` pass as registered: name, opt level, required passes and, for a module pass,
/// its per-function forms and session firewall.
pub fn pass() -> passel_engine::transform::ModulePass {
    passel_engine::transform::module_pass(NAME, 1, dead_code_elimination_pass)
        .with_prelude_and_function_form(reachability_prelude, |func, _module, ctx| {
            Ok(crate::census::counted(ctx, &func, dead_code_elimination(&func), STATISTICS))
        })
        .with_required(&["InferType"])
        .with_firewall(reachability_unaffected)
}

/// The session firewall of the reachability prelude: which functions are reachable depends
/// only on each function's entry status and the globals its live nodes reference.
fn reachability_unaffected(c: &passel_engine::transform::FirewallCheck<'_>) -> bool {
    is_entry(c.name, c.old) == is_entry(c.name, c.new) && c.old.live_globals() == c.new.live_globals()
}

pub(crate) static STATISTICS: &[Counter] = &[(&BINDINGS_REMOVED, |b, a| fewer(b.bindings, a.bindings))];
static BINDINGS_REMOVED: Statistic =
    Statistic::new("DeadCodeElimination", "bindings removed", "unused let-bindings dropped");
/// Counted by the reachability prelude: functions no entry point reaches.
pub(crate) static FUNCTIONS_REMOVED: Statistic =
    Statistic::new("DeadCodeElimination", "functions removed", "functions no entry point reaches");

/// Per-thread buffers reused across functions (cleared, not freed).
#[derive(Default)]
struct Scratch {
    live: Vec<bool>,
    uses: Vec<u32>,
    impure: Vec<bool>,
    dropped: Vec<bool>,
    keep: Vec<NodeId>,
    blocks: Vec<NodeId>,
    stack: Vec<NodeId>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

/// Removes unused pure bindings of `func`; returns `func` itself when none is unused.
pub fn dead_code_elimination(func: &Arc<Function>) -> Arc<Function> {
    if !func.nodes().iter().any(|n| matches!(n.kind, ExprKind::Block { .. })) || !func.is_well_formed() {
        return Arc::clone(func);
    }
    with_scratch(&SCRATCH, |s| eliminate(func, s))
}

impl scratch::Scratch for Scratch {
    fn retained(&self) -> usize {
        self.live.capacity()
    }
}

fn eliminate(func: &Arc<Function>, s: &mut Scratch) -> Arc<Function> {
    let n = func.num_nodes();
    let Scratch { live, uses, impure, dropped, keep, blocks, stack } = s;
    live.clear();
    live.resize(n, false);
    uses.clear();
    uses.resize(n, 0);
    blocks.clear();
    // Phase 1, one backward sweep (operands have smaller ids than their users): the live
    // nodes, the uses of every node among them, and whether any of them has an effect.
    for &p in func.params() {
        live[p.index()] = true;
    }
    live[func.body().index()] = true;
    let mut any_effect = false;
    for i in (0..n).rev() {
        if !live[i] {
            continue;
        }
        let id = NodeId(i as u32);
        match *func.kind(id) {
            ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => {}
            ExprKind::Call { op, args, .. } => {
                any_effect |= op::is_stateful(op);
                for &o in func.ids(args) {
                    live[o.index()] = true;
                    uses[o.index()] += 1;
                }
            }
            ExprKind::Tuple { fields } => {
                for &o in func.ids(fields) {
                    live[o.index()] = true;
                    uses[o.index()] += 1;
                }
            }
            ExprKind::Block { bindings, result } => {
                blocks.push(id);
                for pair in func.ids(bindings).chunks_exact(2) {
                    live[pair[0].index()] = true;
                    live[pair[1].index()] = true;
                    uses[pair[1].index()] += 1;
                }
                live[result.index()] = true;
                uses[result.index()] += 1;
            }
            ExprKind::Func { idx } => {
                // The parameters are live but not uses.
                let c = func.closure(idx);
                for &p in func.ids(c.params) {
                    live[p.index()] = true;
                }
                live[c.body.index()] = true;
                uses[c.body.index()] += 1;
            }
            kind => {
                any_effect |= matches!(kind, ExprKind::Apply { .. });
                func.for_each_operand(id, |o| {
                    live[o.index()] = true;
                    uses[o.index()] += 1;
                });
            }
        }
    }
    // Which values contain an effect, forwards; only needed when some live node has one.
    impure.clear();
    if any_effect {
        impure.resize(n, false);
        for i in 0..n {
            if !live[i] {
                continue;
            }
            let id = NodeId(i as u32);
            impure[i] = match *func.kind(id) {
                ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } | ExprKind::Func { .. } => {
                    false
                }
                ExprKind::Apply { .. } => true,
                ExprKind::Call { op, args, .. } => {
                    op::is_stateful(op) || func.ids(args).iter().any(|o| impure[o.index()])
                }
                ExprKind::Block { bindings, result } => {
                    impure[result.index()] || func.bindings(bindings).any(|(_, value)| impure[value.index()])
                }
                _ => {
                    let mut imp = false;
                    func.for_each_operand(id, |o| imp |= impure[o.index()]);
                    imp
                }
            };
        }
    }

    // Phase 2: innermost blocks (smaller ids) first.
    dropped.clear();
    dropped.resize(n, false);
    let mut any = false;
    for &block in blocks.iter().rev() {
        let ExprKind::Block { bindings, .. } = *func.kind(block) else { continue };
        for pair in func.ids(bindings).chunks_exact(2).rev() {
            let (var, value) = (pair[0], pair[1]);
            if uses[var.index()] != 0 || dropped[var.index()] || (any_effect && impure[value.index()]) {
                continue;
            }
            dropped[var.index()] = true;
            any = true;
            uncount(func, value, dropped, uses, stack);
        }
    }
    if !any {
        return Arc::clone(func);
    }
    // Phase 3: usually the bindings can be cut out of a copy of the arena; otherwise rebuild.
    keep.clear();
    keep.resize(n, NONE);
    match rewrite::substitute(func, keep, dropped) {
        Some(f) => Arc::new(f),
        None => Arc::clone(func),
    }
}

/// Subtracts the uses made by the expression `root` (skipping removed bindings).
fn uncount(func: &Function, root: NodeId, dropped: &[bool], uses: &mut [u32], stack: &mut Vec<NodeId>) {
    let visit = |o: NodeId, uses: &mut [u32], stack: &mut Vec<NodeId>| match func.kind(o) {
        ExprKind::Var { .. } => uses[o.index()] = uses[o.index()].saturating_sub(1),
        kind if kind.is_atom() => {}
        _ => stack.push(o),
    };
    stack.clear();
    visit(root, uses, stack);
    while let Some(id) = stack.pop() {
        match *func.kind(id) {
            ExprKind::Block { bindings, result } => {
                for (var, value) in func.bindings(bindings) {
                    if !dropped[var.index()] {
                        visit(value, uses, stack);
                    }
                }
                visit(result, uses, stack);
            }
            ExprKind::Func { idx } => visit(func.closure(idx).body, uses, stack),
            _ => func.for_each_operand(id, |o| visit(o, uses, stack)),
        }
    }
}

/// The registered module pass: [`dead_code_elimination_module`] with the per-function work on
/// the executor's workers (`ctx.map_functions`).
pub fn dead_code_elimination_pass(m: Module, ctx: &PassContext) -> Result<Module, PassError> {
    let out = reachability_prelude(&m, ctx);
    drop(m);
    let new = ctx.map_functions("DeadCodeElimination", &out, |worker, _, func| {
        Ok(counted(worker, func, dead_code_elimination(func), STATISTICS))
    })?;
    Ok(ctx.replace_functions(out, new))
}

/// The pass's module-wide prelude: [`remove_unreachable_functions`], counting them.
pub(crate) fn reachability_prelude(m: &Module, ctx: &PassContext) -> Module {
    let out = remove_unreachable_functions(m);
    FUNCTIONS_REMOVED.add(ctx, fewer(m.len() as u64, out.len() as u64));
    out
}

/// Removes unreachable functions, then unused bindings in every remaining
/// function. Returns a module whose unchanged functions are the input's `Arc`s.
pub fn dead_code_elimination_module(m: &Module) -> Module {
    let mut out = remove_unreachable_functions(m);
    let new: Vec<Arc<Function>> = out.iter().map(|(_, f)| dead_code_elimination(f)).collect();
    out.replace_all(new);
    out
}

/// Whether `func` is an entry point: `@main` or marked `Exported`. Reachability starts there;
/// the incremental session's firewall for this pass uses the same rule.
pub fn is_entry(name: &str, func: &Function) -> bool {
    name == "main"
        || match func.attrs().get(fn_attr::EXPORTED) {
            None | Some(AttrValue::Bool(false)) | Some(AttrValue::Int(0)) => false,
            Some(_) => true,
        }
}

/// Removes the functions of `m` that no entry point reaches through global references. A
/// module without entry points is returned as it is (a library module).
pub fn remove_unreachable_functions(m: &Module) -> Module {
    let mut reached = vec![false; m.len()];
    let mut work: Vec<usize> = Vec::new();
    for (i, (name, func)) in m.iter().enumerate() {
        if is_entry(name, func) {
            reached[i] = true;
            work.push(i);
        }
    }
    if work.is_empty() {
        return m.clone();
    }
    let mut seen_syms = HashSet::new();
    while let Some(i) = work.pop() {
        let func = &m.entries()[i].1;
        let live = func.live_mask();
        seen_syms.clear();
        for (j, node) in func.nodes().iter().enumerate() {
            if let ExprKind::Global { name } = node.kind {
                if !live[j] || !seen_syms.insert(name) {
                    continue;
                }
                if let Some(k) = m.position(func.sym(name)) {
                    if !reached[k] {
                        reached[k] = true;
                        work.push(k);
                    }
                }
            }
        }
    }
    if reached.iter().all(|&r| r) {
        return m.clone();
    }
    let mut out = Module::with_capacity(reached.iter().filter(|&&r| r).count());
    for ((name, func), keep) in m.entries().iter().zip(reached) {
        if keep {
            // Names of a module are unique, so adding them again cannot fail.
            let _ = out.add_shared(name, Arc::clone(func));
        }
    }
    // PrimFuncs stay: removing the unused ones is the loop level's business (they call
    // nothing, so keeping them keeps every kept call valid).
    out.set_prims_from(m);
    out
}

#[cfg(test)]
mod tests {
    use passel_engine::ir::{structural_eq, Attrs, FunctionBuilder};
    use passel_engine::op;

    use super::*;

    fn relu() -> passel_engine::ir::OpId {
        op::lookup("relu").unwrap()
    }

    #[test]
    fn dead_code_elimination_keeps_stateful_values_and_reuses_scratch_across_functions() {
        // let a = relu(x); let s = random_uniform(); let b = relu(a); x — `b` and then `a` go,
        // the stateful `s` stays; run twice on differently sized functions in between.
        let Some(rand) = op::lookup("random_uniform") else { return };
        let build = |extra: usize| {
            let mut b = FunctionBuilder::new();
            let x = b.var("x", None);
            let mut pairs = Vec::new();
            for i in 0..extra {
                let v = b.call(relu(), &[x], Attrs::new());
                let d = b.var(&format!("d{i}"), None);
                pairs.push((d, v));
            }
            let av = b.call(relu(), &[x], Attrs::new());
            let a = b.var("a", None);
            let sv = b.call(rand, &[], Attrs::new());
            let s = b.var("s", None);
            let bv = b.call(relu(), &[a], Attrs::new());
            let bb = b.var("b", None);
            pairs.extend([(a, av), (s, sv), (bb, bv)]);
            let body = b.block(&pairs, x);
            Arc::new(b.finish(&[x], body, None, Attrs::new()))
        };
        for extra in [0, 50, 2, 0] {
            let func = build(extra);
            let out = dead_code_elimination(&func);
            assert_eq!(crate::test_util::live_bindings(&out), 1, "extra = {extra}");
            assert!(Arc::ptr_eq(&dead_code_elimination(&out), &out));
        }
    }

    #[test]
    fn dead_code_elimination_patch_equals_rebuild() {
        // let a = relu(x); let b = relu(a); let c = relu(x); let d = relu(c); (c, d) minus b.
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let av = b.call(relu(), &[x], Attrs::new());
        let a = b.var("a", None);
        let bv = b.call(relu(), &[a], Attrs::new());
        let bb = b.var("b", None);
        let cv = b.call(relu(), &[x], Attrs::new());
        let c = b.var("c", None);
        let dv = b.call(relu(), &[c], Attrs::new());
        let d = b.var("d", None);
        let tup = b.tuple(&[c, d]);
        let body = b.block(&[(a, av), (bb, bv), (c, cv), (d, dv)], tup);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let mut dropped = vec![false; func.num_nodes()];
        dropped[a.index()] = true;
        dropped[bb.index()] = true;
        let patched = func.substituted(&vec![NONE; func.num_nodes()], &dropped).unwrap();
        let rebuilt = rewrite::substitute_by_copy(&func, &vec![NONE; func.num_nodes()], &dropped).unwrap();
        assert!(structural_eq(&patched, &rebuilt));
        assert!(structural_eq(&dead_code_elimination(&func), &rebuilt));
    }

    #[test]
    fn dead_code_elimination_keeps_unused_apply_and_stateful_calls() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let g = b.global("g");
        let av = b.apply(g, &[x]);
        let a = b.var("a", None);
        let mut pairs = vec![(a, av)];
        if let Some(rand) = op::lookup("random_uniform") {
            let rv = b.call(rand, &[], Attrs::new());
            let r = b.var("r", None);
            pairs.push((r, rv));
        }
        let body = b.block(&pairs, x);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        assert!(Arc::ptr_eq(&dead_code_elimination(&func), &func));
    }

    #[test]
    fn dead_code_elimination_returns_same_arc_when_everything_is_used() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let av = b.call(relu(), &[x], Attrs::new());
        let a = b.var("a", None);
        let body = b.block(&[(a, av)], a);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        assert!(Arc::ptr_eq(&dead_code_elimination(&func), &func));
    }

    #[test]
    fn dead_code_elimination_handles_a_million_bindings() {
        // Every other binding is dead; the live ones form a chain.
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let mut pairs = Vec::with_capacity(1_000_000);
        let mut cur = x;
        for i in 0..500_000 {
            let dv = b.call(relu(), &[cur], Attrs::new());
            let d = b.var(&format!("d{i}"), None);
            pairs.push((d, dv));
            let v = b.call(relu(), &[cur], Attrs::new());
            let var = b.var(&format!("v{i}"), None);
            pairs.push((var, v));
            cur = var;
        }
        let body = b.block(&pairs, cur);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let out = dead_code_elimination(&func);
        assert_eq!(crate::test_util::live_bindings(&out), 500_000);
        assert!(Arc::ptr_eq(&dead_code_elimination(&out), &out));
    }

    fn calling(callee: Option<&str>, attrs: Attrs) -> Function {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let body = match callee {
            Some(c) => {
                let g = b.global(c);
                b.apply(g, &[x])
            }
            None => x,
        };
        b.finish(&[x], body, None, attrs)
    }

    #[test]
    fn dead_code_elimination_module_keeps_unchanged_functions_pointer_equal() {
        let mut m = Module::new();
        m.add("main", calling(Some("f"), Attrs::new())).unwrap();
        m.add("f", calling(None, Attrs::new())).unwrap();
        m.add("unused", calling(None, Attrs::new())).unwrap();
        let out = dead_code_elimination_module(&m);
        assert_eq!(out.len(), 2);
        assert!(Arc::ptr_eq(out.get("main").unwrap(), m.get("main").unwrap()));
        assert!(dead_code_elimination_module(&out).ptr_eq(&out));
    }

    #[test]
    fn remove_unreachable_functions_leaves_library_module_alone() {
        let mut m = Module::new();
        m.add("f", calling(None, Attrs::new())).unwrap();
        m.add("g", calling(None, Attrs::new())).unwrap();
        assert!(remove_unreachable_functions(&m).ptr_eq(&m));
    }
}
