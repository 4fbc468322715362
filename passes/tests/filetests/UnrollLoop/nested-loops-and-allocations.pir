/// Check that an unrolled loop's allocation is fresh in each copy (TVM's test_unroll_allocations).
prim @f() {
  for %i in unroll(0, 2) {
    alloc %buf: Buffer[(16,), f32];
    %buf[0] = 0.0f;
  }
}
// CHECK:
// prim @f() {
//   alloc %buf: Buffer[(16,), f32] {
//     %buf[0] = 0.0f;
//   }
//   alloc %buf_1: Buffer[(16,), f32];
//   %buf_1[0] = 0.0f;
// }
// -----
/// Check that a nested unroll loop inside a serial loop expands only itself (TVM's test_unroll_loop, the explicit_unroll part).
prim @f(%A: Buffer[(16,), i64], %n: i64) {
  for %i in serial(0, %n) {
    for %j in unroll(0, 4) {
      %A[%j] = add(%A[%j], 1);
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(16,), i64], %n: i64) {
//   for %i in serial(0, %n) {
//     %A[0] = add(%A[0], 1);
//     %A[1] = add(%A[1], 1);
//     %A[2] = add(%A[2], 1);
//     %A[3] = add(%A[3], 1);
//   }
// }
