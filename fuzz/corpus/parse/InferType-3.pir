/// Check that a declared result type that disagrees with the body is an error.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(3,), f32] {
  relu(%x)
}
