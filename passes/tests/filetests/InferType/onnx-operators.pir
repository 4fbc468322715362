/// Check that the elementwise, reduction and indexing operators added for ONNX import are typed through their relations.
def @main(%x: Tensor[(2, 3), f32], %i: Tensor[(2,), i64], %b: Tensor[(2, 3), bool]) -> Tensor[(2, 3), f32] {
  let %c = clip(%x, a_min=-1.0, a_max=1.0);
  let %h = hard_sigmoid(%c, alpha=0.5);
  let %g = gelu(%h, approximate="tanh");
  let %e = erf(hard_swish(abs(reciprocal(%g))));
  let %n = logical_not(%b);
  let %m = min(%e, axis=[1], keepdims=true);
  let %t = take(%x, %i, axis=1);
  let %s = strided_slice(%x, begin=[-1], end=[-4], strides=[-1], axes=[1]);
  let %p = pad(%x, pad_width=[0, 1, 0, 2], pad_mode="reflect");
  let %u = trilu(%x, upper=false, k=1);
  %u
}
// CHECK:
// def @main(%x: Tensor[(2, 3), f32], %i: Tensor[(2,), i64], %b: Tensor[(2, 3), bool]) -> Tensor[(2, 3), f32] {
//   let %c: Tensor[(2, 3), f32] = clip(%x, a_max=1.0, a_min=-1.0);
//   let %h: Tensor[(2, 3), f32] = hard_sigmoid(%c, alpha=0.5);
//   let %g: Tensor[(2, 3), f32] = gelu(%h, approximate="tanh");
//   let %e: Tensor[(2, 3), f32] = erf(hard_swish(abs(reciprocal(%g))));
//   let %n: Tensor[(2, 3), bool] = logical_not(%b);
//   let %m: Tensor[(2, 1), f32] = min(%e, axis=[1], keepdims=true);
//   let %t: Tensor[(2, 2), f32] = take(%x, %i, axis=1);
//   let %s: Tensor[(2, 3), f32] = strided_slice(%x, axes=[1], begin=[-1], end=[-4], strides=[-1]);
//   let %p: Tensor[(2, 6), f32] = pad(%x, pad_mode="reflect", pad_width=[0, 1, 0, 2]);
//   let %u: Tensor[(2, 3), f32] = trilu(%x, k=1, upper=false);
//   %u
// }
// -----
/// Check that the NCHW operators added for ONNX import are typed, including ceil_mode pooling and resize2d.
def @main(%x: Tensor[(1, 2, 4, 4), f32], %w: Tensor[(2, 3, 3, 3), f32]) -> Tensor[(1, 2, 8, 6), f32] {
  let %ct = conv2d_transpose(%x, %w, strides=[2], padding=[1, 1, 1, 1], output_padding=[1]);
  let %mp = max_pool2d(%x, pool_size=[3, 3], strides=[2, 2], ceil_mode=true);
  let %ap = avg_pool2d(%x, pool_size=[2], padding=[1], count_include_pad=true);
  let %ga = global_avg_pool2d(%x);
  let %gm = global_max_pool2d(%x);
  let %l = lrn(%x, size=3, alpha=0.0001, beta=0.75, bias=1.0);
  let %r = resize2d(%x, size=[8, 6], method="cubic", coordinate_transformation_mode="align_corners", cubic_alpha=-0.5, exclude_outside=true);
  %r
}
// CHECK:
// def @main(%x: Tensor[(1, 2, 4, 4), f32], %w: Tensor[(2, 3, 3, 3), f32]) -> Tensor[(1, 2, 8, 6), f32] {
//   let %ct: Tensor[(1, 3, 8, 8), f32] = conv2d_transpose(%x, %w, output_padding=[1], padding=[1, 1, 1, 1], strides=[2]);
//   let %mp: Tensor[(1, 2, 2, 2), f32] = max_pool2d(%x, ceil_mode=true, pool_size=[3, 3], strides=[2, 2]);
//   let %ap: Tensor[(1, 2, 5, 5), f32] = avg_pool2d(%x, count_include_pad=true, padding=[1], pool_size=[2]);
//   let %ga: Tensor[(1, 2, 1, 1), f32] = global_avg_pool2d(%x);
//   let %gm: Tensor[(1, 2, 1, 1), f32] = global_max_pool2d(%x);
//   let %l: Tensor[(1, 2, 4, 4), f32] = lrn(%x, alpha=0.0001, beta=0.75, bias=1.0, size=3);
//   let %r: Tensor[(1, 2, 8, 6), f32] = resize2d(%x, coordinate_transformation_mode="align_corners", cubic_alpha=-0.5, exclude_outside=true, method="cubic", size=[8, 6]);
//   %r
// }
// -----
/// Check that matmul broadcasts batch dimensions and drops the axes of 1-d operands, and split takes split points.
def @main(%a: Tensor[(2, 1, 4, 5), f32], %b: Tensor[(3, 5, 6), f32], %v: Tensor[(5,), f32], %x: Tensor[(7,), f32]) -> Tensor[(2, 3, 4, 6), f32] {
  let %m = matmul(%a, %b);
  let %mv = matmul(%a, %v);
  let %s = split(%x, indices=[2, 5]);
  %m
}
// CHECK:
// def @main(%a: Tensor[(2, 1, 4, 5), f32], %b: Tensor[(3, 5, 6), f32], %v: Tensor[(5,), f32], %x: Tensor[(7,), f32]) -> Tensor[(2, 3, 4, 6), f32] {
//   let %m: Tensor[(2, 3, 4, 6), f32] = matmul(%a, %b);
//   let %mv: Tensor[(2, 1, 4), f32] = matmul(%a, %v);
//   let %s: (Tensor[(2,), f32], Tensor[(3,), f32], Tensor[(2,), f32]) = split(%x, indices=[2, 5]);
//   %m
// }
// -----
/// Check that a bad attribute of a new operator is a type error naming the operator.
def @main(%x: Tensor[(1, 1, 2, 2), f32]) -> Tensor[(1, 1, 4, 4), f32] {
  resize2d(%x, size=[4, 4], method="bilinear")
}
// CHECK:
// error: InferType @main: resize2d: `method` must be one of nearest, linear, cubic, got "bilinear"
// -----
/// Check that a pool window larger than the padded input is a type error.
def @main(%x: Tensor[(1, 1, 2, 2), f32]) -> Tensor[(1, 1, 1, 1), f32] {
  max_pool2d(%x, pool_size=[3])
}
// CHECK:
// error: InferType @main: max_pool2d: window extent 3 is larger than the padded input 2
