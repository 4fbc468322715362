/// Check that an integer add of zero is removed with the zero on either side.
def @main(%x: Tensor[(3,), i32]) -> (Tensor[(3,), i32], Tensor[(3,), i32]) {
  (add(%x, 0i32), add(0i32, %x))
}
// CHECK:
// def @main(%x: Tensor[(3,), i32]) -> (Tensor[(3,), i32], Tensor[(3,), i32]) {
//   (%x, %x)
// }
// -----
/// Check that a multiply by one on the left is removed.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  multiply(1.0f, %x)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   %x
// }
// -----
/// Check that a float add of -0.0 is removed (x + -0.0 is x for every x) while x + 0.0 is kept.
def @main(%x: Tensor[(3,), f32]) -> (Tensor[(3,), f32], Tensor[(3,), f32]) {
  (add(%x, -0.0f), add(%x, 0.0f))
}
// CHECK:
// def @main(%x: Tensor[(3,), f32]) -> (Tensor[(3,), f32], Tensor[(3,), f32]) {
//   (%x, add(%x, 0.0f))
// }
// -----
/// Check that an add of zeros that would broadcast the operand to a bigger shape is kept.
def @main(%x: Tensor[(3,), i32]) -> Tensor[(4, 3), i32] {
  add(%x, full<(4, 3), i32>(0.0))
}
// CHECK:
// def @main(%x: Tensor[(3,), i32]) -> Tensor[(4, 3), i32] {
//   add(%x, full<(4, 3), i32>(0.0))
// }
// -----
/// Check that an add of a non-zero constant is kept.
def @main(%x: Tensor[(2,), i32]) -> Tensor[(2,), i32] {
  add(%x, 2i32)
}
// CHECK:
// def @main(%x: Tensor[(2,), i32]) -> Tensor[(2,), i32] {
//   add(%x, 2i32)
// }
// -----
/// Check that subtracting 0.0 is removed and subtracting -0.0 is kept (x - -0.0 maps -0.0 to +0.0).
def @main(%x: Tensor[(2,), f32]) -> (Tensor[(2,), f32], Tensor[(2,), f32]) {
  (subtract(%x, 0.0f), subtract(%x, -0.0f))
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> (Tensor[(2,), f32], Tensor[(2,), f32]) {
//   (%x, subtract(%x, -0.0f))
// }
