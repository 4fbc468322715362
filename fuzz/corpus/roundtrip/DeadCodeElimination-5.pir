/// Check that a module without entry points keeps all functions.
def @a(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  %x
}

def @b(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  relu(%x)
}
