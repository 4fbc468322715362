//! The one binary encoding of a graph function's arena, for the two forms that hold functions
//! as bytes: `.pirb` files (`binary.rs`: strings and constants as indices into the file's
//! tables, no spans) and the persistent store's entries (`session/codec.rs`: strings and
//! constants inline, spans relative to a base). The two differ only in how a node refers to a
//! string, a constant or a span — [`WriteRefs`] and [`ReadRefs`] say that —; the layout (the
//! type table, the nodes in id order, the parameters, body, return type and attributes),
//! types, attributes, and every check made on reading are this file's.
//!
//! Layout of one arena: the type table (a count, then each type), the node count, then per
//! node its type index (`u32::MAX`: none), its span ([`WriteRefs::span`]), a tag and the
//! tag's payload; then the parameters, the body, the return type and the attributes.
//! `docs/binary-format.md` gives the tags and payloads.
//!
//! Reading never panics and never trusts a count or an id: every count must fit in what is
//! left, every operand must precede its user, an unknown operator, dtype or tag is an error,
//! and the builder's well-formedness check must hold.

use std::fmt;
use std::sync::Arc;

use crate::ir::attrs::{AttrValue, Attrs};
use crate::ir::builder::FunctionBuilder;
use crate::ir::expr::{ExprKind, Span, TyIdx};
use crate::ir::function::{Closure, Function};
use crate::ir::ids::{NodeId, OpId};
use crate::ir::parser::{MAX_NESTING, MAX_RANK};
use crate::ir::tensor::{Constant, Fill};
use crate::ir::ty::{DType, TensorType, Type, TypeKind};

// ---------------------------------------------------------------------------------------
// Writing

/// Appends little-endian integers and length-prefixed byte strings.
#[derive(Default)]
pub(crate) struct Writer(pub(crate) Vec<u8>);

impl Writer {
    pub(crate) fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    pub(crate) fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    pub(crate) fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    /// A `u64` length, then the bytes.
    pub(crate) fn bytes(&mut self, v: &[u8]) {
        self.u64(v.len() as u64);
        self.0.extend_from_slice(v);
    }
    pub(crate) fn str(&mut self, v: &str) {
        self.bytes(v.as_bytes());
    }
    pub(crate) fn opt_str(&mut self, v: Option<&str>) {
        match v {
            Some(s) => {
                self.u8(1);
                self.str(s);
            }
            None => self.u8(0),
        }
    }
    pub(crate) fn ids(&mut self, ids: &[NodeId]) {
        self.u32(ids.len() as u32);
        for id in ids {
            self.u32(id.0);
        }
    }
}

/// How a written arena refers to strings, constants and spans.
pub(crate) trait WriteRefs<'m> {
    /// A name, operator name, dtype name, attribute key or string value.
    fn string(&mut self, w: &mut Writer, s: &'m str);
    /// The constant of a constant node; fails for one a reader would refuse
    /// ([`check_constant`]).
    fn constant(&mut self, w: &mut Writer, c: &'m Arc<Constant>) -> Result<(), Unwritable>;
    /// A node's span (written right after its type index).
    fn span(&mut self, w: &mut Writer, span: Option<Span>);
}

const TY_TENSOR: u8 = 0;
const TY_TUPLE: u8 = 1;
const TY_FUNC: u8 = 2;

const VAR: u8 = 0;
const GLOBAL: u8 = 1;
const CONST: u8 = 2;
const CALL: u8 = 3;
const APPLY: u8 = 4;
const TUPLE: u8 = 5;
const PROJ: u8 = 6;
const IF: u8 = 7;
const FUNC: u8 = 8;
const BLOCK: u8 = 9;

const ATTR_BOOL: u8 = 0;
const ATTR_INT: u8 = 1;
const ATTR_FLOAT: u8 = 2;
const ATTR_STR: u8 = 3;
const ATTR_INTS: u8 = 4;
const ATTR_DTYPE: u8 = 5;

/// Why a function cannot be written (a reader would refuse it).
pub(crate) type Unwritable = &'static str;

const TOO_DEEP: Unwritable = "a type nests too deep";
const TOO_HIGH_RANK: Unwritable = "a tensor type's rank is over the limit";

/// The shape (rank, then each dim) and the dtype of a tensor type (whose rank the caller
/// checked: [`write_arena`] for the types it writes, [`check_constant`] for constants').
pub(crate) fn write_tensor_type<'m>(w: &mut Writer, refs: &mut impl WriteRefs<'m>, t: &TensorType) {
    w.u32(t.shape.len() as u32);
    for &d in t.shape.iter() {
        w.u64(d);
    }
    refs.string(w, t.dtype.name());
}

/// Whether a reader accepts the type of `c` (its rank is at most [`MAX_RANK`]).
pub(crate) fn check_constant(c: &Constant) -> Result<(), Unwritable> {
    let rank = match c {
        Constant::Dense(t) => t.shape().len(),
        Constant::Fill { ty, .. } | Constant::Raw { ty, .. } => ty.shape.len(),
    };
    if rank > MAX_RANK {
        return Err(TOO_HIGH_RANK);
    }
    Ok(())
}

fn write_type<'m>(w: &mut Writer, refs: &mut impl WriteRefs<'m>, ty: &Type, depth: u32) -> Result<(), Unwritable> {
    if depth > MAX_NESTING {
        return Err(TOO_DEEP);
    }
    match ty.kind() {
        TypeKind::Tensor(t) => {
            if t.shape.len() > MAX_RANK {
                return Err(TOO_HIGH_RANK);
            }
            w.u8(TY_TENSOR);
            write_tensor_type(w, refs, t);
        }
        TypeKind::Tuple(fields) => {
            w.u8(TY_TUPLE);
            w.u32(fields.len() as u32);
            for f in fields.iter() {
                write_type(w, refs, f, depth + 1)?;
            }
        }
        TypeKind::Func(f) => {
            w.u8(TY_FUNC);
            w.u32(f.params.len() as u32);
            for p in f.params.iter() {
                write_type(w, refs, p, depth + 1)?;
            }
            write_type(w, refs, &f.ret, depth + 1)?;
        }
    }
    Ok(())
}

fn write_opt_type<'m>(w: &mut Writer, refs: &mut impl WriteRefs<'m>, ty: Option<&Type>) -> Result<(), Unwritable> {
    match ty {
        Some(ty) => {
            w.u8(1);
            write_type(w, refs, ty, 0)
        }
        None => {
            w.u8(0);
            Ok(())
        }
    }
}

fn write_attrs<'m>(w: &mut Writer, refs: &mut impl WriteRefs<'m>, attrs: &'m Attrs) {
    w.u32(attrs.len() as u32);
    for (key, value) in attrs.iter() {
        refs.string(w, key);
        match value {
            AttrValue::Bool(b) => {
                w.u8(ATTR_BOOL);
                w.u8(u8::from(*b));
            }
            AttrValue::Int(i) => {
                w.u8(ATTR_INT);
                w.u64(*i as u64);
            }
            AttrValue::Float(f) => {
                w.u8(ATTR_FLOAT);
                w.u64(f.to_bits());
            }
            AttrValue::Str(s) => {
                w.u8(ATTR_STR);
                refs.string(w, s);
            }
            AttrValue::Ints(v) => {
                w.u8(ATTR_INTS);
                w.u32(v.len() as u32);
                for &i in v.iter() {
                    w.u64(i as u64);
                }
            }
            AttrValue::DType(d) => {
                w.u8(ATTR_DTYPE);
                refs.string(w, d.name());
            }
        }
    }
}

/// The fill's kind and parameters as stored (the same four numbers its identity uses).
pub(crate) fn fill_words(fill: &Fill) -> (u8, u64, u64, u64) {
    match *fill {
        Fill::Full(v) => (0, v.to_bits(), 0, 0),
        Fill::Uniform { seed, low, high } => (1, seed, low.to_bits(), high.to_bits()),
        Fill::Normal { seed, mean, std } => (2, seed, mean.to_bits(), std.to_bits()),
    }
}

/// Writes the arena of `f` (see the module docs); fails for a function a reader would not
/// accept back (a malformed arena, a type nested deeper than [`MAX_NESTING`] or of rank over
/// [`MAX_RANK`], an operator the registry does not know).
pub(crate) fn write_arena<'m>(
    w: &mut Writer,
    refs: &mut impl WriteRefs<'m>,
    f: &'m Function,
) -> Result<(), Unwritable> {
    if !f.is_well_formed() {
        return Err("its arena is malformed");
    }
    let table = f.type_table();
    w.u32(table.len() as u32);
    for ty in table {
        write_type(w, refs, ty, 0)?;
    }
    w.u32(f.num_nodes() as u32);
    for (i, node) in f.nodes().iter().enumerate() {
        w.u32(node.ty.index().map_or(u32::MAX, |t| t as u32));
        refs.span(w, f.span(NodeId(i as u32)));
        match node.kind {
            ExprKind::Var { name } => {
                w.u8(VAR);
                refs.string(w, f.sym(name));
            }
            ExprKind::Global { name } => {
                w.u8(GLOBAL);
                refs.string(w, f.sym(name));
            }
            ExprKind::Const { idx } => {
                w.u8(CONST);
                refs.constant(w, f.constant(idx))?;
            }
            ExprKind::Call { op, attrs, args } => {
                w.u8(CALL);
                let op_name = crate::op::try_get(op).map(|d| d.name).ok_or("unknown operator")?;
                refs.string(w, op_name);
                write_attrs(w, refs, f.call_attrs(attrs));
                w.ids(f.ids(args));
            }
            ExprKind::Apply { callee, args } => {
                w.u8(APPLY);
                w.u32(callee.0);
                w.ids(f.ids(args));
            }
            ExprKind::Tuple { fields } => {
                w.u8(TUPLE);
                w.ids(f.ids(fields));
            }
            ExprKind::Proj { tuple, index } => {
                w.u8(PROJ);
                w.u32(tuple.0);
                w.u32(index);
            }
            ExprKind::If { cond, then_, else_ } => {
                w.u8(IF);
                w.u32(cond.0);
                w.u32(then_.0);
                w.u32(else_.0);
            }
            ExprKind::Func { idx } => {
                let Closure { params, body, ret_ty, attrs } = f.closure(idx);
                w.u8(FUNC);
                w.ids(f.ids(*params));
                w.u32(body.0);
                write_opt_type(w, refs, ret_ty.as_ref())?;
                write_attrs(w, refs, attrs);
            }
            ExprKind::Block { bindings, result } => {
                w.u8(BLOCK);
                w.ids(f.ids(bindings));
                w.u32(result.0);
            }
        }
    }
    w.ids(f.params());
    w.u32(f.body().0);
    write_opt_type(w, refs, f.ret_ty())?;
    write_attrs(w, refs, f.attrs());
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Reading

/// What is wrong with bytes being read, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Malformed {
    /// Offset of the bad bytes in the buffer the cursor reads.
    pub(crate) at: usize,
    /// What is wrong there.
    pub(crate) what: Malformation,
}

/// What is wrong with an encoded arena (or its container): [`fmt::Display`] says it with the
/// numbers and names involved, [`Malformation::reason`] in a fixed phrase.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Malformation {
    /// Fewer bytes left than a read needs.
    Truncated { needed: usize, left: usize },
    /// A count of elements the bytes left cannot hold.
    Count(usize),
    /// An unknown tag (`what`: which kind of tag).
    BadTag { what: &'static str, tag: u8 },
    /// A type nested deeper than [`MAX_NESTING`].
    TooDeep,
    /// A tensor rank over [`MAX_RANK`].
    Rank(usize),
    /// Text that is not UTF-8.
    NotUtf8,
    /// A dtype name the engine does not know.
    UnknownDtype(String),
    /// An operator name the registry does not know.
    UnknownOperator(String),
    /// An index past the string table.
    StringOutside(usize),
    /// An index past the constant table.
    ConstantOutside(usize),
    /// Constant bytes that do not match the constant's type.
    ConstantBytes(String),
    /// A node's type index past the function's type table.
    TypeOutside(u32),
    /// An operand id at or after its user's.
    OperandOrder { id: u32, user: u32 },
    /// A block whose binding list is empty or odd.
    BlockBindings,
    /// The builder gave a node another id than the one it was written with.
    OutOfPlace(u32),
    /// One attribute key twice.
    RepeatedAttr,
    /// The arena read is not well formed.
    NotWellFormed,
    /// The type table does not fit the arena's nodes.
    TypeTable,
}

impl Malformation {
    /// The kind of damage in a fixed phrase (the store's rejection reasons).
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            Malformation::Truncated { .. } => "truncated entry",
            Malformation::Count(_) => "count larger than the entry",
            Malformation::BadTag { .. } => "bad tag",
            Malformation::TooDeep => "type nested too deep",
            Malformation::Rank(_) => "rank over the limit",
            Malformation::NotUtf8 => "text is not UTF-8",
            Malformation::UnknownDtype(_) => "unknown dtype",
            Malformation::UnknownOperator(_) => "unknown operator",
            Malformation::StringOutside(_) => "string outside the string table",
            Malformation::ConstantOutside(_) => "constant outside the constant table",
            Malformation::ConstantBytes(_) => "constant bytes do not match its type",
            Malformation::TypeOutside(_) => "type index outside the type table",
            Malformation::OperandOrder { .. } => "operand does not precede its user",
            Malformation::BlockBindings => "block without whole bindings",
            Malformation::OutOfPlace(_) => "node out of place",
            Malformation::RepeatedAttr => "repeated attribute key",
            Malformation::NotWellFormed => "function is not well formed",
            Malformation::TypeTable => "type table does not match the function",
        }
    }
}

impl fmt::Display for Malformation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Malformation::Truncated { needed, left } => {
                write!(f, "truncated: {needed} bytes needed, {left} left in the section")
            }
            Malformation::Count(n) => write!(f, "count {n} is larger than the section can hold"),
            Malformation::BadTag { what, tag } => write!(f, "bad {what} tag {tag}"),
            Malformation::TooDeep => write!(f, "type nested deeper than {MAX_NESTING}"),
            Malformation::Rank(r) => write!(f, "rank {r} is over the limit of {MAX_RANK}"),
            Malformation::UnknownDtype(name) => write!(f, "unknown dtype `{name}`"),
            Malformation::UnknownOperator(name) => write!(f, "unknown operator `{name}`"),
            Malformation::StringOutside(i) => write!(f, "string {i} is outside the string table"),
            Malformation::ConstantOutside(k) => write!(f, "constant {k} is outside the table"),
            Malformation::ConstantBytes(e) => write!(f, "constant bytes do not match its type: {e}"),
            Malformation::TypeOutside(t) => write!(f, "type {t} is outside the function's type table"),
            Malformation::OperandOrder { id, user } => write!(f, "operand %{id} does not precede its user %{user}"),
            Malformation::OutOfPlace(i) => write!(f, "node %{i} is out of place"),
            other => f.write_str(other.reason()),
        }
    }
}

pub(crate) type DResult<T> = Result<T, Malformed>;

/// A cursor over `file[pos..end]`; every read fails cleanly past `end`, and errors carry the
/// offset in `file`.
pub(crate) struct Dec<'a> {
    pub(crate) file: &'a [u8],
    pub(crate) pos: usize,
    pub(crate) end: usize,
}

impl<'a> Dec<'a> {
    /// A cursor over all of `bytes`.
    pub(crate) fn new(bytes: &'a [u8]) -> Dec<'a> {
        Dec { file: bytes, pos: 0, end: bytes.len() }
    }
    pub(crate) fn err(&self, what: Malformation) -> Malformed {
        Malformed { at: self.pos, what }
    }
    pub(crate) fn left(&self) -> usize {
        self.end - self.pos
    }
    pub(crate) fn take(&mut self, n: usize) -> DResult<&'a [u8]> {
        if self.left() < n {
            return Err(self.err(Malformation::Truncated { needed: n, left: self.left() }));
        }
        let s = &self.file[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    pub(crate) fn u8(&mut self) -> DResult<u8> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u32(&mut self) -> DResult<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn u64(&mut self) -> DResult<u64> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }
    /// What [`Writer::bytes`] wrote.
    pub(crate) fn bytes(&mut self) -> DResult<&'a [u8]> {
        let at = self.pos;
        let n = self.u64()?;
        let n = usize::try_from(n)
            .map_err(|_| Malformed { at, what: Malformation::Truncated { needed: usize::MAX, left: self.left() } })?;
        self.take(n)
    }
    /// What [`Writer::str`] wrote.
    pub(crate) fn str(&mut self) -> DResult<&'a str> {
        let at = self.pos;
        std::str::from_utf8(self.bytes()?).map_err(|_| Malformed { at, what: Malformation::NotUtf8 })
    }
    /// A count of elements that take at least `min_size` bytes each: never more than what is
    /// left can hold, so a damaged count cannot make a reader allocate much.
    pub(crate) fn count(&mut self, min_size: usize) -> DResult<usize> {
        let at = self.pos;
        let n = self.u32()? as usize;
        if n.saturating_mul(min_size.max(1)) > self.left() {
            return Err(Malformed { at, what: Malformation::Count(n) });
        }
        Ok(n)
    }
    /// A node id below `user` (operands precede their user).
    fn id(&mut self, user: u32) -> DResult<NodeId> {
        let at = self.pos;
        let id = self.u32()?;
        if id >= user {
            return Err(Malformed { at, what: Malformation::OperandOrder { id, user } });
        }
        Ok(NodeId(id))
    }
    /// Node ids, each below `user`.
    fn ids(&mut self, user: u32, out: &mut Vec<NodeId>) -> DResult<()> {
        let n = self.count(4)?;
        out.clear();
        for _ in 0..n {
            out.push(self.id(user)?);
        }
        Ok(())
    }
}

/// How a read arena's references to strings, constants and spans are resolved.
pub(crate) trait ReadRefs<'a> {
    /// A string [`WriteRefs::string`] wrote.
    fn string(&mut self, d: &mut Dec<'a>) -> DResult<&'a str>;
    /// An attribute key or string value (an `Arc` the reader may share).
    fn arc(&mut self, d: &mut Dec<'a>) -> DResult<Arc<str>> {
        self.string(d).map(Arc::from)
    }
    /// An operator name.
    fn op(&mut self, d: &mut Dec<'a>) -> DResult<OpId> {
        let at = d.pos;
        let name = self.string(d)?;
        crate::op::lookup(name).ok_or_else(|| Malformed { at, what: Malformation::UnknownOperator(name.to_string()) })
    }
    /// A constant [`WriteRefs::constant`] wrote, with its type.
    fn constant(&mut self, d: &mut Dec<'a>) -> DResult<(Arc<Constant>, Type)>;
    /// A span [`WriteRefs::span`] wrote.
    fn span(&mut self, d: &mut Dec<'a>) -> DResult<Option<Span>>;
}

fn read_dtype<'a>(d: &mut Dec<'a>, refs: &mut impl ReadRefs<'a>) -> DResult<DType> {
    let at = d.pos;
    let name = refs.string(d)?;
    DType::from_name(name).ok_or_else(|| Malformed { at, what: Malformation::UnknownDtype(name.to_string()) })
}

/// What [`write_tensor_type`] wrote.
pub(crate) fn read_tensor_type<'a>(d: &mut Dec<'a>, refs: &mut impl ReadRefs<'a>) -> DResult<TensorType> {
    let at = d.pos;
    let rank = d.count(8)?;
    if rank > MAX_RANK {
        return Err(Malformed { at, what: Malformation::Rank(rank) });
    }
    let mut shape = Vec::with_capacity(rank);
    for _ in 0..rank {
        shape.push(d.u64()?);
    }
    Ok(TensorType { shape: shape.into(), dtype: read_dtype(d, refs)? })
}

fn read_type<'a>(d: &mut Dec<'a>, refs: &mut impl ReadRefs<'a>, depth: u32) -> DResult<Type> {
    if depth > MAX_NESTING {
        return Err(d.err(Malformation::TooDeep));
    }
    let at = d.pos;
    match d.u8()? {
        TY_TENSOR => {
            let t = read_tensor_type(d, refs)?;
            Ok(Type::tensor(t.shape.into_vec(), t.dtype))
        }
        TY_TUPLE => {
            let n = d.count(1)?;
            let fields = (0..n).map(|_| read_type(d, refs, depth + 1)).collect::<DResult<Vec<_>>>()?;
            Ok(Type::tuple(fields))
        }
        TY_FUNC => {
            let n = d.count(1)?;
            let params = (0..n).map(|_| read_type(d, refs, depth + 1)).collect::<DResult<Vec<_>>>()?;
            let ret = read_type(d, refs, depth + 1)?;
            Ok(Type::func(params, ret))
        }
        tag => Err(Malformed { at, what: Malformation::BadTag { what: "type", tag } }),
    }
}

fn read_opt_type<'a>(d: &mut Dec<'a>, refs: &mut impl ReadRefs<'a>) -> DResult<Option<Type>> {
    let at = d.pos;
    match d.u8()? {
        0 => Ok(None),
        1 => read_type(d, refs, 0).map(Some),
        tag => Err(Malformed { at, what: Malformation::BadTag { what: "type presence", tag } }),
    }
}

fn read_attrs<'a>(d: &mut Dec<'a>, refs: &mut impl ReadRefs<'a>) -> DResult<Attrs> {
    let at = d.pos;
    // Each entry takes at least a key (4 bytes), a tag and a byte of value.
    let n = d.count(6)?;
    if n == 0 {
        return Ok(Attrs::new());
    }
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        let key = refs.arc(d)?;
        let tag_at = d.pos;
        let value = match d.u8()? {
            ATTR_BOOL => AttrValue::Bool(match d.u8()? {
                0 => false,
                1 => true,
                tag => {
                    return Err(Malformed {
                        at: tag_at + 1,
                        what: Malformation::BadTag { what: "bool attribute", tag },
                    })
                }
            }),
            ATTR_INT => AttrValue::Int(d.u64()? as i64),
            ATTR_FLOAT => AttrValue::Float(f64::from_bits(d.u64()?)),
            ATTR_STR => AttrValue::Str(refs.arc(d)?),
            ATTR_INTS => {
                let len = d.count(8)?;
                let mut v = Vec::with_capacity(len);
                for _ in 0..len {
                    v.push(d.u64()? as i64);
                }
                AttrValue::Ints(v.into())
            }
            ATTR_DTYPE => AttrValue::DType(read_dtype(d, refs)?),
            tag => return Err(Malformed { at: tag_at, what: Malformation::BadTag { what: "attribute", tag } }),
        };
        entries.push((key, value));
    }
    let (attrs, repeated) = Attrs::from_entries(entries);
    if !repeated.is_empty() {
        return Err(Malformed { at, what: Malformation::RepeatedAttr });
    }
    Ok(attrs)
}

/// The fill [`fill_words`] gave.
pub(crate) fn read_fill(d: &mut Dec<'_>) -> DResult<Fill> {
    let at = d.pos;
    let (kind, a, b, c) = (d.u8()?, d.u64()?, d.u64()?, d.u64()?);
    match kind {
        0 => Ok(Fill::Full(f64::from_bits(a))),
        1 => Ok(Fill::Uniform { seed: a, low: f64::from_bits(b), high: f64::from_bits(c) }),
        2 => Ok(Fill::Normal { seed: a, mean: f64::from_bits(b), std: f64::from_bits(c) }),
        tag => Err(Malformed { at, what: Malformation::BadTag { what: "fill", tag } }),
    }
}

/// Reads an arena [`write_arena`] wrote, through the builder, one node per written node.
pub(crate) fn read_arena<'a>(d: &mut Dec<'a>, refs: &mut impl ReadRefs<'a>) -> DResult<Function> {
    let n_types = d.count(1)?;
    let mut table = Vec::with_capacity(n_types);
    for _ in 0..n_types {
        table.push(read_type(d, refs, 0)?);
    }
    let start = d.pos;
    // Every node takes at least 5 bytes (type index, kind tag).
    let n = d.count(5)?;
    let mut b = FunctionBuilder::new();
    let mut tys = Vec::with_capacity(n);
    let mut ids = Vec::new();
    for i in 0..n as u32 {
        let at = d.pos;
        let ty = d.u32()?;
        if ty != u32::MAX && ty as usize >= table.len() {
            return Err(Malformed { at, what: Malformation::TypeOutside(ty) });
        }
        tys.push(if ty == u32::MAX { TyIdx::NONE } else { TyIdx::new(ty) });
        if let Some(span) = refs.span(d)? {
            b.set_span(span);
        } else {
            b.set_span(Span::default());
        }
        let tag_at = d.pos;
        let id = match d.u8()? {
            VAR => b.var(refs.string(d)?, None),
            GLOBAL => b.global(refs.string(d)?),
            CONST => {
                let (c, ty) = refs.constant(d)?;
                b.constant_typed(c, ty)
            }
            CALL => {
                let op = refs.op(d)?;
                let attrs = read_attrs(d, refs)?;
                d.ids(i, &mut ids)?;
                b.call(op, &ids, attrs)
            }
            APPLY => {
                let callee = d.id(i)?;
                d.ids(i, &mut ids)?;
                b.apply(callee, &ids)
            }
            TUPLE => {
                d.ids(i, &mut ids)?;
                b.tuple(&ids)
            }
            PROJ => {
                let tuple = d.id(i)?;
                b.proj(tuple, d.u32()?)
            }
            IF => {
                let (cond, then_, else_) = (d.id(i)?, d.id(i)?, d.id(i)?);
                b.if_(cond, then_, else_)
            }
            FUNC => {
                d.ids(i, &mut ids)?;
                let body = d.id(i)?;
                let ret_ty = read_opt_type(d, refs)?;
                let attrs = read_attrs(d, refs)?;
                b.closure(&ids, body, ret_ty, attrs)
            }
            BLOCK => {
                d.ids(i, &mut ids)?;
                let result = d.id(i)?;
                if ids.is_empty() || ids.len() % 2 != 0 {
                    return Err(Malformed { at: tag_at, what: Malformation::BlockBindings });
                }
                let pairs: Vec<(NodeId, NodeId)> = ids.chunks_exact(2).map(|p| (p[0], p[1])).collect();
                b.block(&pairs, result)
            }
            tag => return Err(Malformed { at: tag_at, what: Malformation::BadTag { what: "node", tag } }),
        };
        if id != NodeId(i) {
            return Err(Malformed { at: tag_at, what: Malformation::OutOfPlace(i) });
        }
    }
    d.ids(n as u32, &mut ids)?;
    let params = std::mem::take(&mut ids);
    let body = d.id(n as u32)?;
    let ret_ty = read_opt_type(d, refs)?;
    let attrs = read_attrs(d, refs)?;
    let f = b.finish(&params, body, ret_ty, attrs);
    if !f.is_well_formed() {
        return Err(Malformed { at: start, what: Malformation::NotWellFormed });
    }
    f.with_type_table(table, &tys).ok_or(Malformed { at: start, what: Malformation::TypeTable })
}
