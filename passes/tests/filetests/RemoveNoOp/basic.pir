/// Check that nested empty loops and evals vanish (TVM's test_remove_no_op: a loop nest whose innermost body is a no-op).
prim @f(%A: Buffer[(4,), f32], %n: i64) {
  for %i in serial(0, 4) {
    for %j in serial(0, %n) {
      for %k in serial(0, 2) {
        eval add(%A[%i], 1.0);
      }
    }
  }
  for %t in serial(0, 0) {
    %A[0] = 1.0;
  }
  %A[1] = %A[1];
  %A[2] = 2.0;
}
// CHECK:
// prim @f(%A: Buffer[(4,), f32], %n: i64) {
//   %A[2] = 2.0f;
// }
// -----
/// Check that an if with empty branches goes, an empty then-branch flips the condition, and an unused let is dropped.
prim @f(%A: Buffer[(4,), f32], %n: i64) {
  if (lt(%n, 2)) {
    eval 0;
  } else {
    eval 1;
  }
  if (lt(%n, 3)) {
    eval 0;
  } else {
    %A[0] = 1.0;
  }
  let %x = mul(%n, 2) {
    %A[1] = 2.0;
  }
  let %y = mul(%n, 3);
  %A[cast(%y, i64)] = 3.0;
}
// CHECK:
// prim @f(%A: Buffer[(4,), f32], %n: i64) {
//   if (not(lt(%n, 3))) {
//     %A[0] = 1.0f;
//   }
//   %A[1] = 2.0f;
//   let %y = mul(%n, 3);
//   %A[cast(%y, i64)] = 3.0f;
// }
// -----
/// Check that a store of a different element of the same buffer is kept (negative case).
prim @f(%A: Buffer[(4,), f32]) {
  for %i in serial(0, 3) {
    %A[%i] = %A[add(%i, 1)];
  }
}
// CHECK:
// prim @f(%A: Buffer[(4,), f32]) {
//   for %i in serial(0, 3) {
//     %A[%i] = %A[add(%i, 1)];
//   }
// }
