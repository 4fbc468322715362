//! The encoding of a function in the persistent store's entries (`store.rs`): the arena in the
//! one binary arena encoding of `ir/binary/arena.rs` (the `.pirb` form's too), with every
//! string and constant written inline (a length-prefixed string; a constant's type and
//! bytes) and each node's span relative to a base, so that an entry stands alone and a
//! function that moved in its file keeps its entry. Decoding rebuilds the arena through the
//! builder, one node per encoded node, so the result has the same node ids, names, types,
//! constants, attributes and relative spans as the encoded function — what later stages and
//! the printed output depend on — including nodes no longer reachable from the body.
//!
//! Decoding never panics and never trusts a count or an id (the arena encoding's checks); a
//! refusal is one of [`Malformation::reason`]'s phrases, which the store reports.
//!
//! [`Malformation::reason`]: crate::ir::binary::arena::Malformation::reason

use std::sync::Arc;

pub(crate) use crate::ir::binary::arena::Writer;
use crate::ir::binary::arena::{
    check_constant, fill_words, read_arena, read_fill, read_tensor_type, write_arena, write_tensor_type, DResult, Dec,
    Malformation, Malformed, ReadRefs, WriteRefs,
};
use crate::ir::{Constant, DType, Function, Span, Tensor, Type};

/// Reads what [`Writer`] wrote; every read fails cleanly past the end.
pub(crate) struct Reader<'a>(pub(crate) &'a [u8]);

impl<'a> Reader<'a> {
    pub(crate) fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if self.0.len() < n {
            return Err("truncated entry");
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    pub(crate) fn u8(&mut self) -> Result<u8, &'static str> {
        Ok(self.take(1)?[0])
    }
    pub(crate) fn u32(&mut self) -> Result<u32, &'static str> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
    pub(crate) fn u64(&mut self) -> Result<u64, &'static str> {
        let b = self.take(8)?;
        Ok(u64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]))
    }
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], &'static str> {
        let n = usize::try_from(self.u64()?).map_err(|_| "truncated entry")?;
        self.take(n)
    }
    pub(crate) fn str(&mut self) -> Result<&'a str, &'static str> {
        std::str::from_utf8(self.bytes()?).map_err(|_| "text is not UTF-8")
    }
    pub(crate) fn opt_str(&mut self) -> Result<Option<&'a str>, &'static str> {
        match self.u8()? {
            0 => Ok(None),
            1 => self.str().map(Some),
            _ => Err("bad tag"),
        }
    }
    /// A count of elements that take at least `min_size` bytes each: never more than what is
    /// left of the entry can hold, so a damaged count cannot make a reader allocate much.
    pub(crate) fn count(&mut self, min_size: usize) -> Result<usize, &'static str> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_size.max(1)) > self.0.len() {
            return Err("count larger than the entry");
        }
        Ok(n)
    }
}

pub(crate) fn write_span(w: &mut Writer, span: Option<Span>, base: u32) {
    match span {
        Some(s) => {
            w.u8(1);
            w.u32(s.start.wrapping_sub(base));
            w.u32(s.end.wrapping_sub(base));
        }
        None => w.u8(0),
    }
}

pub(crate) fn read_span(r: &mut Reader<'_>, base: u32) -> Result<Option<Span>, &'static str> {
    let mut d = Dec::new(r.0);
    let span = read_span_at(&mut d, base).map_err(|m| m.what.reason())?;
    r.0 = &r.0[d.pos..];
    Ok(span)
}

fn read_span_at(d: &mut Dec<'_>, base: u32) -> DResult<Option<Span>> {
    let at = d.pos;
    match d.u8()? {
        0 => Ok(None),
        1 => {
            let (start, end) = (d.u32()?, d.u32()?);
            Ok(Some(Span { start: start.wrapping_add(base), end: end.wrapping_add(base) }))
        }
        tag => Err(Malformed { at, what: Malformation::BadTag { what: "span", tag } }),
    }
}

/// An entry's references: strings and constants inline, spans relative to `base`.
struct Inline {
    base: u32,
}

const CONST_DENSE: u8 = 0;
const CONST_FILL: u8 = 1;
const CONST_RAW: u8 = 2;

impl<'m> WriteRefs<'m> for Inline {
    fn string(&mut self, w: &mut Writer, s: &'m str) {
        w.str(s);
    }
    fn constant(&mut self, w: &mut Writer, c: &'m Arc<Constant>) -> Result<(), &'static str> {
        check_constant(c)?;
        match &**c {
            Constant::Dense(t) => {
                w.u8(CONST_DENSE);
                w.u32(t.shape().len() as u32);
                for &d in t.shape() {
                    w.u64(d as u64);
                }
                w.str(t.dtype().name());
                w.bytes(&t.to_le_bytes());
            }
            Constant::Fill { ty, fill } => {
                w.u8(CONST_FILL);
                write_tensor_type(w, self, ty);
                let (kind, a, b, c) = fill_words(fill);
                w.u8(kind);
                w.u64(a);
                w.u64(b);
                w.u64(c);
            }
            Constant::Raw { ty, data } => {
                w.u8(CONST_RAW);
                write_tensor_type(w, self, ty);
                w.bytes(data);
            }
        }
        Ok(())
    }
    fn span(&mut self, w: &mut Writer, span: Option<Span>) {
        write_span(w, span, self.base);
    }
}

impl<'a> ReadRefs<'a> for Inline {
    fn string(&mut self, d: &mut Dec<'a>) -> DResult<&'a str> {
        d.str()
    }
    fn constant(&mut self, d: &mut Dec<'a>) -> DResult<(Arc<Constant>, Type)> {
        let at = d.pos;
        let c = match d.u8()? {
            CONST_DENSE => {
                let rank = d.count(8)?;
                let mut shape = Vec::with_capacity(rank);
                for _ in 0..rank {
                    shape.push(d.u64()?);
                }
                let name_at = d.pos;
                let name = d.str()?;
                let dtype = DType::from_name(name)
                    .ok_or(Malformed { at: name_at, what: Malformation::UnknownDtype(name.to_string()) })?;
                let bytes = d.bytes()?;
                let t = Tensor::from_le_bytes(&shape, dtype, bytes)
                    .map_err(|e| Malformed { at, what: Malformation::ConstantBytes(e.to_string()) })?;
                Constant::Dense(t)
            }
            CONST_FILL => {
                let ty = read_tensor_type(d, self)?;
                Constant::Fill { ty, fill: read_fill(d)? }
            }
            CONST_RAW => {
                let ty = read_tensor_type(d, self)?;
                let data = bytes::Bytes::copy_from_slice(d.bytes()?);
                Constant::raw(ty, data)
                    .map_err(|e| Malformed { at, what: Malformation::ConstantBytes(e.to_string()) })?
            }
            tag => return Err(Malformed { at, what: Malformation::BadTag { what: "constant", tag } }),
        };
        let ty = c.ty();
        Ok((Arc::new(c), ty))
    }
    fn span(&mut self, d: &mut Dec<'a>) -> DResult<Option<Span>> {
        read_span_at(d, self.base)
    }
}

/// Encodes `f`, its spans relative to `base`; `None` when the function cannot be read back
/// (a malformed arena, a type nested or a rank over the readers' limits: such a function is
/// not stored).
pub(crate) fn write_function(w: &mut Writer, f: &Function, base: u32) -> Option<()> {
    write_arena(w, &mut Inline { base }, f).ok()
}

/// Decodes a function [`write_function`] wrote, its spans rebased on `base`.
pub(crate) fn read_function(r: &mut Reader<'_>, base: u32) -> Result<Function, &'static str> {
    let mut d = Dec::new(r.0);
    let f = read_arena(&mut d, &mut Inline { base }).map_err(|m| m.what.reason())?;
    r.0 = &r.0[d.pos..];
    Ok(f)
}

// ---- PrimFuncs ----
//
// A PrimFunc in an entry is its tables as they are (`tir::PrimFunc`'s arenas, pools, string
// table, attributes and statement spans), so a decoded PrimFunc equals the encoded one
// (`==`, the session's `same_prim`) and later stages and the printed output see what the
// computation gave. Element types by name, floats by bits, spans absolute (a PrimFunc's spans
// are part of its content key). Decoding checks every tag and count and then runs the tir
// verifier, which checks every id and range against its table: a damaged or foreign table is
// refused, never used.

use crate::ir::{AttrValue, Attrs};
use crate::tir::{
    verify_prim_func, BinOp, BufId, Buffer, ForKind, IdRange, Intrinsic, PExpr, PExprId, PExprKind, PType, Param,
    PrimFunc, PrimFuncParts, Stmt, StmtId, StmtKind, Var, VarId,
};

fn write_dtype(w: &mut Writer, d: DType) {
    w.str(d.name());
}

fn read_dtype(r: &mut Reader<'_>) -> Result<DType, &'static str> {
    DType::from_name(r.str()?).ok_or("unknown element type")
}

fn write_range(w: &mut Writer, r: IdRange) {
    w.u32(r.start);
    w.u32(r.len);
}

fn read_range(r: &mut Reader<'_>) -> Result<IdRange, &'static str> {
    Ok(IdRange { start: r.u32()?, len: r.u32()? })
}

fn write_ptype(w: &mut Writer, t: PType) {
    write_dtype(w, t.dtype);
    w.u32(u32::from(t.lanes));
}

fn read_ptype(r: &mut Reader<'_>) -> Result<PType, &'static str> {
    let dtype = read_dtype(r)?;
    let lanes = u16::try_from(r.u32()?).map_err(|_| "lane count out of range")?;
    Ok(PType { dtype, lanes })
}

fn write_i64s(w: &mut Writer, v: &[i64]) {
    w.u32(v.len() as u32);
    for &x in v {
        w.u64(x as u64);
    }
}

fn read_i64s(r: &mut Reader<'_>) -> Result<Vec<i64>, &'static str> {
    let n = r.count(8)?;
    (0..n).map(|_| r.u64().map(|x| x as i64)).collect()
}

fn write_attr_list(w: &mut Writer, attrs: &Attrs) {
    let entries: Vec<_> = attrs.iter().collect();
    w.u32(entries.len() as u32);
    for (key, value) in entries {
        w.str(key);
        match value {
            AttrValue::Bool(b) => {
                w.u8(0);
                w.u8(u8::from(*b));
            }
            AttrValue::Int(i) => {
                w.u8(1);
                w.u64(*i as u64);
            }
            AttrValue::Float(x) => {
                w.u8(2);
                w.u64(x.to_bits());
            }
            AttrValue::Str(s) => {
                w.u8(3);
                w.str(s);
            }
            AttrValue::Ints(v) => {
                w.u8(4);
                write_i64s(w, v);
            }
            AttrValue::DType(d) => {
                w.u8(5);
                write_dtype(w, *d);
            }
        }
    }
}

fn read_attr_list(r: &mut Reader<'_>) -> Result<Attrs, &'static str> {
    let n = r.count(10)?;
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        let key: Arc<str> = Arc::from(r.str()?);
        let value = match r.u8()? {
            0 => AttrValue::Bool(match r.u8()? {
                0 => false,
                1 => true,
                _ => return Err("bad flag"),
            }),
            1 => AttrValue::Int(r.u64()? as i64),
            2 => AttrValue::Float(f64::from_bits(r.u64()?)),
            3 => AttrValue::Str(Arc::from(r.str()?)),
            4 => AttrValue::Ints(read_i64s(r)?.into()),
            5 => AttrValue::DType(read_dtype(r)?),
            _ => return Err("bad attribute tag"),
        };
        entries.push((key, value));
    }
    let (attrs, repeated) = Attrs::from_entries(entries);
    if !repeated.is_empty() {
        return Err("repeated attribute key");
    }
    Ok(attrs)
}

const FOR_KINDS: [ForKind; 4] = [ForKind::Serial, ForKind::Parallel, ForKind::Vectorized, ForKind::Unrolled];

/// Writes `f`'s tables (see above).
pub(crate) fn write_prim(w: &mut Writer, f: &PrimFunc) {
    w.u32(f.params().len() as u32);
    for p in f.params() {
        match *p {
            Param::Var(v) => {
                w.u8(0);
                w.u32(v.0);
            }
            Param::Buf(b) => {
                w.u8(1);
                w.u32(b.0);
            }
        }
    }
    w.u32(f.vars().len() as u32);
    for v in f.vars() {
        w.str(&v.name);
        write_ptype(w, v.ty);
    }
    w.u32(f.bufs().len() as u32);
    for b in f.bufs() {
        w.str(&b.name);
        write_dtype(w, b.dtype);
        write_i64s(w, &b.shape);
        write_i64s(w, &b.strides);
        w.u64(b.elem_offset as u64);
        w.str(&b.scope);
    }
    w.u32(f.exprs().len() as u32);
    for e in f.exprs() {
        write_ptype(w, e.ty);
        match e.kind {
            PExprKind::Int(i) => {
                w.u8(0);
                w.u64(i as u64);
            }
            PExprKind::Float(x) => {
                w.u8(1);
                w.u64(x.to_bits());
            }
            PExprKind::Var(v) => {
                w.u8(2);
                w.u32(v.0);
            }
            PExprKind::Bin(op, a, b) => {
                w.u8(3);
                w.str(op.name());
                w.u32(a.0);
                w.u32(b.0);
            }
            PExprKind::Not(a) => {
                w.u8(4);
                w.u32(a.0);
            }
            PExprKind::Select(c, a, b) => {
                w.u8(5);
                w.u32(c.0);
                w.u32(a.0);
                w.u32(b.0);
            }
            PExprKind::Cast(a) => {
                w.u8(6);
                w.u32(a.0);
            }
            PExprKind::Load(b, r) => {
                w.u8(7);
                w.u32(b.0);
                write_range(w, r);
            }
            PExprKind::Call(intr, r) => {
                w.u8(8);
                w.str(intr.name());
                write_range(w, r);
            }
            PExprKind::Ramp(a, b) => {
                w.u8(9);
                w.u32(a.0);
                w.u32(b.0);
            }
            PExprKind::Broadcast(a) => {
                w.u8(10);
                w.u32(a.0);
            }
            PExprKind::Let(v, a, b) => {
                w.u8(11);
                w.u32(v.0);
                w.u32(a.0);
                w.u32(b.0);
            }
        }
    }
    w.u32(f.operand_pool().len() as u32);
    for o in f.operand_pool() {
        w.u32(o.0);
    }
    w.u32(f.stmts().len() as u32);
    for s in f.stmts() {
        match s.kind {
            StmtKind::For { var, min, extent, kind, body } => {
                w.u8(0);
                w.u32(var.0);
                w.u32(min.0);
                w.u32(extent.0);
                w.u8(FOR_KINDS.iter().position(|k| *k == kind).unwrap_or(0) as u8);
                w.u32(body.0);
            }
            StmtKind::Store { buf, indices, value } => {
                w.u8(1);
                w.u32(buf.0);
                write_range(w, indices);
                w.u32(value.0);
            }
            StmtKind::Let { var, value, body } => {
                w.u8(2);
                w.u32(var.0);
                w.u32(value.0);
                w.u32(body.0);
            }
            StmtKind::If { cond, then_, else_ } => {
                w.u8(3);
                w.u32(cond.0);
                w.u32(then_.0);
                match else_ {
                    Some(e) => {
                        w.u8(1);
                        w.u32(e.0);
                    }
                    None => w.u8(0),
                }
            }
            StmtKind::Seq(r) => {
                w.u8(4);
                write_range(w, r);
            }
            StmtKind::Alloc { buf, body } => {
                w.u8(5);
                w.u32(buf.0);
                w.u32(body.0);
            }
            StmtKind::Decl { buf, data, body } => {
                w.u8(6);
                w.u32(buf.0);
                w.u32(data.0);
                w.u32(body.0);
            }
            StmtKind::Evaluate(e) => {
                w.u8(7);
                w.u32(e.0);
            }
            StmtKind::Attr { key, value, body } => {
                w.u8(8);
                w.u32(key);
                w.u32(value.0);
                w.u32(body.0);
            }
        }
    }
    w.u32(f.stmt_list_pool().len() as u32);
    for s in f.stmt_list_pool() {
        w.u32(s.0);
    }
    w.u32(f.strings().len() as u32);
    for s in f.strings() {
        w.str(s);
    }
    w.u32(f.body().0);
    write_attr_list(w, f.attrs());
    w.u32(f.stmt_spans().len() as u32);
    for s in f.stmt_spans() {
        w.u32(s.start);
        w.u32(s.end);
    }
}

/// Reads what [`write_prim`] wrote: the PrimFunc `name`, checked by the tir verifier.
pub(crate) fn read_prim(r: &mut Reader<'_>, name: &str) -> Result<PrimFunc, &'static str> {
    let id = |r: &mut Reader<'_>| r.u32();
    let n = r.count(5)?;
    let params = (0..n)
        .map(|_| match r.u8()? {
            0 => Ok(Param::Var(VarId(id(r)?))),
            1 => Ok(Param::Buf(BufId(id(r)?))),
            _ => Err("bad parameter tag"),
        })
        .collect::<Result<Vec<_>, _>>()?;
    let n = r.count(20)?;
    let vars = (0..n)
        .map(|_| Ok(Var { name: Arc::from(r.str()?), ty: read_ptype(r)? }))
        .collect::<Result<Vec<_>, &'static str>>()?;
    let n = r.count(40)?;
    let mut bufs = Vec::with_capacity(n);
    for _ in 0..n {
        let name: Arc<str> = Arc::from(r.str()?);
        let dtype = read_dtype(r)?;
        let shape = read_i64s(r)?.into();
        let strides = read_i64s(r)?.into();
        let elem_offset = r.u64()? as i64;
        let scope: Arc<str> = Arc::from(r.str()?);
        bufs.push(Buffer { name, dtype, shape, strides, elem_offset, scope });
    }
    let n = r.count(13)?;
    let mut exprs = Vec::with_capacity(n);
    for _ in 0..n {
        let ty = read_ptype(r)?;
        let e = |r: &mut Reader<'_>| r.u32().map(PExprId);
        let kind = match r.u8()? {
            0 => PExprKind::Int(r.u64()? as i64),
            1 => PExprKind::Float(f64::from_bits(r.u64()?)),
            2 => PExprKind::Var(VarId(r.u32()?)),
            3 => {
                let op = BinOp::from_name(r.str()?).ok_or("unknown operator")?;
                PExprKind::Bin(op, e(r)?, e(r)?)
            }
            4 => PExprKind::Not(e(r)?),
            5 => PExprKind::Select(e(r)?, e(r)?, e(r)?),
            6 => PExprKind::Cast(e(r)?),
            7 => PExprKind::Load(BufId(r.u32()?), read_range(r)?),
            8 => {
                let intr = Intrinsic::from_name(r.str()?).ok_or("unknown intrinsic")?;
                PExprKind::Call(intr, read_range(r)?)
            }
            9 => PExprKind::Ramp(e(r)?, e(r)?),
            10 => PExprKind::Broadcast(e(r)?),
            11 => PExprKind::Let(VarId(r.u32()?), e(r)?, e(r)?),
            _ => return Err("bad expression tag"),
        };
        exprs.push(PExpr { kind, ty });
    }
    let n = r.count(4)?;
    let operands = (0..n).map(|_| r.u32().map(PExprId)).collect::<Result<Vec<_>, _>>()?;
    let n = r.count(5)?;
    let mut stmts = Vec::with_capacity(n);
    for _ in 0..n {
        let e = |r: &mut Reader<'_>| r.u32().map(PExprId);
        let s = |r: &mut Reader<'_>| r.u32().map(StmtId);
        let kind = match r.u8()? {
            0 => {
                let var = VarId(r.u32()?);
                let (min, extent) = (e(r)?, e(r)?);
                let kind = *FOR_KINDS.get(r.u8()? as usize).ok_or("bad loop kind")?;
                StmtKind::For { var, min, extent, kind, body: s(r)? }
            }
            1 => StmtKind::Store { buf: BufId(r.u32()?), indices: read_range(r)?, value: e(r)? },
            2 => StmtKind::Let { var: VarId(r.u32()?), value: e(r)?, body: s(r)? },
            3 => {
                let (cond, then_) = (e(r)?, s(r)?);
                let else_ = match r.u8()? {
                    0 => None,
                    1 => Some(s(r)?),
                    _ => return Err("bad tag"),
                };
                StmtKind::If { cond, then_, else_ }
            }
            4 => StmtKind::Seq(read_range(r)?),
            5 => StmtKind::Alloc { buf: BufId(r.u32()?), body: s(r)? },
            6 => StmtKind::Decl { buf: BufId(r.u32()?), data: BufId(r.u32()?), body: s(r)? },
            7 => StmtKind::Evaluate(e(r)?),
            8 => StmtKind::Attr { key: r.u32()?, value: e(r)?, body: s(r)? },
            _ => return Err("bad statement tag"),
        };
        stmts.push(Stmt { kind });
    }
    let n = r.count(4)?;
    let stmt_lists = (0..n).map(|_| r.u32().map(StmtId)).collect::<Result<Vec<_>, _>>()?;
    let n = r.count(8)?;
    let strings = (0..n).map(|_| r.str().map(Arc::from)).collect::<Result<Vec<Arc<str>>, _>>()?;
    let body = StmtId(r.u32()?);
    let attrs = read_attr_list(r)?;
    let n = r.count(8)?;
    let stmt_spans =
        (0..n).map(|_| Ok(Span { start: r.u32()?, end: r.u32()? })).collect::<Result<Vec<_>, &'static str>>()?;
    if body.index() >= stmts.len() {
        return Err("body out of range");
    }
    let f = PrimFunc::from_parts(PrimFuncParts {
        params,
        vars,
        bufs,
        exprs,
        operands,
        stmts,
        stmt_lists,
        strings,
        body,
        attrs,
        stmt_spans,
    });
    if !verify_prim_func(name, &f).is_empty() {
        return Err("PrimFunc does not verify");
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::parse_module;

    fn round_trip(f: &Function) -> Function {
        let mut w = Writer(Vec::new());
        write_function(&mut w, f, 7).expect("encodes");
        let mut r = Reader(&w.0);
        let back = read_function(&mut r, 7).expect("decodes");
        assert!(r.0.is_empty(), "the whole encoding is read");
        back
    }

    #[test]
    fn a_function_with_every_expression_kind_reads_back_the_same() {
        let text = r#"
def @g(%a: Tensor[(2,), f32]) -> Tensor[(2,), f32] { %a }
def @f(%x: Tensor[(2,), f32], %c: Tensor[(), bool]) -> Tensor[(2,), f32] {
  let %k = fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] { relu(%y) };
  let %t = (%x, 1.5f, tensor<(2,), f32>[1.0, 2.0]);
  let %p = %t.0;
  let %s = mean(%p, axis=[0], keepdims=true);
  let %z = if (%c) { %k(%p) } else { @g(%p) };
  add(%z, %s)
}
"#;
        let m = parse_module(text).expect("parses");
        for (_, f) in m.iter() {
            let back = round_trip(f);
            assert!(crate::session::same::same_function(&Arc::new(back), f), "round trip changes the function");
        }
    }

    #[test]
    fn damaged_encodings_are_errors_not_panics() {
        let m = parse_module("def @f(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] { let %y = relu(%x); add(%y, 1.0f) }")
            .expect("parses");
        let mut w = Writer(Vec::new());
        write_function(&mut w, m.get("f").expect("f"), 0).expect("encodes");
        let full = w.0;
        for cut in 0..full.len() {
            assert!(read_function(&mut Reader(&full[..cut]), 0).is_err(), "truncated at {cut} decodes");
        }
        for i in 0..full.len() {
            for bit in [0x01u8, 0x80] {
                let mut bad = full.clone();
                bad[i] ^= bit;
                // A flipped byte may still decode (a different name or constant): the store's
                // checksum catches that. It must never panic.
                let _ = read_function(&mut Reader(&bad), 0);
            }
        }
    }
}
