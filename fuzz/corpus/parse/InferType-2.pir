/// Check that calls between functions are typed through the callee's signature.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %y = @helper(%x);
  %y
}

def @helper(%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  relu(%y)
}
