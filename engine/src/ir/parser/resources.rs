//! Large constants of the `.pir` text format: `resource<(shape), dtype>(name)` references and
//! the `resources { name = "hex"; … }` section after the last function that holds their bytes.
//!
//! A reference is parsed before its bytes (the section comes last, so that the functions are
//! read first), so it becomes a typed placeholder constant and is recorded; once the section
//! is read, every recorded reference is checked (known name, byte count matching its type,
//! valid bool bytes) and its function's placeholder is replaced by the real tensor. Equal
//! references (same name and type) share one tensor. Decoding is a single linear pass over
//! each hex string; nothing here recurses.

use std::sync::Arc;

use super::{FxMap, PResult, Parser};
use crate::ir::expr::{ExprKind, Span};
use crate::ir::ids::{ConstIdx, NodeId};
use crate::ir::lexer::{Kw, Tok};
use crate::ir::module::Module;
use crate::ir::tensor::{Constant, Fill, Tensor};
use crate::ir::ty::TensorType;

/// A `resource<…>(name)` of a function, waiting for the section.
pub(super) struct PendingRef<'s> {
    /// The resource name.
    name: &'s str,
    /// The declared type.
    ty: TensorType,
    /// The placeholder's entry in the function's constant table.
    idx: ConstIdx,
    /// The whole reference, for errors.
    span: Span,
}

/// One entry of the section: its decoded bytes (`None` when its text was malformed, which
/// was reported; its references then report nothing more) and where its name is.
pub(super) struct Blob {
    bytes: Option<Vec<u8>>,
    span: Span,
}

/// `HEX_VALUE[b]`: the value of hex digit `b`, or 255.
static HEX_VALUE: [u8; 256] = {
    let mut t = [255u8; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        t[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

impl<'s> Parser<'s> {
    /// `resource<(shape), dtype>(name)`: a typed placeholder constant, recorded for the section.
    #[inline(never)]
    pub(super) fn resource_ref(&mut self) -> PResult<NodeId> {
        let start = self.expect_kw(Kw::Resource)?.start;
        let ty = self.tensor_type()?;
        self.expect(Tok::LParen, "`(`")?;
        let name = self.expect(Tok::Ident, "a resource name")?;
        self.expect(Tok::RParen, "`)`")?;
        let span = self.span_from(start);
        self.b.set_span(span);
        let node = self.b.constant(Constant::Fill { ty: ty.clone(), fill: Fill::Full(0.0) });
        let ExprKind::Const { idx } = self.b.node(node).kind else {
            return Err(self.error_at(span, "internal error: a constant did not make a constant node".into()));
        };
        self.pending.push(PendingRef { name: self.text(name), ty, idx, span });
        Ok(node)
    }

    /// `resources { name = "hex"; … }`, which must be the last item of the text. Entries are
    /// decoded into `self.blobs`; a malformed entry is reported and parsing goes on.
    pub(super) fn resources_section(&mut self) {
        let open = self.tok;
        if self.section_seen {
            let span = Span { start: open.start, end: open.end };
            self.error_at(span, "a second `resources` section (there is at most one)".into());
        }
        self.section_seen = true;
        self.bump();
        if self.expect(Tok::LBrace, "`{`").is_err() {
            self.skip_to_eof();
            return;
        }
        while !self.at(Tok::RBrace) && !self.too_many_errors() {
            if self.at(Tok::Eof) {
                let (line, col) = self.line_col(open.start as usize);
                let span = Span { start: self.tok.start, end: self.tok.end };
                self.error_at(span, format!("unterminated `resources` section (it starts at {line}:{col})"));
                return;
            }
            if self.blob_entry().is_err() {
                // Skip past this entry's `;` (or to the closing `}`).
                while !matches!(self.tok.kind, Tok::Semi | Tok::RBrace | Tok::Eof) {
                    self.bump();
                }
                self.eat(Tok::Semi);
            }
        }
        self.eat(Tok::RBrace);
        if !self.at(Tok::Eof) {
            let span = Span { start: self.tok.start, end: self.tok.end };
            self.error_at(span, "the `resources` section must come last".into());
            self.skip_to_eof();
        }
    }

    fn skip_to_eof(&mut self) {
        while !self.at(Tok::Eof) {
            self.bump();
        }
    }

    /// `name = "hex";`.
    fn blob_entry(&mut self) -> PResult<()> {
        let name = self.expect(Tok::Ident, "a resource name")?;
        let name_span = Span { start: name.start, end: name.end };
        let key = self.text(name);
        let text = (|| {
            self.expect(Tok::Eq, "`=`")?;
            let s = self.expect(Tok::Str, "a hex string `\"…\"`")?;
            self.expect(Tok::Semi, "`;`")?;
            Ok(s)
        })();
        let s = match text {
            Ok(s) => s,
            Err(e) => {
                // Known but broken: its references report nothing more.
                if self.blobs.get(key).is_none() {
                    self.blobs.insert(key, Blob { bytes: None, span: name_span });
                }
                return Err(e);
            }
        };
        if let Some(first) = self.blobs.get(key).map(|b| b.span.start) {
            let (line, col) = self.line_col(first as usize);
            return Err(self.error_at(name_span, format!("resource `{key}` is defined twice (first at {line}:{col})")));
        }
        let hex = &self.src.as_bytes()[s.start as usize + 1..s.end as usize - 1];
        let bytes = self.decode_hex(key, hex, s.start + 1).ok();
        self.blobs.insert(key, Blob { bytes, span: name_span });
        Ok(())
    }

    /// The bytes of `hex` (which starts at byte offset `at`): pairs of hex digits.
    fn decode_hex(&mut self, name: &str, hex: &[u8], at: u32) -> PResult<Vec<u8>> {
        if hex.len() & 1 == 1 {
            let span = Span { start: at, end: at + hex.len() as u32 };
            return Err(
                self.error_at(span, format!("resource `{name}` has an odd number of hex digits ({})", hex.len()))
            );
        }
        // No branch per digit: every pair is decoded, the digits' values are OR-ed together,
        // and only a text with a bad digit (a value of 255 sets the high bits) is searched for
        // the first one. Resources are most of a model's text (≈ 2 characters per weight byte).
        let mut bytes = vec![0u8; hex.len() / 2];
        let mut seen = 0u8;
        for (byte, pair) in bytes.iter_mut().zip(hex.chunks_exact(2)) {
            let (hi, lo) = (HEX_VALUE[pair[0] as usize], HEX_VALUE[pair[1] as usize]);
            seen |= hi | lo;
            *byte = hi << 4 | lo;
        }
        if let Some(i) = (seen > 15).then(|| hex.iter().position(|&b| HEX_VALUE[b as usize] == 255)).flatten() {
            let bad = hex[i];
            let shown = if bad.is_ascii_graphic() { format!("`{}`", bad as char) } else { format!("byte {bad:#04x}") };
            let off = at + i as u32;
            return Err(self.error_at(
                Span { start: off, end: off + 1 },
                format!("resource `{name}`: {shown} is not a hex digit"),
            ));
        }
        Ok(bytes)
    }

    /// Moves the finished function's references to the module's list.
    pub(super) fn keep_refs(&mut self, func_name: &'s str) {
        for r in self.pending.drain(..) {
            self.module_refs.push((func_name, r));
        }
    }

    /// Replaces every recorded placeholder by its tensor, reporting unknown names and blobs
    /// whose length does not fit the declared type.
    pub(super) fn resolve_resources(&mut self, module: &mut Module) {
        let refs = std::mem::take(&mut self.module_refs);
        let mut made: FxMap<(&'s str, TensorType), Arc<Constant>> = FxMap::default();
        // Runs of references of one function are consecutive: replace per run.
        let mut run: Vec<(ConstIdx, Arc<Constant>)> = Vec::new();
        let mut i = 0;
        while i < refs.len() {
            let func_name = refs[i].0;
            run.clear();
            while i < refs.len() && refs[i].0 == func_name {
                let r = &refs[i].1;
                i += 1;
                if let Some(c) = made.get(&(r.name, r.ty.clone())) {
                    run.push((r.idx, Arc::clone(c)));
                    continue;
                }
                let Some(blob) = self.blobs.get(r.name) else {
                    self.error_at(r.span, format!("unknown resource `{}`", r.name));
                    continue;
                };
                let Some(bytes) = &blob.bytes else { continue };
                match Tensor::from_le_bytes(&r.ty.shape, r.ty.dtype, bytes) {
                    Ok(t) => {
                        let c = Arc::new(Constant::Dense(t));
                        made.insert((r.name, r.ty.clone()), Arc::clone(&c));
                        run.push((r.idx, c));
                    }
                    Err(e) => {
                        let message = format!("resource `{}` does not fit its type: {e}", r.name);
                        self.error_at(r.span, message);
                    }
                }
            }
            let replaced = module.get(func_name).and_then(|f| f.with_constants_replaced(&run));
            let placed = replaced.map(|f| module.insert(func_name, f));
            if !matches!(placed, Some(Ok(()))) {
                let span = refs[i - 1].1.span;
                self.error_at(span, format!("internal error: cannot place the resources of `@{func_name}`"));
            }
        }
    }
}
