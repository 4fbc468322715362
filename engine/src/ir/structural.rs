//! Structural equality and hashing of functions and modules.
//!
//! Two functions are structurally equal when they compute the same expression trees: the names
//! of local variables, the sharing of atoms, dead arena nodes, spans and inferred types do not
//! matter; variable binding structure, variable type annotations, constants (bitwise),
//! operators, attributes, declared result types and function attributes do.
//! Both walks use an explicit stack, never recursion.

use std::hash::{DefaultHasher, Hash, Hasher};

use super::expr::ExprKind;
use super::function::Function;
use super::ids::NodeId;
use super::module::Module;

const UNMAPPED: u32 = u32::MAX;

/// Whether `a` and `b` are structurally equal (see the module docs).
pub fn structural_eq(a: &Function, b: &Function) -> bool {
    if a.attrs() != b.attrs() || a.ret_ty() != b.ret_ty() || a.params().len() != b.params().len() {
        return false;
    }
    let mut fwd = vec![UNMAPPED; a.num_nodes()];
    let mut bwd = vec![UNMAPPED; b.num_nodes()];
    let bind = |x: NodeId, y: NodeId, fwd: &mut Vec<u32>, bwd: &mut Vec<u32>| -> bool {
        if !matches!(a.kind(x), ExprKind::Var { .. }) || !matches!(b.kind(y), ExprKind::Var { .. }) {
            return false;
        }
        if a.ty(x) != b.ty(y) {
            return false;
        }
        fwd[x.index()] = y.0;
        bwd[y.index()] = x.0;
        true
    };
    for (&x, &y) in a.params().iter().zip(b.params()) {
        if !bind(x, y, &mut fwd, &mut bwd) {
            return false;
        }
    }
    let mut stack = vec![(a.body(), b.body())];
    while let Some((x, y)) = stack.pop() {
        match (*a.kind(x), *b.kind(y)) {
            (ExprKind::Var { .. }, ExprKind::Var { .. }) => {
                if fwd[x.index()] != y.0 || bwd[y.index()] != x.0 {
                    return false;
                }
            }
            (ExprKind::Global { name: n1 }, ExprKind::Global { name: n2 }) => {
                if a.sym(n1) != b.sym(n2) {
                    return false;
                }
            }
            (ExprKind::Const { idx: c1 }, ExprKind::Const { idx: c2 }) => {
                if a.constant(c1) != b.constant(c2) {
                    return false;
                }
            }
            (ExprKind::Call { op: o1, attrs: t1, args: r1 }, ExprKind::Call { op: o2, attrs: t2, args: r2 }) => {
                if o1 != o2 || r1.len != r2.len || a.call_attrs(t1) != b.call_attrs(t2) {
                    return false;
                }
                stack.extend(a.ids(r1).iter().copied().zip(b.ids(r2).iter().copied()));
            }
            (ExprKind::Apply { callee: c1, args: r1 }, ExprKind::Apply { callee: c2, args: r2 }) => {
                if r1.len != r2.len {
                    return false;
                }
                stack.push((c1, c2));
                stack.extend(a.ids(r1).iter().copied().zip(b.ids(r2).iter().copied()));
            }
            (ExprKind::Tuple { fields: r1 }, ExprKind::Tuple { fields: r2 }) => {
                if r1.len != r2.len {
                    return false;
                }
                stack.extend(a.ids(r1).iter().copied().zip(b.ids(r2).iter().copied()));
            }
            (ExprKind::Proj { tuple: t1, index: i1 }, ExprKind::Proj { tuple: t2, index: i2 }) => {
                if i1 != i2 {
                    return false;
                }
                stack.push((t1, t2));
            }
            (ExprKind::If { cond: c1, then_: t1, else_: e1 }, ExprKind::If { cond: c2, then_: t2, else_: e2 }) => {
                stack.extend([(c1, c2), (t1, t2), (e1, e2)]);
            }
            (ExprKind::Func { idx: i1 }, ExprKind::Func { idx: i2 }) => {
                let (c1, c2) = (a.closure(i1), b.closure(i2));
                if c1.params.len != c2.params.len || c1.ret_ty != c2.ret_ty || c1.attrs != c2.attrs {
                    return false;
                }
                for (&x, &y) in a.ids(c1.params).iter().zip(b.ids(c2.params)) {
                    if !bind(x, y, &mut fwd, &mut bwd) {
                        return false;
                    }
                }
                stack.push((c1.body, c2.body));
            }
            (ExprKind::Block { bindings: r1, result: res1 }, ExprKind::Block { bindings: r2, result: res2 }) => {
                if r1.len != r2.len {
                    return false;
                }
                // Bind every variable first: a well-formed value never mentions its own
                // variable, so binding early changes nothing for valid IR.
                for ((v1, x1), (v2, x2)) in a.bindings(r1).zip(b.bindings(r2)) {
                    if !bind(v1, v2, &mut fwd, &mut bwd) {
                        return false;
                    }
                    stack.push((x1, x2));
                }
                stack.push((res1, res2));
            }
            _ => return false,
        }
    }
    true
}

/// A structural hash consistent with [`structural_eq`]: equal functions hash equal.
/// Deterministic across runs and platforms of the same endianness.
pub fn structural_hash(func: &Function) -> u64 {
    let mut h = DefaultHasher::new();
    hash_function(func, &mut h);
    h.finish()
}

/// Feeds the structural identity of `func` into `h`.
pub fn hash_function(func: &Function, h: &mut impl Hasher) {
    func.attrs().hash(h);
    func.ret_ty().hash(h);
    // Variables hash as the order in which they were bound.
    let mut number = vec![UNMAPPED; func.num_nodes()];
    let mut next = 0u32;
    let mut bind = |v: NodeId, number: &mut Vec<u32>, h: &mut dyn Hasher| {
        number[v.index()] = next;
        next += 1;
        func.ty(v).hash(&mut HasherRef(h));
    };
    func.params().len().hash(h);
    for &p in func.params() {
        bind(p, &mut number, h);
    }
    let mut stack = vec![func.body()];
    while let Some(x) = stack.pop() {
        let kind = *func.kind(x);
        std::mem::discriminant(&kind).hash(h);
        match kind {
            ExprKind::Var { .. } => number[x.index()].hash(h),
            ExprKind::Global { name } => func.sym(name).hash(h),
            ExprKind::Const { idx } => func.constant(idx).hash(h),
            ExprKind::Call { op, attrs, args } => {
                op.hash(h);
                func.call_attrs(attrs).hash(h);
                args.len.hash(h);
                stack.extend(func.ids(args).iter().rev());
            }
            ExprKind::Apply { callee, args } => {
                args.len.hash(h);
                stack.extend(func.ids(args).iter().rev());
                stack.push(callee);
            }
            ExprKind::Tuple { fields } => {
                fields.len.hash(h);
                stack.extend(func.ids(fields).iter().rev());
            }
            ExprKind::Proj { tuple, index } => {
                index.hash(h);
                stack.push(tuple);
            }
            ExprKind::If { cond, then_, else_ } => stack.extend([else_, then_, cond]),
            ExprKind::Func { idx } => {
                let c = func.closure(idx);
                c.params.len.hash(h);
                c.ret_ty.hash(h);
                c.attrs.hash(h);
                for &p in func.ids(c.params) {
                    bind(p, &mut number, h);
                }
                stack.push(c.body);
            }
            ExprKind::Block { bindings, result } => {
                bindings.len.hash(h);
                stack.push(result);
                let pairs: Vec<_> = func.bindings(bindings).collect();
                for &(var, _) in &pairs {
                    bind(var, &mut number, h);
                }
                stack.extend(pairs.iter().rev().map(|&(_, value)| value));
            }
        }
    }
}

struct HasherRef<'a>(&'a mut dyn Hasher);

impl Hasher for HasherRef<'_> {
    fn finish(&self) -> u64 {
        self.0.finish()
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes)
    }
}

/// Whether two modules have the same function names in the same order with structurally
/// equal functions.
pub fn module_structural_eq(a: &Module, b: &Module) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b.iter())
            .all(|((na, fa), (nb, fb))| na == nb && (std::sync::Arc::ptr_eq(fa, fb) || structural_eq(fa, fb)))
        && a.num_prims() == b.num_prims()
        && a.prim_funcs().zip(b.prim_funcs()).all(|((na, fa), (nb, fb))| {
            na == nb && (std::sync::Arc::ptr_eq(fa, fb) || crate::tir::prim_structural_eq(fa, fb))
        })
}

/// A structural hash of a module, consistent with [`module_structural_eq`].
pub fn module_structural_hash(m: &Module) -> u64 {
    let mut h = DefaultHasher::new();
    m.len().hash(&mut h);
    for (name, f) in m.iter() {
        name.hash(&mut h);
        hash_function(f, &mut h);
    }
    m.num_prims().hash(&mut h);
    for (name, f) in m.prim_funcs() {
        name.hash(&mut h);
        crate::tir::prim_structural_hash(f).hash(&mut h);
    }
    h.finish()
}
