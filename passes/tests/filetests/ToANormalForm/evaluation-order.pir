/// Check that nested calls are let-bound in evaluation order and the result is an atom.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  add(relu(%x), exp(negative(%x)))
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %t0 = relu(%x);
//   let %t1 = negative(%x);
//   let %t2 = exp(%t1);
//   let %t3 = add(%t0, %t2);
//   %t3
// }
// -----
/// Check that a function already in A-normal form is left unchanged.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = relu(%x);
  let %b = %a;
  %b
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %a = relu(%x);
//   let %b = %a;
//   %b
// }
// -----
/// Check that tuples, projections and applications of globals get their own bindings.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  @helper((relu(%x), %x).0)
}

def @helper(%p: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  exp(%p)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %t0 = relu(%x);
//   let %t1 = (%t0, %x);
//   let %t2 = %t1.0;
//   let %t3 = @helper(%t2);
//   %t3
// }
//
// def @helper(%p: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %t0 = exp(%p);
//   %t0
// }
// -----
/// Check that values computed in an if branch stay in that branch, each branch getting its own block.
def @main(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  add(if (%c) { relu(exp(%x)) } else { %x }, 1f)
}
// CHECK:
// def @main(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %t2 = if (%c) {
//     let %t0 = exp(%x);
//     let %t1 = relu(%t0);
//     %t1
//   } else {
//     %x
//   };
//   let %t3 = add(%t2, 1.0f);
//   %t3
// }
// -----
/// Check that a nested function body gets its own block and nothing is hoisted out of it.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %f = fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
    add(relu(%y), %x)
  };
  %f(exp(%x))
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %f = fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//     let %t0 = relu(%y);
//     let %t1 = add(%t0, %x);
//     %t1
//   };
//   let %t2 = exp(%x);
//   let %t3 = %f(%t2);
//   %t3
// }
// -----
/// Check that a block nested inside an expression is flattened into the enclosing block.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = {
    let %b = relu(%x);
    exp(%b)
  };
  add(%a, { let %c = tanh(%x); %c })
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %b = relu(%x);
//   let %a = exp(%b);
//   let %c = tanh(%x);
//   let %t0 = add(%a, %c);
//   %t0
// }
// -----
/// Check that a stateful call keeps its place in evaluation order.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  add(relu(%x), random_uniform(shape=[2]))
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %t0 = relu(%x);
//   let %t1 = random_uniform(shape=[2]);
//   let %t2 = add(%t0, %t1);
//   %t2
// }
// -----
/// Check that the body of a primitive nested function stays in graph form.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %f = #[Primitive] fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
    exp(relu(%y))
  };
  %f(tanh(%x))
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %f = #[Primitive] fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//     exp(relu(%y))
//   };
//   let %t0 = tanh(%x);
//   let %t1 = %f(%t0);
//   %t1
// }
// -----
/// Check that running the pass twice changes nothing the second time.
// pipeline: ToANormalForm,ToANormalForm
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  add(relu(%x), %x)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %t0 = relu(%x);
//   let %t1 = add(%t0, %x);
//   %t1
// }
