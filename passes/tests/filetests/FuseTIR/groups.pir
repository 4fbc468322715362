/// Check that a fused group becomes one PrimFunc: the group's parameters and constants are its buffer parameters, the intermediate is a local buffer, and the per-operator PrimFuncs no longer called are removed.
// pipeline: InferType,LegalizeOps,FuseTIR
def @main(%x: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] {
  #[Primitive] fn (%p0: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] {
    relu(add(%p0, tensor<(3,), f32>[1.0, 2.0, 3.0]))
  }(%x)
}
// CHECK:
// def @main(%x: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] {
//   call_tir(@fused_add_relu, %x, tensor<(3,), f32>[1.0, 2.0, 3.0])
// }
//
// prim @fused_add_relu(%p0: Buffer[(2, 3), f32], %c0: Buffer[(3,), f32], %out: Buffer[(2, 3), f32]) {
//   alloc %t0: Buffer[(2, 3), f32, scope="local"];
//   for %i0 in serial(0, 2) {
//     for %i1 in serial(0, 3) {
//       %t0[%i0, %i1] = add(%p0[%i0, %i1], %c0[%i1]);
//     }
//   }
//   for %i0_1 in serial(0, 2) {
//     for %i1_1 in serial(0, 3) {
//       %out[%i0_1, %i1_1] = select(lt(%t0[%i0_1, %i1_1], 0.0f), 0.0f, %t0[%i0_1, %i1_1]);
//     }
//   }
// }
// -----
/// Check that structurally identical groups share one fused PrimFunc (its constants are arguments, so different weights still share it), that a group's result used twice inside it is computed once into a local buffer, and that let-bound values inside a group fuse like nested calls.
// pipeline: InferType,LegalizeOps,FuseTIR
def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  let %a = #[Primitive] fn (%p0: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
    exp(multiply(%p0, tensor<(4,), f32>[1.0, 2.0, 3.0, 4.0]))
  }(%x);
  let %b = #[Primitive] fn (%p1: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
    exp(multiply(%p1, tensor<(4,), f32>[5.0, 6.0, 7.0, 8.0]))
  }(%a);
  #[Primitive] fn (%p2: Tensor[(4,), f32], %p3: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
    let %s = subtract(%p2, %p3);
    multiply(%s, %s)
  }(%a, %b)
}
// CHECK:
// def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
//   let %a: Tensor[(4,), f32] = call_tir(@fused_multiply_exp, %x, tensor<(4,), f32>[1.0, 2.0, 3.0, 4.0]);
//   let %b: Tensor[(4,), f32] = call_tir(@fused_multiply_exp, %a, tensor<(4,), f32>[5.0, 6.0, 7.0, 8.0]);
//   call_tir(@fused_subtract_multiply, %a, %b)
// }
//
// prim @fused_multiply_exp(%p0: Buffer[(4,), f32], %c0: Buffer[(4,), f32], %out: Buffer[(4,), f32]) {
//   alloc %t0: Buffer[(4,), f32, scope="local"];
//   for %i0 in serial(0, 4) {
//     %t0[%i0] = mul(%p0[%i0], %c0[%i0]);
//   }
//   for %i0_1 in serial(0, 4) {
//     %out[%i0_1] = exp(%t0[%i0_1]);
//   }
// }
//
// prim @fused_subtract_multiply(%p0: Buffer[(4,), f32], %p1: Buffer[(4,), f32], %out: Buffer[(4,), f32]) {
//   alloc %t0: Buffer[(4,), f32, scope="local"];
//   for %i0 in serial(0, 4) {
//     %t0[%i0] = sub(%p0[%i0], %p1[%i0]);
//   }
//   for %i0_1 in serial(0, 4) {
//     %out[%i0_1] = mul(%t0[%i0_1], %t0[%i0_1]);
//   }
// }
// -----
/// Check that a group holding a call without a loop-level definition (here a tuple) stays a graph function, its lowered calls intact.
// pipeline: InferType,LegalizeOps,FuseTIR
def @main(%x: Tensor[(2,), f32]) -> (Tensor[(2,), f32], Tensor[(2,), f32]) {
  #[Primitive] fn (%p0: Tensor[(2,), f32]) -> (Tensor[(2,), f32], Tensor[(2,), f32]) {
    (exp(%p0), negative(%p0))
  }(%x)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> (Tensor[(2,), f32], Tensor[(2,), f32]) {
//   #[Primitive] fn (%p0: Tensor[(2,), f32]) -> (Tensor[(2,), f32], Tensor[(2,), f32]) {
//     (call_tir(@exp, %p0), call_tir(@negative, %p0))
//   }(%x)
// }
//
// prim @exp(%A: Buffer[(2,), f32], %out: Buffer[(2,), f32]) {
//   for %i0 in serial(0, 2) {
//     %out[%i0] = exp(%A[%i0]);
//   }
// }
//
// prim @negative(%A: Buffer[(2,), f32], %out: Buffer[(2,), f32]) {
//   for %i0 in serial(0, 2) {
//     %out[%i0] = neg(%A[%i0]);
//   }
// }
