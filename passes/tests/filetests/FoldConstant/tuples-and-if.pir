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
/// Check that projecting the computed field of a literal tuple leaves that computation alone in its place.
def @main(%x: Tensor[(2,), f32], %y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  (%x, relu(%y)).1
}
// CHECK:
// def @main(%x: Tensor[(2,), f32], %y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   relu(%y)
// }
// -----
/// Check that a projection which would drop a stateful field is left alone.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  (%x, random_uniform(shape=[2])).0
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   (%x, random_uniform(shape=[2])).0
// }
// -----
/// Check that an if on a false constant folds to its else branch.
def @main(%x: Tensor[(2,), f32], %y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  if (false) { %x } else { %y }
}
// CHECK:
// def @main(%x: Tensor[(2,), f32], %y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   %y
// }
