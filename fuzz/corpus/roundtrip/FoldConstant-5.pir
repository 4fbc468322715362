/// Check that projection of a let-bound tuple with a non-constant field is left alone.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %t = (%x, 1.0f);
  %t.0
}
