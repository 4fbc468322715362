/// Check that a binding of a computation is kept.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = relu(%x);
  exp(%a)
}
