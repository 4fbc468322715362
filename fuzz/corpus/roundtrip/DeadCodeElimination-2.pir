/// Check that an unused stateful binding is kept.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %r = random_uniform(shape=[2]);
  %x
}
