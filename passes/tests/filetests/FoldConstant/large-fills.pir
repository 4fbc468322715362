/// Check that a call whose inputs are over the element budget (2^20) stays a call: two uniform fills of 2^21 elements are never materialized.
def @main() -> Tensor[(2097152,), f32] {
  add(uniform<(2097152,), f32>(seed=1, low=0.0, high=1.0), uniform<(2097152,), f32>(seed=1, low=0.0, high=1.0))
}
// CHECK:
// def @main() -> Tensor[(2097152,), f32] {
//   add(uniform<(2097152,), f32>(seed=1, low=0.0, high=1.0), uniform<(2097152,), f32>(seed=1, low=0.0, high=1.0))
// }
// -----
/// Check that a call whose output is over the element budget stays a call even when its inputs are small: [1024, 1] + [1, 2048] broadcasts to 2^21 elements.
def @main() -> Tensor[(1024, 2048), f32] {
  add(uniform<(1024, 1), f32>(seed=1, low=0.0, high=1.0), uniform<(1, 2048), f32>(seed=1, low=0.0, high=1.0))
}
// CHECK:
// def @main() -> Tensor[(1024, 2048), f32] {
//   add(uniform<(1024, 1), f32>(seed=1, low=0.0, high=1.0), uniform<(1, 2048), f32>(seed=1, low=0.0, high=1.0))
// }
// -----
/// Check that elementwise calls of full fills fold to a full fill, however large, without materializing it.
def @main() -> Tensor[(1024, 4096), f32] {
  add(add(full<(1024, 1), f32>(1.5), full<(1, 4096), f32>(0.25)), 1.0f)
}
// CHECK:
// def @main() -> Tensor[(1024, 4096), f32] {
//   full<(1024, 4096), f32>(2.75)
// }
