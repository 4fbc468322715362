/// Check that stateful calls are never merged.
def @main() -> Tensor[(2,), f32] {
  let %r1 = random_uniform(shape=[2]);
  let %r2 = random_uniform(shape=[2]);
  add(%r1, %r2)
}
