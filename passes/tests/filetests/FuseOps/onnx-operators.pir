/// Check that conv2d_transpose and max_pool2d absorb the elementwise calls after them, and lrn stays alone.
def @main(%x: Tensor[(1, 1, 2, 2), f32], %w: Tensor[(1, 1, 2, 2), f32]) -> Tensor[(1, 1, 2, 2), f32] {
  let %c = conv2d_transpose(%x, %w);
  let %r = clip(%c, a_min=0.0, a_max=6.0);
  let %m = max_pool2d(%r, pool_size=[2]);
  let %h = hard_swish(%m);
  let %l = lrn(%h, size=1);
  %l
}
// CHECK:
// def @main(%x: Tensor[(1, 1, 2, 2), f32], %w: Tensor[(1, 1, 2, 2), f32]) -> Tensor[(1, 1, 2, 2), f32] {
//   let %r: Tensor[(1, 1, 3, 3), f32] = #[Primitive] fn (%p0: Tensor[(1, 1, 2, 2), f32], %p1: Tensor[(1, 1, 2, 2), f32]) -> Tensor[(1, 1, 3, 3), f32] {
//     clip(conv2d_transpose(%p0, %p1), a_max=6.0, a_min=0.0)
//   }(%x, %w);
//   let %h: Tensor[(1, 1, 2, 2), f32] = #[Primitive] fn (%p2: Tensor[(1, 1, 3, 3), f32]) -> Tensor[(1, 1, 2, 2), f32] {
//     hard_swish(max_pool2d(%p2, pool_size=[2]))
//   }(%r);
//   let %l: Tensor[(1, 1, 2, 2), f32] = lrn(%h, size=1);
//   %l
// }
// -----
/// Check that injective take, pad and strided_slice fuse with elementwise neighbours, and a reduction takes its injective input.
def @main(%x: Tensor[(4, 3), f32], %i: Tensor[(2,), i32]) -> Tensor[(2,), f32] {
  let %t = take(abs(%x), %i);
  let %p = pad(%t, pad_width=[0, 1, 0, 1], pad_value=1.0);
  let %s = strided_slice(%p, begin=[0], end=[2], axes=[1]);
  min(erf(%s), axis=[1])
}
// CHECK:
// def @main(%x: Tensor[(4, 3), f32], %i: Tensor[(2,), i32]) -> Tensor[(2,), f32] {
//   #[Primitive] fn (%p0: Tensor[(4, 3), f32], %p1: Tensor[(2,), i32]) -> Tensor[(2,), f32] {
//     min(erf(strided_slice(pad(take(abs(%p0), %p1), pad_value=1.0, pad_width=[0, 1, 0, 1]), axes=[1], begin=[0], end=[2])), axis=[1])
//   }(%x, %i)
// }
