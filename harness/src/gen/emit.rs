//! A small layer over [`FunctionBuilder`] for the generators: every computed value is bound to
//! a fresh, numbered variable (so each compound node has one user, as the verifier requires),
//! weights are seeded uniform fills, and nested blocks (if branches, nested function bodies)
//! collect their own bindings.

use passel_engine::ir::{AttrValue, Attrs, Constant, DType, Fill, Function, FunctionBuilder, NodeId, TensorType, Type};

use super::op;

/// A function under construction.
pub(crate) struct Emit {
    pub(crate) b: FunctionBuilder,
    /// Bindings of the innermost open block; outer ones wait in `outer`.
    bindings: Vec<(NodeId, NodeId)>,
    outer: Vec<Vec<(NodeId, NodeId)>>,
    n_vars: usize,
    /// Seeds of the fills of this function: a base derived from the function, plus a counter.
    seed: u64,
    n_fills: u64,
}

impl Emit {
    /// A new function whose fills derive their seeds from `seed`.
    pub(crate) fn new(seed: u64) -> Emit {
        Emit { b: FunctionBuilder::new(), bindings: Vec::new(), outer: Vec::new(), n_vars: 0, seed, n_fills: 0 }
    }

    /// A parameter `%name: ty`.
    pub(crate) fn param(&mut self, name: &str, ty: Type) -> NodeId {
        self.b.var(name, Some(ty))
    }

    /// Binds `value` to a fresh variable `%{prefix}{n}` and returns the variable.
    pub(crate) fn bind(&mut self, prefix: &str, value: NodeId) -> NodeId {
        self.n_vars += 1;
        let var = self.b.var(&format!("{prefix}{}", self.n_vars), None);
        self.bindings.push((var, value));
        var
    }

    /// `let %vN = op(args, attrs)`.
    pub(crate) fn call(&mut self, name: &str, args: &[NodeId], attrs: Attrs) -> NodeId {
        let value = self.b.call(op(name), args, attrs);
        self.bind("v", value)
    }

    /// `let %vN = op(args)`.
    pub(crate) fn call0(&mut self, name: &str, args: &[NodeId]) -> NodeId {
        self.call(name, args, Attrs::new())
    }

    /// A scalar f32 constant (an atom, usable any number of times).
    pub(crate) fn scalar(&mut self, v: f32) -> NodeId {
        self.b.constant(Constant::scalar_f32(v))
    }

    /// A seeded `uniform<shape, f32>(seed, -scale, scale)` weight (an atom).
    pub(crate) fn weight(&mut self, shape: &[u64], scale: f64) -> NodeId {
        self.n_fills += 1;
        let seed = self.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(self.n_fills) >> 1;
        let ty = TensorType { shape: shape.into(), dtype: DType::F32 };
        self.b.constant(Constant::Fill { ty, fill: Fill::Uniform { seed, low: -scale, high: scale } })
    }

    /// A `full<shape, f32>(v)` constant (an atom).
    pub(crate) fn full(&mut self, shape: &[u64], v: f64) -> NodeId {
        let ty = TensorType { shape: shape.into(), dtype: DType::F32 };
        self.b.constant(Constant::Fill { ty, fill: Fill::Full(v) })
    }

    /// Opens a nested block: later bindings go to it until [`Emit::close`].
    pub(crate) fn open(&mut self) {
        self.outer.push(std::mem::take(&mut self.bindings));
    }

    /// Closes the innermost block with `result` and returns the block expression (`result`
    /// itself when the block bound nothing).
    pub(crate) fn close(&mut self, result: NodeId) -> NodeId {
        let inner = std::mem::replace(&mut self.bindings, self.outer.pop().unwrap_or_default());
        self.b.block(&inner, result)
    }

    /// Finishes the function with its parameters, result and declared result type.
    pub(crate) fn finish(mut self, params: &[NodeId], result: NodeId, ret: Type) -> Function {
        debug_assert!(self.outer.is_empty(), "unclosed nested block");
        let body = self.b.block(&self.bindings, result);
        self.b.finish(params, body, Some(ret), Attrs::new())
    }
}

/// `Attrs` with an integer-list attribute.
pub(crate) fn ints(key: &str, v: &[i64]) -> Attrs {
    Attrs::new().with(key, AttrValue::Ints(v.into()))
}

/// `Attrs` with an integer attribute.
pub(crate) fn int(key: &str, v: i64) -> Attrs {
    Attrs::new().with(key, AttrValue::Int(v))
}

/// The f32 tensor type of `shape`.
pub(crate) fn f32_ty(shape: &[u64]) -> Type {
    Type::tensor(shape.to_vec(), DType::F32)
}

/// A stream seed for item `i` of a generator seeded with `seed`, so item `i` is the same
/// whatever the item count.
pub(crate) fn item_seed(seed: u64, i: u64) -> u64 {
    seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ i
}
