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

use std::cell::RefCell;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use rustc_hash::FxHashMap;
use xxhash_rust::xxh3::xxh3_128;

use super::same::{same_signature, span_base};
use crate::ir::{Constant, ExprKind, Function, FunctionBuilder, NodeId, Type};

/// A content fingerprint of a function.
pub(crate) type Fp = u128;

/// Collects what `Hash` impls feed it as bytes, to hash them in one call (XXH3 streams small
/// writes slowly).
struct Bytes(Vec<u8>);

impl Hasher for Bytes {
    fn write(&mut self, bytes: &[u8]) {
        self.0.extend_from_slice(bytes);
    }

    fn finish(&self) -> u64 {
        // Never called: the bytes are hashed with XXH3-128 instead.
        0
    }
}

thread_local! {
    static BUFFER: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// The fingerprint of `f`: equal for two functions when `same_function` holds for them.
/// Types are hashed by content, each distinct one once (numbered by first use), as
/// `same_function` compares them by content whatever their index in the type table.
pub(crate) fn fingerprint(f: &Function) -> Fp {
    BUFFER.with(|buf| {
        let mut buf = buf.borrow_mut();
        let mut h = Bytes(std::mem::take(&mut *buf));
        h.0.clear();
        h.0.reserve(f.num_nodes() * 48);
        write_function(f, &mut h);
        let fp = xxh3_128(&h.0);
        *buf = h.0;
        fp
    })
}

fn write_function(f: &Function, h: &mut Bytes) {
    (f.num_nodes(), f.body(), f.ret_ty(), f.attrs(), f.try_params()).hash(h);
    let base = span_base(f);
    let table = f.type_table();
    // Table index → number of its content in first-use order (u32::MAX: not seen yet).
    let mut numbers = vec![u32::MAX; table.len()];
    let mut by_content: FxHashMap<&Type, u32> = FxHashMap::default();
    for (i, node) in f.nodes().iter().enumerate() {
        let id = NodeId(i as u32);
        // A fixed record per node: the kind's tag and operands, the type's number, the
        // relative span (written directly: `Hash` would make a dozen small writes).
        let kind = match node.kind {
            ExprKind::Var { name } => [0, name.0, 0, 0, 0],
            ExprKind::Global { name } => [1, name.0, 0, 0, 0],
            ExprKind::Const { idx } => [2, idx.0, 0, 0, 0],
            ExprKind::Call { op, attrs, args } => [3, u32::from(op.0), attrs.0, args.start, args.len],
            ExprKind::Apply { callee, args } => [4, callee.0, args.start, args.len, 0],
            ExprKind::Tuple { fields } => [5, fields.start, fields.len, 0, 0],
            ExprKind::Proj { tuple, index } => [6, tuple.0, index, 0, 0],
            ExprKind::If { cond, then_, else_ } => [7, cond.0, then_.0, else_.0, 0],
            ExprKind::Func { idx } => [8, idx.0, 0, 0, 0],
            ExprKind::Block { bindings, result } => [9, bindings.start, bindings.len, result.0, 0],
        };
        let ty = match node.ty.get().filter(|&t| t < table.len()) {
            None => u32::MAX,
            Some(t) => {
                if numbers[t] == u32::MAX {
                    let next = by_content.len() as u32;
                    let number = *by_content.entry(&table[t]).or_insert(next);
                    if number == next {
                        // First use of this content: the content, once.
                        table[t].hash(h);
                    }
                    numbers[t] = number;
                }
                numbers[t]
            }
        };
        let span = match f.span(id) {
            Some(s) => [1, s.start.wrapping_sub(base), s.end.wrapping_sub(base)],
            None => [0, 0, 0],
        };
        let mut record = [0u8; 36];
        for (chunk, word) in record.chunks_exact_mut(4).zip(kind.into_iter().chain([ty]).chain(span)) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        h.0.extend_from_slice(&record);
        match node.kind {
            ExprKind::Var { name } | ExprKind::Global { name } => f.try_sym(name).hash(h),
            ExprKind::Const { idx } => write_constant(f.try_constant(idx).map(|c| &**c), h),
            ExprKind::Call { attrs, args, .. } => {
                f.try_call_attrs(attrs).hash(h);
                write_ids(f.try_ids(args), h);
            }
            ExprKind::Apply { args: ids, .. }
            | ExprKind::Tuple { fields: ids }
            | ExprKind::Block { bindings: ids, .. } => write_ids(f.try_ids(ids), h),
            ExprKind::Proj { .. } | ExprKind::If { .. } => {}
            ExprKind::Func { idx } => match f.try_closure(idx) {
                Some(c) => {
                    (c.params, c.body, &c.ret_ty, &c.attrs).hash(h);
                    write_ids(f.try_ids(c.params), h);
                }
                None => 0u8.hash(h),
            },
        }
    }
}

/// A list of node ids (or its absence), length first.
fn write_ids(ids: Option<&[NodeId]>, h: &mut Bytes) {
    match ids {
        Some(ids) => {
            h.0.extend_from_slice(&(ids.len() as u32).to_le_bytes());
            for id in ids {
                h.0.extend_from_slice(&id.0.to_le_bytes());
            }
        }
        None => h.0.extend_from_slice(&u32::MAX.to_le_bytes()),
    }
}

/// A constant by content; a scalar without building its bit list (the common case).
fn write_constant(c: Option<&Constant>, h: &mut Bytes) {
    match c {
        Some(Constant::Dense(t)) => match t.to_bits_scalar() {
            Some(bits) => (1u8, t.dtype(), t.shape(), bits).hash(h),
            None => (2u8, t).hash(h),
        },
        Some(c) => (3u8, c).hash(h),
        None => 0u8.hash(h),
    }
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
    fn fingerprint_compares_types_by_content_not_by_table_index() {
        use crate::ir::{DType, Type};
        let (t2, t5) = (Type::tensor(vec![2], DType::F32), Type::tensor(vec![5], DType::F32));
        let build = |tx: &Type, ty: &Type| {
            let mut b = FunctionBuilder::new();
            let x = b.var("x", Some(tx.clone()));
            let y = b.var("y", Some(ty.clone()));
            let body = b.tuple(&[x, y]);
            Arc::new(b.finish(&[x, y], body, None, crate::ir::Attrs::new()))
        };
        let a = build(&t5, &t2);
        let base = build(&t2, &t5);
        let mut copy = base.to_builder();
        let (x, y) = (base.params()[0], base.params()[1]);
        copy.set_ty(x, Some(t5.clone()));
        copy.set_ty(y, Some(t2.clone()));
        let b = Arc::new(copy.finish(&[x, y], base.body(), None, crate::ir::Attrs::new()));
        assert_ne!(a.nodes()[x.index()].ty, b.nodes()[x.index()].ty);
        assert!(same_function(&a, &b));
        assert_eq!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&base));
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
