/// Check that folding reaches through a chain of constant bindings and dense tensors.
def @main() -> Tensor[(2,), f32] {
  let %a = add(tensor<(2,), f32>[1.0, 2.0], 1.0f);
  let %b = multiply(%a, %a);
  %b
}
