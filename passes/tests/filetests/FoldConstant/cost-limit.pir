/// Check that a call whose estimated cost is over `relay.FoldConstant.max_cost` stays a call: a 1024 x 1024 max_pool2d window over a 1024 x 1024 constant (10^12 window steps, an hour of compute) is left as it is, without being evaluated.
def @main() -> Tensor[(1, 1, 1023, 1023), f32] {
  max_pool2d(full<(1, 1, 1024, 1024), f32>(1.0), pool_size=[1024, 1024], padding=[511])
}
// CHECK:
// def @main() -> Tensor[(1, 1, 1023, 1023), f32] {
//   max_pool2d(full<(1, 1, 1024, 1024), f32>(1.0), padding=[511], pool_size=[1024, 1024])
// }
// -----
/// Check that the same operator on a small constant, well within the cost limit, still folds.
def @main() -> Tensor[(1, 1, 2, 2), f32] {
  max_pool2d(tensor<(1, 1, 4, 4), f32>[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0], pool_size=[2], strides=[2])
}
// CHECK:
// def @main() -> Tensor[(1, 1, 2, 2), f32] {
//   tensor<(1, 1, 2, 2), f32>[6.0, 8.0, 14.0, 16.0]
// }
// -----
/// Check that a convolution over the cost limit stays a call instead of failing: a 256 x 256 kernel over 510 x 510 data (4 * 10^9 multiply-adds; its im2col matrix, [65536, 255, 255], used to be refused as too large).
def @main() -> Tensor[(1, 1, 255, 255), f32] {
  conv2d(full<(1, 1, 510, 510), f32>(0.5), full<(1, 1, 256, 256), f32>(2.0))
}
// CHECK:
// def @main() -> Tensor[(1, 1, 255, 255), f32] {
//   conv2d(full<(1, 1, 510, 510), f32>(0.5), full<(1, 1, 256, 256), f32>(2.0))
// }
