/// Check that an if on a constant condition folds to the taken branch.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  if (true) { relu(%x) } else { %x }
}
