//! Parser of the `.pir` text format (grammar: `docs/text-format.md`).
//!
//! A recursive-descent parser over the on-demand lexer (`ir/lexer.rs`) (literals are in `literals`),
//! building each function with a [`FunctionBuilder`] so that every node carries its source
//! span. Besides syntax it checks
//! what needs no types: operators exist and get the right number of arguments and valid
//! attributes, variables are defined before use and defined once per function, and global
//! functions are defined once. Unknown `@globals` are left to the verifier.
//!
//! Expressions nest by recursion, bounded by [`MAX_NESTING`]: deeper input is a clear error,
//! never a stack overflow. Errors do not stop the parse: after an error the parser skips to
//! the next `;`, `}` or `def` and goes on, reporting up to [`MAX_ERRORS`] errors.

mod literals;
mod names;
mod prim;
mod resources;

use std::fmt;
use std::sync::Arc;

use self::literals::scalar;
use self::names::NameMap;
use self::resources::{Blob, PendingRef};
use super::attrs::{fn_attr, AttrValue, Attrs};
use super::builder::FunctionBuilder;
use super::expr::Span;
use super::ids::{NodeId, OpId};
use super::lexer::{Kw, Lexer, Tok, Token};
use super::module::Module;
use super::tensor::{Constant, Tensor, TensorData};
use super::ty::{DType, TensorType, Type};
use crate::op;

/// How deeply expressions, blocks and types may nest. Deeper input is a parse error.
pub const MAX_NESTING: u32 = 512;

use crate::util::escape_invisible;

/// A parse stops after this many errors.
pub const MAX_ERRORS: usize = 100;

/// Largest tensor rank the parser accepts (so the largest any producer of text, such as the
/// ONNX importer, may emit).
pub const MAX_RANK: usize = 64;

/// One parse error: where, and either what was expected and found (syntax errors) or a
/// message (semantic errors such as an unknown operator).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Byte range of the offending text.
    pub span: Span,
    /// 1-based line.
    pub line: u32,
    /// 1-based column (in characters).
    pub col: u32,
    /// What the parser expected (empty for semantic errors).
    pub expected: String,
    /// What it found (empty for semantic errors).
    pub found: String,
    /// The message of a semantic error; `None` for a syntax error.
    pub message: Option<String>,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.message {
            Some(m) => write!(f, "{}:{}: {m}", self.line, self.col),
            None => write!(f, "{}:{}: expected {}, found {}", self.line, self.col, self.expected, self.found),
        }
    }
}

impl std::error::Error for ParseError {}

/// All errors of one parse, in source order (never empty).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n"))]
pub struct ParseErrors(pub Vec<ParseError>);

/// Parses a module. On failure, returns every error found (up to [`MAX_ERRORS`]), in source
/// order; no function is returned then.
pub fn parse_module(src: &str) -> Result<Module, ParseErrors> {
    // Spans are `u32` byte offsets.
    if src.len() > u32::MAX as usize {
        return Err(ParseErrors(vec![ParseError {
            span: Span::default(),
            line: 1,
            col: 1,
            expected: String::new(),
            found: String::new(),
            message: Some("input larger than 4 GiB".into()),
        }]));
    }
    let mut p = Parser::new(src);
    let module = p.module();
    if p.errors.is_empty() {
        Ok(module)
    } else {
        Err(ParseErrors(p.errors))
    }
}

/// The text format's maps are keyed by short names and never iterated, so rustc's fast
/// non-cryptographic hash is enough.
pub(super) type FxMap<K, V> = rustc_hash::FxHashMap<K, V>;

/// A function of either level, as read.
enum Item {
    Graph(super::function::Function),
    Prim(crate::tir::PrimFunc),
}

/// The error was recorded already; unwind to a recovery point.
struct Reported;

type PResult<T> = Result<T, Reported>;

struct Parser<'s> {
    src: &'s str,
    lexer: Lexer<'s>,
    tok: Token,
    peek: Token,
    /// End of the previous token, for spans of compound expressions.
    prev_end: u32,
    errors: Vec<ParseError>,
    /// Cache for line/column computation: (byte offset, line, col) of the last error.
    pos_cache: (usize, u32, u32),
    depth: u32,
    // Per function:
    b: FunctionBuilder,
    /// Every variable of the function by name, with where it was defined: a variable has a
    /// single definition per function, so one name maps to one node.
    vars: NameMap<'s, (NodeId, u32)>,
    /// `in_scope[node]`: whether the variable `node` is visible here (indexed by node id).
    in_scope: Vec<bool>,
    /// Variables in scope in definition order, so a block can drop its own when it ends.
    scope_vars: Vec<NodeId>,
    /// Scalar literals of this function by their text (`0.5f`), mapped to the first node that
    /// holds one: a repeat is a new node over the same constant, with no parsing or allocation.
    scalars: NameMap<'s, NodeId>,
    /// Scalar literals of the whole module by their text, with their type: functions share
    /// these immutable constants instead of each allocating its own `1.0f`.
    module_scalars: NameMap<'s, (Arc<Constant>, Type)>,
    /// Operator names of this module resolved so far (a module names few distinct operators
    /// many times).
    ops: NameMap<'s, Option<OpId>>,
    /// Whether this function had an error (it is then not added to the module).
    poisoned: bool,
    /// Scratch stack of call arguments and tuple fields being parsed, so that calls do not
    /// allocate; a construct uses the entries above the length it found on entry.
    operands: Vec<NodeId>,
    /// Scratch stack of the bindings of the blocks being parsed.
    pairs: Vec<(NodeId, NodeId)>,
    /// Whether the rest of this function is skipped (after a nesting error, whose recovery
    /// inside the deep nest would only report follow-on errors).
    abandoned: bool,
    /// `resource<…>(name)` references of this function.
    pending: Vec<PendingRef<'s>>,
    // Per module:
    /// References of the functions kept, with their function's name, in text order.
    module_refs: Vec<(&'s str, PendingRef<'s>)>,
    /// The entries of the `resources` section by name.
    blobs: NameMap<'s, Blob>,
    /// Whether a `resources` section was read.
    section_seen: bool,
    /// The PrimFunc being read.
    prim: prim::PrimState<'s>,
}

impl<'s> Parser<'s> {
    fn new(src: &'s str) -> Parser<'s> {
        let mut lexer = Lexer::new(src);
        let tok = lexer.next_token();
        let peek = lexer.next_token();
        Parser {
            src,
            lexer,
            tok,
            peek,
            prev_end: 0,
            errors: Vec::new(),
            pos_cache: (0, 1, 1),
            depth: 0,
            b: FunctionBuilder::new(),
            vars: NameMap::default(),
            in_scope: Vec::new(),
            scalars: NameMap::default(),
            module_scalars: NameMap::default(),
            ops: NameMap::default(),
            scope_vars: Vec::new(),
            poisoned: false,
            abandoned: false,
            operands: Vec::new(),
            pairs: Vec::new(),
            pending: Vec::new(),
            module_refs: Vec::new(),
            blobs: NameMap::default(),
            section_seen: false,
            prim: prim::PrimState::default(),
        }
    }

    // ---- tokens ----

    fn bump(&mut self) -> Token {
        let t = self.tok;
        self.prev_end = t.end;
        self.tok = self.peek;
        self.peek = self.lexer.next_token();
        t
    }

    fn text(&self, t: Token) -> &'s str {
        &self.src[t.start as usize..t.end as usize]
    }

    fn at(&self, kind: Tok) -> bool {
        self.tok.kind == kind
    }

    fn at_kw(&self, kw: Kw) -> bool {
        self.tok.kw == kw
    }

    fn eat(&mut self, kind: Tok) -> bool {
        if self.at(kind) {
            self.bump();
            true
        } else {
            false
        }
    }

    fn expect(&mut self, kind: Tok, what: &str) -> PResult<Token> {
        if self.at(kind) {
            Ok(self.bump())
        } else {
            Err(self.unexpected(what))
        }
    }

    fn expect_kw(&mut self, kw: Kw) -> PResult<Token> {
        if self.at_kw(kw) {
            Ok(self.bump())
        } else {
            Err(self.unexpected(&format!("`{}`", kw.text())))
        }
    }

    fn span_from(&self, start: u32) -> Span {
        Span { start, end: self.prev_end.max(start) }
    }

    // ---- errors ----

    fn describe(&self, t: Token) -> String {
        match t.kind {
            Tok::Eof => "end of input".into(),
            Tok::UnterminatedStr => "unterminated string".into(),
            _ => {
                let text = self.text(t);
                let shown = match text.char_indices().nth(24) {
                    Some((i, _)) => &text[..i],
                    None => text,
                };
                let more = if shown.len() < text.len() { "…" } else { "" };
                let name = match text.chars().next() {
                    Some('\u{feff}') => " (a byte-order mark)",
                    Some('\u{a0}') => " (a no-break space)",
                    Some('\0') => " (a NUL byte)",
                    _ => "",
                };
                format!("`{}{more}`{name}", escape_invisible(shown))
            }
        }
    }

    fn line_col(&mut self, offset: usize) -> (u32, u32) {
        let (mut pos, mut line, mut col) = self.pos_cache;
        if offset < pos {
            (pos, line, col) = (0, 1, 1);
        }
        for &b in &self.src.as_bytes()[pos..offset] {
            if b == b'\n' {
                line += 1;
                col = 1;
            } else if b & 0xC0 != 0x80 {
                col += 1;
            }
        }
        self.pos_cache = (offset, line, col);
        (line, col)
    }

    fn push_error(&mut self, span: Span, expected: String, found: String, message: Option<String>) {
        self.poisoned = true;
        if self.errors.len() >= MAX_ERRORS {
            return;
        }
        let (line, col) = self.line_col(span.start as usize);
        self.errors.push(ParseError { span, line, col, expected, found, message });
    }

    fn unexpected(&mut self, expected: &str) -> Reported {
        let found = self.describe(self.tok);
        let span = Span { start: self.tok.start, end: self.tok.end };
        self.push_error(span, expected.to_string(), found, None);
        Reported
    }

    fn error_at(&mut self, span: Span, message: String) -> Reported {
        self.push_error(span, String::new(), String::new(), Some(message));
        Reported
    }

    fn too_many_errors(&self) -> bool {
        self.errors.len() >= MAX_ERRORS
    }

    /// Skips to a recovery point: past the next `;`, or before the next `}` or `def`, at the
    /// current nesting level.
    fn recover(&mut self) {
        if self.abandoned {
            while !self.at(Tok::Eof) && !self.at_kw(Kw::Def) && !self.at_kw(Kw::Prim) {
                self.bump();
            }
            return;
        }
        let mut depth = 0u32;
        loop {
            match self.tok.kind {
                Tok::Eof => return,
                Tok::Semi if depth == 0 => {
                    self.bump();
                    return;
                }
                Tok::RBrace if depth == 0 => return,
                Tok::Ident if matches!(self.tok.kw, Kw::Def | Kw::Prim) => return,
                Tok::LParen | Tok::LBrack | Tok::LBrace => depth += 1,
                Tok::RParen | Tok::RBrack | Tok::RBrace => depth = depth.saturating_sub(1),
                _ => {}
            }
            self.bump();
        }
    }

    /// Runs `f` one nesting level deeper, or fails if that is too deep.
    fn nested<T>(&mut self, f: impl FnOnce(&mut Self) -> PResult<T>) -> PResult<T> {
        if self.depth >= MAX_NESTING {
            let span = Span { start: self.tok.start, end: self.tok.end };
            self.abandoned = true;
            return Err(self.error_at(span, format!("nesting deeper than {MAX_NESTING} levels")));
        }
        self.depth += 1;
        let r = f(self);
        self.depth -= 1;
        r
    }

    // ---- module and functions ----

    fn module(&mut self) -> Module {
        let mut module = Module::new();
        let mut first_def: FxMap<&'s str, u32> = FxMap::default();
        while !self.at(Tok::Eof) && !self.too_many_errors() {
            if self.at_kw(Kw::Resources) {
                self.resources_section();
                continue;
            }
            let start = self.tok.start;
            match self.function() {
                Ok((name_tok, item)) => {
                    let name = &self.text(name_tok)[1..];
                    if let Some(&first) = first_def.get(name) {
                        let (line, col) = self.line_col(first as usize);
                        let span = Span { start: name_tok.start, end: name_tok.end };
                        self.error_at(span, format!("function `@{name}` is defined twice (first at {line}:{col})"));
                    } else {
                        first_def.insert(name, name_tok.start);
                        // Names are unique here, so adding cannot fail.
                        match item {
                            Some(Item::Graph(func)) => {
                                let _ = module.add(name, func);
                                self.keep_refs(name);
                            }
                            Some(Item::Prim(func)) => {
                                let _ = module.add_prim(name, func);
                            }
                            None => {}
                        }
                    }
                }
                Err(Reported) => {
                    // Skip to the next function.
                    if self.tok.start == start {
                        self.bump();
                    }
                    while !self.at(Tok::Eof)
                        && !self.at_kw(Kw::Def)
                        && !self.at_kw(Kw::Prim)
                        && !self.at(Tok::Hash)
                        && !self.at_kw(Kw::Resources)
                    {
                        self.bump();
                    }
                }
            }
        }
        if !self.module_refs.is_empty() {
            self.resolve_resources(&mut module);
        }
        module
    }

    /// Parses `[#[attrs]] def @name(params) [-> T] { body }` or `[#[attrs]] prim @name(…) { … }`.
    /// Returns the name token and the function, unless the function had errors.
    fn function(&mut self) -> PResult<(Token, Option<Item>)> {
        self.b.clear();
        self.scalars.clear();
        self.vars.clear();
        self.in_scope.clear();
        self.scope_vars.clear();
        self.poisoned = false;
        self.abandoned = false;
        self.operands.clear();
        self.pairs.clear();
        self.pending.clear();
        let attrs = if self.at(Tok::Hash) { self.attr_list()? } else { Attrs::new() };
        if self.at_kw(Kw::Prim) {
            let (name, func) = self.prim_func(attrs)?;
            return Ok((name, func.map(Item::Prim)));
        }
        if !self.at_kw(Kw::Def) {
            return Err(self.unexpected("`def` or `prim`"));
        }
        self.bump();
        let name = self.expect(Tok::Global, "a global name `@name`")?;
        let params = self.params()?;
        let ret_ty = if self.eat(Tok::Arrow) { Some(self.ty()?) } else { None };
        let body = self.block()?;
        if self.poisoned {
            return Ok((name, None));
        }
        Ok((name, Some(Item::Graph(self.b.finish_and_clear(&params, body, ret_ty, attrs)))))
    }

    /// `#[Key, Key=value, …]`.
    fn attr_list(&mut self) -> PResult<Attrs> {
        self.expect(Tok::Hash, "`#`")?;
        self.expect(Tok::LBrack, "`[`")?;
        let (mut entries, mut keys) = (Vec::new(), Vec::new());
        while !self.at(Tok::RBrack) {
            let key = self.expect(Tok::Ident, "an attribute name")?;
            let value = if self.eat(Tok::Eq) { self.attr_value()? } else { AttrValue::Bool(true) };
            entries.push((self.text(key).into(), value));
            keys.push(key);
            if !self.eat(Tok::Comma) {
                break;
            }
        }
        self.expect(Tok::RBrack, "`,` or `]`")?;
        let (attrs, repeats) = Attrs::from_entries(entries);
        let mut repeats = repeats.into_iter().peekable();
        for (i, key) in keys.into_iter().enumerate() {
            if repeats.next_if_eq(&i).is_some() {
                self.duplicate_attr("function", key);
            } else if !fn_attr::ALL.contains(&self.text(key)) {
                self.check_fn_attr_name(key);
            }
        }
        Ok(attrs)
    }

    /// `(%x: T, …)`: defines the parameters in the current scope.
    fn params(&mut self) -> PResult<Vec<NodeId>> {
        self.expect(Tok::LParen, "`(`")?;
        let mut params = Vec::new();
        while !self.at(Tok::RParen) {
            let name = self.expect(Tok::Local, "a parameter `%name`")?;
            let ty = if self.eat(Tok::Colon) { Some(self.ty()?) } else { None };
            self.b.set_span(Span { start: name.start, end: self.prev_end });
            let var = self.b.var(&self.text(name)[1..], ty);
            self.define(name, var);
            params.push(var);
            if !self.eat(Tok::Comma) {
                break;
            }
        }
        self.expect(Tok::RParen, "`,` or `)`")?;
        Ok(params)
    }

    fn define(&mut self, name_tok: Token, var: NodeId) {
        let name = &self.text(name_tok)[1..];
        let first = self.vars.insert_new(name, (var, name_tok.start)).map(|&(_, first)| first);
        if let Some(first) = first {
            let (line, col) = self.line_col(first as usize);
            let span = Span { start: name_tok.start, end: name_tok.end };
            self.error_at(
                span,
                format!(
                    "`%{name}` is already defined at {line}:{col} (a variable has a single definition per function)"
                ),
            );
            return;
        }
        if self.in_scope.len() <= var.index() {
            // Variables come in increasing id order: grow geometrically, not once per variable.
            let len = (var.index() + 1).max(2 * self.in_scope.len());
            self.in_scope.resize(len, false);
        }
        self.in_scope[var.index()] = true;
        self.scope_vars.push(var);
    }

    fn pop_scope(&mut self, mark: usize) {
        for var in self.scope_vars.drain(mark..) {
            self.in_scope[var.index()] = false;
        }
    }

    // ---- blocks and expressions ----

    /// `{ let …; … result }`.
    fn block(&mut self) -> PResult<NodeId> {
        let open = self.expect(Tok::LBrace, "`{`")?;
        self.nested(|p| p.block_rest(open))
    }

    fn block_rest(&mut self, open: Token) -> PResult<NodeId> {
        let mark = self.scope_vars.len();
        let r = self.block_inner(open);
        self.pop_scope(mark);
        r
    }

    fn block_inner(&mut self, open: Token) -> PResult<NodeId> {
        let mark = self.pairs.len();
        let mut failed = false;
        let result = loop {
            if self.too_many_errors() || self.abandoned {
                return Err(Reported);
            }
            if self.at(Tok::Eof) {
                let (line, col) = self.line_col(open.start as usize);
                let span = Span { start: self.tok.start, end: self.tok.end };
                return Err(self.error_at(span, format!("unterminated block (the `{{` at {line}:{col} is not closed)")));
            }
            if self.at_kw(Kw::Let) {
                match self.binding() {
                    Ok(pair) => self.pairs.push(pair),
                    Err(Reported) => {
                        failed = true;
                        self.recover();
                        if self.at_kw(Kw::Def) {
                            return Err(Reported);
                        }
                    }
                }
                continue;
            }
            if self.at(Tok::RBrace) && failed {
                // The result was lost to an error.
                self.bump();
                return Err(Reported);
            }
            if let Ok(e) = self.expr() {
                if self.eat(Tok::RBrace) {
                    break e;
                }
                let _ = self.unexpected("`}` after the block's result");
            }
            // Skip to this block's `}`.
            self.recover();
            if self.at(Tok::RBrace) {
                self.bump();
            }
            return Err(Reported);
        };
        if failed {
            return Err(Reported);
        }
        self.b.set_span(Span { start: open.start, end: self.prev_end });
        let node = self.b.block(&self.pairs[mark..], result);
        self.pairs.truncate(mark);
        Ok(node)
    }

    /// `let %x[: T] = value;` — returns `(var, value)`.
    fn binding(&mut self) -> PResult<(NodeId, NodeId)> {
        let let_tok = self.expect_kw(Kw::Let)?;
        let name = self.expect(Tok::Local, "a variable `%name`")?;
        let ty = if self.eat(Tok::Colon) { Some(self.ty()?) } else { None };
        self.expect(Tok::Eq, "`=`")?;
        let value = self.expr()?;
        self.expect(Tok::Semi, "`;`")?;
        self.b.set_span(Span { start: let_tok.start, end: name.end });
        let var = self.b.var(&self.text(name)[1..], ty);
        self.define(name, var);
        Ok((var, value))
    }

    fn expr(&mut self) -> PResult<NodeId> {
        self.nested(Self::postfix)
    }

    /// A primary expression followed by projections `.0` and calls `(args)`.
    fn postfix(&mut self) -> PResult<NodeId> {
        let start = self.tok.start;
        let mut e = self.primary()?;
        loop {
            if self.eat(Tok::Dot) {
                let t = self.expect(Tok::Number, "a tuple index")?;
                let Ok(index) = self.text(t).parse::<u32>() else {
                    let span = Span { start: t.start, end: t.end };
                    return Err(self.error_at(span, format!("invalid tuple index `{}`", self.text(t))));
                };
                self.b.set_span(self.span_from(start));
                e = self.b.proj(e, index);
            } else if self.at(Tok::LParen) {
                let (mark, attrs) = self.args(false)?;
                if !attrs.is_empty() {
                    let span = self.span_from(start);
                    return Err(self.error_at(span, "only operator calls take attributes".into()));
                }
                self.b.set_span(self.span_from(start));
                e = self.b.apply(e, &self.operands[mark..]);
                self.operands.truncate(mark);
            } else {
                return Ok(e);
            }
        }
    }

    /// `(arg, …, key=value, …)`: the arguments are pushed on `operands` above the returned
    /// length. `share_constants`: see [`Parser::repeated_scalar_operand`].
    fn args(&mut self, share_constants: bool) -> PResult<(usize, Attrs)> {
        self.expect(Tok::LParen, "`(`")?;
        let mark = self.operands.len();
        // Collected, then sorted once: inserting each key in order is quadratic.
        let (mut entries, mut keys) = (Vec::new(), Vec::new());
        while !self.at(Tok::RParen) {
            if self.at(Tok::Ident) && self.peek.kind == Tok::Eq {
                let key = self.bump();
                self.bump();
                let value = self.attr_value()?;
                entries.push((self.text(key).into(), value));
                keys.push(key);
            } else if !entries.is_empty() {
                return Err(self.unexpected("an attribute `key=value` (arguments come first)"));
            } else if let Some(c) = self.repeated_scalar_operand(share_constants) {
                self.operands.push(c);
            } else {
                let e = self.expr()?;
                self.operands.push(e);
            }
            if !self.eat(Tok::Comma) {
                break;
            }
        }
        self.expect(Tok::RParen, "`,` or `)`")?;
        if entries.is_empty() {
            return Ok((mark, Attrs::new()));
        }
        let (attrs, repeats) = Attrs::from_entries(entries);
        for i in repeats {
            self.duplicate_attr("call", keys[i]);
        }
        Ok((mark, attrs))
    }

    /// When `share` is set and the next argument is exactly a scalar literal that this function
    /// used before, consumes it and returns that earlier constant node: atoms may have many
    /// users, and a chain of thousands of `multiply(%x, 0.5f)` then needs no node per use.
    /// Only operator arguments share, because diagnostics about an operator's arguments point
    /// at the call; an `if` condition or branch keeps its own node and span.
    fn repeated_scalar_operand(&mut self, share: bool) -> Option<NodeId> {
        if !share || self.tok.kind != Tok::Number || !matches!(self.peek.kind, Tok::Comma | Tok::RParen) {
            return None;
        }
        let id = *self.scalars.get(self.text(self.tok))?;
        self.bump();
        Some(id)
    }

    // The functions on the recursive path (`expr`, `postfix`, `primary`, `args`, `op_call`,
    // `tuple`, `if_`, `closure`, `block`) keep their frames small: constants and error
    // messages are built in out-of-line helpers, so the nesting limit fits in a small stack.

    fn primary(&mut self) -> PResult<NodeId> {
        match self.tok.kind {
            Tok::Local => self.local_use(),
            Tok::Global => {
                let t = self.bump();
                self.b.set_span(Span { start: t.start, end: t.end });
                Ok(self.b.global(&self.text(t)[1..]))
            }
            Tok::Number => self.constant_expr(),
            Tok::LParen => self.tuple(),
            Tok::LBrace => self.block(),
            Tok::Hash => self.closure(),
            Tok::Ident => match self.tok.kw {
                Kw::True | Kw::False | Kw::Tensor | Kw::Full | Kw::Uniform | Kw::Normal => self.constant_expr(),
                Kw::Resource => self.resource_ref(),
                Kw::If => self.if_(),
                Kw::Fn => self.closure(),
                Kw::None if self.peek.kind == Tok::LParen => self.op_call(),
                // `inf` and `nan` are f32 scalars, as `-inf` is.
                Kw::None if matches!(self.text(self.tok), "inf" | "nan") => self.constant_expr(),
                _ => Err(self.unexpected("an expression")),
            },
            _ => Err(self.unexpected("an expression")),
        }
    }

    /// A use of `%name`.
    #[inline(never)]
    fn local_use(&mut self) -> PResult<NodeId> {
        let t = self.bump();
        let name = &self.text(t)[1..];
        match self.vars.get(name) {
            Some(&(v, _)) if self.in_scope.get(v.index()).copied().unwrap_or(false) => Ok(v),
            _ => {
                let span = Span { start: t.start, end: t.end };
                self.error_at(span, format!("undefined variable `%{name}`"));
                // Keep parsing with a stand-in so later errors are found too.
                Ok(self.b.var(name, None))
            }
        }
    }

    /// A constant: scalar literal, `true` / `false`, dense tensor or fill.
    #[inline(never)]
    fn constant_expr(&mut self) -> PResult<NodeId> {
        let start = self.tok.start;
        let c = match self.tok.kw {
            Kw::True | Kw::False => {
                let t = self.bump();
                Constant::Dense(Tensor(TensorData::Bool(scalar(t.kw == Kw::True))))
            }
            Kw::Tensor => self.dense()?,
            Kw::Full | Kw::Uniform | Kw::Normal => self.fill()?,
            _ => {
                let text = self.text(self.tok);
                if let Some(&first) = self.scalars.get(text) {
                    self.bump();
                    self.b.set_span(self.span_from(start));
                    let node = *self.b.node(first);
                    return Ok(self.b.push_idx(node.kind, node.ty));
                }
                let (c, ty) = match self.module_scalars.get(text) {
                    Some((c, ty)) => {
                        let shared = (Arc::clone(c), ty.clone());
                        self.bump();
                        shared
                    }
                    None => {
                        let c = Arc::new(self.scalar_literal()?);
                        let ty = c.ty();
                        self.module_scalars.insert(text, (Arc::clone(&c), ty.clone()));
                        (c, ty)
                    }
                };
                self.b.set_span(self.span_from(start));
                let id = self.b.constant_typed(c, ty);
                self.scalars.insert(text, id);
                return Ok(id);
            }
        };
        self.b.set_span(self.span_from(start));
        Ok(self.b.constant(c))
    }

    #[cold]
    #[inline(never)]
    fn unknown_op(&mut self, name: &str, span: Span) {
        let suggestions = op::suggest(name);
        let hint = if suggestions.is_empty() {
            String::new()
        } else {
            let names: Vec<String> = suggestions.iter().map(|s| format!("`{s}`")).collect();
            format!(" (did you mean {}?)", names.join(" or "))
        };
        self.error_at(span, format!("unknown operator `{name}`{hint}"));
    }

    /// Reports a second `key` in one attribute list (`kind`: "call" or "function").
    #[cold]
    #[inline(never)]
    fn duplicate_attr(&mut self, kind: &str, key: Token) {
        let span = Span { start: key.start, end: key.end };
        let name = self.text(key);
        self.error_at(span, format!("duplicate {kind} attribute `{name}`"));
    }

    /// User-defined function attributes are allowed, but one that differs from a well-known
    /// name ([`fn_attr::ALL`]) only in case or by an edit distance of at most 2 is a typo.
    #[cold]
    #[inline(never)]
    fn check_fn_attr_name(&mut self, key: Token) {
        let name = self.text(key);
        let lower = name.to_ascii_lowercase();
        let near: Vec<String> = crate::util::suggest(name, fn_attr::ALL.into_iter())
            .into_iter()
            .filter(|c| crate::util::edit_distance(&lower, &c.to_ascii_lowercase()) <= 2)
            .map(|c| format!("`{c}`"))
            .collect();
        if !near.is_empty() {
            let span = Span { start: key.start, end: key.end };
            let msg = format!("unknown function attribute `{name}` (did you mean {}?)", near.join(" or "));
            self.error_at(span, msg);
        }
    }

    /// Checks arity and attributes of a call of `def`.
    #[inline(never)]
    fn check_call(&mut self, def: &op::OpDef, n_args: usize, attrs: &Attrs, span: Span) {
        if !def.arity.accepts(n_args) {
            let plural = if matches!(def.arity, op::Arity::Exact(1)) { "" } else { "s" };
            self.error_at(span, format!("operator `{}` takes {} argument{plural}, got {n_args}", def.name, def.arity));
        }
        // Without attributes only a required one can be missing; most operators have none.
        let may_fail = !attrs.is_empty() || def.attrs.iter().any(|s| s.required);
        if may_fail {
            if let Err(msg) = def.check_attrs(attrs) {
                self.error_at(span, msg);
            }
        }
    }

    /// `op(args, key=value)`, checked against the operator registry.
    fn op_call(&mut self) -> PResult<NodeId> {
        let name_tok = self.bump();
        let name = self.text(name_tok);
        let name_span = Span { start: name_tok.start, end: name_tok.end };
        let op = match self.ops.get(name) {
            Some(&op) => op,
            None => {
                let op = op::lookup(name);
                self.ops.insert(name, op);
                op
            }
        };
        if op.is_none() {
            self.unknown_op(name, name_span);
        }
        let (mark, attrs) = self.args(true)?;
        let span = self.span_from(name_tok.start);
        let n_args = self.operands.len() - mark;
        let node = match op {
            // A stand-in; the function is not kept.
            None => self.b.tuple(&self.operands[mark..]),
            Some(op) => {
                let def = op::get(op);
                // The common case needs no call: right arity, no attributes, none required.
                let plain = def.arity.accepts(n_args) && attrs.is_empty() && !def.attrs.iter().any(|s| s.required);
                if !plain {
                    self.check_call(def, n_args, &attrs, span);
                }
                self.b.set_span(span);
                self.b.call(op, &self.operands[mark..], attrs)
            }
        };
        self.operands.truncate(mark);
        Ok(node)
    }

    /// `()`, `(e)`, `(e,)`, `(a, b, …)`.
    fn tuple(&mut self) -> PResult<NodeId> {
        let start = self.expect(Tok::LParen, "`(`")?.start;
        let mark = self.operands.len();
        let mut trailing_comma = false;
        while !self.at(Tok::RParen) {
            let e = self.expr()?;
            self.operands.push(e);
            trailing_comma = self.eat(Tok::Comma);
            if !trailing_comma {
                break;
            }
        }
        self.expect(Tok::RParen, "`,` or `)`")?;
        let node = if self.operands.len() == mark + 1 && !trailing_comma {
            self.operands[mark]
        } else {
            self.b.set_span(self.span_from(start));
            self.b.tuple(&self.operands[mark..])
        };
        self.operands.truncate(mark);
        Ok(node)
    }

    /// `if (cond) { … } else { … }`.
    fn if_(&mut self) -> PResult<NodeId> {
        let start = self.expect_kw(Kw::If)?.start;
        self.expect(Tok::LParen, "`(`")?;
        let cond = self.expr()?;
        self.expect(Tok::RParen, "`)`")?;
        let then_ = self.block()?;
        self.expect_kw(Kw::Else)?;
        let else_ = self.block()?;
        self.b.set_span(self.span_from(start));
        Ok(self.b.if_(cond, then_, else_))
    }

    /// `[#[attrs]] fn (params) [-> T] { body }`.
    fn closure(&mut self) -> PResult<NodeId> {
        let start = self.tok.start;
        let attrs = if self.at(Tok::Hash) { self.attr_list()? } else { Attrs::new() };
        self.expect_kw(Kw::Fn)?;
        let mark = self.scope_vars.len();
        let r = (|| {
            let params = self.params()?;
            let ret_ty = if self.eat(Tok::Arrow) { Some(self.ty()?) } else { None };
            let body = self.block()?;
            Ok((params, ret_ty, body))
        })();
        self.pop_scope(mark);
        let (params, ret_ty, body) = r?;
        self.b.set_span(self.span_from(start));
        Ok(self.b.closure(&params, body, ret_ty, attrs))
    }

    // ---- types ----

    fn ty(&mut self) -> PResult<Type> {
        self.nested(Self::ty_inner)
    }

    fn ty_inner(&mut self) -> PResult<Type> {
        if self.at_kw(Kw::TensorTy) {
            self.bump();
            self.expect(Tok::LBrack, "`[`")?;
            let shape = self.shape()?;
            self.expect(Tok::Comma, "`,`")?;
            let dtype = self.dtype()?;
            self.expect(Tok::RBrack, "`]`")?;
            Ok(Type::tensor(shape, dtype))
        } else if self.at_kw(Kw::Fn) {
            self.bump();
            self.expect(Tok::LParen, "`(`")?;
            let mut params = Vec::new();
            while !self.at(Tok::RParen) {
                params.push(self.ty()?);
                if !self.eat(Tok::Comma) {
                    break;
                }
            }
            self.expect(Tok::RParen, "`,` or `)`")?;
            self.expect(Tok::Arrow, "`->`")?;
            let ret = self.ty()?;
            Ok(Type::func(params, ret))
        } else if self.eat(Tok::LParen) {
            let mut fields = Vec::new();
            while !self.at(Tok::RParen) {
                fields.push(self.ty()?);
                if !self.eat(Tok::Comma) {
                    break;
                }
            }
            self.expect(Tok::RParen, "`,` or `)`")?;
            Ok(Type::tuple(fields))
        } else {
            Err(self.unexpected("a type"))
        }
    }

    /// `(d, …)`: a shape.
    fn shape(&mut self) -> PResult<Vec<u64>> {
        self.expect(Tok::LParen, "`(` starting a shape")?;
        let mut dims = Vec::new();
        while !self.at(Tok::RParen) {
            let t = self.expect(Tok::Number, "a dimension")?;
            let Ok(d) = self.text(t).parse::<u64>() else {
                let span = Span { start: t.start, end: t.end };
                return Err(self.error_at(span, format!("invalid dimension `{}`", self.text(t))));
            };
            if dims.len() == MAX_RANK {
                let span = Span { start: t.start, end: t.end };
                return Err(self.error_at(span, format!("tensor rank above {MAX_RANK}")));
            }
            dims.push(d);
            if !self.eat(Tok::Comma) {
                break;
            }
        }
        self.expect(Tok::RParen, "`,` or `)`")?;
        Ok(dims)
    }

    fn dtype(&mut self) -> PResult<DType> {
        if self.at(Tok::Ident) {
            if let Some(d) = DType::from_name(self.text(self.tok)) {
                self.bump();
                return Ok(d);
            }
        }
        Err(self.unexpected("a dtype (f32, f16, i64, i32, bool)"))
    }

    /// `<(shape), dtype>` of a constant.
    fn tensor_type(&mut self) -> PResult<TensorType> {
        self.expect(Tok::Lt, "`<`")?;
        let shape = self.shape()?;
        self.expect(Tok::Comma, "`,`")?;
        let dtype = self.dtype()?;
        self.expect(Tok::Gt, "`>`")?;
        Ok(TensorType { shape: shape.into(), dtype })
    }
}
