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
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   @helper(%x)
// }
//
// def @helper(%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   relu(%y)
// }
// -----
/// Check that an exported function is an entry point.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  %x
}

#[Exported]
def @api(%z: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  exp(%z)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   %x
// }
//
// #[Exported]
// def @api(%z: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   exp(%z)
// }
// -----
/// Check that a module without entry points keeps all functions.
def @a(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  %x
}

def @b(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  relu(%x)
}
// CHECK:
// def @a(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   %x
// }
//
// def @b(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   relu(%x)
// }
// -----
/// Check that what the entry points reach through a chain of calls is kept, and an unreachable caller of a kept function is removed.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  @f(%x)
}

def @f(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  @g(%x)
}

def @g(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  relu(%x)
}

def @dead(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  @g(%x)
}

#[Exported]
def @api(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  exp(%x)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   @f(%x)
// }
//
// def @f(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   @g(%x)
// }
//
// def @g(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   relu(%x)
// }
//
// #[Exported]
// def @api(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   exp(%x)
// }
