/// Check that computations with different attributes or constants are not merged.
def @main(%x: Tensor[(2, 3), f32]) -> (Tensor[(2,), f32], Tensor[(3,), f32], Tensor[(2, 3), f32], Tensor[(2, 3), f32]) {
  let %a = sum(%x, axis=[1]);
  let %b = sum(%x, axis=[0]);
  let %c = add(%x, 1.0f);
  let %d = add(%x, 2.0f);
  (%a, %b, %c, %d)
}
