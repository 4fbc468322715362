/// Check that an unroll loop becomes one copy of its body per iteration (TVM's test_unroll_loop, explicit_unroll).
prim @f(%A: Buffer[(8,), i64], %n: i64) {
  for %i in unroll(0, 3) {
    %A[%i] = add(%A[%i], %n);
  }
}
// CHECK:
// prim @f(%A: Buffer[(8,), i64], %n: i64) {
//   %A[0] = add(%A[0], %n);
//   %A[1] = add(%A[1], %n);
//   %A[2] = add(%A[2], %n);
// }
// -----
/// Check that binders inside an unrolled body are fresh per copy and that nested unroll loops expand.
prim @f(%A: Buffer[(4, 2), f32]) {
  for %i in unroll(0, 2) {
    for %j in serial(0, 2) {
      let %v = cast(add(%i, %j), f32);
      %A[%i, %j] = %v;
    }
    for %k in unroll(1, 2) {
      %A[add(%i, 2), sub(%k, 1)] = 1.0;
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(4, 2), f32]) {
//   for %j in serial(0, 2) {
//     let %v = cast(add(0, %j), f32);
//     %A[0, %j] = %v;
//   }
//   %A[add(0, 2), sub(1, 1)] = 1.0f;
//   %A[add(0, 2), sub(2, 1)] = 1.0f;
//   for %j_1 in serial(0, 2) {
//     let %v_1 = cast(add(1, %j_1), f32);
//     %A[1, %j_1] = %v_1;
//   }
//   %A[add(1, 2), sub(1, 1)] = 1.0f;
//   %A[add(1, 2), sub(2, 1)] = 1.0f;
// }
// -----
/// Check that serial loops are not unrolled with the default config (auto_max_step = 0), nor unroll loops of a non-constant extent (negative cases).
prim @f(%A: Buffer[(8,), i64], %n: i64) {
  for %i in serial(0, 4) {
    %A[%i] = 1;
  }
  for %j in unroll(0, %n) {
    %A[0] = %j;
  }
}
// CHECK:
// prim @f(%A: Buffer[(8,), i64], %n: i64) {
//   for %i in serial(0, 4) {
//     %A[%i] = 1;
//   }
//   for %j in unroll(0, %n) {
//     %A[0] = %j;
//   }
// }
