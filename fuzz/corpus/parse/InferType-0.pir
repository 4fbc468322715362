/// Check that binding variables get the inferred types, through broadcasting.
def @main(%x: Tensor[(2, 3), f32], %b: Tensor[(3,), f32]) -> Tensor[(2, 3), f32] {
  let %a = add(%x, %b);
  let %s = sum(%a, axis=[1]);
  let %t = (%a, %s);
  %t.0
}
