/// Check that computations in sibling if-branches are not merged with each other.
def @main(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  if (%c) { let %a = exp(%x); %a } else { let %b = exp(%x); %b }
}
