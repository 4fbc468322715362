/// Check that a chain of bindings that only feed dead bindings is removed in one run.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = exp(%x);
  let %b = tanh(%a);
  let %c = sigmoid(%b);
  %x
}
