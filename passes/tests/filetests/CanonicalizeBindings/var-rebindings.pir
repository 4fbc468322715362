/// Check that var-to-var rebindings are removed.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = relu(%x);
  let %b = %a;
  let %c = %b;
  exp(%c)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %a = relu(%x);
//   exp(%a)
// }
// -----
/// Check that a binding of a computation is kept.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = relu(%x);
  exp(%a)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %a = relu(%x);
//   exp(%a)
// }
// -----
/// Check that rebindings made by an earlier pass in the same run are removed (regression: the
/// dead copy of a rewritten block made every variable look bound twice).
// pipeline: SimplifyExpr,CanonicalizeBindings
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = multiply(%x, 1.0f);
  let %b = relu(%a);
  exp(%b)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %b: Tensor[(2,), f32] = relu(%x);
//   exp(%b)
// }
// -----
/// Check that rebindings of a variable, a global and a constant are replaced by what they name at every use, including a call through the global's variable.
def @f(%y: Tensor[(), f32]) -> Tensor[(), f32] {
  %y
}
def @main(%x: Tensor[(), f32]) -> Tensor[(), f32] {
  let %a = %x;
  let %b = %a;
  let %g = @f;
  let %k = 2.0f;
  %g(add(%b, %k))
}
// CHECK:
// def @f(%y: Tensor[(), f32]) -> Tensor[(), f32] {
//   %y
// }
//
// def @main(%x: Tensor[(), f32]) -> Tensor[(), f32] {
//   @f(add(%x, 2.0f))
// }
