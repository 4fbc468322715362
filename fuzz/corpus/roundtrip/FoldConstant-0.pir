/// Check that a call of constants folds and the constant propagates into its use.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %c = multiply(2.0f, 0.5f);
  add(%x, %c)
}
