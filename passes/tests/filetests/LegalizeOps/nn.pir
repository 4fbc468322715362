/// Check that dense is a reduction over the shared dimension into the output.
// pipeline: InferType,LegalizeOps
def @main(%x: Tensor[(2, 4), f32], %w: Tensor[(3, 4), f32]) -> Tensor[(2, 3), f32] {
  dense(%x, %w)
}
// CHECK:
// def @main(%x: Tensor[(2, 4), f32], %w: Tensor[(3, 4), f32]) -> Tensor[(2, 3), f32] {
//   call_tir(@dense, %x, %w)
// }
//
// prim @dense(%A: Buffer[(2, 4), f32], %B: Buffer[(3, 4), f32], %out: Buffer[(2, 3), f32]) {
//   for %i0 in serial(0, 2) {
//     for %i1 in serial(0, 3) {
//       %out[%i0, %i1] = 0.0f;
//       for %r2 in serial(0, 4) {
//         %out[%i0, %i1] = add(%out[%i0, %i1], mul(%A[%i0, %r2], %B[%i1, %r2]));
//       }
//     }
//   }
// }
// -----
/// Check that conv2d with padding clamps its loads and selects zero outside the input.
// pipeline: InferType,LegalizeOps
def @main(%x: Tensor[(1, 2, 4, 4), f32], %w: Tensor[(2, 2, 3, 3), f32]) -> Tensor[(1, 2, 4, 4), f32] {
  conv2d(%x, %w, padding=[1, 1])
}
// CHECK:
// def @main(%x: Tensor[(1, 2, 4, 4), f32], %w: Tensor[(2, 2, 3, 3), f32]) -> Tensor[(1, 2, 4, 4), f32] {
//   call_tir(@conv2d, %x, %w)
// }
//
// prim @conv2d(%A: Buffer[(1, 2, 4, 4), f32], %B: Buffer[(2, 2, 3, 3), f32], %out: Buffer[(1, 2, 4, 4), f32]) {
//   for %i0 in serial(0, 1) {
//     for %i1 in serial(0, 2) {
//       for %i2 in serial(0, 4) {
//         for %i3 in serial(0, 4) {
//           %out[%i0, %i1, %i2, %i3] = 0.0f;
//           for %r4 in serial(0, 2) {
//             for %r5 in serial(0, 3) {
//               for %r6 in serial(0, 3) {
//                 %out[%i0, %i1, %i2, %i3] = add(%out[%i0, %i1, %i2, %i3], mul(select(and(and(ge(sub(add(mul(%i2, 1), mul(%r5, 1)), 1), 0), lt(sub(add(mul(%i2, 1), mul(%r5, 1)), 1), 4)), and(ge(sub(add(mul(%i3, 1), mul(%r6, 1)), 1), 0), lt(sub(add(mul(%i3, 1), mul(%r6, 1)), 1), 4))), %A[%i0, add(mul(floordiv(%i1, 2), 2), %r4), min(max(sub(add(mul(%i2, 1), mul(%r5, 1)), 1), 0), 3), min(max(sub(add(mul(%i3, 1), mul(%r6, 1)), 1), 0), 3)], 0.0f), %B[%i1, %r4, %r5, %r6]));
//               }
//             }
//           }
//         }
//       }
//     }
//   }
// }
// -----
/// Check that softmax is four stages over two temporaries.
// pipeline: InferType,LegalizeOps
def @main(%x: Tensor[(2, 5), f32]) -> Tensor[(2, 5), f32] {
  softmax(%x, axis=1)
}
// CHECK:
// def @main(%x: Tensor[(2, 5), f32]) -> Tensor[(2, 5), f32] {
//   call_tir(@softmax, %x)
// }
//
// prim @softmax(%A: Buffer[(2, 5), f32], %out: Buffer[(2, 5), f32]) {
//   alloc %max: Buffer[(2, 1), f32];
//   alloc %sum: Buffer[(2, 1), f32];
//   for %i0 in serial(0, 2) {
//     for %i1 in serial(0, 1) {
//       %max[%i0, %i1] = f32(-inf);
//       for %r2 in serial(0, 5) {
//         %max[%i0, %i1] = max(%max[%i0, %i1], %A[%i0, %r2]);
//       }
//     }
//   }
//   for %i3 in serial(0, 2) {
//     for %i4 in serial(0, 5) {
//       %out[%i3, %i4] = exp(sub(%A[%i3, %i4], %max[%i3, 0]));
//     }
//   }
//   for %i5 in serial(0, 2) {
//     for %i6 in serial(0, 1) {
//       %sum[%i5, %i6] = 0.0f;
//       for %r7 in serial(0, 5) {
//         %sum[%i5, %i6] = add(%sum[%i5, %i6], %out[%i5, %r7]);
//       }
//     }
//   }
//   for %i8 in serial(0, 2) {
//     for %i9 in serial(0, 5) {
//       %out[%i8, %i9] = div(%out[%i8, %i9], %sum[%i8, 0]);
//     }
//   }
// }
