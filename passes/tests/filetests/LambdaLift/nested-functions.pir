/// Check that a called nested function without free variables becomes a global called directly.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %f = fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
    relu(%y)
  };
  %f(%x)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   @main_lifted0(%x)
// }
//
// def @main_lifted0(%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   relu(%y)
// }
// -----
/// Check that free variables become leading parameters and every call passes them.
def @main(%x: Tensor[(2,), f32], %w: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %a = exp(%w);
  let %f = fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
    add(%y, %a)
  };
  let %b = %f(%x);
  %f(%b)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32], %w: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %a: Tensor[(2,), f32] = exp(%w);
//   let %b: Tensor[(2,), f32] = @main_lifted0(%a, %x);
//   @main_lifted0(%a, %b)
// }
//
// def @main_lifted0(%a: Tensor[(2,), f32], %y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   add(%y, %a)
// }
// -----
/// Check that an escaping closure with free variables becomes a closure-conversion wrapper.
def @main(%x: Tensor[(2,), f32]) -> (fn (Tensor[(2,), f32]) -> Tensor[(2,), f32], Tensor[(2,), f32]) {
  let %f = fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
    add(%y, %x)
  };
  (%f, %f(%x))
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> (fn(Tensor[(2,), f32]) -> Tensor[(2,), f32], Tensor[(2,), f32]) {
//   let %f: fn(Tensor[(2,), f32]) -> Tensor[(2,), f32] = #[Closure] fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//     @main_lifted0(%x, %y)
//   };
//   (%f, %f(%x))
// }
//
// def @main_lifted0(%x: Tensor[(2,), f32], %y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   add(%y, %x)
// }
// -----
/// Check that nested functions are lifted innermost first and the outer one captures what the inner one needed.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %outer = fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
    let %inner = fn (%z: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
      multiply(%z, add(%y, %x))
    };
    %inner(%y)
  };
  %outer(%x)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   @main_lifted1(%x, %x)
// }
//
// def @main_lifted0(%x: Tensor[(2,), f32], %y: Tensor[(2,), f32], %z: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   multiply(%z, add(%y, %x))
// }
//
// def @main_lifted1(%x: Tensor[(2,), f32], %y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   @main_lifted0(%x, %y, %y)
// }
// -----
/// Check that lifted names skip names the module already uses.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %f = fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
    relu(%y)
  };
  @main_lifted0(%f(%x))
}

def @main_lifted0(%p: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  exp(%p)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   @main_lifted0(@main_lifted1(%x))
// }
//
// def @main_lifted0(%p: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   exp(%p)
// }
//
// def @main_lifted1(%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   relu(%y)
// }
// -----
/// Check that a primitive nested function and a function without nested functions are left alone.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %f = #[Primitive] fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
    relu(%y)
  };
  %f(%x)
}

def @plain(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  relu(%x)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   let %f: fn(Tensor[(2,), f32]) -> Tensor[(2,), f32] = #[Primitive] fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//     relu(%y)
//   };
//   %f(%x)
// }
//
// def @plain(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   relu(%x)
// }
// -----
/// Check that a directly applied nested function in an if branch is lifted and called with its free variables.
def @main(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  if (%c) {
    fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] { add(%y, %x) }(%x)
  } else {
    %x
  }
}
// CHECK:
// def @main(%c: Tensor[(), bool], %x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   if (%c) {
//     @main_lifted0(%x, %x)
//   } else {
//     %x
//   }
// }
//
// def @main_lifted0(%x: Tensor[(2,), f32], %y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   add(%y, %x)
// }
// -----
/// Check that running LambdaLift twice changes nothing the second time.
// pipeline: LambdaLift,LambdaLift
def @main(%x: Tensor[(2,), f32]) -> (fn (Tensor[(2,), f32]) -> Tensor[(2,), f32],) {
  let %f = fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
    add(%y, %x)
  };
  (%f,)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> (fn(Tensor[(2,), f32]) -> Tensor[(2,), f32],) {
//   let %f: fn(Tensor[(2,), f32]) -> Tensor[(2,), f32] = #[Closure] fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//     @main_lifted0(%x, %y)
//   };
//   (%f,)
// }
//
// def @main_lifted0(%x: Tensor[(2,), f32], %y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   add(%y, %x)
// }
// -----
/// Check that an escaping nested function without free variables becomes a reference to the global.
def @main(%x: Tensor[(2,), f32]) -> (fn (Tensor[(2,), f32]) -> Tensor[(2,), f32],) {
  let %f = fn (%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
    relu(%y)
  };
  (%f,)
}
// CHECK:
// def @main(%x: Tensor[(2,), f32]) -> (fn(Tensor[(2,), f32]) -> Tensor[(2,), f32],) {
//   let %f: fn(Tensor[(2,), f32]) -> Tensor[(2,), f32] = @main_lifted0;
//   (%f,)
// }
//
// def @main_lifted0(%y: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
//   relu(%y)
// }
