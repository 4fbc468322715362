//! InferType (module pass, opt level 0): fills in the type of every live node.
//!
//! What it does: computes each live node's type from its operands — operator calls by the
//! operator's type relation (after checking arity and attributes), `Apply` by the callee's
//! function type (a global's is its signature), tuples, projections, `if` (a scalar `bool`
//! condition and branches of one type), nested functions (annotated parameters, body type,
//! checked against a declared result type) and blocks (their result). A let-bound variable
//! without annotation takes its value's type; an annotated one must match it. Type errors
//! become [`TypeDiagnostic`]s, never panics; a node whose operand already failed is skipped
//! silently, so one mistake yields one diagnostic.
//!
//! What it deliberately does not do: invent types for unannotated parameters (of the function
//! or of nested functions: that is an error), change declared result types, or type dead
//! arena nodes (they keep whatever type they had).
//!
//! Phases:
//! 1. Quick scan: if every node already has a type, the function is returned as is. This is
//!    the common case when InferType runs again on an unchanged function, and costs one pass
//!    over the node array with no allocation.
//! 2. A walk in evaluation order with an explicit stack (so variables get their binding's
//!    type before their uses, whatever the arena order), computing types bottom-up.
//! 3. The types are written into a copy of the function ([`Function::with_types`]).

use std::sync::Arc;

use passel_engine::ir::{ExprKind, Function, Module, NodeId, Span, Type, TypeKind};
use passel_engine::transform::{Diagnostic, PassContext, PassError};

use crate::rewrite::{op_def, well_formed};

/// A type error found by InferType.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("@{func}: {node}: {message}")]
pub struct TypeDiagnostic {
    /// The global function the error is in.
    pub func: Arc<str>,
    /// The offending node.
    pub node: NodeId,
    /// Its source span, when the function was parsed.
    pub span: Option<Span>,
    /// What is wrong: a lowercase phrase.
    pub message: String,
}

/// Infers the types of `func`, a function of `module` (whose globals give the types of
/// global references). Returns `func` itself when it is fully typed already.
pub fn infer_function(module: &Module, func: &Arc<Function>) -> Result<Arc<Function>, Vec<TypeDiagnostic>> {
    // The name is only needed for diagnostics, so it is looked up only when there are some.
    infer_named(module, "", func).map_err(|mut diags| {
        let name: Arc<str> = module.iter().find(|(_, f)| Arc::ptr_eq(f, func)).map_or("", |(n, _)| n).into();
        for d in &mut diags {
            d.func = Arc::clone(&name);
        }
        diags
    })
}

/// The registered module pass: [`infer_module`]'s work, one task per function on the
/// executor's workers (`ctx.map_functions`), each type error emitted as a diagnostic of the
/// function it is in, in module order. The pass itself never fails on ill-typed input.
pub fn infer_type_pass(m: Module, ctx: &PassContext) -> Result<Module, PassError> {
    let view = &m;
    let new = ctx.map_functions("InferType", view, |worker, name, func| {
        Ok(match infer_named(view, name, func) {
            Ok(f) => f,
            Err(diags) => {
                for d in diags {
                    let mut diag = Diagnostic::error("InferType", d.message).in_function(&d.func).at_node(d.node);
                    if let Some(span) = d.span {
                        diag = diag.at_span(span);
                    }
                    worker.emit(diag);
                }
                Arc::clone(func)
            }
        })
    })?;
    Ok(ctx.replace_functions(m, new))
}

/// Infers the types of every function of `m`. Functions with errors are kept unchanged, and
/// all diagnostics are returned in module order.
pub fn infer_module(m: &Module) -> (Module, Vec<TypeDiagnostic>) {
    let mut diags = Vec::new();
    let mut new = Vec::with_capacity(m.len());
    for (name, func) in m.iter() {
        match infer_named(m, name, func) {
            Ok(f) => new.push(f),
            Err(d) => {
                diags.extend(d);
                new.push(Arc::clone(func));
            }
        }
    }
    let mut out = m.clone();
    out.replace_all(new);
    (out, diags)
}

enum Frame {
    Enter(NodeId),
    Exit(NodeId),
    Bind(NodeId, NodeId),
}

struct Infer<'a> {
    module: &'a Module,
    func: &'a Function,
    name: &'a str,
    tys: Vec<Option<Type>>,
    reported: Vec<bool>,
    diags: Vec<TypeDiagnostic>,
}

impl Infer<'_> {
    fn error(&mut self, node: NodeId, message: String) {
        if std::mem::replace(&mut self.reported[node.index()], true) {
            return;
        }
        self.diags.push(TypeDiagnostic { func: self.name.into(), node, span: self.func.span(node), message });
    }

    fn var_name(&self, id: NodeId) -> String {
        format!("%{}", self.func.name_of(id).unwrap_or("?"))
    }

    fn global_type(&self, name: &str) -> Option<Type> {
        let f = self.module.get(name)?;
        f.signature().or_else(|| {
            let params: Option<Vec<Type>> = f.params().iter().map(|&p| f.ty(p).cloned()).collect();
            Some(Type::func(params?, f.ty(f.body())?.clone()))
        })
    }

    fn enter_atom(&mut self, id: NodeId) {
        if self.tys[id.index()].is_some() {
            return;
        }
        let func = self.func;
        match *func.kind(id) {
            ExprKind::Var { .. } => match func.ty(id) {
                Some(t) => self.tys[id.index()] = Some(t.clone()),
                None => {
                    let msg = format!("cannot infer the type of {}: annotate it", self.var_name(id));
                    self.error(id, msg)
                }
            },
            ExprKind::Global { name } => {
                let g = func.sym(name);
                match self.global_type(g) {
                    Some(t) => self.tys[id.index()] = Some(t),
                    None if self.module.contains(g) => {
                        self.error(id, format!("the type of @{g} is unknown: annotate its parameters and result"))
                    }
                    None => self.error(id, format!("unknown global function @{g}")),
                }
            }
            ExprKind::Const { idx } => self.tys[id.index()] = Some(func.constant(idx).ty()),
            _ => {}
        }
    }

    fn exit(&mut self, id: NodeId) {
        let func = self.func;
        let mut known = true;
        match *func.kind(id) {
            ExprKind::Func { idx } => known = self.tys[func.closure(idx).body.index()].is_some(),
            ExprKind::Block { result, .. } => known = self.tys[result.index()].is_some(),
            _ => func.for_each_operand(id, |o| known &= self.tys[o.index()].is_some()),
        }
        if !known {
            return;
        }
        let ty = |i: NodeId| self.tys[i.index()].clone().unwrap_or_else(|| unreachable!());
        let res: Result<Type, String> = match *func.kind(id) {
            ExprKind::Call { op, attrs, args } => {
                let arg_tys: Vec<Type> = func.ids(args).iter().map(|&a| ty(a)).collect();
                match op_def(op) {
                    None => Err(format!("unknown operator #{}", op.0)),
                    Some(def) if !def.arity.accepts(arg_tys.len()) => {
                        Err(format!("operator `{}` takes {} arguments, got {}", def.name, def.arity, arg_tys.len()))
                    }
                    Some(def) => match def.check_attrs(func.call_attrs(attrs)) {
                        Err(e) => Err(e),
                        Ok(()) => (def.type_rel)(&arg_tys, func.call_attrs(attrs)).map_err(|e| e.to_string()),
                    },
                }
            }
            ExprKind::Apply { callee, args } => match ty(callee).kind() {
                TypeKind::Func(ft) => {
                    let args = func.ids(args);
                    if ft.params.len() != args.len() {
                        Err(format!("function takes {} arguments, got {}", ft.params.len(), args.len()))
                    } else if let Some((i, (p, a))) =
                        ft.params.iter().zip(args).enumerate().find(|(_, (p, &a))| **p != ty(a))
                    {
                        Err(format!("argument {i} has type {}, expected {p}", ty(*a)))
                    } else {
                        Ok(ft.ret.clone())
                    }
                }
                _ => Err(format!("calling a value of type {}, which is not a function", ty(callee))),
            },
            ExprKind::Tuple { fields } => Ok(Type::tuple(func.ids(fields).iter().map(|&f| ty(f)).collect::<Vec<_>>())),
            ExprKind::Proj { tuple, index } => match ty(tuple).kind() {
                TypeKind::Tuple(fields) => fields
                    .get(index as usize)
                    .cloned()
                    .ok_or_else(|| format!("projection .{index} of a tuple of {} fields", fields.len())),
                _ => Err(format!("projection .{index} of a non-tuple of type {}", ty(tuple))),
            },
            ExprKind::If { cond, then_, else_ } => {
                let c = ty(cond);
                let (t, e) = (ty(then_), ty(else_));
                if c != Type::scalar(passel_engine::ir::DType::Bool) {
                    Err(format!("condition has type {c}, expected Tensor[(), bool]"))
                } else if t != e {
                    Err(format!("branches have different types: {t} and {e}"))
                } else {
                    Ok(t)
                }
            }
            ExprKind::Func { idx } => {
                let c = func.closure(idx);
                let body = ty(c.body);
                let mut params = Vec::with_capacity(c.params.len as usize);
                let mut missing = None;
                for &p in func.ids(c.params) {
                    match func.ty(p) {
                        Some(t) => params.push(t.clone()),
                        None => missing = Some(p),
                    }
                }
                match (missing, &c.ret_ty) {
                    (Some(p), _) => {
                        Err(format!("cannot infer the type of parameter {}: annotate it", self.var_name(p)))
                    }
                    (None, Some(r)) if *r != body => Err(format!("body has type {body}, declared result is {r}")),
                    (None, _) => Ok(Type::func(params, body)),
                }
            }
            ExprKind::Block { result, .. } => Ok(ty(result)),
            ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => return,
        };
        match res {
            Ok(t) => self.tys[id.index()] = Some(t),
            Err(msg) => self.error(id, msg),
        }
    }

    fn bind(&mut self, var: NodeId, value: NodeId) {
        let vt = self.tys[value.index()].clone();
        match (self.func.ty(var), vt) {
            (Some(ann), Some(vt)) if *ann != vt => {
                let msg = format!("{} is annotated {ann} but its value has type {vt}", self.var_name(var));
                self.error(var, msg);
            }
            (Some(ann), _) => self.tys[var.index()] = Some(ann.clone()),
            (None, vt) => self.tys[var.index()] = vt,
        }
        // A binding variable is typed here; its uses must not report it as unannotated.
        self.reported[var.index()] |= self.tys[var.index()].is_none();
    }
}

fn infer_named(module: &Module, name: &str, func: &Arc<Function>) -> Result<Arc<Function>, Vec<TypeDiagnostic>> {
    if func.nodes().iter().all(|n| n.ty.is_some()) {
        return Ok(Arc::clone(func));
    }
    let live = func.live_mask();
    if func.nodes().iter().zip(&live).all(|(n, &l)| !l || n.ty.is_some()) {
        return Ok(Arc::clone(func));
    }
    if !well_formed(func) {
        let message = "malformed function: an operand does not precede its user".to_string();
        return Err(vec![TypeDiagnostic { func: name.into(), node: func.body(), span: None, message }]);
    }
    let n = func.num_nodes();
    let mut inf = Infer { module, func, name, tys: vec![None; n], reported: vec![false; n], diags: Vec::new() };
    for &p in func.params() {
        inf.enter_atom(p);
    }
    let mut stack = vec![Frame::Enter(func.body())];
    let mut scratch = Vec::new();
    while let Some(frame) = stack.pop() {
        match frame {
            Frame::Enter(id) => match *func.kind(id) {
                ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => inf.enter_atom(id),
                ExprKind::Block { bindings, result } => {
                    stack.push(Frame::Exit(id));
                    stack.push(Frame::Enter(result));
                    for pair in func.ids(bindings).chunks_exact(2).rev() {
                        stack.push(Frame::Bind(pair[0], pair[1]));
                        stack.push(Frame::Enter(pair[1]));
                    }
                }
                ExprKind::Func { idx } => {
                    stack.push(Frame::Exit(id));
                    stack.push(Frame::Enter(func.closure(idx).body));
                }
                _ => {
                    stack.push(Frame::Exit(id));
                    scratch.clear();
                    func.for_each_operand(id, |o| scratch.push(o));
                    stack.extend(scratch.iter().rev().map(|&o| Frame::Enter(o)));
                }
            },
            Frame::Exit(id) => inf.exit(id),
            Frame::Bind(var, value) => inf.bind(var, value),
        }
    }
    if let (Some(ret), Some(body)) = (func.ret_ty(), inf.tys[func.body().index()].clone()) {
        if *ret != body {
            inf.error(func.body(), format!("body has type {body}, declared result is {ret}"));
        }
    }
    if !inf.diags.is_empty() {
        return Err(inf.diags);
    }
    let types: Vec<Option<Type>> = inf
        .tys
        .into_iter()
        .zip(func.nodes())
        .zip(live)
        .map(|((t, node), l)| if l { t.or_else(|| node.ty.clone()) } else { node.ty.clone() })
        .collect();
    Ok(Arc::new(func.with_types(types)))
}

#[cfg(test)]
mod tests {
    use passel_engine::ir::{Attrs, Constant, DType, FunctionBuilder};
    use passel_engine::op;

    use super::*;

    fn t(shape: &[u64]) -> Type {
        Type::tensor(shape.to_vec(), DType::F32)
    }

    fn module_with(name: &str, f: Function) -> (Module, Arc<Function>) {
        let f = Arc::new(f);
        let mut m = Module::new();
        m.add(name, Arc::clone(&f)).unwrap();
        (m, f)
    }

    #[test]
    fn infer_type_types_calls_blocks_tuples_and_broadcasting() {
        // let a = add(x, 1.0); let p = (a, x).0; relu(p)
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(t(&[2, 3])));
        let k = b.constant(Constant::scalar_f32(1.0));
        let av = b.call(op::lookup("add").unwrap(), &[x, k], Attrs::new());
        let a = b.var("a", None);
        let tup = b.tuple(&[a, x]);
        let pv = b.proj(tup, 0);
        let p = b.var("p", None);
        let r = b.call(op::lookup("relu").unwrap(), &[p], Attrs::new());
        let body = b.block(&[(a, av), (p, pv)], r);
        let (m, f) = module_with("main", b.finish(&[x], body, Some(t(&[2, 3])), Attrs::new()));
        let out = infer_function(&m, &f).unwrap();
        assert!(out.nodes().iter().all(|n| n.ty.is_some()));
        assert_eq!(out.ty(out.body()), Some(&t(&[2, 3])));
        assert_eq!(out.ty(tup), Some(&Type::tuple(vec![t(&[2, 3]), t(&[2, 3])])));
        // Running again costs one scan and returns the same Arc.
        assert!(Arc::ptr_eq(&infer_function(&m, &out).unwrap(), &out));
    }

    #[test]
    fn infer_type_reports_broadcast_errors_and_unannotated_params_as_diagnostics() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(t(&[2])));
        let y = b.var("y", Some(t(&[3])));
        let z = b.var("z", None);
        let bad = b.call(op::lookup("add").unwrap(), &[x, y], Attrs::new());
        let other = b.call(op::lookup("relu").unwrap(), &[z], Attrs::new());
        let body = b.tuple(&[bad, other]);
        let (m, f) = module_with("f", b.finish(&[x, y, z], body, None, Attrs::new()));
        let diags = infer_function(&m, &f).unwrap_err();
        assert_eq!(diags.len(), 2);
        assert!(diags.iter().all(|d| &*d.func == "f"));
        assert!(diags.iter().any(|d| d.node == bad && d.message.contains("broadcast")));
        assert!(diags.iter().any(|d| d.node == z && d.message.contains("annotate")));
    }

    #[test]
    fn infer_type_uses_callee_signatures_and_checks_arguments() {
        let mut g = FunctionBuilder::new();
        let x = g.var("x", Some(t(&[4])));
        let body = g.call(op::lookup("relu").unwrap(), &[x], Attrs::new());
        let callee = g.finish(&[x], body, Some(t(&[4])), Attrs::new());

        let mut b = FunctionBuilder::new();
        let y = b.var("y", Some(t(&[4])));
        let gref = b.global("g");
        let ok = b.apply(gref, &[y]);
        let k = b.constant(Constant::scalar_f32(1.0));
        let gref2 = b.global("g");
        let bad = b.apply(gref2, &[k]);
        let body = b.tuple(&[ok, bad]);
        let mut m = Module::new();
        m.add("g", callee).unwrap();
        m.add("main", b.finish(&[y], body, None, Attrs::new())).unwrap();
        let (out, diags) = infer_module(&m);
        assert_eq!(diags.len(), 1, "{diags:?}");
        assert_eq!(diags[0].node, bad);
        assert!(out.get("g").unwrap().nodes().iter().all(|n| n.ty.is_some()));
    }

    #[test]
    fn infer_type_checks_if_conditions_and_deep_nesting() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(t(&[2])));
        let mut cur = x;
        for _ in 0..100_000 {
            cur = b.call(op::lookup("relu").unwrap(), &[cur], Attrs::new());
        }
        let c = b.var("c", Some(t(&[])));
        let body = b.if_(c, cur, x);
        let (m, f) = module_with("main", b.finish(&[x, c], body, None, Attrs::new()));
        let diags = infer_function(&m, &f).unwrap_err();
        assert_eq!(diags.len(), 1);
        assert!(diags[0].message.contains("condition"));
    }
}
