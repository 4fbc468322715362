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
// -----
/// Check that sequential writes to one location are both kept, and a self-store is removed (TVM's test_suppress_removal_of_unused_write, test_remove_read_write and test_keep_read_write_to_different_indices).
prim @f(%A: Buffer[(16,), i32]) {
  for %i in serial(0, 16) {
    %A[%i] = 100i32;
    %A[%i] = 42i32;
    %A[%i] = %A[%i];
  }
  for %j in serial(0, 15) {
    %A[%j] = %A[add(%j, 1)];
  }
}
// CHECK:
// prim @f(%A: Buffer[(16,), i32]) {
//   for %i in serial(0, 16) {
//     %A[%i] = 100i32;
//     %A[%i] = 42i32;
//   }
//   for %j in serial(0, 15) {
//     %A[%j] = %A[add(%j, 1)];
//   }
// }
