/// Check that a computation repeated inside a nested block merges into the one outside it, while two identical stateful calls stay apart.
def @main(%x: Tensor[(2,), f32]) -> (Tensor[(2,), f32], Tensor[(2,), f32], Tensor[(2,), f32], Tensor[(2,), f32]) {
  let %a = relu(%x);
  let %r = {
    let %b = relu(%x);
    %b
  };
  let %s1 = random_uniform(shape=[2]);
  let %s2 = random_uniform(shape=[2]);
  (%a, %r, %s1, %s2)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> (Tensor[(2,), f32], Tensor[(2,), f32], Tensor[(2,), f32], Tensor[(2,), f32]) {
//   let %a: Tensor[(2,), f32] = relu(%x);
//   let %r: Tensor[(2,), f32] = %a;
//   let %s1: Tensor[(2,), f32] = random_uniform(shape=[2]);
//   let %s2: Tensor[(2,), f32] = random_uniform(shape=[2]);
//   (%a, %r, %s1, %s2)
// }
