/// Check that two sibling allocations of one type and scope share one allocation, the second cleared before use (TVM's test_alloc_seq, with the allocations as siblings in the loop body).
prim @f(%n: i32) {
  for %i in serial(0i32, %n) {
    alloc %A: Buffer[(200,), f32, scope="local.L0A"] {
      for %j in serial(0, 10) {
        %A[%j] = 1.2f;
      }
    }
    alloc %B: Buffer[(200,), f32, scope="local.L0A"] {
      for %j_1 in serial(0, 10) {
        %B[%j_1] = 1.3f;
      }
    }
  }
}
// CHECK:
// prim @f(%n: i32) {
//   for %i in serial(0i32, %n) {
//     alloc %A: Buffer[(200,), f32, scope="local.L0A"];
//     for %j in serial(0, 10) {
//       %A[%j] = 1.2f;
//     }
//     decl %B: Buffer[(200,), f32, scope="local.L0A"] = %A;
//     for %z0 in serial(0, 200) {
//       %B[%z0] = 0.0f;
//     }
//     for %j_1 in serial(0, 10) {
//       %B[%j_1] = 1.3f;
//     }
//   }
// }
// -----
/// Check that the larger buffer hosts the smaller one (TVM's test_reuse_small_buffer, two of its buffers).
prim @f(%O: Buffer[(4,), i16]) {
  alloc %A: Buffer[(2,), i16] {
    %A[0] = 1i16;
    %O[0] = %A[0];
  }
  %O[1] = 2i16;
  alloc %C: Buffer[(4,), i16] {
    %O[2] = %C[1];
  }
}
// CHECK:
// prim @f(%O: Buffer[(4,), i16]) {
//   alloc %C: Buffer[(4,), i16];
//   decl %A: Buffer[(2,), i16] = %C {
//     %A[0] = 1i16;
//     %O[0] = %A[0];
//   }
//   %O[1] = 2i16;
//   for %z0 in serial(0, 4) {
//     %C[%z0] = 0i16;
//   }
//   %O[2] = %C[1];
// }
// -----
/// Check that allocations of different element types or scopes are not merged (TVM's test_alloc_different_dtypes keeps one allocation per type without byte packing here).
prim @f(%O: Buffer[(4,), f32]) {
  alloc %A: Buffer[(4,), f32] {
    %O[0] = %A[0];
  }
  alloc %B: Buffer[(4,), i32] {
    %O[1] = cast(%B[0], f32);
  }
  alloc %C: Buffer[(4,), f32, scope="local"] {
    %O[2] = %C[0];
  }
}
// CHECK:
// prim @f(%O: Buffer[(4,), f32]) {
//   alloc %A: Buffer[(4,), f32] {
//     %O[0] = %A[0];
//   }
//   alloc %B: Buffer[(4,), i32] {
//     %O[1] = cast(%B[0], f32);
//   }
//   alloc %C: Buffer[(4,), f32, scope="local"];
//   %O[2] = %C[0];
// }
