/// Check that a call of a function marked Inline is replaced by its body with parameters bound to the arguments.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  @helper(relu(%x), 2.0f)
}

#[Inline]
def @helper(%p: Tensor[(2,), f32], %s: Tensor[(), f32]) -> Tensor[(2,), f32] {
  let %a = multiply(%p, %s);
  add(%a, %p)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %helper_p: Tensor[(2,), f32] = relu(%x);
//   let %helper_s: Tensor[(), f32] = 2.0f;
//   let %helper_a: Tensor[(2,), f32] = multiply(%helper_p, %helper_s);
//   add(%helper_a, %helper_p)
// }
//
// #[Inline]
// def @helper(%p: Tensor[(2,), f32], %s: Tensor[(), f32]) -> Tensor[(2,), f32] {
//   let %a: Tensor[(2,), f32] = multiply(%p, %s);
//   add(%a, %p)
// }
// -----
/// Check that an unmarked function is not inlined with the default size limit.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  @helper(%x)
}

def @helper(%p: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  exp(%p)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   @helper(%x)
// }
//
// def @helper(%p: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   exp(%p)
// }
// -----
/// Check that a recursive function marked Inline is never inlined.
def @main(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  @even(%c, %x)
}

#[Inline]
def @even(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  if (%c) { @odd(%c, negative(%x)) } else { %x }
}

#[Inline]
def @odd(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  if (%c) { @even(%c, negative(%x)) } else { relu(%x) }
}
// CHECK:
// def @main(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   @even(%c, %x)
// }
//
// #[Inline]
// def @even(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   if (%c) {
//     @odd(%c, negative(%x))
//   } else {
//     %x
//   }
// }
//
// #[Inline]
// def @odd(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   if (%c) {
//     @even(%c, negative(%x))
//   } else {
//     relu(%x)
//   }
// }
// -----
/// Check that a chain of marked functions collapses in one run and callers that skip optimization are left alone.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  @outer(%x)
}

#[SkipOptimization]
def @frozen(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  @inner(%x)
}

#[Inline]
def @outer(%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  @inner(tanh(%y))
}

#[Inline]
def @inner(%z: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  exp(%z)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %outer_y: Tensor[(2,), f32] = %x;
//   let %outer_inner_z: Tensor[(2,), f32] = tanh(%outer_y);
//   exp(%outer_inner_z)
// }
//
// #[SkipOptimization]
// def @frozen(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   @inner(%x)
// }
//
// #[Inline]
// def @outer(%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %inner_z: Tensor[(2,), f32] = tanh(%y);
//   exp(%inner_z)
// }
//
// #[Inline]
// def @inner(%z: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   exp(%z)
// }
// -----
/// Check that calls inside nested functions and if branches are inlined (each copy with its own variables).
def @main(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %f = fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
    @sq(%y)
  };
  if (%c) { %f(%x) } else { @sq(%x) }
}

#[Inline]
def @sq(%p: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  multiply(%p, %p)
}
// CHECK:
// def @main(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %f: fn(Tensor[(2,), f32]) -> Tensor[(2,), f32] = fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//     let %sq_p: Tensor[(2,), f32] = %y;
//     multiply(%sq_p, %sq_p)
//   };
//   if (%c) {
//     %f(%x)
//   } else {
//     let %sq_p_1: Tensor[(2,), f32] = %x;
//     multiply(%sq_p_1, %sq_p_1)
//   }
// }
//
// #[Inline]
// def @sq(%p: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   multiply(%p, %p)
// }
