/// Check that a repeated pure computation is merged into the first.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = multiply(%x, 0.5f);
  let %b = multiply(%x, 0.5f);
  add(%a, %b)
}
