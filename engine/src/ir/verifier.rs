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
//! It deliberately does not infer types: a node without a type is not checked against one.
//! Every walk is a loop over the arena or over an explicit stack, so neither input size nor
//! nesting depth reaches the call stack, and malformed arenas are reported, never indexed
//! blindly.

use super::expr::{ExprKind, Span};
use super::function::Function;
use super::ids::{ClosureIdx, NodeId};
use super::module::Module;
use super::ty::{DType, Type};
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
    for (name, func) in m.iter() {
        if let Err(mut e) = verify_function(Some(m), name, func) {
            errors.append(&mut e);
        }
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
    v.run();
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

/// Steps of the scope walk. Explicit steps instead of recursion keep deep nesting off the
/// call stack.
enum Step {
    Visit(NodeId),
    Bind(NodeId),
    UnbindBlock(NodeId),
    UnbindClosure(ClosureIdx),
}

/// Fills `out` with the operands of `kind` in evaluation order (as
/// [`Function::for_each_operand`] does), using only checked accessors.
fn operands(func: &Function, kind: &ExprKind, out: &mut Vec<NodeId>) -> Result<(), String> {
    out.clear();
    let ids = |r| func.try_ids(r).ok_or_else(|| "operand range out of bounds".to_string());
    match *kind {
        ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => {}
        ExprKind::Call { args, .. } => out.extend_from_slice(ids(args)?),
        ExprKind::Apply { callee, args } => {
            out.push(callee);
            out.extend_from_slice(ids(args)?);
        }
        ExprKind::Tuple { fields } => out.extend_from_slice(ids(fields)?),
        ExprKind::Proj { tuple, .. } => out.push(tuple),
        ExprKind::If { cond, then_, else_ } => out.extend_from_slice(&[cond, then_, else_]),
        ExprKind::Func { idx } => {
            let c = func.try_closure(idx).ok_or_else(|| format!("closure index {} out of bounds", idx.0))?;
            out.extend_from_slice(ids(c.params)?);
            out.push(c.body);
        }
        ExprKind::Block { bindings, result } => {
            let b = ids(bindings)?;
            if b.is_empty() || b.len() % 2 != 0 {
                return Err("block without bindings or with an odd binding range".to_string());
            }
            for pair in b.chunks_exact(2) {
                out.push(pair[1]);
                out.push(pair[0]);
            }
            out.push(result);
        }
    }
    Ok(())
}

impl Verifier<'_> {
    fn err(&mut self, node: Option<NodeId>, msg: String) {
        let span = node.and_then(|n| self.func.span(n));
        self.errors.push(VerifyError { func: self.name.to_string(), node, span, msg });
    }

    /// The known type of a node already checked to be in range.
    fn ty(&self, id: NodeId) -> Option<&Type> {
        self.func.nodes().get(id.index()).and_then(|n| n.ty.as_ref())
    }

    fn run(&mut self) {
        let func = self.func;
        let n = func.num_nodes();
        let nodes = func.nodes();

        // Phase 1: per-node shape. `wf[i]` means every reference of node i is in range and
        // precedes it, so later phases may follow its operands without checks. Errors are kept
        // per node and reported only for live nodes: dead builder leftovers are never used.
        let mut wf = vec![false; n];
        let mut shape_errors: Vec<(NodeId, String)> = Vec::new();
        let mut ops = Vec::new();
        let n_ops = op::all().len();
        for (i, node) in nodes.iter().enumerate() {
            let id = NodeId(i as u32);
            let res = operands(func, &node.kind, &mut ops).and_then(|()| self.check_tables(&node.kind, n_ops));
            match res {
                Err(msg) => shape_errors.push((id, msg)),
                Ok(()) => match ops.iter().find(|o| o.index() >= i) {
                    Some(o) if o.index() >= n => shape_errors.push((id, format!("operand {o} out of range"))),
                    Some(o) => shape_errors.push((id, format!("operand {o} does not precede its user"))),
                    None => wf[i] = true,
                },
            }
        }

        // Phase 2: roots and liveness.
        let Some(params) = func.try_params() else {
            self.err(None, "parameter range out of bounds".into());
            return;
        };
        let body = func.body();
        if body.index() >= n {
            self.err(None, format!("body {body} out of range"));
            return;
        }
        let mut params_ok = true;
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
        if !params_ok {
            return;
        }
        let mut live = vec![false; n];
        for &p in params {
            live[p.index()] = true;
        }
        live[body.index()] = true;
        // Operands of well-formed nodes have smaller ids, so one backward sweep suffices.
        for i in (0..n).rev() {
            if live[i] && wf[i] && operands(func, &nodes[i].kind, &mut ops).is_ok() {
                for o in &ops {
                    live[o.index()] = true;
                }
            }
        }
        for (id, msg) in shape_errors {
            if live[id.index()] {
                self.err(Some(id), msg);
            }
        }

        // Phase 3: users (tree shape) and binders (bound exactly once).
        let mut users = vec![0u32; n];
        let mut binders = vec![0u32; n];
        users[body.index()] += 1;
        for &p in params {
            binders[p.index()] += 1;
        }
        for i in 0..n {
            if !live[i] || !wf[i] {
                continue;
            }
            let id = NodeId(i as u32);
            if operands(func, &nodes[i].kind, &mut ops).is_err() {
                continue;
            }
            for o in &ops {
                users[o.index()] = users[o.index()].saturating_add(1);
            }
            let bound: Vec<NodeId> = match nodes[i].kind {
                ExprKind::Block { bindings, .. } => {
                    func.try_ids(bindings).unwrap_or(&[]).chunks_exact(2).map(|p| p[0]).collect()
                }
                ExprKind::Func { idx } => {
                    func.try_closure(idx).and_then(|c| func.try_ids(c.params)).unwrap_or(&[]).to_vec()
                }
                _ => Vec::new(),
            };
            for v in bound {
                if matches!(nodes[v.index()].kind, ExprKind::Var { .. }) {
                    binders[v.index()] = binders[v.index()].saturating_add(1);
                } else {
                    self.err(Some(id), format!("bound {v} is not a variable"));
                }
            }
        }
        for i in 0..n {
            if !live[i] {
                continue;
            }
            let id = NodeId(i as u32);
            let is_var = matches!(nodes[i].kind, ExprKind::Var { .. });
            if !nodes[i].kind.is_atom() && users[i] != 1 {
                self.err(
                    Some(id),
                    format!("compound expression has {} users; bind it to a variable to share it", users[i]),
                );
            }
            if is_var && binders[i] > 1 {
                self.err(Some(id), format!("variable {} is bound {} times", self.var_name(id), binders[i]));
            }
        }

        // Phase 4: scopes.
        self.check_scopes(params, body, &live, &wf, &binders);

        // Phase 5: operators, globals and types, in arena order.
        for i in 0..n {
            if live[i] && wf[i] {
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
                func.try_sym(name).map(|_| ()).ok_or_else(|| format!("symbol index {} out of bounds", name.0))
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

    /// Walks the expression tree from the body with an explicit stack, tracking which variables
    /// are in scope.
    fn check_scopes(&mut self, params: &[NodeId], body: NodeId, live: &[bool], wf: &[bool], binders: &[u32]) {
        let func = self.func;
        let nodes = func.nodes();
        let n = nodes.len();
        let mut in_scope = vec![false; n];
        // Compound nodes are walked once even when (wrongly) shared, so a DAG cannot make the
        // walk exponential; the sharing itself was reported in phase 3.
        let mut visited = vec![false; n];
        let mut reported = vec![false; n];
        for &p in params {
            in_scope[p.index()] = true;
        }
        let mut ops = Vec::new();
        let mut stack = vec![Step::Visit(body)];
        while let Some(step) = stack.pop() {
            match step {
                Step::Visit(id) => {
                    let i = id.index();
                    if i >= n || !live[i] || !wf[i] {
                        continue;
                    }
                    let kind = nodes[i].kind;
                    if !kind.is_atom() {
                        if visited[i] {
                            continue;
                        }
                        visited[i] = true;
                    }
                    match kind {
                        ExprKind::Var { .. } => {
                            if !in_scope[i] && !reported[i] {
                                reported[i] = true;
                                let msg = if binders[i] == 0 {
                                    format!("unbound variable {}", self.var_name(id))
                                } else {
                                    format!("variable {} used outside its scope", self.var_name(id))
                                };
                                self.err(Some(id), msg);
                            }
                        }
                        ExprKind::Block { bindings, result } => {
                            let pairs = func.try_ids(bindings).unwrap_or(&[]);
                            stack.push(Step::UnbindBlock(id));
                            stack.push(Step::Visit(result));
                            for pair in pairs.chunks_exact(2).rev() {
                                stack.push(Step::Bind(pair[0]));
                                stack.push(Step::Visit(pair[1]));
                            }
                        }
                        ExprKind::Func { idx } => {
                            let Some(c) = func.try_closure(idx) else { continue };
                            for &p in func.try_ids(c.params).unwrap_or(&[]) {
                                if let Some(s) = in_scope.get_mut(p.index()) {
                                    *s = true;
                                }
                            }
                            stack.push(Step::UnbindClosure(idx));
                            stack.push(Step::Visit(c.body));
                        }
                        _ => {
                            if operands(func, &kind, &mut ops).is_ok() {
                                stack.extend(ops.iter().rev().map(|&o| Step::Visit(o)));
                            }
                        }
                    }
                }
                Step::Bind(var) => {
                    if let Some(s) = in_scope.get_mut(var.index()) {
                        *s = true;
                    }
                }
                Step::UnbindBlock(block) => {
                    if let ExprKind::Block { bindings, .. } = nodes[block.index()].kind {
                        for pair in func.try_ids(bindings).unwrap_or(&[]).chunks_exact(2) {
                            if let Some(s) = in_scope.get_mut(pair[0].index()) {
                                *s = false;
                            }
                        }
                    }
                }
                Step::UnbindClosure(idx) => {
                    let params = func.try_closure(idx).and_then(|c| func.try_ids(c.params)).unwrap_or(&[]);
                    for &p in params {
                        if let Some(s) = in_scope.get_mut(p.index()) {
                            *s = false;
                        }
                    }
                }
            }
        }
    }

    /// Operator, global and type checks of one live, well-formed node.
    fn check_node(&mut self, id: NodeId) {
        let func = self.func;
        let kind = func.nodes()[id.index()].kind;
        let node_ty = self.ty(id).cloned();
        match kind {
            ExprKind::Var { .. } | ExprKind::Const { .. } => {}
            ExprKind::Global { name } => {
                if let Some(m) = self.module {
                    let g = func.try_sym(name).unwrap_or("");
                    if !m.contains(g) {
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
                if let Some(attrs) = func.try_call_attrs(attrs) {
                    if let Err(msg) = def.check_attrs(attrs) {
                        self.err(Some(id), msg);
                        ok = false;
                    }
                    let arg_tys: Option<Vec<Type>> = args.iter().map(|&a| self.ty(a).cloned()).collect();
                    if let (true, Some(arg_tys)) = (ok, arg_tys) {
                        match (def.type_rel)(&arg_tys, attrs) {
                            Err(e) => self.err(Some(id), format!("type error in `{}`: {e}", def.name)),
                            Ok(t) => {
                                if let Some(nt) = &node_ty {
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
                if let (Some(nt), Some(tys)) = (&node_ty, tys) {
                    let t = Type::tuple(tys);
                    if *nt != t {
                        self.err(Some(id), format!("tuple has type {nt} but its fields give {t}"));
                    }
                }
            }
            ExprKind::Proj { tuple, index } => match self.ty(tuple).cloned() {
                Some(Type::Tuple(fields)) => match fields.get(index as usize) {
                    None => self
                        .err(Some(id), format!("projection .{index} out of range for {}", Type::Tuple(fields.clone()))),
                    Some(ft) => {
                        if let Some(nt) = &node_ty {
                            if nt != ft {
                                self.err(
                                    Some(id),
                                    format!("projection has type {nt} but field .{index} has type {ft}"),
                                );
                            }
                        }
                    }
                },
                Some(t) => self.err(Some(id), format!("projection .{index} of non-tuple type {t}")),
                None => {}
            },
            ExprKind::If { cond, then_, else_ } => {
                if let Some(ct) = self.ty(cond).cloned() {
                    let scalar_bool = ct.as_tensor().is_some_and(|t| t.shape.is_empty() && t.dtype == DType::Bool);
                    if !scalar_bool {
                        self.err(Some(cond), format!("if condition has type {ct}, expected Tensor[(), bool]"));
                    }
                }
                for branch in [then_, else_] {
                    if let (Some(nt), Some(bt)) = (&node_ty, self.ty(branch)) {
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
                if let (Some(nt), Some(ptys), Some(ret)) = (&node_ty, ptys, &c.ret_ty) {
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
                if let (Some(nt), Some(rt)) = (&node_ty, self.ty(result)) {
                    if *nt != *rt {
                        self.err(Some(id), format!("block has type {nt} but its result has type {rt}"));
                    }
                }
            }
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
                    let Some(g) = func.try_sym(name).and_then(|g| m.get(g)) else { return };
                    let Some(params) = g.try_params() else { return };
                    (
                        params.iter().map(|&p| g.nodes().get(p.index()).and_then(|n| n.ty.clone())).collect(),
                        g.ret_ty().cloned(),
                    )
                }
                _ => match self.ty(callee) {
                    Some(Type::Func(ft)) => (ft.params.iter().cloned().map(Some).collect(), Some(ft.ret.clone())),
                    Some(t) => {
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
