//! `call_tir(@prim, args…, outputs=n)`: the graph level's call of a PrimFunc, destination
//! passing as in Relax. The arguments bind the PrimFunc's first parameters; its `n` (default 1)
//! remaining parameters are buffers the call allocates, and the call's value is that buffer's
//! contents, or a tuple of them when `n > 1` (Relax's `out_sinfo` list).
//!
//! The type relation reads the callee's type: a PrimFunc's graph type is
//! `fn(Tensor[…] per parameter) -> ()` (`PrimFunc::graph_type`; a scalar parameter is a rank-0
//! tensor). The kernel cannot run alone (it needs the module that holds the PrimFunc); the
//! interpreter runs the call itself, and FoldConstant leaves it unfolded.

use crate::ir::{Attrs, Tensor, Type, TypeKind};
use crate::op::{KernelCtx, OpError};

/// The callee's parameter types, checked against the arguments; the result is the type of the
/// last parameter, the output buffer.
pub(crate) fn call_tir_rel(args: &[Type], attrs: &Attrs) -> Result<Type, OpError> {
    let Some((callee, inputs)) = args.split_first() else {
        return Err(OpError::Type("`call_tir` takes the PrimFunc and its inputs".into()));
    };
    let TypeKind::Func(ft) = callee.kind() else {
        return Err(OpError::Type(format!(
            "the first argument of `call_tir` must be a PrimFunc, got a value of type {callee}"
        )));
    };
    if !matches!(ft.ret.kind(), TypeKind::Tuple(f) if f.is_empty()) {
        return Err(OpError::Type(format!(
            "the first argument of `call_tir` must be a PrimFunc (returning `()`), got a function returning {}",
            ft.ret
        )));
    }
    let n_out = super::attr_int("call_tir", attrs, "outputs", 1)?;
    if n_out < 1 {
        return Err(OpError::Type(format!("`call_tir` needs `outputs` >= 1, got {n_out}")));
    }
    let n_out = n_out as usize;
    if ft.params.len() != inputs.len() + n_out {
        return Err(OpError::Type(format!(
            "`call_tir` passes {} inputs to a PrimFunc of {} parameters: it needs one parameter per input and {} output buffer{}",
            inputs.len(),
            ft.params.len(),
            n_out,
            if n_out == 1 { "" } else { "s" }
        )));
    }
    for (i, (arg, param)) in inputs.iter().zip(ft.params.iter()).enumerate() {
        if arg != param {
            return Err(OpError::Type(format!(
                "argument {} of `call_tir` has type {arg}, where the PrimFunc's parameter {} is {param}",
                i + 1,
                i + 1
            )));
        }
    }
    let outs = &ft.params[inputs.len()..];
    for out in outs {
        if !matches!(out.kind(), TypeKind::Tensor(_)) {
            return Err(OpError::Type(format!(
                "the output parameters of a `call_tir` callee must be buffers, got {out}"
            )));
        }
    }
    Ok(if n_out == 1 { outs[0].clone() } else { Type::tuple(outs.to_vec()) })
}

/// Refuses: `call_tir` runs in the interpreter, which has the module.
pub(crate) fn call_tir(_args: &[Tensor], _attrs: &Attrs, _ctx: &mut KernelCtx) -> Result<Vec<Tensor>, OpError> {
    Err(OpError::Invalid("`call_tir` runs only in a module's interpreter (it needs the PrimFunc)".into()))
}
