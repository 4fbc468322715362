//! The data of a PrimFunc: ids, types, expressions, statements, variables, buffers.

use std::fmt;
use std::sync::Arc;

use crate::ir::{Attrs, DType, Span, Type};

/// The most lanes a vector type may have.
pub const MAX_LANES: u16 = 1024;

macro_rules! id {
    ($(#[$m:meta])* $name:ident, $prefix:literal) => {
        $(#[$m])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
        pub struct $name(pub u32);

        impl $name {
            /// The id as an index into its arena.
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

id!(
    /// An expression of a PrimFunc's expression arena.
    PExprId,
    "e"
);
id!(
    /// A statement of a PrimFunc's statement arena.
    StmtId,
    "s"
);
id!(
    /// A variable of a PrimFunc (parameter, loop variable, `let`).
    VarId,
    "v"
);
id!(
    /// A buffer of a PrimFunc (parameter, `alloc`, `decl`).
    BufId,
    "b"
);

/// A range `start..start + len` of a PrimFunc's operand pool (expression ids) or statement
/// list pool (statement ids).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct IdRange {
    /// First entry.
    pub start: u32,
    /// Number of entries.
    pub len: u32,
}

impl IdRange {
    /// The range as `usize` bounds.
    pub fn range(self) -> std::ops::Range<usize> {
        self.start as usize..self.start as usize + self.len as usize
    }
}

/// The type of a loop-level value: an element type and a lane count (1 for a scalar).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct PType {
    /// The element type.
    pub dtype: DType,
    /// Lanes: 1 for a scalar, more for a vector (`f32x4`).
    pub lanes: u16,
}

impl PType {
    /// A scalar of `dtype`.
    pub const fn scalar(dtype: DType) -> PType {
        PType { dtype, lanes: 1 }
    }

    /// A vector of `dtype` with `lanes` lanes.
    pub const fn vector(dtype: DType, lanes: u16) -> PType {
        PType { dtype, lanes }
    }

    /// The same lane count with another element type.
    pub fn with_dtype(self, dtype: DType) -> PType {
        PType { dtype, lanes: self.lanes }
    }

    /// Whether this is a scalar.
    pub fn is_scalar(self) -> bool {
        self.lanes == 1
    }

    /// Parses `f32`, `i64`, `bool`, `f32x4`, …
    pub fn from_name(s: &str) -> Option<PType> {
        if let Some(d) = DType::from_name(s) {
            return Some(PType::scalar(d));
        }
        let (d, lanes) = s.rsplit_once('x')?;
        let dtype = DType::from_name(d)?;
        if lanes.starts_with('0') || lanes.starts_with('+') {
            return None;
        }
        let lanes: u16 = lanes.parse().ok()?;
        (2..=MAX_LANES).contains(&lanes).then_some(PType { dtype, lanes })
    }
}

impl fmt::Display for PType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.lanes == 1 {
            write!(f, "{}", self.dtype)
        } else {
            write!(f, "{}x{}", self.dtype, self.lanes)
        }
    }
}

/// Binary operators. Both operands have the result's type, except comparisons (whose result
/// is `bool` with the operands' lanes) and `and` / `or` (on `bool`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum BinOp {
    /// `add`.
    Add,
    /// `sub`.
    Sub,
    /// `mul`.
    Mul,
    /// `div`: float division, or integer division rounding toward zero (TVM's `Div`).
    Div,
    /// `mod`: the remainder of `div` on integers (sign of the dividend; TVM's `Mod`).
    Mod,
    /// `floordiv`: integer division rounding toward negative infinity; `floor(a / b)` on floats.
    FloorDiv,
    /// `floormod`: `a - floordiv(a, b) * b` (sign of the divisor).
    FloorMod,
    /// `min`.
    Min,
    /// `max`.
    Max,
    /// `eq`.
    Eq,
    /// `ne`.
    Ne,
    /// `lt`.
    Lt,
    /// `le`.
    Le,
    /// `gt`.
    Gt,
    /// `ge`.
    Ge,
    /// `and` (logical, on `bool`).
    And,
    /// `or` (logical, on `bool`).
    Or,
}

impl BinOp {
    /// Every binary operator.
    pub const ALL: [BinOp; 17] = [
        BinOp::Add,
        BinOp::Sub,
        BinOp::Mul,
        BinOp::Div,
        BinOp::Mod,
        BinOp::FloorDiv,
        BinOp::FloorMod,
        BinOp::Min,
        BinOp::Max,
        BinOp::Eq,
        BinOp::Ne,
        BinOp::Lt,
        BinOp::Le,
        BinOp::Gt,
        BinOp::Ge,
        BinOp::And,
        BinOp::Or,
    ];

    /// The text spelling.
    pub fn name(self) -> &'static str {
        match self {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Div => "div",
            BinOp::Mod => "mod",
            BinOp::FloorDiv => "floordiv",
            BinOp::FloorMod => "floormod",
            BinOp::Min => "min",
            BinOp::Max => "max",
            BinOp::Eq => "eq",
            BinOp::Ne => "ne",
            BinOp::Lt => "lt",
            BinOp::Le => "le",
            BinOp::Gt => "gt",
            BinOp::Ge => "ge",
            BinOp::And => "and",
            BinOp::Or => "or",
        }
    }

    /// The operator spelled `name`.
    pub fn from_name(name: &str) -> Option<BinOp> {
        BinOp::ALL.into_iter().find(|op| op.name() == name)
    }

    /// Whether the result is `bool` (comparisons).
    pub fn is_comparison(self) -> bool {
        matches!(self, BinOp::Eq | BinOp::Ne | BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge)
    }

    /// Whether the operands must be `bool` (`and`, `or`).
    pub fn is_logical(self) -> bool {
        matches!(self, BinOp::And | BinOp::Or)
    }

    /// Whether `a op b == b op a`.
    pub fn is_commutative(self) -> bool {
        matches!(
            self,
            BinOp::Add | BinOp::Mul | BinOp::Min | BinOp::Max | BinOp::Eq | BinOp::Ne | BinOp::And | BinOp::Or
        )
    }
}

/// What operand types an intrinsic takes and what it returns.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum IntrinsicKind {
    /// Float operands, float result of the same type.
    Float,
    /// Numeric operands (float or integer), result of the same type.
    Numeric,
    /// Integer operands, result of the same type (bitwise operators, shifts).
    Integer,
    /// Float operand, `bool` result with its lanes.
    FloatPredicate,
}

macro_rules! intrinsics {
    ($($variant:ident = $name:literal, $arity:literal, $kind:ident;)*) => {
        /// Calls of math and bit functions (TVM's `tir.exp`, `tir.sqrt`, … builtins).
        #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
        pub enum Intrinsic {
            $(
                #[doc = concat!("`", $name, "`.")]
                $variant,
            )*
        }

        impl Intrinsic {
            /// Every intrinsic.
            pub const ALL: &'static [Intrinsic] = &[$(Intrinsic::$variant),*];

            /// The text spelling.
            pub fn name(self) -> &'static str {
                match self { $(Intrinsic::$variant => $name,)* }
            }

            /// The number of arguments.
            pub fn arity(self) -> usize {
                match self { $(Intrinsic::$variant => $arity,)* }
            }

            /// The operand and result types.
            pub fn kind(self) -> IntrinsicKind {
                match self { $(Intrinsic::$variant => IntrinsicKind::$kind,)* }
            }
        }
    };
}

intrinsics! {
    Exp = "exp", 1, Float;
    Exp2 = "exp2", 1, Float;
    Log = "log", 1, Float;
    Log2 = "log2", 1, Float;
    Log10 = "log10", 1, Float;
    Sqrt = "sqrt", 1, Float;
    Rsqrt = "rsqrt", 1, Float;
    Tanh = "tanh", 1, Float;
    Sigmoid = "sigmoid", 1, Float;
    Erf = "erf", 1, Float;
    Sin = "sin", 1, Float;
    Cos = "cos", 1, Float;
    Tan = "tan", 1, Float;
    Asin = "asin", 1, Float;
    Acos = "acos", 1, Float;
    Atan = "atan", 1, Float;
    Sinh = "sinh", 1, Float;
    Cosh = "cosh", 1, Float;
    Asinh = "asinh", 1, Float;
    Acosh = "acosh", 1, Float;
    Atanh = "atanh", 1, Float;
    Floor = "floor", 1, Float;
    Ceil = "ceil", 1, Float;
    Round = "round", 1, Float;
    Trunc = "trunc", 1, Float;
    Pow = "pow", 2, Float;
    Atan2 = "atan2", 2, Float;
    Fmod = "fmod", 2, Float;
    Abs = "abs", 1, Numeric;
    Neg = "neg", 1, Numeric;
    IsNan = "isnan", 1, FloatPredicate;
    IsInf = "isinf", 1, FloatPredicate;
    BitAnd = "bitwise_and", 2, Integer;
    BitOr = "bitwise_or", 2, Integer;
    BitXor = "bitwise_xor", 2, Integer;
    BitNot = "bitwise_not", 1, Integer;
    ShiftLeft = "shift_left", 2, Integer;
    ShiftRight = "shift_right", 2, Integer;
}

impl Intrinsic {
    /// The intrinsic spelled `name`.
    pub fn from_name(name: &str) -> Option<Intrinsic> {
        Intrinsic::ALL.iter().copied().find(|i| i.name() == name)
    }
}

/// An expression node.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum PExprKind {
    /// An integer or `bool` immediate (its type says which; `bool` is 0 or 1).
    Int(i64),
    /// A float immediate (an f32 or f16 immediate holds a value exact in its type).
    Float(f64),
    /// A variable.
    Var(VarId),
    /// A binary operator.
    Bin(BinOp, PExprId, PExprId),
    /// Logical negation of a `bool`.
    Not(PExprId),
    /// `select(cond, then, else)`: both arms are evaluated (TVM's `Select`).
    Select(PExprId, PExprId, PExprId),
    /// A conversion to the node's type.
    Cast(PExprId),
    /// A load of a buffer element; the indices are in the operand pool, one per dimension. With
    /// a vector index (a `ramp`), the load is a vector.
    Load(BufId, IdRange),
    /// An intrinsic call; its arguments are in the operand pool.
    Call(Intrinsic, IdRange),
    /// `ramp(base, stride, lanes)`: `base + i * stride` for each lane `i` (the lane count is
    /// the node's type's).
    Ramp(PExprId, PExprId),
    /// `broadcast(value, lanes)`: the scalar in every lane.
    Broadcast(PExprId),
    /// `let %v = value in body`.
    Let(VarId, PExprId, PExprId),
}

impl PExprKind {
    /// Whether this is an immediate.
    pub fn is_immediate(&self) -> bool {
        matches!(self, PExprKind::Int(_) | PExprKind::Float(_))
    }
}

/// An expression: its kind and type.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct PExpr {
    /// What it computes.
    pub kind: PExprKind,
    /// Its type.
    pub ty: PType,
}

/// How a `for` loop's iterations run (TVM's `ForKind`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum ForKind {
    /// One after another.
    Serial,
    /// In any order, possibly at once (iterations must not depend on each other).
    Parallel,
    /// As vector lanes (VectorizeLoop rewrites it into vector expressions).
    Vectorized,
    /// To be unrolled.
    Unrolled,
}

impl ForKind {
    /// The text spelling (TVMScript's `T.serial`, `T.parallel`, `T.vectorized`, `T.unroll`).
    pub fn name(self) -> &'static str {
        match self {
            ForKind::Serial => "serial",
            ForKind::Parallel => "parallel",
            ForKind::Vectorized => "vectorized",
            ForKind::Unrolled => "unroll",
        }
    }

    /// The kind spelled `name`.
    pub fn from_name(name: &str) -> Option<ForKind> {
        [ForKind::Serial, ForKind::Parallel, ForKind::Vectorized, ForKind::Unrolled]
            .into_iter()
            .find(|k| k.name() == name)
    }
}

/// A statement node.
#[derive(Clone, Copy, PartialEq, Debug)]
pub enum StmtKind {
    /// `for %var in kind(min, extent) { body }`: `var` takes `min`, `min + 1`, …,
    /// `min + extent - 1`.
    For {
        /// The loop variable (scoped to the body).
        var: VarId,
        /// First value.
        min: PExprId,
        /// Number of iterations.
        extent: PExprId,
        /// How iterations run.
        kind: ForKind,
        /// The body.
        body: StmtId,
    },
    /// `%buf[indices] = value;`
    Store {
        /// The buffer written.
        buf: BufId,
        /// One index per dimension (operand pool).
        indices: IdRange,
        /// The value stored (a vector with a vector index).
        value: PExprId,
    },
    /// `let %var = value;` over `body`.
    Let {
        /// The variable (scoped to the body).
        var: VarId,
        /// Its value.
        value: PExprId,
        /// Where it is visible.
        body: StmtId,
    },
    /// `if (cond) { then } else { else }`.
    If {
        /// A scalar `bool`.
        cond: PExprId,
        /// Runs when `cond` holds.
        then_: StmtId,
        /// Runs otherwise (`None`: nothing).
        else_: Option<StmtId>,
    },
    /// Statements in order (statement list pool). Never directly holds another sequence.
    Seq(IdRange),
    /// `alloc %buf: Buffer[…];` over `body`: a fresh, zero-filled buffer (TVM's `Allocate` +
    /// `DeclBuffer`).
    Alloc {
        /// The buffer (scoped to the body).
        buf: BufId,
        /// Where it is visible.
        body: StmtId,
    },
    /// `decl %buf: Buffer[…] = %data;` over `body`: a view of another buffer's storage with
    /// its own shape, strides and offset (TVM's `DeclBuffer` over an existing data pointer).
    Decl {
        /// The new view (scoped to the body).
        buf: BufId,
        /// The buffer whose storage it views.
        data: BufId,
        /// Where it is visible.
        body: StmtId,
    },
    /// `eval expr;`: evaluates an expression for its effects (none today) and drops it.
    Evaluate(PExprId),
    /// `attr "key" = value { body }`: an annotation of a region (TVM's `AttrStmt`, e.g.
    /// `pragma_unroll_explicit`).
    Attr {
        /// Index of the key in the function's string table.
        key: u32,
        /// Its value.
        value: PExprId,
        /// The annotated region.
        body: StmtId,
    },
}

/// A statement (its kind); spans live in a side table of the function.
#[derive(Clone, Copy, PartialEq, Debug)]
pub struct Stmt {
    /// What it does.
    pub kind: StmtKind,
}

/// A variable.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Var {
    /// Its name without `%` (names need not be unique; the printer makes them so).
    pub name: Arc<str>,
    /// Its type (a scalar: integer, float or `bool`).
    pub ty: PType,
}

/// A buffer: typed, strided storage (TVM's `Buffer`).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub struct Buffer {
    /// Its name without `%`.
    pub name: Arc<str>,
    /// Element type.
    pub dtype: DType,
    /// Dimensions, outermost first (static).
    pub shape: Box<[i64]>,
    /// Elements between consecutive indices of each dimension; empty means compact row-major.
    pub strides: Box<[i64]>,
    /// Position of element `[0, …, 0]` in the storage, in elements.
    pub elem_offset: i64,
    /// Memory scope (`global`, `local`, `shared`, …).
    pub scope: Arc<str>,
}

impl Buffer {
    /// A compact row-major buffer in the global scope.
    pub fn new(name: &str, dtype: DType, shape: &[i64]) -> Buffer {
        Buffer {
            name: name.into(),
            dtype,
            shape: shape.into(),
            strides: Box::new([]),
            elem_offset: 0,
            scope: "global".into(),
        }
    }

    /// The strides in elements (the row-major ones when none are given).
    pub fn effective_strides(&self) -> Vec<i64> {
        if !self.strides.is_empty() {
            return self.strides.to_vec();
        }
        let mut out = vec![1i64; self.shape.len()];
        for d in (0..self.shape.len().saturating_sub(1)).rev() {
            out[d] = out[d + 1].saturating_mul(self.shape[d + 1]);
        }
        out
    }

    /// Number of elements, or `None` on overflow or a negative dimension.
    pub fn num_elements(&self) -> Option<i64> {
        self.shape.iter().try_fold(1i64, |acc, &d| if d < 0 { None } else { acc.checked_mul(d) })
    }

    /// The storage this buffer needs, in elements: one past the largest flat offset an
    /// in-bounds index reaches (`None` on overflow or a negative dimension, stride or offset).
    pub fn storage_elements(&self) -> Option<i64> {
        if self.shape.contains(&0) {
            return Some(self.elem_offset.max(0));
        }
        let strides = self.effective_strides();
        let mut last = self.elem_offset;
        for (&d, &s) in self.shape.iter().zip(&strides) {
            if d < 0 || s < 0 {
                return None;
            }
            last = last.checked_add((d - 1).checked_mul(s)?)?;
        }
        if last < 0 {
            return None;
        }
        last.checked_add(1)
    }
}

/// A parameter: a scalar variable or a buffer.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub enum Param {
    /// A scalar passed by value.
    Var(VarId),
    /// A buffer passed by reference (inputs and, by destination passing, outputs).
    Buf(BufId),
}

/// A loop-level function (TVM's `tir::PrimFunc`). Immutable once built; shared as `Arc`.
///
/// Build one with [`PrimFuncBuilder`](super::PrimFuncBuilder) or parse it from text. The
/// arenas are in post-order (children before parents) for every function the builder or
/// parser makes; the verifier checks it for the rest.
#[derive(Clone, Debug, PartialEq)]
pub struct PrimFunc {
    pub(super) params: Vec<Param>,
    pub(super) vars: Vec<Var>,
    pub(super) bufs: Vec<Buffer>,
    pub(super) exprs: Vec<PExpr>,
    pub(super) operands: Vec<PExprId>,
    pub(super) stmts: Vec<Stmt>,
    pub(super) stmt_lists: Vec<StmtId>,
    pub(super) strings: Vec<Arc<str>>,
    pub(super) body: StmtId,
    pub(super) attrs: Attrs,
    /// Source spans of statements (empty when built in memory).
    pub(super) stmt_spans: Vec<Span>,
}

impl PrimFunc {
    /// The parameters in order.
    pub fn params(&self) -> &[Param] {
        &self.params
    }

    /// The body.
    pub fn body(&self) -> StmtId {
        self.body
    }

    /// The function attributes (`#[…]` before `prim`).
    pub fn attrs(&self) -> &Attrs {
        &self.attrs
    }

    /// A variable.
    pub fn var(&self, v: VarId) -> &Var {
        &self.vars[v.index()]
    }

    /// Every variable.
    pub fn vars(&self) -> &[Var] {
        &self.vars
    }

    /// A buffer.
    pub fn buf(&self, b: BufId) -> &Buffer {
        &self.bufs[b.index()]
    }

    /// Every buffer.
    pub fn bufs(&self) -> &[Buffer] {
        &self.bufs
    }

    /// An expression.
    pub fn expr(&self, e: PExprId) -> &PExpr {
        &self.exprs[e.index()]
    }

    /// The expression arena.
    pub fn exprs(&self) -> &[PExpr] {
        &self.exprs
    }

    /// The expressions of an operand range (load indices, call arguments).
    pub fn operands(&self, r: IdRange) -> &[PExprId] {
        &self.operands[r.range()]
    }

    /// A statement.
    pub fn stmt(&self, s: StmtId) -> &Stmt {
        &self.stmts[s.index()]
    }

    /// The statement arena.
    pub fn stmts(&self) -> &[Stmt] {
        &self.stmts
    }

    /// The statements of a sequence.
    pub fn stmt_list(&self, r: IdRange) -> &[StmtId] {
        &self.stmt_lists[r.range()]
    }

    /// A string of the string table (`attr` keys).
    pub fn string(&self, i: u32) -> &str {
        &self.strings[i as usize]
    }

    /// Where a statement came from in the source, if it was parsed.
    pub fn stmt_span(&self, s: StmtId) -> Option<Span> {
        self.stmt_spans.get(s.index()).copied()
    }

    /// The buffer parameters in order.
    pub fn buffer_params(&self) -> impl Iterator<Item = BufId> + '_ {
        self.params.iter().filter_map(|p| match p {
            Param::Buf(b) => Some(*b),
            Param::Var(_) => None,
        })
    }

    /// The direct children of a statement, in execution order.
    pub fn children(&self, s: StmtId) -> StmtChildren<'_> {
        match self.stmts[s.index()].kind {
            StmtKind::For { body, .. }
            | StmtKind::Let { body, .. }
            | StmtKind::Alloc { body, .. }
            | StmtKind::Decl { body, .. }
            | StmtKind::Attr { body, .. } => StmtChildren::One([body]),
            StmtKind::If { then_, else_: Some(e), .. } => StmtChildren::Two([then_, e]),
            StmtKind::If { then_, else_: None, .. } => StmtChildren::One([then_]),
            StmtKind::Seq(r) => StmtChildren::List(&self.stmt_lists[r.range()]),
            StmtKind::Store { .. } | StmtKind::Evaluate(_) => StmtChildren::List(&[]),
        }
    }

    /// The expressions a statement uses directly, in evaluation order.
    pub fn stmt_exprs(&self, s: StmtId, out: &mut Vec<PExprId>) {
        match self.stmts[s.index()].kind {
            StmtKind::For { min, extent, .. } => out.extend([min, extent]),
            StmtKind::Store { indices, value, .. } => {
                out.extend_from_slice(&self.operands[indices.range()]);
                out.push(value);
            }
            StmtKind::Let { value, .. } | StmtKind::Attr { value, .. } | StmtKind::Evaluate(value) => out.push(value),
            StmtKind::If { cond, .. } => out.push(cond),
            StmtKind::Seq(_) | StmtKind::Alloc { .. } | StmtKind::Decl { .. } => {}
        }
    }

    /// The operands of an expression, in evaluation order.
    pub fn expr_operands(&self, e: PExprId, out: &mut Vec<PExprId>) {
        match self.exprs[e.index()].kind {
            PExprKind::Int(_) | PExprKind::Float(_) | PExprKind::Var(_) => {}
            PExprKind::Bin(_, a, b) | PExprKind::Ramp(a, b) | PExprKind::Let(_, a, b) => out.extend([a, b]),
            PExprKind::Not(a) | PExprKind::Cast(a) | PExprKind::Broadcast(a) => out.push(a),
            PExprKind::Select(c, a, b) => out.extend([c, a, b]),
            PExprKind::Load(_, r) | PExprKind::Call(_, r) => out.extend_from_slice(&self.operands[r.range()]),
        }
    }

    /// The type the graph level sees for this function: `fn(T…) -> ()` with a tensor type
    /// per parameter (a buffer's shape and dtype, or a rank-0 tensor for a scalar). `call_tir`
    /// checks its arguments against it.
    pub fn graph_type(&self) -> Type {
        let params: Vec<Type> = self
            .params
            .iter()
            .map(|p| match *p {
                Param::Buf(b) => {
                    let buf = &self.bufs[b.index()];
                    let shape: Box<[u64]> = buf.shape.iter().map(|&d| d.max(0) as u64).collect();
                    Type::tensor(shape, buf.dtype)
                }
                Param::Var(v) => Type::tensor(Vec::new(), self.vars[v.index()].ty.dtype),
            })
            .collect();
        Type::func(params, Type::tuple(Vec::new()))
    }

    /// Number of statements and expressions: the function's size.
    pub fn size(&self) -> usize {
        self.stmts.len() + self.exprs.len()
    }

    /// The whole operand pool (what [`PrimFunc::operands`] takes ranges of).
    pub(crate) fn operand_pool(&self) -> &[PExprId] {
        &self.operands
    }

    /// The whole statement list pool (what [`PrimFunc::stmt_list`] takes ranges of).
    pub(crate) fn stmt_list_pool(&self) -> &[StmtId] {
        &self.stmt_lists
    }

    /// The string table.
    pub(crate) fn strings(&self) -> &[Arc<str>] {
        &self.strings
    }

    /// The statements' spans (empty when built in memory).
    pub(crate) fn stmt_spans(&self) -> &[Span] {
        &self.stmt_spans
    }

    /// The function with exactly these tables. Nothing is checked: a caller with tables it did
    /// not take from a function runs [`super::verify_prim_func`] before using the result.
    pub(crate) fn from_parts(p: PrimFuncParts) -> PrimFunc {
        PrimFunc {
            params: p.params,
            vars: p.vars,
            bufs: p.bufs,
            exprs: p.exprs,
            operands: p.operands,
            stmts: p.stmts,
            stmt_lists: p.stmt_lists,
            strings: p.strings,
            body: p.body,
            attrs: p.attrs,
            stmt_spans: p.stmt_spans,
        }
    }
}

/// A PrimFunc's tables, for [`PrimFunc::from_parts`] (an exact decoding: `session/codec.rs`).
pub(crate) struct PrimFuncParts {
    pub(crate) params: Vec<Param>,
    pub(crate) vars: Vec<Var>,
    pub(crate) bufs: Vec<Buffer>,
    pub(crate) exprs: Vec<PExpr>,
    pub(crate) operands: Vec<PExprId>,
    pub(crate) stmts: Vec<Stmt>,
    pub(crate) stmt_lists: Vec<StmtId>,
    pub(crate) strings: Vec<Arc<str>>,
    pub(crate) body: StmtId,
    pub(crate) attrs: Attrs,
    pub(crate) stmt_spans: Vec<Span>,
}

/// The children of a statement (see [`PrimFunc::children`]).
#[derive(Clone, Copy, Debug)]
pub enum StmtChildren<'a> {
    /// One child.
    One([StmtId; 1]),
    /// Two children (`if` with `else`).
    Two([StmtId; 2]),
    /// A sequence's statements (empty for leaves).
    List(&'a [StmtId]),
}

impl StmtChildren<'_> {
    /// The children as a slice.
    pub fn as_slice(&self) -> &[StmtId] {
        match self {
            StmtChildren::One(a) => a,
            StmtChildren::Two(a) => a,
            StmtChildren::List(l) => l,
        }
    }
}
