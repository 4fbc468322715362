//! ToGraphNormalForm (module pass, opt level 1): inlines single-use let-bound values back
//! into their use, turning A-normal form into nested expressions.
//!
//! What it does: a binding `let %v = e;` is removed and `e` put in place of the only use of
//! `%v` when all of these hold:
//! - `e` is a computation other than a nested function (atom rebindings are
//!   CanonicalizeBindings' job; a `let`-bound function stays named, the shape LambdaLift and
//!   readers expect) and is pure: no call of a stateful operator and no function application anywhere in it (a
//!   called function might be stateful), so moving it cannot reorder effects;
//! - `%v` is bound once and used exactly once in the whole function (uses inside nested
//!   functions count);
//! - the use is in the same region as the binding, where a region is the function body, one
//!   `if` branch or one nested function body: a value is never moved into a branch (it would
//!   be evaluated conditionally) nor into a function (it would be evaluated per call). Within
//!   a region every expression is evaluated exactly once, after the binding, and every
//!   variable visible at the binding is visible at the use, so the move keeps the meaning.
//!
//! Chains inline transitively: `let %a = relu(%x); let %b = exp(%a); %b` becomes
//! `exp(relu(%x))`, and a rebinding `let %w = %v;` of an inlined `%v` (used once, in the same
//! region) goes with it. Blocks left without bindings become their result.
//!
//! What it deliberately does not do: change a global marked `Primitive` or `Compiler`; inline
//! values used twice or never (DeadCodeElimination
//! removes unused pure bindings), move stateful computations or applications, cross `if` or
//! function boundaries, or substitute atom rebindings. A function with nothing to inline is
//! returned as the same `Arc`.
//!
//! Phases, per function:
//! 1. Analysis over the live nodes: use counts of variables, purity of every subtree (a loop
//!    over the post-order arena), and the region of every binding and every variable use
//!    (one walk in evaluation order: the IR's [`Walker`] with [`Regions`] as its hooks).
//! 2. If some binding can be inlined: one copy in evaluation order ([`passel_engine::ir::rewrite::Copier`])
//!    that maps each inlined variable to the copy of its value and drops its binding.

use std::convert::Infallible;
use std::ops::ControlFlow;
use std::sync::Arc;

use passel_engine::ir::{Branch, Enter, ExprKind, Function, FunctionBuilder, Module, NodeId, WalkHooks, Walker};
use passel_engine::op;

use crate::census::{fewer, Counter};
use passel_engine::ir::rewrite::NONE;
use passel_engine::ir::rewrite::{copy_function, Copier, CopyHooks};
use passel_engine::transform::Statistic;

/// This pass's statistics (`passel run --stats`), read off the census of each function it
/// changed (net counts: before − after).
/// The registry name.
pub const NAME: &str = "ToGraphNormalForm";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// The `ToGraphNormalForm` pass as registered: name, opt level, required passes and, for a module pass,
/// its per-function forms and session firewall.
pub fn pass() -> passel_engine::transform::ModulePass {
    passel_engine::transform::module_pass(NAME, 1, |module, ctx| {
        Ok(crate::census::counted_module(ctx, &module, to_graph_normal_form_module(&module), STATISTICS))
    })
}

pub(crate) static STATISTICS: &[Counter] = &[(&BINDINGS_REMOVED, |b, a| fewer(b.bindings, a.bindings))];
static BINDINGS_REMOVED: Statistic =
    Statistic::new("ToGraphNormalForm", "bindings removed", "let-bindings turned into shared dataflow");

/// Runs ToGraphNormalForm on every function of `module`; unchanged functions keep their `Arc`.
pub fn to_graph_normal_form_module(module: &Module) -> Module {
    let mut out = module.clone();
    let new: Vec<Arc<Function>> = module.iter().map(|(_, f)| to_graph_normal_form(f)).collect();
    out.replace_all(new);
    out
}

/// Inlines the single-use pure bindings of `func`; returns `func` itself when there are none.
pub fn to_graph_normal_form(func: &Arc<Function>) -> Arc<Function> {
    if !func.is_well_formed() || crate::to_a_normal_form::is_external(func) {
        return Arc::clone(func);
    }
    let (inline, atom_of) = inlinable_bindings(func);
    if !inline.iter().any(|&v| v != NONE) {
        return Arc::clone(func);
    }
    let mut var_of = vec![NONE; inline.len()];
    for (var, &value) in inline.iter().enumerate() {
        if value != NONE {
            var_of[value.index()] = NodeId(var as u32);
        }
    }
    let inlined = vec![false; inline.len()];
    let mut hooks = Inliner { value_of: inline, var_of, atom_of, inlined };
    Arc::new(copy_function(func, &mut hooks))
}

/// For each variable whose binding is inlined, its value (`NONE` for the others); and for
/// each variable bound to another variable and used once in the same region, that variable
/// (inlined too when that variable turns out to be inlined, during the copy).
fn inlinable_bindings(func: &Function) -> (Vec<NodeId>, Vec<NodeId>) {
    let n = func.num_nodes();
    let live = func.live_mask();
    // Uses of variables (binding slots and parameters are definitions, not uses).
    let mut uses = vec![0u32; n];
    // Purity of each subtree: operands come before users in the arena.
    let mut pure = vec![true; n];
    for i in 0..n {
        let id = NodeId(i as u32);
        let mut count = |o: NodeId| {
            if matches!(func.kind(o), ExprKind::Var { .. }) {
                uses[o.index()] = uses[o.index()].saturating_add(1);
            }
        };
        match *func.kind(id) {
            ExprKind::Block { bindings, result } => {
                pure[i] = func.bindings(bindings).all(|(_, value)| pure[value.index()]) && pure[result.index()];
                if live[i] {
                    func.bindings(bindings).for_each(|(_, value)| count(value));
                    count(result);
                }
            }
            ExprKind::Func { idx } => {
                // Making a closure evaluates nothing.
                if live[i] {
                    count(func.closure(idx).body);
                }
            }
            ExprKind::Call { op, .. } => {
                let mut p = !op::is_stateful(op);
                func.for_each_operand(id, |o| p &= pure[o.index()]);
                pure[i] = p;
                if live[i] {
                    func.for_each_operand(id, count);
                }
            }
            ExprKind::Apply { .. } => {
                pure[i] = false;
                if live[i] {
                    func.for_each_operand(id, count);
                }
            }
            _ => {
                let mut p = true;
                func.for_each_operand(id, |o| p &= pure[o.index()]);
                pure[i] = p;
                if live[i] {
                    func.for_each_operand(id, count);
                }
            }
        }
    }
    let mut regions = Regions {
        bind_region: vec![u32::MAX; n],
        use_region: vec![u32::MAX; n],
        bound_to: vec![NONE; n],
        open: vec![0],
        n_regions: 1,
    };
    let ControlFlow::Continue(()) = Walker::new().walk(func, func.body(), &mut regions);
    let Regions { bind_region, use_region, bound_to, .. } = regions;
    let mut inline = vec![NONE; n];
    let mut atom_of = vec![NONE; n];
    for i in 0..n {
        let value = bound_to[i];
        if value == NONE || uses[i] != 1 || bind_region[i] >= u32::MAX - 1 || bind_region[i] != use_region[i] {
            continue;
        }
        match func.kind(value) {
            ExprKind::Var { .. } => atom_of[i] = value,
            ExprKind::Global { .. } | ExprKind::Const { .. } | ExprKind::Func { .. } => {}
            _ if pure[value.index()] => inline[i] = value,
            _ => {}
        }
    }
    (inline, atom_of)
}

/// The region of every binding and every variable use, as hooks of the IR's [`Walker`]:
/// 0 is the function body; each `if` branch and nested function body opens a new one.
struct Regions {
    bind_region: Vec<u32>,
    use_region: Vec<u32>,
    /// Variable → the value it is bound to (`NONE`: not bound).
    bound_to: Vec<NodeId>,
    /// The regions open at this point of the walk, innermost last.
    open: Vec<u32>,
    n_regions: u32,
}

impl Regions {
    fn region(&self) -> u32 {
        self.open.last().copied().unwrap_or(0)
    }

    fn open_region(&mut self) {
        self.open.push(self.n_regions);
        self.n_regions += 1;
    }
}

impl WalkHooks for Regions {
    type Break = Infallible;

    fn atom(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Infallible> {
        if matches!(kind, ExprKind::Var { .. }) {
            self.use_region[id.index()] = self.region();
        }
        ControlFlow::Continue(())
    }

    fn enter(&mut self, _: NodeId, kind: &ExprKind) -> ControlFlow<Infallible, Enter> {
        if matches!(kind, ExprKind::Func { .. }) {
            self.open_region();
        }
        ControlFlow::Continue(Enter::Descend)
    }

    fn exit(&mut self, _: NodeId, kind: &ExprKind) -> ControlFlow<Infallible> {
        if matches!(kind, ExprKind::Func { .. }) {
            self.open.pop();
        }
        ControlFlow::Continue(())
    }

    fn bind(&mut self, var: NodeId, value: NodeId) -> ControlFlow<Infallible> {
        // A variable bound twice (malformed) is never inlined.
        let twice = self.bound_to[var.index()] != NONE;
        self.bind_region[var.index()] = if twice { u32::MAX - 1 } else { self.region() };
        self.bound_to[var.index()] = value;
        ControlFlow::Continue(())
    }

    fn enter_branch(&mut self, _: NodeId, _: Branch) -> ControlFlow<Infallible, Enter> {
        self.open_region();
        ControlFlow::Continue(Enter::Descend)
    }

    fn leave_branch(&mut self, _: NodeId, _: Branch) -> ControlFlow<Infallible> {
        self.open.pop();
        ControlFlow::Continue(())
    }
}

struct Inliner {
    /// Inlined variable → its value.
    value_of: Vec<NodeId>,
    /// Value of an inlined binding → its variable.
    var_of: Vec<NodeId>,
    /// Variable bound to a variable → that variable (see [`inlinable_bindings`]).
    atom_of: Vec<NodeId>,
    /// Variables bound to an inlined variable, inlined with it.
    inlined: Vec<bool>,
}

impl Inliner {
    fn is_inlined(&self, var: NodeId) -> bool {
        self.value_of[var.index()] != NONE || self.inlined[var.index()]
    }
}

impl<'s> CopyHooks<'s> for Inliner {
    fn enter(&mut self, cp: &mut Copier<'s>, _b: &mut FunctionBuilder, old: NodeId) -> Option<NodeId> {
        // The binding slot of `let %w = %v;` where `%v` was inlined: `%w` is `%v`'s value too
        // (a chain `let %v = e; let %w = %v; use(%w)` becomes `use(e)`).
        let target = *self.atom_of.get(old.index())?;
        if target == NONE || !self.is_inlined(target) {
            return None;
        }
        let new = cp.memo[target.index()];
        if new == NONE {
            return None;
        }
        self.inlined[old.index()] = true;
        Some(new)
    }

    fn exit(&mut self, cp: &mut Copier<'s>, b: &mut FunctionBuilder, old: NodeId) -> Option<NodeId> {
        let func = cp.src;
        let var = self.var_of[old.index()];
        let new = match *func.kind(old) {
            ExprKind::Block { bindings, result } => {
                let mut pairs = Vec::new();
                for (v, value) in func.bindings(bindings) {
                    if !self.is_inlined(v) {
                        let new_var = cp.map(b, v);
                        pairs.push((new_var, cp.map(b, value)));
                    }
                }
                let r = cp.map(b, result);
                b.block(&pairs, r)
            }
            _ if var != NONE => cp.build_default(b, old),
            _ => return None,
        };
        // The value of an inlined binding: its variable stands for the copy from now on (the
        // value comes first in evaluation order, so the only use is copied later).
        if var != NONE {
            cp.memo[var.index()] = new;
        }
        Some(new)
    }
}
