//! Structural equality and hashing of PrimFuncs: two PrimFuncs are equal when their canonical
//! texts are (names are made unique the same way, floats print every bit, so the text is a
//! faithful canonical form). Linear in the function's size.
//!
//! Fast path: [`prim_structural_eq`] first compares the arenas entry by entry (floats by
//! their bits, spans ignored). Identical arenas print identically, so a match decides
//! without printing; that is the common case of a tir pass that rebuilt a function without
//! changing it (the builder appends the same nodes in the same order). Any difference falls
//! back to the texts. `same_arenas_implies_same_text` pins the shortcut to the general path.

use std::hash::{Hash, Hasher};

use super::ir::{PExprKind, PrimFunc};
use super::printer::print_prim_func;

/// The canonical form [`prim_structural_eq`] compares: equal keys, equal PrimFuncs. A pass
/// that merges many PrimFuncs computes each key once (in parallel, if it likes) and compares
/// keys, instead of calling [`prim_structural_eq`] per pair.
pub fn prim_structural_key(f: &PrimFunc) -> String {
    print_prim_func("f", f)
}

/// Whether `a` and `b` are the same PrimFunc up to arena layout and variable identity.
pub fn prim_structural_eq(a: &PrimFunc, b: &PrimFunc) -> bool {
    same_arenas(a, b) || prim_structural_key(a) == prim_structural_key(b)
}

/// Whether `a` and `b` hold the same arenas, entry by entry: the same nodes at the same ids,
/// the same names, floats bit for bit (spans are not compared).
fn same_arenas(a: &PrimFunc, b: &PrimFunc) -> bool {
    a.body == b.body
        && a.params == b.params
        && a.operands == b.operands
        && a.stmt_lists == b.stmt_lists
        && a.stmts == b.stmts
        && a.vars == b.vars
        && a.bufs == b.bufs
        && a.strings == b.strings
        && a.attrs == b.attrs
        && a.exprs.len() == b.exprs.len()
        && a.exprs.iter().zip(&b.exprs).all(|(x, y)| {
            x.ty == y.ty
                && match (x.kind, y.kind) {
                    (PExprKind::Float(p), PExprKind::Float(q)) => p.to_bits() == q.to_bits(),
                    (p, q) => p == q,
                }
        })
}

/// A hash consistent with [`prim_structural_eq`].
pub fn prim_structural_hash(f: &PrimFunc) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    prim_structural_key(f).hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::parse_module;

    fn prim(src: &str) -> PrimFunc {
        let m = parse_module(src).expect("parses");
        let f = m.get_prim("f").expect("@f");
        (**f).clone()
    }

    #[test]
    fn same_arenas_implies_same_text() {
        let src = "prim @f(%A: Buffer[(4,), f32], %B: Buffer[(4,), f32]) {
  for %i in serial(0, 4) {
    %B[%i] = add(%A[%i], 1.5f);
  }
}
";
        let (a, b) = (prim(src), prim(src));
        assert!(same_arenas(&a, &b));
        assert_eq!(prim_structural_key(&a), prim_structural_key(&b));
        // 0.0 and -0.0 are equal floats but different immediates: the shortcut does not
        // decide, and the texts tell them apart.
        let zero = prim(&src.replace("1.5f", "0.0f"));
        let neg_zero = prim(&src.replace("1.5f", "-0.0f"));
        assert!(!same_arenas(&zero, &neg_zero));
        assert!(!prim_structural_eq(&zero, &neg_zero));
        // Different names: different texts, different arenas.
        let renamed = prim(&src.replace("%i", "%j"));
        assert!(!same_arenas(&a, &renamed));
        assert!(prim_structural_eq(&a, &a.clone()));
    }
}
