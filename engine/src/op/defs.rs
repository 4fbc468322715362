//! The operator table.

use super::{kernels, Arity, OpDef, OpPattern};

/// Every operator passel knows, in registry order.
pub(super) fn all() -> Vec<OpDef> {
    vec![
        OpDef {
            name: "add",
            arity: Arity::Exact(2),
            attrs: &[],
            pattern: OpPattern::Broadcast,
            stateful: false,
            tuple_result: false,
            type_rel: kernels::broadcast_rel,
            kernel: kernels::add,
            doc: "elementwise sum with numpy broadcasting",
        },
        OpDef {
            name: "relu",
            arity: Arity::Exact(1),
            attrs: &[],
            pattern: OpPattern::Elementwise,
            stateful: false,
            tuple_result: false,
            type_rel: kernels::identity_rel,
            kernel: kernels::relu,
            doc: "max(x, 0)",
        },
    ]
}
