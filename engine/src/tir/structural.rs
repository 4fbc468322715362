//! Structural equality and hashing of PrimFuncs: two PrimFuncs are equal when their canonical
//! texts are (names are made unique the same way, floats print every bit, so the text is a
//! faithful canonical form). Linear in the function's size.

use std::hash::{Hash, Hasher};

use super::ir::PrimFunc;
use super::printer::print_prim_func;

/// Whether `a` and `b` are the same PrimFunc up to arena layout and variable identity.
pub fn prim_structural_eq(a: &PrimFunc, b: &PrimFunc) -> bool {
    print_prim_func("f", a) == print_prim_func("f", b)
}

/// A hash consistent with [`prim_structural_eq`].
pub fn prim_structural_hash(f: &PrimFunc) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    print_prim_func("f", f).hash(&mut h);
    h.finish()
}
