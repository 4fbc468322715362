/// Check that multiplying by one and dividing by one are removed.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = multiply(%x, 1.0f);
  let %b = divide(%a, 1.0f);
  %b
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %a: Tensor[(2,), f32] = %x;
//   let %b: Tensor[(2,), f32] = %a;
//   %b
// }
// -----
/// Check that float x + 0.0 is kept (it maps -0.0 to +0.0) but integer x + 0 is removed.
def @main(%x: Tensor[(2,), f32], %i: Tensor[(2,), i64]) -> (Tensor[(2,), f32], Tensor[(2,), i64]) {
  let %a = add(%x, 0.0f);
  let %b = add(%i, 0i64);
  (%a, %b)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32], %i: Tensor[(2,), i64]) -> (Tensor[(2,), f32], Tensor[(2,), i64]) {
//   let %a: Tensor[(2,), f32] = add(%x, 0.0f);
//   let %b: Tensor[(2,), i64] = %i;
//   (%a, %b)
// }
// -----
/// Check that a multiply by one that would broadcast to a bigger shape is kept.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(3, 2), f32] {
  multiply(%x, full<(3, 2), f32>(1.0))
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(3, 2), f32] {
//   multiply(%x, full<(3, 2), f32>(1.0))
// }
// -----
/// Check that double negation and reshape of reshape simplify.
def @main(%x: Tensor[(2, 3), f32]) -> (Tensor[(2, 3), f32], Tensor[(3, 2), f32]) {
  let %n = negative(negative(%x));
  let %r = reshape(reshape(%x, newshape=[6]), newshape=[3, 2]);
  (%n, %r)
}
// CHECK:
// def @main(%x: Tensor[(2, 3), f32]) -> (Tensor[(2, 3), f32], Tensor[(3, 2), f32]) {
//   let %n: Tensor[(2, 3), f32] = %x;
//   let %r: Tensor[(3, 2), f32] = reshape(%x, newshape=[3, 2]);
//   (%n, %r)
// }
// -----
/// Check that transposes composing to the identity vanish.
def @main(%x: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] {
  transpose(transpose(%x, axes=[1, 0]), axes=[1, 0])
}
// CHECK:
// def @main(%x: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] {
//   %x
// }
// -----
/// Check that x - x folds to zeros for integers only.
def @main(%i: Tensor[(2,), i32], %x: Tensor[(2,), f32]) -> (Tensor[(2,), i32], Tensor[(2,), f32]) {
  (subtract(%i, %i), subtract(%x, %x))
}
// CHECK:
// def @main(%i: Tensor[(2,), i32], %x: Tensor[(2,), f32]) -> (Tensor[(2,), i32], Tensor[(2,), f32]) {
//   (full<(2,), i32>(0.0), subtract(%x, %x))
// }
// -----
/// Check that three transposes whose axes compose to the identity vanish.
def @main(%x: Tensor[(2, 3, 4), f32]) -> Tensor[(2, 3, 4), f32] {
  transpose(transpose(transpose(%x, axes=[1, 2, 0]), axes=[1, 2, 0]), axes=[1, 2, 0])
}
// CHECK:
// def @main(%x: Tensor[(2, 3, 4), f32]) -> Tensor[(2, 3, 4), f32] {
//   %x
// }
