//! LambdaLift (module pass, opt level 1, requires InferType): lifts nested functions to new
//! global functions.
//!
//! Unlike TVM's, it requires InferType: a global function's parameters must be annotated in
//! this IR, and the lifted parameters take the types InferType gave the free variables. (Run
//! without types, the lifted globals would have unannotated parameters and the next InferType
//! would report them.)
//!
//! What it does: every nested function (`fn (…) { … }` inside a global) becomes a global
//! function `@<outer>_lifted<k>` (`k` counts up per outer function, skipping names the module
//! already uses, so the names are deterministic and never collide). Its free variables (the
//! variables of enclosing scopes it reads) become extra *leading* parameters, in arena order,
//! with their annotations: closure conversion. What replaces the nested function depends on
//! how it is used, because this IR has no partial application:
//! - applied directly (`fn (…) {…}(args)`), or bound to a variable whose every use is the
//!   callee of an application: each application becomes `@main_lifted0(free…, args…)` and
//!   the binding is removed;
//! - otherwise (the closure escapes: returned, stored in a tuple, passed as an argument): the
//!   global itself (`@main_lifted0`, a first-class function value) when there are no free
//!   variables, else a closure-conversion wrapper `#[Closure] fn (%p…) { @main_lifted0(free…, %p…) }`, which
//!   captures the free variables exactly as the original did.
//!
//! Nested functions inside nested functions are lifted innermost first, so an outer
//! function's free variables include those its inner functions captured.
//!
//! What it deliberately does not do: lift `Primitive` functions (fused kernels stay where
//! FuseOps put them) or anything inside them, lift its own closure-conversion wrappers (a
//! `Closure`-marked function whose body applies a global), or specialise and inline the
//! lifted functions. A global with nothing to lift keeps its `Arc`; lifted globals are added
//! at the end of the module in the order they are made, which makes a second run a no-op.
//!
//! Phases, per global function in module order, repeated while it has a liftable function:
//! 1. Find the first innermost liftable nested function in evaluation order.
//! 2. Compute its free variables and how its value is used (its parent node and the uses of
//!    its binding variable).
//! 3. Copy its body into a new global, then copy the outer function with the site replaced
//!    ([`crate::copy::Copier`] hooks). Both copies walk with explicit stacks.

use std::sync::Arc;

use passel_engine::ir::{fn_attr, AttrValue, Attrs, ExprKind, Function, FunctionBuilder, Module, NodeId};

use crate::census::{fewer, more, Counter};
use crate::copy::{copy_function, free_vars, Copier, CopyHooks, NoHooks};
use crate::rewrite::{well_formed, NONE};
use passel_engine::transform::Statistic;

/// This pass's statistics (`passel run --stats`), read off the census of each function it
/// changed (net counts: before − after).
pub(crate) static STATISTICS: &[Counter] = &[
    (&CLOSURES_LIFTED, |b, a| fewer(b.closures, a.closures)),
    (&FUNCTIONS_ADDED, |b, a| more(b.functions, a.functions)),
];
static CLOSURES_LIFTED: Statistic =
    Statistic::new("LambdaLift", "closures lifted", "nested functions moved to globals");
static FUNCTIONS_ADDED: Statistic =
    Statistic::new("LambdaLift", "functions added", "global functions made from closures");

/// Attribute marking a closure-conversion wrapper (TVM's `Closure`).
pub const CLOSURE_ATTR: &str = "Closure";

/// Runs LambdaLift on `module`; returns a module whose unchanged functions keep their `Arc`.
pub fn lambda_lift_module(module: &Module) -> Module {
    let mut out = module.clone();
    let mut taken: rustc_hash::FxHashSet<String> = module.iter().map(|(n, _)| n.to_string()).collect();
    let names: Vec<String> = module.iter().map(|(n, _)| n.to_string()).collect();
    for name in names {
        let Some(original) = module.get(&name) else { continue };
        if !well_formed(original) {
            continue;
        }
        let mut func = Arc::clone(original);
        let mut lifted = Vec::new();
        let mut k = 0usize;
        while let Some(closure) = find_liftable(&func) {
            let global = loop {
                let candidate = format!("{name}_lifted{k}");
                k += 1;
                if taken.insert(candidate.clone()) {
                    break candidate;
                }
            };
            let (outer, new_global) = lift_one(&func, closure, &global);
            func = Arc::new(outer);
            lifted.push((global, new_global));
        }
        if lifted.is_empty() {
            continue;
        }
        out.insert(&name, func);
        for (global, f) in lifted {
            // The name was checked against every existing and lifted name above.
            if out.add(&global, f).is_err() {
                unreachable!("lifted name @{global} is fresh");
            }
        }
    }
    out
}

/// Whether nested function `id` is one LambdaLift leaves in place.
fn is_kept(func: &Function, id: NodeId) -> bool {
    let ExprKind::Func { idx } = *func.kind(id) else { return true };
    let c = func.closure(idx);
    c.attrs.flag(fn_attr::PRIMITIVE) || (c.attrs.flag(CLOSURE_ATTR) && is_global_apply(func, c.body))
}

fn is_global_apply(func: &Function, id: NodeId) -> bool {
    matches!(*func.kind(id), ExprKind::Apply { callee, .. } if matches!(func.kind(callee), ExprKind::Global { .. }))
}

/// The first liftable nested function to finish in a post-order walk in evaluation order:
/// it contains no other liftable nested function.
fn find_liftable(func: &Function) -> Option<NodeId> {
    let mut stack = vec![(func.body(), false)];
    let mut ops = Vec::new();
    while let Some((id, expanded)) = stack.pop() {
        let is_func = matches!(func.kind(id), ExprKind::Func { .. });
        if expanded {
            if is_func {
                return Some(id);
            }
            continue;
        }
        if is_func && is_kept(func, id) {
            continue;
        }
        stack.push((id, true));
        ops.clear();
        func.for_each_operand(id, |o| ops.push(o));
        stack.extend(ops.iter().rev().map(|&o| (o, false)));
    }
    None
}

/// How the lifted function's value is used at its old site.
#[derive(Clone, Copy)]
enum Site {
    /// Replace it by the global (it escapes but has no free variables).
    Global,
    /// It is the callee of an application.
    Direct,
    /// It is bound to this variable, which is only ever called.
    Calls(NodeId),
    /// It escapes: build a closure-conversion wrapper.
    Wrapper,
}

/// Lifts nested function `closure` of `func` to a global named `global`; returns the new
/// outer function and the lifted global.
fn lift_one(func: &Function, closure: NodeId, global: &str) -> (Function, Function) {
    let ExprKind::Func { idx } = *func.kind(closure) else { unreachable!("find_liftable returns nested functions") };
    let c = func.closure(idx);
    let free = free_vars(func, closure);

    // The lifted global: free variables first, then the closure's parameters.
    let mut b = FunctionBuilder::new();
    let mut cp = Copier::new(func);
    let mut params: Vec<NodeId> = free.iter().map(|&v| cp.fresh_var(&mut b, v)).collect();
    params.extend(func.ids(c.params).iter().map(|&p| cp.fresh_var(&mut b, p)));
    let body = cp.copy(&mut b, c.body, &mut NoHooks);
    let lifted = b.finish(&params, body, c.ret_ty.clone(), c.attrs.clone());

    let site = match site_of(func, closure) {
        Site::Wrapper if free.is_empty() => Site::Global,
        site => site,
    };
    let mut hooks = SiteHooks { closure, global, free, site };
    (copy_function(func, &mut hooks), lifted)
}

/// Classifies the use of a nested function.
fn site_of(func: &Function, closure: NodeId) -> Site {
    let live = func.live_mask();
    let mut bound_var = NONE;
    for (i, node) in func.nodes().iter().enumerate() {
        if !live[i] {
            continue;
        }
        match node.kind {
            ExprKind::Apply { callee, .. } if callee == closure => return Site::Direct,
            ExprKind::Block { bindings, .. } => {
                if let Some((var, _)) = func.bindings(bindings).find(|&(_, value)| value == closure) {
                    bound_var = var;
                }
            }
            _ => {}
        }
    }
    if bound_var == NONE {
        return Site::Wrapper;
    }
    // Every use of the variable must be the callee of an application.
    let (mut uses, mut calls) = (0usize, 0usize);
    for (i, node) in func.nodes().iter().enumerate() {
        if !live[i] {
            continue;
        }
        let id = NodeId(i as u32);
        match node.kind {
            ExprKind::Block { bindings, result } => {
                uses += func.bindings(bindings).filter(|&(_, value)| value == bound_var).count();
                uses += usize::from(result == bound_var);
            }
            ExprKind::Func { idx } => uses += usize::from(func.closure(idx).body == bound_var),
            ExprKind::Apply { callee, .. } => {
                calls += usize::from(callee == bound_var);
                func.for_each_operand(id, |o| uses += usize::from(o == bound_var));
            }
            _ => func.for_each_operand(id, |o| uses += usize::from(o == bound_var)),
        }
    }
    if func.body() == bound_var {
        uses += 1;
    }
    if uses == calls {
        Site::Calls(bound_var)
    } else {
        Site::Wrapper
    }
}

struct SiteHooks<'g> {
    closure: NodeId,
    global: &'g str,
    free: Vec<NodeId>,
    site: Site,
}

impl<'s> CopyHooks<'s> for SiteHooks<'_> {
    fn enter(&mut self, cp: &mut Copier<'s>, b: &mut FunctionBuilder, old: NodeId) -> Option<NodeId> {
        if old != self.closure {
            return None;
        }
        let g = b.global(self.global);
        match self.site {
            Site::Global | Site::Direct => Some(g),
            Site::Calls(var) => {
                // The binding is dropped; uses of the variable (all callees) see the global.
                cp.memo[var.index()] = g;
                Some(g)
            }
            Site::Wrapper => {
                let func = cp.src;
                let ExprKind::Func { idx } = *func.kind(old) else { return None };
                let c = func.closure(idx);
                let mut args: Vec<NodeId> = self.free.iter().map(|&v| cp.map(b, v)).collect();
                let params: Vec<NodeId> = func
                    .ids(c.params)
                    .iter()
                    .map(|&p| b.var(func.name_of(p).unwrap_or("p"), func.ty(p).cloned()))
                    .collect();
                args.extend(&params);
                let call = b.apply(g, &args);
                b.set_ty(call, c.ret_ty.clone());
                let mut attrs = Attrs::new();
                attrs.set(CLOSURE_ATTR, AttrValue::Bool(true));
                Some(b.closure(&params, call, c.ret_ty.clone(), attrs))
            }
        }
    }

    fn exit(&mut self, cp: &mut Copier<'s>, b: &mut FunctionBuilder, old: NodeId) -> Option<NodeId> {
        let func = cp.src;
        match (self.site, *func.kind(old)) {
            (Site::Calls(var), ExprKind::Block { bindings, result }) => {
                if !func.bindings(bindings).any(|(v, _)| v == var) {
                    return None;
                }
                let pairs: Vec<(NodeId, NodeId)> = func
                    .bindings(bindings)
                    .filter(|&(v, _)| v != var)
                    .map(|(v, value)| (cp.map(b, v), cp.map(b, value)))
                    .collect();
                let r = cp.map(b, result);
                Some(b.block(&pairs, r))
            }
            (Site::Calls(_) | Site::Direct, ExprKind::Apply { callee, args })
                if callee == self.closure || matches!(self.site, Site::Calls(v) if v == callee) =>
            {
                let g = cp.map(b, callee);
                let mut new_args: Vec<NodeId> = self.free.iter().map(|&v| cp.map(b, v)).collect();
                new_args.extend(func.ids(args).iter().map(|&a| cp.map(b, a)));
                let call = b.apply(g, &new_args);
                b.set_ty(call, func.ty(old).cloned());
                Some(call)
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use passel_engine::ir::{parse_module, verify_module, DType, Type};
    use passel_engine::op;

    use super::*;

    #[test]
    fn lambda_lift_keeps_arcs_of_functions_without_nested_functions() {
        let m =
            parse_module("def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  relu(%x)\n}\n").expect("parses");
        assert!(lambda_lift_module(&m).ptr_eq(&m));
    }

    #[test]
    fn lambda_lift_handles_deeply_nested_functions_without_recursion() {
        // fn (%y0) { fn (%y1) { … fn (%yN) { add(%yN, %x) } … }(%y0) … }: each level applies the
        // next one, so every level is lifted and captures %x.
        let ty = Type::tensor(vec![2], DType::F32);
        let add = op::lookup("add").expect("add is registered");
        let depth = 2_000;
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(ty.clone()));
        let params: Vec<NodeId> = (0..=depth).map(|i| b.var(&format!("y{i}"), Some(ty.clone()))).collect();
        let mut body = b.call(add, &[params[depth], x], Attrs::new());
        for i in (0..depth).rev() {
            let inner = b.closure(&[params[i + 1]], body, Some(ty.clone()), Attrs::new());
            body = b.apply(inner, &[params[i]]);
        }
        let outer = b.closure(&[params[0]], body, Some(ty.clone()), Attrs::new());
        let call = b.apply(outer, &[x]);
        let mut m = Module::new();
        m.add("main", b.finish(&[x], call, Some(ty), Attrs::new())).expect("fresh");
        let out = lambda_lift_module(&m);
        assert_eq!(out.len(), depth + 2);
        assert!(verify_module(&out).is_ok());
        assert!(out.iter().all(|(_, f)| find_liftable(f).is_none()));
    }
}
