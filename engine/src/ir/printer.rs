//! Printer of the `.pir` text format: deterministic, canonical and lossless, so that
//! `parse(print(m))` is structurally equal to `m` and printing it again gives the same bytes.
//!
//! The walk uses an explicit work stack, so it never recurses on expression depth. Only nodes
//! reachable from the parameters and the body are printed, inferred types of non-variable
//! nodes are not printed (they are a cache), and variable names are made unique and valid per
//! function (a second `%x` prints as `%x_1`) so the output always parses. Indentation stops
//! growing after [`MAX_INDENT`] levels, which keeps the output of very deep nesting linear.
//!
//! A function the builder recorded as malformed ([`Function::is_well_formed`]: an id or index
//! out of range) is not followed: it prints as one comment line naming the verifier's first
//! error, `// @f is malformed and not printed: …`.
//!
//! Invariant: the output parses, nesting included. The parser refuses input nested deeper
//! than [`MAX_NESTING`] levels, but passes can build deeper expressions (ToGraphNormalForm on
//! a long chain, FuseOps with a large `max_depth`). The printer knows the parser's depth at
//! every statement and each node's nesting height; a statement that would exceed the limit
//! has its deepest subexpressions bound to fresh variables first (`let %nest = …;`, in
//! evaluation order), so no printed statement nests too deep. Text that parsed never needs
//! this, so printing it stays a round trip.
//!
//! Dense constants with more than [`INLINE_ELEMENTS_LIMIT`] elements print as references,
//! `resource<(64, 3, 7, 7), f32>(r0)`, into a `resources { … }` section after the last
//! function that holds each distinct byte string once, as little-endian hex. Names are `r0`,
//! `r1`, … in order of first use in the text, so they are deterministic and `fmt` keeps them.

use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt::{self, Write};

use half::f16;

use super::attrs::{AttrValue, Attrs, FloatLit};
use super::expr::ExprKind;
use super::function::Function;
use super::ids::NodeId;
use super::module::Module;
use super::parser::FxMap;
use super::parser::MAX_NESTING;
use super::tensor::{Constant, Fill, Tensor, TensorData};
use super::ty::TensorType;
use crate::op;

/// Indentation (two spaces a level) grows up to this many levels.
pub const MAX_INDENT: usize = 64;

/// Dense constants with more elements than this print as references into the `resources`
/// section instead of inline: 1024 elements is a 32×32 matrix or a 4 KiB f32 blob, small
/// enough to read inline, while every real weight tensor (a 64×3×7×7 convolution kernel has
/// 9408) goes to the section.
pub const INLINE_ELEMENTS_LIMIT: usize = 1024;

/// Dense constants with more elements than this (and at most [`INLINE_ELEMENTS_LIMIT`]) that
/// the text would show more than once, e.g. a folded constant forwarded into every use, print
/// as references into the `resources` section too, so each is printed once: the text stays
/// in proportion to the module instead of repeating a 1024-element tensor at 200 uses.
/// Smaller ones stay inline wherever they are used.
pub const REPEATED_INLINE_LIMIT: usize = 16;

/// Prints a module in canonical text: functions in module order, separated by a blank line,
/// then the `resources` section if a large or repeated constant needs one.
pub fn print_module(m: &Module) -> String {
    let mut p = Printer::new(m.iter().map(|(_, f)| f.num_nodes() * 16 + 64).sum());
    p.repeated = repeated_constants(m.iter().map(|(_, f)| &**f));
    for (i, (name, f)) in m.iter().enumerate() {
        if i > 0 {
            p.out.push('\n');
        }
        p.function(name, f);
    }
    for (i, (name, f)) in m.prim_funcs().enumerate() {
        if i > 0 || !m.is_empty() {
            p.out.push('\n');
        }
        crate::tir::write_prim_func(&mut p.out, name, f);
    }
    p.resources_section();
    p.out
}

/// Prints one global function `@name` in canonical text, followed by the `resources` section
/// of its large constants (if any), so the text parses on its own.
pub fn print_function(name: &str, f: &Function) -> String {
    let mut p = Printer::new(f.num_nodes() * 16 + 64);
    p.repeated = repeated_constants(std::iter::once(f));
    p.function(name, f);
    p.resources_section();
    p.out
}

impl fmt::Display for Module {
    /// The canonical text of the module, as [`print_module`].
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&print_module(self))
    }
}

/// One step of the printing walk.
#[derive(Clone, Copy)]
enum Work {
    /// An expression, at its parser depth (nesting level of its own frame).
    Expr(NodeId, u32),
    /// An expression printed in full even if it was hoisted (the value of its `let`).
    Hoisted(NodeId, u32),
    /// The inside of a `{ … }` at parser depth `u32`: a block's bindings and result, or a
    /// lone expression.
    Body(NodeId, u32),
    /// One statement's value (a binding's or the result) in a block at depth `u32`: hoists
    /// subexpressions first if it would nest too deep.
    Stmt(NodeId, u32),
    /// The end of a block: forget the variables hoisted in it (out of scope from here).
    EndScope(usize),
    /// A variable's definition: its name and type annotation.
    Def(NodeId),
    /// Fixed text.
    Str(&'static str),
    /// A projection index, `.1`.
    Index(u32),
    /// The attributes of a call; `bool` says whether arguments precede them.
    CallAttrs(super::ids::AttrsIdx, bool),
    /// A line break at the current indentation.
    Newline,
    /// One indentation level in.
    Indent,
    /// One indentation level out.
    Dedent,
}

/// The printing state; one printer prints all functions of a module, reusing its tables.
struct Printer<'a> {
    /// The function being printed.
    f: Option<&'a Function>,
    out: String,
    /// The printed name of each variable node, once it has one.
    names: Vec<Option<Cow<'a, str>>>,
    used: rustc_hash::FxHashSet<Cow<'a, str>>,
    /// The next suffix to try for each base name, so renaming stays linear.
    next_suffix: FxMap<Cow<'a, str>, u32>,
    indent: usize,
    stack: Vec<Work>,
    /// Nesting height of each node as the parser counts it (levels from its own frame down).
    height: Vec<u32>,
    /// Hoisted subexpressions in scope, with their names, innermost last.
    hoisted: Vec<(NodeId, Cow<'a, str>)>,
    resources: Resources<'a>,
    /// Content hashes of mid-size constants the text shows more than once ([`REPEATED_INLINE_LIMIT`]).
    repeated: rustc_hash::FxHashSet<u64>,
    /// The text of each scalar constant printed so far, by the constant's address (a module
    /// shares one `Arc` per literal between its uses and its functions), as a range of
    /// `scalar_text`: a float is formatted once, not at each of its thousands of uses.
    scalars: rustc_hash::FxHashMap<*const Constant, (u32, u32)>,
    scalar_text: String,
}

/// The distinct byte strings of the large constants printed so far, named `r<index>`.
#[derive(Default)]
struct Resources<'a> {
    /// Constants already named, by address (a module shares one `Arc` between many uses).
    by_addr: rustc_hash::FxHashMap<*const Constant, u32>,
    /// Blob indices by a hash of their bytes, to share equal constants that are distinct
    /// allocations.
    by_hash: rustc_hash::FxHashMap<u64, Vec<u32>>,
    blobs: Vec<Cow<'a, [u8]>>,
}

impl<'a> Resources<'a> {
    /// The index of `c`'s bytes in the section, adding them when new.
    fn index(&mut self, c: &'a Constant, bytes: Cow<'a, [u8]>) -> u32 {
        let addr = c as *const Constant;
        if let Some(&i) = self.by_addr.get(&addr) {
            return i;
        }
        let hash = {
            use std::hash::{Hash, Hasher};
            let mut h = rustc_hash::FxHasher::default();
            bytes.hash(&mut h);
            h.finish()
        };
        let same = self.by_hash.entry(hash).or_default();
        let i = match same.iter().find(|&&i| self.blobs[i as usize] == bytes) {
            Some(&i) => i,
            None => {
                let i = self.blobs.len() as u32;
                self.blobs.push(bytes);
                same.push(i);
                i
            }
        };
        self.by_addr.insert(addr, i);
        i
    }
}

/// The little-endian bytes and type of a dense or raw constant with more than
/// [`INLINE_ELEMENTS_LIMIT`] elements (borrowed from a raw constant's buffer, which holds
/// exactly those bytes), or `None` for a constant that prints inline.
fn large_constant(c: &Constant) -> Option<(Cow<'_, [u8]>, TensorType)> {
    match c {
        Constant::Dense(t) if t.len() > INLINE_ELEMENTS_LIMIT => Some((Cow::Owned(t.to_le_bytes()), t.tensor_type())),
        Constant::Raw { ty, data }
            if ty
                .shape
                .iter()
                .try_fold(1u64, |n, &d| n.checked_mul(d))
                .is_none_or(|n| n > INLINE_ELEMENTS_LIMIT as u64) =>
        {
            Some((Cow::Borrowed(&data[..]), ty.clone()))
        }
        _ => None,
    }
}

/// The type and little-endian bytes of a dense or raw constant with more than
/// [`REPEATED_INLINE_LIMIT`] and at most [`INLINE_ELEMENTS_LIMIT`] elements.
fn mid_size_constant(c: &Constant) -> Option<(Cow<'_, [u8]>, TensorType)> {
    // The element count first: most constants are scalars, whose type is not worth building.
    let n = match c {
        Constant::Dense(t) => t.len() as u64,
        Constant::Raw { ty, .. } => ty.num_elements()?,
        Constant::Fill { .. } => return None,
    };
    if n <= REPEATED_INLINE_LIMIT as u64 || n > INLINE_ELEMENTS_LIMIT as u64 {
        return None;
    }
    match c {
        Constant::Dense(t) => Some((Cow::Owned(t.to_le_bytes()), t.tensor_type())),
        Constant::Raw { ty, data } => Some((Cow::Borrowed(&data[..]), ty.clone())),
        Constant::Fill { .. } => None,
    }
}

/// A hash of a constant's type and bytes.
fn content_hash(bytes: &[u8], ty: &TensorType) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    ty.hash(&mut h);
    bytes.hash(&mut h);
    h.finish()
}

/// Content hashes of the mid-size constants (see [`REPEATED_INLINE_LIMIT`]) that the text of
/// `funcs` shows more than once: each use of a constant node by a printed node counts, so an
/// equal module read back from the text (where every use is its own node) counts the same
/// and prints the same bytes.
fn repeated_constants<'f>(funcs: impl Iterator<Item = &'f Function>) -> rustc_hash::FxHashSet<u64> {
    let mut seen: rustc_hash::FxHashMap<u64, u32> = rustc_hash::FxHashMap::default();
    let mut live = Vec::new();
    for f in funcs.filter(|f| f.is_well_formed()) {
        let mut count = |id: NodeId| {
            if let ExprKind::Const { idx } = *f.kind(id) {
                if let Some((bytes, ty)) = mid_size_constant(f.constant(idx)) {
                    *seen.entry(content_hash(&bytes, &ty)).or_default() += 1;
                }
            }
        };
        count(f.body());
        f.live_mask_into(&mut live);
        for (i, _) in live.iter().enumerate().filter(|(_, &l)| l) {
            f.for_each_operand(NodeId(i as u32), &mut count);
        }
    }
    seen.into_iter().filter(|&(_, n)| n > 1).map(|(h, _)| h).collect()
}

/// Lowercase hex digits, for blobs.
const HEX: &[u8; 16] = b"0123456789abcdef";

/// Blob bytes hex-encoded per step of the resource section.
const HEX_PIECE: usize = 16 * 1024;

/// `#[Key, Key=value]` (function attributes of both levels).
pub(crate) fn write_attrs(out: &mut String, attrs: &Attrs) {
    out.push_str("#[");
    for (i, (key, value)) in attrs.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        out.push_str(key);
        if *value != AttrValue::Bool(true) {
            let _ = write!(out, "={value}");
        }
    }
    out.push(']');
}

/// A name made of `[A-Za-z0-9_.]`, where a `.` is followed by a letter or `_` (a `.` before a
/// digit would read as a projection): how the text format spells a variable named `name`
/// (e.g. an ONNX value `gpu_0/data_0` prints as `%gpu_0_data_0`). Valid names are borrowed.
pub fn text_name(name: &str) -> Cow<'_, str> {
    let bytes = name.as_bytes();
    let ok = |i: usize| {
        let b = bytes[i];
        let next = bytes.get(i + 1).copied().unwrap_or(0);
        b.is_ascii_alphanumeric() || b == b'_' || (b == b'.' && (next.is_ascii_alphabetic() || next == b'_'))
    };
    if !name.is_empty() && (0..bytes.len()).all(ok) {
        return Cow::Borrowed(name);
    }
    let mut s: String = (0..bytes.len())
        .filter(|&i| name.is_char_boundary(i))
        .map(|i| if ok(i) { bytes[i] as char } else { '_' })
        .collect();
    if s.is_empty() {
        s.push('v');
    }
    Cow::Owned(s)
}

impl<'a> Printer<'a> {
    fn new(capacity: usize) -> Printer<'a> {
        Printer {
            f: None,
            out: String::with_capacity(capacity),
            names: Vec::new(),
            used: HashSet::default(),
            next_suffix: FxMap::default(),
            indent: 0,
            stack: Vec::new(),
            height: Vec::new(),
            hoisted: Vec::new(),
            resources: Resources::default(),
            repeated: rustc_hash::FxHashSet::default(),
            scalars: rustc_hash::FxHashMap::default(),
            scalar_text: String::new(),
        }
    }

    /// `resources { r0 = "…"; … }` after the functions, when a constant was large.
    fn resources_section(&mut self) {
        if self.resources.blobs.is_empty() {
            return;
        }
        let bytes: usize = self.resources.blobs.iter().map(|b| 2 * b.len() + 16).sum();
        self.out.reserve(bytes + 16);
        self.out.push_str("\nresources {\n");
        for (i, blob) in self.resources.blobs.iter().enumerate() {
            let _ = write!(self.out, "  r{i} = \"");
            // Hex in 32 KiB pieces through one scratch buffer: no blob-sized temporary.
            let mut hex = [0u8; 2 * HEX_PIECE];
            for piece in blob.chunks(HEX_PIECE) {
                for (pair, &b) in hex.chunks_exact_mut(2).zip(piece) {
                    pair.copy_from_slice(&[HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
                }
                // Only ASCII hex digits were written.
                self.out.push_str(std::str::from_utf8(&hex[..2 * piece.len()]).unwrap_or_default());
            }
            self.out.push_str("\";\n");
        }
        self.out.push_str("}\n");
    }

    fn func(&self) -> &'a Function {
        self.f.expect("printing a function")
    }

    fn function(&mut self, name: &str, f: &'a Function) {
        if !f.is_well_formed() {
            // Its ids cannot be followed safely: say so instead of printing it.
            let why = match super::verifier::verify_function(None, name, f) {
                Err(errs) => errs.first().map(|e| e.to_string()).unwrap_or_default(),
                Ok(()) => String::new(),
            };
            let _ = writeln!(self.out, "// @{name} is malformed and not printed: {}", why.replace('\n', " "));
            return;
        }
        self.f = Some(f);
        self.names.clear();
        self.names.resize(f.num_nodes(), None);
        self.used.clear();
        self.next_suffix.clear();
        self.indent = 0;
        self.hoisted.clear();
        self.height = heights(f);
        if !f.attrs().is_empty() {
            write_attrs(&mut self.out, f.attrs());
            self.out.push('\n');
        }
        self.out.push_str("def @");
        self.out.push_str(name);
        self.params(f.params());
        if let Some(ty) = f.ret_ty() {
            let _ = write!(self.out, " -> {ty}");
        }
        self.out.push_str(" {");
        self.stack.extend([
            Work::Str("\n"),
            Work::Str("}"),
            Work::Newline,
            Work::Dedent,
            Work::Body(f.body(), 1),
            Work::Indent,
        ]);
        self.run();
    }
    fn params(&mut self, params: &[NodeId]) {
        self.out.push('(');
        for (i, &p) in params.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            self.def(p);
        }
        self.out.push(')');
    }

    /// The printed name of variable `var`, chosen on first sight in text order.
    fn name(&mut self, var: NodeId) {
        if self.names[var.index()].is_some() {
            return;
        }
        let base = match self.func().name_of(var) {
            Some(n) => text_name(n),
            None => Cow::Borrowed("v"),
        };
        // One hash in the common case of a name not seen before.
        let name = if self.used.insert(base.clone()) {
            base
        } else {
            let k = self.next_suffix.entry(base.clone()).or_insert(1);
            loop {
                let name = format!("{base}_{k}");
                *k += 1;
                if !self.used.contains(name.as_str()) {
                    let name: Cow<'_, str> = Cow::Owned(name);
                    self.used.insert(name.clone());
                    break name;
                }
            }
        };
        self.names[var.index()] = Some(name);
    }

    fn def(&mut self, var: NodeId) {
        self.var(var);
        if let Some(ty) = self.func().ty(var) {
            let _ = write!(self.out, ": {ty}");
        }
    }

    /// `%name` of a variable.
    fn var(&mut self, var: NodeId) {
        self.name(var);
        let name = self.names[var.index()].as_deref().unwrap_or("v");
        self.out.push('%');
        self.out.push_str(name);
    }

    fn newline(&mut self) {
        const SPACES: &str = match std::str::from_utf8(&[b' '; 2 * MAX_INDENT]) {
            Ok(s) => s,
            Err(_) => "",
        };
        self.out.push('\n');
        self.out.push_str(&SPACES[..2 * self.indent.min(MAX_INDENT)]);
    }

    /// Pushes `items` (at parser depth `depth`) separated by `, ` so that they print in order.
    fn push_list(&mut self, items: &[NodeId], depth: u32) {
        for (i, &x) in items.iter().enumerate().rev() {
            self.stack.push(Work::Expr(x, depth));
            if i > 0 {
                self.stack.push(Work::Str(", "));
            }
        }
    }

    fn run(&mut self) {
        let f = self.func();
        while let Some(w) = self.stack.pop() {
            match w {
                Work::Str(s) => self.out.push_str(s),
                Work::Newline => self.newline(),
                Work::Indent => self.indent += 1,
                Work::Dedent => self.indent -= 1,
                Work::Index(i) => {
                    let _ = write!(self.out, ".{i}");
                }
                Work::Def(var) => self.def(var),
                Work::CallAttrs(idx, has_args) => self.call_attrs(idx, has_args),
                Work::Body(id, depth) => {
                    let (pairs, result) = match *f.kind(id) {
                        ExprKind::Block { bindings, result } => (f.ids(bindings), result),
                        _ => (&[][..], id),
                    };
                    self.stack.extend([
                        Work::EndScope(self.hoisted.len()),
                        Work::Expr(result, depth + 1),
                        Work::Stmt(result, depth),
                    ]);
                    for pair in pairs.chunks_exact(2).rev() {
                        self.stack.extend([
                            Work::Str(";"),
                            Work::Expr(pair[1], depth + 1),
                            Work::Str(" = "),
                            Work::Def(pair[0]),
                            Work::Str("let "),
                            Work::Stmt(pair[1], depth),
                        ]);
                    }
                }
                Work::Stmt(id, depth) => self.stmt(id, depth),
                Work::EndScope(len) => self.hoisted.truncate(len),
                Work::Expr(id, depth) => match self.hoisted.iter().rev().find(|(n, _)| *n == id) {
                    Some((_, name)) => {
                        self.out.push('%');
                        self.out.push_str(name);
                    }
                    None => self.expr(id, depth),
                },
                Work::Hoisted(id, depth) => self.expr(id, depth),
            }
        }
    }

    /// `, key=value, …` of a call (without the first comma when it has no arguments).
    fn call_attrs(&mut self, idx: super::ids::AttrsIdx, has_args: bool) {
        for (i, (key, value)) in self.func().call_attrs(idx).iter().enumerate() {
            if i > 0 || has_args {
                self.out.push_str(", ");
            }
            let _ = write!(self.out, "{key}={value}");
        }
    }

    /// Starts a statement of a block at `depth`: a line break, then (when the value at
    /// `value` would nest deeper than the parser allows) `let` bindings of its deepest
    /// subexpressions. A binding's `let %x = value;` text follows on the stack; a block's
    /// result is pushed here when `value` is one.
    fn stmt(&mut self, value: NodeId, depth: u32) {
        let f = self.func();
        // The statement's root frame is at depth + 1; frames may go up to MAX_NESTING.
        let budget = (MAX_NESTING + 1).saturating_sub(depth + 1).max(2);
        let cuts = if self.height.get(value.index()).copied().unwrap_or(1) > budget {
            cut_points(f, value, budget, &self.height)
        } else {
            Vec::new()
        };
        for &c in &cuts {
            let name = self.fresh("nest");
            self.hoisted.push((c, name));
        }
        // Pushed in reverse: the hoisted lets print first, in evaluation order, then the line
        // break of the statement itself.
        self.stack.push(Work::Newline);
        for &c in cuts.iter().rev() {
            self.stack.extend([
                Work::Str(";"),
                Work::Hoisted(c, depth + 1),
                Work::Str(" = "),
                Work::Expr(c, depth + 1),
                Work::Str("let "),
                Work::Newline,
            ]);
        }
    }

    /// A fresh variable name `base`, `base_1`, … not used in this function so far.
    fn fresh(&mut self, base: &'static str) -> Cow<'a, str> {
        let base: Cow<'a, str> = Cow::Borrowed(base);
        if self.used.insert(base.clone()) {
            return base;
        }
        let k = self.next_suffix.entry(base.clone()).or_insert(1);
        loop {
            let name = format!("{base}_{k}");
            *k += 1;
            if !self.used.contains(name.as_str()) {
                let name: Cow<'a, str> = Cow::Owned(name);
                self.used.insert(name.clone());
                return name;
            }
        }
    }

    /// An inline constant; scalars through the cache of their text (the constant outlives the
    /// printer, so its address names it for the whole print).
    fn constant(&mut self, c: &'a Constant) {
        if !matches!(c, Constant::Dense(t) if t.shape().is_empty()) {
            write_constant(&mut self.out, c);
            return;
        }
        let (start, end) = *self.scalars.entry(c as *const Constant).or_insert_with(|| {
            let start = self.scalar_text.len() as u32;
            write_constant(&mut self.scalar_text, c);
            (start, self.scalar_text.len() as u32)
        });
        self.out.push_str(&self.scalar_text[start as usize..end as usize]);
    }

    fn expr(&mut self, id: NodeId, depth: u32) {
        let f = self.func();
        match *f.kind(id) {
            ExprKind::Var { .. } => self.var(id),
            ExprKind::Global { name } => {
                self.out.push('@');
                self.out.push_str(f.sym(name));
            }
            ExprKind::Const { idx } => {
                let c: &'a Constant = f.constant(idx);
                let repeated =
                    || mid_size_constant(c).filter(|(bytes, ty)| self.repeated.contains(&content_hash(bytes, ty)));
                match large_constant(c).or_else(repeated) {
                    Some((bytes, ty)) => {
                        let i = self.resources.index(c, bytes);
                        self.out.push_str("resource<");
                        write_shape(&mut self.out, ty.shape.iter().copied());
                        let _ = write!(self.out, ", {}>(r{i})", ty.dtype);
                    }
                    None => self.constant(c),
                }
            }
            ExprKind::Call { op, attrs, args } => {
                self.out.push_str(op::get(op).name);
                self.out.push('(');
                let ids = f.ids(args);
                if ids.iter().all(|&a| f.kind(a).is_atom()) {
                    // The usual call of variables and literals prints at once, in the order the
                    // work items below would print it (atoms push no work and are never
                    // hoisted).
                    for (i, &a) in ids.iter().enumerate() {
                        if i > 0 {
                            self.out.push_str(", ");
                        }
                        self.expr(a, depth + 1);
                    }
                    self.call_attrs(attrs, args.len > 0);
                    self.out.push(')');
                    return;
                }
                self.stack.push(Work::Str(")"));
                self.stack.push(Work::CallAttrs(attrs, args.len > 0));
                self.push_list(f.ids(args), depth + 1);
            }
            ExprKind::Apply { callee, args } => {
                self.stack.push(Work::Str(")"));
                self.push_list(f.ids(args), depth + 1);
                self.stack.push(Work::Str("("));
                self.stack.push(Work::Expr(callee, depth));
            }
            ExprKind::Tuple { fields } => {
                self.out.push('(');
                self.stack.push(Work::Str(if fields.len == 1 { ",)" } else { ")" }));
                self.push_list(f.ids(fields), depth + 1);
            }
            ExprKind::Proj { tuple, index } => {
                self.stack.push(Work::Index(index));
                self.stack.push(Work::Expr(tuple, depth));
            }
            ExprKind::If { cond, then_, else_ } => {
                self.out.push_str("if (");
                self.stack.extend([
                    Work::Str("}"),
                    Work::Newline,
                    Work::Dedent,
                    Work::Body(else_, depth + 1),
                    Work::Indent,
                    Work::Str("} else {"),
                    Work::Newline,
                    Work::Dedent,
                    Work::Body(then_, depth + 1),
                    Work::Indent,
                    Work::Str(") {"),
                    Work::Expr(cond, depth + 1),
                ]);
            }
            ExprKind::Func { idx } => {
                let c = f.closure(idx);
                if !c.attrs.is_empty() {
                    write_attrs(&mut self.out, &c.attrs);
                    self.out.push(' ');
                }
                self.out.push_str("fn ");
                self.params(f.ids(c.params));
                if let Some(ty) = &c.ret_ty {
                    let _ = write!(self.out, " -> {ty}");
                }
                self.out.push_str(" {");
                self.stack.extend([
                    Work::Str("}"),
                    Work::Newline,
                    Work::Dedent,
                    Work::Body(c.body, depth + 1),
                    Work::Indent,
                ]);
            }
            ExprKind::Block { .. } => {
                self.out.push('{');
                self.stack.extend([
                    Work::Str("}"),
                    Work::Newline,
                    Work::Dedent,
                    Work::Body(id, depth + 1),
                    Work::Indent,
                ]);
            }
        }
    }
}

/// The deepest nesting of bodies in `func` that the text format is sure to print and parse
/// back: `if` branches, closure bodies and blocks used as expressions, counted along the
/// deepest path ([`body_nesting`]). Each such level costs the parser two of its
/// [`MAX_NESTING`] levels (the `{` frame and the statement's), which the printer cannot hoist;
/// 240 levels leave 31 levels for the innermost statement (its type annotation and its
/// expression, whose depth the printer does hoist).
///
/// Passes that can deepen bodies (Inline splices a callee's bodies into a caller's, FuseOps
/// wraps groups in closures) keep a function they would take past this limit as it was, with
/// a warning, so whatever `passel run` prints, `passel check` accepts.
pub const MAX_BODY_NESTING: u32 = (MAX_NESTING - 32) / 2;

/// How deeply bodies nest in `func` (see [`MAX_BODY_NESTING`]): 0 for a function whose body
/// has no `if`, closure or inner block. One pass over the arena, no recursion.
pub fn body_nesting(func: &Function) -> u32 {
    let n = func.num_nodes();
    let mut level = vec![0u32; n];
    // The level inside a body: a block's statements share its frame; another body is one
    // statement. Operands that do not precede their user (a malformed function) count as 0.
    let inner = |level: &[u32], body: NodeId, user: usize| -> u32 {
        let at = |x: NodeId| if x.index() < user { level[x.index()] } else { 0 };
        match *func.kind(body) {
            ExprKind::Block { bindings, result } if body.index() <= user => {
                func.ids(bindings).chunks_exact(2).map(|p| at(p[1])).max().unwrap_or(0).max(at(result))
            }
            _ => at(body),
        }
    };
    for i in 0..n {
        let id = NodeId(i as u32);
        let mut l = 0u32;
        operands(func, id, |c, _| {
            if c.index() < i {
                l = l.max(level[c.index()]);
            }
        });
        let nested = match *func.kind(id) {
            ExprKind::If { then_, else_, .. } => inner(&level, then_, i).max(inner(&level, else_, i)) + 1,
            ExprKind::Func { idx } => inner(&level, func.closure(idx).body, i) + 1,
            ExprKind::Block { .. } => inner(&level, id, i) + 1,
            _ => 0,
        };
        level[i] = l.max(nested);
    }
    match func.body() {
        b if b.index() < n => inner(&level, b, n),
        _ => 0,
    }
}

/// The operands of `id` printed inside its own text, with the extra parser depth of each
/// (0: same frame, as a projection's tuple or a call's callee; 1: one level in), and its
/// bodies (blocks two levels in: the `{` frame, then each statement's frame).
fn operands(f: &Function, id: NodeId, mut visit: impl FnMut(NodeId, u32)) {
    match *f.kind(id) {
        ExprKind::Var { .. } | ExprKind::Global { .. } | ExprKind::Const { .. } => {}
        ExprKind::Call { args, .. } => f.ids(args).iter().for_each(|&a| visit(a, 1)),
        ExprKind::Tuple { fields } => f.ids(fields).iter().for_each(|&a| visit(a, 1)),
        ExprKind::Apply { callee, args } => {
            visit(callee, 0);
            f.ids(args).iter().for_each(|&a| visit(a, 1));
        }
        ExprKind::Proj { tuple, .. } => visit(tuple, 0),
        ExprKind::If { cond, .. } => visit(cond, 1),
        ExprKind::Func { .. } | ExprKind::Block { .. } => {}
    }
}

/// The bodies nested in `id` (an `if`'s branches, a closure's body, a block itself).
fn bodies(f: &Function, id: NodeId) -> [Option<NodeId>; 2] {
    match *f.kind(id) {
        ExprKind::If { then_, else_, .. } => [Some(then_), Some(else_)],
        ExprKind::Func { idx } => [Some(f.closure(idx).body), None],
        _ => [None, None],
    }
}

/// The parser depth a body's statements need below the body's `{` frame.
fn body_height(f: &Function, body: NodeId, height: &[u32]) -> u32 {
    let h = |n: NodeId| height.get(n.index()).copied().unwrap_or(1);
    match *f.kind(body) {
        ExprKind::Block { bindings, result } => {
            f.ids(bindings).chunks_exact(2).map(|p| h(p[1])).max().unwrap_or(0).max(h(result))
        }
        _ => h(body),
    }
}

/// Height of each node: the parser levels its text uses, counting its own frame. Nodes are in
/// post-order (operands first), so one forward pass computes them; an operand that does not
/// precede its user (a malformed function) counts as a leaf.
fn heights(f: &Function) -> Vec<u32> {
    let n = f.num_nodes();
    let mut height = vec![1u32; n];
    for i in 0..n {
        let id = NodeId(i as u32);
        let mut h = 1u32;
        operands(f, id, |c, extra| {
            if c.index() < i {
                h = h.max(height[c.index()].saturating_add(extra));
            }
        });
        let own_block = matches!(f.kind(id), ExprKind::Block { .. }).then_some(id);
        for body in bodies(f, id).into_iter().flatten().chain(own_block) {
            if body.index() <= i {
                // `{` is one frame, each statement another.
                let inner = if body == id {
                    match *f.kind(id) {
                        ExprKind::Block { bindings, result } => f
                            .ids(bindings)
                            .chunks_exact(2)
                            .map(|p| height.get(p[1].index()).copied().unwrap_or(1))
                            .max()
                            .unwrap_or(0)
                            .max(height.get(result.index()).copied().unwrap_or(1)),
                        _ => 1,
                    }
                } else {
                    body_height(f, body, &height)
                };
                h = h.max(inner.saturating_add(2));
            }
        }
        height[i] = h;
    }
    height
}

/// The subexpressions of the statement value `root` to bind to variables first so that every
/// printed expression uses at most `budget` parser levels, in evaluation order (operands
/// before users). A hoisted node prints as a variable (one level) in its users.
fn cut_points(f: &Function, root: NodeId, budget: u32, height: &[u32]) -> Vec<NodeId> {
    // Effective height after cuts, per node of this statement (a DAG: memoized).
    let mut eff: rustc_hash::FxHashMap<NodeId, u32> = rustc_hash::FxHashMap::default();
    let mut cuts = Vec::new();
    // Iterative post-order: (node, children pushed?).
    let mut stack = vec![(root, false)];
    while let Some((id, expanded)) = stack.pop() {
        if eff.contains_key(&id) {
            continue;
        }
        if !expanded {
            stack.push((id, true));
            operands(f, id, |c, _| {
                if c.index() < id.index() && !eff.contains_key(&c) {
                    stack.push((c, false));
                }
            });
            continue;
        }
        let mut h = 1u32;
        operands(f, id, |c, extra| {
            let ch = eff.get(&c).copied().unwrap_or(1);
            h = h.max(ch.saturating_add(extra));
        });
        // Bodies hoist inside themselves; count them as they are.
        let own = height.get(id.index()).copied().unwrap_or(1);
        if matches!(f.kind(id), ExprKind::If { .. } | ExprKind::Func { .. } | ExprKind::Block { .. }) {
            h = h.max(own.min(budget));
        }
        if id != root && h >= budget {
            cuts.push(id);
            h = 1;
        }
        eff.insert(id, h);
    }
    cuts
}

/// `(4, 4)`, `(3,)`, `()`.
fn write_shape(out: &mut String, shape: impl ExactSizeIterator<Item = u64>) {
    let n = shape.len();
    out.push('(');
    for (i, d) in shape.enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{d}");
    }
    if n == 1 {
        out.push(',');
    }
    out.push(')');
}

/// An f32 in its shortest round-trip form: `1.0`, `1e-8`, `nan`, `-inf`; a NaN other than the
/// canonical quiet one prints as its 8-digit bit pattern (`0xffc00000`), so every bit survives.
fn write_f32(out: &mut String, v: f32) {
    if v.is_nan() {
        if v.to_bits() == f32::NAN.to_bits() {
            out.push_str("nan");
        } else {
            let _ = write!(out, "0x{:08x}", v.to_bits());
        }
    } else if v.is_infinite() {
        out.push_str(if v > 0.0 { "inf" } else { "-inf" });
    } else {
        let _ = write!(out, "{v:?}");
    }
}

fn write_constant(out: &mut String, c: &Constant) {
    match c {
        Constant::Dense(t) => write_dense(out, t),
        // `Constant::raw` bounds the size, so decoding cannot fail; a raw constant prints as
        // the dense tensor it equals.
        Constant::Raw { .. } => match c.materialize() {
            Ok(t) => write_dense(out, &t),
            Err(e) => {
                let _ = write!(out, "/* {e} */");
            }
        },
        Constant::Fill { ty, fill } => {
            let name = match fill {
                Fill::Full(_) => "full",
                Fill::Uniform { .. } => "uniform",
                Fill::Normal { .. } => "normal",
            };
            out.push_str(name);
            out.push('<');
            write_shape(out, ty.shape.iter().copied());
            let _ = write!(out, ", {}>", ty.dtype);
            let _ = match *fill {
                Fill::Full(v) => write!(out, "({})", FloatLit(v)),
                Fill::Uniform { seed, low, high } => {
                    write!(out, "(seed={seed}, low={}, high={})", FloatLit(low), FloatLit(high))
                }
                Fill::Normal { seed, mean, std } => {
                    write!(out, "(seed={seed}, mean={}, std={})", FloatLit(mean), FloatLit(std))
                }
            };
        }
    }
}

fn write_dense(out: &mut String, t: &Tensor) {
    if t.shape().is_empty() {
        // Finite scalars have a short form.
        let short = match &t.0 {
            TensorData::F32(a) => a.iter().next().filter(|v| v.is_finite()).map(|v| write!(out, "{v:?}f")),
            TensorData::F16(a) => a.iter().next().filter(|v| v.is_finite()).map(|v| write!(out, "{:?}f16", v.to_f32())),
            TensorData::I64(a) => a.iter().next().map(|v| write!(out, "{v}i64")),
            TensorData::I32(a) => a.iter().next().map(|v| write!(out, "{v}i32")),
            TensorData::Bool(a) => a.iter().next().map(|v| write!(out, "{v}")),
            TensorData::F64(a) => a.iter().next().filter(|v| v.is_finite()).map(|v| write!(out, "{v:?}f64")),
            TensorData::I8(a) => a.iter().next().map(|v| write!(out, "{v}i8")),
            TensorData::I16(a) => a.iter().next().map(|v| write!(out, "{v}i16")),
            TensorData::U8(a) => a.iter().next().map(|v| write!(out, "{v}u8")),
            TensorData::U16(a) => a.iter().next().map(|v| write!(out, "{v}u16")),
            TensorData::U32(a) => a.iter().next().map(|v| write!(out, "{v}u32")),
            TensorData::U64(a) => a.iter().next().map(|v| write!(out, "{v}u64")),
        };
        if short.is_some() {
            return;
        }
    }
    write_dense_long(out, t);
}

/// `tensor<(2, 2), f32>[1.0, 2.0, 3.0, 4.0]`.
fn write_dense_long(out: &mut String, t: &Tensor) {
    out.push_str("tensor<");
    write_shape(out, t.shape().iter().map(|&d| d as u64));
    let _ = write!(out, ", {}>[", t.dtype());
    fn list<T>(out: &mut String, items: impl Iterator<Item = T>, mut each: impl FnMut(&mut String, T)) {
        for (i, x) in items.enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            each(out, x);
        }
    }
    match &t.0 {
        TensorData::F32(a) => list(out, a.iter(), |o, &v| write_f32(o, v)),
        TensorData::F16(a) => list(out, a.iter(), |o, v| {
            if v.is_nan() && v.to_bits() != f16::NAN.to_bits() {
                let _ = write!(o, "0x{:04x}", v.to_bits());
            } else {
                write_f32(o, v.to_f32())
            }
        }),
        TensorData::I64(a) => list(out, a.iter(), |o, v| {
            let _ = write!(o, "{v}");
        }),
        TensorData::I32(a) => list(out, a.iter(), |o, v| {
            let _ = write!(o, "{v}");
        }),
        TensorData::Bool(a) => list(out, a.iter(), |o, v| {
            let _ = write!(o, "{v}");
        }),
        TensorData::F64(a) => list(out, a.iter(), |o, &v| {
            if v.is_nan() && v.to_bits() != f64::NAN.to_bits() {
                let _ = write!(o, "0x{:016x}", v.to_bits());
            } else if v.is_nan() {
                o.push_str("nan");
            } else if v.is_infinite() {
                o.push_str(if v > 0.0 { "inf" } else { "-inf" });
            } else {
                let _ = write!(o, "{v:?}");
            }
        }),
        TensorData::I8(a) => list(out, a.iter(), |o, v| {
            let _ = write!(o, "{v}");
        }),
        TensorData::I16(a) => list(out, a.iter(), |o, v| {
            let _ = write!(o, "{v}");
        }),
        TensorData::U8(a) => list(out, a.iter(), |o, v| {
            let _ = write!(o, "{v}");
        }),
        TensorData::U16(a) => list(out, a.iter(), |o, v| {
            let _ = write!(o, "{v}");
        }),
        TensorData::U32(a) => list(out, a.iter(), |o, v| {
            let _ = write!(o, "{v}");
        }),
        TensorData::U64(a) => list(out, a.iter(), |o, v| {
            let _ = write!(o, "{v}");
        }),
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use expect_test::{expect, Expect};

    use super::*;
    use crate::ir::{parse_module, structural_eq, DType, FunctionBuilder, Type};

    /// Parses `src`, checks the canonical print and that it parses back to the same text.
    fn check(src: &str, expected: Expect) {
        let m = parse_module(src).unwrap_or_else(|e| panic!("{e}"));
        let text = print_module(&m);
        expected.assert_eq(&text);
        let again = parse_module(&text).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(print_module(&again), text);
    }

    #[test]
    fn prints_functions_attrs_and_signatures() {
        check(
            "#[Level=2, SkipOptimization, Compiler=\"c\\n\", Axes=[1, -2], D=float16, F=1e-9]\
             def @main(%x: Tensor[(4, 4), f32], %u) -> (Tensor[(), f32], fn(Tensor[(3,), i64]) -> Tensor[(), bool]) { %x }\
             def @g() { () }",
            expect![[r#"
                #[Axes=[1, -2], Compiler="c\n", D=f16, F=1e-9, Level=2, SkipOptimization]
                def @main(%x: Tensor[(4, 4), f32], %u) -> (Tensor[(), f32], fn(Tensor[(3,), i64]) -> Tensor[(), bool]) {
                  %x
                }

                def @g() {
                  ()
                }
            "#]],
        );
    }

    /// The dtypes beyond f32, f16, i64, i32 and bool (f64, i8, i16, u8, u16, u32, u64) print
    /// with their own scalar suffix and element text and read back to the same bits, the
    /// extremes of each integer range and an f64 NaN payload included.
    #[test]
    fn wide_and_narrow_dtypes_round_trip() {
        check(
            "def @main(%x: Tensor[(2,), u8]) { \
               let %a = (1.5f64, -128i8, 32767i16, 255u8, 65535u16, 4294967295u32, 18446744073709551615u64); \
               let %b = tensor<(3,), f64>[0.1, 0x7ff8000000000001, -inf]; \
               let %c = tensor<(2,), i8>[-128, 127]; \
               let %d = full<(2,), u16>(65535.0); \
               %x }",
            expect![[r#"
                def @main(%x: Tensor[(2,), u8]) {
                  let %a = (1.5f64, -128i8, 32767i16, 255u8, 65535u16, 4294967295u32, 18446744073709551615u64);
                  let %b = tensor<(3,), f64>[0.1, 0x7ff8000000000001, -inf];
                  let %c = tensor<(2,), i8>[-128, 127];
                  let %d = full<(2,), u16>(65535.0);
                  %x
                }
            "#]],
        );
        for bad in ["256u8", "-1u16", "128i8", "1.5u32", "18446744073709551616u64"] {
            let src = format!("def @main() {{ {bad} }}");
            let err = parse_module(&src).expect_err(bad).to_string();
            assert!(err.contains("out of range") || err.contains("invalid number literal"), "{bad}: {err}");
        }
    }

    /// Regression (#20 item 5): a folded constant forwarded into 200 uses printed its 1024
    /// values at each. A constant of more than 16 elements that the text shows more than once
    /// prints once, in the resources section; one shown once, or a small one, stays inline;
    /// the text reads back equal and prints the same bytes.
    #[test]
    fn repeated_mid_size_constants_print_once() {
        let c17 = format!("tensor<(17,), f32>[{}]", vec!["1.5"; 17].join(", "));
        let c16 = format!("tensor<(16,), f32>[{}]", vec!["2.5"; 16].join(", "));
        let src = format!(
            "def @f(%x: Tensor[(17,), f32], %y: Tensor[(16,), f32]) {{ (add(%x, {c17}), multiply(%x, {c17}), add(%y, {c16}), add(%y, {c16})) }}\n\
             def @g(%x: Tensor[(17,), f32]) {{ subtract(%x, {c17}) }}\n\
             def @h(%x: Tensor[(18,), f32]) {{ add(%x, tensor<(18,), f32>[{}]) }}",
            vec!["3.0"; 18].join(", ")
        );
        let m = parse_module(&src).unwrap_or_else(|e| panic!("{e}"));
        let text = print_module(&m);
        assert_eq!(text.matches("resource<(17,), f32>(r0)").count(), 3, "{text}");
        assert_eq!(text.matches(&c16).count(), 2, "{text}");
        assert!(text.contains("tensor<(18,), f32>[3.0"), "{text}");
        assert_eq!(text.matches(" = \"").count(), 1, "one resource entry: {text}");
        let back = parse_module(&text).unwrap_or_else(|e| panic!("{e}"));
        assert!(crate::ir::module_structural_eq(&m, &back));
        assert_eq!(print_module(&back), text);
        // Printed alone, @g shows the constant once: inline.
        assert!(print_function("g", &m.entries()[1].1).contains("[1.5, "));
    }

    /// `if` branches, closure bodies and blocks used as expressions each count one level; a
    /// branch's own block does not.
    #[test]
    fn body_nesting_counts_bodies_along_the_deepest_path() {
        let cases = [
            ("def @f(%x: Tensor[(4,), f32]) { negative(%x) }", 0),
            ("def @f(%x: Tensor[(4,), f32]) { let %a = negative(%x); %a }", 0),
            ("def @f(%c: bool) { if (%c) { 1.0f } else { 2.0f } }", 1),
            ("def @f(%c: bool) { if (%c) { let %a = if (%c) { 1.0f } else { 2.0f }; %a } else { 2.0f } }", 2),
            ("def @f(%c: bool) { let %g = fn (%y: bool) { if (%y) { 1.0f } else { 2.0f } }; %g(%c) }", 2),
            ("def @f(%c: bool) { add({ let %a = 1.0f; %a }, 2.0f) }", 1),
            ("def @f(%c: bool) { (if (%c) { 1.0f } else { 2.0f }, if (%c) { 1.0f } else { if (%c) { 1.0f } else { 3.0f } }) }", 2),
        ];
        for (src, want) in cases {
            let src = src.replace("bool", "Tensor[(), bool]");
            let m = parse_module(&src).unwrap_or_else(|e| panic!("{src}: {e}"));
            assert_eq!(body_nesting(&m.entries()[0].1), want, "{src}");
        }
    }

    /// The limit passes keep to is one the printer and parser honour with room to spare: a
    /// function nested exactly [`MAX_BODY_NESTING`] deep, whose innermost body holds a closure
    /// with a tuple-typed binding and a deep expression, prints text that parses back equal.
    #[test]
    fn functions_at_the_body_nesting_limit_print_and_parse_back() {
        let k = MAX_BODY_NESTING as usize;
        let deep_expr = (0..12).fold("%y".to_string(), |e, _| format!("negative({e})"));
        let mut body = format!(
            "let %g = fn (%y: Tensor[(4,), f32]) -> Tensor[(4,), f32] {{ \
             let %t: ((Tensor[(4,), f32], Tensor[(4,), f32]), Tensor[(4,), f32]) = ((negative(%y), relu(%y)), exp(%y)); \
             add(%t.0.0, {deep_expr}) }}; %g(%x)"
        );
        for _ in 0..k - 1 {
            body = format!("if (%c) {{ {body} }} else {{ %x }}");
        }
        let src = format!("def @main(%x: Tensor[(4,), f32], %c: Tensor[(), bool]) -> Tensor[(4,), f32] {{ {body} }}");
        let m = parse_module(&src).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(body_nesting(&m.entries()[0].1), MAX_BODY_NESTING);
        let text = print_module(&m);
        let back = parse_module(&text).unwrap_or_else(|e| panic!("{e}"));
        assert!(crate::ir::module_structural_eq(&m, &back));
    }

    /// Regression (cargo-fuzz `onnx_import`): an ONNX initializer holding a NaN with a payload
    /// or a sign printed as `nan` and parsed back as another NaN. Every NaN bit now survives.
    #[test]
    fn nans_other_than_the_canonical_one_print_as_bit_patterns() {
        let src = "#[F=0x7ff8000000000001]
def @c() {
  (tensor<(3,), f32>[nan, 0xffc00000, 0x7f800001], tensor<(2,), f16>[nan, 0xfe01], tensor<(), f32>[0x7fc00002], full<(2,), f32>(0xfff8000000000000), clip(tensor<(1,), f32>[1.0], a_max=0x7ff0000000000001, a_min=-1.0))
}
";
        let m = parse_module(src).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(print_module(&m), src);
        let back = parse_module(&print_module(&m)).unwrap_or_else(|e| panic!("{e}"));
        assert!(crate::ir::module_structural_eq(&m, &back));
        for (bad, why) in [
            ("tensor<(1,), f32>[0x7fc0]", "f32 bit pattern is `0x` and 8 hex digits"),
            ("tensor<(1,), f16>[0x7fc00000]", "f16 bit pattern is `0x` and 4 hex digits"),
            ("tensor<(1,), i64>[0x10]", "i64 values have no bit-pattern form"),
            ("tensor<(1,), f32>[0x7fc0000g]", "8 hex digits"),
            ("full<(1,), f32>(0x7fc00000)", "an f64 bit pattern is `0x` and 16 hex digits"),
        ] {
            let e = parse_module(&format!("def @c() {{ {bad} }}")).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn prints_constants_as_their_variant() {
        check(
            "def @c() { (2.0, 2.0f32, 1.5f16, 3, -3i32, true, 1e30f, tensor<(), f16>[nan], tensor<(1,), f32>[2.5],
              tensor<(2, 2), i64>[1, -2, 3, 4], tensor<(0,), bool>[], tensor<(2,), bool>[true, false],
              full<(64, 3), f32>(0), uniform<(1073741824, 2), f32>(seed=1, low=-0.1, high=0.1),
              normal<(128,), i32>(seed=2, mean=0.0, std=inf)) }",
            expect![[r#"
                def @c() {
                  (2.0f, 2.0f, 1.5f16, 3i64, -3i32, true, 1e30f, tensor<(), f16>[nan], tensor<(1,), f32>[2.5], tensor<(2, 2), i64>[1, -2, 3, 4], tensor<(0,), bool>[], tensor<(2,), bool>[true, false], full<(64, 3), f32>(0.0), uniform<(1073741824, 2), f32>(seed=1, low=-0.1, high=0.1), normal<(128,), i32>(seed=2, mean=0.0, std=inf))
                }
            "#]],
        );
    }

    #[test]
    fn prints_nested_blocks_ifs_closures_and_projections() {
        check(
            "def @f(%c: Tensor[(), bool], %t: (Tensor[(), f32], Tensor[(), f32])) {
               let %a = { let %b = relu(%t.0); add(%b, %t.1) };
               let %g = #[Primitive] fn (%y) -> Tensor[(), f32] { let %z = relu(%y); %z };
               let %h = if (%c) { %g(%a) } else { if (%c) { let %q = (%a,); %q.0 } else { @other(%a, %g) } };
               { let %r = %h; (%r, %t).1.0 }
             }",
            expect![[r#"
                def @f(%c: Tensor[(), bool], %t: (Tensor[(), f32], Tensor[(), f32])) {
                  let %a = {
                    let %b = relu(%t.0);
                    add(%b, %t.1)
                  };
                  let %g = #[Primitive] fn (%y) -> Tensor[(), f32] {
                    let %z = relu(%y);
                    %z
                  };
                  let %h = if (%c) {
                    %g(%a)
                  } else {
                    if (%c) {
                      let %q = (%a,);
                      %q.0
                    } else {
                      @other(%a, %g)
                    }
                  };
                  {
                    let %r = %h;
                    (%r, %t).1.0
                  }
                }
            "#]],
        );
    }

    #[test]
    fn makes_names_unique_and_valid_and_skips_dead_nodes() {
        let relu = crate::op::lookup("relu").expect("relu");
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(Type::scalar(DType::F32)));
        let _dead = b.call(relu, &[x], Attrs::new());
        let v1 = b.call(relu, &[x], Attrs::new());
        let x2 = b.var("x", None);
        let v2 = b.call(relu, &[x2], Attrs::new());
        let t = b.var("t.1", None);
        let v3 = b.tuple(&[t]);
        let e = b.var("", None);
        let body = b.block(&[(x2, v1), (t, v2), (e, v3)], e);
        let f = b.finish(&[x], body, None, Attrs::new());
        let text = print_function("f", &f);
        expect![[r#"
            def @f(%x: Tensor[(), f32]) {
              let %x_1 = relu(%x);
              let %t_1 = relu(%x_1);
              let %v = (%t_1,);
              %v
            }
        "#]]
        .assert_eq(&text);
        let m = parse_module(&text).expect("parses");
        assert!(structural_eq(&f, m.get("f").expect("f")));
        assert_eq!(m.to_string(), text);
    }
}
