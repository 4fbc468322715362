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

use super::expr::Span;
use super::function::Function;
use super::ids::OpId;
use super::module::Module;
use super::parser::parse_module;
use super::tensor::{Constant, Tensor};
use super::ty::Type;

pub(crate) mod arena;

use arena::{check_constant, fill_words, read_arena, read_fill, read_tensor_type, write_arena, write_tensor_type};
use arena::{Dec, Malformation, Malformed, ReadRefs, WriteRefs, Writer};

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

/// Everything a module's functions refer to by index: a function's arena refers to strings
/// and constants by their index in the file's tables, and keeps no spans.
struct ModuleTables<'m> {
    strings: Strings<'m>,
    /// Constants in first-use order; one entry per distinct `Arc`.
    consts: Vec<&'m Arc<Constant>>,
    const_index: FxHashMap<*const Constant, u32>,
}

impl<'m> WriteRefs<'m> for ModuleTables<'m> {
    fn string(&mut self, w: &mut Writer, s: &'m str) {
        w.u32(self.strings.get(s));
    }
    fn constant(&mut self, w: &mut Writer, c: &'m Arc<Constant>) -> Result<(), &'static str> {
        let next = self.consts.len() as u32;
        let k = match self.const_index.get(&Arc::as_ptr(c)) {
            Some(&k) => k,
            None => {
                check_constant(c)?;
                self.consts.push(c);
                self.const_index.insert(Arc::as_ptr(c), next);
                next
            }
        };
        w.u32(k);
        Ok(())
    }
    fn span(&mut self, _: &mut Writer, _: Option<Span>) {}
}

const CONST_DENSE: u8 = 0;
const CONST_FILL: u8 = 1;
const CONST_RAW: u8 = 2;

fn pad_to(out: &mut Vec<u8>, align: usize) {
    out.resize(out.len().next_multiple_of(align), 0);
}

/// The binary form of `m` (see the module docs). Fails only for a function a reader could
/// not accept back (a type nested deeper than the text format allows, a malformed arena).
pub fn write_module_binary(m: &Module) -> Result<Vec<u8>, BinaryError> {
    let mut w = ModuleTables { strings: Strings::default(), consts: Vec::new(), const_index: FxHashMap::default() };
    let mut funcs = Writer::default();
    funcs.u32(m.len() as u32);
    for (name, f) in m.iter() {
        let unwritable = |what| BinaryError::Unwritable { func: name.to_string(), what };
        w.string(&mut funcs, name);
        write_arena(&mut funcs, &mut w, f).map_err(unwritable)?;
    }

    // PrimFuncs as their canonical text, one after the other.
    let mut prims = Writer::default();
    let mut prim_text = String::new();
    for (i, (name, f)) in m.prim_funcs().enumerate() {
        if i > 0 {
            prim_text.push('\n');
        }
        crate::tir::write_prim_func(&mut prim_text, name, f);
    }
    prims.u32(m.prim_funcs().len() as u32);
    prims.u64(prim_text.len() as u64);
    prims.0.extend_from_slice(prim_text.as_bytes());

    // Constants: a table of entries, their bytes in the data section.
    let mut consts = Writer::default();
    let mut data: Vec<u8> = Vec::new();
    consts.u32(w.consts.len() as u32);
    let entries = std::mem::take(&mut w.consts);
    let blob = |consts: &mut Writer, data: &mut Vec<u8>, bytes: &[u8]| {
        pad_to(data, PIRB_BLOB_ALIGN);
        consts.u64(data.len() as u64);
        consts.u64(bytes.len() as u64);
        data.extend_from_slice(bytes);
    };
    for c in &entries {
        match &***c {
            Constant::Dense(t) => {
                consts.u8(CONST_DENSE);
                write_tensor_type(&mut consts, &mut w, &t.tensor_type());
                blob(&mut consts, &mut data, &t.to_le_bytes());
            }
            Constant::Raw { ty, data: bytes } => {
                consts.u8(CONST_RAW);
                write_tensor_type(&mut consts, &mut w, ty);
                blob(&mut consts, &mut data, bytes);
            }
            Constant::Fill { ty, fill } => {
                consts.u8(CONST_FILL);
                write_tensor_type(&mut consts, &mut w, ty);
                let (kind, a, b, c) = fill_words(fill);
                consts.u8(kind);
                consts.u64(a);
                consts.u64(b);
                consts.u64(c);
            }
        }
    }

    let mut strings = Writer::default();
    strings.u32(w.strings.list.len() as u32);
    for s in &w.strings.list {
        strings.u32(s.len() as u32);
        strings.0.extend_from_slice(s.as_bytes());
    }

    // Header, section table, then the sections; the data section starts aligned.
    let engine = env!("CARGO_PKG_VERSION");
    let mut out = Vec::with_capacity(data.len() + funcs.0.len() + strings.0.len() + 4096);
    out.extend_from_slice(&PIRB_MAGIC);
    out.extend_from_slice(&PIRB_VERSION.to_le_bytes());
    out.extend_from_slice(&(engine.len() as u32).to_le_bytes());
    out.extend_from_slice(engine.as_bytes());
    out.extend_from_slice(&(SECTIONS.len() as u32).to_le_bytes());
    let table_at = out.len();
    out.resize(table_at + SECTIONS.len() * 24, 0);
    let bodies: [&[u8]; 4] = [&strings.0, &consts.0, &funcs.0, &prims.0];
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

type DResult<T> = Result<T, BinaryError>;

fn malformed(offset: usize, what: impl Into<String>) -> BinaryError {
    BinaryError::Malformed { offset: offset as u64, what: what.into() }
}

impl From<Malformed> for BinaryError {
    fn from(m: Malformed) -> BinaryError {
        malformed(m.at, m.what.to_string())
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

impl Tables<'_> {
    fn index(&self, d: &mut Dec<'_>) -> Result<usize, Malformed> {
        let at = d.pos;
        let i = d.u32()? as usize;
        if i < self.strings.len() {
            Ok(i)
        } else {
            Err(Malformed { at, what: Malformation::StringOutside(i) })
        }
    }
}

impl<'a> ReadRefs<'a> for Tables<'a> {
    fn string(&mut self, d: &mut Dec<'a>) -> Result<&'a str, Malformed> {
        let i = self.index(d)?;
        Ok(self.strings[i])
    }
    fn arc(&mut self, d: &mut Dec<'a>) -> Result<Arc<str>, Malformed> {
        let i = self.index(d)?;
        let s = self.strings[i];
        Ok(self.arcs[i].get_or_insert_with(|| Arc::from(s)).clone())
    }
    fn op(&mut self, d: &mut Dec<'a>) -> Result<OpId, Malformed> {
        let at = d.pos;
        let i = self.index(d)?;
        let name = self.strings[i];
        (*self.ops[i].get_or_insert_with(|| crate::op::lookup(name)))
            .ok_or_else(|| Malformed { at, what: Malformation::UnknownOperator(name.to_string()) })
    }
    fn constant(&mut self, d: &mut Dec<'a>) -> Result<(Arc<Constant>, Type), Malformed> {
        let at = d.pos;
        let k = d.u32()? as usize;
        let (c, ty) = self.consts.get(k).ok_or(Malformed { at, what: Malformation::ConstantOutside(k) })?;
        Ok((Arc::clone(c), ty.clone()))
    }
    fn span(&mut self, _: &mut Dec<'a>) -> Result<Option<Span>, Malformed> {
        Ok(None)
    }
}

fn read_function<'a>(d: &mut Dec<'a>, t: &mut Tables<'a>) -> DResult<(&'a str, Function)> {
    let name = t.string(d)?;
    let f = read_arena(d, t).map_err(|m| match m.what {
        Malformation::NotWellFormed => malformed(m.at, format!("function @{name} is not well formed")),
        Malformation::TypeTable => malformed(m.at, format!("the type table of @{name} does not match its nodes")),
        _ => m.into(),
    })?;
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
        let ty = read_tensor_type(&mut d, &mut tables)?;
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
            CONST_FILL => Constant::Fill { ty, fill: read_fill(&mut d)? },
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
