/// Check that an unused binding is removed.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %dead = tanh(%x);
  let %y = relu(%x);
  %y
}
