/// Check that after SimplifyInference a batch norm after a constant-weight conv2d folds into one constant weight and bias.
// pipeline: SimplifyInference,FoldConstant,FoldScaleAxis
def @main(%x: Tensor[(1, 1, 3, 3), f32]) -> Tensor[(1, 2, 2, 2), f32] {
  let %c = conv2d(%x, tensor<(2, 1, 2, 2), f32>[1.0, 2.0, 3.0, 4.0, -1.0, 0.5, 0.25, 2.0]);
  let %bn = batch_norm(%c, tensor<(2,), f32>[2.0, 0.5], tensor<(2,), f32>[1.0, -1.0], tensor<(2,), f32>[0.0, 1.0], tensor<(2,), f32>[3.0, 0.0], epsilon=1.0);
  %bn.0
}
// CHECK:
// def @main(%x: Tensor[(1, 1, 3, 3), f32]) -> Tensor[(1, 2, 2, 2), f32] {
//   let %c: Tensor[(1, 2, 2, 2), f32] = conv2d(%x, tensor<(2, 1, 2, 2), f32>[1.0, 2.0, 3.0, 4.0, -0.5, 0.25, 0.125, 1.0]);
//   let %bn: Tensor[(1, 2, 2, 2), f32] = add(%c, tensor<(2, 1, 1), f32>[1.0, -1.5]);
//   %bn
// }
// -----
/// Check that backward and forward folding both run and constant weights are folded.
def @main(%x: Tensor[(4, 3), f32]) -> Tensor[(4, 2), f32] {
  let %d = dense(multiply(%x, tensor<(3,), f32>[1.0, 2.0, 4.0]), tensor<(2, 3), f32>[1.0, 1.0, 1.0, 2.0, 2.0, 2.0]);
  multiply(%d, tensor<(2,), f32>[10.0, 0.5])
}
// CHECK:
// def @main(%x: Tensor[(4, 3), f32]) -> Tensor[(4, 2), f32] {
//   let %d: Tensor[(4, 2), f32] = dense(%x, tensor<(2, 3), f32>[10.0, 20.0, 40.0, 1.0, 2.0, 4.0]);
//   %d
// }
