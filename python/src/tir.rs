//! The loop level for Python: `PrimFuncHandle` wraps an engine `PrimFunc` (the `Arc` is
//! shared, never copied), prints it, compares it structurally and converts it to and from
//! *tables*, the flat post-order form that `passel/tir.py` turns into TVM-style node objects
//! (`For`, `BufferStore`, `Add`, …) and back. `py_prim_func_pass` makes a PrimFunc pass whose
//! body is a Python callable, and `eval_prim` runs one PrimFunc in the interpreter.
//!
//! Tables (every child index refers to an earlier entry of its list, as in the arenas):
//! - `vars`: `(name, type)`; `bufs`: `(name, dtype, shape, strides, elem_offset, scope)`;
//! - `params`: `("var" | "buffer", index)`;
//! - `exprs`: `("int" | "float", type, value)`, `("var", type, var)`, `("bin", type, op, a, b)`,
//!   `("not", type, a)`, `("select", type, c, t, f)`, `("cast", type, a)`,
//!   `("load", type, buf, [indices])`, `("call", type, name, [args])`,
//!   `("ramp", type, base, stride)`, `("broadcast", type, value)`,
//!   `("let", type, var, value, body)`;
//! - `stmts`: `("for", var, min, extent, kind, body)`, `("store", buf, [indices], value)`,
//!   `("let", var, value, body)`, `("if", cond, then, else | None)`, `("seq", [stmts])`,
//!   `("alloc", buf, body)`, `("decl", buf, data, body)`, `("eval", expr)`,
//!   `("attr", key, value, body)`;
//! - `body`: the index of the body statement.
//!
//! Types are TVM's spellings (`float32`, `int64`, `bool`, `float32x4`); passel's short ones
//! (`f32`, `i64x4`) are accepted too. Building from tables goes through `PrimFuncBuilder`
//! (which checks every type) and the verifier, so a bad tree is a `ValueError` naming what is
//! wrong, never a broken function.

use std::sync::Arc;

use passel_engine::interp::{run_prim_func, PrimArg};
use passel_engine::ir::{DType, Module as RModule};
use passel_engine::tir::{
    prim_structural_eq, prim_structural_hash, print_prim_func, verify_prim_func, BinOp, BufId, Buffer, ForKind,
    Intrinsic, PExprId, PExprKind, PType, Param, PrimFunc, PrimFuncBuilder, StmtId, StmtKind, VarId,
};
use passel_engine::transform::{prim_func_pass, PassContext as RContext, PassError as RPassError};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyTuple};

use crate::errors;
use crate::ir::{
    attrs_to_dict, dict_to_attrs, numpy_dtype, parse_dtype, tensor_from_raw, tensor_to_raw, Module, RawPy, RawTensor,
};
pub(crate) use crate::prim_handle::{prim_from_py, PrimFuncHandle};
use crate::transform::{call_python, check_input_unchanged, required_refs, PassContext, PassHandle};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PrimFuncHandle>()?;
    m.add_function(wrap_pyfunction!(py_prim_func_pass, m)?)?;
    m.add_function(wrap_pyfunction!(eval_prim, m)?)?;
    Ok(())
}

/// TVM's spelling of a loop-level type: `float32`, `int64x4`.
fn ptype_name(t: PType) -> String {
    if t.lanes == 1 {
        numpy_dtype(t.dtype).to_string()
    } else {
        format!("{}x{}", numpy_dtype(t.dtype), t.lanes)
    }
}

/// Parses `float32`, `f32`, `float32x4`, `f32x4`, `bool`.
fn parse_ptype(s: &str) -> PyResult<PType> {
    if let Some(t) = PType::from_name(s) {
        return Ok(t);
    }
    if let Ok(d) = parse_dtype(s) {
        return Ok(PType::scalar(d));
    }
    let bad = || PyValueError::new_err(format!("unknown loop-level type `{s}` (e.g. float32, int64, bool, float32x4)"));
    let (d, lanes) = s.rsplit_once('x').ok_or_else(bad)?;
    let dtype: DType = parse_dtype(d).map_err(|_| bad())?;
    let lanes: u16 = lanes.parse().map_err(|_| bad())?;
    PType::from_name(&format!("{dtype}x{lanes}")).ok_or_else(bad)
}

#[pymethods]
impl PrimFuncHandle {
    /// The function as ``.pir`` text, named ``name``.
    #[pyo3(signature = (name="main"))]
    fn script(&self, name: &str) -> String {
        print_prim_func(name.trim_start_matches('@'), &self.inner)
    }

    /// Structural equality (variable and buffer names do not matter).
    fn structural_equal(&self, other: PyRef<'_, PrimFuncHandle>) -> bool {
        prim_structural_eq(&self.inner, &other.inner)
    }

    /// A hash consistent with ``structural_equal``.
    fn structural_hash(&self) -> u64 {
        prim_structural_hash(&self.inner)
    }

    /// Whether both are the very same function (what a pass that changed nothing returns).
    fn same_as(&self, other: PyRef<'_, PrimFuncHandle>) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// The function attributes.
    fn attrs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        attrs_to_dict(py, self.inner.attrs())
    }

    /// The verifier's errors for the function named ``name`` (empty when it verifies).
    #[pyo3(signature = (name="main"))]
    fn verify(&self, name: &str) -> Vec<String> {
        verify_prim_func(name, &self.inner).iter().map(ToString::to_string).collect()
    }

    /// Number of expressions and statements.
    fn size(&self) -> usize {
        self.inner.size()
    }

    /// The function as tables ``(params, vars, bufs, exprs, stmts, body)`` (see the module docs).
    fn tables<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        to_tables(py, &self.inner)
    }

    /// Builds a PrimFunc from tables, with the attributes ``attrs`` (a dict), else those of
    /// ``attrs_of``. Raises ``ValueError`` naming the entry at fault, or listing the
    /// verifier's errors.
    #[staticmethod]
    #[pyo3(signature = (params, vars, bufs, exprs, stmts, body, attrs=None, attrs_of=None))]
    #[allow(clippy::too_many_arguments)]
    fn from_tables(
        params: &Bound<'_, PyList>,
        vars: &Bound<'_, PyList>,
        bufs: &Bound<'_, PyList>,
        exprs: &Bound<'_, PyList>,
        stmts: &Bound<'_, PyList>,
        body: usize,
        attrs: Option<&Bound<'_, PyDict>>,
        attrs_of: Option<PyRef<'_, PrimFuncHandle>>,
    ) -> PyResult<PrimFuncHandle> {
        let attrs = match (attrs, attrs_of) {
            (Some(a), _) => dict_to_attrs(a, None)?,
            (None, Some(of)) => of.inner.attrs().clone(),
            (None, None) => passel_engine::ir::Attrs::new(),
        };
        let func = from_tables(params, vars, bufs, exprs, stmts, body, attrs)?;
        let errors = verify_prim_func("main", &func);
        if !errors.is_empty() {
            return Err(PyValueError::new_err(format!(
                "the PrimFunc does not verify:\n{}",
                errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
            )));
        }
        Ok(PrimFuncHandle { inner: Arc::new(func) })
    }

    fn __repr__(&self) -> String {
        format!("<passel PrimFunc with {} params>", self.inner.params().len())
    }
}

fn to_tables<'py>(py: Python<'py>, f: &PrimFunc) -> PyResult<Bound<'py, PyTuple>> {
    let params = PyList::empty(py);
    for p in f.params() {
        match *p {
            Param::Var(v) => params.append(("var", v.0))?,
            Param::Buf(b) => params.append(("buffer", b.0))?,
        }
    }
    let vars = PyList::empty(py);
    for v in f.vars() {
        vars.append((&*v.name, ptype_name(v.ty)))?;
    }
    let bufs = PyList::empty(py);
    for b in f.bufs() {
        bufs.append((&*b.name, numpy_dtype(b.dtype), b.shape.to_vec(), b.strides.to_vec(), b.elem_offset, &*b.scope))?;
    }
    let ids = |r| f.operands(r).iter().map(|e: &PExprId| e.0).collect::<Vec<u32>>();
    let exprs = PyList::empty(py);
    for e in f.exprs() {
        let ty = ptype_name(e.ty);
        let item = match e.kind {
            PExprKind::Int(v) => ("int", ty, v).into_pyobject(py)?.into_any(),
            PExprKind::Float(v) => ("float", ty, v).into_pyobject(py)?.into_any(),
            PExprKind::Var(v) => ("var", ty, v.0).into_pyobject(py)?.into_any(),
            PExprKind::Bin(op, a, b) => ("bin", ty, op.name(), a.0, b.0).into_pyobject(py)?.into_any(),
            PExprKind::Not(a) => ("not", ty, a.0).into_pyobject(py)?.into_any(),
            PExprKind::Select(c, a, b) => ("select", ty, c.0, a.0, b.0).into_pyobject(py)?.into_any(),
            PExprKind::Cast(a) => ("cast", ty, a.0).into_pyobject(py)?.into_any(),
            PExprKind::Load(buf, r) => ("load", ty, buf.0, ids(r)).into_pyobject(py)?.into_any(),
            PExprKind::Call(i, r) => ("call", ty, i.name(), ids(r)).into_pyobject(py)?.into_any(),
            PExprKind::Ramp(b, s) => ("ramp", ty, b.0, s.0).into_pyobject(py)?.into_any(),
            PExprKind::Broadcast(v) => ("broadcast", ty, v.0).into_pyobject(py)?.into_any(),
            PExprKind::Let(v, x, b) => ("let", ty, v.0, x.0, b.0).into_pyobject(py)?.into_any(),
        };
        exprs.append(item)?;
    }
    let stmts = PyList::empty(py);
    for s in f.stmts() {
        let item = match s.kind {
            StmtKind::For { var, min, extent, kind, body } => {
                ("for", var.0, min.0, extent.0, kind.name(), body.0).into_pyobject(py)?.into_any()
            }
            StmtKind::Store { buf, indices, value } => {
                ("store", buf.0, ids(indices), value.0).into_pyobject(py)?.into_any()
            }
            StmtKind::Let { var, value, body } => ("let", var.0, value.0, body.0).into_pyobject(py)?.into_any(),
            StmtKind::If { cond, then_, else_ } => {
                ("if", cond.0, then_.0, else_.map(|s| s.0)).into_pyobject(py)?.into_any()
            }
            StmtKind::Seq(r) => {
                ("seq", f.stmt_list(r).iter().map(|s| s.0).collect::<Vec<u32>>()).into_pyobject(py)?.into_any()
            }
            StmtKind::Alloc { buf, body } => ("alloc", buf.0, body.0).into_pyobject(py)?.into_any(),
            StmtKind::Decl { buf, data, body } => ("decl", buf.0, data.0, body.0).into_pyobject(py)?.into_any(),
            StmtKind::Evaluate(e) => ("eval", e.0).into_pyobject(py)?.into_any(),
            StmtKind::Attr { key, value, body } => {
                ("attr", f.string(key), value.0, body.0).into_pyobject(py)?.into_any()
            }
        };
        stmts.append(item)?;
    }
    let body = f.body().0.into_pyobject(py)?.into_any();
    PyTuple::new(py, [params.into_any(), vars.into_any(), bufs.into_any(), exprs.into_any(), stmts.into_any(), body])
}

/// An index into a table being built: it must name an entry before `limit`.
fn index(what: &str, at: usize, idx: usize, limit: usize) -> PyResult<u32> {
    if idx >= limit {
        return Err(PyValueError::new_err(format!(
            "{what} {at} refers to entry {idx}, which is not before it ({limit} built)"
        )));
    }
    Ok(idx as u32)
}

fn built<T>(what: &str, at: usize, r: Result<T, String>) -> PyResult<T> {
    r.map_err(|m| PyValueError::new_err(format!("{what} {at}: {m}")))
}

fn from_tables(
    params: &Bound<'_, PyList>,
    vars: &Bound<'_, PyList>,
    bufs: &Bound<'_, PyList>,
    exprs: &Bound<'_, PyList>,
    stmts: &Bound<'_, PyList>,
    body: usize,
    attrs: passel_engine::ir::Attrs,
) -> PyResult<PrimFunc> {
    let mut b = PrimFuncBuilder::new();
    b.set_attrs(attrs);
    for (i, v) in vars.iter().enumerate() {
        let (name, ty): (String, String) = v.extract()?;
        built("variable", i, b.var(&name, parse_ptype(&ty)?))?;
    }
    let n_vars = vars.len();
    for (i, x) in bufs.iter().enumerate() {
        let (name, dtype, shape, strides, offset, scope): (String, String, Vec<i64>, Vec<i64>, i64, String) =
            x.extract()?;
        let buf = Buffer {
            name: name.as_str().into(),
            dtype: parse_dtype(&dtype)?,
            shape: shape.into(),
            strides: strides.into(),
            elem_offset: offset,
            scope: scope.as_str().into(),
        };
        built("buffer", i, b.buffer(buf))?;
    }
    let n_bufs = bufs.len();
    for (i, p) in params.iter().enumerate() {
        let (kind, idx): (String, usize) = p.extract()?;
        match kind.as_str() {
            "var" => b.param(Param::Var(VarId(index("parameter", i, idx, n_vars)?))),
            "buffer" => b.param(Param::Buf(BufId(index("parameter", i, idx, n_bufs)?))),
            other => return Err(PyValueError::new_err(format!("parameter {i} has kind `{other}`"))),
        }
    }
    // Table index -> builder id (the builder may give a statement an id of another, e.g. a
    // sequence of one statement is that statement).
    let mut emap: Vec<PExprId> = Vec::with_capacity(exprs.len());
    for (i, e) in exprs.iter().enumerate() {
        let e = e.cast_into::<PyTuple>().map_err(|_| PyTypeError::new_err(format!("expression {i} is not a tuple")))?;
        let tag: String = e.get_item(0)?.extract()?;
        let ty: String = e.get_item(1)?.extract()?;
        let x = |k: usize| -> PyResult<PExprId> {
            Ok(emap[index("expression", i, e.get_item(k)?.extract()?, i)? as usize])
        };
        let xs = |k: usize| -> PyResult<Vec<PExprId>> {
            let v: Vec<usize> = e.get_item(k)?.extract()?;
            v.into_iter().map(|j| Ok(emap[index("expression", i, j, i)? as usize])).collect()
        };
        let r = match tag.as_str() {
            "int" => b.int(e.get_item(2)?.extract()?, parse_ptype(&ty)?),
            "float" => b.float(e.get_item(2)?.extract()?, parse_ptype(&ty)?),
            "var" => Ok(b.var_ref(VarId(index("expression", i, e.get_item(2)?.extract()?, n_vars)?))),
            "bin" => {
                let name: String = e.get_item(2)?.extract()?;
                let op = BinOp::from_name(&name)
                    .ok_or_else(|| PyValueError::new_err(format!("expression {i}: unknown operator `{name}`")))?;
                b.bin(op, x(3)?, x(4)?)
            }
            "not" => b.not(x(2)?),
            "select" => b.select(x(2)?, x(3)?, x(4)?),
            "cast" => Ok(b.cast(x(2)?, parse_ptype(&ty)?.dtype)),
            "load" => b.load(BufId(index("expression", i, e.get_item(2)?.extract()?, n_bufs)?), &xs(3)?),
            "call" => {
                let name: String = e.get_item(2)?.extract()?;
                let intr = Intrinsic::from_name(&name)
                    .ok_or_else(|| PyValueError::new_err(format!("expression {i}: unknown intrinsic `{name}`")))?;
                b.call(intr, &xs(3)?)
            }
            "ramp" => b.ramp(x(2)?, x(3)?, parse_ptype(&ty)?.lanes),
            "broadcast" => b.broadcast(x(2)?, parse_ptype(&ty)?.lanes),
            "let" => b.let_expr(VarId(index("expression", i, e.get_item(2)?.extract()?, n_vars)?), x(3)?, x(4)?),
            other => return Err(PyValueError::new_err(format!("expression {i} has kind `{other}`"))),
        };
        let id = built("expression", i, r)?;
        emap.push(id);
    }
    let n_exprs = exprs.len();
    let mut smap: Vec<StmtId> = Vec::with_capacity(stmts.len());
    for (i, s) in stmts.iter().enumerate() {
        let s = s.cast_into::<PyTuple>().map_err(|_| PyTypeError::new_err(format!("statement {i} is not a tuple")))?;
        let tag: String = s.get_item(0)?.extract()?;
        let e = |k: usize| -> PyResult<PExprId> {
            Ok(emap[index("statement", i, s.get_item(k)?.extract()?, n_exprs)? as usize])
        };
        let st =
            |k: usize| -> PyResult<StmtId> { Ok(smap[index("statement", i, s.get_item(k)?.extract()?, i)? as usize]) };
        let var =
            |k: usize| -> PyResult<VarId> { Ok(VarId(index("statement", i, s.get_item(k)?.extract()?, n_vars)?)) };
        let buf =
            |k: usize| -> PyResult<BufId> { Ok(BufId(index("statement", i, s.get_item(k)?.extract()?, n_bufs)?)) };
        let r = match tag.as_str() {
            "for" => {
                let kind: String = s.get_item(4)?.extract()?;
                let kind = ForKind::from_name(&kind).ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "statement {i}: unknown loop kind `{kind}` (serial, parallel, vectorized or unroll)"
                    ))
                })?;
                b.for_(var(1)?, e(2)?, e(3)?, kind, st(5)?)
            }
            "store" => {
                let idx: Vec<usize> = s.get_item(2)?.extract()?;
                let idx = idx
                    .into_iter()
                    .map(|j| Ok(emap[index("statement", i, j, n_exprs)? as usize]))
                    .collect::<PyResult<Vec<_>>>()?;
                b.store(buf(1)?, &idx, e(3)?)
            }
            "let" => b.let_stmt(var(1)?, e(2)?, st(3)?),
            "if" => {
                let else_ = if s.get_item(3)?.is_none() { None } else { Some(st(3)?) };
                b.if_(e(1)?, st(2)?, else_)
            }
            "seq" => {
                let items: Vec<usize> = s.get_item(1)?.extract()?;
                let items = items
                    .into_iter()
                    .map(|j| Ok(smap[index("statement", i, j, i)? as usize]))
                    .collect::<PyResult<Vec<_>>>()?;
                Ok(b.seq(&items))
            }
            "alloc" => Ok(b.alloc(buf(1)?, st(2)?)),
            "decl" => b.decl(buf(1)?, buf(2)?, st(3)?),
            "eval" => Ok(b.evaluate(e(1)?)),
            "attr" => {
                let key: String = s.get_item(1)?.extract()?;
                Ok(b.attr(&key, e(2)?, st(3)?))
            }
            other => return Err(PyValueError::new_err(format!("statement {i} has kind `{other}`"))),
        };
        let id = built("statement", i, r)?;
        smap.push(id);
    }
    let body = smap[index("the body", 0, body, stmts.len())? as usize];
    Ok(b.finish(body))
}

/// A PrimFunc pass whose body calls ``body(func, mod, ctx)`` per PrimFunc (``func`` a
/// ``PrimFuncHandle``), which must return a ``PrimFuncHandle`` (the same one when it changes
/// nothing). Like a Python function pass, the body runs on the calling thread, one PrimFunc
/// after the other, whatever ``num_threads`` is.
#[pyfunction]
#[pyo3(signature = (name, opt_level, required, body))]
fn py_prim_func_pass(name: &str, opt_level: u32, required: Vec<String>, body: Py<PyAny>) -> PassHandle {
    let label = format!("prim_func pass {name}");
    let pass_name = name.to_string();
    let pass = prim_func_pass(name, opt_level, move |func: Arc<PrimFunc>, module: &RModule, ctx: &RContext| {
        let (out, changed_in_place) = call_python(&label, |py| {
            let f = PrimFuncHandle { inner: func };
            let m = Py::new(py, Module::of(module.clone()))?;
            let c = PassContext::for_callback(py, ctx)?;
            let out = body.call1(py, (f, m.clone_ref(py), c))?;
            let out = out.bind(py);
            let changed_in_place = m.borrow(py).changed_in_place;
            match prim_from_py(out) {
                Some(f) => Ok((f, changed_in_place)),
                None => Err(errors::passel_error(
                    py,
                    errors::Kind::Type,
                    format!("a prim_func pass must return a passel.tir.PrimFunc, got {}", out.get_type().name()?),
                )),
            }
        })?;
        check_input_unchanged(changed_in_place, ctx, &pass_name)?;
        Ok::<_, RPassError>(out)
    })
    .with_required(&required_refs(&required))
    .on_calling_thread();
    PassHandle { inner: pass.shared() }
}

/// Runs PrimFunc ``func`` (named ``name`` in errors) in the interpreter: ``args`` (raw tensors)
/// bind its first buffer parameters; the remaining buffer parameters are allocated
/// zero-filled and returned as raw tensors, in parameter order (destination passing).
#[pyfunction]
fn eval_prim<'py>(
    py: Python<'py>,
    func: PyRef<'_, PrimFuncHandle>,
    name: &str,
    args: Vec<RawTensor>,
) -> PyResult<Vec<RawPy<'py>>> {
    let args =
        args.iter().map(|(d, s, b)| tensor_from_raw(d, s, b).map(PrimArg::Buffer)).collect::<PyResult<Vec<_>>>()?;
    let f = func.inner.clone();
    let name = name.trim_start_matches('@').to_string();
    let out = py
        .detach(move || run_prim_func(&name, &f, args))
        .map_err(|e| errors::passel_error(py, errors::Kind::Plain, e.to_string()))?;
    Ok(out
        .iter()
        .map(|t| {
            let (d, s, b) = tensor_to_raw(t);
            (d, s, pyo3::types::PyBytes::new(py, &b))
        })
        .collect())
}
