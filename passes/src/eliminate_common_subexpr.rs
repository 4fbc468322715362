//! EliminateCommonSubexpr (function pass, opt level 3): merges bindings that compute the same
//! pure value.
//!
//! What it does: when `let %b = e;` computes a value structurally identical to an earlier
//! `let %a = e';` that is in scope (same block, earlier, or an enclosing block or function),
//! uses of `%b` become `%a` and the binding of `%b` is removed. Identity is judged by value
//! numbers: atoms number by identity (variables by their binding, so `let b = a` and `a`
//! agree; constants by value, bitwise; globals by name), and a compound expression numbers by
//! its kind, operator, attributes (by value) and its operands' numbers, so whole expression
//! trees such as `add(relu(x), y)` match, and so do `g(%a)` and `g(f(x))` when `%a = f(x)`.
//!
//! What it deliberately does not do:
//! - merge anything containing a stateful operator call or an `Apply` (a function value may
//!   have effects), closures (`fn` values) or blocks;
//! - merge across sibling scopes (the two branches of an `if`, or two nested blocks): the
//!   earlier variable would be out of scope;
//! - merge identical subexpressions nested inside binding values (only whole binding values
//!   merge; nested duplicates need a new binding, which is ToANormalForm's business);
//! - remove bindings made dead by merging (DeadCodeElimination does).
//!
//! Phases:
//! 1. Number values in evaluation order with an explicit stack, keeping a scoped table from
//!    value number to the variable that holds it; each block's entries are removed when the
//!    block ends.
//! 2. Remove the merged bindings and replace their variables in a copy of the arena
//!    ([`Function::substituted`]), or, when that is refused, copy the live nodes with the
//!    variables aliased ([`crate::rewrite::Rewriter`]); nothing merged → the same `Arc`.

use std::hash::{Hash, Hasher};
use std::sync::Arc;

use passel_engine::ir::{Constant, ExprKind, Function, NodeId, TensorData};
use rustc_hash::{FxHashMap, FxHasher};

use crate::rewrite::{is_stateful, well_formed, Propagate, Rewriter, NONE};

const NO_VN: u32 = u32::MAX;

enum Frame {
    Enter(NodeId),
    Exit(NodeId),
    Bind(NodeId, NodeId),
    ExitBlock(u32),
}

/// Runs EliminateCommonSubexpr on `func`; returns `func` itself when nothing merges.
pub fn eliminate_common_subexpr(func: &Arc<Function>) -> Arc<Function> {
    if !func.nodes().iter().any(|n| matches!(n.kind, ExprKind::Block { bindings, .. } if bindings.len >= 4))
        || !well_formed(func)
    {
        return Arc::clone(func);
    }
    let aliases = find_merges(func);
    if aliases.is_empty() {
        return Arc::clone(func);
    }
    let n = func.num_nodes();
    let (mut subst, mut dropped) = (vec![NONE; n], vec![false; n]);
    for &(var, target) in &aliases {
        subst[var.index()] = target;
        dropped[var.index()] = true;
    }
    match func.substituted(&subst, &dropped).or_else(|| rebuild(func, &aliases)) {
        Some(f) => Arc::new(f),
        None => Arc::clone(func),
    }
}

/// Copies the live nodes of `func` with each `(var, earlier var)` merged.
fn rebuild(func: &Function, aliases: &[(NodeId, NodeId)]) -> Option<Function> {
    let mut rw = Rewriter::new(func, Propagate::Nothing);
    for &(var, target) in aliases {
        rw.alias(var, target);
    }
    rw.run(|_, _| None)
}

struct Numbering<'f> {
    func: &'f Function,
    vn: Vec<u32>,
    /// Value number → an old node carrying it (to confirm hash matches).
    reps: Vec<NodeId>,
    by_hash: FxHashMap<u64, u32>,
    consts: FxHashMap<&'f Constant, u32>,
    /// Rank-0 dense constants by dtype and bits (hashing a `Constant` allocates).
    scalars: FxHashMap<(u8, u64), u32>,
    globals: FxHashMap<&'f str, u32>,
}

impl<'f> Numbering<'f> {
    fn fresh(&mut self, rep: NodeId) -> u32 {
        self.reps.push(rep);
        self.reps.len() as u32 - 1
    }

    /// The number of compound node `id` whose operands are numbered, or `NO_VN`.
    fn number(&mut self, id: NodeId) -> u32 {
        let func = self.func;
        let mut h = FxHasher::default();
        let kind = *func.kind(id);
        std::mem::discriminant(&kind).hash(&mut h);
        match kind {
            ExprKind::Call { op, attrs, .. } => {
                if is_stateful(op) {
                    return NO_VN;
                }
                op.hash(&mut h);
                if attrs.0 != 0 {
                    func.call_attrs(attrs).hash(&mut h);
                }
            }
            ExprKind::Proj { index, .. } => index.hash(&mut h),
            ExprKind::Tuple { .. } | ExprKind::If { .. } => {}
            _ => return NO_VN,
        }
        let mut ok = true;
        let mut hash_operand = |o: NodeId| {
            let v = self.vn[o.index()];
            ok &= v != NO_VN;
            v.hash(&mut h);
        };
        match kind {
            ExprKind::Call { args, .. } | ExprKind::Tuple { fields: args } => {
                func.ids(args).iter().for_each(|&o| hash_operand(o))
            }
            _ => func.for_each_operand(id, hash_operand),
        }
        if !ok {
            return NO_VN;
        }
        let key = h.finish();
        match self.by_hash.get(&key) {
            Some(&v) if self.same(self.reps[v as usize], id) => v,
            // A 64-bit hash collision: give up merging this node rather than compare deeper.
            Some(_) => self.fresh(id),
            None => {
                let v = self.fresh(id);
                self.by_hash.insert(key, v);
                v
            }
        }
    }

    fn same(&self, a: NodeId, b: NodeId) -> bool {
        let func = self.func;
        let head = match (*func.kind(a), *func.kind(b)) {
            (ExprKind::Call { op: o1, attrs: t1, .. }, ExprKind::Call { op: o2, attrs: t2, .. }) => {
                o1 == o2 && (t1 == t2 || func.call_attrs(t1) == func.call_attrs(t2))
            }
            (ExprKind::Proj { index: i1, .. }, ExprKind::Proj { index: i2, .. }) => i1 == i2,
            (ExprKind::Tuple { .. }, ExprKind::Tuple { .. }) | (ExprKind::If { .. }, ExprKind::If { .. }) => true,
            _ => false,
        };
        if !head {
            return false;
        }
        let mut xs = [NO_VN; 8];
        let mut nx = 0usize;
        let mut overflow = false;
        func.for_each_operand(a, |o| {
            if nx < xs.len() {
                xs[nx] = self.vn[o.index()];
            } else {
                overflow = true;
            }
            nx += 1;
        });
        let mut ny = 0usize;
        let mut eq = true;
        func.for_each_operand(b, |o| {
            if ny < xs.len() {
                eq &= xs[ny] == self.vn[o.index()];
            }
            ny += 1;
        });
        // Long operand lists are compared only by hash prefix; treat them as distinct.
        eq && nx == ny && !overflow
    }
}

/// Identity of a rank-0 dense constant: its dtype and element bits (so `-0.0` and `0.0`
/// differ and NaN payloads are kept apart, as in constant equality).
fn scalar_key(c: &Constant) -> Option<(u8, u64)> {
    let Constant::Dense(t) = c else { return None };
    if !t.shape().is_empty() {
        return None;
    }
    Some(match &t.0 {
        TensorData::F32(a) => (0, a.iter().next()?.to_bits() as u64),
        TensorData::F16(a) => (1, a.iter().next()?.to_bits() as u64),
        TensorData::I64(a) => (2, *a.iter().next()? as u64),
        TensorData::I32(a) => (3, *a.iter().next()? as u32 as u64),
        TensorData::Bool(a) => (4, *a.iter().next()? as u64),
    })
}

/// Finds `(var, earlier var)` pairs to merge.
fn find_merges(func: &Function) -> Vec<(NodeId, NodeId)> {
    let n = func.num_nodes();
    let mut num = Numbering {
        func,
        vn: vec![NO_VN; n],
        reps: Vec::with_capacity(n / 2),
        by_hash: FxHashMap::with_capacity_and_hasher(n / 2, Default::default()),
        consts: FxHashMap::default(),
        scalars: FxHashMap::default(),
        globals: FxHashMap::default(),
    };
    let mut avail: FxHashMap<u32, NodeId> = FxHashMap::with_capacity_and_hasher(n / 4, Default::default());
    let mut log: Vec<u32> = Vec::new();
    let mut aliases = Vec::new();
    let mut stack = vec![Frame::Enter(func.body())];
    let mut scratch: Vec<NodeId> = Vec::new();
    while let Some(frame) = stack.pop() {
        match frame {
            Frame::Enter(id) => match *func.kind(id) {
                ExprKind::Var { .. } => {
                    if num.vn[id.index()] == NO_VN {
                        num.vn[id.index()] = num.fresh(id);
                    }
                }
                ExprKind::Global { name } => {
                    let next = num.reps.len() as u32;
                    let v = *num.globals.entry(func.sym(name)).or_insert(next);
                    if v == next {
                        num.reps.push(id);
                    }
                    num.vn[id.index()] = v;
                }
                ExprKind::Const { idx } => {
                    let next = num.reps.len() as u32;
                    let c = &**func.constant(idx);
                    let v = match scalar_key(c) {
                        Some(key) => *num.scalars.entry(key).or_insert(next),
                        None => *num.consts.entry(c).or_insert(next),
                    };
                    if v == next {
                        num.reps.push(id);
                    }
                    num.vn[id.index()] = v;
                }
                ExprKind::Block { bindings, result } => {
                    stack.push(Frame::ExitBlock(log.len() as u32));
                    stack.push(Frame::Enter(result));
                    for pair in func.ids(bindings).chunks_exact(2).rev() {
                        stack.push(Frame::Bind(pair[0], pair[1]));
                        stack.push(Frame::Enter(pair[1]));
                    }
                }
                ExprKind::Func { idx } => {
                    stack.push(Frame::Exit(id));
                    stack.push(Frame::Enter(func.closure(idx).body));
                }
                ExprKind::Call { args, .. } | ExprKind::Tuple { fields: args } => {
                    stack.push(Frame::Exit(id));
                    stack.extend(func.ids(args).iter().rev().map(|&o| Frame::Enter(o)));
                }
                _ => {
                    stack.push(Frame::Exit(id));
                    scratch.clear();
                    func.for_each_operand(id, |o| scratch.push(o));
                    stack.extend(scratch.iter().rev().map(|&o| Frame::Enter(o)));
                }
            },
            Frame::Exit(id) => {
                let v = num.number(id);
                num.vn[id.index()] = v;
            }
            Frame::Bind(var, value) => {
                let v = num.vn[value.index()];
                if v == NO_VN {
                    num.vn[var.index()] = num.fresh(var);
                    continue;
                }
                num.vn[var.index()] = v;
                if func.kind(value).is_atom() {
                    continue;
                }
                match avail.get(&v) {
                    Some(&earlier) => aliases.push((var, earlier)),
                    None => {
                        avail.insert(v, var);
                        log.push(v);
                    }
                }
            }
            Frame::ExitBlock(mark) => {
                for v in log.drain(mark as usize..) {
                    avail.remove(&v);
                }
            }
        }
    }
    aliases
}

#[cfg(test)]
mod tests {
    use passel_engine::ir::{structural_eq, Attrs, FunctionBuilder, OpId};
    use passel_engine::op;

    use super::*;

    fn add() -> OpId {
        op::lookup("add").unwrap()
    }
    fn relu() -> OpId {
        op::lookup("relu").unwrap()
    }

    #[test]
    fn eliminate_common_subexpr_merges_identical_trees_and_constants_by_value() {
        // let a = add(relu(x), 1.0); let b = add(relu(x), 1.0); add(a, b)
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let r1 = b.call(relu(), &[x], Attrs::new());
        let k1 = b.constant(Constant::scalar_f32(1.0));
        let av = b.call(add(), &[r1, k1], Attrs::new());
        let a = b.var("a", None);
        let r2 = b.call(relu(), &[x], Attrs::new());
        let k2 = b.constant(Constant::scalar_f32(1.0));
        let bv = b.call(add(), &[r2, k2], Attrs::new());
        let bb = b.var("b", None);
        let res = b.call(add(), &[a, bb], Attrs::new());
        let body = b.block(&[(a, av), (bb, bv)], res);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let out = eliminate_common_subexpr(&func);

        let mut e = FunctionBuilder::new();
        let x = e.var("x", None);
        let r1 = e.call(relu(), &[x], Attrs::new());
        let k1 = e.constant(Constant::scalar_f32(1.0));
        let av = e.call(add(), &[r1, k1], Attrs::new());
        let a = e.var("a", None);
        let res = e.call(add(), &[a, a], Attrs::new());
        let body = e.block(&[(a, av)], res);
        let expected = e.finish(&[x], body, None, Attrs::new());
        assert!(structural_eq(&out, &expected));
        assert!(Arc::ptr_eq(&eliminate_common_subexpr(&out), &out));
    }

    #[test]
    fn eliminate_common_subexpr_patch_equals_rebuild() {
        // let a = relu(x); let b = relu(x); let c = add(a, b); let d = add(b, a); (c, d)
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let av = b.call(relu(), &[x], Attrs::new());
        let a = b.var("a", None);
        let bv = b.call(relu(), &[x], Attrs::new());
        let bb = b.var("b", None);
        let cv = b.call(add(), &[a, bb], Attrs::new());
        let c = b.var("c", None);
        let dv = b.call(add(), &[bb, a], Attrs::new());
        let d = b.var("d", None);
        let tup = b.tuple(&[c, d]);
        let body = b.block(&[(a, av), (bb, bv), (c, cv), (d, dv)], tup);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let aliases = find_merges(&func);
        assert_eq!(aliases, vec![(bb, a), (d, c)]);
        let n = func.num_nodes();
        let (mut subst, mut dropped) = (vec![NONE; n], vec![false; n]);
        for &(var, target) in &aliases {
            subst[var.index()] = target;
            dropped[var.index()] = true;
        }
        let patched = func.substituted(&subst, &dropped).unwrap();
        let rebuilt = rebuild(&func, &aliases).unwrap();
        assert!(structural_eq(&patched, &rebuilt));
        assert!(structural_eq(&eliminate_common_subexpr(&func), &rebuilt));
    }

    #[test]
    fn eliminate_common_subexpr_keeps_different_constants_and_sibling_scopes() {
        // let c = 1 > 0 … modelled as a parameter; if (c) { let a = relu(x); a } else { let b = relu(x); b }
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let c = b.var("c", None);
        let av = b.call(relu(), &[x], Attrs::new());
        let a = b.var("a", None);
        let t = b.block(&[(a, av)], a);
        let bv = b.call(relu(), &[x], Attrs::new());
        let bb = b.var("b", None);
        let e = b.block(&[(bb, bv)], bb);
        let cond = b.if_(c, t, e);
        let k1 = b.constant(Constant::scalar_f32(0.0));
        let v1 = b.call(add(), &[x, k1], Attrs::new());
        let d1 = b.var("d1", None);
        let k2 = b.constant(Constant::scalar_f32(-0.0));
        let v2 = b.call(add(), &[x, k2], Attrs::new());
        let d2 = b.var("d2", None);
        let r = b.var("r", None);
        let tup = b.tuple(&[r, d1, d2]);
        let body = b.block(&[(r, cond), (d1, v1), (d2, v2)], tup);
        let func = Arc::new(b.finish(&[x, c], body, None, Attrs::new()));
        assert!(Arc::ptr_eq(&eliminate_common_subexpr(&func), &func));
    }

    #[test]
    fn eliminate_common_subexpr_merges_into_nested_scope_but_never_stateful_calls() {
        // let a = relu(x); let r = { let b = relu(x); b }; (a, r) plus two stateful calls.
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let av = b.call(relu(), &[x], Attrs::new());
        let a = b.var("a", None);
        let bv = b.call(relu(), &[x], Attrs::new());
        let bb = b.var("b", None);
        let inner = b.block(&[(bb, bv)], bb);
        let r = b.var("r", None);
        let mut pairs = vec![(a, av), (r, inner)];
        let mut fields = vec![a, r];
        if let Some(rand) = op::lookup("random_uniform") {
            for name in ["s1", "s2"] {
                let v = b.call(rand, &[], Attrs::new());
                let s = b.var(name, None);
                pairs.push((s, v));
                fields.push(s);
            }
        }
        let tup = b.tuple(&fields);
        let body = b.block(&pairs, tup);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let out = eliminate_common_subexpr(&func);
        assert_eq!(crate::rewrite::live_bindings(&out), crate::rewrite::live_bindings(&func) - 1);
        assert!(Arc::ptr_eq(&eliminate_common_subexpr(&out), &out));
    }

    #[test]
    fn eliminate_common_subexpr_handles_a_million_bindings() {
        // Pairs of identical bindings on a chain: half of them merge.
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let mut pairs = Vec::with_capacity(1_000_000);
        let mut cur = x;
        for i in 0..500_000 {
            let v1 = b.call(relu(), &[cur], Attrs::new());
            let a = b.var(&format!("a{i}"), None);
            let v2 = b.call(relu(), &[cur], Attrs::new());
            let c = b.var(&format!("c{i}"), None);
            pairs.push((a, v1));
            pairs.push((c, v2));
            cur = c;
        }
        let body = b.block(&pairs, cur);
        let func = Arc::new(b.finish(&[x], body, None, Attrs::new()));
        let out = eliminate_common_subexpr(&func);
        assert_eq!(crate::rewrite::live_bindings(&out), 500_000);
        assert!(Arc::ptr_eq(&eliminate_common_subexpr(&out), &out));
    }
}
