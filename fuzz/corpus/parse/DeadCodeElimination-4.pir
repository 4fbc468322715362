/// Check that an exported function is an entry point.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  %x
}

#[Exported]
def @api(%z: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  exp(%z)
}
