/// Check that a call of constants folds and the constant propagates into its use.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %c = multiply(2.0f, 0.5f);
  add(%x, %c)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   add(%x, 1.0f)
// }
// -----
/// Check that folding reaches through a chain of constant bindings and dense tensors.
def @main() -> Tensor[(2,), f32] {
  let %a = add(tensor<(2,), f32>[1.0, 2.0], 1.0f);
  let %b = multiply(%a, %a);
  %b
}
// CHECK:
// def @main() -> Tensor[(2,), f32] {
//   tensor<(2,), f32>[4.0, 9.0]
// }
// -----
/// Check that a stateful call is never folded.
def @main() -> Tensor[(2,), f32] {
  let %r = random_uniform(shape=[2]);
  add(%r, 1.0f)
}
// CHECK:
// def @main() -> Tensor[(2,), f32] {
//   let %r = random_uniform(shape=[2]);
//   add(%r, 1.0f)
// }
// -----
/// Check that a zero-argument call stays a call.
def @main() -> Tensor[(3,), f32] {
  zeros(shape=[3])
}
// CHECK:
// def @main() -> Tensor[(3,), f32] {
//   zeros(shape=[3])
// }
// -----
/// Check that a call with a non-constant argument is left alone.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  exp(%x)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   exp(%x)
// }
// -----
/// Check that a call of dense constants nested in a call with a variable folds to the kernel's values inside it.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  add(%x, add(tensor<(2,), f32>[1.0, 2.0], tensor<(2,), f32>[10.0, 20.0]))
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   add(%x, tensor<(2,), f32>[11.0, 22.0])
// }
// -----
/// Check that a let-bound constant used twice is propagated into its uses and its binding dropped.
def @main(%x: Tensor[(), f32]) -> Tensor[(), f32] {
  let %c = 1.5f;
  let %d = add(%c, %c);
  let %y = add(%x, %d);
  %y
}
// CHECK:
// def @main(%x: Tensor[(), f32]) -> Tensor[(), f32] {
//   let %y = add(%x, 3.0f);
//   %y
// }
// -----
/// Check that an integer division by zero, a kernel error, stays a call.
def @main() -> Tensor[(), i32] {
  divide(1i32, 0i32)
}
// CHECK:
// def @main() -> Tensor[(), i32] {
//   divide(1i32, 0i32)
// }
