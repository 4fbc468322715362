//! The drivers behind `passel.ir.ExprVisitor` and `passel.ir.ExprMutator` (TVM's
//! `PyExprVisitor` / `PyExprMutator`): Python hooks called from the engine's one walker and
//! one rewriting layer, so Python has no traversal or copier of its own.
//!
//! - `walk_expr(root, visitor)` runs `ir::Walker` over an expression in evaluation order and
//!   calls `visitor.visit_expr(e)` for every atom and every compound node (before its
//!   operands) and `visitor.visit_binding(var, value)` after each binding's value; the Python
//!   base class memoises, so each node's hook runs once.
//! - `mutate_function(func, mutator, builder)` runs `ir::mutate`: for every live node, operands
//!   first (the engine's post-order), `mutator.visit_expr(old)` returns a `Value` for the
//!   node's replacement and `mutator.visit_binding(var, value)` says whether a binding stays.
//!   Values name what the rewriting layer already holds (the rewritten operand of an old node,
//!   or the default copy of the node being rewritten) or nodes the hook built with the
//!   `RewriteBuilder`; the builder records those and the driver pushes them through
//!   `RewriteCx` after the hook returns, which keeps the output a tree. A hook that returns the
//!   default copy changes nothing, so an unchanged function comes back as the same object.

use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};

use passel_engine::ir::{
    mutate, verify_function, Attrs, Constant, Enter, ExprKind, ExprMutator as RMutator, Function as RFunction, NodeId,
    OpId, RewriteCx, Type as RType, WalkHooks, Walker,
};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::ir::{check_call, tensor_from_raw, Expr, Function, Type, ValueRef, Value_};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<RewriteBuilder>()?;
    m.add_function(wrap_pyfunction!(walk_expr, m)?)?;
    m.add_function(wrap_pyfunction!(mutate_function, m)?)?;
    Ok(())
}

/// Walks the expression `root` with the engine's walker, calling ``visitor.visit_expr`` on
/// every node it meets (a compound node before its operands) and ``visitor.visit_binding``
/// after each binding's value. An exception raised by a hook stops the walk and propagates.
#[pyfunction]
fn walk_expr(root: PyRef<'_, Expr>, visitor: Bound<'_, PyAny>) -> PyResult<()> {
    let func = root.func.clone();
    let mut hooks = PyWalk { func: &func, visitor };
    match Walker::new().walk(&func, root.id, &mut hooks) {
        ControlFlow::Continue(()) => Ok(()),
        ControlFlow::Break(err) => Err(err),
    }
}

struct PyWalk<'a, 'py> {
    func: &'a Arc<RFunction>,
    visitor: Bound<'py, PyAny>,
}

impl PyWalk<'_, '_> {
    fn visit(&mut self, id: NodeId) -> ControlFlow<PyErr> {
        match self.visitor.call_method1("visit_expr", (Expr::new(self.func, id),)) {
            Ok(_) => ControlFlow::Continue(()),
            Err(e) => ControlFlow::Break(e),
        }
    }
}

impl WalkHooks for PyWalk<'_, '_> {
    type Break = PyErr;

    fn atom(&mut self, id: NodeId, _: &ExprKind) -> ControlFlow<PyErr> {
        self.visit(id)
    }

    fn enter(&mut self, id: NodeId, _: &ExprKind) -> ControlFlow<PyErr, Enter> {
        self.visit(id)?;
        ControlFlow::Continue(Enter::Descend)
    }

    fn bind(&mut self, var: NodeId, value: NodeId) -> ControlFlow<PyErr> {
        let args = (Expr::new(self.func, var), Expr::new(self.func, value));
        match self.visitor.call_method1("visit_binding", args) {
            Ok(_) => ControlFlow::Continue(()),
            Err(e) => ControlFlow::Break(e),
        }
    }
}

/// A node a hook built, recorded until the hook returns; operands are `ValueRef`s.
enum Op {
    Call { op: OpId, args: Vec<ValueRef>, attrs: Attrs, ty: Option<RType> },
    Apply { callee: ValueRef, args: Vec<ValueRef>, ty: Option<RType> },
    Tuple { fields: Vec<ValueRef> },
    Proj { tuple: ValueRef, index: u32 },
    If { cond: ValueRef, then_: ValueRef, else_: ValueRef, ty: Option<RType> },
    Global(String),
    Const(Constant),
}

/// The rewrite in progress, shared by the driver and the builder's Python methods.
#[derive(Default)]
struct RewriteState {
    /// The function being rewritten; `None` outside `mutate_function`.
    func: Option<Arc<RFunction>>,
    /// Old nodes whose rewrite is done (their `ValueRef::Old` resolves).
    done: Vec<bool>,
    /// The node whose hook runs, and whether `visit_expr` dispatched it already.
    current: Option<NodeId>,
    dispatched: bool,
    /// Counts hooks, so that a value built in one hook is refused in another.
    generation: u32,
    ops: Vec<Op>,
}

/// Builds replacement expressions inside ``ExprMutator`` hooks (``self.builder``): the same
/// methods as ``FunctionBuilder`` for expressions (``call``, ``apply``, ``tuple``, ``proj``,
/// ``if_``, ``global_ref``, ``const``), over values from ``self.visit_expr(operand)``. A value
/// belongs to the hook that built it.
#[pyclass(module = "passel.ir", subclass)]
pub struct RewriteBuilder {
    state: Mutex<RewriteState>,
}

impl RewriteBuilder {
    fn key(&self) -> usize {
        self as *const RewriteBuilder as usize
    }

    fn lock(&self) -> PyResult<std::sync::MutexGuard<'_, RewriteState>> {
        self.state.lock().map_err(|_| PyValueError::new_err("the rewrite builder is poisoned"))
    }

    fn value(&self, r: ValueRef) -> Value_ {
        Value_ { builder: self.key(), r }
    }

    /// The reference a Python value stands for, checked to belong to this rewrite and hook.
    fn ref_of(&self, v: &Bound<'_, PyAny>) -> PyResult<ValueRef> {
        let v = v.extract::<PyRef<'_, Value_>>().map_err(|_| {
            PyTypeError::new_err(format!(
                "expected a passel.ir.Value from self.visit_expr or self.builder, got {}",
                v.get_type().name().map(|n| n.to_string()).unwrap_or_default()
            ))
        })?;
        if v.builder != self.key() {
            return Err(PyValueError::new_err(
                "the value belongs to another builder (use self.visit_expr(operand) for the operands of a rewrite)",
            ));
        }
        let st = self.lock()?;
        if let ValueRef::Pending { generation, .. } = v.r {
            if generation != st.generation {
                return Err(PyValueError::new_err(
                    "the value was built in another visit_*_ call; build it again in this one",
                ));
            }
        }
        Ok(v.r)
    }

    fn refs(&self, vs: &[Bound<'_, PyAny>]) -> PyResult<Vec<ValueRef>> {
        vs.iter().map(|v| self.ref_of(v)).collect()
    }

    fn record(&self, op: Op) -> PyResult<Value_> {
        let mut st = self.lock()?;
        if st.func.is_none() {
            return Err(PyValueError::new_err("the rewrite builder is used outside ExprMutator.visit_function"));
        }
        let generation = st.generation;
        let index = st.ops.len();
        st.ops.push(op);
        drop(st);
        Ok(self.value(ValueRef::Pending { generation, index }))
    }

    fn expr_id(&self, st: &RewriteState, expr: &Expr) -> PyResult<NodeId> {
        match &st.func {
            Some(f) if Arc::ptr_eq(f, &expr.func) => Ok(expr.id),
            Some(_) => Err(PyValueError::new_err(format!(
                "{} is not an expression of the function being rewritten",
                expr.describe()
            ))),
            None => Err(PyValueError::new_err("the rewrite builder is used outside ExprMutator.visit_function")),
        }
    }
}

#[pymethods]
impl RewriteBuilder {
    #[new]
    fn new() -> RewriteBuilder {
        RewriteBuilder { state: Mutex::new(RewriteState::default()) }
    }

    /// What ``ExprMutator.visit_expr`` uses: the value of an old expression already rewritten
    /// (memoised), or None for the node being rewritten, the first time (it is then
    /// dispatched to its ``visit_*_`` hook). Raises ``ValueError`` for the node being
    /// rewritten the second time (a hook calling ``visit_expr`` on its own node; use
    /// ``visit_expr_post_order``) and for a node that is not an operand.
    fn lookup(&self, expr: PyRef<'_, Expr>) -> PyResult<Option<Value_>> {
        let mut st = self.lock()?;
        let id = self.expr_id(&st, &expr)?;
        if st.done.get(id.index()).copied().unwrap_or(false) {
            return Ok(Some(self.value(ValueRef::Old(id))));
        }
        if st.current == Some(id) {
            if st.dispatched {
                return Err(PyValueError::new_err(format!(
                    "visit_expr({}) inside its own hook: call self.visit_expr_post_order(expr) for its default rewrite",
                    expr.describe()
                )));
            }
            st.dispatched = true;
            return Ok(None);
        }
        Err(PyValueError::new_err(format!(
            "{} is not rewritten yet: a hook can visit only the node it rewrites and that node's operands",
            expr.describe()
        )))
    }

    /// The default rewrite of the node being rewritten (TVM's ``visit_expr_post_order``): the
    /// node rebuilt over its rewritten operands. For an expression rewritten earlier, its
    /// rewritten value.
    fn post_order(&self, expr: PyRef<'_, Expr>) -> PyResult<Value_> {
        let st = self.lock()?;
        let id = self.expr_id(&st, &expr)?;
        if st.current == Some(id) {
            return Ok(self.value(ValueRef::Default(id)));
        }
        if st.done.get(id.index()).copied().unwrap_or(false) {
            return Ok(self.value(ValueRef::Old(id)));
        }
        Err(PyValueError::new_err(format!(
            "{} is not the node being rewritten nor one of its operands",
            expr.describe()
        )))
    }

    /// An operator call ``op(args){attrs}`` (of type ``ty`` when given); the operator, its
    /// arity and attributes are checked.
    #[pyo3(signature = (op_name, args, attrs=None, ty=None))]
    fn call(
        &self,
        op_name: &str,
        args: Vec<Bound<'_, PyAny>>,
        attrs: Option<&Bound<'_, PyDict>>,
        ty: Option<PyRef<'_, Type>>,
    ) -> PyResult<Value_> {
        let (op, attrs) = check_call(op_name, args.len(), attrs)?;
        let args = self.refs(&args)?;
        self.record(Op::Call { op, args, attrs, ty: ty.map(|t| t.inner.clone()) })
    }

    /// An application of ``callee`` (``global_ref(name)`` or a function value) to ``args``.
    #[pyo3(signature = (callee, args, ty=None))]
    fn apply(
        &self,
        callee: &Bound<'_, PyAny>,
        args: Vec<Bound<'_, PyAny>>,
        ty: Option<PyRef<'_, Type>>,
    ) -> PyResult<Value_> {
        let callee = self.ref_of(callee)?;
        let args = self.refs(&args)?;
        self.record(Op::Apply { callee, args, ty: ty.map(|t| t.inner.clone()) })
    }

    /// A tuple of values.
    fn tuple(&self, fields: Vec<Bound<'_, PyAny>>) -> PyResult<Value_> {
        let fields = self.refs(&fields)?;
        self.record(Op::Tuple { fields })
    }

    /// Field ``index`` of a tuple value.
    fn proj(&self, tuple: &Bound<'_, PyAny>, index: u32) -> PyResult<Value_> {
        let tuple = self.ref_of(tuple)?;
        self.record(Op::Proj { tuple, index })
    }

    /// ``if (cond) { then_ } else { else_ }``.
    #[pyo3(signature = (cond, then_, else_, ty=None))]
    fn if_(
        &self,
        cond: &Bound<'_, PyAny>,
        then_: &Bound<'_, PyAny>,
        else_: &Bound<'_, PyAny>,
        ty: Option<PyRef<'_, Type>>,
    ) -> PyResult<Value_> {
        let (cond, then_, else_) = (self.ref_of(cond)?, self.ref_of(then_)?, self.ref_of(else_)?);
        self.record(Op::If { cond, then_, else_, ty: ty.map(|t| t.inner.clone()) })
    }

    /// A reference to the global function ``name`` (``@`` optional).
    fn global_ref(&self, name: &str) -> PyResult<Value_> {
        self.record(Op::Global(name.trim_start_matches('@').to_string()))
    }

    /// A constant from raw little-endian bytes (``const`` converts numpy arrays).
    fn const_raw(&self, dtype: &str, shape: Vec<usize>, data: &[u8]) -> PyResult<Value_> {
        let t = tensor_from_raw(dtype, &shape, data)?;
        self.record(Op::Const(Constant::Dense(t)))
    }
}

/// Rewrites ``func`` with ``mutator`` (an ``ExprMutator``) through the engine's rewriting
/// layer, with ``builder`` as its ``self.builder``. Returns ``func`` itself when no hook
/// changed anything. An exception raised by a hook propagates as itself; an output that does
/// not verify raises ``ValueError``.
#[pyfunction]
fn mutate_function(
    func: PyRef<'_, Function>,
    mutator: Bound<'_, PyAny>,
    builder: Bound<'_, RewriteBuilder>,
) -> PyResult<Function> {
    let input = func.inner.clone();
    {
        let b = builder.borrow();
        let mut st = b.lock()?;
        if st.func.is_some() {
            return Err(PyValueError::new_err("the rewrite builder is already in use (a nested visit_function?)"));
        }
        *st = RewriteState { func: Some(input.clone()), done: vec![false; input.num_nodes()], ..Default::default() };
    }
    let mut binding_value = vec![None; input.num_nodes()];
    for id in input.node_ids() {
        if let ExprKind::Block { bindings, .. } = *input.kind(id) {
            for (var, value) in input.bindings(bindings) {
                if let Some(slot) = binding_value.get_mut(var.index()) {
                    *slot = Some(value);
                }
            }
        }
    }
    let mut hooks = PyMutate { func: &input, mutator, builder: builder.clone(), binding_value, err: None };
    let out = mutate(&input, &mut hooks);
    *builder.borrow().lock()? = RewriteState::default();
    if let Some(err) = hooks.err {
        return Err(err);
    }
    if !Arc::ptr_eq(&out, &input) {
        verify_function(None, "rewritten", &out).map_err(|errs| {
            PyValueError::new_err(format!(
                "the rewritten function is not valid: {}",
                errs.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; ")
            ))
        })?;
    }
    Ok(Function { inner: out })
}

struct PyMutate<'a, 'py> {
    func: &'a Arc<RFunction>,
    mutator: Bound<'py, PyAny>,
    builder: Bound<'py, RewriteBuilder>,
    /// Per old block variable, the value bound to it (what `visit_binding` is shown).
    binding_value: Vec<Option<NodeId>>,
    /// The first exception a hook raised; later hooks are not called.
    err: Option<PyErr>,
}

impl PyMutate<'_, '_> {
    fn rewrite_py(&mut self, cx: &mut RewriteCx<'_>, old: NodeId, kind: &ExprKind) -> PyResult<Option<NodeId>> {
        let b = self.builder.borrow();
        {
            let mut st = b.lock()?;
            st.current = Some(old);
            st.dispatched = false;
            st.generation = st.generation.wrapping_add(1);
            st.ops.clear();
        }
        let ret = self.mutator.call_method1("visit_expr", (Expr::new(self.func, old),))?;
        let result = b.ref_of(&ret).map_err(|e| {
            PyTypeError::new_err(format!(
                "the hook for {} must return a passel.ir.Value (from self.visit_expr, \
                 self.visit_expr_post_order or self.builder): {e}",
                Expr::new(self.func, old).describe()
            ))
        })?;
        let ops = std::mem::take(&mut b.lock()?.ops);
        let mut replay =
            Replay { cx, old, kind, built: Vec::with_capacity(ops.len()), default_copy: None, func: self.func };
        for op in ops {
            let id = replay.push(op)?;
            replay.built.push(id);
        }
        let out = match result {
            ValueRef::Default(id) if id == old && replay.default_copy.is_none() => None,
            r => Some(replay.resolve(r)?),
        };
        let mut st = b.lock()?;
        if let Some(d) = st.done.get_mut(old.index()) {
            *d = true;
        }
        st.current = None;
        Ok(out)
    }
}

/// Pushes what a hook built into the new arena, in the order it was built.
struct Replay<'c, 'a, 'k> {
    cx: &'c mut RewriteCx<'a>,
    old: NodeId,
    kind: &'k ExprKind,
    built: Vec<NodeId>,
    default_copy: Option<NodeId>,
    func: &'k Arc<RFunction>,
}

impl Replay<'_, '_, '_> {
    fn resolve(&mut self, r: ValueRef) -> PyResult<NodeId> {
        match r {
            ValueRef::Old(x) => self.cx.mapped(x).ok_or_else(|| {
                PyValueError::new_err(format!("{} has no rewritten value", Expr::new(self.func, x).describe()))
            }),
            ValueRef::Default(x) if x == self.old => {
                if let Some(d) = self.default_copy {
                    return Ok(d);
                }
                // An atom was copied before its hook; a compound node is pushed as the
                // default copy over its rewritten operands.
                let id = match self.cx.mapped(x) {
                    Some(id) if self.kind.is_atom() => id,
                    _ => {
                        let ty = self.cx.old().ty(x).cloned();
                        self.cx.push(*self.kind, ty)
                    }
                };
                self.default_copy = Some(id);
                Ok(id)
            }
            ValueRef::Default(x) | ValueRef::Node(x) => Err(PyValueError::new_err(format!(
                "the value of {} cannot be used here",
                Expr::new(self.func, x).describe()
            ))),
            ValueRef::Pending { index, .. } => {
                self.built.get(index).copied().ok_or_else(|| PyValueError::new_err("a value used before it was built"))
            }
        }
    }

    fn resolve_all(&mut self, rs: &[ValueRef]) -> PyResult<Vec<NodeId>> {
        rs.iter().map(|&r| self.resolve(r)).collect()
    }

    fn push(&mut self, op: Op) -> PyResult<NodeId> {
        Ok(match op {
            Op::Call { op, args, attrs, ty } => {
                let args = self.resolve_all(&args)?;
                let n = self.cx.call(op, &args, attrs);
                self.cx.set_ty(n, ty);
                n
            }
            Op::Apply { callee, args, ty } => {
                let callee = self.resolve(callee)?;
                let args = self.resolve_all(&args)?;
                let n = self.cx.apply(callee, &args);
                self.cx.set_ty(n, ty);
                n
            }
            Op::Tuple { fields } => {
                let fields = self.resolve_all(&fields)?;
                self.cx.tuple(&fields)
            }
            Op::Proj { tuple, index } => {
                let tuple = self.resolve(tuple)?;
                self.cx.proj(tuple, index)
            }
            Op::If { cond, then_, else_, ty } => {
                let (cond, then_, else_) = (self.resolve(cond)?, self.resolve(then_)?, self.resolve(else_)?);
                self.cx.push(ExprKind::If { cond, then_, else_ }, ty)
            }
            Op::Global(name) => self.cx.global(&name),
            Op::Const(c) => self.cx.constant_node(c),
        })
    }
}

impl RMutator for PyMutate<'_, '_> {
    fn rewrite(&mut self, cx: &mut RewriteCx<'_>, old: NodeId, kind: &ExprKind) -> Option<NodeId> {
        if self.err.is_some() {
            return None;
        }
        match self.rewrite_py(cx, old, kind) {
            Ok(r) => r,
            Err(e) => {
                self.err = Some(e);
                None
            }
        }
    }

    fn keep_binding(&mut self, _: &RewriteCx<'_>, _: NodeId, old_var: NodeId, _: NodeId) -> bool {
        if self.err.is_some() {
            return true;
        }
        let Some(value) = self.binding_value.get(old_var.index()).copied().flatten() else { return true };
        let args = (Expr::new(self.func, old_var), Expr::new(self.func, value));
        match self.mutator.call_method1("visit_binding", args).and_then(|r| r.is_truthy()) {
            Ok(keep) => keep,
            Err(e) => {
                self.err = Some(e);
                true
            }
        }
    }
}
