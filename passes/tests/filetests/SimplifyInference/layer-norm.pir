/// Check that layer_norm expands to mean / centre / variance bindings over its axis.
def @main(%x: Tensor[(2, 3), f32], %g: Tensor[(3,), f32], %b: Tensor[(3,), f32]) -> Tensor[(2, 3), f32] {
  layer_norm(%x, %g, %b, epsilon=0.01)
}
// CHECK:
// def @main(%x: Tensor[(2, 3), f32], %g: Tensor[(3,), f32], %b: Tensor[(3,), f32]) -> Tensor[(2, 3), f32] {
//   let %ln_c0: Tensor[(2, 3), f32] = subtract(%x, mean(%x, axis=[1], keepdims=true));
//   let %ln_v0: Tensor[(2, 1), f32] = mean(multiply(%ln_c0, %ln_c0), axis=[1], keepdims=true);
//   add(multiply(divide(%ln_c0, sqrt(add(%ln_v0, 0.01f))), %g), %b)
// }
// -----
/// Check that a compound layer_norm input is bound once and fresh names avoid existing ones.
def @main(%x: Tensor[(2, 3), f32], %g: Tensor[(2,), f32], %b: Tensor[(2,), f32]) -> Tensor[(2, 3), f32] {
  let %ln_c0 = relu(%x);
  layer_norm(exp(%ln_c0), %g, %b, axis=0)
}
// CHECK:
// def @main(%x: Tensor[(2, 3), f32], %g: Tensor[(2,), f32], %b: Tensor[(2,), f32]) -> Tensor[(2, 3), f32] {
//   let %ln_c0: Tensor[(2, 3), f32] = relu(%x);
//   {
//     let %ln_x1: Tensor[(2, 3), f32] = exp(%ln_c0);
//     let %ln_c1: Tensor[(2, 3), f32] = subtract(%ln_x1, mean(%ln_x1, axis=[0], keepdims=true));
//     let %ln_v1: Tensor[(1, 3), f32] = mean(multiply(%ln_c1, %ln_c1), axis=[0], keepdims=true);
//     add(multiply(divide(%ln_c1, sqrt(add(%ln_v1, 1e-5f))), reshape(%g, newshape=[2, 1])), reshape(%b, newshape=[2, 1]))
//   }
// }
