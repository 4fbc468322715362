#![allow(dead_code)]
//! The binary encoding of a function for the persistent store's entries (`store.rs`): the
//! arena node by node in id order, with every node's type (a type table plus an index per
//! node), its span relative to a base, and the side tables' contents by value (names,
//! constants, call attributes, nested functions). Decoding rebuilds the arena through the
//! builder, one node per encoded node, so the result has the same node ids, names, types,
//! constants, attributes and relative spans as the encoded function — what later stages and
//! the printed output depend on — including nodes no longer reachable from the body.
//!
//! Decoding never panics and never trusts a count or an id: every operand must precede its
//! user, every count must fit in what is left of the entry, an unknown operator, dtype or tag
//! is an error, and the builder's well-formedness check must hold.

use std::sync::Arc;

use crate::ir::{
    AttrValue, Attrs, Closure, Constant, DType, ExprKind, Fill, Function, FunctionBuilder, NodeId, Span, Tensor,
    TensorType, TyIdx, Type, TypeKind,
};

/// Appends little-endian integers and length-prefixed byte strings.
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
    /// Node ids, each below `bound` (the node being decoded: operands precede their user).
    fn ids(&mut self, bound: u32, out: &mut Vec<NodeId>) -> Result<(), &'static str> {
        let n = self.count(4)?;
        out.clear();
        for _ in 0..n {
            out.push(self.id(bound)?);
        }
        Ok(())
    }
    fn id(&mut self, bound: u32) -> Result<NodeId, &'static str> {
        let id = self.u32()?;
        if id >= bound {
            return Err("operand does not precede its user");
        }
        Ok(NodeId(id))
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
    match r.u8()? {
        0 => Ok(None),
        1 => {
            let (start, end) = (r.u32()?, r.u32()?);
            Ok(Some(Span { start: start.wrapping_add(base), end: end.wrapping_add(base) }))
        }
        _ => Err("bad span tag"),
    }
}

/// Types nest at most this deep in an entry.
const MAX_TYPE_DEPTH: u32 = 64;

fn write_type(w: &mut Writer, ty: &Type, depth: u32) -> Option<()> {
    if depth > MAX_TYPE_DEPTH {
        return None;
    }
    match ty.kind() {
        TypeKind::Tensor(t) => {
            w.u8(0);
            write_tensor_type(w, t);
        }
        TypeKind::Tuple(fields) => {
            w.u8(1);
            w.u32(fields.len() as u32);
            for f in fields.iter() {
                write_type(w, f, depth + 1)?;
            }
        }
        TypeKind::Func(f) => {
            w.u8(2);
            w.u32(f.params.len() as u32);
            for p in f.params.iter() {
                write_type(w, p, depth + 1)?;
            }
            write_type(w, &f.ret, depth + 1)?;
        }
    }
    Some(())
}

fn read_type(r: &mut Reader<'_>, depth: u32) -> Result<Type, &'static str> {
    if depth > MAX_TYPE_DEPTH {
        return Err("type nested too deep");
    }
    match r.u8()? {
        0 => {
            let t = read_tensor_type(r)?;
            Ok(Type::tensor(t.shape.into_vec(), t.dtype))
        }
        1 => {
            let n = r.count(1)?;
            let fields = (0..n).map(|_| read_type(r, depth + 1)).collect::<Result<Vec<_>, _>>()?;
            Ok(Type::tuple(fields))
        }
        2 => {
            let n = r.count(1)?;
            let params = (0..n).map(|_| read_type(r, depth + 1)).collect::<Result<Vec<_>, _>>()?;
            let ret = read_type(r, depth + 1)?;
            Ok(Type::func(params, ret))
        }
        _ => Err("bad type tag"),
    }
}

fn write_opt_type(w: &mut Writer, ty: Option<&Type>) -> Option<()> {
    match ty {
        Some(ty) => {
            w.u8(1);
            write_type(w, ty, 0)
        }
        None => {
            w.u8(0);
            Some(())
        }
    }
}

fn read_opt_type(r: &mut Reader<'_>) -> Result<Option<Type>, &'static str> {
    match r.u8()? {
        0 => Ok(None),
        1 => read_type(r, 0).map(Some),
        _ => Err("bad type presence tag"),
    }
}

fn write_tensor_type(w: &mut Writer, t: &TensorType) {
    w.u32(t.shape.len() as u32);
    for &d in t.shape.iter() {
        w.u64(d);
    }
    w.str(t.dtype.name());
}

fn read_tensor_type(r: &mut Reader<'_>) -> Result<TensorType, &'static str> {
    let rank = r.count(8)?;
    let mut shape = Vec::with_capacity(rank);
    for _ in 0..rank {
        shape.push(r.u64()?);
    }
    let dtype = DType::from_name(r.str()?).ok_or("unknown dtype")?;
    Ok(TensorType { shape: shape.into(), dtype })
}

fn write_attrs(w: &mut Writer, attrs: &Attrs) {
    w.u32(attrs.len() as u32);
    for (key, value) in attrs.iter() {
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
            AttrValue::Float(f) => {
                w.u8(2);
                w.u64(f.to_bits());
            }
            AttrValue::Str(s) => {
                w.u8(3);
                w.str(s);
            }
            AttrValue::Ints(v) => {
                w.u8(4);
                w.u32(v.len() as u32);
                for &i in v.iter() {
                    w.u64(i as u64);
                }
            }
            AttrValue::DType(d) => {
                w.u8(5);
                w.str(d.name());
            }
        }
    }
}

fn read_attrs(r: &mut Reader<'_>) -> Result<Attrs, &'static str> {
    let n = r.count(10)?;
    if n == 0 {
        return Ok(Attrs::new());
    }
    let mut entries = Vec::with_capacity(n);
    for _ in 0..n {
        let key: Arc<str> = r.str()?.into();
        let value = match r.u8()? {
            0 => AttrValue::Bool(match r.u8()? {
                0 => false,
                1 => true,
                _ => return Err("bad bool attribute"),
            }),
            1 => AttrValue::Int(r.u64()? as i64),
            2 => AttrValue::Float(f64::from_bits(r.u64()?)),
            3 => AttrValue::Str(r.str()?.into()),
            4 => {
                let len = r.count(8)?;
                let mut v = Vec::with_capacity(len);
                for _ in 0..len {
                    v.push(r.u64()? as i64);
                }
                AttrValue::Ints(v.into())
            }
            5 => AttrValue::DType(DType::from_name(r.str()?).ok_or("unknown dtype")?),
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

fn write_constant(w: &mut Writer, c: &Constant) {
    match c {
        Constant::Dense(t) => {
            w.u8(0);
            w.u32(t.shape().len() as u32);
            for &d in t.shape() {
                w.u64(d as u64);
            }
            w.str(t.dtype().name());
            w.bytes(&t.to_le_bytes());
        }
        Constant::Fill { ty, fill } => {
            w.u8(1);
            write_tensor_type(w, ty);
            let (kind, a, b, c) = match *fill {
                Fill::Full(v) => (0, v.to_bits(), 0, 0),
                Fill::Uniform { seed, low, high } => (1, seed, low.to_bits(), high.to_bits()),
                Fill::Normal { seed, mean, std } => (2, seed, mean.to_bits(), std.to_bits()),
            };
            w.u8(kind);
            w.u64(a);
            w.u64(b);
            w.u64(c);
        }
        Constant::Raw { ty, data } => {
            w.u8(2);
            write_tensor_type(w, ty);
            w.bytes(data);
        }
    }
}

fn read_constant(r: &mut Reader<'_>) -> Result<Constant, &'static str> {
    match r.u8()? {
        0 => {
            let rank = r.count(8)?;
            let mut shape = Vec::with_capacity(rank);
            for _ in 0..rank {
                shape.push(r.u64()?);
            }
            let dtype = DType::from_name(r.str()?).ok_or("unknown dtype")?;
            let bytes = r.bytes()?;
            let t = Tensor::from_le_bytes(&shape, dtype, bytes).map_err(|_| "constant bytes do not match its type")?;
            Ok(Constant::Dense(t))
        }
        1 => {
            let ty = read_tensor_type(r)?;
            let (kind, a, b, c) = (r.u8()?, r.u64()?, r.u64()?, r.u64()?);
            let fill = match kind {
                0 => Fill::Full(f64::from_bits(a)),
                1 => Fill::Uniform { seed: a, low: f64::from_bits(b), high: f64::from_bits(c) },
                2 => Fill::Normal { seed: a, mean: f64::from_bits(b), std: f64::from_bits(c) },
                _ => return Err("bad fill tag"),
            };
            Ok(Constant::Fill { ty, fill })
        }
        2 => {
            let ty = read_tensor_type(r)?;
            let data = bytes::Bytes::copy_from_slice(r.bytes()?);
            Constant::raw(ty, data).map_err(|_| "constant bytes do not match its type")
        }
        _ => Err("bad constant tag"),
    }
}

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

/// Encodes `f`, its spans relative to `base`; `None` when a type nests deeper than an entry
/// allows or the arena is malformed (such a function is not stored).
pub(crate) fn write_function(w: &mut Writer, f: &Function, base: u32) -> Option<()> {
    if !f.is_well_formed() {
        return None;
    }
    let table = f.type_table();
    w.u32(table.len() as u32);
    for ty in table {
        write_type(w, ty, 0)?;
    }
    w.u32(f.num_nodes() as u32);
    for (i, node) in f.nodes().iter().enumerate() {
        let id = NodeId(i as u32);
        w.u32(node.ty.index().map_or(u32::MAX, |t| t as u32));
        write_span(w, f.span(id), base);
        match node.kind {
            ExprKind::Var { name } => {
                w.u8(VAR);
                w.str(f.sym(name));
            }
            ExprKind::Global { name } => {
                w.u8(GLOBAL);
                w.str(f.sym(name));
            }
            ExprKind::Const { idx } => {
                w.u8(CONST);
                write_constant(w, f.constant(idx));
            }
            ExprKind::Call { op, attrs, args } => {
                w.u8(CALL);
                w.str(crate::op::try_get(op).map_or("", |d| d.name));
                write_attrs(w, f.call_attrs(attrs));
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
                write_opt_type(w, ret_ty.as_ref())?;
                write_attrs(w, attrs);
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
    write_opt_type(w, f.ret_ty())?;
    write_attrs(w, f.attrs());
    Some(())
}

/// Decodes a function [`write_function`] wrote, its spans rebased on `base`.
pub(crate) fn read_function(r: &mut Reader<'_>, base: u32) -> Result<Function, &'static str> {
    let n_types = r.count(1)?;
    let mut table = Vec::with_capacity(n_types);
    for _ in 0..n_types {
        table.push(read_type(r, 0)?);
    }
    // Every node takes at least 6 bytes (type index, span tag, kind tag).
    let n = r.count(6)?;
    let mut b = FunctionBuilder::new();
    let mut tys = Vec::with_capacity(n);
    let mut ids = Vec::new();
    for i in 0..n as u32 {
        let ty = r.u32()?;
        if ty != u32::MAX && ty as usize >= table.len() {
            return Err("type index outside the type table");
        }
        tys.push(if ty == u32::MAX { TyIdx::NONE } else { TyIdx::new(ty) });
        b.set_span(read_span(r, base)?.unwrap_or_default());
        let id = match r.u8()? {
            VAR => b.var(r.str()?, None),
            GLOBAL => b.global(r.str()?),
            CONST => {
                let c = read_constant(r)?;
                let ty = c.ty();
                b.constant_typed(Arc::new(c), ty)
            }
            CALL => {
                let op = crate::op::lookup(r.str()?).ok_or("unknown operator")?;
                let attrs = read_attrs(r)?;
                r.ids(i, &mut ids)?;
                b.call(op, &ids, attrs)
            }
            APPLY => {
                let callee = r.id(i)?;
                r.ids(i, &mut ids)?;
                b.apply(callee, &ids)
            }
            TUPLE => {
                r.ids(i, &mut ids)?;
                b.tuple(&ids)
            }
            PROJ => {
                let tuple = r.id(i)?;
                b.proj(tuple, r.u32()?)
            }
            IF => {
                let (cond, then_, else_) = (r.id(i)?, r.id(i)?, r.id(i)?);
                b.if_(cond, then_, else_)
            }
            FUNC => {
                r.ids(i, &mut ids)?;
                let body = r.id(i)?;
                let ret_ty = read_opt_type(r)?;
                let attrs = read_attrs(r)?;
                b.closure(&ids, body, ret_ty, attrs)
            }
            BLOCK => {
                r.ids(i, &mut ids)?;
                let result = r.id(i)?;
                if ids.is_empty() || ids.len() % 2 != 0 {
                    return Err("block without whole bindings");
                }
                let pairs: Vec<(NodeId, NodeId)> = ids.chunks_exact(2).map(|p| (p[0], p[1])).collect();
                b.block(&pairs, result)
            }
            _ => return Err("bad node tag"),
        };
        if id != NodeId(i) {
            return Err("node out of place");
        }
    }
    r.ids(n as u32, &mut ids)?;
    let params = std::mem::take(&mut ids);
    let body = r.id(n as u32)?;
    let ret_ty = read_opt_type(r)?;
    let attrs = read_attrs(r)?;
    let f = b.finish(&params, body, ret_ty, attrs);
    if !f.is_well_formed() {
        return Err("function is not well formed");
    }
    f.with_type_table(table, &tys).ok_or("type table does not match the function")
}
