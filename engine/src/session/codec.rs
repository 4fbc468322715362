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
