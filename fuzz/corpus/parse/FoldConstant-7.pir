/// Check that a call with a non-constant argument is left alone.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  exp(%x)
}
