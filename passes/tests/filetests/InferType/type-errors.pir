/// Check that a shape mismatch is reported with the function.
def @main(%x: Tensor[(2, 3), f32], %y: Tensor[(4,), f32]) -> Tensor[(2, 3), f32] {
  add(%x, %y)
}
// CHECK:
// error: InferType @main: add: shapes (2, 3) and (4,) do not broadcast
// -----
/// Check that a declared result type that disagrees with the body is an error.
def @main(%x: Tensor[(2,), f32]) -> Tensor[(3,), f32] {
  relu(%x)
}
// CHECK:
// error: InferType @main: body has type Tensor[(2,), f32], declared result is Tensor[(3,), f32]
// -----
/// Check that a broadcast error and an unannotated parameter are both reported, each with its function.
def @f(%x: Tensor[(2,), f32], %y: Tensor[(3,), f32], %z) {
  (add(%x, %y), relu(%z))
}
// CHECK:
// error: InferType @f: cannot infer the type of %z: annotate it
// error: InferType @f: add: shapes (2,) and (3,) do not broadcast
// -----
/// Check that calls of a global are checked against the callee's signature: the call with a wrong argument is the one error, the other call types.
def @g(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  relu(%x)
}
def @main(%y: Tensor[(4,), f32]) {
  (@g(%y), @g(1.0f))
}
// CHECK:
// error: InferType @main: argument 0 has type Tensor[(), f32], expected Tensor[(4,), f32]
