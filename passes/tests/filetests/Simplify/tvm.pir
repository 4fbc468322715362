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
/// Check that a store of a value just read from the same location becomes a self-store after simplification, which RemoveNoOp then removes (TVM's test_load_store_noop and test_load_store_noop_after_simplify; float x + 0.0 is not folded here, so an integer buffer shows it).
// pipeline: Simplify,RemoveNoOp
prim @f(%A: Buffer[(1,), i32]) {
  %A[0] = %A[0];
  %A[0] = add(%A[0], sub(5i32, 5i32));
}
// CHECK:
// prim @f(%A: Buffer[(1,), i32]) {
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
// -----
/// Check that floormod of a loop variable by a constant larger than its range disappears (TVM's test_conditional_floor_mod, without the condition).
prim @f(%A: Buffer[(8,), i64]) {
  for %i in serial(0, 8) {
    %A[floormod(%i, 8)] = floordiv(%i, 8);
  }
}
// CHECK:
// prim @f(%A: Buffer[(8,), i64]) {
//   for %i in serial(0, 8) {
//     %A[%i] = 0;
//   }
// }
