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
