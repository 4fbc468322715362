//! Well-formedness of a PrimFunc ([`verify_prim_func`]).
//!
//! The builder already guarantees types and post-order for what it builds; the verifier
//! checks what a builder cannot see locally, for any PrimFunc however it was made:
//! - ids and ranges are in their arenas, and operands / children precede their users;
//! - expressions and statements are trees (each used once);
//! - scoping: every variable and buffer is used inside the statement that defines it (a
//!   parameter, `for`, `let`, `alloc`, `decl`, or a `let` expression), and defined once;
//! - loops: integer variables, extents that are not statically negative;
//! - nesting: at most [`MAX_STMT_DEPTH`] levels of statements and expressions, so that every
//!   later walk (the interpreter's compiled closures included) has a bounded depth;
//! - static facts: a constant division or modulo by zero in any expression, and a buffer
//!   index that lies outside its dimension for every value its loop variables can take
//!   (interval arithmetic over static loop ranges; a possibly-in-bounds index is not an
//!   error — the interpreter checks each access);
//! - `decl` views that reach past the storage they view.
//!
//! Every walk is a loop over the arenas or an explicit stack: no recursion on input depth.

use std::fmt;

use super::ir::{BinOp, BufId, PExprId, PExprKind, Param, PrimFunc, StmtId, StmtKind};
use crate::ir::Span;

/// The deepest nesting of statements, and separately of expressions, a PrimFunc may have.
pub const MAX_STMT_DEPTH: usize = 1024;

/// A well-formedness error: the function, the statement (if one is to blame) and its span.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct TirVerifyError {
    /// The function's global name.
    pub func: String,
    /// The statement at fault, if any.
    pub stmt: Option<StmtId>,
    /// Its source span, if the function was parsed.
    pub span: Option<Span>,
    /// What is wrong.
    pub msg: String,
}

impl fmt::Display for TirVerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.stmt {
            Some(s) => write!(f, "@{}: statement {s}: {}", self.func, self.msg),
            None => write!(f, "@{}: {}", self.func, self.msg),
        }
    }
}

/// A closed integer interval, or unknown.
#[derive(Clone, Copy, Debug)]
struct Interval {
    lo: i128,
    hi: i128,
}

/// Checks `func` (named `name` in errors); returns every error found, in arena order.
pub fn verify_prim_func(name: &str, func: &PrimFunc) -> Vec<TirVerifyError> {
    let mut v = Verifier { name, f: func, errors: Vec::new() };
    if v.structure() {
        v.scopes_and_bounds();
    }
    v.errors
}

struct Verifier<'a> {
    name: &'a str,
    f: &'a PrimFunc,
    errors: Vec<TirVerifyError>,
}

impl Verifier<'_> {
    fn err(&mut self, stmt: Option<StmtId>, msg: String) {
        if self.errors.len() < 100 {
            let span = stmt.and_then(|s| self.f.stmt_span(s)).filter(|s| s.end > 0);
            self.errors.push(TirVerifyError { func: self.name.to_string(), stmt, span, msg });
        }
    }

    /// Ids in range, post-order, tree shape, nesting depth. Returns whether the later checks
    /// can walk the function safely.
    fn structure(&mut self) -> bool {
        let f = self.f;
        let (ne, ns) = (f.exprs.len(), f.stmts.len());
        let before = self.errors.len();
        let mut uses_e = vec![0u32; ne];
        let mut depth_e = vec![0usize; ne];
        let mut ops = Vec::new();
        for i in 0..ne {
            ops.clear();
            match f.exprs[i].kind {
                PExprKind::Load(b, _) if b.index() >= f.bufs.len() => {
                    self.err(None, format!("expression e{i} loads from buffer {b}, which does not exist"));
                    continue;
                }
                PExprKind::Load(_, r) | PExprKind::Call(_, r) if r.range().end > f.operands.len() => {
                    self.err(None, format!("expression e{i} has operands out of range"));
                    continue;
                }
                PExprKind::Var(v) | PExprKind::Let(v, _, _) if v.index() >= f.vars.len() => {
                    self.err(None, format!("expression e{i} uses variable {v}, which does not exist"));
                }
                _ => {}
            }
            f.expr_operands(PExprId(i as u32), &mut ops);
            let mut d = 0;
            for &o in &ops {
                if o.index() >= i {
                    self.err(None, format!("expression e{i} uses e{}, which does not precede it", o.0));
                    continue;
                }
                uses_e[o.index()] += 1;
                d = d.max(depth_e[o.index()]);
            }
            depth_e[i] = d + 1;
            if depth_e[i] == MAX_STMT_DEPTH + 1 {
                self.err(None, format!("expression e{i} is nested deeper than {MAX_STMT_DEPTH} levels"));
            }
        }
        let mut uses_s = vec![0u32; ns];
        let mut depth_s = vec![0usize; ns];
        for i in 0..ns {
            let s = StmtId(i as u32);
            if let StmtKind::Seq(r) = f.stmts[i].kind {
                if r.range().end > f.stmt_lists.len() {
                    self.err(Some(s), "sequence out of range".into());
                    continue;
                }
            }
            match f.stmts[i].kind {
                StmtKind::Store { buf, indices, .. } => {
                    if buf.index() >= f.bufs.len() {
                        self.err(Some(s), format!("store to buffer {buf}, which does not exist"));
                    }
                    if indices.range().end > f.operands.len() {
                        self.err(Some(s), "indices out of range".into());
                        continue;
                    }
                }
                StmtKind::Alloc { buf, .. } | StmtKind::Decl { buf, .. } if buf.index() >= f.bufs.len() => {
                    self.err(Some(s), format!("buffer {buf} does not exist"));
                }
                StmtKind::Decl { data, .. } if data.index() >= f.bufs.len() => {
                    self.err(Some(s), format!("buffer {data} does not exist"));
                }
                StmtKind::For { var, .. } | StmtKind::Let { var, .. } if var.index() >= f.vars.len() => {
                    self.err(Some(s), format!("variable {var} does not exist"));
                }
                StmtKind::Attr { key, .. } if key as usize >= f.strings.len() => {
                    self.err(Some(s), "attribute key out of range".into());
                }
                _ => {}
            }
            ops.clear();
            f.stmt_exprs(s, &mut ops);
            for &o in &ops {
                if o.index() >= ne {
                    self.err(Some(s), format!("uses expression e{}, which does not exist", o.0));
                    continue;
                }
                uses_e[o.index()] += 1;
            }
            let mut d = 0;
            for &c in f.children(s).as_slice() {
                if c.index() >= i {
                    self.err(Some(s), format!("child {c} does not precede its parent"));
                    continue;
                }
                uses_s[c.index()] += 1;
                d = d.max(depth_s[c.index()]);
            }
            depth_s[i] = d + 1;
            if depth_s[i] == MAX_STMT_DEPTH + 1 {
                self.err(Some(s), format!("statements nested deeper than {MAX_STMT_DEPTH} levels"));
            }
        }
        if f.body.index() >= ns {
            self.err(None, format!("the body {} does not exist", f.body));
            return false;
        }
        uses_s[f.body.index()] += 1;
        if let Some(i) = uses_e.iter().position(|&u| u > 1) {
            self.err(None, format!("expression e{i} is used {} times (expressions are trees)", uses_e[i]));
        }
        if let Some(i) = uses_s.iter().position(|&u| u > 1) {
            self.err(Some(StmtId(i as u32)), format!("statement is used {} times (statements are trees)", uses_s[i]));
        }
        for p in &f.params {
            match *p {
                Param::Var(v) if v.index() >= f.vars.len() => self.err(None, format!("parameter {v} does not exist")),
                Param::Buf(b) if b.index() >= f.bufs.len() => self.err(None, format!("parameter {b} does not exist")),
                _ => {}
            }
        }
        self.errors.len() == before
    }

    /// Scoping, definitions, loops and static bounds, in one pre-order walk with an explicit
    /// stack.
    fn scopes_and_bounds(&mut self) {
        let f = self.f;
        let mut var_defined = vec![false; f.vars.len()];
        let mut buf_defined = vec![false; f.bufs.len()];
        let mut var_in = vec![false; f.vars.len()];
        let mut buf_in = vec![false; f.bufs.len()];
        // The static range of each in-scope loop variable (or an immediate `let`).
        let mut range: Vec<Option<Interval>> = vec![None; f.vars.len()];
        for p in &f.params {
            match *p {
                Param::Var(v) => {
                    if std::mem::replace(&mut var_defined[v.index()], true) {
                        self.err(None, format!("parameter `%{}` is listed twice", f.vars[v.index()].name));
                    }
                    var_in[v.index()] = true;
                }
                Param::Buf(b) => {
                    if std::mem::replace(&mut buf_defined[b.index()], true) {
                        self.err(None, format!("parameter `%{}` is listed twice", f.bufs[b.index()].name));
                    }
                    buf_in[b.index()] = true;
                }
            }
        }
        enum W {
            Enter(StmtId),
            ExitVar(usize),
            ExitBuf(usize),
        }
        let mut work = vec![W::Enter(f.body)];
        let mut exprs = Vec::new();
        while let Some(w) = work.pop() {
            let s = match w {
                W::ExitVar(v) => {
                    var_in[v] = false;
                    range[v] = None;
                    continue;
                }
                W::ExitBuf(b) => {
                    buf_in[b] = false;
                    continue;
                }
                W::Enter(s) => s,
            };
            exprs.clear();
            f.stmt_exprs(s, &mut exprs);
            for &e in &exprs {
                self.check_expr(s, e, &mut var_in, &mut var_defined, &buf_in, &range);
            }
            let mut define_var = |me: &mut Self, v: usize| {
                if std::mem::replace(&mut var_defined[v], true) {
                    me.err(Some(s), format!("variable `%{}` is defined twice", f.vars[v].name));
                }
                var_in[v] = true;
            };
            match f.stmts[s.index()].kind {
                StmtKind::For { var, min, extent, body, .. } => {
                    if !f.vars[var.index()].ty.dtype.is_integer() {
                        self.err(Some(s), format!("loop variable `%{}` is not an integer", f.vars[var.index()].name));
                    }
                    let (lo, ext) = (const_int(f, min), const_int(f, extent));
                    if let Some(e) = ext.filter(|&e| e < 0) {
                        self.err(Some(s), format!("loop `%{}` has a negative extent {e}", f.vars[var.index()].name));
                    }
                    define_var(self, var.index());
                    range[var.index()] = match (lo, ext) {
                        (Some(lo), Some(ext)) if ext > 0 => {
                            Some(Interval { lo: lo as i128, hi: lo as i128 + ext as i128 - 1 })
                        }
                        _ => None,
                    };
                    work.push(W::ExitVar(var.index()));
                    work.push(W::Enter(body));
                }
                StmtKind::Let { var, value, body } => {
                    define_var(self, var.index());
                    range[var.index()] = const_int(f, value).map(|c| Interval { lo: c as i128, hi: c as i128 });
                    work.push(W::ExitVar(var.index()));
                    work.push(W::Enter(body));
                }
                StmtKind::Alloc { buf, body } | StmtKind::Decl { buf, body, .. } => {
                    if let StmtKind::Decl { data, .. } = f.stmts[s.index()].kind {
                        if !buf_in[data.index()] {
                            self.err(
                                Some(s),
                                format!("buffer `%{}` is used outside its scope", f.bufs[data.index()].name),
                            );
                        }
                        let (view, whole) = (&f.bufs[buf.index()], &f.bufs[data.index()]);
                        if let (Some(a), Some(b)) = (view.storage_elements(), whole.storage_elements()) {
                            if a > b {
                                self.err(
                                    Some(s),
                                    format!(
                                        "`decl %{}` reaches {a} elements of `%{}`, which has {b}",
                                        view.name, whole.name
                                    ),
                                );
                            }
                        }
                    }
                    if std::mem::replace(&mut buf_defined[buf.index()], true) {
                        self.err(Some(s), format!("buffer `%{}` is defined twice", f.bufs[buf.index()].name));
                    }
                    buf_in[buf.index()] = true;
                    work.push(W::ExitBuf(buf.index()));
                    work.push(W::Enter(body));
                }
                StmtKind::Store { buf, indices, .. } => {
                    if !buf_in[buf.index()] {
                        self.err(Some(s), format!("buffer `%{}` is used outside its scope", f.bufs[buf.index()].name));
                    }
                    self.check_indices(s, buf, f.operands(indices), &range);
                }
                _ => {
                    for &c in f.children(s).as_slice().iter().rev() {
                        work.push(W::Enter(c));
                    }
                }
            }
        }
    }

    /// Checks the expression tree under `e`: variables and buffers in scope, `let`
    /// expressions' definitions, static divisions by zero and static out-of-bounds loads.
    fn check_expr(
        &mut self,
        s: StmtId,
        e: PExprId,
        var_in: &mut [bool],
        var_defined: &mut [bool],
        buf_in: &[bool],
        range: &[Option<Interval>],
    ) {
        let f = self.f;
        // Pre-order with exits for `let` expressions (whose variable is in scope in the body).
        enum W {
            Enter(PExprId),
            Bind(usize),
            Exit(usize),
        }
        let mut work = vec![W::Enter(e)];
        let mut ops = Vec::new();
        while let Some(w) = work.pop() {
            let e = match w {
                W::Exit(v) => {
                    var_in[v] = false;
                    continue;
                }
                W::Bind(v) => {
                    var_in[v] = true;
                    continue;
                }
                W::Enter(e) => e,
            };
            match f.exprs[e.index()].kind {
                PExprKind::Var(v) if !var_in[v.index()] => {
                    self.err(Some(s), format!("variable `%{}` is used outside its scope", f.vars[v.index()].name));
                }
                PExprKind::Load(b, r) => {
                    if !buf_in[b.index()] {
                        self.err(Some(s), format!("buffer `%{}` is used outside its scope", f.bufs[b.index()].name));
                    }
                    self.check_indices(s, b, f.operands(r), range);
                }
                PExprKind::Bin(op @ (BinOp::Div | BinOp::Mod | BinOp::FloorDiv | BinOp::FloorMod), _, b)
                    if f.exprs[e.index()].ty.dtype.is_integer() && const_int(f, b) == Some(0) =>
                {
                    self.err(Some(s), format!("`{}` by zero", op.name()));
                }
                PExprKind::Let(v, value, body) => {
                    // The value is outside the variable's scope; the body inside.
                    if std::mem::replace(&mut var_defined[v.index()], true) {
                        self.err(Some(s), format!("variable `%{}` is defined twice", f.vars[v.index()].name));
                    }
                    work.push(W::Exit(v.index()));
                    work.push(W::Enter(body));
                    work.push(W::Bind(v.index()));
                    work.push(W::Enter(value));
                    continue;
                }
                _ => {}
            }
            ops.clear();
            f.expr_operands(e, &mut ops);
            for &o in ops.iter().rev() {
                work.push(W::Enter(o));
            }
        }
    }

    /// Reports an index that is outside its dimension for every value it can take.
    fn check_indices(&mut self, s: StmtId, buf: BufId, indices: &[PExprId], range: &[Option<Interval>]) {
        let f = self.f;
        let b = &f.bufs[buf.index()];
        for (k, (&ix, &dim)) in indices.iter().zip(b.shape.iter()).enumerate() {
            let Some(iv) = interval(f, ix, range) else { continue };
            if iv.hi < 0 || iv.lo >= dim as i128 {
                let at = if iv.lo == iv.hi { format!("{}", iv.lo) } else { format!("{}..={}", iv.lo, iv.hi) };
                self.err(
                    Some(s),
                    format!(
                        "index {k} of buffer `%{}` is {at}, outside its dimension of {dim} (shape {:?})",
                        b.name, b.shape
                    ),
                );
            }
        }
    }
}

/// The value of a scalar integer immediate.
fn const_int(f: &PrimFunc, e: PExprId) -> Option<i64> {
    match f.exprs.get(e.index())?.kind {
        PExprKind::Int(v) if f.exprs[e.index()].ty.dtype.is_integer() => Some(v),
        _ => None,
    }
}

/// An interval holding every value of the integer expression `e` given the static ranges of
/// the variables in scope, or `None` if unknown. Bottom-up over the expression's subtree with
/// an explicit stack.
fn interval(f: &PrimFunc, e: PExprId, range: &[Option<Interval>]) -> Option<Interval> {
    // Post-order: collect the subtree, then evaluate in increasing id order (operands first).
    let mut nodes = Vec::new();
    let mut stack = vec![e];
    let mut ops = Vec::new();
    while let Some(x) = stack.pop() {
        nodes.push(x);
        if nodes.len() > 4096 {
            return None;
        }
        ops.clear();
        f.expr_operands(x, &mut ops);
        stack.extend_from_slice(&ops);
    }
    nodes.sort_unstable();
    let mut val: rustc_hash::FxHashMap<PExprId, Interval> = rustc_hash::FxHashMap::default();
    for &x in &nodes {
        let node = &f.exprs[x.index()];
        if !node.ty.dtype.is_integer() || !node.ty.is_scalar() {
            continue;
        }
        let get = |id: PExprId| val.get(&id).copied();
        let iv = match node.kind {
            PExprKind::Int(v) => Some(Interval { lo: v as i128, hi: v as i128 }),
            PExprKind::Var(v) => range.get(v.index()).copied().flatten(),
            PExprKind::Bin(op, a, b) => match (get(a), get(b)) {
                (Some(a), Some(b)) => bin_interval(op, a, b),
                _ => None,
            },
            _ => None,
        };
        if let Some(iv) = iv {
            val.insert(x, iv);
        }
    }
    val.get(&e).copied()
}

fn bin_interval(op: BinOp, a: Interval, b: Interval) -> Option<Interval> {
    let corners = |g: fn(i128, i128) -> i128| {
        let c = [g(a.lo, b.lo), g(a.lo, b.hi), g(a.hi, b.lo), g(a.hi, b.hi)];
        Interval { lo: *c.iter().min().unwrap_or(&0), hi: *c.iter().max().unwrap_or(&0) }
    };
    // Keep far from overflow: beyond 2^62 nothing useful is known.
    const LIMIT: i128 = 1 << 62;
    let iv = match op {
        BinOp::Add => Interval { lo: a.lo + b.lo, hi: a.hi + b.hi },
        BinOp::Sub => Interval { lo: a.lo - b.hi, hi: a.hi - b.lo },
        BinOp::Mul => corners(|x, y| x * y),
        BinOp::Min => Interval { lo: a.lo.min(b.lo), hi: a.hi.min(b.hi) },
        BinOp::Max => Interval { lo: a.lo.max(b.lo), hi: a.hi.max(b.hi) },
        BinOp::FloorDiv if b.lo > 0 => corners(|x, y| x.div_euclid(y)),
        BinOp::FloorMod if b.lo > 0 => Interval { lo: 0, hi: b.hi - 1 },
        _ => return None,
    };
    (iv.lo.abs() < LIMIT && iv.hi.abs() < LIMIT).then_some(iv)
}
