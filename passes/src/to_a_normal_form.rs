//! ToANormalForm (module pass, opt level 1): let-binds every intermediate value.
//!
//! What it does: rewrites each function so that every operand of a call, function
//! application, tuple, projection and `if` condition is an atom (a variable, global or
//! constant). Nested computations become bindings `let %tN = …;` in evaluation order; the
//! result of every block is an atom. `if` branches and nested function bodies get their own
//! blocks, so a value computed in a branch is bound inside that branch and nothing is
//! hoisted out of (or into) a conditional or a function. Nested blocks in the middle of an
//! expression are flattened into the enclosing block (their bindings are evaluated at the same
//! point either way). Fresh variables are named `%t0`, `%t1`, … per function and annotated
//! with the type of the value they bind when it is known.
//!
//! What it deliberately does not do: touch the body of a `Primitive` nested function (a fused
//! kernel stays in graph form, as in TVM) or a global marked `Primitive` or `Compiler`; remove
//! bindings, rename existing variables, or turn an
//! atom binding `let %a = %b;` into a substitution (that is CanonicalizeBindings). It does not
//! share equal computations (EliminateCommonSubexpr). A function already in A-normal form is
//! returned as the same `Arc`, so running the pass twice changes nothing the second time.
//!
//! Phases, per function:
//! 1. Check whether the function is already in A-normal form; if so, keep the same `Arc`.
//! 2. One walk in evaluation order (the IR's [`Walker`], no recursion on input depth),
//!    emitting bindings into a stack of open blocks (the function body, each `if` branch and
//!    each nested function body).

use std::convert::Infallible;
use std::ops::ControlFlow;
use std::sync::Arc;

use passel_engine::ir::{
    fn_attr, Branch, Enter, ExprKind, Function, FunctionBuilder, Module, NodeId, WalkHooks, Walker,
};

use crate::census::{more, Counter};
use passel_engine::ir::rewrite::{Copier, NoHooks};

use passel_engine::transform::Statistic;

/// This pass's statistics (`passel run --stats`), read off the census of each function it
/// changed (net counts: before − after).
/// The registry name.
pub const NAME: &str = "ToANormalForm";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// The `ToANormalForm` pass as registered: name, opt level, required passes and, for a module pass,
/// its per-function forms and session firewall.
pub fn pass() -> passel_engine::transform::ModulePass {
    passel_engine::transform::module_pass(NAME, 1, |module, ctx| {
        Ok(crate::census::counted_module(ctx, &module, to_a_normal_form_module(&module), STATISTICS))
    })
}

pub(crate) static STATISTICS: &[Counter] = &[(&BINDINGS_ADDED, |b, a| more(b.bindings, a.bindings))];
static BINDINGS_ADDED: Statistic =
    Statistic::new("ToANormalForm", "bindings added", "let-bindings made for nested subexpressions");

/// Runs ToANormalForm on every function of `module`; unchanged functions keep their `Arc`.
pub fn to_a_normal_form_module(module: &Module) -> Module {
    let mut out = module.clone();
    let new: Vec<Arc<Function>> = module.iter().map(|(_, f)| to_a_normal_form(f)).collect();
    out.replace_all(new);
    out
}

/// Converts one function to A-normal form; returns `func` itself when it already is in it
/// (or is malformed, which the verifier reports).
pub fn to_a_normal_form(func: &Arc<Function>) -> Arc<Function> {
    if !func.is_well_formed() || is_a_normal_form(func) || is_external(func) {
        return Arc::clone(func);
    }
    Arc::new(convert(func))
}

/// Functions handed to an external compiler (`Compiler` attribute) or already lowered to a
/// kernel (`Primitive`) keep their form, as in TVM.
pub(crate) fn is_external(func: &Function) -> bool {
    func.attrs().flag(fn_attr::PRIMITIVE) || func.attrs().contains("Compiler")
}

#[derive(Clone, Copy)]
enum Role {
    /// Must be an atom.
    Atom,
    /// The value of a binding: an atom or one computation over atoms.
    Value,
    /// A function body, `if` branch or closure body: an atom or a block.
    Body,
}

/// Whether every operand position holds an atom (see the module docs for the exact shape).
pub fn is_a_normal_form(func: &Function) -> bool {
    let mut stack = vec![(func.body(), Role::Body)];
    while let Some((id, role)) = stack.pop() {
        let kind = *func.kind(id);
        if kind.is_atom() {
            continue;
        }
        match (role, kind) {
            (Role::Atom, _) => return false,
            (Role::Body, ExprKind::Block { bindings, result }) => {
                for (_, value) in func.bindings(bindings) {
                    stack.push((value, Role::Value));
                }
                stack.push((result, Role::Atom));
            }
            (Role::Body, _) | (Role::Value, ExprKind::Block { .. }) => return false,
            (Role::Value, ExprKind::If { cond, then_, else_ }) => {
                stack.extend([(cond, Role::Atom), (then_, Role::Body), (else_, Role::Body)]);
            }
            (Role::Value, ExprKind::Func { idx }) => {
                let c = func.closure(idx);
                if !c.attrs.flag(fn_attr::PRIMITIVE) {
                    stack.push((c.body, Role::Body));
                }
            }
            (Role::Value, _) => func.for_each_operand(id, |o| stack.push((o, Role::Atom))),
        }
    }
    true
}

struct Anf<'f> {
    cp: Copier<'f>,
    b: FunctionBuilder,
    /// The new atoms (and closed blocks) standing for the operands walked so far.
    values: Vec<NodeId>,
    /// The bindings of each open block: the function body, each `if` branch and each nested
    /// function body being converted.
    frames: Vec<Vec<(NodeId, NodeId)>>,
    n_fresh: usize,
    /// The computation built at the last `exit`, `(old, new)`, not bound yet: the next event
    /// binds it, to the binding's variable when that event is its `bind`, else to a fresh
    /// variable (before anything else is built, so the arena order is that of the walk).
    pending: Option<(NodeId, NodeId)>,
}

fn convert(func: &Function) -> Function {
    let mut anf = Anf {
        cp: Copier::new(func),
        b: FunctionBuilder::new(),
        values: Vec::new(),
        frames: vec![Vec::new()],
        n_fresh: 0,
        pending: None,
    };
    let params: Vec<NodeId> = func.params().iter().map(|&p| anf.cp.fresh_var(&mut anf.b, p)).collect();
    let ControlFlow::Continue(()) = Walker::new().walk(func, func.body(), &mut anf);
    anf.close();
    let body = anf.values.pop().unwrap_or_else(|| unreachable!("the body leaves one value"));
    anf.b.finish(&params, body, func.ret_ty().cloned(), func.attrs().clone())
}

/// Phase 2 as hooks of the [`Walker`]: atoms are mapped, each computation is rebuilt over
/// atoms at its exit and bound, blocks met inside an expression add their bindings to the
/// open block, and `if` branches and nested function bodies open blocks of their own.
impl WalkHooks for Anf<'_> {
    type Break = Infallible;

    fn atom(&mut self, id: NodeId, _: &ExprKind) -> ControlFlow<Infallible> {
        self.flush();
        let new = self.cp.map(&mut self.b, id);
        self.values.push(new);
        ControlFlow::Continue(())
    }

    fn enter(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Infallible, Enter> {
        self.flush();
        let func = self.cp.src;
        if let ExprKind::Func { idx } = *kind {
            let c = func.closure(idx);
            if c.attrs.flag(fn_attr::PRIMITIVE) {
                // A fused kernel stays in graph form, as FuseOps made it.
                let new = self.cp.copy(&mut self.b, id, &mut NoHooks);
                self.pending = Some((id, new));
                return ControlFlow::Continue(Enter::Skip);
            }
            for &p in func.ids(c.params) {
                self.cp.fresh_var(&mut self.b, p);
            }
            self.frames.push(Vec::new());
        }
        ControlFlow::Continue(Enter::Descend)
    }

    fn exit(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Infallible> {
        match kind {
            // Its value is its result's, still pending if that is a computation.
            ExprKind::Block { .. } => return ControlFlow::Continue(()),
            ExprKind::Func { .. } => self.close(),
            _ => self.flush(),
        }
        let new = self.build(id);
        if let Some(ty) = self.cp.src.ty(id) {
            self.b.set_ty_ref(new, Some(ty));
        }
        self.pending = Some((id, new));
        ControlFlow::Continue(())
    }

    fn bind(&mut self, var: NodeId, value: NodeId) -> ControlFlow<Infallible> {
        let (old, new) = match self.pending.take() {
            Some(computed) => computed,
            None => (value, self.values.pop().unwrap_or_else(|| unreachable!("a value leaves an atom"))),
        };
        self.bind(Some(var), old, new);
        ControlFlow::Continue(())
    }

    fn enter_branch(&mut self, _: NodeId, _: Branch) -> ControlFlow<Infallible, Enter> {
        self.flush();
        self.frames.push(Vec::new());
        ControlFlow::Continue(Enter::Descend)
    }

    fn leave_branch(&mut self, _: NodeId, _: Branch) -> ControlFlow<Infallible> {
        self.close();
        ControlFlow::Continue(())
    }
}

impl Anf<'_> {
    /// Binds the pending computation, if any, to a fresh variable (pushed as a value).
    fn flush(&mut self) {
        if let Some((old, new)) = self.pending.take() {
            self.bind(None, old, new);
        }
    }

    /// Closes the innermost block around the atom on top of the value stack.
    fn close(&mut self) {
        self.flush();
        let result = self.values.pop().unwrap_or_else(|| unreachable!("a block leaves one value"));
        let pairs = self.frames.pop().unwrap_or_default();
        let block = self.b.block(&pairs, result);
        self.values.push(block);
    }

    /// Builds old compound node `old` from the atoms on the value stack.
    fn build(&mut self, old: NodeId) -> NodeId {
        let func = self.cp.src;
        let take = |values: &mut Vec<NodeId>, n: usize| values.split_off(values.len().saturating_sub(n));
        match *func.kind(old) {
            ExprKind::Call { op, attrs, args } => {
                let args = take(&mut self.values, args.len as usize);
                self.b.call(op, &args, func.call_attrs(attrs).clone())
            }
            ExprKind::Apply { args, .. } => {
                let v = take(&mut self.values, args.len as usize + 1);
                self.b.apply(v[0], &v[1..])
            }
            ExprKind::Tuple { fields } => {
                let fields = take(&mut self.values, fields.len as usize);
                self.b.tuple(&fields)
            }
            ExprKind::Proj { index, .. } => {
                let t = take(&mut self.values, 1);
                self.b.proj(t[0], index)
            }
            ExprKind::If { .. } => {
                let v = take(&mut self.values, 3);
                self.b.if_(v[0], v[1], v[2])
            }
            ExprKind::Func { idx } => {
                let c = func.closure(idx);
                let body = take(&mut self.values, 1);
                let params: Vec<NodeId> = func.ids(c.params).iter().map(|&p| self.cp.map(&mut self.b, p)).collect();
                self.b.closure(&params, body[0], c.ret_ty.clone(), c.attrs.clone())
            }
            ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } | ExprKind::Block { .. } => {
                unreachable!("build is only called on computations")
            }
        }
    }

    /// Adds `let var = new;` to the current block; a fresh variable is pushed as a value.
    fn bind(&mut self, var: Option<NodeId>, old: NodeId, new: NodeId) {
        let new_var = match var {
            Some(v) => self.cp.fresh_var(&mut self.b, v),
            None => {
                let name = format!("t{}", self.n_fresh);
                self.n_fresh += 1;
                let v = self.b.var(&name, self.cp.src.ty(old).cloned());
                self.values.push(v);
                v
            }
        };
        match self.frames.last_mut() {
            Some(frame) => frame.push((new_var, new)),
            None => unreachable!("the function body is always an open block"),
        }
    }
}

#[cfg(test)]
mod tests {
    use passel_engine::ir::{structural_eq, Attrs, DType, Type};
    use passel_engine::op;

    use super::*;
    use crate::to_graph_normal_form::to_graph_normal_form;

    /// `relu(relu(…relu(%x)…))`, `depth` calls deep, built without the parser's nesting limit.
    fn deep(depth: usize) -> Arc<Function> {
        let relu = op::lookup("relu").expect("relu is registered");
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(Type::tensor(vec![2], DType::F32)));
        let mut cur = x;
        for _ in 0..depth {
            cur = b.call(relu, &[cur], Attrs::new());
        }
        Arc::new(b.finish(&[x], cur, None, Attrs::new()))
    }

    #[test]
    fn to_a_normal_form_and_back_handle_deep_nesting_without_recursion() {
        let func = deep(200_000);
        let anf = to_a_normal_form(&func);
        assert!(is_a_normal_form(&anf));
        assert_eq!(anf.num_bindings(), 200_000);
        assert!(Arc::ptr_eq(&to_a_normal_form(&anf), &anf), "a second run changes nothing");
        let back = to_graph_normal_form(&anf);
        assert!(structural_eq(&back, &func), "the round trip gives the nested expression back");
        assert!(Arc::ptr_eq(&to_graph_normal_form(&back), &back));
    }

    #[test]
    fn to_a_normal_form_keeps_atom_bodies_and_rejects_nested_operands() {
        let func = deep(0);
        assert!(is_a_normal_form(&func));
        assert!(Arc::ptr_eq(&to_a_normal_form(&func), &func));
        assert!(!is_a_normal_form(&deep(2)));
    }
}
