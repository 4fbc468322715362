/// Check that conv2d absorbs the following bias_add and relu, and transpose fuses into the reduction after it.
def @main(%x: Tensor[(1, 2, 5, 5), f32], %w: Tensor[(3, 2, 3, 3), f32], %b: Tensor[(3,), f32]) -> Tensor[(1, 3, 3), f32] {
  let %c = conv2d(%x, %w);
  let %d = bias_add(%c, %b);
  let %r = relu(%d);
  let %t = transpose(%r, axes=[0, 2, 3, 1]);
  let %s = sum(%t, axis=[3]);
  %s
}
// CHECK:
// def @main(%x: Tensor[(1, 2, 5, 5), f32], %w: Tensor[(3, 2, 3, 3), f32], %b: Tensor[(3,), f32]) -> Tensor[(1, 3, 3), f32] {
//   let %r: Tensor[(1, 3, 3, 3), f32] = #[Primitive] fn (%p0: Tensor[(1, 2, 5, 5), f32], %p1: Tensor[(3, 2, 3, 3), f32], %p2: Tensor[(3,), f32]) -> Tensor[(1, 3, 3, 3), f32] {
//     relu(bias_add(conv2d(%p0, %p1), %p2))
//   }(%x, %w, %b);
//   let %s: Tensor[(1, 3, 3), f32] = #[Primitive] fn (%p3: Tensor[(1, 3, 3, 3), f32]) -> Tensor[(1, 3, 3), f32] {
//     sum(transpose(%p3, axes=[0, 2, 3, 1]), axis=[3])
//   }(%r);
//   %s
// }
// -----
/// Check that a nested chain of elementwise and injective calls fuses into one function with its constants inside.
def @main(%x: Tensor[(2, 3), f32]) -> Tensor[(3, 2), f32] {
  transpose(exp(add(%x, 1.0f)))
}
// CHECK:
// def @main(%x: Tensor[(2, 3), f32]) -> Tensor[(3, 2), f32] {
//   #[Primitive] fn (%p0: Tensor[(2, 3), f32]) -> Tensor[(3, 2), f32] {
//     transpose(exp(add(%p0, 1.0f)))
//   }(%x)
// }
// -----
/// Check that a value with two users ends a group, and a variable used twice inside a group becomes one parameter.
def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  let %a = exp(%x);
  let %b = relu(%a);
  let %c = multiply(%a, %a);
  add(%b, %c)
}
// CHECK:
// def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
//   let %a: Tensor[(4,), f32] = exp(%x);
//   #[Primitive] fn (%p0: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
//     add(relu(%p0), multiply(%p0, %p0))
//   }(%a)
// }
// -----
/// Check that opaque dropout, tuple-result split and stateful random_uniform stay alone.
def @main(%x: Tensor[(4,), f32]) -> (Tensor[(4,), f32], Tensor[(2,), f32]) {
  let %d = dropout(relu(%x), rate=0.5);
  let %e = exp(%d);
  let %s = split(negative(%e), indices_or_sections=2);
  (add(%e, random_uniform(shape=[4])), %s.0)
}
// CHECK:
// def @main(%x: Tensor[(4,), f32]) -> (Tensor[(4,), f32], Tensor[(2,), f32]) {
//   let %d: Tensor[(4,), f32] = dropout(relu(%x), rate=0.5);
//   let %e: Tensor[(4,), f32] = exp(%d);
//   let %s: (Tensor[(2,), f32], Tensor[(2,), f32]) = split(negative(%e), indices_or_sections=2);
//   (add(%e, random_uniform(shape=[4])), %s.0)
// }
// -----
/// Check that nothing fuses into the inputs of a conv2d and that two out-elemwise-fusable ops never share a group.
def @main(%x: Tensor[(2, 4), f32], %w: Tensor[(3, 4), f32], %v: Tensor[(3, 4), f32]) -> Tensor[(2, 3), f32] {
  let %y = exp(%x);
  add(dense(%y, %w), dense(%x, %v))
}
// CHECK:
// def @main(%x: Tensor[(2, 4), f32], %w: Tensor[(3, 4), f32], %v: Tensor[(3, 4), f32]) -> Tensor[(2, 3), f32] {
//   let %y: Tensor[(2, 4), f32] = exp(%x);
//   #[Primitive] fn (%p0: Tensor[(2, 4), f32], %p1: Tensor[(3, 4), f32], %p2: Tensor[(2, 3), f32]) -> Tensor[(2, 3), f32] {
//     add(dense(%p0, %p1), %p2)
//   }(%y, %w, dense(%x, %v))
// }
// -----
/// Check that a reduction does not absorb the ops after it, calls in one if branch fuse, and a value is not moved into a branch.
def @main(%x: Tensor[(4, 4), f32], %c: Tensor[(), bool]) -> Tensor[(4,), f32] {
  let %m = max(%x, axis=[1]);
  let %e = exp(%m);
  if (%c) {
    relu(%e)
  } else {
    max(negative(%x), axis=[1])
  }
}
// CHECK:
// def @main(%x: Tensor[(4, 4), f32], %c: Tensor[(), bool]) -> Tensor[(4,), f32] {
//   let %m: Tensor[(4,), f32] = max(%x, axis=[1]);
//   let %e: Tensor[(4,), f32] = exp(%m);
//   if (%c) {
//     relu(%e)
//   } else {
//     #[Primitive] fn (%p0: Tensor[(4, 4), f32]) -> Tensor[(4,), f32] {
//       max(negative(%p0), axis=[1])
//     }(%x)
//   }
// }
// -----
/// Check that calls already inside a Primitive function are not fused again.
def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  let %f = #[Primitive] fn (%y: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
    relu(exp(%y))
  };
  %f(%x)
}
// CHECK:
// def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
//   let %f: fn(Tensor[(4,), f32]) -> Tensor[(4,), f32] = #[Primitive] fn (%y: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
//     relu(exp(%y))
//   };
//   %f(%x)
// }
// -----
/// Check that a let-bound call with a compound non-fusable input is not moved into its user's group.
def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  let %a = add(dropout(%x, rate=0.5), 1.0f);
  let %b = relu(%a);
  %b
}
// CHECK:
// def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
//   let %a: Tensor[(4,), f32] = add(dropout(%x, rate=0.5), 1.0f);
//   let %b: Tensor[(4,), f32] = relu(%a);
//   %b
// }
// -----
/// Check that fusion looks through alias bindings and removes them with the interior binding.
def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  let %a = exp(%x);
  let %b = %a;
  let %c = %b;
  let %d = relu(%c);
  %d
}
// CHECK:
// def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
//   let %d: Tensor[(4,), f32] = #[Primitive] fn (%p0: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
//     relu(exp(%p0))
//   }(%x);
//   %d
// }
// -----
/// Check that an alias used twice ends the group.
def @main(%x: Tensor[(4,), f32]) -> (Tensor[(4,), f32], Tensor[(4,), f32]) {
  let %a = exp(%x);
  let %b = %a;
  let %d = relu(%b);
  (%d, %b)
}
// CHECK:
// def @main(%x: Tensor[(4,), f32]) -> (Tensor[(4,), f32], Tensor[(4,), f32]) {
//   let %a: Tensor[(4,), f32] = exp(%x);
//   let %b: Tensor[(4,), f32] = %a;
//   let %d: Tensor[(4,), f32] = relu(%b);
//   (%d, %b)
// }
