/// Check that an `if` whose condition the loop range decides is removed (TVM's test_stmt_simplify).
prim @f(%A: Buffer[(12,), f32], %C: Buffer[(12,), f32]) {
  for %i in serial(0, 10) {
    if (lt(%i, 12)) {
      %A[%i] = %C[%i];
    }
    if (ge(%i, 10)) {
      %A[%i] = 0.0;
    } else {
      %C[%i] = 1.0;
    }
    if (lt(%i, 5)) {
      %A[%i] = 2.0;
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(12,), f32], %C: Buffer[(12,), f32]) {
//   for %i in serial(0, 10) {
//     %A[%i] = %C[%i];
//     %C[%i] = 1.0f;
//     if (lt(%i, 5)) {
//       %A[%i] = 2.0f;
//     }
//   }
// }
// -----
/// Check that a condition the loop range decides is folded and its if removed (TVM's test_stmt_simplify).
prim @f(%A: Buffer[(10,), f32], %C: Buffer[(10,), f32], %n: i64) {
  for %i in serial(0, 10) {
    if (lt(%i, 12)) {
      %A[%i] = %C[%i];
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(10,), f32], %C: Buffer[(10,), f32], %n: i64) {
//   for %i in serial(0, 10) {
//     %A[%i] = %C[%i];
//   }
// }
// -----
/// Check that nested conditions decided by loop ranges fold (TVM's test_nested_condition and test_nested_provable_condition, with the range facts this Simplify has).
prim @f(%A: Buffer[(16,), f32]) {
  for %i in serial(0, 16) {
    if (gt(%i, 5)) {
      if (lt(%i, 16)) {
        %A[%i] = 0.0f;
      }
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(16,), f32]) {
//   for %i in serial(0, 16) {
//     if (gt(%i, 5)) {
//       %A[%i] = 0.0f;
//     }
//   }
// }
