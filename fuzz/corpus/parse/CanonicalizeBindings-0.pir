/// Check that var-to-var rebindings are removed.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = relu(%x);
  let %b = %a;
  let %c = %b;
  exp(%c)
}
