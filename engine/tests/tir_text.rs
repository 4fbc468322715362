//! The loop level's text: PrimFuncs print and parse as a fixed point, beside graph functions.

use passel_engine::ir::{module_structural_eq, parse_module, print_module};

fn round_trip(src: &str) -> String {
    let m = parse_module(src).unwrap_or_else(|e| panic!("parses:\n{e}\n{src}"));
    let printed = print_module(&m);
    let again = parse_module(&printed).unwrap_or_else(|e| panic!("printed text parses:\n{e}\n{printed}"));
    assert_eq!(print_module(&again), printed, "fixed point");
    assert!(module_structural_eq(&m, &again));
    printed
}

#[test]
fn prim_funcs_print_canonically_and_parse_back() {
    let src = r#"
def @main(%x: Tensor[(4, 4), f32]) { relu(%x) }

#[global_symbol="add_one"]
prim @add_one(%A: Buffer[(4, 4), f32], %B: Buffer[(4, 4), f32], %n: i64) {
  for %i in serial(0, 4) {
    for %j in parallel(0, 4) {
      %B[%i, %j] = add(%A[%i, %j], 1.0);
    }
  }
  let %k = mul(%n, 2);
  alloc %T: Buffer[(16,), f32, scope="local"];
  for %t in unroll(0, 16) {
    %T[%t] = select(lt(%t, %k), exp(%A[floordiv(%t, 4), floormod(%t, 4)]), f32(-inf));
  }
  if (gt(%n, 0)) {
    eval %T[0];
  } else {
    decl %V: Buffer[(4, 4), f32] = %T;
    %B[0, 0] = %V[3, 3];
  }
  attr "pragma_unroll_explicit" = 1 {
    for %v in vectorized(0i32, 4i32) {
      %B[0, cast(%v, i64)] = cast(cast(%v, f64), f32);
    }
  }
  %B[ramp(0, 1, 4), 0] = broadcast(let %z = 2.5 in mul(%z, %z), 4);
}
"#;
    let printed = round_trip(src);
    assert!(
        printed.contains("prim @add_one(%A: Buffer[(4, 4), f32], %B: Buffer[(4, 4), f32], %n: i64) {"),
        "{printed}"
    );
    assert!(printed.contains("%B[%i, %j] = add(%A[%i, %j], 1.0f);"), "{printed}");
    assert!(printed.contains("alloc %T: Buffer[(16,), f32, scope=\"local\"];"), "{printed}");
    assert!(printed.contains("f32(-inf)"), "{printed}");
    eprintln!("{printed}");
}

#[test]
fn binders_in_the_middle_of_a_block_print_braced() {
    let src = r#"
prim @f(%A: Buffer[(2,), i32]) {
  let %x = 1i32 {
    %A[0] = %x;
  }
  %A[1] = 2i32;
}
"#;
    let printed = round_trip(src);
    assert!(printed.contains("let %x = 1i32 {"), "{printed}");
}

#[test]
fn sibling_loops_may_reuse_a_name_and_print_unique() {
    let src = r#"
prim @f(%A: Buffer[(2,), f32]) {
  for %i in serial(0, 2) { %A[%i] = 0.0; }
  for %i in serial(0, 2) { %A[%i] = add(%A[%i], 1.0); }
}
"#;
    let printed = round_trip(src);
    assert!(printed.contains("for %i_1 in serial(0, 2)"), "{printed}");
}

#[test]
fn errors_name_the_place() {
    let cases = [
        ("prim @f(%A: Buffer[(2,), f32]) { %A[0] = %y; }", "undefined variable `%y`"),
        ("prim @f(%A: Buffer[(2,), f32]) { %A[0, 1] = 1.0; }", "buffer `%A` has 1 dimensions, indexed with 2"),
        ("prim @f(%A: Buffer[(2,), f32]) { %A[0] = 1i32; }", "store of i32 into buffer `%A` of f32"),
        ("prim @f(%A: Buffer[(2,), f32]) { for %i in loop(0, 2) { } }", "unknown loop kind `loop`"),
        ("prim @f(%A: Buffer[(2,), f32]) { %A[0] = frob(1.0); }", "unknown loop-level operator `frob`"),
        ("prim @f(%A: Buffer[(2,), f32]) { for %A in serial(0, 2) { } }", "`%A` is already defined in this scope"),
        ("prim @f(%n: i64, %m: i32) { eval add(%n, %m); }", "`add` of i64 and i32"),
        ("prim @f(%A: Buffer[(-2,), f32]) { }", "negative dimension"),
        ("def @f() { 1.0f }\nprim @f() { }", "function `@f` is defined twice"),
    ];
    for (src, want) in cases {
        let err = parse_module(src).expect_err(src).to_string();
        assert!(err.contains(want), "{src}\n  got: {err}\n want: {want}");
        assert!(err.starts_with("1:") || err.starts_with("2:"), "{err}");
    }
}
