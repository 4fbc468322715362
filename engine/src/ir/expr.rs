//! Expression nodes of a function's arena.
//!
//! Expressions are trees: a compound node has exactly one user. Only atoms — variables,
//! globals and constants — may be referenced from many places. Sharing a computed value is
//! spelled with a binding (`let %x = …;` inside a [`ExprKind::Block`]). This keeps printing,
//! equality and hashing linear, and makes a mutator's memo a plain `Vec` indexed by old id.

use super::ids::{AttrsIdx, ClosureIdx, ConstIdx, IdRange, NodeId, OpId, Sym};

/// The kind and operands of one node. Operands always have smaller ids than the node
/// (the arena is in post-order), so a forward loop over ids visits children first.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ExprKind {
    /// A local variable: a function parameter, a binding's variable or a nested function's
    /// parameter. Its type annotation, if any, is the node's type.
    Var {
        /// Name hint (names do not matter for equality).
        name: Sym,
    },
    /// A reference to a global function of the module (`@f`).
    Global {
        /// The global's name.
        name: Sym,
    },
    /// A constant tensor.
    Const {
        /// Index into [`super::Function::constant`].
        idx: ConstIdx,
    },
    /// An operator call `op(args…){attrs}`.
    Call {
        /// The operator.
        op: OpId,
        /// Its attributes.
        attrs: AttrsIdx,
        /// Arguments (in the extra table).
        args: IdRange,
    },
    /// A call of a function value: a global, a local variable or a nested function.
    Apply {
        /// The function called.
        callee: NodeId,
        /// Arguments.
        args: IdRange,
    },
    /// A tuple `(a, b, …)`.
    Tuple {
        /// Fields.
        fields: IdRange,
    },
    /// Tuple projection `t.0`.
    Proj {
        /// The tuple.
        tuple: NodeId,
        /// Field index.
        index: u32,
    },
    /// `if (cond) { … } else { … }`; only the taken branch is evaluated.
    If {
        /// Condition: a scalar bool tensor.
        cond: NodeId,
        /// Value when true.
        then_: NodeId,
        /// Value when false.
        else_: NodeId,
    },
    /// A nested function (closure); see [`super::Closure`].
    Func {
        /// Index into the function's closure table.
        idx: ClosureIdx,
    },
    /// A sequence of let-bindings followed by a result: `{ let %a = …; let %b = …; %b }`.
    /// Bindings are evaluated in order; each variable is visible in later bindings and the
    /// result.
    Block {
        /// `(var, value)` pairs flattened in the extra table: `2 * n` ids.
        bindings: IdRange,
        /// The block's value.
        result: NodeId,
    },
}

impl ExprKind {
    /// Whether this node is an atom that may be referenced from many places.
    pub fn is_atom(&self) -> bool {
        matches!(self, ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. })
    }
}

/// The index of a node's type in its function's type table (see [`super::Function::ty`]), or
/// [`TyIdx::NONE`] for an untyped node. An index means something only together with the
/// table of the function or builder the node belongs to: compare types through
/// [`super::Function::ty`], never by index (a table may hold equal types twice).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct TyIdx(pub(crate) u32);

impl TyIdx {
    /// The index of an untyped node.
    pub const NONE: TyIdx = TyIdx(u32::MAX);

    /// Whether the node has a type.
    #[inline]
    pub fn is_some(self) -> bool {
        self != TyIdx::NONE
    }

    /// Whether the node has no type.
    #[inline]
    pub fn is_none(self) -> bool {
        self == TyIdx::NONE
    }

    /// Position `i` of a type table that the caller builds for
    /// [`super::Function::with_type_table`].
    #[inline]
    pub fn new(i: u32) -> TyIdx {
        TyIdx(i)
    }

    /// The table position, or `None` for [`TyIdx::NONE`] (public form of `get`).
    #[inline]
    pub fn index(self) -> Option<usize> {
        self.get()
    }

    /// The table position, or `None` for [`TyIdx::NONE`].
    #[inline]
    pub(crate) fn get(self) -> Option<usize> {
        self.is_some().then_some(self.0 as usize)
    }
}

/// One arena slot: an expression and the index of its type (filled by parsing annotations or
/// InferType). Plain old data: copying or dropping an arena touches no reference counts.
#[derive(Clone, Copy, Debug)]
pub struct Node {
    /// What the node is.
    pub kind: ExprKind,
    /// Its type's index in the function's type table; read the type with
    /// [`super::Function::ty`].
    pub ty: TyIdx,
}

/// A byte range in source text.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct Span {
    /// First byte.
    pub start: u32,
    /// One past the last byte.
    pub end: u32,
}

impl Span {
    /// A span from byte offsets.
    pub fn new(start: usize, end: usize) -> Span {
        Span { start: start as u32, end: end as u32 }
    }
}
