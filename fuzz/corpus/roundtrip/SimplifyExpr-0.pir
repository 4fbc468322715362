/// Check that multiplying by one and dividing by one are removed.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = multiply(%x, 1.0f);
  let %b = divide(%a, 1.0f);
  %b
}
