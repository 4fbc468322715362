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
//! or of nested functions: that is an error), change declared result types, or report errors
//! in dead arena nodes. Dead nodes keep the type they had; one without a type gets the type
//! inferred for it when that succeeds (silently, never a diagnostic), so that the next run's
//! quick scan finds every node typed and needs no liveness pass.
//!
//! Phases:
//! 1. Quick scan: if every node already has a type and every global reference's type is the
//!    current type of that global, the function is returned as is. This is the common case
//!    when InferType runs again on an unchanged function, and costs one pass over the node
//!    array with no allocation. The registered pass first runs this scan over the whole
//!    module and returns the module untouched when every function passes it. When some
//!    node lacks a type but the body and parameters have theirs, a liveness pass checks
//!    whether only dead nodes (whose type could not be inferred) do.
//! 2. A walk in evaluation order (the IR's [`Walker`], so variables get their binding's
//!    type before their uses, whatever the arena order), computing types bottom-up. Each
//!    compound node is visited once; re-entering a node still being visited (a cycle) or an
//!    id outside the arena is reported as a malformed function. Operator argument types are
//!    passed to the type relation through one reused buffer.
//! 3. The dead nodes without a type are walked the same way, silently.
//! 4. The types are written into one copy of the function ([`Function::with_types`]).

use std::cell::RefCell;
use std::convert::Infallible;
use std::ops::ControlFlow;
use std::sync::Arc;

use crate::census::{counted, Counter};
use passel_engine::ir::{
    AttrsIdx, DType, Enter, ExprKind, Function, Module, NodeId, OpId, Span, TyIdx, Type, TypeKind, WalkHooks, Walker,
};
use passel_engine::op;
use passel_engine::transform::Statistic;
use passel_engine::transform::{Diagnostic, PassContext, PassError};
use rustc_hash::FxHashMap;

/// This pass's statistics (`passel run --stats`), read off the census of each function it
/// changed (net counts: before − after).
/// The registry name.
pub const NAME: &str = "InferType";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// The `InferType` pass as registered: name, opt level, required passes and, for a module pass,
/// its per-function forms and session firewall.
pub fn pass() -> passel_engine::transform::ModulePass {
    passel_engine::transform::module_pass(NAME, 0, infer_type_pass).with_function_form(infer_type_function)
}

pub(crate) static STATISTICS: &[Counter] = &[(&FUNCTIONS_TYPED, |_, _| 1)];
static FUNCTIONS_TYPED: Statistic =
    Statistic::new("InferType", "functions typed", "functions whose types were filled in");

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
    // Re-running on a typed module must cost next to nothing: one scan, no task per function.
    if m.iter().all(|(_, f)| already_typed(&m, f)) {
        return Ok(m);
    }
    let view = &m;
    let new = ctx.map_functions("InferType", view, |worker, name, func| {
        Ok(match infer_named(view, name, func) {
            Ok(f) => counted(worker, func, f, STATISTICS),
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

/// InferType's per-function form (`ModulePass::with_function_form`): what
/// [`infer_type_pass`] does to one function, its type errors emitted as diagnostics (the
/// executor fills in the function's name). With every global's signature declared, a function's
/// types depend only on its own body and those signatures, so the executor may run this inside
/// a stage of function passes instead of stopping every worker at a barrier.
pub fn infer_type_function(func: Arc<Function>, view: &Module, ctx: &PassContext) -> Result<Arc<Function>, PassError> {
    Ok(match infer_named(view, "", &func) {
        Ok(f) => counted(ctx, &func, f, STATISTICS),
        Err(diags) => {
            for d in diags {
                let mut diag = Diagnostic::error("InferType", d.message).at_node(d.node);
                if let Some(span) = d.span {
                    diag = diag.at_span(span);
                }
                ctx.emit(diag);
            }
            func
        }
    })
}

/// The type errors of every function of `m`, in module order: [`infer_module`]'s diagnostics
/// without its typed module. Each function's typed copy is dropped as soon as it is made, so
/// checking a module costs no second module's memory (`passel check`).
pub fn type_errors(m: &Module) -> Vec<TypeDiagnostic> {
    m.iter().filter_map(|(name, func)| infer_named(m, name, func).err()).flatten().collect()
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

/// The type of global `name` in `module`: its signature, or the function type its parameter
/// and body types give when it has no declared one.
fn global_type(module: &Module, name: &str) -> Option<Type> {
    if let Some(p) = module.get_prim(name) {
        return Some(p.graph_type());
    }
    let f = module.get(name)?;
    f.signature().or_else(|| {
        let params: Option<Vec<Type>> = f.params().iter().map(|&p| f.ty(p).cloned()).collect();
        Some(Type::func(params?, f.ty(f.body())?.clone()))
    })
}

/// Phase 1: whether every node of `func` has a type and every global reference has the current
/// type of its global (a callee whose signature changed makes its callers stale).
fn already_typed(module: &Module, func: &Function) -> bool {
    // One tight loop over the type tags; global references are rare.
    func.nodes().iter().enumerate().all(|(i, n)| {
        n.ty.is_some() && (!matches!(n.kind, ExprKind::Global { .. }) || node_typed(module, func, NodeId(i as u32)))
    })
}

/// Phase 1 when some node lacks a type: whether only dead nodes do (a dead node whose type
/// cannot be inferred stays untyped). Costs a liveness pass.
fn live_typed(module: &Module, func: &Function) -> bool {
    let live = func.live_mask();
    func.node_ids().zip(live).all(|(id, l)| !l || node_typed(module, func, id))
}

fn node_typed(module: &Module, func: &Function, id: NodeId) -> bool {
    match (func.ty(id), func.kind(id)) {
        (None, _) => false,
        (Some(t), ExprKind::Global { name }) => func.try_sym(*name).is_some_and(|g| has_global_type(module, g, t)),
        (Some(_), _) => true,
    }
}

/// Whether `t` is [`global_type`]`(module, name)`, without building that type.
fn has_global_type(module: &Module, name: &str, t: &Type) -> bool {
    if let Some(p) = module.get_prim(name) {
        return p.graph_type() == *t;
    }
    let (Some(f), Some(ft)) = (module.get(name), t.as_func()) else {
        return false;
    };
    let params = f.params();
    params.len() == ft.params.len()
        && params.iter().zip(ft.params.iter()).all(|(&p, pt)| f.ty(p) == Some(pt))
        && f.ret_ty().or_else(|| f.ty(f.body())) == Some(&ft.ret)
}

/// Visit state of a compound node.
const NEW: u8 = 0;
const OPEN: u8 = 1;
const DONE: u8 = 2;

struct Infer<'a> {
    module: &'a Module,
    func: &'a Function,
    name: &'a str,
    tys: Vec<Option<Type>>,
    reported: Vec<bool>,
    state: Vec<u8>,
    diags: Vec<TypeDiagnostic>,
    /// Walking dead nodes: errors are not reported and no type already found is replaced.
    silent: bool,
    /// Set when the arena is malformed (an id out of range or a cycle).
    malformed: bool,
    /// Argument types of the operator call being typed (reused across calls).
    arg_tys: Vec<Type>,
}

impl Infer<'_> {
    /// Reports `message` (built only when it is reported) at `node`, once per node.
    fn error(&mut self, node: NodeId, message: impl FnOnce(&Self) -> String) {
        if self.silent || std::mem::replace(&mut self.reported[node.index()], true) {
            return;
        }
        let message = message(self);
        self.diags.push(TypeDiagnostic { func: self.name.into(), node, span: self.func.span(node), message });
    }

    fn var_name(&self, id: NodeId) -> String {
        format!("%{}", self.func.name_of(id).unwrap_or("?"))
    }

    fn enter_atom(&mut self, id: NodeId) {
        if self.tys[id.index()].is_some() {
            return;
        }
        let func = self.func;
        match *func.kind(id) {
            ExprKind::Var { .. } => match func.ty(id) {
                Some(t) => self.tys[id.index()] = Some(t.clone()),
                None => self.error(id, |s| format!("cannot infer the type of {}: annotate it", s.var_name(id))),
            },
            ExprKind::Global { name } => {
                let Some(g) = func.try_sym(name) else {
                    return self.error(id, |_| "global reference with an unknown symbol".to_string());
                };
                match global_type(self.module, g) {
                    Some(t) => self.tys[id.index()] = Some(t),
                    None if self.module.contains(g) => {
                        self.error(id, |_| format!("the type of @{g} is unknown: annotate its parameters and result"))
                    }
                    None => self.error(id, |_| format!("unknown global function @{g}")),
                }
            }
            ExprKind::Const { idx } => {
                // A constant node carries its type from the builder; build it only if missing.
                let t = func.ty(id).cloned().unwrap_or_else(|| func.constant(idx).ty());
                self.tys[id.index()] = Some(t)
            }
            _ => {}
        }
    }

    fn exit(&mut self, id: NodeId) {
        self.state[id.index()] = DONE;
        let func = self.func;
        let mut known = true;
        match *func.kind(id) {
            ExprKind::Call { args, .. } => known = func.ids(args).iter().all(|&a| self.typed(a)),
            ExprKind::Func { idx } => known = self.typed(func.closure(idx).body),
            ExprKind::Block { result, .. } => known = self.typed(result),
            _ => func.for_each_operand(id, |o| known &= self.typed(o)),
        }
        if !known {
            return;
        }
        let res: Result<Type, String> = match *func.kind(id) {
            ExprKind::Call { op, attrs, args } => {
                let args = func.ids(args);
                let mut arg_tys = std::mem::take(&mut self.arg_tys);
                arg_tys.clear();
                arg_tys.extend(args.iter().map(|&a| self.ty(a).clone()));
                let attrs = func.call_attrs(attrs);
                let res = match op::try_get(op) {
                    None => Err(format!("unknown operator #{}", op.0)),
                    Some(def) if !def.arity.accepts(arg_tys.len()) => {
                        Err(format!("operator `{}` takes {} arguments, got {}", def.name, def.arity, arg_tys.len()))
                    }
                    Some(def) => match def.check_attrs(attrs) {
                        Err(e) => Err(e),
                        Ok(()) => match (def.type_rel)(&arg_tys, attrs) {
                            // The common case, stored directly rather than moved through
                            // the result below.
                            Ok(t) => {
                                arg_tys.clear();
                                self.arg_tys = arg_tys;
                                self.tys[id.index()] = Some(t);
                                return;
                            }
                            Err(e) => Err(e.to_string()),
                        },
                    },
                };
                arg_tys.clear();
                self.arg_tys = arg_tys;
                res
            }
            ExprKind::Apply { callee, args } => match self.ty(callee).kind() {
                TypeKind::Func(ft) => {
                    let args = func.ids(args);
                    if ft.params.len() != args.len() {
                        Err(format!("function takes {} arguments, got {}", ft.params.len(), args.len()))
                    } else if let Some((i, (p, a))) =
                        ft.params.iter().zip(args).enumerate().find(|(_, (p, &a))| *p != self.ty(a))
                    {
                        Err(format!("argument {i} has type {}, expected {p}", self.ty(*a)))
                    } else {
                        Ok(ft.ret.clone())
                    }
                }
                _ => Err(format!("calling a value of type {}, which is not a function", self.ty(callee))),
            },
            ExprKind::Tuple { fields } => {
                Ok(Type::tuple(func.ids(fields).iter().map(|&f| self.ty(f).clone()).collect::<Vec<_>>()))
            }
            ExprKind::Proj { tuple, index } => match self.ty(tuple).kind() {
                TypeKind::Tuple(fields) => fields
                    .get(index as usize)
                    .cloned()
                    .ok_or_else(|| format!("projection .{index} of a tuple of {} fields", fields.len())),
                _ => Err(format!("projection .{index} of a non-tuple of type {}", self.ty(tuple))),
            },
            ExprKind::If { cond, then_, else_ } => {
                let c = self.ty(cond);
                let (t, e) = (self.ty(then_), self.ty(else_));
                let is_bool_scalar = c.as_tensor().is_some_and(|c| c.dtype == DType::Bool && c.shape.is_empty());
                if !is_bool_scalar {
                    Err(format!("condition has type {c}, expected Tensor[(), bool]"))
                } else if t != e {
                    Err(format!("branches have different types: {t} and {e}"))
                } else {
                    Ok(t.clone())
                }
            }
            ExprKind::Func { idx } => {
                let c = func.closure(idx);
                let body = self.ty(c.body);
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
                    (None, Some(r)) if r != body => Err(format!("body has type {body}, declared result is {r}")),
                    (None, _) => Ok(Type::func(params, body.clone())),
                }
            }
            ExprKind::Block { result, .. } => Ok(self.ty(result).clone()),
            ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => return,
        };
        match res {
            Ok(t) => self.tys[id.index()] = Some(t),
            Err(msg) => self.error(id, |_| msg),
        }
    }

    /// Whether a type was found for `id` (false for an id outside the arena).
    fn typed(&self, id: NodeId) -> bool {
        self.tys.get(id.index()).is_some_and(Option::is_some)
    }

    /// The type found for `id`; only called once `id` is known to have one.
    fn ty(&self, id: NodeId) -> &Type {
        self.tys[id.index()].as_ref().unwrap_or_else(|| unreachable!("operand types are checked first"))
    }

    fn bind(&mut self, var: NodeId, value: NodeId) {
        if self.silent && self.tys[var.index()].is_some() {
            return;
        }
        let func = self.func;
        match (func.ty(var), &self.tys[value.index()]) {
            (Some(ann), Some(vt)) if ann != vt => {
                let vt = vt.clone();
                self.error(var, |s| format!("{} is annotated {ann} but its value has type {vt}", s.var_name(var)));
            }
            (Some(ann), _) => self.tys[var.index()] = Some(ann.clone()),
            (None, vt) => self.tys[var.index()] = vt.clone(),
        }
        // A binding variable is typed here; its uses must not report it as unannotated.
        self.reported[var.index()] |= self.tys[var.index()].is_none();
    }

    /// Walks the expression rooted at `root` in evaluation order (phase 2, or phase 3 when
    /// `silent`).
    fn walk(&mut self, root: NodeId, walker: &mut Walker) {
        let ControlFlow::Continue(()) = walker.walk(self.func, root, self);
    }
}

/// Phases 2 and 3 as hooks of the [`Walker`]: atoms get their types on the way down,
/// compound nodes at their exit, variables at their binding. Each compound node is entered
/// once; re-entering one still open (a cycle) or meeting an id out of range marks the
/// function malformed.
impl WalkHooks for Infer<'_> {
    type Break = Infallible;

    #[inline(always)]
    fn atom(&mut self, id: NodeId, _: &ExprKind) -> ControlFlow<Infallible> {
        self.enter_atom(id);
        ControlFlow::Continue(())
    }

    #[inline(always)]
    fn enter(&mut self, id: NodeId, _: &ExprKind) -> ControlFlow<Infallible, Enter> {
        let state = &mut self.state[id.index()];
        ControlFlow::Continue(match *state {
            NEW => {
                *state = OPEN;
                Enter::Descend
            }
            // A node used by one of its own operands: not a post-order arena.
            OPEN => {
                self.malformed = true;
                Enter::Skip
            }
            // Visited already (a shared node, or a live node reached from a dead one).
            _ => Enter::Skip,
        })
    }

    #[inline(always)]
    fn exit(&mut self, id: NodeId, _: &ExprKind) -> ControlFlow<Infallible> {
        Infer::exit(self, id);
        ControlFlow::Continue(())
    }

    #[inline(always)]
    fn bind(&mut self, var: NodeId, value: NodeId) -> ControlFlow<Infallible> {
        Infer::bind(self, var, value);
        ControlFlow::Continue(())
    }

    fn malformed(&mut self, _: NodeId) -> ControlFlow<Infallible> {
        self.malformed = true;
        ControlFlow::Continue(())
    }
}

fn infer_named(module: &Module, name: &str, func: &Arc<Function>) -> Result<Arc<Function>, Vec<TypeDiagnostic>> {
    // The body and the parameters are always live: when one lacks a type, there is work.
    let root_untyped = func.ty(func.body()).is_none() || func.params().iter().any(|&p| func.ty(p).is_none());
    if already_typed(module, func) || (!root_untyped && live_typed(module, func)) {
        return Ok(Arc::clone(func));
    }
    if let Some(typed) = LINEAR.with(|s| infer_linear(module, func, &mut s.borrow_mut())) {
        return Ok(Arc::new(typed));
    }
    infer_walk(module, name, func)
}

/// Phases 2–4 in general: the walk in evaluation order.
fn infer_walk(module: &Module, name: &str, func: &Arc<Function>) -> Result<Arc<Function>, Vec<TypeDiagnostic>> {
    let n = func.num_nodes();
    let malformed = || {
        let message = "malformed function: an operand does not precede its user".to_string();
        vec![TypeDiagnostic { func: name.into(), node: func.body(), span: None, message }]
    };
    if func.body().index() >= n || func.params().iter().any(|p| p.index() >= n) {
        return Err(malformed());
    }
    let mut inf = Infer {
        module,
        func,
        name,
        tys: vec![None; n],
        reported: vec![false; n],
        state: vec![NEW; n],
        diags: Vec::new(),
        silent: false,
        malformed: false,
        arg_tys: Vec::with_capacity(4),
    };
    for &p in func.params() {
        inf.enter_atom(p);
    }
    let mut walker = Walker::new();
    inf.walk(func.body(), &mut walker);
    if inf.malformed {
        return Err(malformed());
    }
    if let (Some(ret), Some(body)) = (func.ret_ty(), &inf.tys[func.body().index()]) {
        if ret != body {
            let body = body.clone();
            inf.error(func.body(), |_| format!("body has type {body}, declared result is {ret}"));
        }
    }
    if !inf.diags.is_empty() {
        return Err(inf.diags);
    }
    // Phase 3: live nodes are those the walk reached (compound nodes entered, atoms typed);
    // the rest are dead. Roots first (a user has a larger id than its operands).
    let mut live = inf.state.iter().map(|&s| s != NEW).collect::<Vec<bool>>();
    for (i, node) in func.nodes().iter().enumerate() {
        if node.kind.is_atom() {
            live[i] = inf.tys[i].is_some();
        }
    }
    inf.silent = true;
    for i in (0..n).rev() {
        if !live[i] && inf.tys[i].is_none() && func.nodes()[i].ty.is_none() {
            inf.walk(NodeId(i as u32), &mut walker);
        }
    }
    // Live nodes take the inferred type, dead ones keep theirs (the inferred one if none).
    let mut types = inf.tys;
    for ((t, id), l) in types.iter_mut().zip(func.node_ids()).zip(live) {
        let old = func.ty(id);
        if (l && t.is_none()) || (!l && old.is_some()) {
            *t = old.cloned();
        }
    }
    Ok(Arc::new(func.with_types(types)))
}

/// Per-thread buffers of the linear path, reused across functions.
#[derive(Default)]
struct Linear {
    /// Binding variable → its value (`NONE` when not bound).
    bound: Vec<NodeId>,
    /// Node → its type's index in `table` (`TyIdx::NONE`: unknown, or failed).
    tys: Vec<TyIdx>,
    /// The output's type table: the input's, then the types found here.
    table: Vec<Type>,
    /// `table` by content, once it is too long to search.
    by_value: FxHashMap<Type, TyIdx>,
    /// (operator, attributes, argument types) → result type: calls repeat a few signatures,
    /// so a small direct-mapped cache (entries of earlier functions are told apart by
    /// `generation`) answers most of them.
    calls: Vec<(u32, CallKey, TyIdx)>,
    generation: u32,
    arg_tys: Vec<Type>,
}

thread_local! {
    static LINEAR: RefCell<Linear> = RefCell::new(Linear::default());
}

const UNBOUND: NodeId = NodeId(u32::MAX);

/// Operator, attributes, argument count and up to three argument types, packed.
type CallKey = u64;

const CALL_SLOTS: usize = 64;

/// Up to this many table entries are searched by content; beyond, `by_value` is used.
const LINEAR_SEARCH: usize = 16;

impl Linear {
    /// The index of `t` in the table, adding it when no equal type is there.
    fn intern(&mut self, t: &Type) -> TyIdx {
        if let Some(i) = self.table.iter().position(|e| e.ptr_eq(t)) {
            return TyIdx::new(i as u32);
        }
        if self.table.len() <= LINEAR_SEARCH {
            if let Some(i) = self.table.iter().position(|e| e == t) {
                return TyIdx::new(i as u32);
            }
        } else {
            if self.by_value.is_empty() {
                for (i, e) in self.table.iter().enumerate() {
                    self.by_value.entry(e.clone()).or_insert(TyIdx::new(i as u32));
                }
            }
            if let Some(&i) = self.by_value.get(t) {
                return i;
            }
            self.by_value.insert(t.clone(), TyIdx::new(self.table.len() as u32));
        }
        self.table.push(t.clone());
        TyIdx::new(self.table.len() as u32 - 1)
    }

    fn ty(&self, i: TyIdx) -> Option<&Type> {
        self.table.get(i.index()?)
    }

    /// Whether `a` and `b` are the same type (by content).
    #[inline]
    fn same(&self, a: TyIdx, b: TyIdx) -> bool {
        a == b || self.same_content(a, b)
    }

    #[inline(never)]
    fn same_content(&self, a: TyIdx, b: TyIdx) -> bool {
        matches!((self.ty(a), self.ty(b)), (Some(x), Some(y)) if x == y)
    }
}

/// The linear path, for the common case of a well-formed function whose bindings are laid
/// out in evaluation order (each block's values and variables in increasing arena order, a
/// variable right after its value): one forward loop over the arena types every node from
/// its operands, variables from their binding's value. Types are interned as they are found
/// (a call's result type is looked up by operator, attributes and argument types before its
/// relation runs), and written into one copy with [`Function::with_type_table`].
///
/// A node whose type cannot be found is left untyped, and so are its users; when that
/// reaches the body or a parameter, when the body's type is not the declared result, or when
/// a node's existing type differs from the one found, `None` is returned and the walk in
/// evaluation order (which reports the errors, and keeps the types of dead nodes) decides.
fn infer_linear(module: &Module, func: &Function, s: &mut Linear) -> Option<Function> {
    if !func.is_well_formed() {
        return None;
    }
    let n = func.num_nodes();
    let nodes = func.nodes();
    s.bound.clear();
    s.bound.resize(n, UNBOUND);
    for node in nodes {
        if let ExprKind::Block { bindings, .. } = node.kind {
            let mut prev = None;
            for (var, value) in func.bindings(bindings) {
                // Evaluation order is arena order within the block.
                if value >= var || prev.is_some_and(|p| value <= p) || s.bound[var.index()] != UNBOUND {
                    return None;
                }
                s.bound[var.index()] = value;
                prev = Some(var);
            }
        }
    }
    s.table.clear();
    s.table.extend_from_slice(func.type_table());
    s.by_value.clear();
    if s.calls.len() != CALL_SLOTS {
        s.calls = vec![(0, 0, TyIdx::NONE); CALL_SLOTS];
    }
    s.generation = s.generation.wrapping_add(1);
    if s.generation == 0 {
        // Generation 0 marks an empty slot; after wrapping around, forget everything.
        s.calls.fill((0, 0, TyIdx::NONE));
        s.generation = 1;
    }
    s.tys.clear();
    s.tys.resize(n, TyIdx::NONE);
    let none = TyIdx::NONE;
    for (i, node) in nodes.iter().enumerate() {
        let ty = match node.kind {
            ExprKind::Var { .. } => {
                let value = s.bound[i];
                match (node.ty.is_some(), value == UNBOUND) {
                    (true, true) => node.ty,
                    // An annotated binding must agree with its value.
                    (true, false) => {
                        if !s.same(node.ty, s.tys[value.index()]) {
                            return None;
                        }
                        node.ty
                    }
                    (false, true) => none,
                    (false, false) => s.tys[value.index()],
                }
            }
            ExprKind::Global { name } => match func.try_sym(name).and_then(|g| global_type(module, g)) {
                Some(t) => s.intern(&t),
                None => none,
            },
            ExprKind::Const { idx } => {
                if node.ty.is_some() {
                    node.ty
                } else {
                    s.intern(&func.constant(idx).ty())
                }
            }
            ExprKind::Call { op, attrs, args } => call_type(s, func, op, attrs, func.ids(args)),
            ExprKind::Apply { callee, args } => {
                let ft = s.ty(s.tys[callee.index()]).and_then(|t| t.as_func());
                match ft {
                    Some(ft)
                        if ft.params.len() == args.len as usize
                            && ft.params.iter().zip(func.ids(args)).all(|(p, a)| s.ty(s.tys[a.index()]) == Some(p)) =>
                    {
                        let ret = ft.ret.clone();
                        s.intern(&ret)
                    }
                    _ => none,
                }
            }
            ExprKind::Tuple { fields } => {
                let fields: Option<Vec<Type>> =
                    func.ids(fields).iter().map(|f| s.ty(s.tys[f.index()]).cloned()).collect();
                match fields {
                    Some(fields) => s.intern(&Type::tuple(fields)),
                    None => none,
                }
            }
            ExprKind::Proj { tuple, index } => {
                match s.ty(s.tys[tuple.index()]).and_then(|t| t.as_tuple()).and_then(|f| f.get(index as usize)) {
                    Some(field) => {
                        let field = field.clone();
                        s.intern(&field)
                    }
                    None => none,
                }
            }
            ExprKind::If { cond, then_, else_ } => {
                let c = s.ty(s.tys[cond.index()]).and_then(|c| c.as_tensor());
                let (t, e) = (s.tys[then_.index()], s.tys[else_.index()]);
                if c.is_some_and(|c| c.dtype == DType::Bool && c.shape.is_empty()) && t.is_some() && s.same(t, e) {
                    t
                } else {
                    none
                }
            }
            ExprKind::Func { idx } => {
                let c = func.closure(idx);
                let params: Option<Vec<Type>> =
                    func.ids(c.params).iter().map(|p| s.ty(s.tys[p.index()]).cloned()).collect();
                match (params, s.ty(s.tys[c.body.index()])) {
                    (Some(params), Some(body)) if c.ret_ty.as_ref().is_none_or(|r| r == body) => {
                        let t = Type::func(params, body.clone());
                        s.intern(&t)
                    }
                    _ => none,
                }
            }
            ExprKind::Block { bindings, result } => {
                if func.ids(bindings).iter().all(|x| s.tys[x.index()].is_some()) {
                    s.tys[result.index()]
                } else {
                    none
                }
            }
        };
        // A type found must agree with the one the node has (the walk decides otherwise:
        // a live node takes the new type, a dead one keeps its own).
        if node.ty.is_some() && ty.is_some() && !s.same(node.ty, ty) {
            return None;
        }
        if ty.is_none() && node.ty.is_some() {
            // A typed node whose type is not found here: only the walk knows whether it is
            // live (and then reports why) or dead (and keeps its type).
            return None;
        }
        s.tys[i] = ty;
    }
    let body = s.tys[func.body().index()];
    if body.is_none()
        || func.params().iter().any(|p| s.tys[p.index()].is_none())
        || func.ret_ty().is_some_and(|r| s.ty(body) != Some(r))
    {
        return None;
    }
    func.with_type_table(&s.table[..], &s.tys)
}

/// The result type of a call, from the memo of call signatures or the operator's relation.
fn call_type(s: &mut Linear, func: &Function, op: OpId, attrs: AttrsIdx, args: &[NodeId]) -> TyIdx {
    // The memo key packs the operator, the attributes, the argument count and up to three
    // argument types into 64 bits; calls that do not fit are not memoized.
    let mut key = u64::from(op.0) | u64::from(attrs.0.min(255)) << 16 | (args.len().min(3) as u64) << 24;
    let mut memo = args.len() <= 3 && attrs.0 < 255;
    for (k, a) in args.iter().enumerate() {
        let t = s.tys[a.index()];
        let Some(i) = t.index() else { return TyIdx::NONE };
        if k < 3 {
            memo &= i < (1 << 12);
            key |= ((i as u64) & 0xfff) << (26 + 12 * k);
        }
    }
    let slot = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58) as usize % CALL_SLOTS;
    if memo {
        let (generation, k, t) = s.calls[slot];
        if generation == s.generation && k == key {
            return t;
        }
    }
    let Some(def) = op::try_get(op) else { return TyIdx::NONE };
    if !def.arity.accepts(args.len()) || def.check_attrs(func.call_attrs(attrs)).is_err() {
        return TyIdx::NONE;
    }
    let mut arg_tys = std::mem::take(&mut s.arg_tys);
    arg_tys.clear();
    for a in args {
        match s.ty(s.tys[a.index()]) {
            Some(t) => arg_tys.push(t.clone()),
            None => {
                s.arg_tys = arg_tys;
                return TyIdx::NONE;
            }
        }
    }
    let res = (def.type_rel)(&arg_tys, func.call_attrs(attrs));
    arg_tys.clear();
    s.arg_tys = arg_tys;
    let t = match res {
        Ok(t) => s.intern(&t),
        Err(_) => TyIdx::NONE,
    };
    if memo {
        s.calls[slot] = (s.generation, key, t);
    }
    t
}

#[cfg(test)]
mod tests {
    use passel_engine::ir::{Attrs, Constant, FunctionBuilder};
    use passel_engine::transform::PassContext;

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
    fn infer_type_reports_out_of_range_operand_tables_as_malformed_without_panicking() {
        // A call whose argument range, and a closure whose index, lie outside the function's
        // tables: the walk reports the function as malformed.
        use passel_engine::ir::{AttrsIdx, ClosureIdx, IdRange};
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(t(&[2])));
        let range = IdRange { start: 1000, len: 2 };
        let relu = op::lookup("relu").unwrap();
        let bad_args = b.push_unchecked(ExprKind::Call { op: relu, attrs: AttrsIdx(0), args: range }, None);
        let bad_closure = b.push_unchecked(ExprKind::Func { idx: ClosureIdx(7) }, None);
        let body = b.tuple(&[bad_args, bad_closure]);
        let (m, f) = module_with("main", b.finish(&[x], body, None, Attrs::new()));
        let diags = infer_function(&m, &f).unwrap_err();
        assert_eq!(diags.len(), 1, "{diags:?}");
        assert!(diags[0].message.contains("malformed"), "{diags:?}");
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

    #[test]
    fn infer_type_types_dead_nodes_so_the_next_run_returns_the_same_arc() {
        // A dead call of constants and a dead block, as FoldConstant leaves behind in
        // append mode, next to a live body.
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(t(&[2])));
        let k1 = b.constant(Constant::scalar_f32(3.0));
        let k2 = b.constant(Constant::scalar_f32(0.5));
        let dead_call = b.call(op::lookup("multiply").unwrap(), &[k1, k2], Attrs::new());
        let c = b.var("c", None);
        let dead_use = b.call(op::lookup("add").unwrap(), &[x, c], Attrs::new());
        let dead_block = b.block(&[(c, dead_call)], dead_use);
        let orphan = b.var("orphan", None);
        let body = b.call(op::lookup("relu").unwrap(), &[x], Attrs::new());
        let (m, f) = module_with("main", b.finish(&[x], body, None, Attrs::new()));
        let out = infer_function(&m, &f).unwrap();
        assert_eq!(out.ty(body), Some(&t(&[2])));
        assert_eq!(out.ty(dead_call), Some(&Type::scalar(DType::F32)));
        assert_eq!(out.ty(c), Some(&Type::scalar(DType::F32)));
        assert_eq!(out.ty(dead_block), Some(&t(&[2])));
        // A dead node whose type cannot be inferred stays untyped, without a diagnostic...
        assert_eq!(out.ty(orphan), None);
        // ...and the next run still returns its input.
        assert!(Arc::ptr_eq(&infer_function(&m, &out).unwrap(), &out));
    }

    /// Types every function of `text` by the linear path (which must apply) and by the walk:
    /// both give every node the same type.
    fn check_linear_matches_walk(text: &str) {
        let m = passel_engine::ir::parse_module(text).unwrap();
        for (name, f) in m.iter() {
            let linear = LINEAR.with(|s| infer_linear(&m, f, &mut s.borrow_mut()));
            let linear = linear.unwrap_or_else(|| panic!("@{name}: the linear path did not apply"));
            let walked = infer_walk(&m, name, f).unwrap();
            for id in f.node_ids() {
                assert_eq!(linear.ty(id), walked.ty(id), "@{name}: {id}");
            }
            assert!(linear.nodes().iter().all(|n| n.ty.is_some()), "@{name}");
        }
    }

    #[test]
    fn infer_type_linear_path_agrees_with_the_walk() {
        check_linear_matches_walk(
            r#"
def @g(%x: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] {
  relu(%x)
}
def @main(%x: Tensor[(2, 3), f32], %b: Tensor[(), bool]) -> Tensor[(3,), f32] {
  let %a = add(%x, 1.0f);
  let %s: Tensor[(2, 3), f32] = multiply(%a, %a);
  let %t = (%s, %x);
  let %p = %t.0;
  let %f = fn (%y: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] {
    let %z = negative(%y);
    tanh(%z)
  };
  let %q = %f(%p);
  let %r = @g(%q);
  let %c = if (%b) { %r } else { %x };
  let %row = add(%c, tensor<(3,), f32>[1.0, 2.0, 3.0]);
  let %m = less(%row, %x);
  let %w = where(%m, %row, %x);
  sum(%w, axis=[0])
}
"#,
        );
    }

    #[test]
    fn infer_type_linear_path_leaves_errors_and_unusual_layouts_to_the_walk() {
        // A broadcast error: the walk reports it.
        let m = passel_engine::ir::parse_module(
            "def @f(%x: Tensor[(2,), f32], %y: Tensor[(3,), f32]) -> Tensor[(2,), f32] {\n  add(%x, %y)\n}\n",
        )
        .unwrap();
        let f = m.get("f").unwrap();
        assert!(LINEAR.with(|s| infer_linear(&m, f, &mut s.borrow_mut())).is_none());
        assert_eq!(infer_function(&m, f).unwrap_err().len(), 1);
        // A binding whose value follows its variable in the arena.
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(t(&[2])));
        let v = b.var("v", None);
        let value = b.call(op::lookup("relu").unwrap(), &[x], Attrs::new());
        let use_v = b.call(op::lookup("tanh").unwrap(), &[v], Attrs::new());
        let body = b.block(&[(v, value)], use_v);
        let (m, f) = module_with("main", b.finish(&[x], body, None, Attrs::new()));
        assert!(LINEAR.with(|s| infer_linear(&m, &f, &mut s.borrow_mut())).is_none());
        let out = infer_function(&m, &f).unwrap();
        assert_eq!(out.ty(out.body()), Some(&t(&[2])));
    }

    #[test]
    fn infer_type_pass_returns_a_typed_module_untouched() {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(t(&[2])));
        let body = b.call(op::lookup("relu").unwrap(), &[x], Attrs::new());
        let (m, _) = module_with("main", b.finish(&[x], body, None, Attrs::new()));
        let ctx = PassContext::default();
        let typed = infer_type_pass(m, &ctx).unwrap();
        let again = infer_type_pass(typed.clone(), &ctx).unwrap();
        assert!(Arc::ptr_eq(typed.get("main").unwrap(), again.get("main").unwrap()));
        assert!(again.get("main").unwrap().nodes().iter().all(|n| n.ty.is_some()));
    }

    #[test]
    fn infer_type_retypes_a_caller_when_its_callee_signature_changed() {
        // `sum` gives a scalar, `relu` a tensor of the argument's shape.
        let callee = |reduce: bool| {
            let mut g = FunctionBuilder::new();
            let x = g.var("x", Some(t(&[4])));
            let (op_name, ret) = if reduce { ("sum", Type::scalar(DType::F32)) } else { ("relu", t(&[4])) };
            let body = g.call(op::lookup(op_name).unwrap(), &[x], Attrs::new());
            g.finish(&[x], body, Some(ret), Attrs::new())
        };
        let mut b = FunctionBuilder::new();
        let y = b.var("y", Some(t(&[4])));
        let gref = b.global("g");
        let body = b.apply(gref, &[y]);
        let caller = Arc::new(b.finish(&[y], body, None, Attrs::new()));
        let mut m = Module::new();
        m.add("g", callee(true)).unwrap();
        m.add("main", Arc::clone(&caller)).unwrap();
        let (typed, diags) = infer_module(&m);
        assert!(diags.is_empty(), "{diags:?}");
        let main = typed.get("main").unwrap();
        assert_eq!(main.ty(main.body()), Some(&Type::scalar(DType::F32)));
        // The callee's declared result changes: the caller's stored types are stale.
        let mut m2 = Module::new();
        m2.add("g", callee(false)).unwrap();
        m2.add("main", Arc::clone(main)).unwrap();
        let (retyped, diags) = infer_module(&m2);
        let main2 = retyped.get("main").unwrap();
        assert!(!Arc::ptr_eq(main, main2));
        assert!(diags.is_empty(), "{diags:?}");
        assert_eq!(main2.ty(main2.body()), Some(&t(&[4])));
    }

    #[test]
    fn infer_type_keeps_attributes_apart_and_reports_every_failing_call() {
        use passel_engine::ir::AttrValue;
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(t(&[2, 3])));
        let y = b.var("y", Some(t(&[4])));
        let sum = op::lookup("sum").unwrap();
        let axis = |a: i64| Attrs::new().with("axis", AttrValue::Ints(vec![a].into()));
        let s0 = b.call(sum, &[x], axis(0));
        let s1 = b.call(sum, &[x], axis(1));
        let s0_again = b.call(sum, &[x], axis(0));
        let add = op::lookup("add").unwrap();
        let bad1 = b.call(add, &[x, y], Attrs::new());
        let bad2 = b.call(add, &[x, y], Attrs::new());
        let ok = b.call(add, &[x, x], Attrs::new());
        let body = b.tuple(&[s0, s1, s0_again, ok]);
        let (m, f) = module_with("main", b.finish(&[x, y], body, None, Attrs::new()));
        // Same operator and argument types, different attributes: different results.
        let good = {
            let mut g = (*f).clone().to_builder();
            let body = g.tuple(&[s0, s1, s0_again, ok]);
            let params = [x, y];
            Arc::new(g.finish(&params, body, None, Attrs::new()))
        };
        let out = infer_function(&m, &good).unwrap();
        assert_eq!(out.ty(s0), Some(&t(&[3])));
        assert_eq!(out.ty(s1), Some(&t(&[2])));
        assert_eq!(out.ty(s0_again), Some(&t(&[3])));
        assert_eq!(out.ty(ok), Some(&t(&[2, 3])));
        // Each failing call is reported, also when an identical call failed before.
        let mut g = (*f).clone().to_builder();
        let body = g.tuple(&[bad1, bad2]);
        let bad = Arc::new(g.finish(&[x, y], body, None, Attrs::new()));
        let diags = infer_function(&m, &bad).unwrap_err();
        let nodes: Vec<NodeId> = diags.iter().map(|d| d.node).collect();
        assert_eq!(nodes, vec![bad1, bad2], "{diags:?}");
    }
}
