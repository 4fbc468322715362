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
/// Check that projection of a literal tuple folds.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  (%x, 1.0f).0
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   %x
// }
// -----
/// Check that projection of a let-bound tuple with a non-constant field is left alone.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %t = (%x, 1.0f);
  %t.0
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %t = (%x, 1.0f);
//   %t.0
// }
// -----
/// Check that an if on a constant condition folds to the taken branch.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  if (true) { relu(%x) } else { %x }
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   relu(%x)
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
