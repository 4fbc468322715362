/// Check that integer and float constants fold with the dtype's wrapping, and division by zero stays.
prim @f(%A: Buffer[(8,), i32], %B: Buffer[(4,), f32], %C: Buffer[(2,), u8]) {
  %A[0] = add(2147483647i32, 1i32);
  %A[1] = mul(floordiv(-7i32, 2i32), floormod(-7i32, 2i32));
  %A[2] = div(7i32, 3i32);
  %A[3] = sub(div(-7i32, 2i32), mod(-7i32, 2i32));
  %A[4] = select(lt(3i32, 4i32), min(5i32, 9i32), max(5i32, 9i32));
  %B[0] = add(mul(1.5, 2.0), 0.25);
  %B[1] = div(1.0, 0.0);
  %C[0] = sub(3u8, 4u8);
  %C[1] = floordiv(250u8, 7u8);
}
// CHECK:
// prim @f(%A: Buffer[(8,), i32], %B: Buffer[(4,), f32], %C: Buffer[(2,), u8]) {
//   %A[0] = -2147483648i32;
//   %A[1] = -4i32;
//   %A[2] = 2i32;
//   %A[3] = -2i32;
//   %A[4] = 5i32;
//   %B[0] = 3.25f;
//   %B[1] = div(1.0f, 0.0f);
//   %C[0] = 255u8;
//   %C[1] = 35u8;
// }
// -----
/// Check that identities and boolean logic simplify (TVM's test_simplify_bool, test_stmt_simplify).
prim @f(%A: Buffer[(8,), i64], %B: Buffer[(4,), f32], %M: Buffer[(4,), bool], %n: i64, %x: f32) {
  %A[0] = add(mul(%n, 1), 0);
  %A[1] = mul(%n, 0);
  %A[2] = min(%n, %n);
  %A[3] = sub(%n, %n);
  %B[0] = mul(%x, 1.0);
  %B[1] = add(%x, 0.0);
  %M[0] = not(not(lt(%n, 3)));
  %M[1] = and(true, lt(%n, 3));
  %M[2] = or(lt(%n, 3), true);
  %M[3] = eq(%n, %n);
}
// CHECK:
// prim @f(%A: Buffer[(8,), i64], %B: Buffer[(4,), f32], %M: Buffer[(4,), bool], %n: i64, %x: f32) {
//   %A[0] = %n;
//   %A[1] = 0;
//   %A[2] = %n;
//   %A[3] = 0;
//   %B[0] = %x;
//   %B[1] = add(%x, 0.0f);
//   %M[0] = lt(%n, 3);
//   %M[1] = lt(%n, 3);
//   %M[2] = true;
//   %M[3] = true;
// }
// -----
/// Check that affine index expressions are put in canonical form with like terms collected.
prim @f(%A: Buffer[(64,), f32], %B: Buffer[(64,), f32]) {
  for %i in serial(0, 4) {
    for %j in serial(0, 4) {
      %A[add(mul(%i, 4), add(%j, mul(%i, 4)))] = %B[sub(add(%j, add(1, mul(8, %i))), 1)];
      %A[add(%j, mul(%i, 16))] = %B[add(add(%j, 3), sub(mul(%i, 2), %j))];
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(64,), f32], %B: Buffer[(64,), f32]) {
//   for %i in serial(0, 4) {
//     for %j in serial(0, 4) {
//       %A[add(mul(%i, 8), %j)] = %B[add(mul(%i, 8), %j)];
//       %A[add(mul(%i, 16), %j)] = %B[add(mul(%i, 2), 3)];
//     }
//   }
// }
// -----
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
/// Check that a function with nothing to simplify is unchanged.
prim @f(%A: Buffer[(4,), f32], %n: i64) {
  for %i in serial(0, 4) {
    %A[%i] = add(%A[%i], 1.0f);
  }
  if (lt(%n, 3)) {
    %A[0] = 0.0f;
  }
}
// CHECK:
// prim @f(%A: Buffer[(4,), f32], %n: i64) {
//   for %i in serial(0, 4) {
//     %A[%i] = add(%A[%i], 1.0f);
//   }
//   if (lt(%n, 3)) {
//     %A[0] = 0.0f;
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
