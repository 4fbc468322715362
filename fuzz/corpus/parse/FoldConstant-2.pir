/// Check that a stateful call is never folded.
def @main() -> Tensor[(2,), f32] {
  let %r = random_uniform(shape=[2]);
  add(%r, 1.0f)
}
