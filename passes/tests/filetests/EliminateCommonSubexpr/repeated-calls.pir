/// Check that a repeated pure computation is merged into the first.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = multiply(%x, 0.5f);
  let %b = multiply(%x, 0.5f);
  add(%a, %b)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %a: Tensor[(2,), f32] = multiply(%x, 0.5f);
//   add(%a, %a)
// }
// -----
/// Check that computations with different attributes or constants are not merged.
def @main(%x: Tensor[(2, 3), f32]) -> (Tensor[(2,), f32], Tensor[(3,), f32], Tensor[(2, 3), f32], Tensor[(2, 3), f32]) {
  let %a = sum(%x, axis=[1]);
  let %b = sum(%x, axis=[0]);
  let %c = add(%x, 1.0f);
  let %d = add(%x, 2.0f);
  (%a, %b, %c, %d)
}
// CHECK:
// def @main(%x: Tensor[(2, 3), f32]) -> (Tensor[(2,), f32], Tensor[(3,), f32], Tensor[(2, 3), f32], Tensor[(2, 3), f32]) {
//   let %a: Tensor[(2,), f32] = sum(%x, axis=[1]);
//   let %b: Tensor[(3,), f32] = sum(%x, axis=[0]);
//   let %c: Tensor[(2, 3), f32] = add(%x, 1.0f);
//   let %d: Tensor[(2, 3), f32] = add(%x, 2.0f);
//   (%a, %b, %c, %d)
// }
// -----
/// Check that stateful calls are never merged.
def @main() -> Tensor[(2,), f32] {
  let %r1 = random_uniform(shape=[2]);
  let %r2 = random_uniform(shape=[2]);
  add(%r1, %r2)
}
// CHECK:
// def @main() -> Tensor[(2,), f32] {
//   let %r1: Tensor[(2,), f32] = random_uniform(shape=[2]);
//   let %r2: Tensor[(2,), f32] = random_uniform(shape=[2]);
//   add(%r1, %r2)
// }
// -----
/// Check that computations in sibling if-branches are not merged with each other.
def @main(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  if (%c) { let %a = exp(%x); %a } else { let %b = exp(%x); %b }
}
// CHECK:
// def @main(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   if (%c) {
//     let %a: Tensor[(2,), f32] = exp(%x);
//     %a
//   } else {
//     let %b: Tensor[(2,), f32] = exp(%x);
//     %b
//   }
// }
