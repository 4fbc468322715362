//! The loop level's text: `[#[attrs]] prim @name(params) { statements }` (grammar in
//! `docs/tir.md`). PrimFuncs are items of a `.pir` module like graph functions, so they share
//! the module parser's lexer, error reporting and recovery; the functions are built with
//! [`PrimFuncBuilder`], whose type errors become parse errors at the construct.
//!
//! Statements nest by braces (`for`, `if`, `attr`, a braced `let`); a flat `let` / `alloc` /
//! `decl` (ended by `;`) covers the rest of its block, and a run of them is kept on an
//! explicit stack, so a long chain of flat bindings does not deepen the recursion. Braced
//! nesting counts toward the parser's nesting limit like graph expressions.

use std::sync::Arc;

use super::{FxMap, PResult, Parser, Reported};
use crate::ir::lexer::{Kw, Tok, Token};
use crate::ir::{Attrs, DType, Span};
use crate::tir::{
    BinOp, BufId, Buffer, ForKind, Intrinsic, PExprId, PType, Param, PrimFunc, PrimFuncBuilder, StmtId, VarId,
};

/// What a `%name` of a PrimFunc refers to.
#[derive(Clone, Copy, Debug)]
enum PName {
    Var(VarId),
    Buf(BufId),
}

/// The parser's state for the PrimFunc being read.
#[derive(Default)]
pub(super) struct PrimState<'s> {
    b: PrimFuncBuilder,
    /// The names in scope.
    names: FxMap<&'s str, PName>,
    /// Definitions in scope in order, with what each shadowed (restored at the end of its
    /// block).
    scope: Vec<(&'s str, Option<PName>)>,
    /// Unsuffixed literals (`1`, `2.0`), which take the type of the operand they meet.
    weak: rustc_hash::FxHashSet<PExprId>,
}

/// A flat binder waiting for the end of its block, which ends its body.
enum Binder {
    Let(VarId, PExprId),
    Alloc(BufId),
    Decl(BufId, BufId),
}

impl<'s> Parser<'s> {
    /// Parses `prim @name(params) { body }` after its attributes. Returns the name token and
    /// the function, unless it had errors.
    pub(super) fn prim_func(&mut self, attrs: Attrs) -> PResult<(Token, Option<PrimFunc>)> {
        self.prim.b.clear();
        self.prim.names.clear();
        self.prim.scope.clear();
        self.prim.weak.clear();
        self.poisoned = false;
        self.abandoned = false;
        self.expect_kw(Kw::Prim)?;
        let name = self.expect(Tok::Global, "a global name `@name`")?;
        self.expect(Tok::LParen, "`(`")?;
        while !self.at(Tok::RParen) {
            let t = self.expect(Tok::Local, "a parameter `%name`")?;
            let pname = &self.text(t)[1..];
            self.expect(Tok::Colon, "`:` and the parameter's type")?;
            let span = Span { start: t.start, end: t.end };
            if self.at(Tok::Ident) && self.text(self.tok) == "Buffer" {
                let buf = self.buffer_type(pname)?;
                let id = self.prim.b.buffer(buf).map_err(|m| self.error_at(span, m))?;
                self.prim.b.param(Param::Buf(id));
                self.pdefine(span, pname, PName::Buf(id))?;
            } else {
                let ty = self.ptype()?;
                let id = self.prim.b.var(pname, ty).map_err(|m| self.error_at(span, m))?;
                self.prim.b.param(Param::Var(id));
                self.pdefine(span, pname, PName::Var(id))?;
            }
            if !self.eat(Tok::Comma) {
                break;
            }
        }
        self.expect(Tok::RParen, "`,` or `)`")?;
        let body = self.pblock()?;
        self.prim.b.set_attrs(attrs);
        let func = self.prim.b.finish(body);
        Ok((name, (!self.poisoned).then_some(func)))
    }

    // ---- names ----

    fn pdefine(&mut self, span: Span, name: &'s str, what: PName) -> PResult<()> {
        let old = self.prim.names.insert(name, what);
        self.prim.scope.push((name, old));
        if old.is_some() {
            return Err(self.error_at(span, format!("`%{name}` is already defined in this scope")));
        }
        Ok(())
    }

    fn end_scope(&mut self, mark: usize) {
        while self.prim.scope.len() > mark {
            let Some((name, old)) = self.prim.scope.pop() else { break };
            match old {
                Some(o) => {
                    self.prim.names.insert(name, o);
                }
                None => {
                    self.prim.names.remove(name);
                }
            }
        }
    }

    fn lookup(&mut self, t: Token) -> PResult<PName> {
        let name = &self.text(t)[1..];
        match self.prim.names.get(name) {
            Some(&n) => Ok(n),
            None => Err(self.error_at(Span { start: t.start, end: t.end }, format!("undefined variable `%{name}`"))),
        }
    }

    fn buffer_ref(&mut self) -> PResult<BufId> {
        let t = self.expect(Tok::Local, "a buffer `%name`")?;
        match self.lookup(t)? {
            PName::Buf(b) => Ok(b),
            PName::Var(_) => {
                let name = self.text(t);
                Err(self.error_at(Span { start: t.start, end: t.end }, format!("`{name}` is a variable, not a buffer")))
            }
        }
    }

    // ---- types ----

    /// `f32`, `i64`, `bool`, `f32x4`, …
    fn ptype(&mut self) -> PResult<PType> {
        let t = self.expect(Tok::Ident, "a type (`i64`, `f32`, `Buffer[…]`)")?;
        let text = self.text(t);
        PType::from_name(text)
            .ok_or_else(|| self.error_at(Span { start: t.start, end: t.end }, format!("unknown type `{text}`")))
    }

    fn pdtype(&mut self) -> PResult<DType> {
        let t = self.expect(Tok::Ident, "a dtype")?;
        let text = self.text(t);
        DType::from_name(text)
            .ok_or_else(|| self.error_at(Span { start: t.start, end: t.end }, format!("unknown dtype `{text}`")))
    }

    fn int_token(&mut self, what: &str) -> PResult<i64> {
        let t = self.expect(Tok::Number, what)?;
        let text = self.text(t);
        text.parse::<i64>()
            .map_err(|_| self.error_at(Span { start: t.start, end: t.end }, format!("expected {what}, found `{text}`")))
    }

    /// `Buffer[(4, 4), f32, strides=[4, 1], offset=0, scope="local"]`.
    fn buffer_type(&mut self, name: &str) -> PResult<Buffer> {
        self.bump(); // `Buffer`
        self.expect(Tok::LBrack, "`[`")?;
        self.expect(Tok::LParen, "`(` and the buffer's shape")?;
        let mut shape = Vec::new();
        while !self.at(Tok::RParen) {
            shape.push(self.int_token("a dimension")?);
            if !self.eat(Tok::Comma) {
                break;
            }
        }
        self.expect(Tok::RParen, "`,` or `)`")?;
        self.expect(Tok::Comma, "`,` and the dtype")?;
        let dtype = self.pdtype()?;
        let mut buf = Buffer::new(name, dtype, &shape);
        while self.eat(Tok::Comma) {
            let key = self.expect(Tok::Ident, "`strides`, `offset` or `scope`")?;
            self.expect(Tok::Eq, "`=`")?;
            match self.text(key) {
                "strides" => {
                    self.expect(Tok::LBrack, "`[`")?;
                    let mut strides = Vec::new();
                    while !self.at(Tok::RBrack) {
                        strides.push(self.int_token("a stride")?);
                        if !self.eat(Tok::Comma) {
                            break;
                        }
                    }
                    self.expect(Tok::RBrack, "`,` or `]`")?;
                    buf.strides = strides.into();
                }
                "offset" => buf.elem_offset = self.int_token("an element offset")?,
                "scope" => {
                    let t = self.expect(Tok::Str, "a scope string")?;
                    let text = self.text(t);
                    buf.scope = Arc::from(&text[1..text.len() - 1]);
                }
                other => {
                    let span = Span { start: key.start, end: key.end };
                    return Err(self.error_at(
                        span,
                        format!("unknown buffer field `{other}` (expected `strides`, `offset` or `scope`)"),
                    ));
                }
            }
        }
        self.expect(Tok::RBrack, "`,` or `]`")?;
        Ok(buf)
    }

    // ---- statements ----

    /// `{ statements }`, one nesting level deeper.
    fn pblock(&mut self) -> PResult<StmtId> {
        self.nested(|p| {
            p.expect(Tok::LBrace, "`{`")?;
            let open = p.prev_end - 1;
            let mark = p.prim.scope.len();
            let body = p.pstmts();
            p.end_scope(mark);
            let body = body?;
            if !p.at(Tok::RBrace) {
                let (line, col) = p.line_col(open as usize);
                return Err(p.unexpected(&format!("`}}` (the `{{` at {line}:{col} is not closed)")));
            }
            p.bump();
            Ok(body)
        })
    }

    /// Statements up to the `}` that ends the block (not consumed).
    fn pstmts(&mut self) -> PResult<StmtId> {
        let mut list: Vec<StmtId> = Vec::new();
        let mut binders: Vec<(Binder, usize, u32)> = Vec::new();
        while !self.at(Tok::RBrace) && !self.at(Tok::Eof) && !self.too_many_errors() {
            let start = self.tok.start;
            match self.pstmt(&mut binders, list.len()) {
                Ok(Some(s)) => {
                    let span = self.span_from(start);
                    self.prim.b.set_span(s, span);
                    list.push(s);
                }
                Ok(None) => {}
                Err(Reported) => {
                    if self.abandoned {
                        return Err(Reported);
                    }
                    if self.tok.start == start {
                        self.bump();
                    }
                    self.recover();
                }
            }
        }
        while let Some((binder, at, start)) = binders.pop() {
            let body = self.prim.b.seq(list.get(at..).unwrap_or(&[]));
            list.truncate(at);
            let s = match binder {
                Binder::Let(var, value) => match self.prim.b.let_stmt(var, value, body) {
                    Ok(s) => s,
                    Err(m) => return Err(self.error_at(Span { start, end: start }, m)),
                },
                Binder::Alloc(buf) => self.prim.b.alloc(buf, body),
                Binder::Decl(buf, data) => match self.prim.b.decl(buf, data, body) {
                    Ok(s) => s,
                    Err(m) => return Err(self.error_at(Span { start, end: start }, m)),
                },
            };
            self.prim.b.set_span(s, Span { start, end: start });
            list.push(s);
        }
        Ok(self.prim.b.seq(&list))
    }

    /// One statement. A flat binder is pushed on `binders` (its body is the rest of the
    /// block) and yields `None`.
    fn pstmt(&mut self, binders: &mut Vec<(Binder, usize, u32)>, at: usize) -> PResult<Option<StmtId>> {
        let start = self.tok.start;
        let tspan = Span { start: self.tok.start, end: self.tok.end };
        match self.tok.kind {
            Tok::Local => {
                let buf = self.buffer_ref()?;
                self.expect(Tok::LBrack, "`[` and the indices")?;
                let indices = self.pexpr_list(Tok::RBrack)?;
                self.expect(Tok::Eq, "`=`")?;
                let value = self.pexpr()?;
                let dtype = self.prim.b.peek().buf(buf).dtype;
                let lanes = indices.iter().map(|&i| self.prim.b.peek().expr(i).ty.lanes).max().unwrap_or(1);
                self.coerce(value, PType { dtype, lanes });
                self.expect(Tok::Semi, "`;`")?;
                let s = self.prim.b.store(buf, &indices, value).map_err(|m| self.error_at(self.span_from(start), m))?;
                return Ok(Some(s));
            }
            Tok::Ident => {}
            _ => return Err(self.unexpected("a statement")),
        }
        if self.at_kw(Kw::If) {
            self.bump();
            self.expect(Tok::LParen, "`(`")?;
            let cond = self.pexpr()?;
            self.expect(Tok::RParen, "`)`")?;
            let then_ = self.pblock()?;
            let else_ = if self.at_kw(Kw::Else) {
                self.bump();
                Some(self.pblock()?)
            } else {
                None
            };
            let s = self.prim.b.if_(cond, then_, else_).map_err(|m| self.error_at(self.span_from(start), m))?;
            return Ok(Some(s));
        }
        if self.at_kw(Kw::Let) {
            self.bump();
            let t = self.expect(Tok::Local, "a variable `%name`")?;
            let name = &self.text(t)[1..];
            self.expect(Tok::Eq, "`=`")?;
            let value = self.pexpr()?;
            let ty = self.prim.b.peek().expr(value).ty;
            let span = Span { start: t.start, end: t.end };
            let var = self.prim.b.var(name, ty).map_err(|m| self.error_at(span, m))?;
            if self.eat(Tok::Semi) {
                self.pdefine(span, name, PName::Var(var))?;
                binders.push((Binder::Let(var, value), at, start));
                return Ok(None);
            }
            let mark = self.prim.scope.len();
            self.pdefine(span, name, PName::Var(var))?;
            let body = self.pblock();
            self.end_scope(mark);
            let s = self.prim.b.let_stmt(var, value, body?).map_err(|m| self.error_at(self.span_from(start), m))?;
            return Ok(Some(s));
        }
        let word = self.text(self.tok);
        match word {
            "for" => {
                self.bump();
                let t = self.expect(Tok::Local, "a loop variable `%name`")?;
                let name = &self.text(t)[1..];
                let in_ = self.expect(Tok::Ident, "`in`")?;
                if self.text(in_) != "in" {
                    return Err(self.error_at(Span { start: in_.start, end: in_.end }, "expected `in`".into()));
                }
                let k = self.expect(Tok::Ident, "a loop kind (`serial`, `parallel`, `vectorized`, `unroll`)")?;
                let ktext = self.text(k);
                let Some(kind) = ForKind::from_name(ktext) else {
                    let span = Span { start: k.start, end: k.end };
                    return Err(self.error_at(
                        span,
                        format!("unknown loop kind `{ktext}` (expected `serial`, `parallel`, `vectorized` or `unroll`)"),
                    ));
                };
                self.expect(Tok::LParen, "`(`")?;
                let min = self.pexpr()?;
                self.expect(Tok::Comma, "`,` and the extent")?;
                let extent = self.pexpr()?;
                self.expect(Tok::RParen, "`)`")?;
                self.unify(min, extent);
                let ty = self.prim.b.peek().expr(min).ty;
                let span = Span { start: t.start, end: t.end };
                let var = self.prim.b.var(name, ty).map_err(|m| self.error_at(span, m))?;
                let mark = self.prim.scope.len();
                self.pdefine(span, name, PName::Var(var))?;
                let body = self.pblock();
                self.end_scope(mark);
                let s = self
                    .prim
                    .b
                    .for_(var, min, extent, kind, body?)
                    .map_err(|m| self.error_at(self.span_from(start), m))?;
                Ok(Some(s))
            }
            "alloc" | "decl" => {
                self.bump();
                let t = self.expect(Tok::Local, "a buffer `%name`")?;
                let name = &self.text(t)[1..];
                self.expect(Tok::Colon, "`:` and the buffer's type")?;
                if !(self.at(Tok::Ident) && self.text(self.tok) == "Buffer") {
                    return Err(self.unexpected("`Buffer[…]`"));
                }
                let buf = self.buffer_type(name)?;
                let data = if word == "decl" {
                    self.expect(Tok::Eq, "`=` and the buffer viewed")?;
                    Some(self.buffer_ref()?)
                } else {
                    None
                };
                let span = Span { start: t.start, end: t.end };
                let id = self.prim.b.buffer(buf).map_err(|m| self.error_at(span, m))?;
                let binder = match data {
                    Some(d) => Binder::Decl(id, d),
                    None => Binder::Alloc(id),
                };
                if self.eat(Tok::Semi) {
                    self.pdefine(span, name, PName::Buf(id))?;
                    binders.push((binder, at, start));
                    return Ok(None);
                }
                let mark = self.prim.scope.len();
                self.pdefine(span, name, PName::Buf(id))?;
                let body = self.pblock();
                self.end_scope(mark);
                let body = body?;
                let s = match binder {
                    Binder::Decl(b, d) => {
                        self.prim.b.decl(b, d, body).map_err(|m| self.error_at(self.span_from(start), m))?
                    }
                    _ => self.prim.b.alloc(id, body),
                };
                Ok(Some(s))
            }
            "eval" => {
                self.bump();
                let e = self.pexpr()?;
                self.expect(Tok::Semi, "`;`")?;
                Ok(Some(self.prim.b.evaluate(e)))
            }
            "attr" => {
                self.bump();
                let k = self.expect(Tok::Str, "an attribute key string")?;
                let text = self.text(k);
                let key = text[1..text.len() - 1].to_string();
                self.expect(Tok::Eq, "`=`")?;
                let value = self.pexpr()?;
                let body = self.pblock()?;
                Ok(Some(self.prim.b.attr(&key, value, body)))
            }
            _ => Err(self.error_at(
                tspan,
                format!(
                    "expected a statement (`for`, `let`, `if`, `alloc`, `decl`, `eval`, `attr` or a store), found `{word}`"
                ),
            )),
        }
    }

    // ---- expressions ----

    /// Expressions separated by `,` up to `close` (consumed).
    fn pexpr_list(&mut self, close: Tok) -> PResult<Vec<PExprId>> {
        let mut out = Vec::new();
        while !self.at(close) {
            out.push(self.pexpr()?);
            if !self.eat(Tok::Comma) {
                break;
            }
        }
        let what = if close == Tok::RBrack { "`,` or `]`" } else { "`,` or `)`" };
        self.expect(close, what)?;
        Ok(out)
    }

    /// `(` arguments `)`: exactly `n` of them.
    fn pargs(&mut self, name: &str, n: usize, start: u32) -> PResult<Vec<PExprId>> {
        self.expect(Tok::LParen, "`(`")?;
        let args = self.pexpr_list(Tok::RParen)?;
        if args.len() != n {
            let span = self.span_from(start);
            return Err(self.error_at(span, format!("`{name}` takes {n} arguments, got {}", args.len())));
        }
        Ok(args)
    }

    fn pexpr(&mut self) -> PResult<PExprId> {
        self.nested(|p| p.pexpr_inner())
    }

    fn pexpr_inner(&mut self) -> PResult<PExprId> {
        let start = self.tok.start;
        let err = |p: &mut Self, m: String| p.error_at(p.span_from(start), m);
        match self.tok.kind {
            Tok::Local => {
                let t = self.bump();
                return match self.lookup(t)? {
                    PName::Var(v) => Ok(self.prim.b.var_ref(v)),
                    PName::Buf(b) => {
                        self.expect(Tok::LBrack, "`[` and the indices (a buffer is used by loading from it)")?;
                        let indices = self.pexpr_list(Tok::RBrack)?;
                        self.prim.b.load(b, &indices).map_err(|m| err(self, m))
                    }
                };
            }
            Tok::Number => return self.pliteral(),
            Tok::Ident => {}
            _ => return Err(self.unexpected("an expression")),
        }
        if self.at_kw(Kw::True) || self.at_kw(Kw::False) {
            let v = self.at_kw(Kw::True) as i64;
            self.bump();
            return self.prim.b.int(v, PType::scalar(DType::Bool)).map_err(|m| err(self, m));
        }
        if self.at_kw(Kw::Let) {
            self.bump();
            let t = self.expect(Tok::Local, "a variable `%name`")?;
            let name = &self.text(t)[1..];
            self.expect(Tok::Eq, "`=`")?;
            let value = self.pexpr()?;
            let in_ = self.expect(Tok::Ident, "`in`")?;
            if self.text(in_) != "in" {
                return Err(self.error_at(Span { start: in_.start, end: in_.end }, "expected `in`".into()));
            }
            let ty = self.prim.b.peek().expr(value).ty;
            let span = Span { start: t.start, end: t.end };
            let var = self.prim.b.var(name, ty).map_err(|m| self.error_at(span, m))?;
            let mark = self.prim.scope.len();
            self.pdefine(span, name, PName::Var(var))?;
            let body = self.pexpr();
            self.end_scope(mark);
            return self.prim.b.let_expr(var, value, body?).map_err(|m| err(self, m));
        }
        let t = self.bump();
        let name = self.text(t);
        if let Some(op) = BinOp::from_name(name) {
            let a = self.pargs(name, 2, start)?;
            self.unify(a[0], a[1]);
            return self.prim.b.bin(op, a[0], a[1]).map_err(|m| err(self, m));
        }
        if let Some(intr) = Intrinsic::from_name(name) {
            let a = self.pargs(name, intr.arity(), start)?;
            if let Some(&strong) = a.iter().find(|e| !self.prim.weak.contains(*e)) {
                let ty = self.prim.b.peek().expr(strong).ty;
                for &x in &a {
                    self.coerce(x, ty);
                }
            }
            return self.prim.b.call(intr, &a).map_err(|m| err(self, m));
        }
        match name {
            "not" => {
                let a = self.pargs(name, 1, start)?;
                self.prim.b.not(a[0]).map_err(|m| err(self, m))
            }
            "select" => {
                let a = self.pargs(name, 3, start)?;
                self.unify(a[1], a[2]);
                self.prim.b.select(a[0], a[1], a[2]).map_err(|m| err(self, m))
            }
            "cast" => {
                self.expect(Tok::LParen, "`(`")?;
                let a = self.pexpr()?;
                self.expect(Tok::Comma, "`,` and the target dtype")?;
                let d = self.pdtype()?;
                self.expect(Tok::RParen, "`)`")?;
                Ok(self.prim.b.cast(a, d))
            }
            "ramp" | "broadcast" => {
                self.expect(Tok::LParen, "`(`")?;
                let a = self.pexpr()?;
                let b = if name == "ramp" {
                    self.expect(Tok::Comma, "`,` and the stride")?;
                    let b = self.pexpr()?;
                    self.unify(a, b);
                    Some(b)
                } else {
                    None
                };
                self.expect(Tok::Comma, "`,` and the lane count")?;
                let lanes = self.int_token("a lane count")?;
                self.expect(Tok::RParen, "`)`")?;
                let lanes = u16::try_from(lanes).map_err(|_| err(self, format!("{lanes} lanes: too many")))?;
                match b {
                    Some(b) => self.prim.b.ramp(a, b, lanes),
                    None => self.prim.b.broadcast(a, lanes),
                }
                .map_err(|m| err(self, m))
            }
            _ => {
                if let Some(d) = DType::from_name(name).filter(|d| d.is_float()) {
                    // `f32(nan)`, `f64(-inf)`, `f32(0x…)`: a non-finite float immediate.
                    self.expect(Tok::LParen, "`(`")?;
                    let v = self.nonfinite()?;
                    self.expect(Tok::RParen, "`)`")?;
                    return self.prim.b.float(v, PType::scalar(d)).map_err(|m| err(self, m));
                }
                Err(self.error_at(Span { start: t.start, end: t.end }, format!("unknown loop-level operator `{name}`")))
            }
        }
    }

    /// `nan`, `inf`, `-inf` or a 16-digit f64 bit pattern.
    fn nonfinite(&mut self) -> PResult<f64> {
        let t = self.bump();
        let text = self.text(t);
        let span = Span { start: t.start, end: t.end };
        match text {
            "nan" => Ok(f64::NAN),
            "inf" => Ok(f64::INFINITY),
            "-inf" => Ok(f64::NEG_INFINITY),
            _ if text.starts_with("0x") && text.len() == 18 => u64::from_str_radix(&text[2..], 16)
                .map(f64::from_bits)
                .map_err(|_| self.error_at(span, format!("invalid float bit pattern `{text}`"))),
            _ => {
                Err(self
                    .error_at(span, format!("expected `nan`, `inf`, `-inf` or `0x` and 16 hex digits, found `{text}`")))
            }
        }
    }

    /// A number: `4` (i64), `4i32`, `255u8`, `1.5f` / `1.5` (f32), `1.5f16`, `1.5f64`.
    fn pliteral(&mut self) -> PResult<PExprId> {
        let t = self.bump();
        let text = self.text(t);
        let span = Span { start: t.start, end: t.end };
        let aux = (t.aux as usize).clamp(t.start as usize, t.end as usize) - t.start as usize;
        let (num, suffix) = text.split_at(aux);
        let is_float_text = num.contains(['.', 'e', 'E']) || num.ends_with("inf");
        let dtype = match suffix {
            "" if is_float_text => DType::F32,
            "" => DType::I64,
            "f" => DType::F32,
            s => match DType::from_name(s) {
                Some(d) => d,
                None => return Err(self.error_at(span, format!("unknown number suffix `{s}`"))),
            },
        };
        let e = if dtype.is_float() {
            let v: f64 = num.parse().map_err(|_| self.error_at(span, format!("invalid number `{text}`")))?;
            self.prim.b.float(v, PType::scalar(dtype))
        } else if is_float_text {
            return Err(self.error_at(span, format!("`{text}`: an integer suffix needs an integer")));
        } else {
            let v =
                if dtype == DType::U64 { num.parse::<u64>().map(|v| v as i64).ok() } else { num.parse::<i64>().ok() };
            let Some(v) = v else {
                return Err(self.error_at(span, format!("`{text}` does not fit in {dtype}")));
            };
            self.prim.b.int(v, PType::scalar(dtype))
        };
        let e = e.map_err(|m| self.error_at(span, m))?;
        if suffix.is_empty() {
            self.prim.weak.insert(e);
        }
        Ok(e)
    }

    /// Gives an unsuffixed literal operand the type of the other operand.
    fn unify(&mut self, a: PExprId, b: PExprId) {
        let (wa, wb) = (self.prim.weak.contains(&a), self.prim.weak.contains(&b));
        if wa && !wb {
            let ty = self.prim.b.peek().expr(b).ty;
            self.coerce(a, ty);
        } else if wb && !wa {
            let ty = self.prim.b.peek().expr(a).ty;
            self.coerce(b, ty);
        }
    }

    /// Retypes `e` to `ty` if it is an unsuffixed literal that fits.
    fn coerce(&mut self, e: PExprId, ty: PType) {
        if ty.is_scalar() && self.prim.weak.contains(&e) && self.prim.b.retype_immediate(e, ty.dtype) {
            self.prim.weak.remove(&e);
        }
    }
}
