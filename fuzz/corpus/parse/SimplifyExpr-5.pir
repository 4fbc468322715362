/// Check that x - x folds to zeros for integers only.
def @main(%i: Tensor[(2,), i32], %x: Tensor[(2,), f32]) -> (Tensor[(2,), i32], Tensor[(2,), f32]) {
  (subtract(%i, %i), subtract(%x, %x))
}
