/// Check that a vectorized loop becomes a ramp store of a broadcast (TVM's test_vectorize_loop).
prim @f(%A: Buffer[(16,), f32]) {
  for %j in vectorized(0, 4) {
    %A[%j] = 1.0f;
  }
}
// CHECK:
// prim @f(%A: Buffer[(16,), f32]) {
//   %A[ramp(0, 1, 4)] = broadcast(1.0f, 4);
// }
// -----
/// Check that a vectorized loop inside a serial loop vectorizes its body only (TVM's test_vectorize_vector).
prim @f(%A: Buffer[(16,), f32], %n: i64) {
  for %i in serial(0, %n) {
    for %j in vectorized(0, 4) {
      %A[%j] = 1.0f;
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(16,), f32], %n: i64) {
//   for %i in serial(0, %n) {
//     %A[ramp(0, 1, 4)] = broadcast(1.0f, 4);
//   }
// }
// -----
/// Check that binary operators, logical operators and casts broadcast their scalar operands (TVM's test_vectorize_binary, test_vectorize_logical, test_vectorize_cast).
prim @f(%A: Buffer[(25,), f32], %B: Buffer[(25,), f32], %C: Buffer[(25,), bool], %D: Buffer[(25,), bool], %E: Buffer[(25,), i32]) {
  for %j in vectorized(0, 4) {
    %A[%j] = mul(3.0f, %B[%j]);
    %A[%j] = floordiv(3.0f, %B[%j]);
    %A[%j] = max(3.0f, %B[%j]);
    %C[%j] = lt(3.0f, %B[%j]);
    %C[%j] = and(true, %D[%j]);
    %E[%j] = cast(%B[%j], i32);
  }
}
// CHECK:
// prim @f(%A: Buffer[(25,), f32], %B: Buffer[(25,), f32], %C: Buffer[(25,), bool], %D: Buffer[(25,), bool], %E: Buffer[(25,), i32]) {
//   %A[ramp(0, 1, 4)] = mul(broadcast(3.0f, 4), %B[ramp(0, 1, 4)]);
//   %A[ramp(0, 1, 4)] = floordiv(broadcast(3.0f, 4), %B[ramp(0, 1, 4)]);
//   %A[ramp(0, 1, 4)] = max(broadcast(3.0f, 4), %B[ramp(0, 1, 4)]);
//   %C[ramp(0, 1, 4)] = lt(broadcast(3.0f, 4), %B[ramp(0, 1, 4)]);
//   %C[ramp(0, 1, 4)] = and(broadcast(true, 4), %D[ramp(0, 1, 4)]);
//   %E[ramp(0, 1, 4)] = cast(%B[ramp(0, 1, 4)], i32);
// }
// -----
/// Check that a select with a constant condition is vectorized (TVM's test_vectorize_select).
prim @f(%A: Buffer[(25,), f32], %B: Buffer[(25,), f32]) {
  for %j in vectorized(0, 4) {
    %A[%j] = select(true, %A[%j], %B[%j]);
  }
}
// CHECK:
// prim @f(%A: Buffer[(25,), f32], %B: Buffer[(25,), f32]) {
//   %A[ramp(0, 1, 4)] = select(true, %A[ramp(0, 1, 4)], %B[ramp(0, 1, 4)]);
// }
