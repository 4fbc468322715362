//! Evaluating one operator call on known arguments: the one path behind the interpreter
//! (`interp::eval_call` and every call it runs), FoldConstant and the ONNX importer's
//! folding. Each of them calls [`evaluate`] with its own [`EvalLimits`]; what they do with a
//! refusal (keep the call, report an error) is theirs.
//!
//! The one rule for sizes: when folding ([`EvalLimits::fold`]), no argument and no result
//! tensor may have more than `max_elements` elements, the call's estimated cost
//! ([`super::OpDef::cost`]) may not exceed `max_cost`, and its result tensors together may not
//! take more than `max_result_bytes` bytes; a stateful operator is never folded. All of it is
//! decided from types, before a constant is materialized or a kernel runs, so a hostile
//! model or program cannot make a compiler allocate or compute for long. A run
//! ([`EvalLimits::RUN`]) has no such limits: its kernels refuse tensors over
//! [`MAX_MATERIALIZED_ELEMENTS`] themselves, and a result larger than the memory left is an
//! error before the kernel allocates it.
//!
//! Order of the checks (it decides which refusal a caller sees): operator, stateful flag,
//! arity, attributes; argument sizes; the type relation; result sizes; cost; result bytes;
//! then the kernel, whose results must be the tensors the relation promised.

use crate::ir::{Attrs, Constant, OpId, Tensor, TensorError, TensorType, Type, MAX_MATERIALIZED_ELEMENTS};

use super::{KernelCtx, OpError};

/// An argument of an evaluated call: its type is read before its value, so that the limits
/// are checked before a constant is materialized.
pub trait Operand {
    /// The argument's type (a tensor type).
    fn ty(&self) -> Type;
    /// The argument's value.
    fn value(&self) -> Result<Tensor, TensorError>;
}

impl Operand for Tensor {
    fn ty(&self) -> Type {
        Tensor::ty(self)
    }

    fn value(&self) -> Result<Tensor, TensorError> {
        Ok(self.clone())
    }
}

/// A constant argument with its type (a caller that has the type at hand, e.g. from the
/// constant's node, saves building it again).
#[derive(Clone, Copy, Debug)]
pub struct Known<'a> {
    /// The value.
    pub constant: &'a Constant,
    /// Its type.
    pub ty: &'a Type,
}

impl Operand for Known<'_> {
    fn ty(&self) -> Type {
        self.ty.clone()
    }

    fn value(&self) -> Result<Tensor, TensorError> {
        self.constant.materialize()
    }
}

/// What [`evaluate`] may do (see the module docs for the rule).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EvalLimits {
    /// Most elements of any argument or result tensor.
    pub max_elements: u64,
    /// Highest estimated cost of the call ([`super::OpDef::cost`]).
    pub max_cost: u64,
    /// Most bytes of the result tensors together.
    pub max_result_bytes: u64,
    /// Whether a stateful operator is evaluated.
    pub stateful: bool,
}

impl EvalLimits {
    /// Running a program (the interpreter): every operator, any size the kernels accept.
    pub const RUN: EvalLimits =
        EvalLimits { max_elements: u64::MAX, max_cost: u64::MAX, max_result_bytes: u64::MAX, stateful: true };

    /// Folding at compile time: tensors of at most `max_elements` elements, calls of cost at
    /// most `max_cost`, no stateful operator, no bound on result bytes (FoldConstant sets
    /// one per function with [`EvalLimits::max_result_bytes`]).
    pub const fn fold(max_elements: u64, max_cost: u64) -> EvalLimits {
        EvalLimits { max_elements, max_cost, max_result_bytes: u64::MAX, stateful: false }
    }

    /// Whether sizes are bounded: then a call whose result type is unknown is refused.
    fn bounded(&self) -> bool {
        *self != EvalLimits::RUN
    }
}

/// The limit a refused call is over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// A stateful operator, when folding.
    Stateful,
    /// An argument or result with more than `max_elements` elements, or of unknown size.
    Elements,
    /// The estimated cost.
    Cost,
    /// The bytes of the results.
    Bytes,
}

/// Why a call was not evaluated.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// A limit keeps the call from being evaluated now; not an error of the program (a folding
    /// caller keeps the call).
    #[error("the call is over the {0:?} limit")]
    OverLimit(Limit),
    /// The call is wrong: an unknown operator, a wrong number of arguments, attributes that
    /// do not match the schema, types the relation rejects (when folding), results that are
    /// not what the relation promised, or a result larger than the memory left.
    #[error("{0}")]
    Invalid(String),
    /// The kernel refused the arguments (or an argument could not be materialized).
    #[error(transparent)]
    Kernel(#[from] OpError),
}

/// The results of an evaluated call.
#[derive(Debug)]
pub struct Evaluated {
    /// One tensor per result (per field of a tuple result).
    pub results: Vec<Tensor>,
    /// The call's type from the type relation (`None` only for a run whose relation failed
    /// and whose kernel succeeded anyway).
    pub ty: Option<Type>,
    /// Bytes of the result tensors.
    pub bytes: u64,
}

/// Evaluates a call of `op` with `attrs` on `args` within `limits`, with `ctx`'s random
/// stream for stateful operators. See the module docs for the rule and the order of checks.
pub fn evaluate<A: Operand>(
    op: OpId,
    attrs: &Attrs,
    args: &[A],
    limits: EvalLimits,
    ctx: &mut KernelCtx,
) -> Result<Evaluated, CallError> {
    let Some(def) = super::try_get(op) else {
        return Err(CallError::Invalid(format!("unknown operator id {}", op.0)));
    };
    if def.stateful && !limits.stateful {
        return Err(CallError::OverLimit(Limit::Stateful));
    }
    if !def.arity.accepts(args.len()) {
        let msg = format!("operator `{}` takes {} arguments, got {}", def.name, def.arity, args.len());
        return Err(CallError::Invalid(msg));
    }
    def.check_attrs(attrs).map_err(CallError::Invalid)?;
    let bounded = limits.bounded();
    let tys: Vec<Type> = args.iter().map(Operand::ty).collect();
    if bounded && !tys.iter().all(|t| within(t.as_tensor(), limits.max_elements)) {
        return Err(CallError::OverLimit(Limit::Elements));
    }
    let ty = match (def.type_rel)(&tys, attrs) {
        Ok(ty) => Some(ty),
        // Without a result type a call has no known size; a run lets the kernel report the
        // problem in its own words.
        Err(e) if bounded => return Err(CallError::Invalid(e.to_string())),
        Err(_) => None,
    };
    // The result tensors' types, when the relation gives tensors of the operator's shape.
    let fields: Option<Vec<&TensorType>> = ty.as_ref().and_then(|ty| match (ty.as_tensor(), ty.as_tuple()) {
        (Some(t), _) if !def.tuple_result => Some(vec![t]),
        (None, Some(fields)) if def.tuple_result => fields.iter().map(Type::as_tensor).collect(),
        _ => None,
    });
    let mut bytes = None;
    if bounded {
        let (Some(ty), Some(fields)) = (&ty, &fields) else {
            return Err(CallError::OverLimit(Limit::Elements));
        };
        if !fields.iter().all(|t| within(Some(t), limits.max_elements)) {
            return Err(CallError::OverLimit(Limit::Elements));
        }
        // Sizes do not bound compute (a max_pool2d window as large as its input is quartic).
        if limits.max_cost != u64::MAX && (def.cost)(&tys, attrs, ty) > limits.max_cost {
            return Err(CallError::OverLimit(Limit::Cost));
        }
        let total = fields.iter().try_fold(0u64, |acc, t| acc.checked_add(tensor_bytes(t)?));
        match total {
            Some(b) if b <= limits.max_result_bytes => bytes = Some(b),
            _ => return Err(CallError::OverLimit(Limit::Bytes)),
        }
    }
    if let Some(ty) = &ty {
        reserve_result(ty).map_err(|bytes| {
            CallError::Invalid(format!("cannot allocate {bytes} bytes for the result of `{}` ({ty})", def.name))
        })?;
    }
    let mut values = Vec::with_capacity(args.len());
    for a in args {
        values.push(a.value().map_err(OpError::Tensor)?);
    }
    let results = (def.kernel)(&values, attrs, ctx)?;
    drop(values);
    if !def.tuple_result && results.len() != 1 {
        return Err(CallError::Invalid(format!("operator `{}` returned {} results", def.name, results.len())));
    }
    if let Some(fields) = &fields {
        if results.len() != fields.len() || !results.iter().zip(fields).all(|(r, t)| has_type(r, t)) {
            return Err(CallError::Invalid(format!("`{}` kernel result does not match its type relation", def.name)));
        }
    }
    let bytes = bytes.unwrap_or_else(|| results.iter().map(|t| (t.len() * t.dtype().size_bytes()) as u64).sum());
    Ok(Evaluated { results, ty, bytes })
}

/// Whether `t` is a tensor type of at most `max` elements.
fn within(t: Option<&TensorType>, max: u64) -> bool {
    t.and_then(TensorType::num_elements).is_some_and(|n| n <= max)
}

fn tensor_bytes(t: &TensorType) -> Option<u64> {
    t.num_elements()?.checked_mul(t.dtype.size_bytes() as u64)
}

/// Whether tensor `t` has type `tt`.
fn has_type(t: &Tensor, tt: &TensorType) -> bool {
    t.dtype() == tt.dtype
        && t.shape().len() == tt.shape.len()
        && t.shape().iter().zip(tt.shape.iter()).all(|(&a, &b)| a as u64 == b)
}

/// Checks that memory for a call's result of type `ty` can be had right now, so that a result
/// larger than the memory left (under `ulimit -v`, a cgroup) is an error naming the call and
/// its size instead of an abort inside the kernel's allocation, which cannot report. The
/// reservation is released at once: a probe, not a guarantee (a kernel's scratch is not
/// counted), but the result dominates every kernel's memory. Returns the bytes asked for.
fn reserve_result(ty: &Type) -> Result<(), u64> {
    // A tensor above the materialization cap is the kernel's to refuse, with its own message.
    let Some(bytes) = result_bytes(ty) else { return Ok(()) };
    let Ok(n) = usize::try_from(bytes) else { return Err(bytes) };
    // Small results are not worth a probe.
    if n < (64 << 20) {
        return Ok(());
    }
    Vec::<u8>::new().try_reserve_exact(n).map_err(|_| bytes)
}

/// Bytes of the tensors in a value of type `ty` (0 for function types); `None` when a tensor
/// has more than [`MAX_MATERIALIZED_ELEMENTS`] elements.
fn result_bytes(ty: &Type) -> Option<u64> {
    if let Some(t) = ty.as_tensor() {
        let n = t.num_elements().filter(|&n| n <= MAX_MATERIALIZED_ELEMENTS)?;
        Some(n * t.dtype.size_bytes() as u64)
    } else if let Some(fields) = ty.as_tuple() {
        fields.iter().try_fold(0u64, |acc, f| Some(acc.saturating_add(result_bytes(f)?)))
    } else {
        Some(0)
    }
}

#[cfg(test)]
mod tests {

    use super::*;
    use crate::ir::DType;

    fn ctx() -> KernelCtx {
        KernelCtx::seeded(0)
    }

    fn op(name: &str) -> OpId {
        super::super::lookup(name).expect("registered")
    }

    fn f32s(shape: &[u64], n: usize) -> Tensor {
        Tensor::from_f64s(shape, DType::F32, &(0..n).map(|i| i as f64).collect::<Vec<_>>()).expect("shape matches")
    }

    #[test]
    fn evaluate_runs_a_call_and_reports_its_type_and_bytes() {
        let a = f32s(&[2, 3], 6);
        let out = evaluate(op("add"), &Attrs::new(), &[a.clone(), a], EvalLimits::fold(6, 1 << 20), &mut ctx())
            .expect("folds");
        assert_eq!(out.results.len(), 1);
        assert_eq!(out.ty, Some(Type::tensor(vec![2, 3], DType::F32)));
        assert_eq!(out.bytes, 24);
    }

    #[test]
    fn evaluate_refuses_what_is_over_the_folding_limits_before_running_the_kernel() {
        let a = f32s(&[2, 3], 6);
        let limit = |r: Result<Evaluated, CallError>| match r {
            Err(CallError::OverLimit(l)) => Some(l),
            _ => None,
        };
        let run = |limits| evaluate(op("add"), &Attrs::new(), &[a.clone(), a.clone()], limits, &mut ctx());
        assert_eq!(limit(run(EvalLimits::fold(5, u64::MAX))), Some(Limit::Elements));
        assert_eq!(limit(run(EvalLimits::fold(6, 1))), Some(Limit::Cost));
        let bytes = EvalLimits { max_result_bytes: 23, ..EvalLimits::fold(6, u64::MAX) };
        assert_eq!(limit(run(bytes)), Some(Limit::Bytes));
        // A result over the element limit: a broadcast of two small arguments.
        let (col, row) = (f32s(&[4, 1], 4), f32s(&[1, 4], 4));
        let out = evaluate(op("add"), &Attrs::new(), &[col, row], EvalLimits::fold(15, u64::MAX), &mut ctx());
        assert_eq!(limit(out), Some(Limit::Elements));
        // Stateful operators are run, never folded.
        let shape = Attrs::new();
        let out =
            evaluate::<Tensor>(op("random_uniform"), &shape, &[], EvalLimits::fold(1 << 20, u64::MAX), &mut ctx());
        assert_eq!(limit(out), Some(Limit::Stateful));
    }

    #[test]
    fn evaluate_reports_wrong_calls_with_the_operator_name() {
        let a = f32s(&[2], 2);
        let err =
            evaluate(op("relu"), &Attrs::new(), &[a.clone(), a.clone()], EvalLimits::RUN, &mut ctx()).unwrap_err();
        assert_eq!(err.to_string(), "operator `relu` takes 1 arguments, got 2");
        let mut attrs = Attrs::new();
        attrs.set("bogus", crate::ir::AttrValue::Int(1));
        let err = evaluate(op("relu"), &attrs, std::slice::from_ref(&a), EvalLimits::RUN, &mut ctx()).unwrap_err();
        assert!(err.to_string().contains("`bogus`"), "{err}");
        // Folding refuses types the relation rejects; a run lets the kernel say why.
        let b = f32s(&[3], 3);
        let folded = evaluate(op("add"), &Attrs::new(), &[a.clone(), b.clone()], EvalLimits::fold(9, 9), &mut ctx());
        assert!(matches!(folded, Err(CallError::Invalid(_))));
        let run = evaluate(op("add"), &Attrs::new(), &[a, b], EvalLimits::RUN, &mut ctx());
        assert!(matches!(run, Err(CallError::Kernel(_))), "{run:?}");
    }

    #[test]
    fn evaluate_materializes_known_constants_only_within_the_limits() {
        // A fill of 2^40 elements cannot be materialized; its size refuses it first.
        let huge = Constant::Fill {
            ty: TensorType { shape: Box::new([1 << 20, 1 << 20]), dtype: DType::F32 },
            fill: crate::ir::Fill::Full(1.0),
        };
        let ty = huge.ty();
        let arg = Known { constant: &huge, ty: &ty };
        let out = evaluate(op("relu"), &Attrs::new(), &[arg], EvalLimits::fold(1 << 20, u64::MAX), &mut ctx());
        assert!(matches!(out, Err(CallError::OverLimit(Limit::Elements))), "{out:?}");
        let out = evaluate(op("relu"), &Attrs::new(), &[arg], EvalLimits::RUN, &mut ctx());
        assert!(matches!(out, Err(CallError::Kernel(OpError::Tensor(TensorError::TooLarge { .. })))), "{out:?}");
    }
}
