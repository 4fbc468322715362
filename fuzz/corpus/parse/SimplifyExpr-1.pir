/// Check that float x + 0.0 is kept (it maps -0.0 to +0.0) but integer x + 0 is removed.
def @main(%x: Tensor[(2,), f32], %i: Tensor[(2,), i64]) -> (Tensor[(2,), f32], Tensor[(2,), i64]) {
  let %a = add(%x, 0.0f);
  let %b = add(%i, 0i64);
  (%a, %b)
}
