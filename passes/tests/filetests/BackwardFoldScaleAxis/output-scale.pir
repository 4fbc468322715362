/// Check that a channel scale after conv2d, bias_add and relu folds into the weight and the bias.
def @main(%x: Tensor[(1, 2, 4, 4), f32], %w: Tensor[(3, 2, 3, 3), f32], %b: Tensor[(3,), f32]) -> Tensor[(1, 3, 2, 2), f32] {
  let %c = conv2d(%x, %w);
  let %d = bias_add(%c, %b);
  let %r = relu(%d);
  let %m = multiply(%r, tensor<(3, 1, 1), f32>[0.5, 2.0, 4.0]);
  %m
}
// CHECK:
// def @main(%x: Tensor[(1, 2, 4, 4), f32], %w: Tensor[(3, 2, 3, 3), f32], %b: Tensor[(3,), f32]) -> Tensor[(1, 3, 2, 2), f32] {
//   let %c: Tensor[(1, 3, 2, 2), f32] = conv2d(%x, multiply(%w, reshape(tensor<(3, 1, 1), f32>[0.5, 2.0, 4.0], newshape=[3, 1, 1, 1])));
//   let %d: Tensor[(1, 3, 2, 2), f32] = bias_add(%c, multiply(%b, reshape(tensor<(3, 1, 1), f32>[0.5, 2.0, 4.0], newshape=[3])));
//   let %r: Tensor[(1, 3, 2, 2), f32] = relu(%d);
//   let %m: Tensor[(1, 3, 2, 2), f32] = %r;
//   %m
// }
// -----
/// Check that a scale on the left of multiply after dense folds into the weight rows.
def @main(%x: Tensor[(4, 3), f32], %w: Tensor[(2, 3), f32]) -> Tensor[(4, 2), f32] {
  multiply(tensor<(2,), f32>[3.0, -1.0], dense(%x, %w))
}
// CHECK:
// def @main(%x: Tensor[(4, 3), f32], %w: Tensor[(2, 3), f32]) -> Tensor[(4, 2), f32] {
//   dense(%x, multiply(%w, reshape(tensor<(2,), f32>[3.0, -1.0], newshape=[2, 1])))
// }
// -----
/// Check that a let-bound constant scale and a scalar scale fold.
def @main(%x: Tensor[(4, 3), f32], %w: Tensor[(2, 3), f32]) -> Tensor[(4, 2), f32] {
  let %s = tensor<(1, 2), f32>[3.0, 5.0];
  let %y = dense(%x, %w);
  multiply(multiply(%y, %s), 2.0f)
}
// CHECK:
// def @main(%x: Tensor[(4, 3), f32], %w: Tensor[(2, 3), f32]) -> Tensor[(4, 2), f32] {
//   let %s: Tensor[(1, 2), f32] = tensor<(1, 2), f32>[3.0, 5.0];
//   let %y: Tensor[(4, 2), f32] = dense(%x, multiply(multiply(%w, reshape(tensor<(1, 2), f32>[3.0, 5.0], newshape=[2, 1])), 2.0f));
//   %y
// }
// -----
/// Check that a scale bound after the conv2d is written as its constant in the weight, never as a variable used before its binding.
def @main(%x: Tensor[(1, 2, 4, 4), f32], %w: Tensor[(3, 2, 3, 3), f32]) -> Tensor[(1, 3, 2, 2), f32] {
  let %c = conv2d(%x, %w);
  let %s = tensor<(3, 1, 1), f32>[0.5, 2.0, 4.0];
  multiply(%c, %s)
}
// CHECK:
// def @main(%x: Tensor[(1, 2, 4, 4), f32], %w: Tensor[(3, 2, 3, 3), f32]) -> Tensor[(1, 3, 2, 2), f32] {
//   let %c: Tensor[(1, 3, 2, 2), f32] = conv2d(%x, multiply(%w, reshape(tensor<(3, 1, 1), f32>[0.5, 2.0, 4.0], newshape=[3, 1, 1, 1])));
//   let %s: Tensor[(3, 1, 1), f32] = tensor<(3, 1, 1), f32>[0.5, 2.0, 4.0];
//   %c
// }
// -----
/// Check that a scale with a negative element does not fold through relu.
def @main(%x: Tensor[(4, 3), f32], %w: Tensor[(2, 3), f32]) -> Tensor[(4, 2), f32] {
  multiply(relu(dense(%x, %w)), tensor<(2,), f32>[3.0, -1.0])
}
// CHECK:
// def @main(%x: Tensor[(4, 3), f32], %w: Tensor[(2, 3), f32]) -> Tensor[(4, 2), f32] {
//   multiply(relu(dense(%x, %w)), tensor<(2,), f32>[3.0, -1.0])
// }
// -----
/// Check that a conv2d output with another user, a non-constant scale, a scale along the wrong axis and a non-finite scale are left alone.
def @main(%x: Tensor[(1, 2, 4, 4), f32], %w: Tensor[(3, 2, 3, 3), f32], %s: Tensor[(3, 1, 1), f32]) -> (Tensor[(1, 3, 2, 2), f32], Tensor[(1, 3, 2, 2), f32], Tensor[(1, 3, 2, 2), f32], Tensor[(1, 3, 2, 2), f32], Tensor[(1, 3, 2, 2), f32]) {
  let %c = conv2d(%x, %w);
  let %a = multiply(%c, tensor<(3, 1, 1), f32>[1.0, 2.0, 3.0]);
  let %b = multiply(conv2d(%x, %w), %s);
  let %d = multiply(conv2d(%x, %w), tensor<(2,), f32>[1.0, 2.0]);
  let %e = multiply(conv2d(%x, %w), tensor<(3, 1, 1), f32>[1.0, inf, 3.0]);
  (%a, %c, %b, %d, %e)
}
// CHECK:
// def @main(%x: Tensor[(1, 2, 4, 4), f32], %w: Tensor[(3, 2, 3, 3), f32], %s: Tensor[(3, 1, 1), f32]) -> (Tensor[(1, 3, 2, 2), f32], Tensor[(1, 3, 2, 2), f32], Tensor[(1, 3, 2, 2), f32], Tensor[(1, 3, 2, 2), f32], Tensor[(1, 3, 2, 2), f32]) {
//   let %c: Tensor[(1, 3, 2, 2), f32] = conv2d(%x, %w);
//   let %a: Tensor[(1, 3, 2, 2), f32] = multiply(%c, tensor<(3, 1, 1), f32>[1.0, 2.0, 3.0]);
//   let %b: Tensor[(1, 3, 2, 2), f32] = multiply(conv2d(%x, %w), %s);
//   let %d: Tensor[(1, 3, 2, 2), f32] = multiply(conv2d(%x, %w), tensor<(2,), f32>[1.0, 2.0]);
//   let %e: Tensor[(1, 3, 2, 2), f32] = multiply(conv2d(%x, %w), tensor<(3, 1, 1), f32>[1.0, inf, 3.0]);
//   (%a, %c, %b, %d, %e)
// }
// -----
/// Check that a multiply which broadcasts its input to a bigger shape is left alone.
def @main(%x: Tensor[(4, 3), f32], %w: Tensor[(2, 3), f32]) -> Tensor[(5, 4, 2), f32] {
  multiply(dense(%x, %w), full<(5, 1, 2), f32>(2.0))
}
// CHECK:
// def @main(%x: Tensor[(4, 3), f32], %w: Tensor[(2, 3), f32]) -> Tensor[(5, 4, 2), f32] {
//   multiply(dense(%x, %w), full<(5, 1, 2), f32>(2.0))
// }
