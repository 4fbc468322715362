/// Check that a multiply by one that would broadcast to a bigger shape is kept.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(3, 2), f32] {
  multiply(%x, full<(3, 2), f32>(1.0))
}
