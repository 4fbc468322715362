/// Check that affine index expressions are put in canonical form with like terms collected.
prim @f(%A: Buffer[(64,), f32], %B: Buffer[(64,), f32]) {
  for %i in serial(0, 4) {
    for %j in serial(0, 4) {
      %A[add(mul(%i, 4), add(%j, mul(%i, 4)))] = %B[sub(add(%j, add(1, mul(8, %i))), 1)];
      %A[add(%j, mul(%i, 16))] = %B[add(add(%j, 3), sub(mul(%i, 2), %j))];
    }
  }
}
// CHECK:
// prim @f(%A: Buffer[(64,), f32], %B: Buffer[(64,), f32]) {
//   for %i in serial(0, 4) {
//     for %j in serial(0, 4) {
//       %A[add(mul(%i, 8), %j)] = %B[add(mul(%i, 8), %j)];
//       %A[add(mul(%i, 16), %j)] = %B[add(mul(%i, 2), 3)];
//     }
//   }
// }
