/// Check that an if on a loop-invariant condition stays, its then branch vectorized and the branch with a condition on the variable scalarized (TVM's test_vectorize_with_if).
prim @f(%A: Buffer[(25,), f32], %n: i32, %x: i32) {
  for %i in vectorized(0i32, 4i32) {
    if (lt(%x, %n)) {
      %A[%i] = add(%A[%i], 1.0f);
    } else {
      if (lt(%i, %n)) {
        %A[%i] = 2.0f;
      }
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(25,), f32], %n: i32, %x: i32) {
//   if (lt(%x, %n)) {
//     %A[ramp(0i32, 1i32, 4)] = add(%A[ramp(0i32, 1i32, 4)], broadcast(1.0f, 4));
//   } else {
//     for %i_s in serial(0i32, 4i32) {
//       if (lt(%i_s, %n)) {
//         %A[%i_s] = 2.0f;
//       }
//     }
//   }
// }
// -----
/// Check that conditions le / ge on the variable keep a loop (TVM's test_vectorize_with_le_cond and test_vectorize_with_ge_cond).
prim @f(%A: Buffer[(16,), f32], %n: i64) {
  for %i in vectorized(0, 4) {
    if (le(%i, %n)) {
      %A[%i] = add(%A[%i], 1.0f);
    }
  }
  for %k in vectorized(0, 4) {
    if (ge(%k, %n)) {
      %A[%k] = add(%A[%k], 1.0f);
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(16,), f32], %n: i64) {
//   for %i_s in serial(0, 4) {
//     if (le(%i_s, %n)) {
//       %A[%i_s] = add(%A[%i_s], 1.0f);
//     }
//   }
//   for %k_s in serial(0, 4) {
//     if (ge(%k_s, %n)) {
//       %A[%k_s] = add(%A[%k_s], 1.0f);
//     }
//   }
// }
// -----
/// Check that a select on the variable is vectorized as a vector select (TVM's test_vectorize_if_then_else_scalarize scalarizes if_then_else, which this IR does not have; select evaluates both arms).
prim @f(%A: Buffer[(25,), f32]) {
  for %i in vectorized(0, 4) {
    %A[%i] = select(gt(%i, 0), add(%A[%i], 1.0f), %A[%i]);
  }
}
// CHECK:
// prim @f(%A: Buffer[(25,), f32]) {
//   %A[ramp(0, 1, 4)] = select(gt(ramp(0, 1, 4), broadcast(0, 4)), add(%A[ramp(0, 1, 4)], broadcast(1.0f, 4)), %A[ramp(0, 1, 4)]);
// }
// -----
/// Check that a select on a loop-invariant condition keeps a scalar condition over vector arms (TVM's test_vectorize_if_then_else_vector).
prim @f(%A: Buffer[(25,), f32], %n: i64) {
  for %i in serial(0, %n) {
    for %j in vectorized(0, 4) {
      %A[add(mul(%i, 4), %j)] = select(gt(%i, 0), %A[add(mul(%i, 4), %j)], 0.0f);
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(25,), f32], %n: i64) {
//   for %i in serial(0, %n) {
//     %A[add(broadcast(mul(%i, 4), 4), ramp(0, 1, 4))] = select(gt(%i, 0), %A[add(broadcast(mul(%i, 4), 4), ramp(0, 1, 4))], broadcast(0.0f, 4));
//   }
// }
// -----
/// Check that each statement under a condition on the variable is scalarized on its own (TVM's test_vectorize_and_predicate_invalid_conditions, no predication).
prim @f(%A: Buffer[(16,), f32]) {
  for %i_0 in serial(0, 4) {
    for %i_1 in vectorized(0, 4) {
      if (gt(add(mul(%i_0, 4), %i_1), 14)) {
        %A[add(mul(%i_0, 4), %i_1)] = 2.0f;
      }
      if (lt(14, add(mul(%i_0, 4), %i_1))) {
        %A[add(mul(%i_0, 4), %i_1)] = 2.0f;
      }
      if (lt(add(mul(%i_0, 4), %i_1), mul(%i_0, 4))) {
        %A[add(mul(%i_0, 4), %i_1)] = 2.0f;
      }
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(16,), f32]) {
//   for %i_0 in serial(0, 4) {
//     for %i_1_s in serial(0, 4) {
//       if (gt(add(mul(%i_0, 4), %i_1_s), 14)) {
//         %A[add(mul(%i_0, 4), %i_1_s)] = 2.0f;
//       }
//     }
//     for %i_1_s_1 in serial(0, 4) {
//       if (lt(14, add(mul(%i_0, 4), %i_1_s_1))) {
//         %A[add(mul(%i_0, 4), %i_1_s_1)] = 2.0f;
//       }
//     }
//     for %i_1_s_2 in serial(0, 4) {
//       if (lt(add(mul(%i_0, 4), %i_1_s_2), mul(%i_0, 4))) {
//         %A[add(mul(%i_0, 4), %i_1_s_2)] = 2.0f;
//       }
//     }
//   }
// }
