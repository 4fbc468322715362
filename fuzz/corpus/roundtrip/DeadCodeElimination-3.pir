/// Check that functions unreachable from @main are removed and reachable ones kept.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  @helper(%x)
}

def @helper(%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  relu(%y)
}

def @unused(%z: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  exp(%z)
}
