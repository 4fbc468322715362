/// Check that a shape mismatch is reported with the function.
def @main(%x: Tensor[(2, 3), f32], %y: Tensor[(4,), f32]) -> Tensor[(2, 3), f32] {
  add(%x, %y)
}
