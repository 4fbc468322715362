//! Small stand-ins for functions, so that the session's memos need not keep every stage's
//! output alive: a 128-bit content [`fingerprint`] (equal exactly when
//! [`same_function`](super::same::same_function) holds, up to hash collisions) and a
//! signature stub ([`Sig`]), a tiny function with the same attributes, parameter types,
//! declared result type and body type, which is all a caller may read of a callee.
//!
//! The hash is XXH3-128 (`xxhash-rust`): fast, well distributed, and wide enough that a
//! collision between two versions of one function at one stage is negligible (about 2^-64 for
//! 2^32 distinct versions). It is not cryptographic: a session compares the versions its own
//! passes produced, not adversarial inputs.
//!
//! What it deliberately does not do: hash absolute source offsets (spans are hashed relative
//! to the function's first span, as `same_function` compares them) or anything
//! `same_function` ignores.

use std::hash::Hash;
use std::sync::Arc;

use xxhash_rust::xxh3::Xxh3;

use super::same::{same_signature, span_base};
use crate::ir::{ExprKind, Function, FunctionBuilder, NodeId};

/// A content fingerprint of a function.
pub(crate) type Fp = u128;

/// The fingerprint of `f`: equal for two functions when `same_function` holds for them.
pub(crate) fn fingerprint(f: &Function) -> Fp {
    let mut h = Xxh3::new();
    let params = f.try_params();
    (f.num_nodes(), f.body(), f.ret_ty(), f.attrs(), params).hash(&mut h);
    let base = span_base(f);
    for (i, node) in f.nodes().iter().enumerate() {
        let id = NodeId(i as u32);
        node.kind.hash(&mut h);
        f.try_ty(id).hash(&mut h);
        f.span(id).map(|s| (s.start.wrapping_sub(base), s.end.wrapping_sub(base))).hash(&mut h);
        match node.kind {
            ExprKind::Var { name } | ExprKind::Global { name } => f.try_sym(name).hash(&mut h),
            ExprKind::Const { idx } => f.try_constant(idx).map(|c| &**c).hash(&mut h),
            ExprKind::Call { attrs, args, .. } => {
                f.try_call_attrs(attrs).hash(&mut h);
                f.try_ids(args).hash(&mut h);
            }
            ExprKind::Apply { args, .. } => f.try_ids(args).hash(&mut h),
            ExprKind::Tuple { fields } => f.try_ids(fields).hash(&mut h),
            ExprKind::Proj { .. } | ExprKind::If { .. } => {}
            ExprKind::Func { idx } => match f.try_closure(idx) {
                Some(c) => {
                    (c.params, c.body, &c.ret_ty, &c.attrs).hash(&mut h);
                    f.try_ids(c.params).hash(&mut h);
                }
                None => 0u8.hash(&mut h),
            },
            ExprKind::Block { bindings, .. } => f.try_ids(bindings).hash(&mut h),
        }
    }
    h.digest128()
}

/// What callers see of a function, as a stub function (compared with `same_signature`).
#[derive(Clone, Debug)]
pub(crate) struct Sig(pub(crate) Arc<Function>);

impl PartialEq for Sig {
    fn eq(&self, other: &Sig) -> bool {
        same_signature(&self.0, &other.0)
    }
}

impl Sig {
    /// The signature of `f`: a function with `f`'s parameters (names and types), attributes,
    /// declared result type, and a body of `f`'s body type.
    pub(crate) fn of(f: &Function) -> Sig {
        let mut b = FunctionBuilder::new();
        let params: Vec<NodeId> = f
            .try_params()
            .unwrap_or(&[])
            .iter()
            .map(|&p| b.var(f.name_of(p).unwrap_or("p"), f.try_ty(p).cloned()))
            .collect();
        let body = b.var("body", f.try_ty(f.body()).cloned());
        Sig(Arc::new(b.finish(&params, body, f.ret_ty().cloned(), f.attrs().clone())))
    }

    /// The signature of `out`, sharing `input`'s (`input_sig`) when they are the same.
    pub(crate) fn after(input: &Arc<Function>, input_sig: &Sig, out: &Arc<Function>) -> Sig {
        if same_signature(input, out) {
            input_sig.clone()
        } else {
            Sig::of(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::parse_module;
    use crate::session::same::same_function;

    fn func(text: &str) -> Arc<Function> {
        let m = parse_module(text).expect("test input parses");
        m.entries()[0].1.clone()
    }

    const F: &str = "def @f(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  add(%x, %x)\n}\n";

    #[test]
    fn fingerprint_ignores_a_uniform_shift_of_spans_like_same_function() {
        let a = func(F);
        let b = func(&format!("\n\n{F}"));
        assert!(same_function(&a, &b));
        assert_eq!(fingerprint(&a), fingerprint(&b));
    }

    #[test]
    fn fingerprint_sees_renamed_locals_spacing_ops_and_constants() {
        let a = fingerprint(&func(F));
        for other in [
            F.replace("%x", "%y"),
            F.replace("%x, %x", "%x,  %x"),
            F.replace("add", "multiply"),
            F.replace("(2,)", "(3,)"),
            "def @f(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  add(%x, 1.0f)\n}\n".to_string(),
        ] {
            assert_ne!(a, fingerprint(&func(&other)), "{other}");
        }
        let c1 = func("def @f(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  add(%x, 1.0f)\n}\n");
        let c2 = func("def @f(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  add(%x, 2.0f)\n}\n");
        assert_ne!(fingerprint(&c1), fingerprint(&c2));
    }

    #[test]
    fn signature_stub_has_the_same_signature_and_nothing_of_the_body() {
        let a = func(F);
        let sig = Sig::of(&a);
        assert!(same_signature(&a, &sig.0));
        assert_eq!(sig.0.num_nodes(), 2);
        assert_eq!(sig.0.signature(), a.signature());
        let b = func(&F.replace("add", "multiply"));
        assert_eq!(Sig::of(&b), sig);
        assert_ne!(Sig::of(&func(&F.replace("(2,)", "(3,)"))), sig);
        assert!(Sig::of(&a).0.attrs() == &crate::ir::Attrs::new());
    }
}
