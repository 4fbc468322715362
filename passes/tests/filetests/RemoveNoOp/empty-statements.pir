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
/// Check that a loop whose body is a no-op is removed (TVM's test_remove_empty_for_loop).
prim @f() {
  for %i in serial(0, 16) {
    eval 0;
  }
}
// CHECK:
// prim @f() {
// }
// -----
/// Check that a loop of extent zero is removed (TVM's test_remove_zero_extent_loop).
prim @f(%A: Buffer[(16,), i32]) {
  for %i in serial(0, 0) {
    %A[%i] = 42i32;
  }
}
// CHECK:
// prim @f(%A: Buffer[(16,), i32]) {
// }
// -----
/// Check that an unused let is removed with the no-op loop that used it (TVM's test_remove_unused_let and test_remove_let_used_only_in_no_op; TVM now keeps unused bindings, this pass drops a let whose variable is used nowhere).
prim @f(%A: Buffer[(16,), i32]) {
  let %x = 5i32;
  for %i in serial(0, 16) {
    %A[%i] = 0i32;
  }
  let %y = 5i32;
  for %j in serial(0, 0) {
    %A[%j] = %y;
  }
}
// CHECK:
// prim @f(%A: Buffer[(16,), i32]) {
//   for %i in serial(0, 16) {
//     %A[%i] = 0i32;
//   }
// }
// -----
/// Check that an empty then-branch flips the condition and an empty else-branch is dropped (TVM's test_remove_empty_then_case and test_remove_empty_else_case).
prim @f(%A: Buffer[(16,), i32]) {
  for %i in serial(0, 16) {
    if (lt(%i, 8)) {
      eval 0;
    } else {
      %A[%i] = 42i32;
    }
  }
  for %j in serial(0, 16) {
    if (lt(%j, 8)) {
      %A[%j] = 42i32;
    } else {
      eval 0;
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(16,), i32]) {
//   for %i in serial(0, 16) {
//     if (not(lt(%i, 8))) {
//       %A[%i] = 42i32;
//     }
//   }
//   for %j in serial(0, 16) {
//     if (lt(%j, 8)) {
//       %A[%j] = 42i32;
//     }
//   }
// }
// -----
/// Check that an allocation whose body is empty is removed (TVM's test_remove_empty_temporary).
prim @f(%A: Buffer[(16,), f32]) {
  alloc %B: Buffer[(16,), f32] {
    eval 0;
  }
  %A[0] = 1.0f;
}
// CHECK:
// prim @f(%A: Buffer[(16,), f32]) {
//   %A[0] = 1.0f;
// }
