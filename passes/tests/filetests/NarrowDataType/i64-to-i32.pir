/// Check that i64 loops whose ranges fit become i32, with their index arithmetic and conditions (TVM's test_condition).
prim @f(%A: Buffer[(128,), f32], %B: Buffer[(130,), f32]) {
  for %i in serial(0, 2) {
    for %j in serial(0, 65) {
      if (and(ge(add(mul(%i, 65), %j), 0), lt(add(mul(%i, 65), %j), 128))) {
        %A[add(mul(%i, 65), %j)] = 0.0f;
      }
    }
  }
  for %i_1 in serial(0, 2) {
    for %j_1 in serial(0, 65) {
      %B[add(mul(%i_1, 65), %j_1)] = select(and(ge(add(mul(%i_1, 65), %j_1), 0), lt(add(mul(%i_1, 65), %j_1), 128)), %A[min(add(mul(%i_1, 65), %j_1), 127)], 0.0f);
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(128,), f32], %B: Buffer[(130,), f32]) {
//   for %i in serial(0i32, 2i32) {
//     for %j in serial(0i32, 65i32) {
//       if (and(ge(add(mul(%i, 65i32), %j), 0i32), lt(add(mul(%i, 65i32), %j), 128i32))) {
//         %A[add(mul(%i, 65i32), %j)] = 0.0f;
//       }
//     }
//   }
//   for %i_1 in serial(0i32, 2i32) {
//     for %j_1 in serial(0i32, 65i32) {
//       %B[add(mul(%i_1, 65i32), %j_1)] = select(and(ge(add(mul(%i_1, 65i32), %j_1), 0i32), lt(add(mul(%i_1, 65i32), %j_1), 128i32)), %A[min(add(mul(%i_1, 65i32), %j_1), 127i32)], 0.0f);
//     }
//   }
// }
// -----
/// Check that i64 values keep their type while the index narrows (TVM's test_narrow_i64_valued_bufferload_index_to_i32), and a loop variable used as an i64 value is cast back.
prim @f(%A: Buffer[(16,), i64]) {
  for %i in serial(0, 15) {
    %A[add(%i, 1)] = add(%A[%i], 1);
  }
  for %k in serial(0, 4) {
    %A[%k] = %k;
  }
}
// CHECK:
// prim @f(%A: Buffer[(16,), i64]) {
//   for %i in serial(0i32, 15i32) {
//     %A[add(%i, 1i32)] = add(%A[%i], 1);
//   }
//   for %k in serial(0i32, 4i32) {
//     %A[%k] = cast(%k, i64);
//   }
// }
// -----
/// Check that arithmetic that may leave i32 is not narrowed, nor a loop whose range does not fit (TVM's test_basic with large constants).
prim @f(%A: Buffer[(16,), f32], %n: i64) {
  for %i in serial(0, 65536) {
    %A[floormod(mul(%i, 65536), 16)] = 1.0f;
    %A[floormod(add(%i, %n), 16)] = 2.0f;
  }
  for %j in serial(0, 4294967296) {
    %A[0] = 3.0f;
  }
}
// CHECK:
// prim @f(%A: Buffer[(16,), f32], %n: i64) {
//   for %i in serial(0i32, 65536i32) {
//     %A[floormod(mul(cast(%i, i64), 65536), 16)] = 1.0f;
//     %A[floormod(add(cast(%i, i64), %n), 16)] = 2.0f;
//   }
//   for %j in serial(0, 4294967296) {
//     %A[0i32] = 3.0f;
//   }
// }
