/// Check that 2-d buffers are flattened to 1-d: parameters through a flat view, allocations as flat allocations (TVM's test_elementwise and test_elementwise_without_decl_buffer).
// pipeline: FlattenBuffer,Simplify
prim @f(%A: Buffer[(16, 16), f32], %C: Buffer[(16, 16), f32]) {
  for %i in serial(0, 16) {
    alloc %B_new: Buffer[(1, 16), f32] {
      for %j in serial(0, 16) {
        %B_new[0, %j] = add(%A[%i, %j], 1.0f);
      }
      for %j_1 in serial(0, 16) {
        %C[%i, %j_1] = mul(%B_new[0, %j_1], 2.0f);
      }
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(16, 16), f32], %C: Buffer[(16, 16), f32]) {
//   decl %A_1: Buffer[(256,), f32] = %A;
//   decl %C_1: Buffer[(256,), f32] = %C;
//   for %i in serial(0, 16) {
//     alloc %B_new: Buffer[(16,), f32];
//     for %j in serial(0, 16) {
//       %B_new[%j] = add(%A_1[add(mul(%i, 16), %j)], 1.0f);
//     }
//     for %j_1 in serial(0, 16) {
//       %C_1[add(mul(%i, 16), %j_1)] = mul(%B_new[%j_1], 2.0f);
//     }
//   }
// }
// -----
/// Check that every allocation is flattened (TVM's test_multi_alloc).
// pipeline: FlattenBuffer,Simplify
prim @f(%A: Buffer[(4, 32), f32], %D: Buffer[(4, 32), f32]) {
  for %i in serial(0, 4) {
    for %j in serial(0, 32) {
      alloc %B: Buffer[(4, 32), f32];
      alloc %C: Buffer[(4, 32), f32];
      %B[%i, %j] = add(%A[%i, %j], 1.0f);
      %C[%i, %j] = add(%A[%i, %j], %B[%i, %j]);
      %D[%i, %j] = mul(%C[%i, %j], 2.0f);
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(4, 32), f32], %D: Buffer[(4, 32), f32]) {
//   decl %A_1: Buffer[(128,), f32] = %A;
//   decl %D_1: Buffer[(128,), f32] = %D;
//   for %i in serial(0, 4) {
//     for %j in serial(0, 32) {
//       alloc %B: Buffer[(128,), f32];
//       alloc %C: Buffer[(128,), f32];
//       %B[add(mul(%i, 32), %j)] = add(%A_1[add(mul(%i, 32), %j)], 1.0f);
//       %C[add(mul(%i, 32), %j)] = add(%A_1[add(mul(%i, 32), %j)], %B[add(mul(%i, 32), %j)]);
//       %D_1[add(mul(%i, 32), %j)] = mul(%C[add(mul(%i, 32), %j)], 2.0f);
//     }
//   }
// }
// -----
/// Check that flat indices use the declared strides of a view (TVM's test_strided).
// pipeline: FlattenBuffer,Simplify
prim @f(%A: Buffer[(16, 16), f32], %C: Buffer[(16, 16), f32]) {
  for %i0 in serial(0, 4) {
    alloc %B: Buffer[(4, 17), f32];
    decl %B_1: Buffer[(4, 16), f32, strides=[17, 1]] = %B;
    for %i1 in serial(0, 4) {
      for %j in serial(0, 16) {
        %B_1[%i1, %j] = add(%A[add(mul(%i0, 4), %i1), %j], 1.0f);
      }
    }
    for %i1_1 in serial(0, 4) {
      for %j_1 in serial(0, 16) {
        %C[add(mul(%i0, 4), %i1_1), %j_1] = mul(%B_1[%i1_1, %j_1], 2.0f);
      }
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(16, 16), f32], %C: Buffer[(16, 16), f32]) {
//   decl %A_1: Buffer[(256,), f32] = %A;
//   decl %C_1: Buffer[(256,), f32] = %C;
//   for %i0 in serial(0, 4) {
//     alloc %B: Buffer[(68,), f32];
//     decl %B_1: Buffer[(67,), f32] = %B;
//     for %i1 in serial(0, 4) {
//       for %j in serial(0, 16) {
//         %B_1[add(mul(%i1, 17), %j)] = add(%A_1[add(add(mul(%i0, 64), mul(%i1, 16)), %j)], 1.0f);
//       }
//     }
//     for %i1_1 in serial(0, 4) {
//       for %j_1 in serial(0, 16) {
//         %C_1[add(add(mul(%i0, 64), mul(%i1_1, 16)), %j_1)] = mul(%B_1[add(mul(%i1_1, 17), %j_1)], 2.0f);
//       }
//     }
//   }
// }
// -----
/// Check that a 1-d bool buffer is already flat and left alone (TVM's test_boolean, whose int8 storage this IR does not have).
prim @f(%A: Buffer[(10,), bool], %B: Buffer[(10,), bool]) {
  for %i in serial(0, 10) {
    %B[%i] = %A[%i];
  }
}
// CHECK:
// prim @f(%A: Buffer[(10,), bool], %B: Buffer[(10,), bool]) {
//   for %i in serial(0, 10) {
//     %B[%i] = %A[%i];
//   }
// }
// -----
/// Check that i32 indices give an i32 flat index, an element offset is added, and vector indices give a vector flat index.
prim @f(%A: Buffer[(4, 8), f32, offset=3], %B: Buffer[(4, 8), f32]) {
  for %i in serial(0i32, 4i32) {
    %A[%i, 2i32] = 1.0f;
  }
  %B[1, ramp(0, 1, 4)] = broadcast(2.0f, 4);
}
// CHECK:
// prim @f(%A: Buffer[(4, 8), f32, offset=3], %B: Buffer[(4, 8), f32]) {
//   decl %A_1: Buffer[(35,), f32] = %A;
//   decl %B_1: Buffer[(32,), f32] = %B;
//   for %i in serial(0i32, 4i32) {
//     %A_1[add(add(mul(%i, 8i32), 2i32), 3i32)] = 1.0f;
//   }
//   %B_1[add(broadcast(mul(1, 8), 4), ramp(0, 1, 4))] = broadcast(2.0f, 4);
// }
