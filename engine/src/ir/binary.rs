//! `.pirb`, the binary form of a module (in the spirit of MLIR's bytecode): a versioned
//! header, a table of sections, a string table, the graph functions arena by arena, the
//! PrimFuncs, a constant table, and the constants' bytes as 64-byte aligned raw blobs that a
//! reader takes as slices of the file's buffer (no decoding, no copy for a raw constant).
//! `docs/binary-format.md` describes the layout byte by byte.
//!
//! Text stays the human format; the binary form holds exactly the module the text parses
//! to, so text → binary → text gives the same bytes: a graph function is written node by
//! node in id order with its names, types (a type table plus an index per node), call
//! attributes and constants, and read back through the builder, one node per written node.
//! Source spans are not kept (a binary module has no source text to point into). PrimFuncs
//! are written as their canonical text: they hold no weights and are small next to the graph
//! level, and their text is the one encoding of the loop level that the tir floor maintains.
//!
//! Reading never panics and never trusts a count, length, offset or id: every count is
//! checked against the bytes left before anything is allocated for it, every operand must
//! precede its user, blobs must lie inside the data section, an unknown operator, dtype or
//! tag is an error naming its byte offset, and each function must be well formed.

use std::sync::Arc;

use bytes::Bytes;
use rustc_hash::FxHashMap;

use super::attrs::{AttrValue, Attrs};
use super::builder::FunctionBuilder;
use super::expr::{ExprKind, TyIdx};
use super::function::{Closure, Function};
use super::ids::{NodeId, OpId};
use super::module::Module;
use super::parser::{parse_module, MAX_NESTING, MAX_RANK};
use super::tensor::{Constant, Fill, Tensor};
use super::ty::{DType, TensorType, Type, TypeKind};

/// The first eight bytes of every `.pirb` file. The first byte is not ASCII and not valid
/// UTF-8, so no `.pir` text starts with it; the `\r\n` and `\x1a` catch transfers that
/// rewrite line ends or stop at end-of-file characters (PNG's trick).
pub const PIRB_MAGIC: [u8; 8] = *b"\x89PIRB\r\n\x1a";

/// The layout version this engine writes and reads. Any change of the layout bumps it.
pub const PIRB_VERSION: u32 = 1;

/// Alignment of every constant blob, from the start of the file: a page-aligned buffer (a
/// memory mapping, an aligned read) gives slices that any SIMD kernel may load directly.
pub const PIRB_BLOB_ALIGN: usize = 64;

const SEC_STRINGS: u32 = 1;
const SEC_CONSTANTS: u32 = 2;
const SEC_FUNCTIONS: u32 = 3;
const SEC_PRIMS: u32 = 4;
const SEC_DATA: u32 = 5;
const SECTIONS: [u32; 5] = [SEC_STRINGS, SEC_CONSTANTS, SEC_FUNCTIONS, SEC_PRIMS, SEC_DATA];

/// Longest engine version string a header may carry.
const MAX_ENGINE_VERSION: usize = 64;

/// Why a module cannot be written to, or read from, the binary form.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BinaryError {
    /// The bytes do not start with [`PIRB_MAGIC`].
    #[error("not a binary module: it does not start with the .pirb magic number")]
    NotBinary,
    /// A layout version this engine does not read.
    #[error("binary module format version {found} (written by passel {engine}); this passel {ours} reads version {expected} only: convert it with the passel that wrote it (`passel fmt FILE > FILE.pir`)")]
    Version {
        /// The file's version.
        found: u32,
        /// The version this engine reads.
        expected: u32,
        /// The engine version the file says wrote it.
        engine: String,
        /// This engine's version.
        ours: &'static str,
    },
    /// The bytes are damaged: truncated, an offset or length outside the file, a bad tag.
    #[error("damaged binary module at byte {offset}: {what}")]
    Malformed {
        /// Byte offset from the start of the file.
        offset: u64,
        /// What is wrong there.
        what: String,
    },
    /// The module cannot be written (a type nested deeper than a reader accepts, a
    /// malformed arena).
    #[error("cannot write @{func} in binary form: {what}")]
    Unwritable {
        /// The function.
        func: String,
        /// Why.
        what: &'static str,
    },
}

/// Whether `bytes` start like a binary module (the CLI tells `.pirb` from `.pir` by this,
/// not by the file's name).
pub fn is_binary_module(bytes: &[u8]) -> bool {
    bytes.starts_with(&PIRB_MAGIC)
}

// ---------------------------------------------------------------------------------------
// Writing

/// Little-endian integers and the module-wide tables they index.
#[derive(Default)]
struct Enc {
    out: Vec<u8>,
}

impl Enc {
    fn u8(&mut self, v: u8) {
        self.out.push(v);
    }
    fn u32(&mut self, v: u32) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.out.extend_from_slice(&v.to_le_bytes());
    }
    fn ids(&mut self, ids: &[NodeId]) {
        self.u32(ids.len() as u32);
        for id in ids {
            self.u32(id.0);
        }
    }
}

/// The string table being built: each distinct string once, numbered in first-use order.
#[derive(Default)]
struct Strings<'m> {
    index: FxHashMap<&'m str, u32>,
    list: Vec<&'m str>,
}

impl<'m> Strings<'m> {
    fn get(&mut self, s: &'m str) -> u32 {
        let next = self.list.len() as u32;
        *self.index.entry(s).or_insert_with(|| {
            self.list.push(s);
            next
        })
    }
}

/// Everything a module's functions refer to by index, and their encodings.
struct ModuleWriter<'m> {
    strings: Strings<'m>,
    /// Constants in first-use order; one entry per distinct `Arc`.
    consts: Vec<&'m Arc<Constant>>,
    const_index: FxHashMap<*const Constant, u32>,
    funcs: Enc,
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

const CONST_DENSE: u8 = 0;
const CONST_FILL: u8 = 1;
const CONST_RAW: u8 = 2;

const ATTR_BOOL: u8 = 0;
const ATTR_INT: u8 = 1;
const ATTR_FLOAT: u8 = 2;
const ATTR_STR: u8 = 3;
const ATTR_INTS: u8 = 4;
const ATTR_DTYPE: u8 = 5;

impl<'m> ModuleWriter<'m> {
    fn tensor_type(&mut self, e: &mut Enc, t: &TensorType) {
        e.u32(t.shape.len() as u32);
        for &d in t.shape.iter() {
            e.u64(d);
        }
        e.u32(self.strings.get(t.dtype.name()));
    }

    /// Writes `ty`; `None` when it nests deeper than [`MAX_NESTING`].
    fn ty(&mut self, e: &mut Enc, ty: &Type, depth: u32) -> Option<()> {
        if depth > MAX_NESTING {
            return None;
        }
        match ty.kind() {
            TypeKind::Tensor(t) => {
                e.u8(TY_TENSOR);
                self.tensor_type(e, t);
            }
            TypeKind::Tuple(fields) => {
                e.u8(TY_TUPLE);
                e.u32(fields.len() as u32);
                for f in fields.iter() {
                    self.ty(e, f, depth + 1)?;
                }
            }
            TypeKind::Func(f) => {
                e.u8(TY_FUNC);
                e.u32(f.params.len() as u32);
                for p in f.params.iter() {
                    self.ty(e, p, depth + 1)?;
                }
                self.ty(e, &f.ret, depth + 1)?;
            }
        }
        Some(())
    }

    fn opt_ty(&mut self, e: &mut Enc, ty: Option<&Type>) -> Option<()> {
        match ty {
            Some(ty) => {
                e.u8(1);
                self.ty(e, ty, 0)
            }
            None => {
                e.u8(0);
                Some(())
            }
        }
    }

    fn attrs(&mut self, e: &mut Enc, attrs: &'m Attrs) {
        e.u32(attrs.len() as u32);
        for (key, value) in attrs.iter() {
            e.u32(self.strings.get(key));
            match value {
                AttrValue::Bool(b) => {
                    e.u8(ATTR_BOOL);
                    e.u8(u8::from(*b));
                }
                AttrValue::Int(i) => {
                    e.u8(ATTR_INT);
                    e.u64(*i as u64);
                }
                AttrValue::Float(f) => {
                    e.u8(ATTR_FLOAT);
                    e.u64(f.to_bits());
                }
                AttrValue::Str(s) => {
                    e.u8(ATTR_STR);
                    e.u32(self.strings.get(s));
                }
                AttrValue::Ints(v) => {
                    e.u8(ATTR_INTS);
                    e.u32(v.len() as u32);
                    for &i in v.iter() {
                        e.u64(i as u64);
                    }
                }
                AttrValue::DType(d) => {
                    e.u8(ATTR_DTYPE);
                    e.u32(self.strings.get(d.name()));
                }
            }
        }
    }

    fn constant(&mut self, c: &'m Arc<Constant>) -> u32 {
        let next = self.consts.len() as u32;
        *self.const_index.entry(Arc::as_ptr(c)).or_insert_with(|| {
            self.consts.push(c);
            next
        })
    }

    fn function(&mut self, name: &'m str, f: &'m Function) -> Result<(), BinaryError> {
        let unwritable = |what| BinaryError::Unwritable { func: name.to_string(), what };
        if !f.is_well_formed() {
            return Err(unwritable("its arena is malformed"));
        }
        let mut e = std::mem::take(&mut self.funcs);
        e.u32(self.strings.get(name));
        let table = f.type_table();
        e.u32(table.len() as u32);
        for ty in table {
            self.ty(&mut e, ty, 0).ok_or_else(|| unwritable("a type nests too deep"))?;
        }
        e.u32(f.num_nodes() as u32);
        for node in f.nodes() {
            e.u32(node.ty.index().map_or(u32::MAX, |t| t as u32));
            match node.kind {
                ExprKind::Var { name } => {
                    e.u8(VAR);
                    e.u32(self.strings.get(f.sym(name)));
                }
                ExprKind::Global { name } => {
                    e.u8(GLOBAL);
                    e.u32(self.strings.get(f.sym(name)));
                }
                ExprKind::Const { idx } => {
                    e.u8(CONST);
                    e.u32(self.constant(f.constant(idx)));
                }
                ExprKind::Call { op, attrs, args } => {
                    e.u8(CALL);
                    let op_name =
                        crate::op::try_get(op).map(|d| d.name).ok_or_else(|| unwritable("unknown operator"))?;
                    e.u32(self.strings.get(op_name));
                    self.attrs(&mut e, f.call_attrs(attrs));
                    e.ids(f.ids(args));
                }
                ExprKind::Apply { callee, args } => {
                    e.u8(APPLY);
                    e.u32(callee.0);
                    e.ids(f.ids(args));
                }
                ExprKind::Tuple { fields } => {
                    e.u8(TUPLE);
                    e.ids(f.ids(fields));
                }
                ExprKind::Proj { tuple, index } => {
                    e.u8(PROJ);
                    e.u32(tuple.0);
                    e.u32(index);
                }
                ExprKind::If { cond, then_, else_ } => {
                    e.u8(IF);
                    e.u32(cond.0);
                    e.u32(then_.0);
                    e.u32(else_.0);
                }
                ExprKind::Func { idx } => {
                    let Closure { params, body, ret_ty, attrs } = f.closure(idx);
                    e.u8(FUNC);
                    e.ids(f.ids(*params));
                    e.u32(body.0);
                    self.opt_ty(&mut e, ret_ty.as_ref()).ok_or_else(|| unwritable("a type nests too deep"))?;
                    self.attrs(&mut e, attrs);
                }
                ExprKind::Block { bindings, result } => {
                    e.u8(BLOCK);
                    e.ids(f.ids(bindings));
                    e.u32(result.0);
                }
            }
        }
        e.ids(f.params());
        e.u32(f.body().0);
        self.opt_ty(&mut e, f.ret_ty()).ok_or_else(|| unwritable("a type nests too deep"))?;
        self.attrs(&mut e, f.attrs());
        self.funcs = e;
        Ok(())
    }
}

fn pad_to(out: &mut Vec<u8>, align: usize) {
    out.resize(out.len().next_multiple_of(align), 0);
}

/// The fill's kind and parameters as stored (the same four numbers its identity uses).
fn fill_words(fill: &Fill) -> (u8, u64, u64, u64) {
    match *fill {
        Fill::Full(v) => (0, v.to_bits(), 0, 0),
        Fill::Uniform { seed, low, high } => (1, seed, low.to_bits(), high.to_bits()),
        Fill::Normal { seed, mean, std } => (2, seed, mean.to_bits(), std.to_bits()),
    }
}

/// The binary form of `m` (see the module docs). Fails only for a function a reader could
/// not accept back (a type nested deeper than the text format allows, a malformed arena).
pub fn write_module_binary(m: &Module) -> Result<Vec<u8>, BinaryError> {
    let mut w = ModuleWriter {
        strings: Strings::default(),
        consts: Vec::new(),
        const_index: FxHashMap::default(),
        funcs: Enc::default(),
    };
    w.funcs.u32(m.len() as u32);
    for (name, f) in m.iter() {
        w.function(name, f)?;
    }

    // PrimFuncs as their canonical text, one after the other.
    let mut prims = Enc::default();
    let mut prim_text = String::new();
    for (i, (name, f)) in m.prim_funcs().enumerate() {
        if i > 0 {
            prim_text.push('\n');
        }
        crate::tir::write_prim_func(&mut prim_text, name, f);
    }
    prims.u32(m.prim_funcs().len() as u32);
    prims.u64(prim_text.len() as u64);
    prims.out.extend_from_slice(prim_text.as_bytes());

    // Constants: a table of entries, their bytes in the data section.
    let mut consts = Enc::default();
    let mut data: Vec<u8> = Vec::new();
    consts.u32(w.consts.len() as u32);
    let entries = std::mem::take(&mut w.consts);
    let blob = |consts: &mut Enc, data: &mut Vec<u8>, bytes: &[u8]| {
        pad_to(data, PIRB_BLOB_ALIGN);
        consts.u64(data.len() as u64);
        consts.u64(bytes.len() as u64);
        data.extend_from_slice(bytes);
    };
    for c in &entries {
        match &***c {
            Constant::Dense(t) => {
                consts.u8(CONST_DENSE);
                w.tensor_type(&mut consts, &t.tensor_type());
                blob(&mut consts, &mut data, &t.to_le_bytes());
            }
            Constant::Raw { ty, data: bytes } => {
                consts.u8(CONST_RAW);
                w.tensor_type(&mut consts, ty);
                blob(&mut consts, &mut data, bytes);
            }
            Constant::Fill { ty, fill } => {
                consts.u8(CONST_FILL);
                w.tensor_type(&mut consts, ty);
                let (kind, a, b, c) = fill_words(fill);
                consts.u8(kind);
                consts.u64(a);
                consts.u64(b);
                consts.u64(c);
            }
        }
    }

    let mut strings = Enc::default();
    strings.u32(w.strings.list.len() as u32);
    for s in &w.strings.list {
        strings.u32(s.len() as u32);
        strings.out.extend_from_slice(s.as_bytes());
    }

    // Header, section table, then the sections; the data section starts aligned.
    let engine = env!("CARGO_PKG_VERSION");
    let mut out = Vec::with_capacity(data.len() + w.funcs.out.len() + strings.out.len() + 4096);
    out.extend_from_slice(&PIRB_MAGIC);
    out.extend_from_slice(&PIRB_VERSION.to_le_bytes());
    out.extend_from_slice(&(engine.len() as u32).to_le_bytes());
    out.extend_from_slice(engine.as_bytes());
    out.extend_from_slice(&(SECTIONS.len() as u32).to_le_bytes());
    let table_at = out.len();
    out.resize(table_at + SECTIONS.len() * 24, 0);
    let bodies: [&[u8]; 4] = [&strings.out, &consts.out, &w.funcs.out, &prims.out];
    let mut placed = Vec::with_capacity(SECTIONS.len());
    for body in bodies {
        pad_to(&mut out, 8);
        placed.push((out.len(), body.len()));
        out.extend_from_slice(body);
    }
    pad_to(&mut out, PIRB_BLOB_ALIGN);
    placed.push((out.len(), data.len()));
    out.extend_from_slice(&data);
    for (i, (&id, &(offset, len))) in SECTIONS.iter().zip(&placed).enumerate() {
        let at = table_at + i * 24;
        out[at..at + 4].copy_from_slice(&id.to_le_bytes());
        out[at + 8..at + 16].copy_from_slice(&(offset as u64).to_le_bytes());
        out[at + 16..at + 24].copy_from_slice(&(len as u64).to_le_bytes());
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------
// Reading

/// A cursor over one section of the file; every read fails cleanly past the section's end,
/// and errors carry the absolute byte offset.
struct Dec<'a> {
    file: &'a [u8],
    pos: usize,
    end: usize,
}

type DResult<T> = Result<T, BinaryError>;

fn malformed(offset: usize, what: impl Into<String>) -> BinaryError {
    BinaryError::Malformed { offset: offset as u64, what: what.into() }
}

impl<'a> Dec<'a> {
    fn err(&self, what: impl Into<String>) -> BinaryError {
        malformed(self.pos, what)
    }
    fn left(&self) -> usize {
        self.end - self.pos
    }
    fn take(&mut self, n: usize) -> DResult<&'a [u8]> {
        if self.left() < n {
            return Err(self.err(format!("truncated: {n} bytes needed, {} left in the section", self.left())));
        }
        let s = &self.file[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn u8(&mut self) -> DResult<u8> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> DResult<u32> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    fn u64(&mut self) -> DResult<u64> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }
    /// A count of elements that take at least `min_size` bytes each: never more than what is
    /// left of the section can hold, so a damaged count cannot make the reader allocate much.
    fn count(&mut self, min_size: usize) -> DResult<usize> {
        let at = self.pos;
        let n = self.u32()? as usize;
        if n.saturating_mul(min_size.max(1)) > self.left() {
            return Err(malformed(at, format!("count {n} is larger than the section can hold")));
        }
        Ok(n)
    }
}

/// The tables a function's nodes refer to, decoded once per module.
struct Tables<'a> {
    strings: Vec<&'a str>,
    /// Operator of each string, looked up on first use (`Some(None)`: not an operator).
    ops: Vec<Option<Option<OpId>>>,
    /// Each string as an `Arc<str>` (attribute keys and values), made on first use.
    arcs: Vec<Option<Arc<str>>>,
    consts: Vec<(Arc<Constant>, Type)>,
}

impl<'a> Tables<'a> {
    fn string(&self, d: &mut Dec<'a>) -> DResult<&'a str> {
        let at = d.pos;
        let i = d.u32()? as usize;
        self.strings.get(i).copied().ok_or_else(|| malformed(at, format!("string {i} is outside the string table")))
    }
    fn arc(&mut self, d: &mut Dec<'a>) -> DResult<Arc<str>> {
        let at = d.pos;
        let i = d.u32()? as usize;
        let s = *self.strings.get(i).ok_or_else(|| malformed(at, format!("string {i} is outside the string table")))?;
        Ok(self.arcs[i].get_or_insert_with(|| Arc::from(s)).clone())
    }
    fn op(&mut self, d: &mut Dec<'a>) -> DResult<OpId> {
        let at = d.pos;
        let i = d.u32()? as usize;
        let name =
            *self.strings.get(i).ok_or_else(|| malformed(at, format!("string {i} is outside the string table")))?;
        (*self.ops[i].get_or_insert_with(|| crate::op::lookup(name)))
            .ok_or_else(|| malformed(at, format!("unknown operator `{name}`")))
    }
    fn dtype(&self, d: &mut Dec<'a>) -> DResult<DType> {
        let at = d.pos;
        let name = self.string(d)?;
        DType::from_name(name).ok_or_else(|| malformed(at, format!("unknown dtype `{name}`")))
    }
    fn tensor_type(&self, d: &mut Dec<'a>) -> DResult<TensorType> {
        let at = d.pos;
        let rank = d.count(8)?;
        if rank > MAX_RANK {
            return Err(malformed(at, format!("rank {rank} is over the limit of {MAX_RANK}")));
        }
        let mut shape = Vec::with_capacity(rank);
        for _ in 0..rank {
            shape.push(d.u64()?);
        }
        Ok(TensorType { shape: shape.into(), dtype: self.dtype(d)? })
    }
    fn ty(&self, d: &mut Dec<'a>, depth: u32) -> DResult<Type> {
        if depth > MAX_NESTING {
            return Err(d.err(format!("type nested deeper than {MAX_NESTING}")));
        }
        let at = d.pos;
        match d.u8()? {
            TY_TENSOR => {
                let t = self.tensor_type(d)?;
                Ok(Type::tensor(t.shape.into_vec(), t.dtype))
            }
            TY_TUPLE => {
                let n = d.count(1)?;
                let fields = (0..n).map(|_| self.ty(d, depth + 1)).collect::<DResult<Vec<_>>>()?;
                Ok(Type::tuple(fields))
            }
            TY_FUNC => {
                let n = d.count(1)?;
                let params = (0..n).map(|_| self.ty(d, depth + 1)).collect::<DResult<Vec<_>>>()?;
                let ret = self.ty(d, depth + 1)?;
                Ok(Type::func(params, ret))
            }
            tag => Err(malformed(at, format!("bad type tag {tag}"))),
        }
    }
    fn opt_ty(&self, d: &mut Dec<'a>) -> DResult<Option<Type>> {
        let at = d.pos;
        match d.u8()? {
            0 => Ok(None),
            1 => self.ty(d, 0).map(Some),
            tag => Err(malformed(at, format!("bad type presence tag {tag}"))),
        }
    }
    fn attrs(&mut self, d: &mut Dec<'a>) -> DResult<Attrs> {
        let at = d.pos;
        // Each entry takes at least a key (4 bytes), a tag and a byte of value.
        let n = d.count(6)?;
        if n == 0 {
            return Ok(Attrs::new());
        }
        let mut entries = Vec::with_capacity(n);
        for _ in 0..n {
            let key = self.arc(d)?;
            let tag_at = d.pos;
            let value = match d.u8()? {
                ATTR_BOOL => AttrValue::Bool(match d.u8()? {
                    0 => false,
                    1 => true,
                    b => return Err(malformed(tag_at + 1, format!("bad bool attribute {b}"))),
                }),
                ATTR_INT => AttrValue::Int(d.u64()? as i64),
                ATTR_FLOAT => AttrValue::Float(f64::from_bits(d.u64()?)),
                ATTR_STR => AttrValue::Str(self.arc(d)?),
                ATTR_INTS => {
                    let len = d.count(8)?;
                    let mut v = Vec::with_capacity(len);
                    for _ in 0..len {
                        v.push(d.u64()? as i64);
                    }
                    AttrValue::Ints(v.into())
                }
                ATTR_DTYPE => AttrValue::DType(self.dtype(d)?),
                tag => return Err(malformed(tag_at, format!("bad attribute tag {tag}"))),
            };
            entries.push((key, value));
        }
        let (attrs, repeated) = Attrs::from_entries(entries);
        if !repeated.is_empty() {
            return Err(malformed(at, "repeated attribute key"));
        }
        Ok(attrs)
    }
}

/// Node ids, each below `bound` (the node being read: operands precede their user).
fn read_ids(d: &mut Dec<'_>, bound: u32, out: &mut Vec<NodeId>) -> DResult<()> {
    let n = d.count(4)?;
    out.clear();
    for _ in 0..n {
        out.push(read_id(d, bound)?);
    }
    Ok(())
}

fn read_id(d: &mut Dec<'_>, bound: u32) -> DResult<NodeId> {
    let at = d.pos;
    let id = d.u32()?;
    if id >= bound {
        return Err(malformed(at, format!("operand %{id} does not precede its user %{bound}")));
    }
    Ok(NodeId(id))
}

fn read_function<'a>(d: &mut Dec<'a>, t: &mut Tables<'a>) -> DResult<(&'a str, Function)> {
    let name = t.string(d)?;
    let n_types = d.count(1)?;
    let mut table = Vec::with_capacity(n_types);
    for _ in 0..n_types {
        table.push(t.ty(d, 0)?);
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
            return Err(malformed(at, format!("type {ty} is outside the function's type table")));
        }
        tys.push(if ty == u32::MAX { TyIdx::NONE } else { TyIdx::new(ty) });
        let tag_at = d.pos;
        let id = match d.u8()? {
            VAR => b.var(t.string(d)?, None),
            GLOBAL => b.global(t.string(d)?),
            CONST => {
                let at = d.pos;
                let k = d.u32()? as usize;
                let (c, ty) =
                    t.consts.get(k).ok_or_else(|| malformed(at, format!("constant {k} is outside the table")))?;
                b.constant_typed(Arc::clone(c), ty.clone())
            }
            CALL => {
                let op = t.op(d)?;
                let attrs = t.attrs(d)?;
                read_ids(d, i, &mut ids)?;
                b.call(op, &ids, attrs)
            }
            APPLY => {
                let callee = read_id(d, i)?;
                read_ids(d, i, &mut ids)?;
                b.apply(callee, &ids)
            }
            TUPLE => {
                read_ids(d, i, &mut ids)?;
                b.tuple(&ids)
            }
            PROJ => {
                let tuple = read_id(d, i)?;
                b.proj(tuple, d.u32()?)
            }
            IF => {
                let (cond, then_, else_) = (read_id(d, i)?, read_id(d, i)?, read_id(d, i)?);
                b.if_(cond, then_, else_)
            }
            FUNC => {
                read_ids(d, i, &mut ids)?;
                let body = read_id(d, i)?;
                let ret_ty = t.opt_ty(d)?;
                let attrs = t.attrs(d)?;
                b.closure(&ids, body, ret_ty, attrs)
            }
            BLOCK => {
                read_ids(d, i, &mut ids)?;
                let result = read_id(d, i)?;
                if ids.is_empty() || ids.len() % 2 != 0 {
                    return Err(malformed(tag_at, "block without whole bindings"));
                }
                let pairs: Vec<(NodeId, NodeId)> = ids.chunks_exact(2).map(|p| (p[0], p[1])).collect();
                b.block(&pairs, result)
            }
            tag => return Err(malformed(tag_at, format!("bad node tag {tag}"))),
        };
        if id != NodeId(i) {
            return Err(malformed(tag_at, format!("node %{i} is out of place")));
        }
    }
    read_ids(d, n as u32, &mut ids)?;
    let params = std::mem::take(&mut ids);
    let body = read_id(d, n as u32)?;
    let ret_ty = t.opt_ty(d)?;
    let attrs = t.attrs(d)?;
    let f = b.finish(&params, body, ret_ty, attrs);
    if !f.is_well_formed() {
        return Err(malformed(start, format!("function @{name} is not well formed")));
    }
    let f = f
        .with_type_table(table, &tys)
        .ok_or_else(|| malformed(start, format!("the type table of @{name} does not match its nodes")))?;
    Ok((name, f))
}

/// The cursor over section `id`, whose place the section table (ending at `table_end`)
/// gave and checked against the file.
fn section<'a>(file: &'a [u8], sections: &[Option<(usize, usize)>], id: u32, table_end: usize) -> DResult<Dec<'a>> {
    let slot = SECTIONS.iter().position(|&s| s == id).unwrap_or(0);
    let (pos, len) = sections[slot].ok_or_else(|| malformed(table_end, format!("section {id} is missing")))?;
    Ok(Dec { file, pos, end: pos + len })
}

/// Reads a module written by [`write_module_binary`]. Raw constants become slices of
/// `file` (shared, not copied); dense ones are decoded from their blobs.
pub fn read_module_binary(file: &Bytes) -> Result<Module, BinaryError> {
    let bytes: &[u8] = file;
    if !is_binary_module(bytes) {
        return Err(BinaryError::NotBinary);
    }
    let mut h = Dec { file: bytes, pos: PIRB_MAGIC.len(), end: bytes.len() };
    let version = h.u32()?;
    let engine_at = h.pos;
    let engine_len = h.u32()? as usize;
    if engine_len > MAX_ENGINE_VERSION {
        return Err(malformed(engine_at, format!("engine version of {engine_len} bytes")));
    }
    let engine = String::from_utf8_lossy(h.take(engine_len)?).into_owned();
    if version != PIRB_VERSION {
        return Err(BinaryError::Version {
            found: version,
            expected: PIRB_VERSION,
            engine,
            ours: env!("CARGO_PKG_VERSION"),
        });
    }
    let n_sections = h.count(24)?;
    let mut sections: [Option<(usize, usize)>; SECTIONS.len()] = [None; SECTIONS.len()];
    for _ in 0..n_sections {
        let at = h.pos;
        let id = h.u32()?;
        let _reserved = h.u32()?;
        let (offset, len) = (h.u64()?, h.u64()?);
        let slot =
            SECTIONS.iter().position(|&s| s == id).ok_or_else(|| malformed(at, format!("unknown section {id}")))?;
        if sections[slot].is_some() {
            return Err(malformed(at, format!("section {id} appears twice")));
        }
        let end = offset.checked_add(len).filter(|&e| e <= bytes.len() as u64);
        if end.is_none() {
            return Err(malformed(
                at,
                format!("section {id} at {offset}, {len} bytes, runs past the end of the file ({} bytes)", bytes.len()),
            ));
        }
        sections[slot] = Some((offset as usize, len as usize));
    }
    let table_end = h.pos;
    let sec = |id: u32| section(bytes, &sections, id, table_end);

    // Strings.
    let mut d = sec(SEC_STRINGS)?;
    let n = d.count(4)?;
    let mut strings = Vec::with_capacity(n);
    for _ in 0..n {
        let at = d.pos;
        let len = d.u32()? as usize;
        let s = std::str::from_utf8(d.take(len)?).map_err(|_| malformed(at, "string is not UTF-8"))?;
        strings.push(s);
    }
    let mut tables = Tables { ops: vec![None; n], arcs: vec![None; n], strings, consts: Vec::new() };

    // Constants, their bytes in the data section.
    let data = sec(SEC_DATA)?;
    let (data_at, data_len) = (data.pos, data.left());
    let mut d = sec(SEC_CONSTANTS)?;
    // Each entry takes at least a tag, a rank, a dtype and two words.
    let n = d.count(25)?;
    tables.consts.reserve(n);
    for k in 0..n {
        let at = d.pos;
        let kind = d.u8()?;
        let ty = tables.tensor_type(&mut d)?;
        let blob = |d: &mut Dec<'_>| -> DResult<Bytes> {
            let blob_at = d.pos;
            let (offset, len) = (d.u64()?, d.u64()?);
            match offset.checked_add(len) {
                Some(end) if end <= data_len as u64 => {
                    Ok(file.slice(data_at + offset as usize..data_at + end as usize))
                }
                _ => Err(malformed(
                    blob_at,
                    format!(
                        "blob of constant {k} at {offset}, {len} bytes, runs past the data section ({data_len} bytes)"
                    ),
                )),
            }
        };
        let c = match kind {
            CONST_DENSE => {
                let bytes = blob(&mut d)?;
                let t = Tensor::from_le_bytes(&ty.shape, ty.dtype, &bytes)
                    .map_err(|e| malformed(at, format!("constant {k}: {e}")))?;
                Constant::Dense(t)
            }
            CONST_RAW => {
                let bytes = blob(&mut d)?;
                Constant::raw(ty, bytes).map_err(|e| malformed(at, format!("constant {k}: {e}")))?
            }
            CONST_FILL => {
                let fill_at = d.pos;
                let (fk, a, b, c) = (d.u8()?, d.u64()?, d.u64()?, d.u64()?);
                let fill = match fk {
                    0 => Fill::Full(f64::from_bits(a)),
                    1 => Fill::Uniform { seed: a, low: f64::from_bits(b), high: f64::from_bits(c) },
                    2 => Fill::Normal { seed: a, mean: f64::from_bits(b), std: f64::from_bits(c) },
                    _ => return Err(malformed(fill_at, format!("bad fill tag {fk}"))),
                };
                Constant::Fill { ty, fill }
            }
            _ => return Err(malformed(at, format!("bad constant tag {kind}"))),
        };
        let ty = c.ty();
        tables.consts.push((Arc::new(c), ty));
    }

    // Graph functions.
    let mut module = Module::new();
    let mut d = sec(SEC_FUNCTIONS)?;
    // Each function takes at least a name, two counts, two ids and two tags.
    let n = d.count(22)?;
    for _ in 0..n {
        let at = d.pos;
        let (name, f) = read_function(&mut d, &mut tables)?;
        module.add(name, f).map_err(|e| malformed(at, e.to_string()))?;
    }

    // PrimFuncs, from their text.
    let mut d = sec(SEC_PRIMS)?;
    let n = d.count(1)?;
    let len_at = d.pos;
    let len = usize::try_from(d.u64()?).map_err(|_| malformed(len_at, "PrimFunc text too long"))?;
    let text_at = d.pos;
    let text = std::str::from_utf8(d.take(len)?).map_err(|_| malformed(text_at, "PrimFunc text is not UTF-8"))?;
    if n > 0 || !text.is_empty() {
        let prims = parse_module(text).map_err(|errs| {
            let first = errs.0.first().map(|e| e.to_string()).unwrap_or_default();
            malformed(text_at, format!("PrimFunc text does not parse: {first}"))
        })?;
        if !prims.is_empty() || prims.prim_funcs().len() != n {
            return Err(malformed(text_at, format!("PrimFunc text does not hold exactly {n} PrimFuncs")));
        }
        for (name, f) in prims.prim_funcs() {
            module.add_prim(name, Arc::clone(f)).map_err(|e| malformed(text_at, e.to_string()))?;
        }
    }
    Ok(module)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::print_module;

    const TEXT: &str = r#"def @g(%a: Tensor[(2,), f32]) -> Tensor[(2,), f32] { %a }

def @f(%x: Tensor[(2,), f32], %c: Tensor[(), bool]) -> Tensor[(2,), f32] {
  let %k = fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] { relu(%y) };
  let %t = (%x, 1.5f, tensor<(2,), f32>[1.0, 2.0], tensor<(2,), bool>[true, false], full<(64, 3), f32>(0.5));
  let %p = %t.0;
  let %s = mean(%p, axis=[0], keepdims=true);
  let %z = if (%c) { %k(%p) } else { @g(%p) };
  add(%z, %s)
}
"#;

    fn read(bytes: &[u8]) -> Result<Module, BinaryError> {
        read_module_binary(&Bytes::copy_from_slice(bytes))
    }

    #[test]
    fn a_module_reads_back_to_the_same_text() {
        let m = parse_module(TEXT).expect("parses");
        let bytes = write_module_binary(&m).expect("writes");
        assert!(is_binary_module(&bytes));
        assert_eq!(print_module(&read(&bytes).expect("reads")), print_module(&m));
        // The data section, and so every blob, starts aligned.
        assert_eq!(write_module_binary(&read(&bytes).unwrap()).unwrap(), bytes);
    }

    #[test]
    fn every_prefix_of_a_module_is_an_error() {
        let bytes = write_module_binary(&parse_module(TEXT).expect("parses")).expect("writes");
        for len in 0..bytes.len() {
            let err = read(&bytes[..len]).expect_err("a cut file is refused");
            if len >= PIRB_MAGIC.len() {
                assert!(matches!(err, BinaryError::Malformed { .. }), "cut at {len}: {err}");
            }
        }
    }
}
