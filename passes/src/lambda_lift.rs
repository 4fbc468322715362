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
//! Phases, per global function in module order (linear in the function plus its output):
//! 1. Plan ([`plan`]): one evaluation-order walk (the IR's [`Walker`], the planner its
//!    hooks) finds every liftable nested function in the order they finish (innermost
//!    first), their free variables ([`Function::free_vars_with`], as the lifts before
//!    them leave the function) and how each value is used (use counts gathered once, [`Uses`]), and names them.
//! 2. Lift ([`lift_all`]): copy each lifted function's body into its global, then the outer
//!    function, with [`passel_engine::ir::rewrite::Copier`] hooks that put every site in place; each node
//!    is copied once, and the copiers walk with explicit stacks.
//!
//! The output is exactly that of lifting one nested function at a time (find the first
//! innermost, lift it, copy the function, repeat — quadratic in nested functions), including
//! the free-variable order, which depends on the ids of the copy each one was lifted from;
//! [`plan`] explains how the walk reproduces it, and a test compares the two on generated
//! programs.

use std::convert::Infallible;
use std::ops::ControlFlow;
use std::sync::Arc;

use passel_engine::ir::{
    fn_attr, AttrValue, Attrs, Enter, ExprKind, Function, FunctionBuilder, Module, NodeId, WalkHooks, Walker,
};

use rustc_hash::{FxHashMap, FxHashSet};

use crate::census::{fewer, more, Counter};
use passel_engine::ir::rewrite::NONE;
use passel_engine::ir::rewrite::{copy_function, Copier, CopyHooks};
use passel_engine::transform::Statistic;

/// This pass's statistics (`passel run --stats`), read off the census of each function it
/// changed (net counts: before − after).
/// The registry name.
pub const NAME: &str = "LambdaLift";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// The `LambdaLift` pass as registered: name, opt level, required passes and, for a module pass,
/// its per-function forms and session firewall.
pub fn pass() -> passel_engine::transform::ModulePass {
    passel_engine::transform::module_pass(NAME, 1, |module, ctx| {
        Ok(crate::census::counted_module(ctx, &module, lambda_lift_module(&module), STATISTICS))
    })
    .with_required(&["InferType"])
}

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
    let mut taken: FxHashSet<String> = module.iter().map(|(n, _)| n.to_string()).collect();
    let names: Vec<String> = module.iter().map(|(n, _)| n.to_string()).collect();
    for name in names {
        let Some(original) = module.get(&name) else { continue };
        if !original.is_well_formed() {
            continue;
        }
        let planned = plan(original, &name, &mut taken);
        if planned.is_empty() {
            continue;
        }
        let (func, lifted) = lift_all(original, planned);
        // `name` is already in `out`, so this replaces and cannot fail.
        let _ = out.insert(&name, Arc::new(func));
        for (global, f) in lifted {
            // The name was checked against every existing and lifted name by `plan`.
            if out.add(&global, f).is_err() {
                unreachable!("lifted name @{global} is fresh");
            }
        }
    }
    out
}

/// Whether nested function `id` is one LambdaLift leaves in place (and lifts nothing inside).
fn is_kept(func: &Function, id: NodeId) -> bool {
    let ExprKind::Func { idx } = *func.kind(id) else { return true };
    let c = func.closure(idx);
    c.attrs.flag(fn_attr::PRIMITIVE) || (c.attrs.flag(CLOSURE_ATTR) && is_global_apply(func, c.body))
}

fn is_global_apply(func: &Function, id: NodeId) -> bool {
    matches!(*func.kind(id), ExprKind::Apply { callee, .. } if matches!(func.kind(callee), ExprKind::Global { .. }))
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

/// One nested function to lift.
struct Lift {
    /// The new global's name.
    global: String,
    /// Its free variables, in the order they become leading parameters.
    free: Vec<NodeId>,
    site: Site,
}

/// How each nested function and variable of a function is used, counted once over the live
/// nodes (what classifying one site at a time used to rescan the function for).
struct Uses {
    /// Nested function → whether it is the callee of an application.
    is_callee: Vec<bool>,
    /// Nested function → a variable bound to it (`NONE` if none).
    bound: Vec<NodeId>,
    /// Variable → its uses (binding values, block results, bodies, operands).
    uses: Vec<u32>,
    /// Variable → its uses as the callee of an application.
    calls: Vec<u32>,
}

impl Uses {
    fn of(func: &Function) -> Uses {
        let n = func.num_nodes();
        let mut u = Uses { is_callee: vec![false; n], bound: vec![NONE; n], uses: vec![0; n], calls: vec![0; n] };
        let is_var = |id: NodeId| matches!(func.kind(id), ExprKind::Var { .. });
        let live = func.live_mask();
        for (i, node) in func.nodes().iter().enumerate() {
            if !live[i] {
                continue;
            }
            let id = NodeId(i as u32);
            match node.kind {
                ExprKind::Block { bindings, result } => {
                    for (var, value) in func.bindings(bindings) {
                        if matches!(func.kind(value), ExprKind::Func { .. }) {
                            u.bound[value.index()] = var;
                        }
                        if is_var(value) {
                            u.uses[value.index()] += 1;
                        }
                    }
                    if is_var(result) {
                        u.uses[result.index()] += 1;
                    }
                }
                ExprKind::Func { idx } => {
                    let body = func.closure(idx).body;
                    if is_var(body) {
                        u.uses[body.index()] += 1;
                    }
                }
                _ => {
                    if let ExprKind::Apply { callee, .. } = node.kind {
                        if matches!(func.kind(callee), ExprKind::Func { .. }) {
                            u.is_callee[callee.index()] = true;
                        }
                        if is_var(callee) {
                            u.calls[callee.index()] += 1;
                        }
                    }
                    func.for_each_operand(id, |o| {
                        if is_var(o) {
                            u.uses[o.index()] += 1;
                        }
                    });
                }
            }
        }
        if is_var(func.body()) {
            u.uses[func.body().index()] += 1;
        }
        u
    }
}

/// An open nested function during [`plan`]'s walk.
struct Frame {
    /// The encounter counter when the walk entered it.
    start: u32,
    /// Nothing inside it is lifted, nor it (a kept function or inside one).
    frozen: bool,
}

/// The walk state of [`plan`]: hooks of the IR's [`Walker`].
struct Planner<'f, 'n> {
    func: &'f Function,
    name: &'n str,
    taken: &'n mut FxHashSet<String>,
    /// The next lifted function's number (`@<name>_lifted<k>`).
    k: usize,
    uses: Uses,
    /// Variable → when the function being lifted next would first meet it in evaluation
    /// order (`u32::MAX`: not met); see [`plan`].
    pos: Vec<u32>,
    counter: u32,
    frames: Vec<Frame>,
    /// Compound nodes walked (a node met twice, in an arena that is not a tree, is walked once).
    visited: Vec<bool>,
    /// Nested function → its lift, in lifting order.
    lifts: FxHashMap<NodeId, Lift>,
    order: Vec<NodeId>,
    /// Variable bound to a lifted function that is only called → that function.
    calls_var: FxHashMap<NodeId, NodeId>,
}

/// Decides every lift of global function `func` (`name`) in one walk: which nested functions
/// are lifted, their global names, free variables and sites; returns them in lifting order.
///
/// The result is exactly what lifting one nested function at a time (find the first
/// innermost one in evaluation order, lift it, copy the function, repeat) produces, without
/// copying the function once per nested function. That sequence lifts the nested functions
/// in post-order of an evaluation-order walk, and orders each one's free variables by id in
/// the function it was lifted from: the original function's arena for the first one, and
/// for the later ones a copy, whose ids number the variables in the order the copy's walk
/// first met them. The walk here simulates those encounter positions (`pos`): a lifted
/// function's site replaces the variables first met inside it by its free variables, met
/// at the site — in place for a wrapper, after the arguments at each application
/// otherwise.
///
/// Each lift's free variables are [`Function::free_vars_with`] of its nested function in the
/// original function, as the earlier lifts leave it: a nested function lifted whose variable
/// is only called is gone with its binding, and each use of that variable (a call) passes
/// the lifted function's free variables instead (the reference lifter in the tests calls
/// `free_vars` on each copy; a property test pins the two lifters equal). `free_vars_with` walks the nested function's subtree, so
/// planning costs the function's size times the nesting depth of its nested functions,
/// which the parser bounds ([`passel_engine::ir::MAX_NESTING`]).
fn plan(func: &Function, name: &str, taken: &mut FxHashSet<String>) -> Vec<(NodeId, Lift)> {
    let n = func.num_nodes();
    let mut p = Planner {
        func,
        name,
        taken,
        k: 0,
        uses: Uses::of(func),
        pos: vec![u32::MAX; n],
        counter: 0,
        frames: Vec::new(),
        visited: vec![false; n],
        lifts: FxHashMap::default(),
        order: Vec::new(),
        calls_var: FxHashMap::default(),
    };
    for &param in func.params() {
        p.meet(param);
    }
    let ControlFlow::Continue(()) = Walker::new().walk(func, func.body(), &mut p);
    let mut lifts = p.lifts;
    p.order.iter().filter_map(|id| lifts.remove(id).map(|l| (*id, l))).collect()
}

impl WalkHooks for Planner<'_, '_> {
    type Break = Infallible;

    fn atom(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Infallible> {
        if matches!(kind, ExprKind::Var { .. }) && !self.calls_var.contains_key(&id) {
            self.meet(id);
        }
        ControlFlow::Continue(())
    }

    fn enter(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Infallible, Enter> {
        if self.visited[id.index()] {
            return ControlFlow::Continue(Enter::Skip);
        }
        if let ExprKind::Func { idx } = *kind {
            let func = self.func;
            let frozen = self.frames.last().is_some_and(|f| f.frozen) || is_kept(func, id);
            self.frames.push(Frame { start: self.counter, frozen });
            for &param in func.ids(func.closure(idx).params) {
                self.meet(param);
            }
        }
        ControlFlow::Continue(Enter::Descend)
    }

    fn exit(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Infallible> {
        self.visited[id.index()] = true;
        match *kind {
            ExprKind::Func { .. } => self.exit_func(id),
            ExprKind::Apply { callee, .. } => self.exit_apply(callee),
            _ => {}
        }
        ControlFlow::Continue(())
    }

    fn bind(&mut self, var: NodeId, _: NodeId) -> ControlFlow<Infallible> {
        if !self.calls_var.contains_key(&var) {
            self.meet(var);
        }
        ControlFlow::Continue(())
    }
}

impl Planner<'_, '_> {
    /// The walk meets variable `v`: its first encounter numbers it.
    fn meet(&mut self, v: NodeId) {
        if self.pos[v.index()] == u32::MAX {
            self.pos[v.index()] = self.counter;
            self.counter += 1;
        }
    }

    /// The lift an application with callee `callee` calls, if any.
    fn applied(&self, callee: NodeId) -> Option<&Lift> {
        applied(&self.lifts, &self.calls_var, callee)
    }

    /// An application whose callee was a lifted function now passes its free variables
    /// after the arguments.
    fn exit_apply(&mut self, callee: NodeId) {
        let free = match self.applied(callee) {
            Some(lift) => lift.free.clone(),
            None => return,
        };
        for v in free {
            self.meet(v);
        }
    }

    /// The free variables of nested function `id` once the functions lifted before it are
    /// (see [`plan`]).
    fn free_vars(&self, id: NodeId) -> Vec<NodeId> {
        let gone = |f: NodeId| self.lifts.get(&f).is_some_and(|l| matches!(l.site, Site::Calls(_)));
        let uses = |v: NodeId, refs: &mut Vec<NodeId>| match self.calls_var.get(&v).and_then(|f| self.lifts.get(f)) {
            Some(lift) => refs.extend_from_slice(&lift.free),
            None => refs.push(v),
        };
        self.func.free_vars_with(id, gone, uses)
    }

    fn exit_func(&mut self, id: NodeId) {
        let Some(frame) = self.frames.pop() else { return };
        let func = self.func;
        let ExprKind::Func { idx } = *func.kind(id) else { return };
        let c = func.closure(idx);
        // A `Closure`-marked function whose body now applies a global (a nested function
        // lifted there) is a wrapper: kept.
        let becomes_wrapper = c.attrs.flag(CLOSURE_ATTR)
            && matches!(*func.kind(c.body), ExprKind::Apply { callee, .. } if self.applied(callee).is_some());
        if frame.frozen || becomes_wrapper {
            return;
        }
        let first = self.order.is_empty();
        let mut free = self.free_vars(id);
        if first {
            free.sort_unstable();
        } else {
            free.sort_unstable_by_key(|v| self.pos[v.index()]);
        }
        let site = if self.uses.is_callee[id.index()] {
            Site::Direct
        } else {
            let var = self.uses.bound[id.index()];
            if var != NONE && self.uses.uses[var.index()] == self.uses.calls[var.index()] {
                Site::Calls(var)
            } else if free.is_empty() {
                Site::Global
            } else {
                Site::Wrapper
            }
        };
        // Encounter positions after the lift: variables first met inside it are met at
        // its site instead.
        let inside: Vec<NodeId> = free.iter().copied().filter(|v| self.pos[v.index()] >= frame.start).collect();
        match site {
            Site::Wrapper => {
                let mut slots: Vec<u32> = inside.iter().map(|v| self.pos[v.index()]).collect();
                slots.sort_unstable();
                for (v, slot) in inside.iter().zip(slots) {
                    self.pos[v.index()] = slot;
                }
            }
            Site::Direct | Site::Calls(_) => {
                for v in &inside {
                    self.pos[v.index()] = u32::MAX;
                }
            }
            Site::Global => {}
        }
        if let Site::Calls(var) = site {
            self.calls_var.insert(var, id);
        }
        let global = loop {
            let candidate = format!("{}_lifted{}", self.name, self.k);
            self.k += 1;
            if self.taken.insert(candidate.clone()) {
                break candidate;
            }
        };
        self.order.push(id);
        self.lifts.insert(id, Lift { global, free, site });
    }
}

/// Copy hooks that put every lift's site in place.
struct SiteHooks<'p> {
    lifts: &'p FxHashMap<NodeId, Lift>,
    /// Variable bound to a lifted function that is only called → that function.
    calls_var: FxHashMap<NodeId, NodeId>,
}

impl SiteHooks<'_> {
    /// The lift applied by an application with callee `callee`, if any.
    fn applied(&self, callee: NodeId) -> Option<&Lift> {
        applied(self.lifts, &self.calls_var, callee)
    }
}

/// The lift an application with callee `callee` calls: a lifted function applied directly,
/// or through a variable bound to it (`calls_var`).
fn applied<'l>(
    lifts: &'l FxHashMap<NodeId, Lift>,
    calls_var: &FxHashMap<NodeId, NodeId>,
    callee: NodeId,
) -> Option<&'l Lift> {
    match calls_var.get(&callee) {
        Some(closure) => lifts.get(closure),
        None => lifts.get(&callee).filter(|l| matches!(l.site, Site::Direct)),
    }
}

impl<'s> CopyHooks<'s> for SiteHooks<'_> {
    fn enter(&mut self, cp: &mut Copier<'s>, b: &mut FunctionBuilder, old: NodeId) -> Option<NodeId> {
        let lift = self.lifts.get(&old)?;
        let g = b.global(&lift.global);
        match lift.site {
            Site::Global | Site::Direct => Some(g),
            Site::Calls(var) => {
                // The binding is dropped; uses of the variable (all callees) see the global.
                cp.set_memo(var, g);
                Some(g)
            }
            Site::Wrapper => {
                let func = cp.src;
                let ExprKind::Func { idx } = *func.kind(old) else { return None };
                let c = func.closure(idx);
                let mut args: Vec<NodeId> = lift.free.iter().map(|&v| cp.map(b, v)).collect();
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
        match *func.kind(old) {
            ExprKind::Block { bindings, result } => {
                if !func.bindings(bindings).any(|(v, _)| self.calls_var.contains_key(&v)) {
                    return None;
                }
                let pairs: Vec<(NodeId, NodeId)> = func
                    .bindings(bindings)
                    .filter(|(v, _)| !self.calls_var.contains_key(v))
                    .map(|(v, value)| (cp.map(b, v), cp.map(b, value)))
                    .collect();
                let r = cp.map(b, result);
                Some(b.block(&pairs, r))
            }
            ExprKind::Apply { callee, args } => {
                let lift = self.applied(callee)?;
                // The callee is the global (a lifted function called from inside another lifted
                // function may be bound outside the one being copied).
                let g = b.global(&lift.global);
                let mut new_args: Vec<NodeId> = lift.free.iter().map(|&v| cp.map(b, v)).collect();
                new_args.extend(func.ids(args).iter().map(|&a| cp.map(b, a)));
                let call = b.apply(g, &new_args);
                b.set_ty(call, func.ty(old).cloned());
                Some(call)
            }
            _ => None,
        }
    }
}

/// Lifts the planned nested functions of `func`: returns the new outer function and the
/// lifted globals in lifting order. Every node is copied once, into the outer function or the
/// innermost lifted function containing it.
fn lift_all(func: &Function, planned: Vec<(NodeId, Lift)>) -> (Function, Vec<(String, Function)>) {
    let mut order = Vec::with_capacity(planned.len());
    let mut lifts = FxHashMap::default();
    let mut calls_var = FxHashMap::default();
    for (id, lift) in planned {
        if let Site::Calls(var) = lift.site {
            calls_var.insert(var, id);
        }
        order.push(id);
        lifts.insert(id, lift);
    }
    let mut hooks = SiteHooks { lifts: &lifts, calls_var };
    let mut globals = Vec::with_capacity(order.len());
    let mut cp = Copier::new(func);
    cp.track_writes();
    for &id in &order {
        let (ExprKind::Func { idx }, Some(lift)) = (*func.kind(id), lifts.get(&id)) else { continue };
        let c = func.closure(idx);
        // The lifted global: free variables first, then the nested function's parameters.
        let mut b = FunctionBuilder::new();
        let mut params: Vec<NodeId> = lift.free.iter().map(|&v| cp.fresh_var(&mut b, v)).collect();
        params.extend(func.ids(c.params).iter().map(|&p| cp.fresh_var(&mut b, p)));
        let body = cp.copy(&mut b, c.body, &mut hooks);
        globals.push((lift.global.clone(), b.finish(&params, body, c.ret_ty.clone(), c.attrs.clone())));
        cp.reset_written();
    }
    (copy_function(func, &mut hooks), globals)
}

#[cfg(test)]
mod tests {
    use passel_engine::interp::{assert_values_close, eval_function, random_args};
    use passel_engine::ir::{parse_module, print_module, verify_module, DType, Type};
    use passel_engine::op;

    use super::*;

    /// The previous LambdaLift, one nested function at a time (quadratic): the reference the
    /// one-walk pass must match byte for byte.
    mod reference {
        use passel_engine::ir::{fn_attr, AttrValue, Attrs, ExprKind, Function, FunctionBuilder, Module, NodeId};
        use std::sync::Arc;

        use passel_engine::ir::rewrite::NONE;
        use passel_engine::ir::rewrite::{copy_function, Copier, CopyHooks, NoHooks};

        use super::super::CLOSURE_ATTR;

        pub(crate) fn lambda_lift_module(module: &Module) -> Module {
            let mut out = module.clone();
            let mut taken: rustc_hash::FxHashSet<String> = module.iter().map(|(n, _)| n.to_string()).collect();
            let names: Vec<String> = module.iter().map(|(n, _)| n.to_string()).collect();
            for name in names {
                let Some(original) = module.get(&name) else { continue };
                if !original.is_well_formed() {
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
                out.insert(&name, func).expect("a valid name");
                for (global, f) in lifted {
                    out.add(&global, f).expect("fresh");
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
        pub(super) fn find_liftable(func: &Function) -> Option<NodeId> {
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
        pub(super) fn lift_one(func: &Function, closure: NodeId, global: &str) -> (Function, Function) {
            let ExprKind::Func { idx } = *func.kind(closure) else {
                unreachable!("find_liftable returns nested functions")
            };
            let c = func.closure(idx);
            let free = func.free_vars(closure);

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
    }

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
        assert!(out.iter().all(|(_, f)| reference::find_liftable(f).is_none()));
    }

    const T: &str = "Tensor[(2,), f32]";

    /// A tiny deterministic generator of programs with nested, captured, called, directly
    /// applied and escaping nested functions.
    struct Gen {
        state: u64,
        next: usize,
    }

    impl Gen {
        fn pick(&mut self, n: usize) -> usize {
            self.state ^= self.state << 13;
            self.state ^= self.state >> 7;
            self.state ^= self.state << 17;
            (self.state % n as u64) as usize
        }

        fn fresh(&mut self, base: &str) -> String {
            self.next += 1;
            format!("%{base}{}", self.next)
        }

        fn simple(&mut self, vars: &[String]) -> String {
            let a = vars[self.pick(vars.len())].clone();
            let b = vars[self.pick(vars.len())].clone();
            match self.pick(3) {
                0 => a,
                1 => format!("relu({a})"),
                _ => format!("add({a}, {b})"),
            }
        }

        fn closure(&mut self, depth: usize, vars: &[String], fns: &[String]) -> String {
            let p = self.fresh("p");
            let mut inner = vars.to_vec();
            inner.push(p.clone());
            let body = self.body(depth + 1, inner, fns.to_vec());
            format!("fn ({p}: {T}) -> {T} {{\n{body}\n}}")
        }

        /// A block body: a few bindings and a result.
        fn body(&mut self, depth: usize, mut vars: Vec<String>, mut fns: Vec<String>) -> String {
            let mut out = String::new();
            let n = if depth >= 3 { 1 } else { 1 + self.pick(4) };
            for _ in 0..n {
                let choice = if depth >= 3 { self.pick(2) } else { self.pick(6) };
                let line = match choice {
                    0 | 1 if fns.is_empty() || choice == 0 => {
                        let v = self.fresh("v");
                        let e = self.simple(&vars);
                        vars.push(v.clone());
                        format!("let {v} = {e};")
                    }
                    1 => {
                        let v = self.fresh("v");
                        let f = fns[self.pick(fns.len())].clone();
                        let e = self.simple(&vars);
                        vars.push(v.clone());
                        format!("let {v} = {f}({e});")
                    }
                    2 | 3 => {
                        let f = self.fresh("f");
                        let c = self.closure(depth, &vars, &fns);
                        fns.push(f.clone());
                        format!("let {f} = {c};")
                    }
                    4 => {
                        let v = self.fresh("v");
                        let c = self.closure(depth, &vars, &fns);
                        let e = self.simple(&vars);
                        vars.push(v.clone());
                        format!("let {v} = {c}({e});")
                    }
                    _ if !fns.is_empty() => {
                        let t = self.fresh("t");
                        let f = fns[self.pick(fns.len())].clone();
                        format!("let {t} = ({f},);")
                    }
                    _ => continue,
                };
                out.push_str(&line);
                out.push('\n');
            }
            let r = self.simple(&vars);
            out.push_str(&r);
            out
        }
    }

    fn generated(seed: u64) -> Module {
        let mut g = Gen { state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1, next: 0 };
        let vars = vec!["%x".to_string(), "%w".to_string()];
        let body = g.body(0, vars, Vec::new());
        let text = format!("def @main(%x: {T}, %w: {T}) -> {T} {{\n{body}\n}}\n");
        let m = parse_module(&text).unwrap_or_else(|e| panic!("generated program parses: {e:?}\n{text}"));
        let (typed, diags) = crate::infer_type::infer_module(&m);
        assert!(diags.is_empty(), "generated program type-checks: {diags:?}\n{text}");
        typed
    }

    #[test]
    fn lambda_lift_matches_lifting_one_function_at_a_time() {
        // Same globals, same `_lifted{k}` numbering, same free-variable order: byte-identical
        // output to the previous one-closure-per-copy implementation.
        let mut lifted = 0;
        for seed in 1..300 {
            let m = generated(seed);
            let expected = print_module(&reference::lambda_lift_module(&m));
            let out = lambda_lift_module(&m);
            assert_eq!(print_module(&out), expected, "seed {seed}:\n{}", print_module(&m));
            lifted += out.len() - m.len();
        }
        assert!(lifted > 500, "the generator makes nested functions ({lifted} lifted)");
    }

    #[test]
    fn lambda_lift_lifts_thousands_of_nested_functions_in_one_function() {
        // 2,000 let-bound nested functions, each capturing the previous result and called
        // once; every other one also escapes into a tuple (a closure-conversion wrapper).
        let n = 2_000;
        let mut text = format!("def @main(%x: {T}) -> {T} {{\n  let %v0 = %x;\n");
        for i in 0..n {
            text.push_str(&format!("  let %f{i} = fn (%y{i}: {T}) -> {T} {{ add(%y{i}, %v{i}) }};\n"));
            if i % 2 == 0 {
                text.push_str(&format!("  let %t{i} = (%f{i},);\n"));
            }
            text.push_str(&format!("  let %v{} = %f{i}(%x);\n", i + 1));
        }
        text.push_str(&format!("  %v{n}\n}}\n"));
        let (m, diags) = crate::infer_type::infer_module(&parse_module(&text).expect("parses"));
        assert!(diags.is_empty());
        let out = lambda_lift_module(&m);
        assert_eq!(out.len(), n + 1);
        assert!(out.get(&format!("main_lifted{}", n - 1)).is_some());
        assert!(verify_module(&out).is_ok());
        let (_, diags) = crate::infer_type::infer_module(&out);
        assert!(diags.is_empty(), "{diags:?}");
        assert!(out.iter().all(|(_, f)| reference::find_liftable(f).is_none()));
        let main = out.get("main").expect("main stays");
        let args = random_args(main, 7).expect("args");
        let before = eval_function(&m, "main", &args).expect("runs");
        let after = eval_function(&out, "main", &args).expect("runs");
        assert_values_close(&before, &after, 1e-6, 1e-6).expect("same meaning");
    }
}
