/// Check that a subexpression computed twice in one statement is bound once, larger ones first and nested ones outside (TVM's test_basic and test_cascade, within one statement).
prim @f(%B: Buffer[(50,), i32], %i1: i32, %x: i32, %y: i32, %z3: i32) {
  %B[%i1] = add(add(add(%x, %y), mul(%z3, 2i32)), mul(add(add(%x, %y), mul(%z3, 2i32)), add(%x, %y)));
}
// CHECK:
// prim @f(%B: Buffer[(50,), i32], %i1: i32, %x: i32, %y: i32, %z3: i32) {
//   let %cse_v2 = add(%x, %y);
//   let %cse_v1 = add(%cse_v2, mul(%z3, 2i32));
//   %B[%i1] = add(%cse_v1, mul(%cse_v1, %cse_v2));
// }
// -----
/// Check that loads, intrinsic calls and bool predicates are not bound (TVM's test_cannot_lift_bufferload, test_cannot_lift_call and test_no_lift_bool_predicate).
prim @f(%B: Buffer[(50,), f32], %i: i64, %j: i64) {
  %B[%i] = add(%B[%j], %B[%j]);
  %B[%i] = add(exp(%B[%j]), exp(%B[%j]));
  %B[%i] = select(lt(%i, %j), 1.0f, select(lt(%i, %j), 2.0f, 3.0f));
}
// CHECK:
// prim @f(%B: Buffer[(50,), f32], %i: i64, %j: i64) {
//   %B[%i] = add(%B[%j], %B[%j]);
//   %B[%i] = add(exp(%B[%j]), exp(%B[%j]));
//   %B[%i] = select(lt(%i, %j), 1.0f, select(lt(%i, %j), 2.0f, 3.0f));
// }
// -----
/// Check that loop bounds and an if condition share their repeated terms (TVM's test_for_extent_lift and test_if_condition).
prim @f(%B: Buffer[(64,), i64], %n: i64, %m: i64) {
  for %i in serial(mul(%n, %m), mul(%n, %m)) {
    if (lt(add(%i, mul(%n, %m)), sub(mul(%n, %m), 1))) {
      %B[floormod(%i, 64)] = 1;
    }
  }
}
// CHECK:
// prim @f(%B: Buffer[(64,), i64], %n: i64, %m: i64) {
//   let %cse_v2 = mul(%n, %m);
//   for %i in serial(%cse_v2, %cse_v2) {
//     let %cse_v1 = mul(%n, %m);
//     if (lt(add(%i, %cse_v1), sub(%cse_v1, 1))) {
//       %B[floormod(%i, 64)] = 1;
//     }
//   }
// }
// -----
/// Check that a term using a variable bound by a let expression stays inside it (TVM's test_let_body_no_extraction).
prim @f(%B: Buffer[(50,), i64], %x: i64) {
  %B[0] = let %v = add(%x, 1) in add(mul(%v, 3), mul(%v, 3));
}
// CHECK:
// prim @f(%B: Buffer[(50,), i64], %x: i64) {
//   %B[0] = let %v = add(%x, 1) in add(mul(%v, 3), mul(%v, 3));
// }
