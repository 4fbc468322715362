/// Check that projection of a literal tuple folds.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  (%x, 1.0f).0
}
