/// Check that a channel scale feeding conv2d data folds into the weight's input channels.
def @main(%x: Tensor[(1, 2, 4, 4), f32], %w: Tensor[(3, 2, 3, 3), f32]) -> Tensor[(1, 3, 4, 4), f32] {
  let %xs = multiply(%x, tensor<(2, 1, 1), f32>[0.5, 2.0]);
  let %c = conv2d(%xs, %w, padding=[1]);
  %c
}
// CHECK:
// def @main(%x: Tensor[(1, 2, 4, 4), f32], %w: Tensor[(3, 2, 3, 3), f32]) -> Tensor[(1, 3, 4, 4), f32] {
//   let %xs: Tensor[(1, 2, 4, 4), f32] = %x;
//   let %c: Tensor[(1, 3, 4, 4), f32] = conv2d(%xs, multiply(%w, tensor<(2, 1, 1), f32>[0.5, 2.0]), padding=[1]);
//   %c
// }
// -----
/// Check that a scale feeding dense data folds into the weight columns, with a rank-3 scale reshaped to 1-d.
def @main(%x: Tensor[(2, 4, 3), f32], %w: Tensor[(5, 3), f32]) -> Tensor[(2, 4, 5), f32] {
  dense(multiply(full<(1, 1, 3), f32>(0.5), %x), %w)
}
// CHECK:
// def @main(%x: Tensor[(2, 4, 3), f32], %w: Tensor[(5, 3), f32]) -> Tensor[(2, 4, 5), f32] {
//   dense(%x, multiply(%w, reshape(full<(1, 1, 3), f32>(0.5), newshape=[3])))
// }
// -----
/// Check that a grouped conv2d, a scaled value with another user and a non-channel scale are left alone.
def @main(%x: Tensor[(1, 2, 4, 4), f32], %w: Tensor[(2, 1, 3, 3), f32], %v: Tensor[(3, 2, 3, 3), f32]) -> (Tensor[(1, 2, 2, 2), f32], Tensor[(1, 3, 2, 2), f32], Tensor[(1, 2, 4, 4), f32], Tensor[(1, 3, 2, 2), f32]) {
  let %g = conv2d(multiply(%x, tensor<(2, 1, 1), f32>[0.5, 2.0]), %w, groups=2);
  let %xs = multiply(%x, tensor<(2, 1, 1), f32>[0.5, 2.0]);
  let %c = conv2d(%xs, %v);
  let %h = conv2d(multiply(%x, tensor<(4,), f32>[1.0, 2.0, 3.0, 4.0]), %v);
  (%g, %c, %xs, %h)
}
// CHECK:
// def @main(%x: Tensor[(1, 2, 4, 4), f32], %w: Tensor[(2, 1, 3, 3), f32], %v: Tensor[(3, 2, 3, 3), f32]) -> (Tensor[(1, 2, 2, 2), f32], Tensor[(1, 3, 2, 2), f32], Tensor[(1, 2, 4, 4), f32], Tensor[(1, 3, 2, 2), f32]) {
//   let %g: Tensor[(1, 2, 2, 2), f32] = conv2d(multiply(%x, tensor<(2, 1, 1), f32>[0.5, 2.0]), %w, groups=2);
//   let %xs: Tensor[(1, 2, 4, 4), f32] = multiply(%x, tensor<(2, 1, 1), f32>[0.5, 2.0]);
//   let %c: Tensor[(1, 3, 2, 2), f32] = conv2d(%xs, %v);
//   let %h: Tensor[(1, 3, 2, 2), f32] = conv2d(multiply(%x, tensor<(4,), f32>[1.0, 2.0, 3.0, 4.0]), %v);
//   (%g, %c, %xs, %h)
// }
// -----
/// Check that two stacked input scales both fold in one run.
def @main(%x: Tensor[(4, 3), f32], %w: Tensor[(2, 3), f32]) -> Tensor[(4, 2), f32] {
  dense(multiply(multiply(%x, tensor<(3,), f32>[1.0, 2.0, 3.0]), 0.5f), %w)
}
// CHECK:
// def @main(%x: Tensor[(4, 3), f32], %w: Tensor[(2, 3), f32]) -> Tensor[(4, 2), f32] {
//   dense(%x, multiply(multiply(%w, 0.5f), tensor<(3,), f32>[1.0, 2.0, 3.0]))
// }
// -----
/// Check that a positive scale folds through relu (the relu stays) and a scale with a negative element does not.
def @main(%x: Tensor[(4, 3), f32], %w: Tensor[(2, 3), f32]) -> (Tensor[(4, 2), f32], Tensor[(4, 2), f32]) {
  let %a = dense(relu(multiply(%x, tensor<(3,), f32>[1.0, 2.0, 3.0])), %w);
  let %b = dense(relu(multiply(%x, tensor<(3,), f32>[1.0, -2.0, 3.0])), %w);
  (%a, %b)
}
// CHECK:
// def @main(%x: Tensor[(4, 3), f32], %w: Tensor[(2, 3), f32]) -> (Tensor[(4, 2), f32], Tensor[(4, 2), f32]) {
//   let %a: Tensor[(4, 2), f32] = dense(relu(%x), multiply(%w, tensor<(3,), f32>[1.0, 2.0, 3.0]));
//   let %b: Tensor[(4, 2), f32] = dense(relu(multiply(%x, tensor<(3,), f32>[1.0, -2.0, 3.0])), %w);
//   (%a, %b)
// }
