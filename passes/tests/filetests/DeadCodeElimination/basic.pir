/// Check that an unused binding is removed.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %dead = tanh(%x);
  let %y = relu(%x);
  %y
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %y: Tensor[(2,), f32] = relu(%x);
//   %y
// }
// -----
/// Check that a chain of bindings that only feed dead bindings is removed in one run.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = exp(%x);
  let %b = tanh(%a);
  let %c = sigmoid(%b);
  %x
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   %x
// }
// -----
/// Check that an unused stateful binding is kept.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %r = random_uniform(shape=[2]);
  %x
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %r: Tensor[(2,), f32] = random_uniform(shape=[2]);
//   %x
// }
// -----
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
