//! IR objects for Python: `Module` and `Function` wrap the engine's (O(1) clones sharing the
//! Rust `Arc`s), `Expr` is a handle on one node of a function's arena (what a Python pass
//! walks), `Type` wraps a type, `FunctionBuilder` builds new functions, and `eval` runs the
//! reference interpreter on raw tensor buffers (the Python layer converts numpy arrays).

use std::sync::{Arc, Mutex};

use passel_engine::interp::{eval_function, Value};
use passel_engine::ir::{
    module_structural_eq, module_structural_hash, parse_module, print_function, print_module, structural_eq,
    structural_hash, verify_function, AttrValue, Attrs, Constant, DType, ExprKind, Function as RFunction,
    FunctionBuilder as RBuilder, Module as RModule, NodeId, OpId, Tensor, Type as RType, TypeKind,
};
use passel_engine::op;
use pyo3::exceptions::{PyKeyError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyString};

use crate::errors::{self, OnnxError, ParseError};
use crate::prim_handle::{prim_from_py, prim_to_py};

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Module>()?;
    m.add_class::<Function>()?;
    m.add_class::<Expr>()?;
    m.add_class::<Type>()?;
    m.add_class::<FunctionBuilder>()?;
    m.add_class::<Value_>()?;
    m.add_function(wrap_pyfunction!(eval_raw, m)?)?;
    m.add_function(wrap_pyfunction!(list_ops, m)?)?;
    Ok(())
}

/// An IR module: an ordered map from global names to functions (TVM's ``IRModule``): graph
/// functions (``passel.ir.Function``) and loop-level ones (``passel.tir.PrimFunc``) in one
/// namespace, graph functions first.
///
/// Build one with ``Module.parse(text)`` or ``Module.from_file(path)``; print it with
/// ``mod.script()`` or ``str(mod)``. ``mod["main"]`` is a function, ``mod.functions`` maps
/// every name to its function, in module order. Copies are O(1) and share functions.
///
/// Mutable in place as TVM's ``IRModule`` is (``mod[name] = f``, ``update_func``,
/// ``remove``, ``del mod[name]``, ``update``); ``with_function`` / ``without_function``
/// return changed copies instead. A pass must not change the module it was given in place:
/// under ``config={"testing.immutable_module": True}`` doing so raises ``passel.PassError``
/// (TVM's check).
#[pyclass(module = "passel.ir")]
#[derive(Clone)]
pub struct Module {
    pub(crate) inner: RModule,
    /// The text the module was parsed from, while its spans point into it (dropped by any
    /// change in place): errors then give `line:col`.
    pub(crate) source: Option<Arc<str>>,
    /// Whether a method changed this object in place (what a pass must not do to its input).
    pub(crate) changed_in_place: bool,
}

impl Module {
    /// Sets `name` to `func` in place, replacing a function of either kind (no change when it
    /// is already that very function).
    fn set_any(&mut self, name: &str, func: AnyFunction) -> PyResult<()> {
        let same = match &func {
            AnyFunction::Graph(f) => self.inner.get(name).is_some_and(|g| Arc::ptr_eq(f, g)),
            AnyFunction::Prim(f) => self.inner.get_prim(name).is_some_and(|g| Arc::ptr_eq(f, g)),
        };
        if same {
            return Ok(());
        }
        self.source = None;
        self.changed_in_place = true;
        let res = match func {
            AnyFunction::Graph(f) => {
                if self.inner.get_prim(name).is_some() {
                    let _ = self.inner.remove_prim(name);
                }
                self.inner.insert(name, f)
            }
            AnyFunction::Prim(f) => {
                if self.inner.contains(name) {
                    let _ = self.inner.remove(name);
                }
                self.inner.insert_prim(name, f)
            }
        };
        res.map_err(|e| PyValueError::new_err(e.to_string()))
    }

    pub(crate) fn of(inner: RModule) -> Module {
        Module { inner, source: None, changed_in_place: false }
    }

    /// `line:col` (1-based) of byte `offset` of the source text, when the module has one.
    pub(crate) fn location(&self, offset: u32) -> Option<String> {
        let text = self.source.as_deref()?;
        let before = text.get(..offset as usize)?;
        let line = before.matches('\n').count() + 1;
        let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
        Some(format!("{line}:{col}"))
    }
}

#[pymethods]
impl Module {
    /// An empty module, or one holding ``functions`` (a dict name -> Function or PrimFunc,
    /// in order).
    #[new]
    #[pyo3(signature = (functions=None))]
    fn new(functions: Option<&Bound<'_, PyDict>>) -> PyResult<Module> {
        let mut inner = RModule::new();
        if let Some(fs) = functions {
            for (k, v) in fs.iter() {
                let name: String = k.extract()?;
                let name = name.trim_start_matches('@');
                let res = match any_function(&v)? {
                    AnyFunction::Graph(f) => inner.add(name, f),
                    AnyFunction::Prim(f) => inner.add_prim(name, f),
                };
                res.map_err(|e| PyValueError::new_err(e.to_string()))?;
            }
        }
        Ok(Module::of(inner))
    }

    /// Parses ``.pir`` text. Raises ``passel.ParseError`` with ``line:col`` of every error.
    #[staticmethod]
    fn parse(py: Python<'_>, text: &str) -> PyResult<Module> {
        let source: Arc<str> = Arc::from(text);
        let parsed = source.clone();
        py.detach(move || parse_module(&parsed))
            .map(|inner| Module { inner, source: Some(source), changed_in_place: false })
            .map_err(|e| ParseError::new_err(e.to_string()))
    }

    /// Reads and parses a ``.pir`` file.
    #[staticmethod]
    fn from_file(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Module> {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| pyo3::exceptions::PyOSError::new_err(format!("cannot read {}: {e}", path.display())))?;
        let source: Arc<str> = Arc::from(text);
        let parsed = source.clone();
        py.detach(move || parse_module(&parsed))
            .map(|inner| Module { inner, source: Some(source), changed_in_place: false })
            .map_err(|e| ParseError::new_err(format!("{}: {e}", path.display())))
    }

    /// Imports an ONNX model (TVM's ``relax.frontend.onnx.from_onnx``): the file is read
    /// into memory once and weights stay in that buffer; external data is read from the
    /// model's folder. ``shapes`` gives static shapes for graph inputs with symbolic dimensions
    /// (``{"input": [1, 3, 224, 224]}``, as ``--input-shape`` does). Raises ``OSError`` when
    /// the file cannot be read and ``passel.OnnxError`` when the model cannot be imported.
    #[staticmethod]
    #[pyo3(signature = (path, shapes=None))]
    fn from_onnx(
        py: Python<'_>,
        path: std::path::PathBuf,
        shapes: Option<std::collections::BTreeMap<String, Vec<u64>>>,
    ) -> PyResult<Module> {
        use passel_engine::frontend::onnx::{load_onnx, ImportOptions, LoadError};
        let options =
            ImportOptions { input_shapes: shapes.unwrap_or_default().into_iter().collect(), ..Default::default() };
        py.detach(move || load_onnx(&path, &options)).map(Module::of).map_err(|e| match e {
            LoadError::Io { .. } => pyo3::exceptions::PyOSError::new_err(e.to_string()),
            _ => OnnxError::new_err(shapes_wording(&e.to_string())),
        })
    }

    /// The module as ``.pir`` text (what ``str(mod)`` gives).
    fn script(&self, py: Python<'_>) -> String {
        let m = self.inner.clone();
        py.detach(move || print_module(&m))
    }

    fn __str__(&self, py: Python<'_>) -> String {
        self.script(py)
    }

    fn __repr__(&self) -> String {
        format!("<passel.ir.Module with {} functions>", self.inner.len())
    }

    /// Every function by name, in module order, graph functions then PrimFuncs (a new dict
    /// each call).
    #[getter]
    fn functions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, f) in self.inner.iter() {
            d.set_item(name, Function { inner: f.clone() })?;
        }
        for (name, f) in self.inner.prim_funcs() {
            d.set_item(name, prim_to_py(py, f)?)?;
        }
        Ok(d)
    }

    /// The PrimFuncs by name, in module order (a new dict each call).
    #[getter]
    fn prim_functions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        for (name, f) in self.inner.prim_funcs() {
            d.set_item(name, prim_to_py(py, f)?)?;
        }
        Ok(d)
    }

    /// The global names, in module order: graph functions, then PrimFuncs.
    fn names(&self) -> Vec<String> {
        self.inner.iter().map(|(n, _)| n).chain(self.inner.prim_funcs().map(|(n, _)| n)).map(str::to_string).collect()
    }

    fn __len__(&self) -> usize {
        self.inner.len() + self.inner.num_prims()
    }

    fn __contains__(&self, name: &str) -> bool {
        let name = name.trim_start_matches('@');
        self.inner.contains(name) || self.inner.get_prim(name).is_some()
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        PyList::new(py, self.names())?.try_iter().map(|it| it.into_any())
    }

    /// The function ``name``: a ``Function``, or a ``passel.tir.PrimFunc``.
    fn __getitem__<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        let name = name.trim_start_matches('@');
        if let Some(f) = self.inner.get(name) {
            return Ok(Bound::new(py, Function { inner: f.clone() })?.into_any());
        }
        match self.inner.get_prim(name) {
            Some(f) => prim_to_py(py, f),
            None => Err(PyKeyError::new_err(format!("no function @{name} in the module"))),
        }
    }

    /// ``mod[name] = func``: sets ``name`` to ``func`` (a ``Function`` or a
    /// ``passel.tir.PrimFunc``) in place (replaced where it is, or added at the end), as TVM's
    /// ``IRModule.__setitem__``; a function of the other kind under that name is replaced. A
    /// name that would not print and parse back as itself raises ``ValueError``.
    fn __setitem__(&mut self, name: &str, func: &Bound<'_, PyAny>) -> PyResult<()> {
        self.set_any(name.trim_start_matches('@'), any_function(func)?)
    }

    /// ``del mod[name]``: removes ``name`` in place; ``KeyError`` when there is none.
    fn __delitem__(&mut self, name: &str) -> PyResult<()> {
        self.remove(name)
    }

    /// Replaces (or adds) function ``name`` in place (TVM's ``IRModule.update_func``).
    fn update_func(&mut self, name: &str, func: &Bound<'_, PyAny>) -> PyResult<()> {
        self.__setitem__(name, func)
    }

    /// Removes function ``name`` in place (TVM's ``IRModule.remove``); ``KeyError`` when
    /// there is none.
    fn remove(&mut self, name: &str) -> PyResult<()> {
        let name = name.trim_start_matches('@');
        self.source = None;
        self.changed_in_place = true;
        if self.inner.get_prim(name).is_some() {
            return self.inner.remove_prim(name).map(|_| ()).map_err(|e| PyKeyError::new_err(e.to_string()));
        }
        self.inner.remove(name).map(|_| ()).map_err(|e| PyKeyError::new_err(e.to_string()))
    }

    /// Sets every function of ``other`` in this module, in place (TVM's ``IRModule.update``).
    fn update(&mut self, other: PyRef<'_, Module>) -> PyResult<()> {
        self.source = None;
        self.changed_in_place = true;
        let other = other.inner.clone();
        for (name, f) in other.iter() {
            self.set_any(name, AnyFunction::Graph(f.clone()))?;
        }
        for (name, f) in other.prim_funcs() {
            self.set_any(name, AnyFunction::Prim(f.clone()))?;
        }
        Ok(())
    }

    /// A copy of the module with ``name`` set to ``func`` (replaced in place, or added at
    /// the end). Modules are immutable values, as in TVM's functional style. A name that
    /// would not print and parse back as itself raises ``ValueError``.
    fn with_function(&self, name: &str, func: &Bound<'_, PyAny>) -> PyResult<Module> {
        let mut copy = Module::of(self.inner.clone());
        copy.__setitem__(name, func)?;
        Ok(Module::of(copy.inner))
    }

    /// A copy of the module without ``name``.
    fn without_function(&self, name: &str) -> PyResult<Module> {
        let mut copy = Module::of(self.inner.clone());
        copy.remove(name)?;
        Ok(Module::of(copy.inner))
    }

    /// Structural equality: same names in the same order, structurally equal functions
    /// (variable names do not matter).
    fn structural_equal(&self, other: PyRef<'_, Module>) -> bool {
        module_structural_eq(&self.inner, &other.inner)
    }

    /// A hash consistent with ``structural_equal``.
    fn structural_hash(&self) -> u64 {
        module_structural_hash(&self.inner)
    }

    /// Whether both hold the very same functions (what a pass that changed nothing returns).
    fn same_as(&self, other: PyRef<'_, Module>) -> bool {
        same_module(&self.inner, &other.inner)
    }

    /// Checks every function's well-formedness (scoping, operator arity and attributes).
    /// Raises ``ValueError`` listing the problems.
    fn verify(&self) -> PyResult<()> {
        passel_engine::ir::verify_module(&self.inner)
            .map_err(|errs| PyValueError::new_err(errs.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n")))
    }
}

/// An importer message in the words of ``from_onnx``: the importer names the command line's
/// `--input-shape NAME=d0,d1,…`, which is ``shapes={"NAME": [d0, d1, …]}`` here.
fn shapes_wording(msg: &str) -> String {
    const FLAG: &str = "--input-shape";
    let mut out = String::with_capacity(msg.len());
    let mut rest = msg;
    while let Some(at) = rest.find(FLAG) {
        out.push_str(&rest[..at]);
        let after = &rest[at + FLAG.len()..];
        // `--input-shape NAME=d0,d1,…` (a suggestion) or `--input-shape gives …` (a mismatch).
        match after.strip_prefix(' ').and_then(|a| a.split_once("=d0,d1,…")) {
            Some((name, tail)) if !name.contains(char::is_whitespace) => {
                out.push_str(&format!("shapes={{\"{name}\": [d0, d1, …]}}"));
                rest = tail;
            }
            _ => {
                out.push_str("shapes");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Whether two modules hold the very same functions (graph and PrimFuncs) under the same
/// names, in order.
fn same_module(a: &RModule, b: &RModule) -> bool {
    a.len() == b.len()
        && a.iter().zip(b.iter()).all(|((x, f), (y, g))| x == y && Arc::ptr_eq(f, g))
        && a.num_prims() == b.num_prims()
        && a.prim_funcs().zip(b.prim_funcs()).all(|((x, f), (y, g))| x == y && Arc::ptr_eq(f, g))
}

/// A function of either kind, as `mod[name] = f` takes it.
enum AnyFunction {
    Graph(Arc<RFunction>),
    Prim(Arc<passel_engine::tir::PrimFunc>),
}

fn any_function(obj: &Bound<'_, PyAny>) -> PyResult<AnyFunction> {
    if let Ok(f) = obj.extract::<PyRef<'_, Function>>() {
        return Ok(AnyFunction::Graph(f.inner.clone()));
    }
    match prim_from_py(obj) {
        Some(f) => Ok(AnyFunction::Prim(f)),
        None => Err(PyTypeError::new_err(format!(
            "a module holds passel.ir.Function or passel.tir.PrimFunc, got {}",
            obj.get_type().name()?
        ))),
    }
}

/// A function of a module: parameters, a body, a declared return type and attributes.
/// Immutable; ``func.same_as(other)`` tells whether a pass returned it unchanged.
#[pyclass(module = "passel.ir", frozen)]
#[derive(Clone)]
pub struct Function {
    pub(crate) inner: Arc<RFunction>,
}

#[pymethods]
impl Function {
    /// The parameters (``Expr`` of kind ``"var"``, with ``name`` and ``type``).
    #[getter]
    fn params(&self) -> Vec<Expr> {
        self.inner.params().iter().map(|&id| Expr::new(&self.inner, id)).collect()
    }

    /// The declared return type, or None.
    #[getter]
    fn ret_type(&self) -> Option<Type> {
        self.inner.ret_ty().cloned().map(|t| Type { inner: t })
    }

    /// The function's attributes as a dict.
    #[getter]
    fn attrs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        attrs_to_dict(py, self.inner.attrs())
    }

    /// The body expression (usually a ``"block"`` of bindings).
    #[getter]
    fn body(&self) -> Expr {
        Expr::new(&self.inner, self.inner.body())
    }

    /// The body's top-level bindings as ``(var, value)`` pairs (empty when the body is not
    /// a block).
    #[getter]
    fn bindings(&self) -> Vec<(Expr, Expr)> {
        self.body().bindings()
    }

    /// Number of nodes in the function's arena.
    fn num_nodes(&self) -> usize {
        self.inner.num_nodes()
    }

    /// The function as text, under ``name``.
    #[pyo3(signature = (name="f"))]
    fn script(&self, name: &str) -> String {
        print_function(name, &self.inner)
    }

    fn __str__(&self) -> String {
        self.script("f")
    }

    fn __repr__(&self) -> String {
        format!("<passel.ir.Function with {} params, {} nodes>", self.inner.params().len(), self.inner.num_nodes())
    }

    /// Whether ``other`` is the very same function object (pointer-equal in Rust).
    fn same_as(&self, other: PyRef<'_, Function>) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Structural equality (variable names do not matter).
    fn structural_equal(&self, other: PyRef<'_, Function>) -> bool {
        structural_eq(&self.inner, &other.inner)
    }

    /// A hash consistent with ``structural_equal``.
    fn structural_hash(&self) -> u64 {
        structural_hash(&self.inner)
    }

    /// A copy with ``attrs`` (a dict) as its attributes.
    fn with_attrs(&self, attrs: &Bound<'_, PyDict>) -> PyResult<Function> {
        let attrs = dict_to_attrs(attrs, None)?;
        Ok(Function { inner: Arc::new(self.inner.with_attrs(attrs)) })
    }
}

/// One node of a function: ``kind`` is one of ``"var"``, ``"global"``, ``"const"``,
/// ``"call"`` (``op``, ``args``, ``attrs``), ``"apply"`` (``callee``, ``args``), ``"tuple"``
/// (``fields``), ``"proj"`` (``tuple``, ``index``), ``"if"`` (``cond``, ``then_``,
/// ``else_``), ``"func"`` (a nested function) and ``"block"`` (``bindings``, ``result``).
/// ``type`` is the node's type when known. Two handles are equal when they name the same
/// node of the same function.
#[pyclass(module = "passel.ir", frozen, eq, hash)]
#[derive(Clone)]
pub struct Expr {
    pub(crate) func: Arc<RFunction>,
    pub(crate) id: NodeId,
}

impl PartialEq for Expr {
    fn eq(&self, other: &Expr) -> bool {
        Arc::ptr_eq(&self.func, &other.func) && self.id == other.id
    }
}

impl std::hash::Hash for Expr {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (Arc::as_ptr(&self.func) as usize, self.id.index()).hash(h)
    }
}

impl Expr {
    pub(crate) fn new(func: &Arc<RFunction>, id: NodeId) -> Expr {
        Expr { func: func.clone(), id }
    }

    /// How errors name the expression (its `repr`).
    pub(crate) fn describe(&self) -> String {
        self.__repr__()
    }

    fn at(&self, id: NodeId) -> Expr {
        Expr::new(&self.func, id)
    }

    fn kind_of(&self) -> ExprKind {
        *self.func.kind(self.id)
    }
}

#[pymethods]
impl Expr {
    /// The node kind (see the class doc).
    #[getter]
    fn kind(&self) -> &'static str {
        match self.kind_of() {
            ExprKind::Var { .. } => "var",
            ExprKind::Global { .. } => "global",
            ExprKind::Const { .. } => "const",
            ExprKind::Call { .. } => "call",
            ExprKind::Apply { .. } => "apply",
            ExprKind::Tuple { .. } => "tuple",
            ExprKind::Proj { .. } => "proj",
            ExprKind::If { .. } => "if",
            ExprKind::Func { .. } => "func",
            ExprKind::Block { .. } => "block",
        }
    }

    /// The node's index in its function's arena (operands have smaller ids).
    #[getter]
    fn id(&self) -> usize {
        self.id.index()
    }

    /// A variable's or global's name, else None.
    #[getter]
    fn name(&self) -> Option<String> {
        match self.kind_of() {
            ExprKind::Var { name } | ExprKind::Global { name } => Some(self.func.sym(name).to_string()),
            _ => None,
        }
    }

    /// The node's type, or None when not annotated / inferred.
    #[getter]
    fn r#type(&self) -> Option<Type> {
        self.func.ty(self.id).cloned().map(|t| Type { inner: t })
    }

    /// A call's operator name, else None.
    #[getter]
    fn op(&self) -> Option<&'static str> {
        match self.kind_of() {
            ExprKind::Call { op, .. } => op::try_get(op).map(|d| d.name),
            _ => None,
        }
    }

    /// A call's or apply's arguments (empty for other kinds).
    #[getter]
    fn args(&self) -> Vec<Expr> {
        match self.kind_of() {
            ExprKind::Call { args, .. } | ExprKind::Apply { args, .. } => {
                self.func.ids(args).iter().map(|&i| self.at(i)).collect()
            }
            _ => Vec::new(),
        }
    }

    /// A call's or nested function's attributes as a dict (empty for other kinds).
    #[getter]
    fn attrs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match self.kind_of() {
            ExprKind::Call { attrs, .. } => attrs_to_dict(py, self.func.call_attrs(attrs)),
            ExprKind::Func { idx } => attrs_to_dict(py, &self.func.closure(idx).attrs),
            _ => Ok(PyDict::new(py)),
        }
    }

    /// A nested function's parameters (empty for other kinds).
    #[getter]
    fn params(&self) -> Vec<Expr> {
        match self.kind_of() {
            ExprKind::Func { idx } => {
                self.func.ids(self.func.closure(idx).params).iter().map(|&i| self.at(i)).collect()
            }
            _ => Vec::new(),
        }
    }

    /// A nested function's body, else None.
    #[getter]
    fn body(&self) -> Option<Expr> {
        match self.kind_of() {
            ExprKind::Func { idx } => Some(self.at(self.func.closure(idx).body)),
            _ => None,
        }
    }

    /// A nested function's declared result type, else None.
    #[getter]
    fn ret_type(&self) -> Option<Type> {
        match self.kind_of() {
            ExprKind::Func { idx } => self.func.closure(idx).ret_ty.clone().map(|t| Type { inner: t }),
            _ => None,
        }
    }

    /// A tuple's fields (empty for other kinds).
    #[getter]
    fn fields(&self) -> Vec<Expr> {
        match self.kind_of() {
            ExprKind::Tuple { fields } => self.func.ids(fields).iter().map(|&i| self.at(i)).collect(),
            _ => Vec::new(),
        }
    }

    /// An apply's callee, a projection's tuple, an if's condition; else None.
    #[getter]
    fn callee(&self) -> Option<Expr> {
        match self.kind_of() {
            ExprKind::Apply { callee, .. } => Some(self.at(callee)),
            _ => None,
        }
    }

    /// A projection's tuple, else None.
    #[getter]
    fn tuple(&self) -> Option<Expr> {
        match self.kind_of() {
            ExprKind::Proj { tuple, .. } => Some(self.at(tuple)),
            _ => None,
        }
    }

    /// A projection's field index, else None.
    #[getter]
    fn index(&self) -> Option<u32> {
        match self.kind_of() {
            ExprKind::Proj { index, .. } => Some(index),
            _ => None,
        }
    }

    /// An if's condition, else None.
    #[getter]
    fn cond(&self) -> Option<Expr> {
        match self.kind_of() {
            ExprKind::If { cond, .. } => Some(self.at(cond)),
            _ => None,
        }
    }

    /// An if's then-branch, else None.
    #[getter]
    fn then_(&self) -> Option<Expr> {
        match self.kind_of() {
            ExprKind::If { then_, .. } => Some(self.at(then_)),
            _ => None,
        }
    }

    /// An if's else-branch, else None.
    #[getter]
    fn else_(&self) -> Option<Expr> {
        match self.kind_of() {
            ExprKind::If { else_, .. } => Some(self.at(else_)),
            _ => None,
        }
    }

    /// A block's ``(var, value)`` bindings, in order (empty for other kinds).
    #[getter]
    fn bindings(&self) -> Vec<(Expr, Expr)> {
        match self.kind_of() {
            ExprKind::Block { bindings, .. } => {
                self.func.bindings(bindings).map(|(v, e)| (self.at(v), self.at(e))).collect()
            }
            _ => Vec::new(),
        }
    }

    /// A block's result, else None.
    #[getter]
    fn result(&self) -> Option<Expr> {
        match self.kind_of() {
            ExprKind::Block { result, .. } => Some(self.at(result)),
            _ => None,
        }
    }

    /// A constant's value as ``(dtype, shape, little-endian bytes)`` (``passel.ir`` turns it
    /// into a numpy array with ``const_value``), else None.
    fn const_raw<'py>(&self, py: Python<'py>) -> PyResult<Option<RawPy<'py>>> {
        match self.kind_of() {
            ExprKind::Const { idx } => {
                let t = self.func.constant(idx).materialize().map_err(|e| PyValueError::new_err(e.to_string()))?;
                let (dtype, shape, bytes) = tensor_to_raw(&t);
                Ok(Some((dtype, shape, PyBytes::new(py, &bytes))))
            }
            _ => Ok(None),
        }
    }

    fn __repr__(&self) -> String {
        match (self.kind_of(), self.name(), self.op()) {
            (_, Some(n), _) => format!("<Expr {} {}{n}>", self.kind(), if self.kind() == "var" { "%" } else { "@" }),
            (_, _, Some(op)) => format!("<Expr call {op}>"),
            _ => format!("<Expr {} #{}>", self.kind(), self.id.index()),
        }
    }
}

/// A type: a tensor (``shape``, ``dtype``), a tuple (``fields``) or a function (``params``,
/// ``ret``). ``str(t)`` is its text syntax; types compare by value.
#[pyclass(module = "passel.ir", frozen, eq, hash)]
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct Type {
    pub(crate) inner: RType,
}

#[pymethods]
impl Type {
    /// A tensor type of ``shape`` and ``dtype`` (``"float32"``, ``"float16"``, ``"int64"``,
    /// ``"int32"``, ``"bool"``; short names such as ``"f32"`` work too).
    #[staticmethod]
    #[pyo3(signature = (shape, dtype="float32"))]
    fn tensor(shape: Vec<u64>, dtype: &str) -> PyResult<Type> {
        Ok(Type { inner: RType::tensor(shape, parse_dtype(dtype)?) })
    }

    /// A tuple type.
    #[staticmethod]
    fn tuple(fields: Vec<PyRef<'_, Type>>) -> Type {
        Type { inner: RType::tuple(fields.iter().map(|t| t.inner.clone()).collect::<Vec<_>>()) }
    }

    /// A function type.
    #[staticmethod]
    fn func(params: Vec<PyRef<'_, Type>>, ret: PyRef<'_, Type>) -> Type {
        Type { inner: RType::func(params.iter().map(|t| t.inner.clone()).collect::<Vec<_>>(), ret.inner.clone()) }
    }

    /// ``"tensor"``, ``"tuple"`` or ``"func"``.
    #[getter]
    fn kind(&self) -> &'static str {
        match self.inner.kind() {
            TypeKind::Tensor(_) => "tensor",
            TypeKind::Tuple(_) => "tuple",
            TypeKind::Func(_) => "func",
        }
    }

    /// A tensor type's shape, else None.
    #[getter]
    fn shape(&self) -> Option<Vec<u64>> {
        self.inner.as_tensor().map(|t| t.shape.to_vec())
    }

    /// A tensor type's dtype name (``"float32"``…), else None.
    #[getter]
    fn dtype(&self) -> Option<&'static str> {
        self.inner.as_tensor().map(|t| numpy_dtype(t.dtype))
    }

    /// A tuple type's fields (empty for other kinds).
    #[getter]
    fn fields(&self) -> Vec<Type> {
        self.inner.as_tuple().map(|f| f.iter().map(|t| Type { inner: t.clone() }).collect()).unwrap_or_default()
    }

    /// A function type's parameter types (empty for other kinds).
    #[getter]
    fn params(&self) -> Vec<Type> {
        self.inner.as_func().map(|f| f.params.iter().map(|t| Type { inner: t.clone() }).collect()).unwrap_or_default()
    }

    /// A function type's result type, else None.
    #[getter]
    fn ret(&self) -> Option<Type> {
        self.inner.as_func().map(|f| Type { inner: f.ret.clone() })
    }

    fn __str__(&self) -> String {
        self.inner.to_string()
    }

    fn __repr__(&self) -> String {
        format!("Type({})", self.inner)
    }
}

/// A value under construction in a ``FunctionBuilder`` (a parameter, a bound variable, or an
/// expression not yet bound). A non-variable value may be used once: bind it with
/// ``let`` to use it more often (expressions are trees; sharing goes through variables).
#[pyclass(module = "passel.ir", name = "Value", frozen)]
#[derive(Clone)]
pub struct Value_ {
    pub(crate) builder: usize,
    pub(crate) r: ValueRef,
}

/// What a `Value` stands for: a node of a `FunctionBuilder`, or, inside an `ExprMutator`
/// hook, the rewritten value of an old node, the default rewrite of the node being
/// rewritten, or the `index`-th node the hook built (valid in that hook only).
#[derive(Clone, Copy, Debug)]
pub(crate) enum ValueRef {
    Node(NodeId),
    Old(NodeId),
    Default(NodeId),
    Pending { generation: u32, index: usize },
}

/// Builds a new function: ``param``, then values of every expression kind (``call``,
/// ``apply``, ``const``, ``global_ref``, ``tuple``, ``proj``, ``if_``, ``block`` over
/// variables from ``var``, ``fn`` for a nested function), ``let`` to bind them at the top
/// level, and ``finish(result)``. The finished function is checked by the verifier. To
/// change an existing function, use ``ExprMutator``.
#[pyclass(module = "passel.ir", subclass)]
pub struct FunctionBuilder {
    inner: Mutex<Option<RBuilder>>,
    params: Mutex<Vec<NodeId>>,
    bindings: Mutex<Vec<(NodeId, NodeId)>>,
}

impl FunctionBuilder {
    fn key(&self) -> usize {
        self as *const FunctionBuilder as usize
    }

    fn with<T>(&self, f: impl FnOnce(&mut RBuilder) -> PyResult<T>) -> PyResult<T> {
        let mut g = self.inner.lock().map_err(|_| PyValueError::new_err("builder is poisoned"))?;
        match g.as_mut() {
            Some(b) => f(b),
            None => Err(PyValueError::new_err("the builder was finished already")),
        }
    }

    fn val(&self, id: NodeId) -> Value_ {
        Value_ { builder: self.key(), r: ValueRef::Node(id) }
    }

    fn id_of(&self, v: &Bound<'_, PyAny>) -> PyResult<NodeId> {
        let v = v
            .extract::<PyRef<'_, Value_>>()
            .map_err(|_| PyTypeError::new_err("expected a passel.ir.Value of this builder"))?;
        match v.r {
            ValueRef::Node(id) if v.builder == self.key() => Ok(id),
            _ => Err(PyValueError::new_err("the value belongs to another builder")),
        }
    }

    fn ids_of(&self, vs: &[Bound<'_, PyAny>]) -> PyResult<Vec<NodeId>> {
        vs.iter().map(|v| self.id_of(v)).collect()
    }
}

#[pymethods]
impl FunctionBuilder {
    #[new]
    fn new() -> FunctionBuilder {
        FunctionBuilder {
            inner: Mutex::new(Some(RBuilder::new())),
            params: Mutex::new(Vec::new()),
            bindings: Mutex::new(Vec::new()),
        }
    }

    /// Adds a parameter named ``name`` of type ``ty`` (or untyped).
    #[pyo3(signature = (name, ty=None))]
    fn param(&self, name: &str, ty: Option<PyRef<'_, Type>>) -> PyResult<Value_> {
        let id = self.with(|b| Ok(b.var(name, ty.map(|t| t.inner.clone()))))?;
        self.params.lock().map_err(|_| PyValueError::new_err("builder is poisoned"))?.push(id);
        Ok(self.val(id))
    }

    /// An operator call ``op(args){attrs}`` (of type ``ty`` when given); the operator and its
    /// attributes are checked.
    #[pyo3(signature = (op_name, args, attrs=None, ty=None))]
    fn call(
        &self,
        op_name: &str,
        args: Vec<Bound<'_, PyAny>>,
        attrs: Option<&Bound<'_, PyDict>>,
        ty: Option<PyRef<'_, Type>>,
    ) -> PyResult<Value_> {
        let (op_id, attrs) = check_call(op_name, args.len(), attrs)?;
        let ids = args.iter().map(|a| self.id_of(a)).collect::<PyResult<Vec<_>>>()?;
        let id = self.with(|b| {
            let n = b.call(op_id, &ids, attrs);
            b.set_ty(n, ty.map(|t| t.inner.clone()));
            Ok(n)
        })?;
        Ok(self.val(id))
    }

    /// A tuple of values.
    fn tuple(&self, fields: Vec<Bound<'_, PyAny>>) -> PyResult<Value_> {
        let ids = fields.iter().map(|a| self.id_of(a)).collect::<PyResult<Vec<_>>>()?;
        let id = self.with(|b| Ok(b.tuple(&ids)))?;
        Ok(self.val(id))
    }

    /// Field ``index`` of a tuple value.
    fn proj(&self, tuple: &Bound<'_, PyAny>, index: u32) -> PyResult<Value_> {
        let t = self.id_of(tuple)?;
        let id = self.with(|b| Ok(b.proj(t, index)))?;
        Ok(self.val(id))
    }

    /// A reference to the global function ``name``.
    fn global_ref(&self, name: &str) -> PyResult<Value_> {
        let id = self.with(|b| Ok(b.global(name.trim_start_matches('@'))))?;
        Ok(self.val(id))
    }

    /// A constant from raw little-endian bytes (``passel.ir.const`` converts numpy arrays).
    fn const_raw(&self, dtype: &str, shape: Vec<usize>, data: &[u8]) -> PyResult<Value_> {
        let t = tensor_from_raw(dtype, &shape, data)?;
        let id = self.with(|b| Ok(b.constant(Constant::Dense(t))))?;
        Ok(self.val(id))
    }

    /// Binds ``value`` to a new variable ``name`` (with type ``ty`` if given) and returns the
    /// variable.
    #[pyo3(signature = (name, value, ty=None))]
    fn r#let(&self, name: &str, value: &Bound<'_, PyAny>, ty: Option<PyRef<'_, Type>>) -> PyResult<Value_> {
        let v = self.id_of(value)?;
        let var = self.with(|b| Ok(b.var(name, ty.map(|t| t.inner.clone()))))?;
        self.bindings.lock().map_err(|_| PyValueError::new_err("builder is poisoned"))?.push((var, v));
        Ok(self.val(var))
    }

    /// A variable ``name`` (of type ``ty``) to bind with ``block`` or to use as a parameter of
    /// ``fn`` (``param`` adds a parameter of the function being built, ``let`` binds at its
    /// top level).
    #[pyo3(signature = (name, ty=None))]
    fn var(&self, name: &str, ty: Option<PyRef<'_, Type>>) -> PyResult<Value_> {
        let id = self.with(|b| Ok(b.var(name, ty.map(|t| t.inner.clone()))))?;
        Ok(self.val(id))
    }

    /// An application of ``callee`` (``global_ref(name)`` for a global function, or a
    /// function value) to ``args``.
    #[pyo3(signature = (callee, args, ty=None))]
    fn apply(
        &self,
        callee: &Bound<'_, PyAny>,
        args: Vec<Bound<'_, PyAny>>,
        ty: Option<PyRef<'_, Type>>,
    ) -> PyResult<Value_> {
        let callee = self.id_of(callee)?;
        let args = self.ids_of(&args)?;
        let id = self.with(|b| {
            let n = b.apply(callee, &args);
            b.set_ty(n, ty.map(|t| t.inner.clone()));
            Ok(n)
        })?;
        Ok(self.val(id))
    }

    /// ``if (cond) { then_ } else { else_ }``; a branch with bindings is a ``block``.
    #[pyo3(signature = (cond, then_, else_, ty=None))]
    fn if_(
        &self,
        cond: &Bound<'_, PyAny>,
        then_: &Bound<'_, PyAny>,
        else_: &Bound<'_, PyAny>,
        ty: Option<PyRef<'_, Type>>,
    ) -> PyResult<Value_> {
        let (c, t, e) = (self.id_of(cond)?, self.id_of(then_)?, self.id_of(else_)?);
        let id = self.with(|b| {
            let n = b.if_(c, t, e);
            b.set_ty(n, ty.map(|t| t.inner.clone()));
            Ok(n)
        })?;
        Ok(self.val(id))
    }

    /// A nested block ``{ let v1 = e1; ...; result }``: ``bindings`` are ``(var, value)``
    /// pairs with variables from ``var``.
    fn block(
        &self,
        bindings: Vec<(Bound<'_, PyAny>, Bound<'_, PyAny>)>,
        result: &Bound<'_, PyAny>,
    ) -> PyResult<Value_> {
        let pairs = bindings.iter().map(|(v, e)| Ok((self.id_of(v)?, self.id_of(e)?))).collect::<PyResult<Vec<_>>>()?;
        let r = self.id_of(result)?;
        let id = self.with(|b| Ok(b.block(&pairs, r)))?;
        Ok(self.val(id))
    }

    /// A nested function ``fn (params) { body }`` (a closure over the variables in scope);
    /// ``params`` are variables from ``var``.
    #[pyo3(name = "fn", signature = (params, body, ret_type=None, attrs=None))]
    fn closure(
        &self,
        params: Vec<Bound<'_, PyAny>>,
        body: &Bound<'_, PyAny>,
        ret_type: Option<PyRef<'_, Type>>,
        attrs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Value_> {
        let params = self.ids_of(&params)?;
        let body = self.id_of(body)?;
        let attrs = match attrs {
            Some(d) => dict_to_attrs(d, None)?,
            None => Attrs::new(),
        };
        let id = self.with(|b| Ok(b.closure(&params, body, ret_type.map(|t| t.inner.clone()), attrs)))?;
        Ok(self.val(id))
    }

    /// Finishes the function: the bindings made with ``let``, in order, then ``result``.
    /// Raises ``ValueError`` when the verifier rejects it.
    #[pyo3(signature = (result, ret_type=None, attrs=None))]
    fn finish(
        &self,
        result: &Bound<'_, PyAny>,
        ret_type: Option<PyRef<'_, Type>>,
        attrs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Function> {
        let r = self.id_of(result)?;
        let attrs = match attrs {
            Some(d) => dict_to_attrs(d, None)?,
            None => Attrs::new(),
        };
        let bindings =
            std::mem::take(&mut *self.bindings.lock().map_err(|_| PyValueError::new_err("builder is poisoned"))?);
        let params =
            std::mem::take(&mut *self.params.lock().map_err(|_| PyValueError::new_err("builder is poisoned"))?);
        let mut g = self.inner.lock().map_err(|_| PyValueError::new_err("builder is poisoned"))?;
        let mut b = g.take().ok_or_else(|| PyValueError::new_err("the builder was finished already"))?;
        let body = b.block(&bindings, r);
        let f = b.finish(&params, body, ret_type.map(|t| t.inner.clone()), attrs);
        verify_function(None, "built", &f).map_err(|errs| {
            PyValueError::new_err(format!(
                "the built function is not valid: {}",
                errs.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("; ")
            ))
        })?;
        Ok(Function { inner: Arc::new(f) })
    }
}

/// Checks an operator call made from Python: the operator exists (an unknown name that is
/// not an operator is usually a global function, which is applied, not called), takes
/// `n_args` arguments, and accepts `attrs`.
pub(crate) fn check_call(op_name: &str, n_args: usize, attrs: Option<&Bound<'_, PyDict>>) -> PyResult<(OpId, Attrs)> {
    let op_id = op::lookup(op_name).ok_or_else(|| {
        let close = op::suggest(op_name);
        let close = if close.is_empty() { String::new() } else { format!(" (close: {})", close.join(", ")) };
        PyValueError::new_err(format!(
            "unknown operator `{op_name}`{close}; to call a global function use apply(global_ref(\"{op_name}\"), args)"
        ))
    })?;
    let def = op::get(op_id);
    if !def.arity.accepts(n_args) {
        return Err(PyValueError::new_err(format!("operator `{op_name}` does not take {n_args} arguments")));
    }
    let attrs = match attrs {
        Some(d) => dict_to_attrs(d, Some(def))?,
        None => Attrs::new(),
    };
    def.check_attrs(&attrs).map_err(|e| PyValueError::new_err(format!("operator `{op_name}`: {e}")))?;
    Ok((op_id, attrs))
}

pub(crate) fn parse_dtype(name: &str) -> PyResult<DType> {
    let short = match name {
        "float32" => "f32",
        "float16" => "f16",
        "int64" => "i64",
        "int32" => "i32",
        "float64" => "f64",
        "int8" => "i8",
        "int16" => "i16",
        "uint8" => "u8",
        "uint16" => "u16",
        "uint32" => "u32",
        "uint64" => "u64",
        other => other,
    };
    DType::from_name(short).ok_or_else(|| {
        PyValueError::new_err(format!("unknown dtype `{name}` (expected float32, float16, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64 or bool)"))
    })
}

pub(crate) fn numpy_dtype(d: DType) -> &'static str {
    match d {
        DType::F32 => "float32",
        DType::F16 => "float16",
        DType::I64 => "int64",
        DType::I32 => "int32",
        DType::Bool => "bool",
        DType::F64 => "float64",
        DType::I8 => "int8",
        DType::I16 => "int16",
        DType::U8 => "uint8",
        DType::U16 => "uint16",
        DType::U32 => "uint32",
        DType::U64 => "uint64",
    }
}

pub(crate) fn attrs_to_dict<'py>(py: Python<'py>, attrs: &Attrs) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for (k, v) in attrs.iter() {
        match v {
            AttrValue::Bool(b) => d.set_item(k, *b)?,
            AttrValue::Int(i) => d.set_item(k, *i)?,
            AttrValue::Float(f) => d.set_item(k, *f)?,
            AttrValue::Str(s) => d.set_item(k, &**s)?,
            AttrValue::Ints(v) => d.set_item(k, v.to_vec())?,
            AttrValue::DType(t) => d.set_item(k, numpy_dtype(*t))?,
        }
    }
    Ok(d)
}

pub(crate) fn dict_to_attrs(d: &Bound<'_, PyDict>, def: Option<&op::OpDef>) -> PyResult<Attrs> {
    let mut attrs = Attrs::new();
    for (k, v) in d.iter() {
        let key: String = k.extract()?;
        let wants_dtype =
            def.is_some_and(|def| def.attrs.iter().any(|s| s.name == key && s.kind == op::AttrKind::DType));
        let value = if v.is_instance_of::<PyBool>() {
            AttrValue::Bool(v.extract()?)
        } else if v.is_instance_of::<PyInt>() {
            AttrValue::Int(v.extract()?)
        } else if v.is_instance_of::<PyFloat>() {
            AttrValue::Float(v.extract()?)
        } else if v.is_instance_of::<PyString>() {
            let s: String = v.extract()?;
            if wants_dtype {
                AttrValue::DType(parse_dtype(&s)?)
            } else {
                AttrValue::Str(s.into())
            }
        } else if let Ok(ints) = v.extract::<Vec<i64>>() {
            AttrValue::Ints(ints.into())
        } else {
            return Err(PyTypeError::new_err(format!(
                "attribute `{key}`: expected bool, int, float, str or a list of ints, got {}",
                v.get_type().name()?
            )));
        };
        attrs.set(&key, value);
    }
    Ok(attrs)
}

pub(crate) fn tensor_to_raw(t: &Tensor) -> (String, Vec<usize>, Vec<u8>) {
    let shape = t.shape().to_vec();
    let bytes: Vec<u8> = t.to_le_bytes();
    (numpy_dtype(t.dtype()).to_string(), shape, bytes)
}

pub(crate) fn tensor_from_raw(dtype: &str, shape: &[usize], data: &[u8]) -> PyResult<Tensor> {
    let dt = parse_dtype(dtype)?;
    let n: usize = shape.iter().product();
    let size = dt.size_bytes();
    if data.len() != n * size {
        return Err(PyValueError::new_err(format!(
            "tensor of shape {shape:?} and dtype {dtype} needs {} bytes, got {}",
            n * size,
            data.len()
        )));
    }
    let dims: Vec<u64> = shape.iter().map(|&d| d as u64).collect();
    Tensor::from_le_bytes(&dims, dt, data).map_err(|e| PyValueError::new_err(e.to_string()))
}

pub(crate) type RawTensor = (String, Vec<usize>, Vec<u8>);

/// A raw tensor handed to Python: dtype name, shape, little-endian bytes.
pub(crate) type RawPy<'py> = (String, Vec<usize>, Bound<'py, PyBytes>);

fn value_to_py<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    match v {
        Value::Tensor(t) => {
            let (d, s, b) = tensor_to_raw(t);
            Ok((d, s, PyBytes::new(py, &b)).into_pyobject(py)?.into_any())
        }
        Value::Tuple(fields) => {
            let items = fields.iter().map(|f| value_to_py(py, f)).collect::<PyResult<Vec<_>>>()?;
            Ok(PyList::new(py, items)?.into_any())
        }
        Value::Func(_) => Err(PyValueError::new_err("the function returned a function value, which has no numpy form")),
    }
}

/// Runs the reference interpreter: calls ``name`` of ``mod`` on raw tensors
/// ``(dtype, shape, bytes)``. Returns a raw tensor, or a list for a tuple result.
/// ``passel.eval`` wraps this for numpy arrays.
#[pyfunction]
fn eval_raw<'py>(
    py: Python<'py>,
    module: PyRef<'_, Module>,
    name: &str,
    args: Vec<RawTensor>,
) -> PyResult<Bound<'py, PyAny>> {
    let args =
        args.iter().map(|(d, s, b)| tensor_from_raw(d, s, b).map(Value::Tensor)).collect::<PyResult<Vec<_>>>()?;
    let m = module.inner.clone();
    let name = name.trim_start_matches('@').to_string();
    if !m.contains(&name) {
        if m.get_prim(&name).is_some() {
            return Err(PyTypeError::new_err(format!(
                "@{name} is a PrimFunc: run it with passel.tir.eval (destination passing), or call it from a graph function with call_tir"
            )));
        }
        return Err(PyKeyError::new_err(format!("no function @{name} in the module")));
    }
    let out = py.detach(move || eval_function(&m, &name, &args)).map_err(|e| errors::to_py(py, e))?;
    value_to_py(py, &out)
}

/// The registered operators: ``(name, pattern, doc)`` per operator.
#[pyfunction]
fn list_ops() -> Vec<(&'static str, &'static str, &'static str)> {
    op::all().map(|(_, d)| (d.name, d.pattern.name(), d.doc)).collect()
}
