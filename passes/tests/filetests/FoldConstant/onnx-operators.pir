/// Check that the operators added for ONNX import fold through their kernels.
def @main() -> (Tensor[(3,), f32], Tensor[(2,), f32], Tensor[(4,), f32], Tensor[(2, 2), f32], Tensor[(1, 1, 1, 1), f32]) {
  let %c = clip(tensor<(3,), f32>[-2.0, 0.5, 3.0], a_min=-1.0, a_max=1.0);
  let %t = take(tensor<(3,), f32>[1.0, 2.0, 3.0], tensor<(2,), i64>[-1, 0]);
  let %p = pad(tensor<(2,), f32>[1.0, 2.0], pad_width=[1, 1], pad_mode="edge");
  let %u = trilu(tensor<(2, 2), f32>[1.0, 2.0, 3.0, 4.0]);
  let %m = max_pool2d(tensor<(1, 1, 2, 2), f32>[1.0, 5.0, 3.0, 4.0], pool_size=[2]);
  (%c, %t, %p, %u, %m)
}
// CHECK:
// def @main() -> (Tensor[(3,), f32], Tensor[(2,), f32], Tensor[(4,), f32], Tensor[(2, 2), f32], Tensor[(1, 1, 1, 1), f32]) {
//   (tensor<(3,), f32>[-1.0, 0.5, 1.0], tensor<(2,), f32>[3.0, 1.0], tensor<(4,), f32>[1.0, 1.0, 2.0, 2.0], tensor<(2, 2), f32>[1.0, 2.0, 0.0, 4.0], tensor<(1, 1, 1, 1), f32>[5.0])
// }
// -----
/// Check that scalar calls of the new unary operators fold, and gelu folds with its attribute.
def @main() -> (Tensor[(), f32], Tensor[(), f32], Tensor[(), f32], Tensor[(), f32]) {
  (abs(-2.0f), reciprocal(4.0f), erf(0.0f), gelu(0.0f, approximate="tanh"))
}
// CHECK:
// def @main() -> (Tensor[(), f32], Tensor[(), f32], Tensor[(), f32], Tensor[(), f32]) {
//   (2.0f, 0.25f, 0.0f, 0.0f)
// }
// -----
/// Check that a kernel error (an index out of range) leaves the call in place.
def @main() -> Tensor[(1,), f32] {
  take(tensor<(2,), f32>[1.0, 2.0], tensor<(1,), i64>[5])
}
// CHECK:
// def @main() -> Tensor[(1,), f32] {
//   take(tensor<(2,), f32>[1.0, 2.0], tensor<(1,), i64>[5])
// }
// -----
/// Check that clip with a_min > a_max folds to a_max, as ONNX's Clip (min(max(x, a_min), a_max)) does; NaN stays NaN.
def @main() -> (Tensor[(4,), f32], Tensor[(3,), i32], Tensor[(), f32]) {
  (clip(tensor<(4,), f32>[nan, -1.0, 3.0, 10.0], a_min=5.0, a_max=0.0), clip(tensor<(3,), i32>[-1, 3, 10], a_min=5, a_max=0), clip(3.0f, a_min=5.0, a_max=0.0))
}
// CHECK:
// def @main() -> (Tensor[(4,), f32], Tensor[(3,), i32], Tensor[(), f32]) {
//   (tensor<(4,), f32>[nan, 0.0, 0.0, 0.0], tensor<(3,), i32>[0, 0, 0], 0.0f)
// }
// -----
/// Check that max_pool2d folds to the maximum of each window's numbers, skipping a NaN (ONNX's reference), while global_max_pool2d, max and maximum propagate NaN (the reference's GlobalMaxPool, ReduceMax and Max).
def @main() -> (Tensor[(1, 1, 1, 3), f32], Tensor[(1, 1, 1, 1), f32], Tensor[(1, 1, 1, 1), f32], Tensor[(), f32], Tensor[(2,), f32]) {
  let %x = tensor<(1, 1, 1, 4), f32>[1.0, nan, 3.0, 2.0];
  (max_pool2d(%x, pool_size=[1, 2]), max_pool2d(tensor<(1, 1, 1, 2), f32>[nan, nan], pool_size=[1, 2]), global_max_pool2d(%x), max(%x), maximum(tensor<(2,), f32>[nan, 1.0], tensor<(2,), f32>[2.0, nan]))
}
// CHECK:
// def @main() -> (Tensor[(1, 1, 1, 3), f32], Tensor[(1, 1, 1, 1), f32], Tensor[(1, 1, 1, 1), f32], Tensor[(), f32], Tensor[(2,), f32]) {
//   (tensor<(1, 1, 1, 3), f32>[1.0, 3.0, 3.0], tensor<(1, 1, 1, 1), f32>[nan], tensor<(1, 1, 1, 1), f32>[nan], tensor<(), f32>[nan], tensor<(2,), f32>[nan, nan])
// }
