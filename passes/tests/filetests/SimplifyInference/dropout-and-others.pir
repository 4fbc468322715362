/// Check that dropout becomes the identity.
def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  let %d = dropout(%x, rate=0.5);
  relu(%d)
}
// CHECK:
// def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
//   let %d: Tensor[(4,), f32] = %x;
//   relu(%d)
// }
// -----
/// Check that ill-typed normalisation calls are left for InferType to report.
def @main(%x: Tensor[(4, 2), f32], %g: Tensor[(3,), f32], %b: Tensor[(3,), f32]) -> Tensor[(4, 2), f32] {
  layer_norm(%x, %g, %b)
}
// CHECK:
// error: InferType @main: layer_norm: gamma must have shape (2,), got (3,)
// -----
/// Check that other operators are left alone.
def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  softmax(relu(%x))
}
// CHECK:
// def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
//   softmax(relu(%x))
// }
