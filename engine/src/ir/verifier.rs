//! The IR verifier: checks the invariants every pass may assume and every pass must keep.
//!
//! Checked, for each function:
//! - arena shape: ids and table indices in range, operands precede their users (post-order),
//!   blocks have at least one binding;
//! - tree shape: a live compound node has exactly one user (the body counts as a use);
//! - binding: every live `Var` is bound exactly once (function parameter, block binding or
//!   closure parameter) and used only where its binding is visible;
//! - globals: a `Global` names a function of the module and an `Apply` of a global passes as
//!   many arguments as the callee has parameters (only when a module is given);
//! - operators: arity and attribute schema;
//! - types, where known: call type relations, binding annotations, `if` conditions, tuple
//!   projections, block, closure and function result types, `Apply` argument types.
//!
//! Only live nodes (reachable from the parameters and the body) are checked: dead nodes left
//! over by builders are never printed, evaluated or compared.
//!
//! It deliberately does not infer types: a node without a type is not checked against one.
//! Every walk is a loop over the arena or over an explicit stack, so neither input size nor
//! nesting depth reaches the call stack, and malformed arenas are reported, never indexed
//! blindly.

use std::convert::Infallible;
use std::ops::ControlFlow;

use super::expr::{ExprKind, Span};
use super::function::Function;
use super::ids::NodeId;
use super::module::Module;
use super::ty::{DType, Type, TypeKind};
use super::walk::{Enter, WalkHooks, Walker};
use crate::op;

/// One broken invariant: in which function, at which node, and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("@{func}{}: {msg}", node.map(|n| format!(" {n}")).unwrap_or_default())]
pub struct VerifyError {
    /// The global name of the function.
    pub func: String,
    /// The offending node, if the error is about one.
    pub node: Option<NodeId>,
    /// The node's source span, when the function was parsed.
    pub span: Option<Span>,
    /// What is wrong (a lowercase phrase).
    pub msg: String,
}

/// Verifies every function of `m`, in module order, and returns all errors found.
pub fn verify_module(m: &Module) -> Result<(), Vec<VerifyError>> {
    let mut errors = Vec::new();
    // One set of per-node tables for all functions, instead of allocating them per function.
    let mut scratch = Scratch::default();
    for (name, func) in m.iter() {
        let mut v = Verifier { module: Some(m), name, func, errors: Vec::new() };
        v.run(&mut scratch);
        errors.append(&mut v.errors);
    }
    for (name, func) in m.prim_funcs() {
        errors.extend(crate::tir::verify_prim_func(name, func).into_iter().map(|e| VerifyError {
            func: e.func,
            node: None,
            span: e.span,
            msg: match e.stmt {
                Some(s) => format!("statement {s}: {}", e.msg),
                None => e.msg,
            },
        }));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Verifies one function named `name`. With `module`, global references are resolved against
/// it; without, they are not checked. Returns all errors found, in a deterministic order.
pub fn verify_function(module: Option<&Module>, name: &str, func: &Function) -> Result<(), Vec<VerifyError>> {
    let mut v = Verifier { module, name, func, errors: Vec::new() };
    v.run(&mut Scratch::default());
    if v.errors.is_empty() {
        Ok(())
    } else {
        Err(v.errors)
    }
}

struct Verifier<'a> {
    module: Option<&'a Module>,
    name: &'a str,
    func: &'a Function,
    errors: Vec<VerifyError>,
}

/// Per-node tables of one verification, kept between the functions of a module so that their
/// allocations are reused. [`Scratch::reset`] sizes them for a function.
#[derive(Default)]
struct Scratch {
    /// `wf[i]`: node i's references are in range and precede it.
    wf: Vec<bool>,
    live: Vec<bool>,
    users: Vec<u32>,
    binders: Vec<u32>,
    in_scope: Vec<bool>,
    visited: Vec<bool>,
    reported: Vec<bool>,
    walker: Walker,
}

impl Scratch {
    /// Every table with `n` entries of false / zero (each walk resets the walker).
    fn reset(&mut self, n: usize) {
        for v in [&mut self.wf, &mut self.live, &mut self.in_scope, &mut self.visited, &mut self.reported] {
            v.clear();
            v.resize(n, false);
        }
        for v in [&mut self.users, &mut self.binders] {
            v.clear();
            v.resize(n, 0);
        }
    }
}

/// The tables of the scope walk (all `false` / empty on entry), borrowed from [`Scratch`].
struct ScopeWalk<'a> {
    in_scope: &'a mut Vec<bool>,
    visited: &'a mut Vec<bool>,
    reported: &'a mut Vec<bool>,
    walker: &'a mut Walker,
}

/// The scope check's hooks on the [`Walker`]: only live, well-formed nodes are walked (the
/// others were reported by the sweep), each compound node once even when (wrongly) shared, so
/// a DAG cannot make the walk exponential; the sharing itself was reported in phase 3.
struct ScopeHooks<'v, 'a, 't> {
    v: &'v mut Verifier<'a>,
    live: &'t [bool],
    wf: &'t [bool],
    binders: &'t [u32],
    in_scope: &'t mut [bool],
    visited: &'t mut [bool],
    reported: &'t mut [bool],
}

impl ScopeHooks<'_, '_, '_> {
    /// Puts the parameters of the closure of `kind` in or out of scope.
    fn closure_params(&mut self, kind: &ExprKind, in_scope: bool) {
        let ExprKind::Func { idx } = *kind else { return };
        let func = self.v.func;
        for &p in func.try_closure(idx).and_then(|c| func.try_ids(c.params)).unwrap_or(&[]) {
            if let Some(s) = self.in_scope.get_mut(p.index()) {
                *s = in_scope;
            }
        }
    }
}

impl WalkHooks for ScopeHooks<'_, '_, '_> {
    type Break = Infallible;

    #[inline(always)]
    fn atom(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Infallible> {
        let i = id.index();
        if matches!(kind, ExprKind::Var { .. }) && self.live[i] && self.wf[i] {
            self.v.check_in_scope(id, self.in_scope, self.reported, self.binders);
        }
        ControlFlow::Continue(())
    }

    #[inline(always)]
    fn enter(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Infallible, Enter> {
        let i = id.index();
        if !self.live[i] || !self.wf[i] || std::mem::replace(&mut self.visited[i], true) {
            return ControlFlow::Continue(Enter::Skip);
        }
        self.closure_params(kind, true);
        ControlFlow::Continue(Enter::Descend)
    }

    #[inline(always)]
    fn exit(&mut self, _: NodeId, kind: &ExprKind) -> ControlFlow<Infallible> {
        match *kind {
            ExprKind::Block { bindings, .. } => {
                for pair in self.v.func.try_ids(bindings).unwrap_or(&[]).chunks_exact(2) {
                    if let Some(s) = self.in_scope.get_mut(pair[0].index()) {
                        *s = false;
                    }
                }
            }
            ExprKind::Func { .. } => self.closure_params(kind, false),
            _ => {}
        }
        ControlFlow::Continue(())
    }

    #[inline(always)]
    fn bind(&mut self, var: NodeId, _: NodeId) -> ControlFlow<Infallible> {
        self.in_scope[var.index()] = true;
        ControlFlow::Continue(())
    }
}

/// Calls `f` on the operands of `kind` in evaluation order (as [`Function::for_each_operand`]
/// does), using only checked accessors. On a malformed reference it returns the error before
/// calling `f` at all.
#[inline]
fn visit_operands(func: &Function, kind: &ExprKind, mut f: impl FnMut(NodeId)) -> Result<(), String> {
    let ids = |r| func.try_ids(r).ok_or_else(|| "operand range out of bounds".to_string());
    match *kind {
        ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => {}
        ExprKind::Call { args, .. } => ids(args)?.iter().for_each(|&a| f(a)),
        ExprKind::Apply { callee, args } => {
            let args = ids(args)?;
            f(callee);
            args.iter().for_each(|&a| f(a));
        }
        ExprKind::Tuple { fields } => ids(fields)?.iter().for_each(|&a| f(a)),
        ExprKind::Proj { tuple, .. } => f(tuple),
        ExprKind::If { cond, then_, else_ } => {
            f(cond);
            f(then_);
            f(else_);
        }
        ExprKind::Func { idx } => {
            let c = func.try_closure(idx).ok_or_else(|| format!("closure index {} out of bounds", idx.0))?;
            ids(c.params)?.iter().for_each(|&p| f(p));
            f(c.body);
        }
        ExprKind::Block { bindings, result } => {
            let b = ids(bindings)?;
            if b.is_empty() || b.len() % 2 != 0 {
                return Err("block without bindings or with an odd binding range".to_string());
            }
            for pair in b.chunks_exact(2) {
                f(pair[1]);
                f(pair[0]);
            }
            f(result);
        }
    }
    Ok(())
}

/// Takes back what the sweep's visit of node `i` marked (its operands before it: one user
/// each, and live), for a node found malformed. A node is live exactly when it is a parameter
/// or has a user counted, so its liveness follows from the count left.
#[cold]
fn unmark_operands(
    func: &Function,
    kind: &ExprKind,
    i: usize,
    params: &[NodeId],
    live: &mut [bool],
    users: &mut [u32],
) {
    let _ = visit_operands(func, kind, |o| {
        let j = o.index();
        if j < i {
            users[j] -= 1;
        }
    });
    let _ = visit_operands(func, kind, |o| {
        let j = o.index();
        if j < i {
            live[j] = users[j] > 0 || params.contains(&o);
        }
    });
}

impl Verifier<'_> {
    fn err(&mut self, node: Option<NodeId>, msg: String) {
        let span = node.and_then(|n| self.func.span(n));
        self.errors.push(VerifyError { func: self.name.to_string(), node, span, msg });
    }

    /// The known type of a node already checked to be in range.
    fn ty(&self, id: NodeId) -> Option<&Type> {
        self.func.try_ty(id)
    }

    fn run(&mut self, sc: &mut Scratch) {
        let func = self.func;
        let n = func.num_nodes();
        let nodes = func.nodes();
        sc.reset(n);

        // Phase 1: roots.
        let Some(params) = func.try_params() else {
            self.err(None, "parameter range out of bounds".into());
            return;
        };
        let body = func.body();
        let mut params_ok = true;
        if body.index() >= n {
            self.err(None, format!("body {body} out of range"));
            params_ok = false;
        }
        for &p in params {
            match nodes.get(p.index()) {
                None => {
                    self.err(None, format!("parameter {p} out of range"));
                    params_ok = false;
                }
                Some(node) if !matches!(node.kind, ExprKind::Var { .. }) => {
                    self.err(Some(p), "parameter is not a variable".into());
                    params_ok = false;
                }
                Some(_) => {}
            }
        }
        // Without valid roots there is no live tree to check.
        if !params_ok {
            return;
        }
        // Phase 2: one backward sweep over the live nodes (operands of well-formed nodes have
        // smaller ids, so a node's liveness is final when the sweep reaches it). For each it
        // checks the node's shape: `wf[i]` means every reference of node i is in range and
        // precedes it, so later phases may follow its operands without checks. For a well-formed
        // node it marks the operands live, counts their users and the binders of variables.
        // Dead nodes (builder leftovers, never printed, evaluated or compared) are not checked.
        let wf = &mut sc.wf;
        let live = &mut sc.live;
        let users = &mut sc.users;
        let binders = &mut sc.binders;
        for &p in params {
            live[p.index()] = true;
            binders[p.index()] += 1;
        }
        live[body.index()] = true;
        users[body.index()] += 1;
        // Binders that are not variables, as (binding node, bound node) in sweep order.
        let mut bad_binders: Vec<(usize, NodeId)> = Vec::new();
        // Shape errors of live nodes, in sweep order (at most one per node).
        let mut shape_errors: Vec<(NodeId, String)> = Vec::new();
        // Nodes with other than one user and variables bound more than once, in sweep order
        // (at most one error per node).
        let mut tree_errors: Vec<(NodeId, String)> = Vec::new();
        let n_ops = op::all().len();
        for i in (0..n).rev() {
            if !live[i] {
                continue;
            }
            let kind = &nodes[i].kind;
            let id = NodeId(i as u32);
            // The users and binders of node i are final here: they are counted from nodes
            // with larger ids (and from the roots, before the sweep).
            if !kind.is_atom() && users[i] != 1 {
                let msg = format!("compound expression has {} users; bind it to a variable to share it", users[i]);
                tree_errors.push((id, msg));
            } else if matches!(kind, ExprKind::Var { .. }) && binders[i] > 1 {
                tree_errors.push((id, format!("variable {} is bound {} times", self.var_name(id), binders[i])));
            }
            // One visit of the operands both finds the first one that does not precede the node
            // and marks those that do live and used, as a well-formed node's operands are (the
            // usual case); a node found malformed has its marks taken back below.
            let mut late = None;
            let visited = visit_operands(func, kind, |o| {
                let j = o.index();
                if j < i {
                    live[j] = true;
                    users[j] = users[j].saturating_add(1);
                } else if late.is_none() {
                    late = Some(o);
                }
            });
            // `visit_operands` calls nothing when it fails, so there is nothing to take back.
            let marked = visited.is_ok();
            let res = visited.and_then(|()| self.check_tables(kind, n_ops));
            match res {
                Err(msg) => shape_errors.push((id, msg)),
                Ok(()) => match late {
                    Some(o) if o.index() >= n => shape_errors.push((id, format!("operand {o} out of range"))),
                    Some(o) => shape_errors.push((id, format!("operand {o} does not precede its user"))),
                    None => wf[i] = true,
                },
            }
            if !wf[i] {
                if marked {
                    unmark_operands(func, kind, i, params, live, users);
                }
                continue;
            }
            let mut bind = |v: NodeId| {
                if matches!(nodes[v.index()].kind, ExprKind::Var { .. }) {
                    binders[v.index()] = binders[v.index()].saturating_add(1);
                } else {
                    bad_binders.push((i, v));
                }
            };
            match *kind {
                ExprKind::Block { bindings, .. } => {
                    func.try_ids(bindings).unwrap_or(&[]).chunks_exact(2).for_each(|p| bind(p[0]))
                }
                ExprKind::Func { idx } => func
                    .try_closure(idx)
                    .and_then(|c| func.try_ids(c.params))
                    .unwrap_or(&[])
                    .iter()
                    .for_each(|&p| bind(p)),
                _ => {}
            }
        }
        // Reported in arena order.
        for (id, msg) in shape_errors.into_iter().rev() {
            self.err(Some(id), msg);
        }
        // Phase 3: users (tree shape) and binders (bound exactly once), in arena order: the
        // errors found by the sweep. A stable sort keeps each node's binders in their order.
        bad_binders.sort_by_key(|&(i, _)| i);
        for (i, v) in bad_binders {
            self.err(Some(NodeId(i as u32)), format!("bound {v} is not a variable"));
        }
        for (id, msg) in tree_errors.into_iter().rev() {
            self.err(Some(id), msg);
        }

        // Phase 4: scopes.
        let (live, wf, binders) = (&sc.live, &sc.wf, &sc.binders);
        let mut walk = ScopeWalk {
            in_scope: &mut sc.in_scope,
            visited: &mut sc.visited,
            reported: &mut sc.reported,
            walker: &mut sc.walker,
        };
        self.check_scopes(params, body, live, wf, binders, &mut walk);

        // Phase 5: operators, globals and types, in arena order.
        for i in 0..n {
            // Variables and constants have nothing to check here.
            let atom = matches!(nodes[i].kind, ExprKind::Var { .. } | ExprKind::Const { .. });
            if live[i] && wf[i] && !atom {
                self.check_node(NodeId(i as u32));
            }
        }
        if let (Some(ret), Some(bt)) = (func.ret_ty(), self.ty(body)) {
            if ret != bt {
                self.err(Some(body), format!("function returns {ret} but its body has type {bt}"));
            }
        }
    }

    /// Checks the side-table indices of a node (symbols, constants, attributes, operators).
    fn check_tables(&self, kind: &ExprKind, n_ops: usize) -> Result<(), String> {
        let func = self.func;
        match *kind {
            ExprKind::Var { name } | ExprKind::Global { name } => {
                if func.has_sym(name) {
                    Ok(())
                } else {
                    Err(format!("symbol index {} out of bounds", name.0))
                }
            }
            ExprKind::Const { idx } => {
                func.try_constant(idx).map(|_| ()).ok_or_else(|| format!("constant index {} out of bounds", idx.0))
            }
            ExprKind::Call { op, attrs, .. } => {
                if op.0 as usize >= n_ops {
                    return Err(format!("unknown operator id {}", op.0));
                }
                func.try_call_attrs(attrs)
                    .map(|_| ())
                    .ok_or_else(|| format!("attribute index {} out of bounds", attrs.0))
            }
            _ => Ok(()),
        }
    }

    fn var_name(&self, id: NodeId) -> String {
        match self.func.nodes().get(id.index()).map(|n| n.kind) {
            Some(ExprKind::Var { name }) => format!("%{}", self.func.try_sym(name).unwrap_or("?")),
            _ => id.to_string(),
        }
    }

    /// Walks the expression tree from the body in evaluation order ([`Walker`]), tracking which
    /// variables are in scope.
    fn check_scopes(
        &mut self,
        params: &[NodeId],
        body: NodeId,
        live: &[bool],
        wf: &[bool],
        binders: &[u32],
        walk: &mut ScopeWalk<'_>,
    ) {
        let ScopeWalk { in_scope, visited, reported, walker } = walk;
        for &p in params {
            in_scope[p.index()] = true;
        }
        let func = self.func;
        let mut hooks = ScopeHooks { v: self, live, wf, binders, in_scope, visited, reported };
        let ControlFlow::Continue(()) = walker.walk(func, body, &mut hooks);
    }

    /// Reports the use of variable `id` (live and well formed) if it is not in scope, once.
    #[inline(always)]
    fn check_in_scope(&mut self, id: NodeId, in_scope: &[bool], reported: &mut [bool], binders: &[u32]) {
        let i = id.index();
        if !in_scope[i] && !reported[i] {
            reported[i] = true;
            self.report_out_of_scope(id, binders[i]);
        }
    }

    #[cold]
    #[inline(never)]
    fn report_out_of_scope(&mut self, id: NodeId, binders: u32) {
        let msg = if binders == 0 {
            format!("unbound variable {}", self.var_name(id))
        } else {
            format!("variable {} used outside its scope", self.var_name(id))
        };
        self.err(Some(id), msg);
    }

    /// Operator, global and type checks of one live, well-formed node.
    fn check_node(&mut self, id: NodeId) {
        let func = self.func;
        let kind = func.nodes()[id.index()].kind;
        let node_ty: Option<&Type> = func.try_ty(id);
        match kind {
            ExprKind::Var { .. } | ExprKind::Const { .. } => {}
            ExprKind::Global { name } => {
                if let Some(m) = self.module {
                    let g = func.try_sym(name).unwrap_or("");
                    if !m.contains(g) && m.get_prim(g).is_none() {
                        self.err(Some(id), format!("unknown global function @{g}"));
                    }
                }
            }
            ExprKind::Call { op: op_id, attrs, args } => {
                let def = op::get(op_id);
                let args = func.try_ids(args).unwrap_or(&[]);
                let mut ok = true;
                if !def.arity.accepts(args.len()) {
                    self.err(Some(id), format!("`{}` takes {} arguments, got {}", def.name, def.arity, args.len()));
                    ok = false;
                }
                if def.name == "call_tir" && ok {
                    ok = self.check_call_tir_callee(id, args[0]);
                }
                if let Some(attrs) = func.try_call_attrs(attrs) {
                    // Without attributes only a required one can be missing; most operators
                    // have none.
                    let may_fail = !attrs.is_empty() || def.attrs.iter().any(|s| s.required);
                    if may_fail {
                        if let Err(msg) = def.check_attrs(attrs) {
                            self.err(Some(id), msg);
                            ok = false;
                        }
                    }
                    let arg_tys: Option<Vec<Type>> = args.iter().map(|&a| self.ty(a).cloned()).collect();
                    if let (true, Some(arg_tys)) = (ok, arg_tys) {
                        match (def.type_rel)(&arg_tys, attrs) {
                            Err(e) => self.err(Some(id), format!("type error: {e}")),
                            Ok(t) => {
                                if let Some(nt) = node_ty {
                                    if *nt != t {
                                        self.err(Some(id), format!("call has type {nt} but `{}` gives {t}", def.name));
                                    }
                                }
                            }
                        }
                    }
                }
            }
            ExprKind::Apply { callee, args } => self.check_apply(id, callee, func.try_ids(args).unwrap_or(&[])),
            ExprKind::Tuple { fields } => {
                let fields = func.try_ids(fields).unwrap_or(&[]);
                let tys: Option<Vec<Type>> = fields.iter().map(|&f| self.ty(f).cloned()).collect();
                if let (Some(nt), Some(tys)) = (node_ty, tys) {
                    let t = Type::tuple(tys);
                    if *nt != t {
                        self.err(Some(id), format!("tuple has type {nt} but its fields give {t}"));
                    }
                }
            }
            ExprKind::Proj { tuple, index } => {
                let Some(tt) = self.ty(tuple).cloned() else { return };
                match tt.as_tuple().map(|fields| fields.get(index as usize)) {
                    None => self.err(Some(id), format!("projection .{index} of non-tuple type {tt}")),
                    Some(None) => self.err(Some(id), format!("projection .{index} out of range for {tt}")),
                    Some(Some(ft)) => {
                        if let Some(nt) = node_ty {
                            if nt != ft {
                                self.err(
                                    Some(id),
                                    format!("projection has type {nt} but field .{index} has type {ft}"),
                                );
                            }
                        }
                    }
                }
            }
            ExprKind::If { cond, then_, else_ } => {
                if let Some(ct) = self.ty(cond).cloned() {
                    let scalar_bool = ct.as_tensor().is_some_and(|t| t.shape.is_empty() && t.dtype == DType::Bool);
                    if !scalar_bool {
                        self.err(Some(cond), format!("if condition has type {ct}, expected Tensor[(), bool]"));
                    }
                }
                for branch in [then_, else_] {
                    if let (Some(nt), Some(bt)) = (node_ty, self.ty(branch)) {
                        if nt != bt {
                            self.err(Some(branch), format!("if has type {nt} but a branch has type {bt}"));
                        }
                    }
                }
            }
            ExprKind::Func { idx } => {
                let Some(c) = func.try_closure(idx) else { return };
                if let (Some(ret), Some(bt)) = (&c.ret_ty, self.ty(c.body)) {
                    if ret != bt {
                        self.err(Some(c.body), format!("closure returns {ret} but its body has type {bt}"));
                    }
                }
                let params = func.try_ids(c.params).unwrap_or(&[]);
                let ptys: Option<Vec<Type>> = params.iter().map(|&p| self.ty(p).cloned()).collect();
                if let (Some(nt), Some(ptys), Some(ret)) = (node_ty, ptys, &c.ret_ty) {
                    let sig = Type::func(ptys, ret.clone());
                    if *nt != sig {
                        self.err(Some(id), format!("closure has type {nt} but its signature is {sig}"));
                    }
                }
            }
            ExprKind::Block { bindings, result } => {
                for pair in func.try_ids(bindings).unwrap_or(&[]).chunks_exact(2) {
                    let (var, value) = (pair[0], pair[1]);
                    if let (Some(vt), Some(et)) = (self.ty(var), self.ty(value)) {
                        if vt != et {
                            self.err(Some(var), format!("binding annotated {vt} but its value has type {et}"));
                        }
                    }
                }
                if let (Some(nt), Some(rt)) = (node_ty, self.ty(result)) {
                    if *nt != *rt {
                        self.err(Some(id), format!("block has type {nt} but its result has type {rt}"));
                    }
                }
            }
        }
    }

    /// The first argument of `call_tir` names a PrimFunc of the module whose last parameter
    /// is a buffer (the output). Returns whether it does.
    fn check_call_tir_callee(&mut self, id: NodeId, callee: NodeId) -> bool {
        let func = self.func;
        let ExprKind::Global { name } = func.nodes()[callee.index()].kind else {
            self.err(Some(id), "the first argument of `call_tir` must be a global PrimFunc `@name`".into());
            return false;
        };
        let Some(m) = self.module else { return true };
        let g = func.try_sym(name).unwrap_or("");
        match m.get_prim(g) {
            None if m.contains(g) => {
                self.err(Some(id), format!("`call_tir` calls @{g}, a graph function: it takes a PrimFunc"));
                false
            }
            None => true, // reported as an unknown global
            Some(p) => match p.params().last() {
                Some(crate::tir::Param::Buf(_)) => true,
                _ => {
                    self.err(Some(id), format!("`call_tir` calls @{g}, whose last parameter is not an output buffer"));
                    false
                }
            },
        }
    }

    fn check_apply(&mut self, id: NodeId, callee: NodeId, args: &[NodeId]) {
        let func = self.func;
        let arg_tys: Vec<Option<Type>> = args.iter().map(|&a| self.ty(a).cloned()).collect();
        // The callee's parameter types (each maybe unknown) and result type, if the callee is
        // known: a global of the module, or a node with a function type.
        let (param_tys, ret_ty): (Vec<Option<Type>>, Option<Type>) =
            match (func.nodes()[callee.index()].kind, self.module) {
                (ExprKind::Global { name }, Some(m)) => {
                    let gname = func.try_sym(name).unwrap_or("");
                    if m.get_prim(gname).is_some() {
                        self.err(
                            Some(id),
                            format!("@{gname} is a PrimFunc: call it with `call_tir(@{gname}, …)`, not as a function"),
                        );
                        return;
                    }
                    let Some(g) = m.get(gname) else { return };
                    let Some(params) = g.try_params() else { return };
                    (params.iter().map(|&p| g.try_ty(p).cloned()).collect(), g.ret_ty().cloned())
                }
                _ => match self.ty(callee).map(|t| (t, t.kind())) {
                    Some((_, TypeKind::Func(ft))) => {
                        (ft.params.iter().cloned().map(Some).collect(), Some(ft.ret.clone()))
                    }
                    Some((t, _)) => {
                        self.err(Some(callee), format!("called value has non-function type {t}"));
                        return;
                    }
                    None => return,
                },
            };
        if param_tys.len() != args.len() {
            self.err(Some(id), format!("callee takes {} arguments, got {}", param_tys.len(), args.len()));
            return;
        }
        for (i, (pt, at)) in param_tys.iter().zip(&arg_tys).enumerate() {
            if let (Some(pt), Some(at)) = (pt, at) {
                if pt != at {
                    self.err(Some(args[i]), format!("argument {i} has type {at} but the callee expects {pt}"));
                }
            }
        }
        if let (Some(rt), Some(nt)) = (ret_ty, self.ty(id)) {
            if rt != *nt {
                self.err(Some(id), format!("call has type {nt} but the callee returns {rt}"));
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use expect_test::{expect, Expect};

    use super::*;
    use crate::ir::{AttrValue, Attrs, ClosureIdx, Constant, FunctionBuilder, IdRange, OpId};

    fn ops() -> (OpId, OpId) {
        (op::lookup("add").unwrap(), op::lookup("relu").unwrap())
    }

    fn t(shape: &[u64]) -> Type {
        Type::tensor(shape.to_vec(), DType::F32)
    }

    /// Verifies `func` as `@main` (in `module` when given) and renders the errors, one a line.
    fn check_in(module: Option<&Module>, func: &Function, expect: Expect) {
        let actual = match verify_function(module, "main", func) {
            Ok(()) => "ok".to_string(),
            Err(errs) => errs.iter().map(|e| format!("{e}\n")).collect(),
        };
        expect.assert_eq(&actual);
    }

    fn check(func: &Function, expect: Expect) {
        check_in(None, func, expect)
    }

    #[test]
    fn verify_accepts_well_formed_function() {
        let (add, relu) = ops();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(t(&[2])));
        let c = b.var("c", Some(Type::scalar(DType::Bool)));
        let r = b.call(relu, &[x], Attrs::new());
        b.set_ty(r, Some(t(&[2])));
        let a = b.var("a", Some(t(&[2])));
        // A closure using its parameter and the outer binding `%a`.
        let p = b.var("p", Some(t(&[2])));
        let s = b.call(add, &[p, a], Attrs::new());
        let f = b.closure(&[p], s, None, Attrs::new());
        let g = b.var("g", None);
        let ap = b.apply(g, &[x]);
        let then_ = b.block(&[], ap);
        let tup = b.tuple(&[x, a]);
        let pr = b.proj(tup, 1);
        let iff = b.if_(c, then_, pr);
        let body = b.block(&[(a, r), (g, f)], iff);
        let func = b.finish(&[x, c], body, None, Attrs::new());
        check(&func, expect![[r#"ok"#]]);
    }

    #[test]
    fn verify_reports_malformed_arena_without_panicking() {
        let (add, _) = ops();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let bad_sym = b.push(ExprKind::Var { name: crate::ir::Sym(99) }, None);
        let bad_const = b.push(ExprKind::Const { idx: crate::ir::ConstIdx(7) }, None);
        let forward = b.push_unchecked(ExprKind::Proj { tuple: NodeId(10), index: 0 }, None);
        let range = IdRange { start: 1000, len: 2 };
        let bad_range = b.push_unchecked(ExprKind::Call { op: add, attrs: crate::ir::AttrsIdx(0), args: range }, None);
        let bad_op =
            b.push(ExprKind::Call { op: OpId(999), attrs: crate::ir::AttrsIdx(0), args: IdRange::default() }, None);
        let bad_closure = b.push_unchecked(ExprKind::Func { idx: ClosureIdx(5) }, None);
        let empty_block = b.push(ExprKind::Block { bindings: IdRange::default(), result: x }, None);
        let tup = b.tuple(&[bad_sym, bad_const, forward, bad_range, bad_op, bad_closure, empty_block]);
        let func = b.finish(&[x], tup, None, Attrs::new());
        check(
            &func,
            expect![[r#"
                @main %1: symbol index 99 out of bounds
                @main %2: constant index 7 out of bounds
                @main %3: operand %10 out of range
                @main %4: operand range out of bounds
                @main %5: unknown operator id 999
                @main %6: closure index 5 out of bounds
                @main %7: block without bindings or with an odd binding range
            "#]],
        );

        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let fwd = b.push_unchecked(ExprKind::Proj { tuple: NodeId(2), index: 0 }, None);
        let _later = b.tuple(&[x]);
        let func = b.finish(&[x], fwd, None, Attrs::new());
        check(
            &func,
            expect![[r#"
            @main %1: operand %2 does not precede its user
        "#]],
        );

        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let r = b.tuple(&[x]);
        let func = b.finish(&[r], NodeId(40), None, Attrs::new());
        check(
            &func,
            expect![[r#"
                @main: body %40 out of range
                @main %1: parameter is not a variable
            "#]],
        );
    }

    #[test]
    fn verify_counts_no_user_and_marks_nothing_live_for_a_malformed_node() {
        // `%3` reads `%1` and `%2` before its late operand: neither may count it as a user (`%1`
        // would have two) nor be made live by it (`%2` is dead, so its bad operator is not checked).
        let (_, relu) = ops();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let r = b.call(relu, &[x], Attrs::new());
        let q = b.push(ExprKind::Call { op: OpId(999), attrs: crate::ir::AttrsIdx(0), args: IdRange::default() }, None);
        let bad = b.push_unchecked(ExprKind::If { cond: r, then_: NodeId(9), else_: q }, None);
        let tup = b.tuple(&[r, bad]);
        let func = b.finish(&[x], tup, None, Attrs::new());
        check(
            &func,
            expect![[r#"
            @main %3: operand %9 out of range
        "#]],
        );
    }

    #[test]
    fn verify_reports_shared_compound_node() {
        let (add, relu) = ops();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let r = b.call(relu, &[x], Attrs::new());
        let s = b.call(add, &[r, r], Attrs::new());
        let func = b.finish(&[x], s, None, Attrs::new());
        check(
            &func,
            expect![[r#"
            @main %1: compound expression has 2 users; bind it to a variable to share it
        "#]],
        );
    }

    #[test]
    fn verify_reports_unbound_and_out_of_scope_variables() {
        let (add, relu) = ops();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let c = b.var("c", None);
        let free = b.var("free", None);
        // `%t` is bound inside the then-branch and used after the `if`.
        let t = b.var("t", None);
        let r = b.call(relu, &[x], Attrs::new());
        let then_ = b.block(&[(t, r)], t);
        let if_ = b.if_(c, then_, x);
        // `%p` is a closure parameter used outside the closure.
        let p = b.var("p", None);
        let f = b.closure(&[p], p, None, Attrs::new());
        let g = b.var("g", None);
        // `%late` is used in the binding before its own.
        let late = b.var("late", None);
        let early = b.var("early", None);
        let use_late = b.call(relu, &[late], Attrs::new());
        let v = b.var("v", None);
        let s1 = b.call(add, &[t, p], Attrs::new());
        let s2 = b.call(add, &[s1, free], Attrs::new());
        let body = b.block(&[(v, if_), (g, f), (early, use_late), (late, x)], s2);
        let func = b.finish(&[x, c], body, None, Attrs::new());
        check(
            &func,
            expect![[r#"
                @main %10: variable %late used outside its scope
                @main %3: variable %t used outside its scope
                @main %7: variable %p used outside its scope
                @main %2: unbound variable %free
            "#]],
        );
    }

    #[test]
    fn verify_reports_variable_bound_twice() {
        let (_, relu) = ops();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let r = b.call(relu, &[x], Attrs::new());
        let body = b.block(&[(x, r)], x);
        let func = b.finish(&[x], body, None, Attrs::new());
        check(
            &func,
            expect![[r#"
            @main %0: variable %x is bound 2 times
        "#]],
        );
    }

    #[test]
    fn verify_reports_non_variable_binders() {
        let (_, relu) = ops();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let k = b.constant(Constant::scalar_f32(1.0));
        let r = b.call(relu, &[x], Attrs::new());
        let f = b.closure(&[k], x, None, Attrs::new());
        let body = b.block(&[(k, r)], f);
        let func = b.finish(&[x], body, None, Attrs::new());
        check(
            &func,
            expect![[r#"
                @main %3: bound %1 is not a variable
                @main %4: bound %1 is not a variable
            "#]],
        );
    }

    #[test]
    fn verify_checks_operator_arity_and_attributes() {
        let (add, relu) = ops();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(t(&[2])));
        let a = b.call(add, &[x], Attrs::new());
        let r = b.call(relu, &[a], Attrs::new().with("axis", AttrValue::Int(1)));
        let func = b.finish(&[x], r, None, Attrs::new());
        check(
            &func,
            expect![[r#"
            @main %1: `add` takes 2 arguments, got 1
            @main %2: operator `relu` takes no attributes, got `axis`
        "#]],
        );
    }

    #[test]
    fn verify_checks_known_types() {
        let (add, relu) = ops();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(t(&[2])));
        let i = b.var("i", Some(Type::tensor(vec![2], DType::I32)));
        let c = b.var("c", Some(t(&[])));
        // Type relation fails: f32 + i32.
        let bad_add = b.call(add, &[x, i], Attrs::new());
        // Annotated with the wrong type.
        let r = b.call(relu, &[x], Attrs::new());
        b.set_ty(r, Some(t(&[3])));
        // Binding annotation differs from the value's type.
        let v = b.var("v", Some(t(&[4])));
        let k = b.constant(Constant::scalar_f32(1.0));
        // Projection out of range of a known tuple type.
        let tup = b.tuple(&[x]);
        b.set_ty(tup, Some(Type::tuple(vec![t(&[2])])));
        let pr = b.proj(tup, 3);
        // Condition is not a scalar bool.
        let if_ = b.if_(c, bad_add, pr);
        let out = b.tuple(&[if_, r, v]);
        b.set_ty(out, Some(Type::tuple(vec![t(&[9])])));
        let body = b.block(&[(v, k)], out);
        b.set_ty(body, Some(t(&[1])));
        let func = b.finish(&[x, i, c], body, Some(t(&[2])), Attrs::new());
        check(
            &func,
            expect![[r#"
                @main %3: type error: add: dtype mismatch: f32 vs i32
                @main %4: call has type Tensor[(3,), f32] but `relu` gives Tensor[(2,), f32]
                @main %8: projection .3 out of range for (Tensor[(2,), f32],)
                @main %2: if condition has type Tensor[(), f32], expected Tensor[(), bool]
                @main %5: binding annotated Tensor[(4,), f32] but its value has type Tensor[(), f32]
                @main %11: block has type Tensor[(1,), f32] but its result has type (Tensor[(9,), f32],)
                @main %11: function returns Tensor[(2,), f32] but its body has type Tensor[(1,), f32]
            "#]],
        );
    }

    fn callee(n_params: usize) -> Function {
        let mut b = FunctionBuilder::new();
        let params: Vec<NodeId> = (0..n_params).map(|i| b.var(&format!("p{i}"), Some(t(&[2])))).collect();
        let body = params.first().copied().unwrap_or_else(|| b.constant(Constant::scalar_f32(0.0)));
        b.finish(&params, body, None, Attrs::new())
    }

    #[test]
    fn verify_resolves_globals_in_module() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(t(&[3])));
        let g = b.global("f");
        let a1 = b.apply(g, &[x, x]);
        let g2 = b.global("f");
        let a2 = b.apply(g2, &[x]);
        let h = b.global("missing");
        let tup = b.tuple(&[a1, a2, h]);
        let func = b.finish(&[x], tup, None, Attrs::new());
        let mut m = Module::new();
        m.add("f", callee(1)).unwrap();
        check_in(
            Some(&m),
            &func,
            expect![[r#"
            @main %2: callee takes 1 arguments, got 2
            @main %0: argument 0 has type Tensor[(3,), f32] but the callee expects Tensor[(2,), f32]
            @main %5: unknown global function @missing
        "#]],
        );
        // Without a module, globals are not resolved.
        check(&func, expect![[r#"ok"#]]);
    }

    #[test]
    fn verify_reports_scope_errors_in_evaluation_order() {
        let (add, relu) = ops();
        // All-atom operands are checked in place, others through the walk: the order must be
        // evaluation order either way.
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let f1 = b.var("f1", None);
        let f2 = b.var("f2", None);
        let atoms = b.call(add, &[f2, f1], Attrs::new());
        let f3 = b.var("f3", None);
        let inner = b.call(relu, &[f3], Attrs::new());
        let f4 = b.var("f4", None);
        let mixed = b.call(add, &[inner, f4], Attrs::new());
        let v = b.var("v", None);
        let body = b.block(&[(v, atoms)], mixed);
        let func = b.finish(&[x], body, None, Attrs::new());
        check(
            &func,
            expect![[r#"
                @main %2: unbound variable %f2
                @main %1: unbound variable %f1
                @main %4: unbound variable %f3
                @main %6: unbound variable %f4
            "#]],
        );
    }

    #[test]
    fn verify_module_tables_do_not_leak_between_functions() {
        // `verify_module` reuses its per-node tables: a variable reported, in scope or bound in
        // one function must not change what the next, smaller, function reports at the same ids.
        let (add, relu) = ops();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let free = b.var("free", None);
        let r = b.call(add, &[x, free], Attrs::new());
        let v = b.var("v", None);
        let body = b.block(&[(v, r)], v);
        let big = b.finish(&[x], body, None, Attrs::new());

        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let free = b.var("free", None);
        let r = b.call(relu, &[free], Attrs::new());
        let small = b.finish(&[x], r, None, Attrs::new());

        let mut m = Module::new();
        m.add("big", big.clone()).unwrap();
        m.add("small", small.clone()).unwrap();
        m.add("big_again", big.clone()).unwrap();
        let errs: Vec<String> = verify_module(&m).unwrap_err().iter().map(|e| e.to_string()).collect();
        let mut alone = Vec::new();
        for (name, f) in [("big", &big), ("small", &small), ("big_again", &big)] {
            alone.extend(verify_function(Some(&m), name, f).unwrap_err().iter().map(|e| e.to_string()));
        }
        assert_eq!(errs, alone);
        expect![[r#"
            [
                "@big %1: unbound variable %free",
                "@small %1: unbound variable %free",
                "@big_again %1: unbound variable %free",
            ]
        "#]]
        .assert_debug_eq(&errs);
    }

    #[test]
    fn verify_module_reports_all_functions_in_order() {
        let (add, _) = ops();
        let mut m = Module::new();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let a = b.call(add, &[x], Attrs::new());
        m.add("second_bad", b.finish(&[x], a, None, Attrs::new())).unwrap();
        m.add("good", callee(1)).unwrap();
        let mut b = FunctionBuilder::new();
        let g = b.global("nope");
        m.add("first_bad", b.finish(&[], g, None, Attrs::new())).unwrap();
        let errs = verify_module(&m).unwrap_err();
        let text: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
        expect![[r#"
            [
                "@second_bad %1: `add` takes 2 arguments, got 1",
                "@first_bad %0: unknown global function @nope",
            ]
        "#]]
        .assert_debug_eq(&text);
        assert_eq!(errs[0].node, Some(NodeId(1)));
    }

    /// `fn(%x) { let %v0 = relu(%x); let %v1 = relu(%v0); …; %v{n-1} }`
    pub(crate) fn chain(n: usize) -> Function {
        let (_, relu) = ops();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let mut prev = x;
        let mut bindings = Vec::with_capacity(n);
        for i in 0..n {
            let r = b.call(relu, &[prev], Attrs::new());
            let v = b.var(&format!("v{}", i % 16), None);
            bindings.push((v, r));
            prev = v;
        }
        let body = b.block(&bindings, prev);
        b.finish(&[x], body, None, Attrs::new())
    }

    /// Blocks, `if`s and closures nested `depth` deep around `relu(%x)`.
    pub(crate) fn nested(depth: usize) -> Function {
        let (_, relu) = ops();
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let c = b.var("c", None);
        let mut e = b.call(relu, &[x], Attrs::new());
        for i in 0..depth {
            e = match i % 3 {
                0 => {
                    let v = b.var("v", None);
                    b.block(&[(v, e)], v)
                }
                1 => b.if_(c, e, x),
                _ => {
                    let p = b.var("p", None);
                    b.closure(&[p], e, None, Attrs::new())
                }
            };
        }
        b.finish(&[x, c], e, None, Attrs::new())
    }

    #[test]
    fn verify_handles_million_bindings_and_deep_nesting() {
        assert_eq!(verify_function(None, "main", &chain(1_000_000)), Ok(()));
        assert_eq!(verify_function(None, "main", &nested(100_000)), Ok(()));
    }
}
