//! Canonical text of a PrimFunc (`prim @name(…) { … }`, grammar in `docs/tir.md`).
//!
//! The walk uses an explicit work stack, so no input makes it recurse. Variables and buffers
//! share the `%` namespace and print with names unique in the function (a second `%i` prints
//! as `%i_1`), so the text parses back to the same function.

use std::fmt::Write;

use rustc_hash::FxHashSet;

use super::ir::{BufId, Buffer, PExprId, PExprKind, PType, Param, PrimFunc, StmtId, StmtKind, VarId};
use crate::ir::printer::write_attrs;
use crate::ir::{text_name, DType, FloatLit};

/// The canonical text of `func` as the global `@name`.
pub fn print_prim_func(name: &str, func: &PrimFunc) -> String {
    let mut out = String::with_capacity(func.size() * 16 + 64);
    write_prim_func(&mut out, name, func);
    out
}

/// Appends the canonical text of `func` as the global `@name` to `out`.
pub fn write_prim_func(out: &mut String, name: &str, func: &PrimFunc) {
    let mut p = Printer { f: func, out, var_names: Vec::new(), buf_names: Vec::new(), indent: 0 };
    p.assign_names();
    p.function(name);
}

struct Printer<'a> {
    f: &'a PrimFunc,
    out: &'a mut String,
    var_names: Vec<String>,
    buf_names: Vec<String>,
    indent: usize,
}

/// One step of the statement walk.
enum Work {
    /// The statements of `StmtId` viewed as a list (its elements if it is a sequence), from
    /// position `usize` on.
    List(StmtId, usize),
    /// The end of a braced body.
    Close,
    /// `} else {` and the else branch.
    Else(StmtId),
}

/// One step of the expression walk.
enum EWork {
    Expr(PExprId),
    Str(&'static str),
    /// `, <lanes>)`: the tail of a ramp or broadcast.
    Lanes(u16),
}

impl Printer<'_> {
    /// Unique names: variables, then buffers, in id order (the parser numbers them in text
    /// order, so printed text keeps its names).
    fn assign_names(&mut self) {
        let mut used: FxHashSet<String> = FxHashSet::default();
        let mut unique = |name: &str| -> String {
            let base = text_name(name).into_owned();
            if used.insert(base.clone()) {
                return base;
            }
            let mut k = 1;
            loop {
                let cand = format!("{base}_{k}");
                if used.insert(cand.clone()) {
                    return cand;
                }
                k += 1;
            }
        };
        // Parameters first, in order, then everything else in id order.
        let mut var_names = vec![String::new(); self.f.vars.len()];
        let mut buf_names = vec![String::new(); self.f.bufs.len()];
        let mut var_done = vec![false; self.f.vars.len()];
        let mut buf_done = vec![false; self.f.bufs.len()];
        for p in &self.f.params {
            match *p {
                Param::Var(v) if !var_done[v.index()] => {
                    var_names[v.index()] = unique(&self.f.vars[v.index()].name);
                    var_done[v.index()] = true;
                }
                Param::Buf(b) if !buf_done[b.index()] => {
                    buf_names[b.index()] = unique(&self.f.bufs[b.index()].name);
                    buf_done[b.index()] = true;
                }
                _ => {}
            }
        }
        // Definitions in statement order (the order the parser meets them in).
        let mut defs: Vec<(StmtId, Option<VarId>, Option<BufId>)> = Vec::new();
        for (i, s) in self.f.stmts.iter().enumerate() {
            match s.kind {
                StmtKind::For { var, .. } | StmtKind::Let { var, .. } => defs.push((StmtId(i as u32), Some(var), None)),
                StmtKind::Alloc { buf, .. } | StmtKind::Decl { buf, .. } => {
                    defs.push((StmtId(i as u32), None, Some(buf)))
                }
                _ => {}
            }
        }
        // Text order is pre-order; the arena is post-order. Number statements in pre-order.
        let order = self.preorder();
        defs.sort_by_key(|(s, _, _)| order[s.index()]);
        for (_, v, b) in defs {
            if let Some(v) = v {
                if !var_done[v.index()] {
                    var_names[v.index()] = unique(&self.f.vars[v.index()].name);
                    var_done[v.index()] = true;
                }
            }
            if let Some(b) = b {
                if !buf_done[b.index()] {
                    buf_names[b.index()] = unique(&self.f.bufs[b.index()].name);
                    buf_done[b.index()] = true;
                }
            }
        }
        // `let` expressions bind variables too; then anything left (unbound names).
        for e in &self.f.exprs {
            if let PExprKind::Let(v, _, _) = e.kind {
                if !var_done[v.index()] {
                    var_names[v.index()] = unique(&self.f.vars[v.index()].name);
                    var_done[v.index()] = true;
                }
            }
        }
        for (v, done) in var_done.iter().enumerate() {
            if !done {
                var_names[v] = unique(&self.f.vars[v].name);
            }
        }
        for (b, done) in buf_done.iter().enumerate() {
            if !done {
                buf_names[b] = unique(&self.f.bufs[b].name);
            }
        }
        self.var_names = var_names;
        self.buf_names = buf_names;
    }

    /// The pre-order position of each statement reachable from the body (unreachable ones
    /// get `usize::MAX`).
    fn preorder(&self) -> Vec<usize> {
        let mut order = vec![usize::MAX; self.f.stmts.len()];
        let mut stack = vec![self.f.body];
        let mut n = 0;
        while let Some(s) = stack.pop() {
            let Some(slot) = order.get_mut(s.index()) else { continue };
            if *slot != usize::MAX {
                continue;
            }
            *slot = n;
            n += 1;
            let children = self.f.children(s);
            stack.extend(children.as_slice().iter().rev());
        }
        order
    }

    fn newline(&mut self) {
        self.out.push('\n');
        for _ in 0..self.indent.min(64) {
            self.out.push_str("  ");
        }
    }

    fn function(&mut self, name: &str) {
        if !self.f.attrs.is_empty() {
            write_attrs(self.out, &self.f.attrs);
            self.out.push('\n');
        }
        let _ = write!(self.out, "prim @{name}(");
        for (i, p) in self.f.params.iter().enumerate() {
            if i > 0 {
                self.out.push_str(", ");
            }
            match *p {
                Param::Var(v) => {
                    let _ = write!(self.out, "%{}: {}", self.var_names[v.index()], self.f.vars[v.index()].ty);
                }
                Param::Buf(b) => {
                    let _ = write!(self.out, "%{}: ", self.buf_names[b.index()]);
                    write_buffer_type(self.out, &self.f.bufs[b.index()]);
                }
            }
        }
        self.out.push_str(") {");
        self.indent = 1;
        self.block_body(self.f.body);
        self.out.push_str("\n}\n");
    }

    /// The statements of a `{ … }` whose content is `s` (its elements if it is a sequence),
    /// each on its own line; the caller prints the braces.
    fn block_body(&mut self, s: StmtId) {
        let f = self.f;
        let mut work = vec![Work::List(s, 0)];
        while let Some(w) = work.pop() {
            match w {
                Work::Close => {
                    self.indent -= 1;
                    self.newline();
                    self.out.push('}');
                }
                Work::Else(e) => {
                    self.indent -= 1;
                    self.newline();
                    self.out.push_str("} else {");
                    self.open(e, &mut work);
                }
                Work::List(s, i) => {
                    let one = [s];
                    let list: &[StmtId] = match f.stmts.get(s.index()).map(|st| st.kind) {
                        Some(StmtKind::Seq(r)) => f.stmt_lists.get(r.range()).unwrap_or(&[]),
                        _ => &one,
                    };
                    let Some(&cur) = list.get(i) else { continue };
                    let last = i + 1 == list.len();
                    if !last {
                        work.push(Work::List(s, i + 1));
                    }
                    self.stmt(cur, last, &mut work);
                }
            }
        }
    }

    /// Opens a braced body: its statements, then `}`.
    fn open(&mut self, body: StmtId, work: &mut Vec<Work>) {
        self.indent += 1;
        work.push(Work::Close);
        work.push(Work::List(body, 0));
    }

    /// The body of a `let`, `alloc` or `decl`: flat when the binder is last in its list,
    /// braced otherwise.
    fn binder_body(&mut self, body: StmtId, last: bool, work: &mut Vec<Work>) {
        if last {
            self.out.push(';');
            work.push(Work::List(body, 0));
        } else {
            self.out.push_str(" {");
            self.open(body, work);
        }
    }

    /// Prints statement `s` starting on a new line; pushes what prints after its header. A
    /// `let`, `alloc` or `decl` that is last in its list prints flat (`…;` then its body's
    /// statements at the same level); otherwise with its body in braces.
    fn stmt(&mut self, s: StmtId, last: bool, work: &mut Vec<Work>) {
        self.newline();
        let Some(st) = self.f.stmts.get(s.index()) else {
            let _ = write!(self.out, "/* statement {s} is out of range */");
            return;
        };
        match st.kind {
            StmtKind::For { var, min, extent, kind, body } => {
                let _ = write!(self.out, "for %{} in {}(", vname(&self.var_names, var.index()), kind.name());
                self.expr(min);
                self.out.push_str(", ");
                self.expr(extent);
                self.out.push_str(") {");
                self.open(body, work);
            }
            StmtKind::Store { buf, indices, value } => {
                let _ = write!(self.out, "%{}[", vname(&self.buf_names, buf.index()));
                let f = self.f;
                for (i, &ix) in f.operands.get(indices.range()).unwrap_or(&[]).iter().enumerate() {
                    if i > 0 {
                        self.out.push_str(", ");
                    }
                    self.expr(ix);
                }
                self.out.push_str("] = ");
                self.expr(value);
                self.out.push(';');
            }
            StmtKind::Let { var, value, body } => {
                let _ = write!(self.out, "let %{} = ", vname(&self.var_names, var.index()));
                self.expr(value);
                self.binder_body(body, last, work);
            }
            StmtKind::Alloc { buf, body } => {
                let _ = write!(self.out, "alloc %{}: ", vname(&self.buf_names, buf.index()));
                if let Some(b) = self.f.bufs.get(buf.index()) {
                    write_buffer_type(self.out, b);
                }
                self.binder_body(body, last, work);
            }
            StmtKind::Decl { buf, data, body } => {
                let _ = write!(self.out, "decl %{}: ", vname(&self.buf_names, buf.index()));
                if let Some(b) = self.f.bufs.get(buf.index()) {
                    write_buffer_type(self.out, b);
                }
                let _ = write!(self.out, " = %{}", vname(&self.buf_names, data.index()));
                self.binder_body(body, last, work);
            }
            StmtKind::If { cond, then_, else_ } => {
                self.out.push_str("if (");
                self.expr(cond);
                self.out.push_str(") {");
                self.indent += 1;
                match else_ {
                    Some(e) => work.push(Work::Else(e)),
                    None => work.push(Work::Close),
                }
                work.push(Work::List(then_, 0));
            }
            StmtKind::Seq(_) => {
                // A sequence inside a list (the builder never makes one): braces keep it.
                self.out.push('{');
                self.indent += 1;
                work.push(Work::Close);
                work.push(Work::List(s, 0));
            }
            StmtKind::Evaluate(e) => {
                self.out.push_str("eval ");
                self.expr(e);
                self.out.push(';');
            }
            StmtKind::Attr { key, value, body } => {
                let key = self.f.strings.get(key as usize).map(|k| &**k).unwrap_or("");
                let _ = write!(self.out, "attr {key:?} = ");
                self.expr(value);
                self.out.push_str(" {");
                self.open(body, work);
            }
        }
    }

    /// Prints an expression with an explicit stack.
    fn expr(&mut self, e: PExprId) {
        let f = self.f;
        let mut work = vec![EWork::Expr(e)];
        while let Some(w) = work.pop() {
            let e = match w {
                EWork::Str(s) => {
                    self.out.push_str(s);
                    continue;
                }
                EWork::Lanes(l) => {
                    let _ = write!(self.out, ", {l})");
                    continue;
                }
                EWork::Expr(e) => e,
            };
            let Some(node) = f.exprs.get(e.index()) else {
                let _ = write!(self.out, "/* {e} out of range */");
                continue;
            };
            match node.kind {
                PExprKind::Int(v) => write_int(self.out, v, node.ty),
                PExprKind::Float(v) => write_float(self.out, v, node.ty.dtype),
                PExprKind::Var(v) => {
                    let _ = write!(self.out, "%{}", vname(&self.var_names, v.index()));
                }
                PExprKind::Bin(op, a, b) => push_call(self.out, &mut work, op.name(), &[a, b]),
                PExprKind::Not(a) => push_call(self.out, &mut work, "not", &[a]),
                PExprKind::Select(c, a, b) => push_call(self.out, &mut work, "select", &[c, a, b]),
                PExprKind::Cast(a) => {
                    self.out.push_str("cast(");
                    work.push(EWork::Str(dtype_tail(node.ty.dtype)));
                    work.push(EWork::Expr(a));
                }
                PExprKind::Load(b, r) => {
                    let _ = write!(self.out, "%{}[", vname(&self.buf_names, b.index()));
                    work.push(EWork::Str("]"));
                    let args = f.operands.get(r.range()).unwrap_or(&[]);
                    for (i, &a) in args.iter().enumerate().rev() {
                        work.push(EWork::Expr(a));
                        if i > 0 {
                            work.push(EWork::Str(", "));
                        }
                    }
                }
                PExprKind::Call(intr, r) => {
                    push_call(self.out, &mut work, intr.name(), f.operands.get(r.range()).unwrap_or(&[]))
                }
                PExprKind::Ramp(base, stride) => {
                    self.out.push_str("ramp(");
                    work.push(EWork::Lanes(node.ty.lanes));
                    work.push(EWork::Expr(stride));
                    work.push(EWork::Str(", "));
                    work.push(EWork::Expr(base));
                }
                PExprKind::Broadcast(v) => {
                    self.out.push_str("broadcast(");
                    work.push(EWork::Lanes(node.ty.lanes));
                    work.push(EWork::Expr(v));
                }
                PExprKind::Let(v, value, body) => {
                    let _ = write!(self.out, "let %{} = ", vname(&self.var_names, v.index()));
                    work.push(EWork::Expr(body));
                    work.push(EWork::Str(" in "));
                    work.push(EWork::Expr(value));
                }
            }
        }
    }
}

/// The printed name of variable or buffer `i`.
fn vname(names: &[String], i: usize) -> &str {
    names.get(i).map(|s| s.as_str()).unwrap_or("undefined")
}

/// `head(` now; the operands separated by `, ` and then `)` from the stack.
fn push_call(out: &mut String, work: &mut Vec<EWork>, head: &str, args: &[PExprId]) {
    out.push_str(head);
    out.push('(');
    work.push(EWork::Str(")"));
    for (i, &a) in args.iter().enumerate().rev() {
        work.push(EWork::Expr(a));
        if i > 0 {
            work.push(EWork::Str(", "));
        }
    }
}

/// `, <dtype>)`: the tail of a cast.
fn dtype_tail(d: DType) -> &'static str {
    match d {
        DType::F32 => ", f32)",
        DType::F16 => ", f16)",
        DType::F64 => ", f64)",
        DType::I8 => ", i8)",
        DType::I16 => ", i16)",
        DType::I32 => ", i32)",
        DType::I64 => ", i64)",
        DType::U8 => ", u8)",
        DType::U16 => ", u16)",
        DType::U32 => ", u32)",
        DType::U64 => ", u64)",
        DType::Bool => ", bool)",
    }
}

/// An integer immediate: `i64` bare (`4`), others with their suffix (`4i32`), `bool` as
/// `true` / `false`.
fn write_int(out: &mut String, v: i64, ty: PType) {
    let _ = match ty.dtype {
        DType::I64 => write!(out, "{v}"),
        DType::Bool => write!(out, "{}", v != 0),
        DType::U64 => write!(out, "{}u64", v as u64),
        d => write!(out, "{v}{}", d.name()),
    };
}

/// A float immediate: `1.0f` (f32), `1.0f16`, `1.0f64`; a non-finite one as
/// `f32(nan)`, `f32(-inf)`, `f64(0x…)` (the bit pattern of a NaN other than the canonical).
fn write_float(out: &mut String, v: f64, d: DType) {
    if !v.is_finite() {
        let _ = write!(out, "{}({})", d.name(), FloatLit(v));
        return;
    }
    let _ = match d {
        DType::F32 => write!(out, "{:?}f", v as f32),
        DType::F16 => write!(out, "{:?}f16", v as f32),
        _ => write!(out, "{v:?}f64"),
    };
}

/// `Buffer[(4, 4), f32]` with `strides=[…]`, `offset=…` and `scope="…"` when they are not the
/// defaults (compact row-major, 0, `global`).
pub(crate) fn write_buffer_type(out: &mut String, b: &Buffer) {
    out.push_str("Buffer[(");
    for (i, d) in b.shape.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        let _ = write!(out, "{d}");
    }
    if b.shape.len() == 1 {
        out.push(',');
    }
    let _ = write!(out, "), {}", b.dtype);
    if !b.strides.is_empty() {
        out.push_str(", strides=[");
        for (i, s) in b.strides.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            let _ = write!(out, "{s}");
        }
        out.push(']');
    }
    if b.elem_offset != 0 {
        let _ = write!(out, ", offset={}", b.elem_offset);
    }
    if &*b.scope != "global" {
        let _ = write!(out, ", scope={:?}", &*b.scope);
    }
    out.push(']');
}
