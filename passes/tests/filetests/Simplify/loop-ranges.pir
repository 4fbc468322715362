/// Check that floordiv and floormod use the loop ranges (TVM's test_floordiv_floormod).
prim @f(%A: Buffer[(4, 4), f32], %B: Buffer[(16,), f32]) {
  for %i in serial(0, 4) {
    for %j in serial(0, 4) {
      %A[floordiv(add(mul(%i, 4), %j), 4), floormod(add(mul(%i, 4), %j), 4)] = %B[add(floordiv(%j, 4), floormod(%i, 8))];
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(4, 4), f32], %B: Buffer[(16,), f32]) {
//   for %i in serial(0, 4) {
//     for %j in serial(0, 4) {
//       %A[%i, %j] = %B[%i];
//     }
//   }
// }
// -----
/// Check that floordiv is kept when the remainder's range crosses a multiple (negative case).
prim @f(%A: Buffer[(4,), f32], %B: Buffer[(16,), f32], %n: i64) {
  for %i in serial(0, 4) {
    for %j in serial(0, 5) {
      %A[floordiv(add(mul(%i, 4), %j), 4)] = %B[floormod(%n, 8)];
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(4,), f32], %B: Buffer[(16,), f32], %n: i64) {
//   for %i in serial(0, 4) {
//     for %j in serial(0, 5) {
//       %A[floordiv(add(mul(%i, 4), %j), 4)] = %B[floormod(%n, 8)];
//     }
//   }
// }
// -----
/// Check that a loop whose bounds are themselves ranges still bounds its variable.
prim @f(%A: Buffer[(16,), f32]) {
  for %i in serial(0, 4) {
    let %base = mul(%i, 4);
    for %j in serial(%base, 4) {
      if (lt(%j, 16)) {
        %A[%j] = 1.0;
      }
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(16,), f32]) {
//   for %i in serial(0, 4) {
//     let %base = mul(%i, 4);
//     for %j in serial(%base, 4) {
//       %A[%j] = 1.0f;
//     }
//   }
// }
// -----
/// Check that the variable of a loop of extent one is replaced by its value, and a load's unknown range blocks floormod removal (negative case).
prim @f(%A: Buffer[(16,), i64]) {
  for %i in serial(3, 1) {
    %A[floormod(add(%A[%i], %i), 16)] = mul(%i, 2);
  }
}
// CHECK:
// prim @f(%A: Buffer[(16,), i64]) {
//   for %i in serial(3, 1) {
//     %A[floormod(add(%A[3], 3), 16)] = 6;
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
