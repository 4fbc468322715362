//! The importer's builder: emits passel operator calls as let-bindings of `@main`, typing each
//! call with its operator's type relation, and evaluates calls whose arguments are all small
//! constants with the operator's reference kernel instead (import-time constant folding),
//! through the operators' one evaluation path ([`op::evaluate`]): a call is folded only if
//! its arguments and results are within the fold limit (elements) and its estimated cost
//! ([`op::OpDef::cost`]) within [`op::DEFAULT_MAX_FOLD_COST`], the budget FoldConstant uses by
//! default, so a hostile model cannot make import compute for long; a fold the kernel refuses
//! as too large stays a call.

use std::sync::Arc;

use super::EmitError;
use crate::ir::{Attrs, Constant, Function, FunctionBuilder, NodeId, OpId, TensorError, TensorType, Type};
use crate::op::{self, KernelCtx};

/// An ONNX value during import: a constant known at import, or a variable of `@main`.
#[derive(Clone, Debug)]
pub(super) enum Val {
    /// Known at import.
    Const(Arc<Constant>),
    /// A parameter or let-bound variable.
    Node {
        /// The variable.
        id: NodeId,
        /// Its type.
        ty: TensorType,
    },
}

impl Val {
    /// The value's tensor type.
    pub(super) fn ty(&self) -> TensorType {
        match self {
            Val::Const(c) => c.tensor_type(),
            Val::Node { ty, .. } => ty.clone(),
        }
    }

    /// The value's shape.
    pub(super) fn shape(&self) -> Vec<u64> {
        self.ty().shape.to_vec()
    }

    /// The value's rank.
    pub(super) fn rank(&self) -> usize {
        self.ty().shape.len()
    }

    /// The constant, if known at import.
    pub(super) fn as_const(&self) -> Option<&Arc<Constant>> {
        match self {
            Val::Const(c) => Some(c),
            Val::Node { .. } => None,
        }
    }
}

/// The bindings of an enclosing block while a nested one is built ([`Emitter::open_block`]).
pub(super) struct Block(Vec<(NodeId, NodeId)>);

/// The type of a value with fields `fields`: the tensor type of one field, else a tuple.
pub(super) fn fields_type(fields: &[TensorType]) -> Type {
    match fields {
        [one] => Type::from(one.clone()),
        _ => Type::tuple(fields.iter().cloned().map(Type::from).collect::<Vec<_>>()),
    }
}

/// Builds `@main`.
pub(super) struct Emitter {
    b: FunctionBuilder,
    bindings: Vec<(NodeId, NodeId)>,
    kctx: KernelCtx,
    fold_limit: u64,
    /// Time steps unrolled so far by recurrent layers (`ops/rnn.rs`), over the whole model.
    unrolled_steps: u64,
}

impl Emitter {
    pub(super) fn new(fold_limit: u64) -> Emitter {
        Emitter {
            b: FunctionBuilder::new(),
            bindings: Vec::new(),
            kctx: KernelCtx::seeded(0),
            fold_limit,
            unrolled_steps: 0,
        }
    }

    /// Counts `steps` more unrolled time steps of a recurrent layer. Refused, with the count
    /// so far, when the model's total would exceed `max`.
    pub(super) fn unroll(&mut self, steps: u64, max: u64) -> Result<(), u64> {
        match self.unrolled_steps.checked_add(steps) {
            Some(total) if total <= max => {
                self.unrolled_steps = total;
                Ok(())
            }
            _ => Err(self.unrolled_steps),
        }
    }

    /// The folding bound (elements).
    pub(super) fn fold_limit(&self) -> u64 {
        self.fold_limit
    }

    /// A parameter of `@main`.
    pub(super) fn param(&mut self, name: &str, ty: TensorType) -> NodeId {
        self.b.var(name, Some(Type::from(ty)))
    }

    /// The node to use `v` as an operand.
    fn atom(&mut self, v: &Val) -> NodeId {
        match v {
            Val::Const(c) => self.b.constant(c.clone()),
            Val::Node { id, .. } => *id,
        }
    }

    /// Evaluates a call of `op` whose arguments are all constants ([`op::evaluate`], within the
    /// fold limit and the folding cost budget); `None` when the call stays a call (an argument
    /// is not a constant, a limit refuses it, or its kernel finds it too large now).
    fn fold(&mut self, op: OpId, args: &[&Val], attrs: &Attrs) -> Result<Option<Vec<Val>>, EmitError> {
        let tys: Vec<Type> = args.iter().map(|a| Type::from(a.ty())).collect();
        let mut known = Vec::with_capacity(args.len());
        for (a, ty) in args.iter().zip(&tys) {
            let Val::Const(c) = a else { return Ok(None) };
            known.push(op::Known { constant: c, ty });
        }
        let limits = op::EvalLimits::fold(self.fold_limit, op::DEFAULT_MAX_FOLD_COST);
        match op::evaluate(op, attrs, &known, limits, &mut self.kctx) {
            Ok(out) => Ok(Some(out.results.into_iter().map(|t| Val::Const(Arc::new(Constant::Dense(t)))).collect())),
            // Over a limit, or too large to evaluate now, is not an error of the model.
            Err(
                op::CallError::OverLimit(_) | op::CallError::Kernel(op::OpError::Tensor(TensorError::TooLarge { .. })),
            ) => Ok(None),
            Err(op::CallError::Kernel(e)) => Err(EmitError::Op(e)),
            Err(e) => Err(EmitError::Fold(e)),
        }
    }

    /// Calls operator `op` and returns its results (one per tuple field for tuple-valued
    /// operators). Errors are messages for the node being converted.
    pub(super) fn call_multi(
        &mut self,
        op: &str,
        args: &[&Val],
        attrs: Attrs,
        name: &str,
    ) -> Result<Vec<Val>, EmitError> {
        let id = op::lookup(op).ok_or_else(|| EmitError::NoOperator(op.to_string()))?;
        let def = op::get(id);
        def.check_attrs(&attrs).map_err(EmitError::Attrs)?;
        let arg_tys: Vec<Type> = args.iter().map(|a| Type::from(a.ty())).collect();
        let out_ty = (def.type_rel)(&arg_tys, &attrs)?;
        let result_tys: Vec<TensorType> = match (out_ty.as_tensor(), out_ty.as_tuple()) {
            (Some(t), _) => vec![t.clone()],
            (None, Some(fields)) => fields
                .iter()
                .map(|f| f.as_tensor().cloned().ok_or_else(|| result_error(op, "returns a nested tuple".into())))
                .collect::<Result<_, _>>()?,
            _ => return Err(result_error(op, format!("returns a {out_ty}, not tensors"))),
        };
        if let Some(folded) = self.fold(id, args, &attrs)? {
            return Ok(folded);
        }
        let arg_ids: Vec<NodeId> = args.iter().map(|a| self.atom(a)).collect();
        let call = self.b.call(id, &arg_ids, attrs);
        self.b.set_ty(call, Some(out_ty.clone()));
        if !def.tuple_result && result_tys.len() != 1 {
            return Err(result_error(op, "returns no value".into()));
        }
        Ok(self.bind(call, out_ty, result_tys, def.tuple_result, name))
    }

    /// Binds `expr` (of type `ty`) to a variable named `name` and returns its values: the
    /// tuple's fields, each bound to a variable of its own, when `tuple`, else the variable.
    fn bind(&mut self, expr: NodeId, ty: Type, fields: Vec<TensorType>, tuple: bool, name: &str) -> Vec<Val> {
        let var = self.b.var(name, Some(ty));
        self.bindings.push((var, expr));
        if !tuple {
            return fields.into_iter().map(|ty| Val::Node { id: var, ty }).collect();
        }
        let mut outs = Vec::with_capacity(fields.len());
        for (i, ty) in fields.into_iter().enumerate() {
            let proj = self.b.proj(var, i as u32);
            self.b.set_ty(proj, Some(Type::from(ty.clone())));
            let field = self.b.var(&format!("{name}_{i}"), Some(Type::from(ty.clone())));
            self.bindings.push((field, proj));
            outs.push(Val::Node { id: field, ty });
        }
        outs
    }

    /// The expression for `results` (a tuple when there are several) and its type.
    fn result(&mut self, results: &[Val]) -> (NodeId, Type) {
        let ids: Vec<NodeId> = results.iter().map(|r| self.atom(r)).collect();
        let tys: Vec<Type> = results.iter().map(|r| Type::from(r.ty())).collect();
        if ids.len() == 1 {
            (ids[0], tys[0].clone())
        } else {
            let t = self.b.tuple(&ids);
            let ty = Type::tuple(tys);
            self.b.set_ty(t, Some(ty.clone()));
            (t, ty)
        }
    }

    /// Starts a nested block (an `if` branch): bindings go to it until [`Emitter::close_block`]
    /// is given what this returns.
    pub(super) fn open_block(&mut self) -> Block {
        Block(std::mem::take(&mut self.bindings))
    }

    /// Ends the block that `outer` opened, with `results` as its value (a tuple when there are
    /// several), and returns the block.
    pub(super) fn close_block(&mut self, outer: Block, results: &[Val]) -> NodeId {
        let (result, ty) = self.result(results);
        let inner = std::mem::replace(&mut self.bindings, outer.0);
        if inner.is_empty() {
            return result;
        }
        let block = self.b.block(&inner, result);
        if self.b.ty(block).is_none() {
            self.b.set_ty(block, Some(ty));
        }
        block
    }

    /// Binds `if (cond) then_ else else_` (blocks from [`Emitter::close_block`] whose values
    /// have types `fields`, a tuple when there are several) and returns its values. `cond` is
    /// a scalar bool.
    pub(super) fn if_(
        &mut self,
        cond: &Val,
        (then_, else_): (NodeId, NodeId),
        fields: Vec<TensorType>,
        name: &str,
    ) -> Vec<Val> {
        let c = self.atom(cond);
        let e = self.b.if_(c, then_, else_);
        let ty = fields_type(&fields);
        self.b.set_ty(e, Some(ty.clone()));
        let tuple = fields.len() != 1;
        self.bind(e, ty, fields, tuple, name)
    }

    /// Binds a call of global function `callee` on `args`, whose result has types `fields` (a
    /// tuple when there are several), and returns its values.
    pub(super) fn call_global(&mut self, callee: &str, args: &[Val], fields: Vec<TensorType>, name: &str) -> Vec<Val> {
        let ids: Vec<NodeId> = args.iter().map(|a| self.atom(a)).collect();
        let g = self.b.global(callee);
        let e = self.b.apply(g, &ids);
        let ty = fields_type(&fields);
        self.b.set_ty(e, Some(ty.clone()));
        let tuple = fields.len() != 1;
        self.bind(e, ty, fields, tuple, name)
    }

    /// Calls a single-result operator.
    pub(super) fn call(&mut self, op: &str, args: &[&Val], attrs: Attrs, name: &str) -> Result<Val, EmitError> {
        let mut outs = self.call_multi(op, args, attrs, name)?;
        if outs.len() != 1 {
            return Err(result_error(op, format!("returns {} values, expected one", outs.len())));
        }
        Ok(outs.remove(0))
    }

    /// Finishes `@main`: `params`, bindings in emission order (a topological order), and the
    /// results (a tuple when there are several).
    pub(super) fn finish(mut self, params: &[NodeId], results: &[Val]) -> Function {
        let (result, ret_ty) = self.result(results);
        let body = self.b.block(&self.bindings, result);
        if self.b.ty(body).is_none() {
            self.b.set_ty(body, Some(ret_ty.clone()));
        }
        self.b.finish(params, body, Some(ret_ty), Attrs::new())
    }
}

fn result_error(op: &str, what: String) -> EmitError {
    EmitError::Result { op: op.to_string(), what }
}
