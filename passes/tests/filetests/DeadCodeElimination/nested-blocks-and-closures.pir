/// Check that an outer binding used only by a dead binding of a nested block is removed with it.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = relu(%x);
  let %r = {
    let %d = relu(%a);
    %x
  };
  %r
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %r: Tensor[(2,), f32] = %x;
//   %r
// }
// -----
/// Check that unused bindings inside a closure body are removed while the outer value the closure captures is kept.
def @main(%x: Tensor[(2,), f32]) -> fn(Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = relu(%x);
  let %f = fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
    let %d = relu(%y);
    let %e = add(%y, %a);
    %e
  };
  %f
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> fn(Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %a: Tensor[(2,), f32] = relu(%x);
//   let %f: fn(Tensor[(2,), f32]) -> Tensor[(2,), f32] = fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//     let %e: Tensor[(2,), f32] = add(%y, %a);
//     %e
//   };
//   %f
// }
