/// Check that batch_norm(...).0 on the channel axis of NCHW data expands with parameters reshaped to (C, 1, 1).
def @main(%x: Tensor[(1, 2, 3, 3), f32], %g: Tensor[(2,), f32], %b: Tensor[(2,), f32], %m: Tensor[(2,), f32], %v: Tensor[(2,), f32]) -> Tensor[(1, 2, 3, 3), f32] {
  batch_norm(%x, %g, %b, %m, %v, axis=1, epsilon=0.001).0
}
// CHECK:
// def @main(%x: Tensor[(1, 2, 3, 3), f32], %g: Tensor[(2,), f32], %b: Tensor[(2,), f32], %m: Tensor[(2,), f32], %v: Tensor[(2,), f32]) -> Tensor[(1, 2, 3, 3), f32] {
//   add(multiply(%x, reshape(divide(%g, sqrt(add(%v, 0.001f))), newshape=[2, 1, 1])), reshape(subtract(%b, multiply(%m, divide(%g, sqrt(add(%v, 0.001f))))), newshape=[2, 1, 1]))
// }
// -----
/// Check that batch_norm on the last axis uses its 1-d parameters without reshapes and the default epsilon.
def @main(%x: Tensor[(4, 2), f32], %g: Tensor[(2,), f32], %b: Tensor[(2,), f32], %m: Tensor[(2,), f32], %v: Tensor[(2,), f32]) -> Tensor[(4, 2), f32] {
  batch_norm(%x, %g, %b, %m, %v, axis=-1).0
}
// CHECK:
// def @main(%x: Tensor[(4, 2), f32], %g: Tensor[(2,), f32], %b: Tensor[(2,), f32], %m: Tensor[(2,), f32], %v: Tensor[(2,), f32]) -> Tensor[(4, 2), f32] {
//   add(multiply(%x, divide(%g, sqrt(add(%v, 1e-5f)))), subtract(%b, multiply(%m, divide(%g, sqrt(add(%v, 1e-5f))))))
// }
// -----
/// Check that a compound gamma is written once, in the (x - mean) * scale + beta form.
def @main(%x: Tensor[(4, 2), f32], %g: Tensor[(2,), f32], %b: Tensor[(2,), f32], %m: Tensor[(2,), f32], %v: Tensor[(2,), f32]) -> Tensor[(4, 2), f32] {
  batch_norm(%x, exp(%g), %b, %m, %v, axis=1).0
}
// CHECK:
// def @main(%x: Tensor[(4, 2), f32], %g: Tensor[(2,), f32], %b: Tensor[(2,), f32], %m: Tensor[(2,), f32], %v: Tensor[(2,), f32]) -> Tensor[(4, 2), f32] {
//   add(multiply(subtract(%x, %m), divide(exp(%g), sqrt(add(%v, 1e-5f)))), %b)
// }
// -----
/// Check that projections .1 and .2 of batch_norm pass the mean and variance through.
def @main(%x: Tensor[(4, 2), f32], %g: Tensor[(2,), f32], %b: Tensor[(2,), f32], %m: Tensor[(2,), f32], %v: Tensor[(2,), f32]) -> (Tensor[(2,), f32], Tensor[(2,), f32]) {
  (batch_norm(%x, %g, %b, %m, %v, axis=1).1, batch_norm(%x, %g, %b, %m, %v, axis=1).2)
}
// CHECK:
// def @main(%x: Tensor[(4, 2), f32], %g: Tensor[(2,), f32], %b: Tensor[(2,), f32], %m: Tensor[(2,), f32], %v: Tensor[(2,), f32]) -> (Tensor[(2,), f32], Tensor[(2,), f32]) {
//   (%m, %v)
// }
// -----
/// Check that a let-bound batch_norm used only through projections becomes its first field, .0 the variable and .1 the mean.
def @main(%x: Tensor[(4, 2), f32], %g: Tensor[(2,), f32], %b: Tensor[(2,), f32], %m: Tensor[(2,), f32], %v: Tensor[(2,), f32]) -> (Tensor[(4, 2), f32], Tensor[(2,), f32]) {
  let %bn = batch_norm(%x, %g, %b, %m, %v);
  let %y = %bn.0;
  let %mean = %bn.1;
  (%y, %mean)
}
// CHECK:
// def @main(%x: Tensor[(4, 2), f32], %g: Tensor[(2,), f32], %b: Tensor[(2,), f32], %m: Tensor[(2,), f32], %v: Tensor[(2,), f32]) -> (Tensor[(4, 2), f32], Tensor[(2,), f32]) {
//   let %bn: Tensor[(4, 2), f32] = add(multiply(%x, divide(%g, sqrt(add(%v, 1e-5f)))), subtract(%b, multiply(%m, divide(%g, sqrt(add(%v, 1e-5f))))));
//   let %y: Tensor[(4, 2), f32] = %bn;
//   let %mean: Tensor[(2,), f32] = %m;
//   (%y, %mean)
// }
// -----
/// Check that a let-bound batch_norm whose variable is also used whole becomes the tuple (out, mean, var).
def @main(%x: Tensor[(4, 2), f32], %g: Tensor[(2,), f32], %b: Tensor[(2,), f32], %m: Tensor[(2,), f32], %v: Tensor[(2,), f32]) -> ((Tensor[(4, 2), f32], Tensor[(2,), f32], Tensor[(2,), f32]), Tensor[(2,), f32]) {
  let %bn = batch_norm(%x, %g, %b, %m, %v);
  (%bn, %bn.2)
}
// CHECK:
// def @main(%x: Tensor[(4, 2), f32], %g: Tensor[(2,), f32], %b: Tensor[(2,), f32], %m: Tensor[(2,), f32], %v: Tensor[(2,), f32]) -> ((Tensor[(4, 2), f32], Tensor[(2,), f32], Tensor[(2,), f32]), Tensor[(2,), f32]) {
//   let %bn: (Tensor[(4, 2), f32], Tensor[(2,), f32], Tensor[(2,), f32]) = (add(multiply(%x, divide(%g, sqrt(add(%v, 1e-5f)))), subtract(%b, multiply(%m, divide(%g, sqrt(add(%v, 1e-5f)))))), %m, %v);
//   (%bn, %v)
// }
// -----
/// Check that a projection which would drop a stateful argument is left alone.
def @main(%x: Tensor[(4, 2), f32], %g: Tensor[(2,), f32], %b: Tensor[(2,), f32], %v: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  batch_norm(%x, %g, %b, random_uniform(shape=[2]), %v).2
}
// CHECK:
// def @main(%x: Tensor[(4, 2), f32], %g: Tensor[(2,), f32], %b: Tensor[(2,), f32], %v: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   batch_norm(%x, %g, %b, random_uniform(shape=[2]), %v).2
// }
