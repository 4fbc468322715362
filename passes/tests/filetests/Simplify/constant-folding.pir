/// Check that integer and float constants fold with the dtype's wrapping, and division by zero stays.
prim @f(%A: Buffer[(8,), i32], %B: Buffer[(4,), f32], %C: Buffer[(2,), u8]) {
  %A[0] = add(2147483647i32, 1i32);
  %A[1] = mul(floordiv(-7i32, 2i32), floormod(-7i32, 2i32));
  %A[2] = div(7i32, 3i32);
  %A[3] = sub(div(-7i32, 2i32), mod(-7i32, 2i32));
  %A[4] = select(lt(3i32, 4i32), min(5i32, 9i32), max(5i32, 9i32));
  %B[0] = add(mul(1.5, 2.0), 0.25);
  %B[1] = div(1.0, 0.0);
  %C[0] = sub(3u8, 4u8);
  %C[1] = floordiv(250u8, 7u8);
}
// CHECK:
// prim @f(%A: Buffer[(8,), i32], %B: Buffer[(4,), f32], %C: Buffer[(2,), u8]) {
//   %A[0] = -2147483648i32;
//   %A[1] = -4i32;
//   %A[2] = 2i32;
//   %A[3] = -2i32;
//   %A[4] = 5i32;
//   %B[0] = 3.25f;
//   %B[1] = div(1.0f, 0.0f);
//   %C[0] = 255u8;
//   %C[1] = 35u8;
// }
// -----
/// Check that identities and boolean logic simplify (TVM's test_simplify_bool, test_stmt_simplify).
prim @f(%A: Buffer[(8,), i64], %B: Buffer[(4,), f32], %M: Buffer[(4,), bool], %n: i64, %x: f32) {
  %A[0] = add(mul(%n, 1), 0);
  %A[1] = mul(%n, 0);
  %A[2] = min(%n, %n);
  %A[3] = sub(%n, %n);
  %B[0] = mul(%x, 1.0);
  %B[1] = add(%x, 0.0);
  %M[0] = not(not(lt(%n, 3)));
  %M[1] = and(true, lt(%n, 3));
  %M[2] = or(lt(%n, 3), true);
  %M[3] = eq(%n, %n);
}
// CHECK:
// prim @f(%A: Buffer[(8,), i64], %B: Buffer[(4,), f32], %M: Buffer[(4,), bool], %n: i64, %x: f32) {
//   %A[0] = %n;
//   %A[1] = 0;
//   %A[2] = %n;
//   %A[3] = 0;
//   %B[0] = %x;
//   %B[1] = add(%x, 0.0f);
//   %M[0] = lt(%n, 3);
//   %M[1] = lt(%n, 3);
//   %M[2] = true;
//   %M[3] = true;
// }
// -----
/// Check that a function with nothing to simplify is unchanged.
prim @f(%A: Buffer[(4,), f32], %n: i64) {
  for %i in serial(0, 4) {
    %A[%i] = add(%A[%i], 1.0f);
  }
  if (lt(%n, 3)) {
    %A[0] = 0.0f;
  }
}
// CHECK:
// prim @f(%A: Buffer[(4,), f32], %n: i64) {
//   for %i in serial(0, 4) {
//     %A[%i] = add(%A[%i], 1.0f);
//   }
//   if (lt(%n, 3)) {
//     %A[0] = 0.0f;
//   }
// }
