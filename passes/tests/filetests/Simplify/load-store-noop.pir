/// Check that a store of a value just read from the same location becomes a self-store after simplification, which RemoveNoOp then removes (TVM's test_load_store_noop and test_load_store_noop_after_simplify; float x + 0.0 is not folded here, so an integer buffer shows it).
// pipeline: Simplify,RemoveNoOp
prim @f(%A: Buffer[(1,), i32]) {
  %A[0] = %A[0];
  %A[0] = add(%A[0], sub(5i32, 5i32));
}
// CHECK:
// prim @f(%A: Buffer[(1,), i32]) {
// }
