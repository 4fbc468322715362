//! The reference interpreter: evaluates functions of the IR on concrete values with the
//! operators' reference kernels, each call through [`op::evaluate`] (the path FoldConstant
//! and the ONNX importer's folding take too). Tests use it to show that a pass kept a
//! function's meaning.
//!
//! Semantics: block bindings are evaluated in order (strictly); `if` evaluates only the taken
//! branch (its condition is a one-element tensor, true when nonzero); `Apply` calls a global,
//! a closure, or a variable bound to either; closures capture the values of their free
//! variables when they are created. Arguments, and results, are checked against annotated
//! types.
//!
//! Nothing here recurses on the input: each call frame evaluates its expression with the IR's
//! [`Walker`] (an explicit stack; the walk's hooks are the evaluation steps), and calls push
//! frames on an explicit frame stack, so a 1,000,000-binding function or a 100,000-deep
//! expression needs no native stack. Call depth is bounded
//! ([`DEFAULT_MAX_CALL_DEPTH`]) so that unbounded recursion between globals is a clear error.
//! A variable's value is dropped after its last use, so a long chain of bindings keeps only
//! the live values in memory.

use std::collections::HashMap;
use std::sync::Arc;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use std::ops::ControlFlow;

use crate::ir::{
    Attrs, Branch, ClosureIdx, Enter, ExprKind, Function, Module, NodeId, OpId, Tensor, Type, TypeKind, WalkHooks,
    Walker,
};
use crate::op::{self, KernelCtx};

mod prim;
#[cfg(test)]
mod tests;

pub use prim::{block_nest_count, reduce_nest_count, run_prim_func, PrimArg, PrimScalar, MAX_PRIM_DEPTH};

/// Default bound on nested calls between functions.
pub const DEFAULT_MAX_CALL_DEPTH: usize = 10_000;

/// A runtime value.
#[derive(Clone, Debug)]
pub enum Value {
    /// A tensor.
    Tensor(Tensor),
    /// A tuple of values.
    Tuple(Arc<[Value]>),
    /// A function: a global or a closure.
    Func(FuncValue),
}

impl Value {
    /// The tensor, if this is one.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            Value::Tensor(t) => Some(t),
            _ => None,
        }
    }

    /// A short description of the value's type for messages (`Tensor[(2,), f32]`, `a tuple of
    /// 2 values`, `a function`).
    pub fn describe(&self) -> String {
        match self {
            Value::Tensor(t) => t.ty().to_string(),
            Value::Tuple(fields) => format!("a tuple of {} values", fields.len()),
            Value::Func(_) => "a function".to_string(),
        }
    }
}

impl Drop for Value {
    /// Drops nested tuples and closure environments with an explicit stack: a value nested a
    /// million tuples deep must not overflow the call stack when it is freed.
    fn drop(&mut self) {
        // Tensors and shared tuples (the common cases) own no nested value to free here.
        if !owns_nested(self) {
            return;
        }
        let mut stack = Vec::new();
        take_nested(self, &mut stack);
        while let Some(mut v) = stack.pop() {
            take_nested(&mut v, &mut stack);
            // `v` now holds no nested value, so dropping it here does not recurse.
        }
    }
}

/// Whether dropping `v` would free a tuple or closure environment that holds further values.
fn owns_nested(v: &Value) -> bool {
    match v {
        Value::Tensor(_) | Value::Func(FuncValue::Global(_)) => false,
        Value::Tuple(fields) => Arc::strong_count(fields) == 1 && fields.iter().any(|f| !matches!(f, Value::Tensor(_))),
        Value::Func(FuncValue::Closure(c)) => Arc::strong_count(c) == 1 && !c.env.is_empty(),
    }
}

/// Moves the nested values that `v` owns alone onto `stack`, leaving cheap placeholders.
fn take_nested(v: &mut Value, stack: &mut Vec<Value>) {
    match v {
        Value::Tensor(_) | Value::Func(FuncValue::Global(_)) => {}
        Value::Tuple(fields) => {
            if let Some(fields) = Arc::get_mut(fields) {
                for f in fields.iter_mut().filter(|f| !matches!(f, Value::Tensor(_))) {
                    stack.push(std::mem::replace(f, Value::Func(FuncValue::Global(Arc::from("")))));
                }
            }
        }
        Value::Func(FuncValue::Closure(c)) => {
            if let Some(c) = Arc::get_mut(c) {
                stack.extend(c.env.drain(..).map(|(_, v)| v));
            }
        }
    }
}

impl From<Tensor> for Value {
    fn from(t: Tensor) -> Value {
        Value::Tensor(t)
    }
}

/// A function value.
#[derive(Clone, Debug)]
pub enum FuncValue {
    /// The global function of that name (without `@`).
    Global(Arc<str>),
    /// A nested function with its captured environment.
    Closure(Arc<ClosureValue>),
}

/// A closure: a nested function of some arena plus the values of its free variables.
#[derive(Debug)]
pub struct ClosureValue {
    func: Arc<Function>,
    owner: Arc<str>,
    idx: ClosureIdx,
    env: Vec<(NodeId, Value)>,
}

impl ClosureValue {
    /// The global function whose arena holds this closure.
    pub fn owner(&self) -> &str {
        &self.owner
    }
}

/// An evaluation error, naming the function (the global whose arena holds the node) and,
/// when known, the node.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("in @{function}{}: {message}", node.map(|n| format!(" at {n}")).unwrap_or_default())]
pub struct EvalError {
    /// The global function being evaluated.
    pub function: String,
    /// The node being evaluated, if any.
    pub node: Option<NodeId>,
    /// What went wrong (lowercase, no trailing period).
    pub message: String,
}

/// The error of [`run_prim_func`]: the same shape as the graph interpreter's (the function
/// named, and the statement in the message; `node` is `None`).
pub type InterpError = EvalError;

/// Per-function facts the interpreter needs, computed once per function.
struct FnInfo {
    /// An upper bound on how often each variable is read in one frame (direct references plus
    /// captures by closures); a value is dropped when its count reaches zero.
    uses: Vec<u32>,
    /// Free variables of each nested function, by closure index.
    free: HashMap<u32, Arc<[NodeId]>>,
}

impl FnInfo {
    /// Facts about every node of `func`.
    fn new(func: &Function) -> FnInfo {
        let mut info = FnInfo::of_nodes(func, func.node_ids());
        // A body that is a variable (`def @id(%x) { %x }`) is read by no node.
        count_var_read(func, &mut info.uses, func.body());
        info
    }

    /// Facts about the subtree of `root` only, so that [`eval_closed`] on a small expression of
    /// a big function costs time in the expression's size, not the function's.
    fn for_subtree(func: &Function, root: NodeId) -> FnInfo {
        let mut nodes = Vec::new();
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            nodes.push(id);
            func.for_each_operand(id, |c| stack.push(c));
        }
        nodes.sort_unstable();
        nodes.dedup();
        FnInfo::of_nodes(func, nodes.into_iter())
    }

    fn of_nodes(func: &Function, nodes: impl Iterator<Item = NodeId>) -> FnInfo {
        // Zeroed allocations are cheap even for big arenas (the pages are mapped lazily).
        let mut uses = vec![0u32; func.num_nodes()];
        let mut free = HashMap::new();
        for id in nodes {
            read_operands(func, id, |v| {
                if matches!(func.kind(v), ExprKind::Var { .. }) {
                    uses[v.index()] = uses[v.index()].saturating_add(1);
                }
            });
            if let ExprKind::Func { idx } = *func.kind(id) {
                // Likewise a nested function whose body is a variable.
                count_var_read(func, &mut uses, func.closure(idx).body);
                let vars: Arc<[NodeId]> = func.free_vars(id).into();
                for &v in vars.iter() {
                    uses[v.index()] = uses[v.index()].saturating_add(1);
                }
                free.insert(idx.0, vars);
            }
        }
        FnInfo { uses, free }
    }
}

/// Counts one read of `id` when it is a variable.
fn count_var_read(func: &Function, uses: &mut [u32], id: NodeId) {
    if matches!(func.kind(id), ExprKind::Var { .. }) {
        uses[id.index()] = uses[id.index()].saturating_add(1);
    }
}

/// Operands of `id` that are read when it is evaluated: not binding variables of a block nor
/// parameters or bodies of a nested function (a closure's body is evaluated in its own frame).
fn read_operands(func: &Function, id: NodeId, mut f: impl FnMut(NodeId)) {
    match *func.kind(id) {
        ExprKind::Block { bindings, result } => {
            for (_, value) in func.bindings(bindings) {
                f(value);
            }
            f(result);
        }
        ExprKind::Func { .. } => {}
        _ => func.for_each_operand(id, f),
    }
}

/// A function being executed: borrowed (for [`eval_closed`]) or shared.
enum FuncRef<'a> {
    Borrowed(&'a Function),
    Shared(Arc<Function>),
}

impl FuncRef<'_> {
    fn get(&self) -> &Function {
        match self {
            FuncRef::Borrowed(f) => f,
            FuncRef::Shared(f) => f,
        }
    }
}

struct Frame<'a> {
    func: FuncRef<'a>,
    name: Arc<str>,
    info: Arc<FnInfo>,
    /// Bound variables with their remaining read counts.
    vars: HashMap<NodeId, (Value, u32)>,
    ret_ty: Option<Type>,
    /// The walk of the expression being evaluated in this frame; it stops at each call of a
    /// function value and resumes when the callee's frame returns.
    walk: Walker,
}

impl FuncRef<'_> {
    /// Another handle on the same function (a reference count for a shared one).
    fn share(&self) -> Self {
        match self {
            FuncRef::Borrowed(f) => FuncRef::Borrowed(f),
            FuncRef::Shared(f) => FuncRef::Shared(Arc::clone(f)),
        }
    }
}

/// Why the walk of a frame stopped.
enum Stop {
    /// A call pushed the callee's frame.
    Call,
    /// Evaluation failed.
    Error(EvalError),
}

impl From<EvalError> for Stop {
    fn from(e: EvalError) -> Stop {
        Stop::Error(e)
    }
}

/// Evaluates functions of one module.
pub struct Interpreter<'m> {
    module: &'m Module,
    ctx: KernelCtx,
    max_call_depth: usize,
    /// Facts per function, keyed by address; the entry keeps its function alive so that the
    /// address cannot be reused by another function.
    infos: HashMap<usize, (Arc<Function>, Arc<FnInfo>)>,
}

impl<'m> Interpreter<'m> {
    /// An interpreter of `module`, with random seed 0.
    pub fn new(module: &'m Module) -> Interpreter<'m> {
        Interpreter { module, ctx: KernelCtx::seeded(0), max_call_depth: DEFAULT_MAX_CALL_DEPTH, infos: HashMap::new() }
    }

    /// Seeds the random stream of stateful operators.
    pub fn with_seed(mut self, seed: u64) -> Interpreter<'m> {
        self.ctx.rng = ChaCha8Rng::seed_from_u64(seed);
        self
    }

    /// Sets the bound on nested calls (default [`DEFAULT_MAX_CALL_DEPTH`]).
    pub fn with_max_call_depth(mut self, depth: usize) -> Interpreter<'m> {
        self.max_call_depth = depth;
        self
    }

    /// Calls the global `global` (without `@`) on `args`.
    pub fn call(&mut self, global: &str, args: &[Value]) -> Result<Value, EvalError> {
        let mut m = Machine::new(self);
        m.enter(FuncValue::Global(global.into()), args.to_vec(), None)?;
        m.run()
    }

    /// Calls a function value (a global or a closure returned by an earlier call).
    pub fn call_value(&mut self, func: &FuncValue, args: &[Value]) -> Result<Value, EvalError> {
        let mut m = Machine::new(self);
        m.enter(func.clone(), args.to_vec(), None)?;
        m.run()
    }

    fn info(&mut self, func: &Arc<Function>) -> Arc<FnInfo> {
        let key = Arc::as_ptr(func) as usize;
        self.infos.entry(key).or_insert_with(|| (func.clone(), Arc::new(FnInfo::new(func)))).1.clone()
    }
}

/// Calls the global `name` of `module` on `args` (random seed 0).
pub fn eval_function(module: &Module, name: &str, args: &[Value]) -> Result<Value, EvalError> {
    Interpreter::new(module).call(name, args)
}

/// Evaluates node `node` of `func` with no variables bound and no globals defined, e.g. a call
/// whose arguments are constants. A free variable or a global reference is an error.
pub fn eval_closed(func: &Function, node: NodeId) -> Result<Value, EvalError> {
    let module = Module::new();
    let mut interp = Interpreter::new(&module);
    let err = |message: String| EvalError { function: "<closed>".into(), node: Some(node), message };
    if node.index() >= func.num_nodes() {
        return Err(err(format!("node {node} does not exist")));
    }
    if !func.is_well_formed() {
        return Err(err("the function is malformed (an id or index out of range); run the verifier".into()));
    }
    let mut m = Machine::new(&mut interp);
    let mut walk = Walker::new();
    walk.start(node);
    m.frames.push(Frame {
        func: FuncRef::Borrowed(func),
        name: "<closed>".into(),
        info: Arc::new(FnInfo::for_subtree(func, node)),
        vars: HashMap::new(),
        ret_ty: None,
        walk,
    });
    m.run()
}

/// Runs operator `op`'s kernel on `args` after checking arity and attributes (random seed 0).
/// Returns one tensor per result field.
pub fn eval_call(op: OpId, attrs: &Attrs, args: &[Tensor]) -> Result<Vec<Tensor>, EvalError> {
    let mut ctx = KernelCtx::seeded(0);
    run_kernel(op, attrs, args, &mut ctx).map_err(|message| EvalError { function: "<op>".into(), node: None, message })
}

/// One call, through the operators' one evaluation path ([`op::evaluate`]) with a run's limits.
fn run_kernel(op: OpId, attrs: &Attrs, args: &[Tensor], ctx: &mut KernelCtx) -> Result<Vec<Tensor>, String> {
    op::evaluate(op, attrs, args, op::EvalLimits::RUN, ctx).map(|e| e.results).map_err(|e| e.to_string())
}

/// The evaluation state of one top-level call: explicit value and frame stacks; each frame
/// walks its expression with a [`Walker`] whose hooks are the [`Machine`]'s.
struct Machine<'i, 'm, 'f> {
    interp: &'i mut Interpreter<'m>,
    values: Vec<Value>,
    frames: Vec<Frame<'f>>,
    /// For each `if` whose `Then` branch was decided, whether it was taken (read back at
    /// its `Else`).
    taken: Vec<bool>,
    /// Walkers of returned frames, reused by the next calls.
    spare: Vec<Walker>,
}

impl<'i, 'm, 'f> Machine<'i, 'm, 'f> {
    fn new(interp: &'i mut Interpreter<'m>) -> Self {
        Machine { interp, values: Vec::new(), frames: Vec::new(), taken: Vec::new(), spare: Vec::new() }
    }

    fn error(&self, node: Option<NodeId>, message: impl Into<String>) -> EvalError {
        let function = self.frames.last().map_or_else(String::new, |f| f.name.to_string());
        EvalError { function, node, message: message.into() }
    }

    fn pop_n(&mut self, n: usize, node: NodeId) -> Result<Vec<Value>, EvalError> {
        match self.values.len().checked_sub(n) {
            Some(at) => Ok(self.values.split_off(at)),
            None => Err(self.error(Some(node), "internal error: value stack underflow")),
        }
    }

    fn pop(&mut self, node: NodeId) -> Result<Value, EvalError> {
        self.values.pop().ok_or_else(|| self.error(Some(node), "internal error: value stack underflow"))
    }

    fn run(mut self) -> Result<Value, EvalError> {
        while let Some(top) = self.frames.len().checked_sub(1) {
            let frame = &mut self.frames[top];
            let func = frame.func.share();
            let mut walk = std::mem::take(&mut frame.walk);
            let flow = walk.run(func.get(), &mut self);
            match flow {
                // The frame's expression is evaluated: leave the frame.
                ControlFlow::Continue(()) => {
                    self.spare.push(walk);
                    self.ret()?;
                }
                // A call pushed a frame above this one, which resumes when that returns.
                ControlFlow::Break(Stop::Call) => self.frames[top].walk = walk,
                ControlFlow::Break(Stop::Error(e)) => return Err(e),
            }
        }
        match (self.values.pop(), self.values.is_empty()) {
            (Some(v), true) => Ok(v),
            _ => Err(self.error(None, "internal error: unbalanced value stack")),
        }
    }

    fn frame(&self) -> &Frame<'f> {
        // Tasks only run inside a frame: every entry point pushes one first.
        self.frames.last().expect("a task runs inside a frame")
    }

    fn bind(&mut self, var: NodeId, v: Value) {
        let Some(frame) = self.frames.last_mut() else { return };
        let uses = frame.info.uses.get(var.index()).copied().unwrap_or(0);
        if uses > 0 {
            frame.vars.insert(var, (v, uses));
        } else {
            frame.vars.remove(&var);
        }
    }

    fn read_var(&mut self, var: NodeId) -> Result<Value, EvalError> {
        let Some(frame) = self.frames.last_mut() else {
            return Err(self.error(Some(var), "internal error: no frame"));
        };
        match frame.vars.get_mut(&var) {
            Some((v, n)) if *n > 1 => {
                *n -= 1;
                Ok(v.clone())
            }
            // The last read moves the value out, so a chain of bindings keeps only live values.
            Some(_) => match frame.vars.remove(&var) {
                Some((v, _)) => Ok(v),
                None => Err(self.error(Some(var), "internal error: lost variable")),
            },
            None => {
                let name = frame.func.get().name_of(var).unwrap_or("?").to_string();
                Err(self.error(Some(var), format!("unbound variable %{name}")))
            }
        }
    }

    /// The value of atom `id`, onto the value stack.
    fn atom(&mut self, id: NodeId, kind: &ExprKind) -> Result<(), EvalError> {
        let func = self.frame().func.get();
        match *kind {
            ExprKind::Var { .. } => {
                let v = self.read_var(id)?;
                self.values.push(v);
            }
            ExprKind::Global { name } => {
                let name: Arc<str> = func.sym(name).into();
                if !self.interp.module.contains(&name) && self.interp.module.get_prim(&name).is_none() {
                    return Err(self.error(Some(id), format!("unknown global @{name}")));
                }
                self.values.push(Value::Func(FuncValue::Global(name)));
            }
            ExprKind::Const { idx } => {
                let t = func.constant(idx).materialize().map_err(|e| self.error(Some(id), e.to_string()))?;
                self.values.push(Value::Tensor(t));
            }
            _ => return Err(self.error(Some(id), "internal error: not an atom")),
        }
        Ok(())
    }

    fn capture(&mut self, id: NodeId, idx: ClosureIdx) -> Result<Value, EvalError> {
        let frame = self.frames.last_mut().ok_or_else(|| EvalError {
            function: String::new(),
            node: Some(id),
            message: "internal error: no frame".into(),
        })?;
        // Closures outlive the evaluation, so they need a shared handle on their arena.
        let func = match &frame.func {
            FuncRef::Shared(f) => f.clone(),
            FuncRef::Borrowed(f) => {
                let shared = Arc::new((*f).clone());
                frame.func = FuncRef::Shared(shared.clone());
                shared
            }
        };
        let free = frame.info.free.get(&idx.0).cloned().unwrap_or_else(|| Arc::from(Vec::new()));
        let owner = frame.name.clone();
        let mut env = Vec::with_capacity(free.len());
        for &v in free.iter() {
            // A variable bound later (e.g. the closure's own name) is not captured; reading it
            // inside the closure is an "unbound variable" error.
            if self.frame().vars.contains_key(&v) {
                env.push((v, self.read_var(v)?));
            }
        }
        Ok(Value::Func(FuncValue::Closure(Arc::new(ClosureValue { func, owner, idx, env }))))
    }

    /// `call_tir(@prim, args…)`: runs the PrimFunc on the arguments (tensors for buffer
    /// parameters, rank-0 tensors for scalar ones) and returns its output buffer (a tuple of
    /// them when it has several: the type relation checked their count).
    fn call_tir(&mut self, id: NodeId, vals: Vec<Value>) -> Result<Value, EvalError> {
        let mut vals = vals.into_iter();
        let name = match vals.next() {
            Some(Value::Func(FuncValue::Global(ref name))) => name.clone(),
            _ => return Err(self.error(Some(id), "the first argument of `call_tir` must be a PrimFunc `@name`")),
        };
        let Some(prim) = self.interp.module.get_prim(&name).cloned() else {
            return Err(self.error(Some(id), format!("`call_tir` calls @{name}, which is not a PrimFunc")));
        };
        let mut args = Vec::new();
        for (i, (v, p)) in vals.zip(prim.params().iter()).enumerate() {
            let Value::Tensor(t) = &v else {
                let msg = format!("argument {} of `call_tir` must be a tensor, got {}", i + 1, v.describe());
                return Err(self.error(Some(id), msg));
            };
            args.push(match p {
                crate::tir::Param::Buf(_) => prim::PrimArg::Buffer(t.clone()),
                crate::tir::Param::Var(v) => {
                    let dtype = prim.var(*v).ty.dtype;
                    let value = t.to_f64s().first().copied().ok_or_else(|| {
                        self.error(Some(id), format!("argument {} of `call_tir` must be a scalar", i + 1))
                    })?;
                    prim::PrimArg::Scalar(if dtype.is_float() {
                        prim::PrimScalar::Float(value)
                    } else {
                        prim::PrimScalar::Int(value as i64)
                    })
                }
            });
        }
        let outs = prim::run_prim_func(&name, &prim, args).map_err(|e| self.error(Some(id), e.message))?;
        match <[Tensor; 1]>::try_from(outs) {
            Ok([t]) => Ok(Value::Tensor(t)),
            Err(outs) if outs.is_empty() => Err(self.error(Some(id), format!("@{name} has no output buffer"))),
            Err(outs) => Ok(Value::Tuple(outs.into_iter().map(Value::Tensor).collect())),
        }
    }

    fn finish(&mut self, id: NodeId) -> Result<(), EvalError> {
        let kind = *self.frame().func.get().kind(id);
        match kind {
            ExprKind::Call { op, args, .. } if op::get(op).name == "call_tir" => {
                let vals = self.pop_n(args.len as usize, id)?;
                let v = self.call_tir(id, vals)?;
                self.values.push(v);
            }
            ExprKind::Call { op, attrs, args } => {
                let n = args.len as usize;
                let vals = self.pop_n(n, id)?;
                let mut tensors = Vec::with_capacity(n);
                for (i, v) in vals.into_iter().enumerate() {
                    // `Value` has a `Drop`, so its tensor is shared out (a reference count).
                    match &v {
                        Value::Tensor(t) => tensors.push(t.clone()),
                        other => {
                            let name = op::get(op).name;
                            let msg =
                                format!("argument {} of `{name}` must be a tensor, got {}", i + 1, other.describe());
                            return Err(self.error(Some(id), msg));
                        }
                    }
                }
                let attrs = self.frame().func.get().call_attrs(attrs).clone();
                let out =
                    run_kernel(op, &attrs, &tensors, &mut self.interp.ctx).map_err(|m| self.error(Some(id), m))?;
                let v = if op::get(op).tuple_result {
                    Value::Tuple(out.into_iter().map(Value::Tensor).collect())
                } else {
                    out.into_iter().next().map(Value::Tensor).ok_or_else(|| self.error(Some(id), "no result"))?
                };
                self.values.push(v);
            }
            ExprKind::Tuple { fields } => {
                let vals = self.pop_n(fields.len as usize, id)?;
                self.values.push(Value::Tuple(vals.into()));
            }
            ExprKind::Proj { index, .. } => {
                let v = self.pop(id)?;
                let field = match &v {
                    Value::Tuple(fields) => fields.get(index as usize).cloned().ok_or_else(|| {
                        self.error(Some(id), format!("tuple of {} values has no field {index}", fields.len()))
                    })?,
                    other => {
                        return Err(self.error(Some(id), format!("cannot project .{index} of {}", other.describe())))
                    }
                };
                self.values.push(field);
            }
            ExprKind::Apply { args, .. } => {
                let args = self.pop_n(args.len as usize, id)?;
                match &self.pop(id)? {
                    Value::Func(f) => self.enter(f.clone(), args, Some(id))?,
                    other => return Err(self.error(Some(id), format!("cannot call {}", other.describe()))),
                }
            }
            _ => return Err(self.error(Some(id), "internal error: nothing to finish")),
        }
        Ok(())
    }

    /// Whether the `Then` branch of `if` node `id` is taken, from the condition on the stack.
    fn taken(&mut self, id: NodeId) -> Result<bool, EvalError> {
        match &self.pop(id)? {
            Value::Tensor(t) if t.len() == 1 => Ok(t.to_f64s().first().is_some_and(|&v| v != 0.0)),
            other => Err(self.error(Some(id), format!("condition must be a scalar tensor, got {}", other.describe()))),
        }
    }

    /// Pushes a frame for a call of `callee`, its walk started at the body.
    fn enter(&mut self, callee: FuncValue, args: Vec<Value>, at: Option<NodeId>) -> Result<(), EvalError> {
        if self.frames.len() >= self.interp.max_call_depth {
            return Err(self.error(at, format!("call depth exceeded (limit {})", self.interp.max_call_depth)));
        }
        let (func, name, params, body, ret_ty, env) = match &callee {
            FuncValue::Global(name) => {
                let Some(func) = self.interp.module.get(name) else {
                    return Err(self.error(at, format!("unknown global @{name}")));
                };
                let f = func.clone();
                if !f.is_well_formed() {
                    return Err(
                        self.error(at, format!("@{name} is malformed (an id or index out of range); run the verifier"))
                    );
                }
                let params = f.params().to_vec();
                let (body, ret) = (f.body(), f.ret_ty().cloned());
                (f, name.clone(), params, body, ret, Vec::new())
            }
            FuncValue::Closure(c) => {
                let cl = c.func.closure(c.idx);
                let params = c.func.ids(cl.params).to_vec();
                (c.func.clone(), c.owner.clone(), params, cl.body, cl.ret_ty.clone(), c.env.clone())
            }
        };
        let what = match &callee {
            FuncValue::Global(n) => format!("@{n}"),
            FuncValue::Closure(_) => "closure".to_string(),
        };
        let info = self.interp.info(&func);
        let err = |message: String| EvalError { function: name.to_string(), node: at, message };
        if args.len() != params.len() {
            return Err(err(format!("{what} takes {} arguments, got {}", params.len(), args.len())));
        }
        for (i, (&p, v)) in params.iter().zip(&args).enumerate() {
            if let Some(ty) = func.ty(p) {
                check_value(v, ty).map_err(|m| err(format!("argument {} of {what}: {m}", i + 1)))?;
            }
        }
        let mut walk = self.spare.pop().unwrap_or_default();
        walk.start(body);
        self.frames.push(Frame { func: FuncRef::Shared(func), name, info, vars: HashMap::new(), ret_ty, walk });
        for (var, v) in env.into_iter().chain(params.into_iter().zip(args)) {
            self.bind(var, v);
        }
        Ok(())
    }

    fn ret(&mut self) -> Result<(), EvalError> {
        let frame = self.frame();
        if let (Some(ty), Some(v)) = (&frame.ret_ty, self.values.last()) {
            check_value(v, ty).map_err(|m| self.error(None, format!("result: {m}")))?;
        }
        self.frames.pop();
        Ok(())
    }
}

/// Evaluation as a walk: atoms push their values, a compound node combines its operands'
/// values at its exit, a binding binds the value on top, an `if` walks only the taken branch,
/// a nested function is not walked but captured, and a call stops the walk until the callee
/// returns.
impl WalkHooks for Machine<'_, '_, '_> {
    type Break = Stop;

    fn atom(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Stop> {
        self.atom(id, kind).map_err(Stop::from).into_flow()
    }

    fn enter(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Stop, Enter> {
        match *kind {
            ExprKind::Func { idx } => match self.capture(id, idx) {
                Ok(v) => {
                    self.values.push(v);
                    ControlFlow::Continue(Enter::Skip)
                }
                Err(e) => ControlFlow::Break(Stop::Error(e)),
            },
            _ => ControlFlow::Continue(Enter::Descend),
        }
    }

    fn exit(&mut self, id: NodeId, kind: &ExprKind) -> ControlFlow<Stop> {
        match kind {
            // The value of the branch taken, or of the result, is on the stack.
            ExprKind::If { .. } | ExprKind::Block { .. } => ControlFlow::Continue(()),
            ExprKind::Apply { .. } => match self.finish(id) {
                Ok(()) => ControlFlow::Break(Stop::Call),
                Err(e) => ControlFlow::Break(Stop::Error(e)),
            },
            _ => self.finish(id).map_err(Stop::from).into_flow(),
        }
    }

    fn bind(&mut self, var: NodeId, _: NodeId) -> ControlFlow<Stop> {
        match self.pop(var) {
            Ok(v) => {
                self.bind(var, v);
                ControlFlow::Continue(())
            }
            Err(e) => ControlFlow::Break(Stop::Error(e)),
        }
    }

    fn enter_branch(&mut self, if_: NodeId, branch: Branch) -> ControlFlow<Stop, Enter> {
        let take = match branch {
            Branch::Then => match self.taken(if_) {
                Ok(t) => {
                    self.taken.push(t);
                    t
                }
                Err(e) => return ControlFlow::Break(Stop::Error(e)),
            },
            Branch::Else => !self.taken.pop().unwrap_or(true),
        };
        ControlFlow::Continue(if take { Enter::Descend } else { Enter::Skip })
    }

    fn malformed(&mut self, at: NodeId) -> ControlFlow<Stop> {
        ControlFlow::Break(Stop::Error(self.error(Some(at), "node does not exist")))
    }
}

/// `Ok` continues a walk, `Err` stops it.
trait IntoFlow<B> {
    fn into_flow(self) -> ControlFlow<B>;
}

impl<B> IntoFlow<B> for Result<(), B> {
    #[inline]
    fn into_flow(self) -> ControlFlow<B> {
        match self {
            Ok(()) => ControlFlow::Continue(()),
            Err(b) => ControlFlow::Break(b),
        }
    }
}

/// Checks `value` against `ty` (without recursion on the type's depth).
fn check_value(value: &Value, ty: &Type) -> Result<(), String> {
    let mut stack = vec![(value, ty)];
    while let Some((v, t)) = stack.pop() {
        match (v, t.kind()) {
            (Value::Tensor(x), TypeKind::Tensor(tt)) => {
                let shape_ok = x.shape().len() == tt.shape.len()
                    && x.shape().iter().zip(tt.shape.iter()).all(|(&a, &b)| a as u64 == b);
                if !shape_ok || x.dtype() != tt.dtype {
                    return Err(format!("expected {t}, got {}", x.ty()));
                }
            }
            (Value::Tuple(fields), TypeKind::Tuple(types)) if fields.len() == types.len() => {
                stack.extend(fields.iter().zip(types.iter()));
            }
            (Value::Func(_), TypeKind::Func(_)) => {}
            (v, _) => return Err(format!("expected {t}, got {}", v.describe())),
        }
    }
    Ok(())
}

/// Deepest tuple nesting [`assert_values_close`] and [`random_args`] accept.
const MAX_VALUE_DEPTH: usize = 1000;

/// Compares two values: tensors elementwise with `|a - b| <= atol + rtol * |b|` (NaN equals
/// NaN, infinities must match exactly), tuples field by field, globals by name. Closures are
/// equal only if they are the same closure value. The error says where they differ.
pub fn assert_values_close(a: &Value, b: &Value, rtol: f64, atol: f64) -> Result<(), String> {
    let mut stack = vec![(a, b, String::new(), 0usize)];
    while let Some((a, b, path, depth)) = stack.pop() {
        let at = if path.is_empty() { "value".to_string() } else { format!("field {path}") };
        if depth > MAX_VALUE_DEPTH {
            return Err(format!("{at}: tuples nested deeper than {MAX_VALUE_DEPTH}"));
        }
        match (a, b) {
            (Value::Tensor(x), Value::Tensor(y)) => {
                if x.dtype() != y.dtype() || x.shape() != y.shape() {
                    return Err(format!("{at}: {} vs {}", x.ty(), y.ty()));
                }
                for (i, (p, q)) in x.to_f64s().into_iter().zip(y.to_f64s()).enumerate() {
                    let close = (p.is_nan() && q.is_nan()) || p == q || (p - q).abs() <= atol + rtol * q.abs();
                    if !close {
                        return Err(format!("{at}: element {i} differs: {p} vs {q}"));
                    }
                }
            }
            (Value::Tuple(x), Value::Tuple(y)) if x.len() == y.len() => {
                for (i, (p, q)) in x.iter().zip(y.iter()).enumerate() {
                    let sub = if path.is_empty() { format!(".{i}") } else { format!("{path}.{i}") };
                    stack.push((p, q, sub, depth + 1));
                }
            }
            (Value::Func(FuncValue::Global(x)), Value::Func(FuncValue::Global(y))) if x == y => {}
            (Value::Func(FuncValue::Closure(x)), Value::Func(FuncValue::Closure(y))) if Arc::ptr_eq(x, y) => {}
            (x, y) => return Err(format!("{at}: {} vs {}", x.describe(), y.describe())),
        }
    }
    Ok(())
}

/// Random arguments for `func` from its parameter annotations: floats uniform in [-1, 1),
/// integers in [-5, 5], bools fair coins, tuples field by field. An unannotated or
/// function-typed parameter, or a tensor too large to materialize, is an error.
pub fn random_args(func: &Function, seed: u64) -> Result<Vec<Value>, EvalError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let err = |p: NodeId, message: String| EvalError { function: "<args>".into(), node: Some(p), message };
    func.params()
        .iter()
        .map(|&p| {
            let ty = func.ty(p).ok_or_else(|| err(p, "parameter has no type annotation".into()))?;
            random_value(ty, &mut rng, 0).map_err(|m| err(p, m))
        })
        .collect()
}

fn random_value(ty: &Type, rng: &mut ChaCha8Rng, depth: usize) -> Result<Value, String> {
    if depth > MAX_VALUE_DEPTH {
        return Err(format!("type nested deeper than {MAX_VALUE_DEPTH}"));
    }
    match ty.kind() {
        TypeKind::Tensor(t) => {
            let n = crate::op::kernels::element_count(&t.shape).map_err(|e| e.to_string())?;
            let vals: Vec<f64> = (0..n)
                .map(|_| match t.dtype {
                    d if d.is_float() => rng.gen_range(-1.0..1.0),
                    d if d.is_int() => rng.gen_range(-5i32..=5) as f64,
                    d if d.is_uint() => rng.gen_range(0i32..=10) as f64,
                    _ => rng.gen_bool(0.5) as u8 as f64,
                })
                .collect();
            Tensor::from_f64s(&t.shape, t.dtype, &vals).map(Value::Tensor).map_err(|e| e.to_string())
        }
        TypeKind::Tuple(fields) => fields
            .iter()
            .map(|f| random_value(f, rng, depth + 1))
            .collect::<Result<Vec<_>, _>>()
            .map(|v| Value::Tuple(v.into())),
        TypeKind::Func(_) => Err(format!("cannot make a random value of function type {ty}")),
    }
}
