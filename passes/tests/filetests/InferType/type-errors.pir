/// Check that a shape mismatch is reported with the function.
def @main(%x: Tensor[(2, 3), f32], %y: Tensor[(4,), f32]) -> Tensor[(2, 3), f32] {
  add(%x, %y)
}
// CHECK:
// error: InferType @main: add: shapes (2, 3) and (4,) do not broadcast
// -----
/// Check that a declared result type that disagrees with the body is an error.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(3,), f32] {
  relu(%x)
}
// CHECK:
// error: InferType @main: body has type Tensor[(2,), f32], declared result is Tensor[(3,), f32]
