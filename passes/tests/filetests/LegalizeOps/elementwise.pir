/// Check that a unary call becomes call_tir of a PrimFunc with one loop per dimension.
// pipeline: InferType,LegalizeOps
def @main(%x: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] {
  exp(%x)
}
// CHECK:
// def @main(%x: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] {
//   call_tir(@exp, %x)
// }
//
// prim @exp(%A: Buffer[(2, 3), f32], %out: Buffer[(2, 3), f32]) {
//   for %i0 in serial(0, 2) {
//     for %i1 in serial(0, 3) {
//       %out[%i0, %i1] = exp(%A[%i0, %i1]);
//     }
//   }
// }
// -----
/// Check that broadcasting binary calls read size-1 dimensions at index 0, and that calls of one operator on the same types share one PrimFunc.
// pipeline: InferType,LegalizeOps
def @main(%x: Tensor[(2, 3), f32], %b: Tensor[(3,), f32], %c: Tensor[(2, 1), f32]) -> Tensor[(2, 3), f32] {
  let %y = add(%x, %b);
  let %z = add(%y, %b);
  multiply(%z, %c)
}
// CHECK:
// def @main(%x: Tensor[(2, 3), f32], %b: Tensor[(3,), f32], %c: Tensor[(2, 1), f32]) -> Tensor[(2, 3), f32] {
//   let %y: Tensor[(2, 3), f32] = call_tir(@add, %x, %b);
//   let %z: Tensor[(2, 3), f32] = call_tir(@add, %y, %b);
//   call_tir(@multiply, %z, %c)
// }
//
// prim @add(%A: Buffer[(2, 3), f32], %B: Buffer[(3,), f32], %out: Buffer[(2, 3), f32]) {
//   for %i0 in serial(0, 2) {
//     for %i1 in serial(0, 3) {
//       %out[%i0, %i1] = add(%A[%i0, %i1], %B[%i1]);
//     }
//   }
// }
//
// prim @multiply(%A: Buffer[(2, 3), f32], %B: Buffer[(2, 1), f32], %out: Buffer[(2, 3), f32]) {
//   for %i0 in serial(0, 2) {
//     for %i1 in serial(0, 3) {
//       %out[%i0, %i1] = mul(%A[%i0, %i1], %B[%i0, 0]);
//     }
//   }
// }
// -----
/// Check that an operator without a loop-level definition (bitcast: no reinterpreting intrinsic) stays a graph call.
// pipeline: InferType,LegalizeOps
def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), i32] {
  let %t = bitcast(reshape(%x, newshape=[2, 2]), dtype=i32);
  reshape(%t, newshape=[4])
}
// CHECK:
// def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), i32] {
//   let %t: Tensor[(2, 2), i32] = bitcast(call_tir(@reshape, %x), dtype=i32);
//   call_tir(@reshape_1, %t)
// }
//
// prim @reshape(%A: Buffer[(4,), f32], %out: Buffer[(2, 2), f32]) {
//   for %i0 in serial(0, 2) {
//     for %i1 in serial(0, 2) {
//       %out[%i0, %i1] = %A[floordiv(add(add(0, mul(%i0, 2)), mul(%i1, 1)), 1)];
//     }
//   }
// }
//
// prim @reshape_1(%A: Buffer[(2, 2), i32], %out: Buffer[(4,), i32]) {
//   for %i0 in serial(0, 4) {
//     %out[%i0] = %A[floordiv(add(0, mul(%i0, 1)), 2), floormod(floordiv(add(0, mul(%i0, 1)), 1), 2)];
//   }
// }
