//! The PrimFunc interpreter: runs a loop-level function ([`PrimFunc`]) on concrete tensors, so
//! that a lowered model can be checked against the graph-level interpreter.
//!
//! ## Calling convention
//!
//! [`run_prim_func`] binds its arguments to the first parameters; every remaining parameter
//! must be a buffer, which is allocated zero-filled and returned (destination passing, as
//! Relax's `call_tir`). An input tensor must have its buffer's dtype; a compact buffer (no
//! strides, offset 0) needs exactly its element count, a strided or offset buffer views the
//! tensor's row-major storage (element `[i…]` at flat offset `elem_offset + Σ i_k * stride_k`)
//! and needs at least the storage it reaches. Scalar arguments must have their parameter's
//! kind (an integer that fits an integer or `bool` parameter; a float for a float parameter,
//! rounded to it).
//!
//! ## Semantics
//!
//! - Integers are computed in i64 and wrapped to the dtype's width after every operation
//!   (u64 values are held as their i64 bit pattern; u64 division, remainder, min / max and
//!   comparisons are unsigned). `div` / `mod` truncate toward zero (TVM's `Div` / `Mod`),
//!   `floordiv` / `floormod` round toward negative infinity (TVM's `FloorDiv` / `FloorMod`).
//!   Integer division or remainder by zero is an error naming the function and statement.
//! - Floats are computed in f64 and rounded to the dtype after every operation (f32 with
//!   `as f32`: exact for `+ - * /` and `sqrt`, since f64 has more than 2 × 24 + 2 bits, so
//!   the result equals native f32 arithmetic; f16 with the `half` crate). On floats `mod` is
//!   Rust's `%` (C's `fmod`), `floordiv` is `floor(a / b)` and `floormod` is
//!   `a - floor(a / b) * b`, each step rounded to the dtype as TVM's lowering computes them.
//!   `min` / `max` propagate NaN (as the graph kernels and numpy do).
//! - Which NaN an operation produces (its sign and payload) is not specified: Rust lets the
//!   compiler commute `x + y` and `x * y`, and x86 returns the first operand's NaN, so an
//!   operation on two NaNs of opposite signs gives either (the block path's loops and the
//!   scalar closures differ so at opt-level 3). Nothing in the loop level tells NaNs apart
//!   (`isnan`, comparisons, casts and `select` treat every NaN alike; `abs` clears the sign),
//!   so it shows only in the bits of a NaN in an output; the tests compare NaNs as equal.
//! - Intrinsics on f32 and f16 use the graph kernels' f32 functions where the graph level has
//!   the operator (`exp`, `log`, `sqrt`, `tanh`, `sigmoid`, `erf`, `floor`, `ceil`, `round`,
//!   trigonometry, `abs`, `neg`, `pow`), so a lowered model matches the graph interpreter bit
//!   for bit; f16 goes through f32 as the graph kernels do; f64 computes in f64. `round` rounds
//!   halves to even (ONNX / numpy, as the graph `round` kernel); `erf` is the graph kernels'
//!   `erf`. Shifts by a count outside `0..bits` give 0 (`shift_left`) or the sign fill
//!   (`shift_right`, arithmetic on signed types, logical on unsigned ones).
//! - Comparisons give `bool` (IEEE on floats: NaN compares unequal). `select` evaluates both
//!   arms. Casts: float → integer saturates like Rust's `as` (NaN → 0, out-of-range values to
//!   the type's bounds), integer → float rounds to nearest, integer → integer wraps, anything
//!   → `bool` is `x != 0` (NaN → true).
//! - Vectors (`ramp`, `broadcast`, loads and stores at vector indices) work lane by lane.
//! - `let` binds (expressions and statements), `alloc` makes a zero-filled buffer that lives
//!   for its body (larger than [`MAX_MATERIALIZED_ELEMENTS`] elements is an error), `decl` is
//!   a view of another buffer's storage (shared: writes through either are visible through the
//!   other; a view reaching past the storage is an error), `attr` just runs its body and
//!   `eval` evaluates its expression and drops it.
//! - `for` runs `min, min + 1, …, min + extent - 1` (a negative extent is an error); every
//!   loop kind runs serially (`parallel` iterations must be independent, so the order does
//!   not change the result; `vectorized` and `unroll` are hints).
//! - An out-of-bounds load or store is an error naming the buffer, the indices and the shape.
//!   A variable read outside its binder (which the parser never produces) reads whatever its
//!   slot holds (0 before any binding); a buffer used outside its binder is an error.
//!
//! ## How it runs
//!
//! The function is compiled once into closures, then run: nothing walks the IR per element.
//! Compilation goes over the arenas in order (they are post-order: operands before users), so
//! it does not recurse on the input. Each expression becomes a typed closure (`i64` for
//! integers and `bool`, `f64` for floats, `Vec` of those for vectors); leaf operands of
//! arithmetic (variables, immediates) are read inline, loads at variable indices read the
//! frame directly, and the hot scalar paths (i64 index arithmetic, f32 loads and stores) do
//! no allocation. Statements compile to blocks of operations: `let`, `alloc`, `decl`, `attr`
//! and sequences are flattened into their enclosing block (a chain of a million flat `let`s
//! adds no nesting), and only `for` and `if` nest.
//!
//! Variables live in a frame slot array (one `i64` and one `f64` slot per variable). Buffers
//! live in typed storage of three classes: `Vec<f32>` for f32 (the common case: native width
//! halves memory traffic and loads and stores convert nothing), `Vec<f64>` for f64 and f16
//! (f16 values are exact in f64, so there is no conversion per access), and `Vec<i64>` for
//! every integer type and `bool` (the arithmetic is in i64 anyway; values are kept wrapped to
//! their dtype). Three classes keep the compiled code small: operations are specialized per
//! class and per wrap or rounding width, not per dtype pair. A `decl` view shares its root
//! buffer's storage slot (resolved statically), so writes are visible through both.
//!
//! Running the closures recurses by the nesting depth of expressions and `for` / `if`
//! statements. That depth is computed bottom-up over the arenas before compiling, and a
//! function nested deeper than [`MAX_PRIM_DEPTH`] is refused with a clear error.

mod block;

use std::sync::Arc;

use half::f16;
use ndarray::{ArcArray, IxDyn};

use super::InterpError;
use crate::ir::{DType, Tensor, TensorData, MAX_MATERIALIZED_ELEMENTS};
use crate::op::kernels::elementwise::{erf, Arith, Unary};
use crate::tir::{BinOp, BufId, Buffer, Intrinsic, PExprId, PExprKind, Param, PrimFunc, StmtId, StmtKind, VarId};

/// The deepest nesting of expressions and `for` / `if` statements [`run_prim_func`] accepts
/// (the compiled closures recurse that deep).
pub const MAX_PRIM_DEPTH: usize = 1024;

/// A scalar argument of a PrimFunc.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum PrimScalar {
    /// An integer (or `bool`: 0 or 1) parameter's value; u64 values as their bit pattern.
    Int(i64),
    /// A float parameter's value (rounded to the parameter's dtype).
    Float(f64),
}

/// An argument: a scalar parameter, or the tensor bound to a buffer parameter.
#[derive(Clone, Debug, PartialEq)]
pub enum PrimArg {
    /// A scalar parameter.
    Scalar(PrimScalar),
    /// The tensor a buffer parameter views.
    Buffer(Tensor),
}

/// Runs `func` (named `name` in errors) with `args` bound to its first `args.len()` parameters;
/// every remaining parameter must be a buffer, which is allocated zero-filled (destination
/// passing, as Relax's call_tir) and returned as a Tensor of the buffer's dtype and shape, in
/// parameter order.
pub fn run_prim_func(name: &str, func: &PrimFunc, args: Vec<PrimArg>) -> Result<Vec<Tensor>, InterpError> {
    let err = |message: String| InterpError { function: name.to_string(), node: None, message };
    let program = Compiler::new(func).and_then(|c| c.compile()).map_err(err)?;
    let num_args = args.len();
    let mut ctx = bind_args(func, &program, args).map_err(err)?;
    (program.body)(&mut ctx);
    if let Some(m) = ctx.err.take() {
        return Err(err(m));
    }
    let mut out = Vec::new();
    for &p in &func.params()[num_args..] {
        if let Param::Buf(b) = p {
            let buf = func.buf(b);
            let slot = program.slot[b.index()];
            let data = ctx.take_storage(slot);
            out.push(to_tensor(buf, data).map_err(err)?);
        }
    }
    Ok(out)
}

/// How many loop nests of `func` run on the block path (see `prim/block.rs`); the rest run on
/// the scalar closures. For tests and benchmarks that must know which path they measure.
pub fn block_nest_count(func: &PrimFunc) -> Result<usize, String> {
    Ok(Compiler::new(func)?.compile()?.n_block_nests)
}

/// How many of those are initialised reductions run as one nest with their outer loops (see
/// `prim/block.rs`, `try_compile_reduce_nest`). For tests that must know which shape ran.
pub fn reduce_nest_count(func: &PrimFunc) -> Result<usize, String> {
    Ok(Compiler::new(func)?.compile()?.n_reduce_nests)
}

// ---- runtime state ----

/// The frame: variable slots, buffer storage, and the first error.
struct Ctx {
    ints: Vec<i64>,
    floats: Vec<f64>,
    f32s: Vec<Vec<f32>>,
    f64s: Vec<Vec<f64>>,
    i64s: Vec<Vec<i64>>,
    err: Option<String>,
    /// Scratch registers of each block-compiled nest ([`block`]).
    nests: Vec<block::Scratch>,
}

impl Ctx {
    #[cold]
    #[inline(never)]
    fn fail(&mut self, msg: String) {
        if self.err.is_none() {
            self.err = Some(msg);
        }
    }

    fn storage_len(&self, s: Slot) -> usize {
        match s.class {
            Class::F32 => self.f32s[s.index].len(),
            Class::F64 => self.f64s[s.index].len(),
            Class::I64 => self.i64s[s.index].len(),
        }
    }

    fn take_storage(&mut self, s: Slot) -> Storage {
        match s.class {
            Class::F32 => Storage::F32(std::mem::take(&mut self.f32s[s.index])),
            Class::F64 => Storage::F64(std::mem::take(&mut self.f64s[s.index])),
            Class::I64 => Storage::I64(std::mem::take(&mut self.i64s[s.index])),
        }
    }
}

/// A storage class (see the module docs for why three).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Class {
    F32,
    F64,
    I64,
}

fn class_of(d: DType) -> Class {
    match d {
        DType::F32 => Class::F32,
        DType::F16 | DType::F64 => Class::F64,
        _ => Class::I64,
    }
}

/// Where a buffer's elements live: a class and an index into that class's storage list.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
struct Slot {
    class: Class,
    index: usize,
}

enum Storage {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I64(Vec<i64>),
}

// ---- compiled code ----

type Fx<T> = Box<dyn Fn(&mut Ctx) -> T>;
type SFn = Box<dyn Fn(&mut Ctx)>;

/// A compiled expression, by value class.
enum CE {
    I(Fx<i64>),
    F(Fx<f64>),
    VI(Fx<Vec<i64>>),
    VF(Fx<Vec<f64>>),
}

/// A scalar integer operand: leaves are read inline.
enum IOp {
    Var(usize),
    Const(i64),
    Fn(Fx<i64>),
}

impl IOp {
    #[inline(always)]
    fn get(&self, c: &mut Ctx) -> i64 {
        match self {
            IOp::Var(v) => c.ints[*v],
            IOp::Const(k) => *k,
            IOp::Fn(f) => f(c),
        }
    }
}

/// A scalar float operand: leaves are read inline.
enum FOp {
    Var(usize),
    Const(f64),
    Fn(Fx<f64>),
}

impl FOp {
    #[inline(always)]
    fn get(&self, c: &mut Ctx) -> f64 {
        match self {
            FOp::Var(v) => c.floats[*v],
            FOp::Const(k) => *k,
            FOp::Fn(f) => f(c),
        }
    }
}

enum IArgs {
    S(IOp, IOp),
    V(Fx<Vec<i64>>, Fx<Vec<i64>>),
}

enum FArgs {
    S(FOp, FOp),
    V(Fx<Vec<f64>>, Fx<Vec<f64>>),
}

enum IArg {
    S(IOp),
    V(Fx<Vec<i64>>),
}

enum FArg {
    S(FOp),
    V(Fx<Vec<f64>>),
}

/// The compiled function.
struct Program {
    body: SFn,
    /// Storage slot of every buffer (views share their root's).
    slot: Vec<Slot>,
    /// Number of storage slots per class.
    counts: [usize; 3],
    /// Number of block-compiled nests (scratch slots).
    n_nests: usize,
    /// Number of them that run as such (the rest are the fallback of an enclosing nest).
    n_block_nests: usize,
    /// Number of initialised reductions among them.
    n_reduce_nests: usize,
}

// ---- wrapping and rounding, as types so that each width compiles to its own code ----

trait Wrap: 'static {
    fn w(v: i64) -> i64;
}
macro_rules! wraps {
    ($($name:ident => |$v:ident| $e:expr;)*) => {$(
        struct $name;
        impl Wrap for $name {
            #[inline(always)]
            fn w($v: i64) -> i64 { $e }
        }
    )*};
}
wraps! {
    W64 => |v| v;
    WI8 => |v| v as i8 as i64;
    WI16 => |v| v as i16 as i64;
    WI32 => |v| v as i32 as i64;
    WU8 => |v| v as u8 as i64;
    WU16 => |v| v as u16 as i64;
    WU32 => |v| v as u32 as i64;
    WBool => |v| v & 1;
}

/// Runs `$body` with `$W` the wrap type of integer dtype `$d`.
macro_rules! with_wrap {
    ($d:expr, $W:ident => $body:expr) => {
        match $d {
            DType::I8 => {
                type $W = WI8;
                $body
            }
            DType::I16 => {
                type $W = WI16;
                $body
            }
            DType::I32 => {
                type $W = WI32;
                $body
            }
            DType::U8 => {
                type $W = WU8;
                $body
            }
            DType::U16 => {
                type $W = WU16;
                $body
            }
            DType::U32 => {
                type $W = WU32;
                $body
            }
            DType::Bool => {
                type $W = WBool;
                $body
            }
            _ => {
                type $W = W64;
                $body
            }
        }
    };
}

/// `v` wrapped to integer dtype `d`.
fn wrap(v: i64, d: DType) -> i64 {
    with_wrap!(d, W => W::w(v))
}

trait Round: 'static {
    fn r(v: f64) -> f64;
    /// An f32 function applied at this width (f16 through f32, as the graph kernels do).
    fn via_f32(v: f64, f: impl Fn(f32) -> f32) -> f64;
}
struct R32;
struct R16;
struct R64;
impl Round for R32 {
    #[inline(always)]
    fn r(v: f64) -> f64 {
        v as f32 as f64
    }
    #[inline(always)]
    fn via_f32(v: f64, f: impl Fn(f32) -> f32) -> f64 {
        f(v as f32) as f64
    }
}
impl Round for R16 {
    #[inline(always)]
    fn r(v: f64) -> f64 {
        f16::from_f64(v).to_f64()
    }
    #[inline(always)]
    fn via_f32(v: f64, f: impl Fn(f32) -> f32) -> f64 {
        f16::from_f32(f(v as f32)).to_f64()
    }
}
impl Round for R64 {
    #[inline(always)]
    fn r(v: f64) -> f64 {
        v
    }
    #[inline(always)]
    fn via_f32(v: f64, f: impl Fn(f32) -> f32) -> f64 {
        // Not used: f64 intrinsics compute in f64.
        f(v as f32) as f64
    }
}

macro_rules! with_round {
    ($d:expr, $R:ident => $body:expr) => {
        match $d {
            DType::F32 => {
                type $R = R32;
                $body
            }
            DType::F16 => {
                type $R = R16;
                $body
            }
            _ => {
                type $R = R64;
                $body
            }
        }
    };
}

fn round_to(v: f64, d: DType) -> f64 {
    with_round!(d, R => R::r(v))
}

// ---- generic closure builders ----

fn bx<T: 'static>(f: impl Fn(&mut Ctx) -> T + 'static) -> Fx<T> {
    Box::new(f)
}

/// A binary integer operation; `None` from `f` is a division by zero.
fn build_ibin<F>(f: F, args: IArgs, msg: Arc<str>) -> CE
where
    F: Fn(i64, i64) -> Option<i64> + Copy + 'static,
{
    match args {
        IArgs::S(a, b) => CE::I(bx(move |c| {
            let (x, y) = (a.get(c), b.get(c));
            match f(x, y) {
                Some(v) => v,
                None => {
                    c.fail(msg.to_string());
                    0
                }
            }
        })),
        IArgs::V(a, b) => CE::VI(bx(move |c| {
            let mut x = a(c);
            let y = b(c);
            let mut bad = false;
            for (p, &q) in x.iter_mut().zip(&y) {
                *p = f(*p, q).unwrap_or_else(|| {
                    bad = true;
                    0
                });
            }
            if bad {
                c.fail(msg.to_string());
            }
            x
        })),
    }
}

fn build_fbin<F>(f: F, args: FArgs) -> CE
where
    F: Fn(f64, f64) -> f64 + Copy + 'static,
{
    match args {
        FArgs::S(a, b) => CE::F(bx(move |c| {
            let x = a.get(c);
            f(x, b.get(c))
        })),
        FArgs::V(a, b) => CE::VF(bx(move |c| {
            let mut x = a(c);
            let y = b(c);
            for (p, &q) in x.iter_mut().zip(&y) {
                *p = f(*p, q);
            }
            x
        })),
    }
}

fn build_fcmp<F>(f: F, args: FArgs) -> CE
where
    F: Fn(f64, f64) -> bool + Copy + 'static,
{
    match args {
        FArgs::S(a, b) => CE::I(bx(move |c| {
            let x = a.get(c);
            f(x, b.get(c)) as i64
        })),
        FArgs::V(a, b) => CE::VI(bx(move |c| {
            let x = a(c);
            let y = b(c);
            x.iter().zip(&y).map(|(&p, &q)| f(p, q) as i64).collect()
        })),
    }
}

fn build_iun<F: Fn(i64) -> i64 + Copy + 'static>(f: F, a: IArg) -> CE {
    match a {
        IArg::S(a) => CE::I(bx(move |c| f(a.get(c)))),
        IArg::V(a) => CE::VI(bx(move |c| a(c).into_iter().map(f).collect())),
    }
}

fn build_fun<F: Fn(f64) -> f64 + Copy + 'static>(f: F, a: FArg) -> CE {
    match a {
        FArg::S(a) => CE::F(bx(move |c| f(a.get(c)))),
        FArg::V(a) => CE::VF(bx(move |c| a(c).into_iter().map(f).collect())),
    }
}

fn build_f2i<F: Fn(f64) -> i64 + Copy + 'static>(f: F, a: FArg) -> CE {
    match a {
        FArg::S(a) => CE::I(bx(move |c| f(a.get(c)))),
        FArg::V(a) => CE::VI(bx(move |c| a(c).into_iter().map(f).collect())),
    }
}

fn build_i2f<F: Fn(i64) -> f64 + Copy + 'static>(f: F, a: IArg) -> CE {
    match a {
        IArg::S(a) => CE::F(bx(move |c| f(a.get(c)))),
        IArg::V(a) => CE::VF(bx(move |c| a(c).into_iter().map(f).collect())),
    }
}

fn select<T: 'static>(k: Fx<i64>, a: Fx<T>, b: Fx<T>) -> Fx<T> {
    bx(move |c| {
        let k = k(c);
        let x = a(c);
        let y = b(c);
        if k != 0 {
            x
        } else {
            y
        }
    })
}

fn vselect<T: Copy + 'static>(k: Fx<Vec<i64>>, a: Fx<Vec<T>>, b: Fx<Vec<T>>) -> Fx<Vec<T>> {
    bx(move |c| {
        let k = k(c);
        let mut x = a(c);
        let y = b(c);
        for ((p, &q), &k) in x.iter_mut().zip(&y).zip(&k) {
            if k == 0 {
                *p = q;
            }
        }
        x
    })
}

fn broadcast<T: Copy + 'static>(a: Fx<T>, lanes: usize) -> Fx<Vec<T>> {
    bx(move |c| vec![a(c); lanes])
}

fn let_in<T: 'static>(bind: SFn, body: Fx<T>) -> Fx<T> {
    bx(move |c| {
        bind(c);
        body(c)
    })
}

// ---- integer operator semantics ----

#[inline(always)]
fn floordiv_i(a: i64, b: i64) -> i64 {
    let q = a.wrapping_div(b);
    if a.wrapping_rem(b) != 0 && ((a < 0) != (b < 0)) {
        q.wrapping_sub(1)
    } else {
        q
    }
}

#[inline(always)]
fn floormod_i(a: i64, b: i64) -> i64 {
    let r = a.wrapping_rem(b);
    if r != 0 && ((r < 0) != (b < 0)) {
        r.wrapping_add(b)
    } else {
        r
    }
}

/// Shift left by `n` at `bits` width (0 outside `0..bits`), then wrapped by the caller.
#[inline(always)]
fn shl(a: i64, n: i64, bits: i64) -> i64 {
    if (0..bits).contains(&n) {
        a.wrapping_shl(n as u32)
    } else {
        0
    }
}

/// Shift right: arithmetic on `signed`, logical on unsigned (values are non-negative, except
/// u64 held as bits).
#[inline(always)]
fn shr(a: i64, n: i64, bits: i64, u64_: bool) -> i64 {
    if u64_ {
        if (0..64).contains(&n) {
            ((a as u64) >> n) as i64
        } else {
            0
        }
    } else if (0..bits).contains(&n) {
        a >> n
    } else if a < 0 {
        -1
    } else {
        0
    }
}

fn bits_of(d: DType) -> i64 {
    (d.size_bytes() * 8) as i64
}

/// Where a binary operator's element function goes: into a scalar closure ([`IArgs`],
/// [`FArgs`]) or into a block instruction ([`block`]). One table of operator semantics
/// ([`int_arith`], [`float_bin`]) serves both, so the block path computes what the scalar
/// path computes.
trait IntSink {
    type Out;
    /// `f` returns `None` for a division by zero.
    fn ibin<F: Fn(i64, i64) -> Option<i64> + Copy + 'static>(self, f: F) -> Self::Out;
}

trait FloatSink {
    type Out;
    fn fbin<F: Fn(f64, f64) -> f64 + Copy + 'static>(self, f: F) -> Self::Out;
    fn fcmp<F: Fn(f64, f64) -> bool + Copy + 'static>(self, f: F) -> Self::Out;
}

impl IntSink for (IArgs, Arc<str>) {
    type Out = CE;
    fn ibin<F: Fn(i64, i64) -> Option<i64> + Copy + 'static>(self, f: F) -> CE {
        build_ibin(f, self.0, self.1)
    }
}

impl FloatSink for FArgs {
    type Out = CE;
    fn fbin<F: Fn(f64, f64) -> f64 + Copy + 'static>(self, f: F) -> CE {
        build_fbin(f, self)
    }
    fn fcmp<F: Fn(f64, f64) -> bool + Copy + 'static>(self, f: F) -> CE {
        build_fcmp(f, self)
    }
}

/// Arithmetic binary operator on integer dtype `d`.
fn int_arith<S: IntSink>(op: BinOp, d: DType, sink: S) -> S::Out {
    macro_rules! go {
        ($f:expr) => {
            sink.ibin($f)
        };
    }
    if d == DType::U64 {
        let u = |v: i64| v as u64;
        match op {
            BinOp::Div | BinOp::FloorDiv => return go!(move |x, y| (y != 0).then(|| (u(x) / u(y)) as i64)),
            BinOp::Mod | BinOp::FloorMod => return go!(move |x, y| (y != 0).then(|| (u(x) % u(y)) as i64)),
            BinOp::Min => return go!(move |x, y| Some(u(x).min(u(y)) as i64)),
            BinOp::Max => return go!(move |x, y| Some(u(x).max(u(y)) as i64)),
            _ => {}
        }
    }
    with_wrap!(d, W => match op {
        BinOp::Add => go!(|x: i64, y: i64| Some(W::w(x.wrapping_add(y)))),
        BinOp::Sub => go!(|x: i64, y: i64| Some(W::w(x.wrapping_sub(y)))),
        BinOp::Mul => go!(|x: i64, y: i64| Some(W::w(x.wrapping_mul(y)))),
        BinOp::Div => go!(|x: i64, y: i64| (y != 0).then(|| W::w(x.wrapping_div(y)))),
        BinOp::Mod => go!(|x: i64, y: i64| (y != 0).then(|| W::w(x.wrapping_rem(y)))),
        BinOp::FloorDiv => go!(|x: i64, y: i64| (y != 0).then(|| W::w(floordiv_i(x, y)))),
        BinOp::FloorMod => go!(|x: i64, y: i64| (y != 0).then(|| W::w(floormod_i(x, y)))),
        BinOp::Min => go!(|x: i64, y: i64| Some(x.min(y))),
        BinOp::Max => go!(|x: i64, y: i64| Some(x.max(y))),
        BinOp::Eq => go!(|x: i64, y: i64| Some((x == y) as i64)),
        BinOp::Ne => go!(|x: i64, y: i64| Some((x != y) as i64)),
        BinOp::Lt if d == DType::U64 => go!(|x: i64, y: i64| Some(((x as u64) < (y as u64)) as i64)),
        BinOp::Le if d == DType::U64 => go!(|x: i64, y: i64| Some(((x as u64) <= (y as u64)) as i64)),
        BinOp::Gt if d == DType::U64 => go!(|x: i64, y: i64| Some(((x as u64) > (y as u64)) as i64)),
        BinOp::Ge if d == DType::U64 => go!(|x: i64, y: i64| Some(((x as u64) >= (y as u64)) as i64)),
        BinOp::Lt => go!(|x: i64, y: i64| Some((x < y) as i64)),
        BinOp::Le => go!(|x: i64, y: i64| Some((x <= y) as i64)),
        BinOp::Gt => go!(|x: i64, y: i64| Some((x > y) as i64)),
        BinOp::Ge => go!(|x: i64, y: i64| Some((x >= y) as i64)),
        BinOp::And => go!(|x: i64, y: i64| Some(x & y & 1)),
        BinOp::Or => go!(|x: i64, y: i64| Some((x | y) & 1)),
    })
}

/// Binary operator on float dtype `d`.
fn float_bin<S: FloatSink>(op: BinOp, d: DType, sink: S) -> S::Out {
    with_round!(d, R => match op {
        BinOp::Add => sink.fbin(|x, y| R::r(x + y)),
        BinOp::Sub => sink.fbin(|x, y| R::r(x - y)),
        BinOp::Mul => sink.fbin(|x, y| R::r(x * y)),
        BinOp::Div => sink.fbin(|x, y| R::r(x / y)),
        BinOp::Mod => sink.fbin(|x, y| R::r(x % y)),
        BinOp::FloorDiv => sink.fbin(|x, y| R::r(R::r(x / y).floor())),
        BinOp::FloorMod => sink.fbin(|x, y| R::r(x - R::r(R::r(x / y).floor() * y))),
        BinOp::Min => sink.fbin(|x: f64, y: f64| if x.is_nan() || y.is_nan() { f64::NAN } else { x.min(y) }),
        BinOp::Max => sink.fbin(|x: f64, y: f64| if x.is_nan() || y.is_nan() { f64::NAN } else { x.max(y) }),
        BinOp::Eq => sink.fcmp(|x, y| x == y),
        BinOp::Ne => sink.fcmp(|x, y| x != y),
        BinOp::Lt => sink.fcmp(|x, y| x < y),
        BinOp::Le => sink.fcmp(|x, y| x <= y),
        BinOp::Gt => sink.fcmp(|x, y| x > y),
        BinOp::Ge => sink.fcmp(|x, y| x >= y),
        // The builder allows `and` / `or` on bool only.
        BinOp::And | BinOp::Or => sink.fcmp(|_, _| false),
    })
}

/// Where a function of one operand goes: into a scalar closure ([`Operand`]) or into a block
/// instruction ([`block`]). One table ([`cast_fn`], [`float_unary_intrinsic`],
/// [`int_unary_intrinsic`]) picks the function for both, as [`IntSink`] / [`FloatSink`] do for
/// binary operators. The method names say the operand's and the result's class.
trait UnarySink {
    type Out;
    fn ii<F: Fn(i64) -> i64 + Copy + 'static>(self, f: F) -> Self::Out;
    fn ff<F: Fn(f64) -> f64 + Copy + 'static>(self, f: F) -> Self::Out;
    fn fi<F: Fn(f64) -> i64 + Copy + 'static>(self, f: F) -> Self::Out;
    fn if_<F: Fn(i64) -> f64 + Copy + 'static>(self, f: F) -> Self::Out;
}

/// A compiled operand of a unary function on the scalar path.
enum Operand {
    I(IArg),
    F(FArg),
}

impl Operand {
    fn of(a: CE) -> Operand {
        match a {
            CE::I(a) => Operand::I(IArg::S(IOp::Fn(a))),
            CE::VI(a) => Operand::I(IArg::V(a)),
            CE::F(a) => Operand::F(FArg::S(FOp::Fn(a))),
            CE::VF(a) => Operand::F(FArg::V(a)),
        }
    }
}

const MISTYPED: &str = "internal error: a unary function of a mistyped operand";

impl UnarySink for Operand {
    type Out = Result<CE, String>;
    fn ii<F: Fn(i64) -> i64 + Copy + 'static>(self, f: F) -> Result<CE, String> {
        match self {
            Operand::I(a) => Ok(build_iun(f, a)),
            Operand::F(_) => Err(MISTYPED.into()),
        }
    }
    fn ff<F: Fn(f64) -> f64 + Copy + 'static>(self, f: F) -> Result<CE, String> {
        match self {
            Operand::F(a) => Ok(build_fun(f, a)),
            Operand::I(_) => Err(MISTYPED.into()),
        }
    }
    fn fi<F: Fn(f64) -> i64 + Copy + 'static>(self, f: F) -> Result<CE, String> {
        match self {
            Operand::F(a) => Ok(build_f2i(f, a)),
            Operand::I(_) => Err(MISTYPED.into()),
        }
    }
    fn if_<F: Fn(i64) -> f64 + Copy + 'static>(self, f: F) -> Result<CE, String> {
        match self {
            Operand::I(a) => Ok(build_i2f(f, a)),
            Operand::F(_) => Err(MISTYPED.into()),
        }
    }
}

fn unary(u: Unary) -> impl Fn(f32) -> f32 + Copy {
    move |x| u.apply_f32(x)
}

/// A float intrinsic of one argument of dtype `d` (`None`: not one): `f32` for f32 / f16 (the
/// graph kernels' function), `f64` for f64.
fn float_unary_intrinsic<S: UnarySink>(intr: Intrinsic, d: DType, sink: S) -> Option<S::Out> {
    macro_rules! un {
        ($u:expr, $f64:expr) => {{
            let f: fn(f64) -> f64 = $f64;
            match d {
                DType::F32 => sink.ff(move |x| R32::via_f32(x, unary($u))),
                DType::F16 => sink.ff(move |x| R16::via_f32(x, unary($u))),
                _ => sink.ff(f),
            }
        }};
    }
    macro_rules! plain {
        ($f32:expr, $f64:expr) => {{
            let (f32f, f64f): (fn(f32) -> f32, fn(f64) -> f64) = ($f32, $f64);
            match d {
                DType::F32 => sink.ff(move |x| R32::via_f32(x, f32f)),
                DType::F16 => sink.ff(move |x| R16::via_f32(x, f32f)),
                _ => sink.ff(f64f),
            }
        }};
    }
    Some(match intr {
        Intrinsic::Exp => un!(Unary::Exp, f64::exp),
        Intrinsic::Exp2 => plain!(f32::exp2, f64::exp2),
        Intrinsic::Log => un!(Unary::Log, f64::ln),
        Intrinsic::Log2 => plain!(f32::log2, f64::log2),
        Intrinsic::Log10 => plain!(f32::log10, f64::log10),
        Intrinsic::Sqrt => un!(Unary::Sqrt, f64::sqrt),
        Intrinsic::Rsqrt => plain!(|x: f32| 1.0 / x.sqrt(), |x: f64| 1.0 / x.sqrt()),
        Intrinsic::Tanh => un!(Unary::Tanh, f64::tanh),
        Intrinsic::Sigmoid => un!(Unary::Sigmoid, |x: f64| 1.0 / (1.0 + (-x).exp())),
        Intrinsic::Erf => un!(Unary::Erf, erf),
        Intrinsic::Sin => un!(Unary::Sin, f64::sin),
        Intrinsic::Cos => un!(Unary::Cos, f64::cos),
        Intrinsic::Tan => un!(Unary::Tan, f64::tan),
        Intrinsic::Asin => un!(Unary::Asin, f64::asin),
        Intrinsic::Acos => un!(Unary::Acos, f64::acos),
        Intrinsic::Atan => un!(Unary::Atan, f64::atan),
        Intrinsic::Sinh => un!(Unary::Sinh, f64::sinh),
        Intrinsic::Cosh => un!(Unary::Cosh, f64::cosh),
        Intrinsic::Asinh => un!(Unary::Asinh, f64::asinh),
        Intrinsic::Acosh => un!(Unary::Acosh, f64::acosh),
        Intrinsic::Atanh => un!(Unary::Atanh, f64::atanh),
        Intrinsic::Floor => un!(Unary::Floor, f64::floor),
        Intrinsic::Ceil => un!(Unary::Ceil, f64::ceil),
        Intrinsic::Round => un!(Unary::Round, f64::round_ties_even),
        Intrinsic::Trunc => plain!(f32::trunc, f64::trunc),
        Intrinsic::Abs => un!(Unary::Abs, f64::abs),
        Intrinsic::Neg => un!(Unary::Negative, |x: f64| -x),
        Intrinsic::IsNan => sink.fi(|x| x.is_nan() as i64),
        Intrinsic::IsInf => sink.fi(|x| x.is_infinite() as i64),
        _ => return None,
    })
}

/// A float intrinsic of two arguments of dtype `d` (`None`: not one).
fn float_binary_intrinsic<S: FloatSink>(intr: Intrinsic, d: DType, sink: S) -> Option<S::Out> {
    macro_rules! bin {
        ($f:expr) => {{
            with_round!(d, R => sink.fbin(|x, y| R::r($f(x, y))))
        }};
    }
    Some(match intr {
        Intrinsic::Pow => match d {
            DType::F64 => bin!(f64::powf),
            _ => bin!(|x: f64, y: f64| Arith::Pow.apply_f32(x as f32, y as f32) as f64),
        },
        Intrinsic::Atan2 => bin!(f64::atan2),
        Intrinsic::Fmod => bin!(|x: f64, y: f64| x % y),
        _ => return None,
    })
}

/// An integer intrinsic of one argument of dtype `d` (`None`: not one).
fn int_unary_intrinsic<S: UnarySink>(intr: Intrinsic, d: DType, sink: S) -> Option<S::Out> {
    Some(with_wrap!(d, W => match intr {
        Intrinsic::BitNot => sink.ii(|x| W::w(!x)),
        Intrinsic::Neg => sink.ii(|x| W::w(x.wrapping_neg())),
        Intrinsic::Abs if d.is_uint() => sink.ii(|x| x),
        Intrinsic::Abs => sink.ii(|x| W::w(x.wrapping_abs())),
        _ => return None,
    }))
}

/// An integer intrinsic of two arguments of dtype `d` (`None`: not one).
fn int_binary_intrinsic<S: IntSink>(intr: Intrinsic, d: DType, sink: S) -> Option<S::Out> {
    let bits = bits_of(d);
    let u64_ = d == DType::U64;
    Some(with_wrap!(d, W => match intr {
        Intrinsic::BitAnd => sink.ibin(|x, y| Some(x & y)),
        Intrinsic::BitOr => sink.ibin(|x, y| Some(x | y)),
        Intrinsic::BitXor => sink.ibin(|x, y| Some(x ^ y)),
        Intrinsic::ShiftLeft => sink.ibin(move |x, y| Some(W::w(shl(x, y, bits)))),
        Intrinsic::ShiftRight => sink.ibin(move |x, y| Some(W::w(shr(x, y, bits, u64_)))),
        _ => return None,
    }))
}

fn float_intrinsic(intr: Intrinsic, d: DType, mut args: Vec<FArg>) -> Result<CE, String> {
    let unknown = || format!("`{}` of a float", intr.name());
    if args.len() == 2 {
        let b = args.pop().ok_or("missing argument")?;
        let a = args.pop().ok_or("missing argument")?;
        let fa = match (a, b) {
            (FArg::S(a), FArg::S(b)) => FArgs::S(a, b),
            (FArg::V(a), FArg::V(b)) => FArgs::V(a, b),
            _ => return Err("internal error: mixed scalar and vector arguments".into()),
        };
        return float_binary_intrinsic(intr, d, fa).ok_or_else(unknown);
    }
    let a = args.pop().ok_or("missing argument")?;
    float_unary_intrinsic(intr, d, Operand::F(a)).ok_or_else(unknown)?
}

fn int_intrinsic(intr: Intrinsic, d: DType, mut args: Vec<IArg>, msg: Arc<str>) -> Result<CE, String> {
    let unknown = || format!("`{}` of an integer", intr.name());
    let one = |args: &mut Vec<IArg>| args.pop().ok_or_else(|| "missing argument".to_string());
    if intr.arity() == 2 {
        let b = one(&mut args)?;
        let a = one(&mut args)?;
        let ia = match (a, b) {
            (IArg::S(a), IArg::S(b)) => IArgs::S(a, b),
            (IArg::V(a), IArg::V(b)) => IArgs::V(a, b),
            _ => return Err("internal error: mixed scalar and vector arguments".into()),
        };
        return int_binary_intrinsic(intr, d, (ia, msg)).ok_or_else(unknown);
    }
    let a = one(&mut args)?;
    int_unary_intrinsic(intr, d, Operand::I(a)).ok_or_else(unknown)?
}

/// A cast from `from` to `to` of a compiled operand.
fn cast(from: DType, to: DType, a: CE) -> Result<CE, String> {
    cast_fn(from, to, Operand::of(a))
}

/// The conversion from `from` to `to`: float → integer saturates like Rust's `as`, integer →
/// float rounds to nearest, integer → integer wraps, anything → `bool` is `x != 0`.
fn cast_fn<S: UnarySink>(from: DType, to: DType, sink: S) -> S::Out {
    match (from.is_float(), to.is_float()) {
        (false, false) => {
            if to == DType::Bool {
                return sink.ii(|x| (x != 0) as i64);
            }
            if from == DType::Bool {
                return sink.ii(|x| x);
            }
            with_wrap!(to, W => sink.ii(W::w))
        }
        (true, true) => with_round!(to, R => sink.ff(R::r)),
        (false, true) => match (from == DType::U64, to) {
            (true, DType::F32) => sink.if_(|x| (x as u64) as f32 as f64),
            (true, DType::F16) => sink.if_(|x| f16::from_f64((x as u64) as f64).to_f64()),
            (true, _) => sink.if_(|x| (x as u64) as f64),
            (false, DType::F32) => sink.if_(|x| x as f32 as f64),
            (false, DType::F16) => sink.if_(|x| f16::from_f64(x as f64).to_f64()),
            (false, _) => sink.if_(|x| x as f64),
        },
        (true, false) => match to {
            DType::Bool => sink.fi(|x| (x != 0.0) as i64),
            DType::I8 => sink.fi(|x| x as i8 as i64),
            DType::I16 => sink.fi(|x| x as i16 as i64),
            DType::I32 => sink.fi(|x| x as i32 as i64),
            DType::U8 => sink.fi(|x| x as u8 as i64),
            DType::U16 => sink.fi(|x| x as u16 as i64),
            DType::U32 => sink.fi(|x| x as u32 as i64),
            DType::U64 => sink.fi(|x| x as u64 as i64),
            _ => sink.fi(|x| x as i64),
        },
    }
}

// ---- buffer access ----

enum Idx {
    Var(usize),
    Const(i64),
    Fn(Fx<i64>),
    Vec(Fx<Vec<i64>>),
}

/// One dimension of an access: the index, the extent it must stay under, the stride.
struct Dim {
    idx: Idx,
    extent: i64,
    stride: i64,
}

/// A load or store of one buffer: everything but the storage class.
struct Access {
    slot: usize,
    dims: Box<[Dim]>,
    offset: i64,
    lanes: usize,
    buf: Arc<Buffer>,
    /// `load` / `store`, and where (for messages).
    what: &'static str,
    at: Arc<str>,
}

impl Access {
    /// The flat offset of a scalar access, or `None` (error recorded) when out of bounds.
    #[inline(always)]
    fn offset(&self, c: &mut Ctx) -> Option<usize> {
        let mut off = self.offset;
        for d in self.dims.iter() {
            let i = match &d.idx {
                Idx::Var(v) => c.ints[*v],
                Idx::Const(k) => *k,
                Idx::Fn(f) => f(c),
                Idx::Vec(_) => {
                    self.oob(c);
                    return None;
                }
            };
            if i < 0 || i >= d.extent {
                self.oob(c);
                return None;
            }
            off += i * d.stride;
        }
        Some(off as usize)
    }

    /// The flat offsets of a vector access, lane by lane.
    fn offsets(&self, c: &mut Ctx) -> Option<Vec<usize>> {
        let mut offs = vec![self.offset; self.lanes];
        for d in self.dims.iter() {
            let vals: Vec<i64> = match &d.idx {
                Idx::Var(v) => vec![c.ints[*v]; self.lanes],
                Idx::Const(k) => vec![*k; self.lanes],
                Idx::Fn(f) => vec![f(c); self.lanes],
                Idx::Vec(f) => f(c),
            };
            for (o, &i) in offs.iter_mut().zip(&vals) {
                if i < 0 || i >= d.extent {
                    self.oob(c);
                    return None;
                }
                *o += i * d.stride;
            }
        }
        Some(offs.into_iter().map(|o| o as usize).collect())
    }

    #[cold]
    #[inline(never)]
    fn oob(&self, c: &mut Ctx) {
        if c.err.is_some() {
            return;
        }
        let mut shown = Vec::new();
        for d in self.dims.iter() {
            shown.push(match &d.idx {
                Idx::Var(v) => c.ints[*v].to_string(),
                Idx::Const(k) => k.to_string(),
                Idx::Fn(f) => f(c).to_string(),
                Idx::Vec(f) => format!("{:?}", f(c)),
            });
        }
        let shape: Vec<String> = self.buf.shape.iter().map(|d| d.to_string()).collect();
        let shape = if shape.len() == 1 { format!("({},)", shape[0]) } else { format!("({})", shape.join(", ")) };
        c.fail(format!(
            "out-of-bounds {} `%{}[{}]` (shape {shape}) {}",
            self.what,
            self.buf.name,
            shown.join(", "),
            self.at
        ));
    }

    #[cold]
    #[inline(never)]
    fn out_of_scope(&self, c: &mut Ctx) {
        c.fail(format!("buffer `%{}` accessed outside its scope {}", self.buf.name, self.at));
    }
}

fn load(class: Class, a: Access) -> CE {
    let s = a.slot;
    match (class, a.lanes > 1) {
        (Class::F32, false) => CE::F(bx(move |c| match a.offset(c) {
            Some(o) => match c.f32s[s].get(o) {
                Some(&v) => v as f64,
                None => {
                    a.out_of_scope(c);
                    0.0
                }
            },
            None => 0.0,
        })),
        (Class::F64, false) => CE::F(bx(move |c| match a.offset(c) {
            Some(o) => match c.f64s[s].get(o) {
                Some(&v) => v,
                None => {
                    a.out_of_scope(c);
                    0.0
                }
            },
            None => 0.0,
        })),
        (Class::I64, false) => CE::I(bx(move |c| match a.offset(c) {
            Some(o) => match c.i64s[s].get(o) {
                Some(&v) => v,
                None => {
                    a.out_of_scope(c);
                    0
                }
            },
            None => 0,
        })),
        (Class::F32, true) => CE::VF(bx(move |c| {
            let offs = a.offsets(c).unwrap_or_default();
            let st = &c.f32s[s];
            let v: Option<Vec<f64>> = offs.iter().map(|&o| st.get(o).map(|&x| x as f64)).collect();
            v.unwrap_or_else(|| {
                a.out_of_scope(c);
                vec![0.0; a.lanes]
            })
        })),
        (Class::F64, true) => CE::VF(bx(move |c| {
            let offs = a.offsets(c).unwrap_or_default();
            let st = &c.f64s[s];
            let v: Option<Vec<f64>> = offs.iter().map(|&o| st.get(o).copied()).collect();
            v.unwrap_or_else(|| {
                a.out_of_scope(c);
                vec![0.0; a.lanes]
            })
        })),
        (Class::I64, true) => CE::VI(bx(move |c| {
            let offs = a.offsets(c).unwrap_or_default();
            let st = &c.i64s[s];
            let v: Option<Vec<i64>> = offs.iter().map(|&o| st.get(o).copied()).collect();
            v.unwrap_or_else(|| {
                a.out_of_scope(c);
                vec![0; a.lanes]
            })
        })),
    }
}

fn store(class: Class, a: Access, value: CE) -> Result<SFn, String> {
    let s = a.slot;
    macro_rules! scalar {
        ($list:ident, $v:ident, $conv:expr, $val:expr) => {{
            let val = $val;
            Box::new(move |c: &mut Ctx| {
                let $v = val.get(c);
                if let Some(o) = a.offset(c) {
                    match c.$list[s].get_mut(o) {
                        Some(p) => *p = $conv,
                        None => a.out_of_scope(c),
                    }
                }
            })
        }};
    }
    macro_rules! vector {
        ($list:ident, $v:ident, $conv:expr, $val:expr) => {{
            let val = $val;
            Box::new(move |c: &mut Ctx| {
                let vals = val(c);
                if let Some(offs) = a.offsets(c) {
                    let st = &mut c.$list[s];
                    if offs.iter().any(|&o| o >= st.len()) {
                        a.out_of_scope(c);
                        return;
                    }
                    for (&o, &$v) in offs.iter().zip(&vals) {
                        st[o] = $conv;
                    }
                }
            })
        }};
    }
    let op: SFn = match (class, value) {
        (Class::F32, CE::F(f)) => scalar!(f32s, v, v as f32, FOp::Fn(f)),
        (Class::F64, CE::F(f)) => scalar!(f64s, v, v, FOp::Fn(f)),
        (Class::I64, CE::I(f)) => scalar!(i64s, v, v, IOp::Fn(f)),
        (Class::F32, CE::VF(f)) => vector!(f32s, v, v as f32, f),
        (Class::F64, CE::VF(f)) => vector!(f64s, v, v, f),
        (Class::I64, CE::VI(f)) => vector!(i64s, v, v, f),
        _ => return Err("internal error: store of a mistyped value".into()),
    };
    Ok(op)
}

/// Runs `ops` in order, stopping at the first error.
fn block(mut ops: Vec<SFn>) -> SFn {
    match ops.len() {
        0 => Box::new(|_| {}),
        1 => ops.pop().unwrap_or_else(|| Box::new(|_| {})),
        _ => {
            let ops = ops.into_boxed_slice();
            Box::new(move |c| {
                for op in ops.iter() {
                    op(c);
                    if c.err.is_some() {
                        return;
                    }
                }
            })
        }
    }
}

// ---- the compiler ----

struct Compiler<'f> {
    f: &'f PrimFunc,
    exprs: Vec<Option<CE>>,
    /// Compiled `store`, `eval`, `for` and `if` statements (the rest are flattened).
    leaves: Vec<Option<SFn>>,
    slot: Vec<Slot>,
    counts: [usize; 3],
    /// The statement each expression belongs to.
    owner: Vec<Option<StmtId>>,
    /// Message suffix per statement (`in store to `%B` (s3)`), made on demand.
    at: Vec<Option<Arc<str>>>,
    bufs: Vec<Arc<Buffer>>,
    /// `for` statements that are the whole body of another `for` (compiled with it).
    inner_of_nest: Vec<bool>,
    /// Statements compiled to a block nest.
    block_leaf: Vec<bool>,
    /// Block nests (scratch slots) made, and how many of them became the fallback of an
    /// enclosing block nest.
    n_nests: usize,
    n_subsumed: usize,
    n_reduce_nests: usize,
}

impl<'f> Compiler<'f> {
    fn new(f: &'f PrimFunc) -> Result<Compiler<'f>, String> {
        check_well_formed(f)?;
        check_depth(f)?;
        let (slot, counts) = assign_slots(f)?;
        let mut owner = vec![None; f.exprs().len()];
        let mut tmp = Vec::new();
        for s in 0..f.stmts().len() {
            tmp.clear();
            f.stmt_exprs(StmtId(s as u32), &mut tmp);
            for &e in &tmp {
                owner[e.index()] = Some(StmtId(s as u32));
            }
        }
        for e in (0..f.exprs().len()).rev() {
            tmp.clear();
            f.expr_operands(PExprId(e as u32), &mut tmp);
            let o = owner[e];
            for &x in &tmp {
                if owner[x.index()].is_none() {
                    owner[x.index()] = o;
                }
            }
        }
        let mut inner_of_nest = vec![false; f.stmts().len()];
        for st in f.stmts() {
            if let StmtKind::For { body, .. } = st.kind {
                if body.index() < inner_of_nest.len() && matches!(f.stmt(body).kind, StmtKind::For { .. }) {
                    inner_of_nest[body.index()] = true;
                }
            }
        }
        Ok(Compiler {
            f,
            inner_of_nest,
            block_leaf: vec![false; f.stmts().len()],
            n_nests: 0,
            n_subsumed: 0,
            n_reduce_nests: 0,
            exprs: Vec::with_capacity(f.exprs().len()),
            leaves: Vec::with_capacity(f.stmts().len()),
            slot,
            counts,
            owner,
            at: vec![None; f.stmts().len()],
            bufs: f.bufs().iter().cloned().map(Arc::new).collect(),
        })
    }

    fn describe(&self, s: StmtId) -> String {
        let f = self.f;
        let what = match f.stmt(s).kind {
            StmtKind::For { var, .. } => format!("in loop `%{}`", f.var(var).name),
            StmtKind::Store { buf, .. } => format!("in store to `%{}`", f.buf(buf).name),
            StmtKind::Let { var, .. } => format!("in let `%{}`", f.var(var).name),
            StmtKind::If { .. } => "in if".to_string(),
            StmtKind::Seq(_) => "in sequence".to_string(),
            StmtKind::Alloc { buf, .. } => format!("in alloc `%{}`", f.buf(buf).name),
            StmtKind::Decl { buf, .. } => format!("in decl `%{}`", f.buf(buf).name),
            StmtKind::Evaluate(_) => "in eval".to_string(),
            StmtKind::Attr { key, .. } => format!("in attr \"{}\"", f.string(key)),
        };
        format!("{what} ({s})")
    }

    fn at_stmt(&mut self, s: StmtId) -> Arc<str> {
        if let Some(a) = &self.at[s.index()] {
            return a.clone();
        }
        let a: Arc<str> = self.describe(s).into();
        self.at[s.index()] = Some(a.clone());
        a
    }

    fn at_expr(&mut self, e: PExprId) -> Arc<str> {
        match self.owner[e.index()] {
            Some(s) => self.at_stmt(s),
            None => format!("in expression {e}").into(),
        }
    }

    fn take(&mut self, e: PExprId) -> Result<CE, String> {
        self.exprs[e.index()].take().ok_or_else(|| format!("expression {e} is used twice (expressions are trees)"))
    }

    fn take_i(&mut self, e: PExprId) -> Result<Fx<i64>, String> {
        match self.take(e)? {
            CE::I(f) => Ok(f),
            _ => Err(format!("internal error: expression {e} is not a scalar integer")),
        }
    }

    fn take_f(&mut self, e: PExprId) -> Result<Fx<f64>, String> {
        match self.take(e)? {
            CE::F(f) => Ok(f),
            _ => Err(format!("internal error: expression {e} is not a scalar float")),
        }
    }

    fn take_vi(&mut self, e: PExprId) -> Result<Fx<Vec<i64>>, String> {
        match self.take(e)? {
            CE::VI(f) => Ok(f),
            _ => Err(format!("internal error: expression {e} is not an integer vector")),
        }
    }

    fn take_vf(&mut self, e: PExprId) -> Result<Fx<Vec<f64>>, String> {
        match self.take(e)? {
            CE::VF(f) => Ok(f),
            _ => Err(format!("internal error: expression {e} is not a float vector")),
        }
    }

    /// A scalar integer operand; leaves are read inline (their closures stay unused).
    fn iop(&mut self, e: PExprId) -> Result<IOp, String> {
        match self.f.expr(e).kind {
            PExprKind::Var(v) => Ok(IOp::Var(v.index())),
            PExprKind::Int(k) => Ok(IOp::Const(k)),
            _ => Ok(IOp::Fn(self.take_i(e)?)),
        }
    }

    fn fop(&mut self, e: PExprId) -> Result<FOp, String> {
        match self.f.expr(e).kind {
            PExprKind::Var(v) => Ok(FOp::Var(v.index())),
            PExprKind::Float(k) => Ok(FOp::Const(k)),
            _ => Ok(FOp::Fn(self.take_f(e)?)),
        }
    }

    fn iarg(&mut self, e: PExprId) -> Result<IArg, String> {
        if self.f.expr(e).ty.lanes > 1 {
            Ok(IArg::V(self.take_vi(e)?))
        } else {
            Ok(IArg::S(self.iop(e)?))
        }
    }

    fn farg(&mut self, e: PExprId) -> Result<FArg, String> {
        if self.f.expr(e).ty.lanes > 1 {
            Ok(FArg::V(self.take_vf(e)?))
        } else {
            Ok(FArg::S(self.fop(e)?))
        }
    }

    /// A condition or mask: a scalar or a vector of `bool`.
    fn bind_op(&mut self, var: VarId, value: PExprId) -> Result<SFn, String> {
        let v = var.index();
        if self.f.expr(value).ty.dtype.is_float() {
            let x = self.fop(value)?;
            Ok(Box::new(move |c| {
                let val = x.get(c);
                c.floats[v] = val;
            }))
        } else {
            let x = self.iop(value)?;
            Ok(Box::new(move |c| {
                let val = x.get(c);
                c.ints[v] = val;
            }))
        }
    }

    fn access(
        &mut self,
        buf: BufId,
        indices: &[PExprId],
        lanes: usize,
        what: &'static str,
        at: Arc<str>,
    ) -> Result<Access, String> {
        let b = self.bufs[buf.index()].clone();
        let strides = b.effective_strides();
        let mut dims = Vec::with_capacity(indices.len());
        for (k, &i) in indices.iter().enumerate() {
            let idx = if self.f.expr(i).ty.lanes > 1 {
                Idx::Vec(self.take_vi(i)?)
            } else {
                match self.iop(i)? {
                    IOp::Var(v) => Idx::Var(v),
                    IOp::Const(c) => Idx::Const(c),
                    IOp::Fn(f) => Idx::Fn(f),
                }
            };
            dims.push(Dim { idx, extent: b.shape[k], stride: strides[k] });
        }
        Ok(Access {
            slot: self.slot[buf.index()].index,
            dims: dims.into(),
            offset: b.elem_offset,
            lanes,
            buf: b,
            what,
            at,
        })
    }

    fn compile_expr(&mut self, e: PExprId) -> Result<CE, String> {
        let f = self.f;
        let node = *f.expr(e);
        let ty = node.ty;
        let lanes = ty.lanes as usize;
        Ok(match node.kind {
            PExprKind::Int(k) => {
                let k = wrap(k, ty.dtype);
                CE::I(bx(move |_| k))
            }
            PExprKind::Float(x) => CE::F(bx(move |_| x)),
            PExprKind::Var(v) => {
                let v = v.index();
                if ty.dtype.is_float() {
                    CE::F(bx(move |c| c.floats[v]))
                } else {
                    CE::I(bx(move |c| c.ints[v]))
                }
            }
            PExprKind::Bin(op, a, b) => {
                let d = f.expr(a).ty.dtype;
                if d.is_float() {
                    let args = if lanes > 1 {
                        FArgs::V(self.take_vf(a)?, self.take_vf(b)?)
                    } else {
                        FArgs::S(self.fop(a)?, self.fop(b)?)
                    };
                    float_bin(op, d, args)
                } else {
                    let args = if f.expr(a).ty.lanes > 1 {
                        IArgs::V(self.take_vi(a)?, self.take_vi(b)?)
                    } else {
                        IArgs::S(self.iop(a)?, self.iop(b)?)
                    };
                    let msg: Arc<str> =
                        format!("integer division by zero in `{}` {}", op.name(), self.at_expr(e)).into();
                    int_arith(op, d, (args, msg))
                }
            }
            PExprKind::Not(a) => build_iun(|x| 1 - (x & 1), self.iarg(a)?),
            PExprKind::Select(k, a, b) => {
                let vector_cond = f.expr(k).ty.lanes > 1;
                let kf = if vector_cond { None } else { Some(self.take_i(k)?) };
                let kv = if vector_cond { Some(self.take_vi(k)?) } else { None };
                let (x, y) = (self.take(a)?, self.take(b)?);
                match (x, y, kf, kv) {
                    (CE::I(x), CE::I(y), Some(k), _) => CE::I(select(k, x, y)),
                    (CE::F(x), CE::F(y), Some(k), _) => CE::F(select(k, x, y)),
                    (CE::VI(x), CE::VI(y), Some(k), _) => CE::VI(select(k, x, y)),
                    (CE::VF(x), CE::VF(y), Some(k), _) => CE::VF(select(k, x, y)),
                    (CE::VI(x), CE::VI(y), None, Some(k)) => CE::VI(vselect(k, x, y)),
                    (CE::VF(x), CE::VF(y), None, Some(k)) => CE::VF(vselect(k, x, y)),
                    _ => return Err(format!("internal error: `select` {e} of mistyped operands")),
                }
            }
            PExprKind::Cast(a) => {
                let from = f.expr(a).ty.dtype;
                let x = self.take(a)?;
                cast(from, ty.dtype, x)?
            }
            PExprKind::Load(buf, r) => {
                let at = self.at_expr(e);
                let acc = self.access(buf, f.operands(r), lanes, "load", at)?;
                load(self.slot[buf.index()].class, acc)
            }
            PExprKind::Call(intr, r) => {
                let d = f.expr(f.operands(r)[0]).ty.dtype;
                if d.is_float() {
                    let args = f.operands(r).iter().map(|&x| self.farg(x)).collect::<Result<Vec<_>, _>>()?;
                    float_intrinsic(intr, d, args)?
                } else {
                    let args = f.operands(r).iter().map(|&x| self.iarg(x)).collect::<Result<Vec<_>, _>>()?;
                    let at = self.at_expr(e);
                    int_intrinsic(intr, d, args, at)?
                }
            }
            PExprKind::Ramp(base, stride) => {
                let (b, s) = (self.iop(base)?, self.iop(stride)?);
                with_wrap!(ty.dtype, W => CE::VI(bx(move |c| {
                    let b = b.get(c);
                    let s = s.get(c);
                    (0..lanes as i64).map(|l| W::w(b.wrapping_add(l.wrapping_mul(s)))).collect()
                })))
            }
            PExprKind::Broadcast(a) => match self.take(a)? {
                CE::I(x) => CE::VI(broadcast(x, lanes)),
                CE::F(x) => CE::VF(broadcast(x, lanes)),
                _ => return Err(format!("internal error: `broadcast` {e} of a vector")),
            },
            PExprKind::Let(var, value, body) => {
                let bind = self.bind_op(var, value)?;
                match self.take(body)? {
                    CE::I(x) => CE::I(let_in(bind, x)),
                    CE::F(x) => CE::F(let_in(bind, x)),
                    CE::VI(x) => CE::VI(let_in(bind, x)),
                    CE::VF(x) => CE::VF(let_in(bind, x)),
                }
            }
        })
    }

    /// The operations of the block rooted at `root`: sequences, `let`, `alloc`, `decl` and
    /// `attr` are flattened (an explicit stack, no recursion); `store`, `eval`, `for` and `if`
    /// are compiled leaves.
    fn flatten(&mut self, root: StmtId) -> Result<Vec<SFn>, String> {
        enum Work {
            Stmt(StmtId),
            Op(SFn),
        }
        let f = self.f;
        let mut out = Vec::new();
        let mut stack = vec![Work::Stmt(root)];
        while let Some(w) = stack.pop() {
            let s = match w {
                Work::Op(op) => {
                    out.push(op);
                    continue;
                }
                Work::Stmt(s) => s,
            };
            match f.stmt(s).kind {
                StmtKind::Seq(r) => stack.extend(f.stmt_list(r).iter().rev().map(|&c| Work::Stmt(c))),
                StmtKind::Let { var, value, body } => {
                    stack.push(Work::Stmt(body));
                    stack.push(Work::Op(self.bind_op(var, value)?));
                }
                StmtKind::Attr { body, .. } => stack.push(Work::Stmt(body)),
                StmtKind::Alloc { buf, body } => {
                    let (enter, exit) = self.alloc_ops(s, buf);
                    stack.push(Work::Op(exit));
                    stack.push(Work::Stmt(body));
                    stack.push(Work::Op(enter));
                }
                StmtKind::Decl { buf, data, body } => {
                    stack.push(Work::Stmt(body));
                    stack.push(Work::Op(self.decl_op(s, buf, data)?));
                }
                _ => match self.leaves.get_mut(s.index()).and_then(Option::take) {
                    Some(op) => out.push(op),
                    None => return Err(format!("statement {s} is used twice (statements are trees)")),
                },
            }
        }
        Ok(out)
    }

    fn alloc_ops(&mut self, s: StmtId, buf: BufId) -> (SFn, SFn) {
        let b = self.bufs[buf.index()].clone();
        let slot = self.slot[buf.index()];
        let n = b.storage_elements().unwrap_or(i64::MAX);
        let at = self.at_stmt(s);
        if n as u64 > MAX_MATERIALIZED_ELEMENTS {
            let msg = format!(
                "alloc of `%{}` needs {n} elements, more than the limit of {MAX_MATERIALIZED_ELEMENTS} {at}",
                b.name
            );
            return (Box::new(move |c| c.fail(msg.clone())), Box::new(|_| {}));
        }
        let n = n as usize;
        let i = slot.index;
        /// Storage above this many elements is freed at the end of its alloc; smaller storage
        /// keeps its capacity for the next time the alloc runs (an alloc inside a loop).
        const KEEP: usize = 1 << 20;
        match slot.class {
            Class::F32 => (
                Box::new(move |c| {
                    let v = &mut c.f32s[i];
                    v.clear();
                    v.resize(n, 0.0);
                }),
                Box::new(move |c| {
                    let v = &mut c.f32s[i];
                    if v.capacity() > KEEP {
                        *v = Vec::new();
                    } else {
                        v.clear();
                    }
                }),
            ),
            Class::F64 => (
                Box::new(move |c| {
                    let v = &mut c.f64s[i];
                    v.clear();
                    v.resize(n, 0.0);
                }),
                Box::new(move |c| {
                    let v = &mut c.f64s[i];
                    if v.capacity() > KEEP {
                        *v = Vec::new();
                    } else {
                        v.clear();
                    }
                }),
            ),
            Class::I64 => (
                Box::new(move |c| {
                    let v = &mut c.i64s[i];
                    v.clear();
                    v.resize(n, 0);
                }),
                Box::new(move |c| {
                    let v = &mut c.i64s[i];
                    if v.capacity() > KEEP {
                        *v = Vec::new();
                    } else {
                        v.clear();
                    }
                }),
            ),
        }
    }

    fn decl_op(&mut self, s: StmtId, buf: BufId, data: BufId) -> Result<SFn, String> {
        let b = self.bufs[buf.index()].clone();
        let need = b.storage_elements().ok_or_else(|| format!("decl `%{}` is too large", b.name))? as usize;
        let slot = self.slot[buf.index()];
        let data_name = self.f.buf(data).name.clone();
        let at = self.at_stmt(s);
        Ok(Box::new(move |c| {
            let have = c.storage_len(slot);
            if need > have {
                c.fail(format!(
                    "view `%{}` reaches {need} elements but the storage of `%{data_name}` has {have} {at}",
                    b.name
                ));
            }
        }))
    }

    fn compile_stmt(&mut self, s: StmtId) -> Result<Option<SFn>, String> {
        let f = self.f;
        Ok(Some(match f.stmt(s).kind {
            StmtKind::Store { buf, indices, value } => {
                let ix = f.operands(indices);
                let lanes = f.expr(value).ty.lanes as usize;
                let v = self.take(value)?;
                let at = self.at_stmt(s);
                let acc = self.access(buf, ix, lanes, "store", at)?;
                store(self.slot[buf.index()].class, acc, v)?
            }
            StmtKind::Evaluate(e) => {
                let x = self.take(e)?;
                let op: SFn = match x {
                    CE::I(x) => Box::new(move |c| {
                        x(c);
                    }),
                    CE::F(x) => Box::new(move |c| {
                        x(c);
                    }),
                    CE::VI(x) => Box::new(move |c| {
                        x(c);
                    }),
                    CE::VF(x) => Box::new(move |c| {
                        x(c);
                    }),
                };
                op
            }
            StmtKind::For { .. } => {
                if self.inner_of_nest[s.index()] {
                    // Compiled with the `for` whose body it is.
                    return Ok(None);
                }
                // The perfect nest rooted here, outermost first.
                let mut chain = vec![s];
                while let StmtKind::For { body, .. } = f.stmt(chain[chain.len() - 1]).kind {
                    if !matches!(f.stmt(body).kind, StmtKind::For { .. }) {
                        break;
                    }
                    chain.push(body);
                }
                let op = block::try_compile(self, &chain, self.n_nests)
                    .or_else(|| block::try_compile_reduce_nest(self, &chain, self.n_nests));
                if let Some(op) = op {
                    self.n_nests += 1;
                    self.block_leaf[s.index()] = true;
                    return Ok(Some(op));
                }
                for &c in chain[1..].iter().rev() {
                    let op = self.compile_for(c)?;
                    self.leaves[c.index()] = Some(op);
                }
                self.compile_for(s)?
            }
            StmtKind::If { cond, then_, else_ } => {
                let k = self.iop(cond)?;
                let t = block(self.flatten(then_)?);
                let e = match else_ {
                    Some(e) => block(self.flatten(e)?),
                    None => block(Vec::new()),
                };
                Box::new(move |c: &mut Ctx| if k.get(c) != 0 { t(c) } else { e(c) })
            }
            _ => return Ok(None),
        }))
    }

    /// A `for` statement on the scalar path.
    fn compile_for(&mut self, s: StmtId) -> Result<SFn, String> {
        let f = self.f;
        Ok(match f.stmt(s).kind {
            StmtKind::For { var, min, extent, body, .. } => {
                let (lo, n) = (self.iop(min)?, self.iop(extent)?);
                let body = block(self.flatten(body)?);
                let v = var.index();
                let at = self.at_stmt(s);
                let vname = f.var(var).name.clone();
                let op: SFn = with_wrap!(f.var(var).ty.dtype, W => Box::new(move |c: &mut Ctx| {
                    let lo = lo.get(c);
                    let n = n.get(c);
                    if n < 0 {
                        c.fail(format!("loop `%{vname}` has a negative extent {n} {at}"));
                        return;
                    }
                    for k in 0..n {
                        c.ints[v] = W::w(lo.wrapping_add(k));
                        body(c);
                        if c.err.is_some() {
                            return;
                        }
                    }
                }));
                op
            }
            _ => return Err(format!("internal error: {s} is not a loop")),
        })
    }

    fn compile(mut self) -> Result<Program, String> {
        let f = self.f;
        for e in 0..f.exprs().len() {
            let ce = self.compile_expr(PExprId(e as u32))?;
            self.exprs.push(Some(ce));
        }
        for s in 0..f.stmts().len() {
            let op = self.compile_stmt(StmtId(s as u32))?;
            self.leaves.push(op);
        }
        let body = block(self.flatten(f.body())?);
        Ok(Program {
            body,
            slot: self.slot,
            counts: self.counts,
            n_nests: self.n_nests,
            n_block_nests: self.n_nests - self.n_subsumed,
            n_reduce_nests: self.n_reduce_nests,
        })
    }
}

/// Ids in range and operands before users, so that compiling in arena order finds every
/// operand compiled and nothing indexes out of range.
fn check_well_formed(f: &PrimFunc) -> Result<(), String> {
    let (ne, ns, nv, nb) = (f.exprs().len(), f.stmts().len(), f.vars().len(), f.bufs().len());
    let bad = |what: String| Err(format!("the function is malformed ({what}); run the verifier"));
    let mut tmp = Vec::new();
    for (i, x) in f.exprs().iter().enumerate() {
        match x.kind {
            PExprKind::Var(v) | PExprKind::Let(v, _, _) if v.index() >= nv => return bad(format!("e{i} names {v}")),
            PExprKind::Load(b, _) if b.index() >= nb => return bad(format!("e{i} names {b}")),
            _ => {}
        }
        tmp.clear();
        f.expr_operands(PExprId(i as u32), &mut tmp);
        if let Some(o) = tmp.iter().find(|o| o.index() >= i) {
            return bad(format!("e{i} uses {o}, not before it"));
        }
        if matches!(x.kind, PExprKind::Call(..)) && tmp.is_empty() {
            return bad(format!("e{i} calls with no arguments"));
        }
    }
    for i in 0..ns {
        let s = StmtId(i as u32);
        let kind = f.stmt(s).kind;
        match kind {
            StmtKind::For { var, .. } | StmtKind::Let { var, .. } if var.index() >= nv => {
                return bad(format!("{s} names {var}"))
            }
            StmtKind::Store { buf, .. } | StmtKind::Alloc { buf, .. } if buf.index() >= nb => {
                return bad(format!("{s} names {buf}"))
            }
            StmtKind::Decl { buf, data, .. } if buf.index() >= nb || data.index() >= nb => {
                return bad(format!("{s} names a buffer out of range"))
            }
            _ => {}
        }
        if let Some(c) = f.children(s).as_slice().iter().find(|c| c.index() >= i) {
            return bad(format!("{s} contains {c}, not before it"));
        }
        tmp.clear();
        f.stmt_exprs(s, &mut tmp);
        if let Some(e) = tmp.iter().find(|e| e.index() >= ne) {
            return bad(format!("{s} uses {e}, out of range"));
        }
    }
    if f.body().index() >= ns {
        return bad(format!("the body {} does not exist", f.body()));
    }
    for p in f.params() {
        match *p {
            Param::Var(v) if v.index() >= nv => return bad(format!("parameter {v} out of range")),
            Param::Buf(b) if b.index() >= nb => return bad(format!("parameter {b} out of range")),
            _ => {}
        }
    }
    Ok(())
}

/// Refuses functions whose compiled closures would recurse deeper than [`MAX_PRIM_DEPTH`];
/// bottom-up over the arenas, no recursion.
fn check_depth(f: &PrimFunc) -> Result<(), String> {
    let mut ed = vec![0usize; f.exprs().len()];
    let mut tmp = Vec::new();
    for e in 0..f.exprs().len() {
        tmp.clear();
        f.expr_operands(PExprId(e as u32), &mut tmp);
        ed[e] = 1 + tmp.iter().map(|o| ed[o.index()]).max().unwrap_or(0);
    }
    let mut sd = vec![0usize; f.stmts().len()];
    for s in 0..f.stmts().len() {
        let id = StmtId(s as u32);
        tmp.clear();
        f.stmt_exprs(id, &mut tmp);
        let exprs = tmp.iter().map(|e| ed[e.index()]).max().unwrap_or(0);
        let children = f.children(id).as_slice().iter().map(|c| sd[c.index()]).max().unwrap_or(0);
        sd[s] = match f.stmt(id).kind {
            // Flattened into the enclosing block: no nesting of their own.
            StmtKind::Seq(_) | StmtKind::Let { .. } | StmtKind::Alloc { .. } | StmtKind::Decl { .. } => {
                children.max(exprs)
            }
            // `attr`'s value is not evaluated.
            StmtKind::Attr { .. } => children,
            _ => 1 + children.max(exprs),
        };
    }
    let depth = 1 + sd[f.body().index()];
    if depth > MAX_PRIM_DEPTH {
        return Err(format!(
            "expressions and loops nest {depth} deep, deeper than the interpreter's limit of {MAX_PRIM_DEPTH}"
        ));
    }
    Ok(())
}

/// A storage slot for each parameter and `alloc` buffer; a `decl` view shares its root's.
fn assign_slots(f: &PrimFunc) -> Result<(Vec<Slot>, [usize; 3]), String> {
    let nb = f.bufs().len();
    #[derive(Clone, Copy)]
    enum Bind {
        None,
        Root,
        View(BufId),
    }
    let mut bind = vec![Bind::None; nb];
    let mut roots = Vec::new();
    let mut set = |b: BufId, to: Bind| -> Result<(), String> {
        if !matches!(bind[b.index()], Bind::None) {
            return Err(format!("buffer `%{}` ({b}) is bound twice", f.buf(b).name));
        }
        bind[b.index()] = to;
        Ok(())
    };
    for p in f.params() {
        if let Param::Buf(b) = *p {
            set(b, Bind::Root)?;
            roots.push(b);
        }
    }
    for st in f.stmts() {
        match st.kind {
            StmtKind::Alloc { buf, .. } => {
                set(buf, Bind::Root)?;
                roots.push(buf);
            }
            StmtKind::Decl { buf, data, .. } => set(buf, Bind::View(data))?,
            _ => {}
        }
    }
    let mut counts = [0usize; 3];
    let mut slot = vec![None; nb];
    for b in roots {
        let class = class_of(f.buf(b).dtype);
        let k = class as usize;
        slot[b.index()] = Some(Slot { class, index: counts[k] });
        counts[k] += 1;
    }
    let mut out = Vec::with_capacity(nb);
    for b in 0..nb {
        // Follow views to their root (a chain at most as long as the buffer list).
        let mut cur = b;
        let mut steps = 0;
        let s = loop {
            if let Some(s) = slot[cur] {
                break Some(s);
            }
            match bind[cur] {
                Bind::View(d) if steps <= nb => {
                    cur = d.index();
                    steps += 1;
                }
                _ => break None,
            }
        };
        // An unbound buffer (never used, or used out of scope) gets an empty slot of its own.
        let s = match s {
            Some(s) => s,
            None => {
                let class = class_of(f.buf(BufId(b as u32)).dtype);
                let k = class as usize;
                counts[k] += 1;
                Slot { class, index: counts[k] - 1 }
            }
        };
        out.push(s);
    }
    Ok((out, counts))
}

// ---- arguments and results ----

fn storage_of(t: &Tensor) -> Storage {
    fn ints<T: Copy>(a: &ArcArray<T, IxDyn>, f: impl Fn(T) -> i64) -> Storage {
        Storage::I64(a.iter().map(|&v| f(v)).collect())
    }
    match &t.0 {
        TensorData::F32(a) => Storage::F32(match a.as_slice() {
            Some(s) => s.to_vec(),
            None => a.iter().copied().collect(),
        }),
        TensorData::F16(a) => Storage::F64(a.iter().map(|v| v.to_f64()).collect()),
        TensorData::F64(a) => Storage::F64(a.iter().copied().collect()),
        TensorData::I64(a) => ints(a, |v| v),
        TensorData::I32(a) => ints(a, |v| v as i64),
        TensorData::I16(a) => ints(a, |v| v as i64),
        TensorData::I8(a) => ints(a, |v| v as i64),
        TensorData::U64(a) => ints(a, |v| v as i64),
        TensorData::U32(a) => ints(a, |v| v as i64),
        TensorData::U16(a) => ints(a, |v| v as i64),
        TensorData::U8(a) => ints(a, |v| v as i64),
        TensorData::Bool(a) => ints(a, |v| v as i64),
    }
}

fn buffer_type(b: &Buffer) -> String {
    let dims: Vec<String> = b.shape.iter().map(|d| d.to_string()).collect();
    let shape = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    format!("Buffer[{shape}, {}]", b.dtype)
}

/// Whether `b` is compact row-major storage from offset 0 (its elements are its storage).
fn is_compact(b: &Buffer) -> bool {
    if b.elem_offset != 0 {
        return false;
    }
    let mut want = 1i64;
    for (k, &s) in b.strides.iter().enumerate().rev() {
        if s != want && b.shape[k] > 1 {
            return false;
        }
        want = want.saturating_mul(b.shape[k]);
    }
    true
}

fn bind_args(f: &PrimFunc, p: &Program, args: Vec<PrimArg>) -> Result<Ctx, String> {
    let params = f.params();
    if args.len() > params.len() {
        return Err(format!("takes {} parameters, got {} arguments", params.len(), args.len()));
    }
    let nv = f.vars().len();
    let mut c = Ctx {
        ints: vec![0; nv],
        floats: vec![0.0; nv],
        f32s: vec![Vec::new(); p.counts[0]],
        f64s: vec![Vec::new(); p.counts[1]],
        i64s: vec![Vec::new(); p.counts[2]],
        err: None,
        nests: (0..p.n_nests).map(|_| block::Scratch::default()).collect(),
    };
    fn put(c: &mut Ctx, slot: Slot, st: Storage) {
        match (slot.class, st) {
            (Class::F32, Storage::F32(v)) => c.f32s[slot.index] = v,
            (Class::F64, Storage::F64(v)) => c.f64s[slot.index] = v,
            (Class::I64, Storage::I64(v)) => c.i64s[slot.index] = v,
            _ => {}
        }
    }
    let nargs = args.len();
    for (i, (param, arg)) in params.iter().zip(args).enumerate() {
        let n = i + 1;
        match (*param, arg) {
            (Param::Var(v), PrimArg::Scalar(s)) => {
                let var = f.var(v);
                let d = var.ty.dtype;
                let what = || format!("argument {n} (`%{}: {d}`)", var.name);
                match (s, d.is_float()) {
                    (PrimScalar::Float(x), true) => c.floats[v.index()] = round_to(x, d),
                    (PrimScalar::Int(x), false) => {
                        if wrap(x, d) != x && d != DType::U64 {
                            return Err(format!("{}: {x} does not fit in {d}", what()));
                        }
                        c.ints[v.index()] = x;
                    }
                    (PrimScalar::Float(x), false) => {
                        return Err(format!("{}: expected an integer, got the float {x}", what()))
                    }
                    (PrimScalar::Int(x), true) => {
                        return Err(format!("{}: expected a float, got the integer {x}", what()))
                    }
                }
            }
            (Param::Var(v), PrimArg::Buffer(t)) => {
                let var = f.var(v);
                return Err(format!(
                    "argument {n} (`%{}: {}`) is a scalar parameter, got a tensor {}",
                    var.name,
                    var.ty,
                    t.ty()
                ));
            }
            (Param::Buf(b), PrimArg::Scalar(s)) => {
                let buf = f.buf(b);
                return Err(format!(
                    "argument {n} (`%{}: {}`) is a buffer parameter, got the scalar {s:?}",
                    buf.name,
                    buffer_type(buf)
                ));
            }
            (Param::Buf(b), PrimArg::Buffer(t)) => {
                let buf = f.buf(b);
                let want = |detail: String| {
                    format!("argument {n} (`%{}: {}`): {detail}, got a tensor {}", buf.name, buffer_type(buf), t.ty())
                };
                if t.dtype() != buf.dtype {
                    return Err(want(format!("expected dtype {}", buf.dtype)));
                }
                let len = t.len() as i64;
                if is_compact(buf) {
                    let count = buf.num_elements().unwrap_or(i64::MAX);
                    if len != count {
                        return Err(want(format!("expected {count} elements")));
                    }
                } else {
                    let need = buf.storage_elements().unwrap_or(i64::MAX);
                    if len < need {
                        return Err(want(format!(
                            "the view (strides {:?}, offset {}) reaches {need} elements",
                            buf.effective_strides(),
                            buf.elem_offset
                        )));
                    }
                }
                put(&mut c, p.slot[b.index()], storage_of(&t));
            }
        }
    }
    for (i, param) in params.iter().enumerate().skip(nargs) {
        match *param {
            Param::Var(v) => {
                let var = f.var(v);
                return Err(format!(
                    "parameter {} (`%{}: {}`) has no argument: only buffer parameters can be outputs",
                    i + 1,
                    var.name,
                    var.ty
                ));
            }
            Param::Buf(b) => {
                let buf = f.buf(b);
                let n = buf.storage_elements().unwrap_or(i64::MAX);
                if n as u64 > MAX_MATERIALIZED_ELEMENTS {
                    return Err(format!(
                        "output `%{}: {}` needs {n} elements, more than the limit of {MAX_MATERIALIZED_ELEMENTS}",
                        buf.name,
                        buffer_type(buf)
                    ));
                }
                let n = n as usize;
                let slot = p.slot[b.index()];
                let st = match slot.class {
                    Class::F32 => Storage::F32(vec![0.0; n]),
                    Class::F64 => Storage::F64(vec![0.0; n]),
                    Class::I64 => Storage::I64(vec![0; n]),
                };
                put(&mut c, slot, st);
            }
        }
    }
    Ok(c)
}

/// The elements of buffer `b` (row-major over its shape) from its storage.
fn gather<T: Copy>(b: &Buffer, st: Vec<T>) -> Vec<T> {
    let count = b.num_elements().unwrap_or(0) as usize;
    if is_compact(b) && st.len() == count {
        return st;
    }
    let strides = b.effective_strides();
    let mut out = Vec::with_capacity(count);
    if count == 0 {
        return out;
    }
    let rank = b.shape.len();
    let mut idx = vec![0i64; rank];
    for _ in 0..count {
        let off = b.elem_offset + idx.iter().zip(&strides).map(|(i, s)| i * s).sum::<i64>();
        out.push(st[off as usize]);
        for k in (0..rank).rev() {
            idx[k] += 1;
            if idx[k] < b.shape[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}

fn to_tensor(b: &Buffer, st: Storage) -> Result<Tensor, String> {
    let dims: Vec<usize> = b.shape.iter().map(|&d| d as usize).collect();
    let dims = IxDyn(&dims);
    let bad = |e: ndarray::ShapeError| format!("internal error: output `%{}`: {e}", b.name);
    macro_rules! ints {
        ($variant:ident, $v:ident, $e:expr) => {{
            let Storage::I64(s) = st else { return Err("internal error: storage class".into()) };
            let vals = gather(b, s).into_iter().map(|$v| $e).collect::<Vec<_>>();
            TensorData::$variant(ArcArray::from_shape_vec(dims, vals).map_err(bad)?)
        }};
    }
    Ok(Tensor(match b.dtype {
        DType::F32 => {
            let Storage::F32(s) = st else { return Err("internal error: storage class".into()) };
            TensorData::F32(ArcArray::from_shape_vec(dims, gather(b, s)).map_err(bad)?)
        }
        DType::F64 => {
            let Storage::F64(s) = st else { return Err("internal error: storage class".into()) };
            TensorData::F64(ArcArray::from_shape_vec(dims, gather(b, s)).map_err(bad)?)
        }
        DType::F16 => {
            let Storage::F64(s) = st else { return Err("internal error: storage class".into()) };
            let vals = gather(b, s).into_iter().map(f16::from_f64).collect::<Vec<_>>();
            TensorData::F16(ArcArray::from_shape_vec(dims, vals).map_err(bad)?)
        }
        DType::I64 => ints!(I64, v, v),
        DType::I32 => ints!(I32, v, v as i32),
        DType::I16 => ints!(I16, v, v as i16),
        DType::I8 => ints!(I8, v, v as i8),
        DType::U64 => ints!(U64, v, v as u64),
        DType::U32 => ints!(U32, v, v as u32),
        DType::U16 => ints!(U16, v, v as u16),
        DType::U8 => ints!(U8, v, v as u8),
        DType::Bool => ints!(Bool, v, v != 0),
    }))
}
