/// Check that a zero-argument call stays a call.
def @main() -> Tensor[(3,), f32] {
  zeros(shape=[3])
}
