/// Check that a chain of single-use bindings becomes one nested expression.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = relu(%x);
  let %b = exp(%a);
  %b
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   exp(relu(%x))
// }
// -----
/// Check that a value used twice stays bound.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = relu(%x);
  add(%a, %a)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %a = relu(%x);
//   add(%a, %a)
// }
// -----
/// Check that a value is not moved into an if branch.
def @main(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = relu(%x);
  if (%c) { exp(%a) } else { %x }
}
// CHECK:
// def @main(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %a = relu(%x);
//   if (%c) {
//     exp(%a)
//   } else {
//     %x
//   }
// }
// -----
/// Check that a value is not moved into a nested function.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = relu(%x);
  let %f = fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
    add(%y, %a)
  };
  %f(%x)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %a = relu(%x);
//   let %f = fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//     add(%y, %a)
//   };
//   %f(%x)
// }
// -----
/// Check that values inside a branch are inlined within that branch.
def @main(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  if (%c) {
    let %a = relu(%x);
    let %b = exp(%a);
    %b
  } else {
    %x
  }
}
// CHECK:
// def @main(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   if (%c) {
//     exp(relu(%x))
//   } else {
//     %x
//   }
// }
// -----
/// Check that a stateful call and an application are never moved.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %d = random_uniform(shape=[2]);
  let %h = @helper(%x);
  add(%h, %d)
}

def @helper(%p: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  exp(%p)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %d = random_uniform(shape=[2]);
//   let %h = @helper(%x);
//   add(%h, %d)
// }
//
// def @helper(%p: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   exp(%p)
// }
// -----
/// Check that an atom rebinding and an unused binding are left alone.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = %x;
  let %u = relu(%x);
  exp(%a)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %a = %x;
//   let %u = relu(%x);
//   exp(%a)
// }
// -----
/// Check that the A-normal form of a nested expression round-trips to the same expression.
// pipeline: ToANormalForm,ToGraphNormalForm
def @main(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  add(if (%c) { relu(exp(%x)) } else { %x }, (tanh(%x), %x).0)
}
// CHECK:
// def @main(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   add(if (%c) {
//     relu(exp(%x))
//   } else {
//     %x
//   }, (tanh(%x), %x).0)
// }
// -----
/// Check that a rebinding of an inlined value is inlined with it (regression: the second run changed the output).
def @main(%n: Tensor[(4,), i64]) -> Tensor[(4,), i64] {
  let %b = negative(%n);
  let %i = %b;
  add(%i, %n)
}
// CHECK:
// def @main(%n: Tensor[(4,), i64]) -> Tensor[(4,), i64] {
//   add(negative(%n), %n)
// }
// -----
/// Check that a rebinding of a value that stays bound is left alone.
def @main(%n: Tensor[(4,), i64]) -> Tensor[(4,), i64] {
  let %b = negative(%n);
  let %i = %b;
  add(%i, %b)
}
// CHECK:
// def @main(%n: Tensor[(4,), i64]) -> Tensor[(4,), i64] {
//   let %b = negative(%n);
//   let %i = %b;
//   add(%i, %b)
// }
