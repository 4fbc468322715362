/// Check that binding variables get the inferred types, through broadcasting.
def @main(%x: Tensor[(2, 3), f32], %b: Tensor[(3,), f32]) -> Tensor[(2, 3), f32] {
  let %a = add(%x, %b);
  let %s = sum(%a, axis=[1]);
  let %t = (%a, %s);
  %t.0
}
// CHECK:
// def @main(%x: Tensor[(2, 3), f32], %b: Tensor[(3,), f32]) -> Tensor[(2, 3), f32] {
//   let %a: Tensor[(2, 3), f32] = add(%x, %b);
//   let %s: Tensor[(2,), f32] = sum(%a, axis=[1]);
//   let %t: (Tensor[(2, 3), f32], Tensor[(2,), f32]) = (%a, %s);
//   %t.0
// }
// -----
/// Check that calls between functions are typed through the callee's signature.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %y = @helper(%x);
  %y
}

def @helper(%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  relu(%y)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %y: Tensor[(2,), f32] = @helper(%x);
//   %y
// }
//
// def @helper(%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   relu(%y)
// }
