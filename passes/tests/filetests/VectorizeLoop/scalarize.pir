/// Check that a let whose value depends on the variable is scalarized (TVM's test_vectorize_let makes a vector let; this IR's variables are scalars).
prim @f(%A: Buffer[(25,), f32]) {
  for %i in vectorized(0, 4) {
    let %v = add(%A[%i], 1.0f);
    %A[%i] = add(%v, 2.0f);
  }
}
// CHECK:
// prim @f(%A: Buffer[(25,), f32]) {
//   for %i_s in serial(0, 4) {
//     let %v = add(%A[%i_s], 1.0f);
//     %A[%i_s] = add(%v, 2.0f);
//   }
// }
// -----
/// Check that a loop with a non-constant extent becomes serial (TVM's test_illegal_extent is an error there).
prim @f(%A: Buffer[(25,), i64], %n: i64) {
  for %j in vectorized(0, %n) {
    %A[%j] = 3;
  }
}
// CHECK:
// prim @f(%A: Buffer[(25,), i64], %n: i64) {
//   for %j in serial(0, %n) {
//     %A[%j] = 3;
//   }
// }
// -----
/// Check that an alloc inside a vectorized loop is scalarized (fresh per iteration), a nested vectorized loop becomes serial, and a store that does not depend on the variable is kept once.
prim @f(%A: Buffer[(16,), i64], %I: Buffer[(16,), i64]) {
  for %i in vectorized(0, 4) {
    alloc %T: Buffer[(1,), i64];
    %T[0] = %I[%i];
    %A[%i] = %T[0];
  }
  for %k in vectorized(0, 2) {
    for %l in vectorized(0, 2) {
      %A[add(%k, 8)] = %I[%l];
    }
    %A[12] = 5;
  }
}
// CHECK:
// prim @f(%A: Buffer[(16,), i64], %I: Buffer[(16,), i64]) {
//   for %i_s in serial(0, 4) {
//     alloc %T: Buffer[(1,), i64];
//     %T[0] = %I[%i_s];
//     %A[%i_s] = %T[0];
//   }
//   for %l in serial(0, 2) {
//     %A[add(ramp(0, 1, 2), broadcast(8, 2))] = broadcast(%I[%l], 2);
//   }
//   %A[12] = 5;
// }
