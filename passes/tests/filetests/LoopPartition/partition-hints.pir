/// Check that hinted pooling loops lose every condition after partitioning and simplification (TVM's test_oneD_pool, with hints instead of partition_const_loop).
// pipeline: LoopPartition,Simplify,RemoveNoOp
prim @f(%data: Buffer[(16,), f32], %out: Buffer[(16,), f32]) {
  attr "pragma_loop_partition_hint" = 1 {
    for %ow in serial(0, 16) {
      for %kw in serial(0, 3) {
        if (gt(%ow, 0)) {
          if (lt(%ow, 15)) {
            %out[%ow] = max(%out[%ow], %data[sub(add(%ow, %kw), 1)]);
          }
        }
      }
    }
  }
  attr "pragma_loop_partition_hint" = 1 {
    for %ow_1 in serial(0, 16) {
      for %kw_1 in serial(0, 3) {
        if (lt(%ow_1, 1)) {
          if (gt(%kw_1, 0)) {
            %out[%ow_1] = max(%out[%ow_1], %data[sub(add(%ow_1, %kw_1), 1)]);
          }
        }
      }
    }
  }
}
// CHECK:
// prim @f(%data: Buffer[(16,), f32], %out: Buffer[(16,), f32]) {
//   for %ow in serial(1, 14) {
//     for %kw in serial(0, 3) {
//       %out[%ow] = max(%out[%ow], %data[sub(add(%ow, %kw), 1)]);
//     }
//   }
//   for %kw_1 in serial(1, 2) {
//     %out[0] = max(%out[0], %data[sub(%kw_1, 1)]);
//   }
// }
// -----
/// Check that mutually exclusive conditions split a hinted loop into one loop per branch (TVM's test_condition_mutually_exclusive, smaller).
// pipeline: LoopPartition,Simplify,RemoveNoOp
prim @f(%P0: Buffer[(4, 3), i8], %P1: Buffer[(2, 3), i8], %P2: Buffer[(2, 3), i8], %C: Buffer[(8, 3), i8]) {
  attr "pragma_loop_partition_hint" = 1 {
    for %i1 in serial(0, 8) {
      for %i2 in serial(0, 3) {
        if (le(6, %i1)) {
          %C[%i1, %i2] = %P2[sub(%i1, 6), %i2];
        }
        if (and(le(4, %i1), lt(%i1, 6))) {
          %C[%i1, %i2] = %P1[sub(%i1, 4), %i2];
        }
        if (lt(%i1, 4)) {
          %C[%i1, %i2] = %P0[%i1, %i2];
        }
      }
    }
  }
}
// CHECK:
// prim @f(%P0: Buffer[(4, 3), i8], %P1: Buffer[(2, 3), i8], %P2: Buffer[(2, 3), i8], %C: Buffer[(8, 3), i8]) {
//   for %i1 in serial(0, 4) {
//     for %i2 in serial(0, 3) {
//       %C[%i1, %i2] = %P0[%i1, %i2];
//     }
//   }
//   for %i1_1 in serial(4, 2) {
//     for %i2_1 in serial(0, 3) {
//       %C[%i1_1, %i2_1] = %P1[sub(%i1_1, 4), %i2_1];
//     }
//   }
//   for %i1_2 in serial(6, 2) {
//     for %i2_2 in serial(0, 3) {
//       %C[%i1_2, %i2_2] = %P2[sub(%i1_2, 6), %i2_2];
//     }
//   }
// }
// -----
/// Check that a padded window's select is decided inside the interior (the shape of the conv2d / pool lowering) and that a piece of extent one is its body.
// pipeline: LoopPartition,Simplify
prim @f(%I: Buffer[(6,), f32], %O: Buffer[(6,), f32]) {
  attr "pragma_loop_partition_hint" = 1 {
    for %x in serial(0, 6) {
      for %r in serial(0, 3) {
        %O[%x] = add(%O[%x], select(and(ge(sub(add(%x, %r), 1), 0), lt(sub(add(%x, %r), 1), 6)), %I[min(max(sub(add(%x, %r), 1), 0), 5)], 0.0f));
      }
    }
  }
}
// CHECK:
// prim @f(%I: Buffer[(6,), f32], %O: Buffer[(6,), f32]) {
//   %O[0] = add(%O[0], 0.0f);
//   for %r in serial(1, 2) {
//     %O[0] = add(%O[0], %I[sub(%r, 1)]);
//   }
//   for %x in serial(1, 4) {
//     for %r_1 in serial(0, 3) {
//       %O[%x] = add(%O[%x], %I[sub(add(%x, %r_1), 1)]);
//     }
//   }
//   for %r_2 in serial(0, 2) {
//     %O[5] = add(%O[5], %I[add(%r_2, 4)]);
//   }
//   %O[5] = add(%O[5], 0.0f);
// }
// -----
/// Check that loops without a hint, loops with a hint of 0 and loops with a non-constant range are left alone (the default config has partition_const_loop off; TVM's test_multi_loop needs symbolic bounds, which this pass does not deduce), and that the hints are removed.
prim @f(%A: Buffer[(8,), i64], %n: i64) {
  for %i in serial(0, 8) {
    if (lt(%i, 4)) {
      %A[%i] = 1;
    }
  }
  attr "pragma_loop_partition_hint" = 0 {
    for %j in serial(0, 8) {
      if (lt(%j, 4)) {
        %A[%j] = 2;
      }
    }
  }
  attr "pragma_loop_partition_hint" = 1 {
    for %k in serial(0, %n) {
      if (lt(%k, 4)) {
        %A[%k] = 3;
      }
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(8,), i64], %n: i64) {
//   for %i in serial(0, 8) {
//     if (lt(%i, 4)) {
//       %A[%i] = 1;
//     }
//   }
//   for %j in serial(0, 8) {
//     if (lt(%j, 4)) {
//       %A[%j] = 2;
//     }
//   }
//   for %k in serial(0, %n) {
//     if (lt(%k, 4)) {
//       %A[%k] = 3;
//     }
//   }
// }
