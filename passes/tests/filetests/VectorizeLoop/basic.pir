/// Check that a vectorized loop becomes a ramp store of a broadcast (TVM's test_vectorize_loop).
prim @f(%A: Buffer[(16,), f32]) {
  for %j in vectorized(0, 4) {
    %A[%j] = 1.0f;
  }
}
// CHECK:
// prim @f(%A: Buffer[(16,), f32]) {
//   %A[ramp(0, 1, 4)] = broadcast(1.0f, 4);
// }
// -----
/// Check that a vectorized loop inside a serial loop vectorizes its body only (TVM's test_vectorize_vector).
prim @f(%A: Buffer[(16,), f32], %n: i64) {
  for %i in serial(0, %n) {
    for %j in vectorized(0, 4) {
      %A[%j] = 1.0f;
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(16,), f32], %n: i64) {
//   for %i in serial(0, %n) {
//     %A[ramp(0, 1, 4)] = broadcast(1.0f, 4);
//   }
// }
// -----
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
/// Check that binary operators, logical operators and casts broadcast their scalar operands (TVM's test_vectorize_binary, test_vectorize_logical, test_vectorize_cast).
prim @f(%A: Buffer[(25,), f32], %B: Buffer[(25,), f32], %C: Buffer[(25,), bool], %D: Buffer[(25,), bool], %E: Buffer[(25,), i32]) {
  for %j in vectorized(0, 4) {
    %A[%j] = mul(3.0f, %B[%j]);
    %A[%j] = floordiv(3.0f, %B[%j]);
    %A[%j] = max(3.0f, %B[%j]);
    %C[%j] = lt(3.0f, %B[%j]);
    %C[%j] = and(true, %D[%j]);
    %E[%j] = cast(%B[%j], i32);
  }
}
// CHECK:
// prim @f(%A: Buffer[(25,), f32], %B: Buffer[(25,), f32], %C: Buffer[(25,), bool], %D: Buffer[(25,), bool], %E: Buffer[(25,), i32]) {
//   %A[ramp(0, 1, 4)] = mul(broadcast(3.0f, 4), %B[ramp(0, 1, 4)]);
//   %A[ramp(0, 1, 4)] = floordiv(broadcast(3.0f, 4), %B[ramp(0, 1, 4)]);
//   %A[ramp(0, 1, 4)] = max(broadcast(3.0f, 4), %B[ramp(0, 1, 4)]);
//   %C[ramp(0, 1, 4)] = lt(broadcast(3.0f, 4), %B[ramp(0, 1, 4)]);
//   %C[ramp(0, 1, 4)] = and(broadcast(true, 4), %D[ramp(0, 1, 4)]);
//   %E[ramp(0, 1, 4)] = cast(%B[ramp(0, 1, 4)], i32);
// }
// -----
/// Check that a select with a constant condition is vectorized (TVM's test_vectorize_select).
prim @f(%A: Buffer[(25,), f32], %B: Buffer[(25,), f32]) {
  for %j in vectorized(0, 4) {
    %A[%j] = select(true, %A[%j], %B[%j]);
  }
}
// CHECK:
// prim @f(%A: Buffer[(25,), f32], %B: Buffer[(25,), f32]) {
//   %A[ramp(0, 1, 4)] = select(true, %A[ramp(0, 1, 4)], %B[ramp(0, 1, 4)]);
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
