//! Operators: a registry of [`OpDef`]s (name, arity, attribute schema, type relation, fusion
//! pattern, stateful flag, reference kernel). The registry is a static table, so an [`OpId`]
//! means the same operator in every module, thread and run.

mod defs;
mod evaluate;
pub mod kernels;

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::ir::{AttrValue, Attrs, OpId, Tensor, TensorError, Type};

pub use evaluate::{evaluate, CallError, EvalLimits, Evaluated, Known, Limit, Operand};

/// How an operator may be fused (TVM's `TOpPattern`, ordered from most to least fusable).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
pub enum OpPattern {
    /// Output element i depends only on input element i (`exp`, `relu`).
    Elementwise,
    /// Elementwise with numpy broadcasting (`add`).
    Broadcast,
    /// Output elements are a rearrangement of inputs (`reshape`, `transpose`, `concatenate`).
    Injective,
    /// Reduction over axes (`sum`, `softmax`).
    Reduce,
    /// A complex op whose output elementwise consumers may be fused into it (`conv2d`,
    /// `dense`, `matmul`; TVM's `kOutEWiseFusable`). Nothing fuses into its inputs.
    OutEWiseFusable,
    /// Anything else: a fusion boundary (`batch_norm`, `dropout`).
    Opaque,
}

impl OpPattern {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            OpPattern::Elementwise => "elementwise",
            OpPattern::Broadcast => "broadcast",
            OpPattern::Injective => "injective",
            OpPattern::Reduce => "reduce",
            OpPattern::OutEWiseFusable => "out-elemwise-fusable",
            OpPattern::Opaque => "opaque",
        }
    }
}

/// Number of arguments an operator takes.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Arity {
    /// Exactly this many.
    Exact(usize),
    /// At least this many.
    AtLeast(usize),
}

impl Arity {
    /// Whether `n` arguments are accepted.
    pub fn accepts(self, n: usize) -> bool {
        match self {
            Arity::Exact(k) => n == k,
            Arity::AtLeast(k) => n >= k,
        }
    }
}

impl std::fmt::Display for Arity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Arity::Exact(k) => write!(f, "{k}"),
            Arity::AtLeast(k) => write!(f, "at least {k}"),
        }
    }
}

/// Kind of an attribute value in a schema.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AttrKind {
    /// `true` / `false`.
    Bool,
    /// An integer.
    Int,
    /// A float (an integer literal is accepted).
    Float,
    /// A string.
    Str,
    /// A list of integers.
    Ints,
    /// A dtype name.
    DType,
}

impl AttrKind {
    /// Lower-case name, as in [`AttrValue::kind_name`].
    pub fn name(self) -> &'static str {
        match self {
            AttrKind::Bool => "bool",
            AttrKind::Int => "int",
            AttrKind::Float => "float",
            AttrKind::Str => "str",
            AttrKind::Ints => "ints",
            AttrKind::DType => "dtype",
        }
    }

    /// Whether `v` is acceptable for this kind.
    pub fn accepts(self, v: &AttrValue) -> bool {
        matches!(
            (self, v),
            (AttrKind::Bool, AttrValue::Bool(_))
                | (AttrKind::Int, AttrValue::Int(_))
                | (AttrKind::Float, AttrValue::Float(_) | AttrValue::Int(_))
                | (AttrKind::Str, AttrValue::Str(_))
                | (AttrKind::Ints, AttrValue::Ints(_))
                | (AttrKind::DType, AttrValue::DType(_))
        )
    }
}

/// One attribute of an operator's schema.
#[derive(Clone, Copy, Debug)]
pub struct AttrSpec {
    /// Attribute name.
    pub name: &'static str,
    /// Value kind.
    pub kind: AttrKind,
    /// Whether a call must give it (otherwise the kernel uses its documented default).
    pub required: bool,
}

/// Errors of type relations and kernels. Messages are lowercase phrases.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum OpError {
    /// Arguments have types the operator does not accept.
    #[error("{0}")]
    Type(String),
    /// A tensor could not be made.
    #[error(transparent)]
    Tensor(#[from] TensorError),
    /// Anything else a kernel rejects (e.g. a value out of range).
    #[error("{0}")]
    Invalid(String),
}

/// Computes an operator's result type from argument types and attributes.
pub type TypeRel = fn(args: &[Type], attrs: &Attrs) -> Result<Type, OpError>;

/// Evaluates an operator on concrete tensors. Operators with several results (`split`,
/// `batch_norm`) return one tensor per field of their tuple result type; others return one.
pub type Kernel = fn(args: &[Tensor], attrs: &Attrs, ctx: &mut KernelCtx) -> Result<Vec<Tensor>, OpError>;

/// Evaluates an elementwise operator on `f32` scalars with exactly the arithmetic of its
/// kernel (so the result is bit-identical to running the kernel on rank-0 `f32` tensors).
/// `None` when the number of values is wrong. FoldConstant's fast path for scalar folds.
pub type ScalarF32 = fn(args: &[f32]) -> Option<f32>;

/// Estimates the work of one call from its argument types, attributes and result type (the
/// type relation's): about the number of scalar steps its kernel takes — every element of the
/// arguments and the result, plus for operators that are not linear the output elements
/// times the window, reduction or inner-product length each one needs. Saturates instead of
/// overflowing. Constant folding (FoldConstant and the ONNX importer) leaves a call whose
/// estimate is over its budget unfolded ([`DEFAULT_MAX_FOLD_COST`]).
pub type CostFn = fn(args: &[Type], attrs: &Attrs, out: &Type) -> u64;

/// The default compute budget of one folded call, in [`OpDef::cost`] units: FoldConstant's
/// `relay.FoldConstant.max_cost` and the ONNX importer's folding both use it. 2^30 is about a
/// [1000, 1000] x [1000, 1000] matmul, far above what real models fold (weight transposes,
/// reshapes and scalings, shape subgraphs), and bounds a hostile call to seconds of compute
/// where the max_pool2d took an hour.
pub const DEFAULT_MAX_FOLD_COST: u64 = 1 << 30;

/// State a kernel may use: the random stream of stateful operators, and the workers a large
/// call may spread its output over (`kernels/par.rs`: every output element is computed by the
/// same operations whatever the split, so results do not depend on them).
pub struct KernelCtx {
    /// Random stream for stateful operators, seeded by the interpreter.
    pub rng: rand_chacha::ChaCha8Rng,
    /// Worker pool for the output tiles of large calls; `None` runs every kernel on the
    /// calling thread.
    pub workers: Option<std::sync::Arc<rayon::ThreadPool>>,
    /// Element operations from which a call spreads over `workers` (default
    /// [`kernels::par::DEFAULT_MIN_PARALLEL_WORK`]).
    pub min_parallel_work: usize,
}

impl KernelCtx {
    /// A context with its random stream seeded by `seed`, running kernels on the calling
    /// thread.
    pub fn seeded(seed: u64) -> KernelCtx {
        use rand_chacha::rand_core::SeedableRng;
        KernelCtx {
            rng: rand_chacha::ChaCha8Rng::seed_from_u64(seed),
            workers: None,
            min_parallel_work: kernels::par::DEFAULT_MIN_PARALLEL_WORK,
        }
    }

    /// This context with calls of at least `min_work` element operations spread over
    /// `workers` (`None`: every call on the calling thread).
    pub fn with_workers(self, workers: Option<std::sync::Arc<rayon::ThreadPool>>, min_work: usize) -> KernelCtx {
        KernelCtx { workers, min_parallel_work: min_work, ..self }
    }
}

/// The definition of an operator.
#[derive(Clone, Copy)]
pub struct OpDef {
    /// Name, as written in text (`add`, `conv2d`).
    pub name: &'static str,
    /// Accepted argument counts.
    pub arity: Arity,
    /// Attribute schema; attributes not listed are errors.
    pub attrs: &'static [AttrSpec],
    /// Fusion pattern.
    pub pattern: OpPattern,
    /// Whether calls have effects (must not be folded, merged, reordered or removed).
    pub stateful: bool,
    /// Whether the result is a tuple (then the kernel returns one tensor per field).
    pub tuple_result: bool,
    /// Type relation.
    pub type_rel: TypeRel,
    /// Reference kernel.
    pub kernel: Kernel,
    /// The kernel's arithmetic on `f32` scalars, for operators whose `f32` result on rank-0
    /// `f32` arguments is a rank-0 `f32` computed elementwise (unary float ops, arithmetic).
    pub scalar_f32: Option<ScalarF32>,
    /// Estimated compute of a call ([`CostFn`]); every operator has one.
    pub cost: CostFn,
    /// One-line description for `passel ops` and docs.
    pub doc: &'static str,
}

impl std::fmt::Debug for OpDef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpDef").field("name", &self.name).finish_non_exhaustive()
    }
}

impl OpDef {
    /// Checks `attrs` against the schema: unknown keys, missing required keys and values of the
    /// wrong kind are errors naming the key.
    pub fn check_attrs(&self, attrs: &Attrs) -> Result<(), String> {
        for (key, value) in attrs.iter() {
            match self.attrs.iter().find(|s| s.name == key) {
                None => {
                    let valid: Vec<&str> = self.attrs.iter().map(|s| s.name).collect();
                    return Err(if valid.is_empty() {
                        format!("operator `{}` takes no attributes, got `{key}`", self.name)
                    } else {
                        format!("unknown attribute `{key}` of `{}` (valid: {})", self.name, valid.join(", "))
                    });
                }
                Some(spec) if !spec.kind.accepts(value) => {
                    return Err(format!(
                        "attribute `{key}` of `{}` must be {}, got {}",
                        self.name,
                        spec.kind.name(),
                        value.kind_name()
                    ))
                }
                Some(_) => {}
            }
        }
        for spec in self.attrs.iter().filter(|s| s.required) {
            if !attrs.contains(spec.name) {
                return Err(format!("operator `{}` needs attribute `{}`", self.name, spec.name));
            }
        }
        Ok(())
    }
}

struct Registry {
    defs: Vec<OpDef>,
    by_name: HashMap<&'static str, OpId>,
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let defs = defs::all();
        assert!(defs.len() < u16::MAX as usize);
        let mut by_name = HashMap::new();
        for (i, d) in defs.iter().enumerate() {
            let prev = by_name.insert(d.name, OpId(i as u16));
            assert!(prev.is_none(), "operator {} registered twice", d.name);
        }
        Registry { defs, by_name }
    })
}

/// The operator named `name`.
pub fn lookup(name: &str) -> Option<OpId> {
    registry().by_name.get(name).copied()
}

/// The definition of `op`, or `None` for an id outside the registry (malformed input).
#[inline]
pub fn try_get(op: OpId) -> Option<&'static OpDef> {
    registry().defs.get(op.0 as usize)
}

/// Whether a call of `op` has effects. Unknown operators (malformed input) count as stateful.
#[inline]
pub fn is_stateful(op: OpId) -> bool {
    try_get(op).is_none_or(|d| d.stateful)
}

/// The definition of `op`.
pub fn get(op: OpId) -> &'static OpDef {
    &registry().defs[op.0 as usize]
}

/// Every operator, in registry order.
pub fn all() -> impl ExactSizeIterator<Item = (OpId, &'static OpDef)> {
    registry().defs.iter().enumerate().map(|(i, d)| (OpId(i as u16), d))
}

/// Registered operator names close to `name` (for "did you mean" suggestions), best first.
pub fn suggest(name: &str) -> Vec<&'static str> {
    crate::util::suggest(name, registry().defs.iter().map(|d| d.name))
}
