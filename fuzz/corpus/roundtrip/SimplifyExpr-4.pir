/// Check that transposes composing to the identity vanish.
def @main(%x: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] {
  transpose(transpose(%x, axes=[1, 0]), axes=[1, 0])
}
