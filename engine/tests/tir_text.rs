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

mod verify {
    use passel_engine::ir::{parse_module, verify_module, DType};
    use passel_engine::tir::{verify_prim_func, Buffer, ForKind, PType, Param, PrimFuncBuilder};

    fn errors(src: &str) -> Vec<String> {
        let m = parse_module(src).unwrap_or_else(|e| panic!("parses: {e}"));
        match verify_module(&m) {
            Ok(()) => Vec::new(),
            Err(es) => es.iter().map(|e| e.to_string()).collect(),
        }
    }

    #[test]
    fn a_well_formed_prim_func_and_its_call_verify() {
        let src = r#"
def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  call_tir(@add_one, %x)
}

prim @add_one(%A: Buffer[(4,), f32], %B: Buffer[(4,), f32]) {
  for %i in serial(0, 4) {
    %B[%i] = add(%A[%i], 1.0);
  }
}
"#;
        assert_eq!(errors(src), Vec::<String>::new());
    }

    #[test]
    fn static_errors_name_the_function_and_statement() {
        let cases = [
            (
                "prim @f(%A: Buffer[(4,), f32]) { for %i in serial(0, 4) { %A[add(%i, 4)] = 0.0; } }",
                "index 0 of buffer `%A` is 4..=7, outside its dimension of 4",
            ),
            ("prim @f(%A: Buffer[(4,), f32]) { for %i in serial(0, -1) { %A[0] = 0.0; } }", "negative extent -1"),
            ("prim @f(%A: Buffer[(4,), f32]) { %A[floordiv(1, 0)] = 0.0; }", "`floordiv` by zero"),
            (
                "prim @f(%A: Buffer[(4,), f32]) { decl %V: Buffer[(8,), f32] = %A; %V[0] = 1.0; }",
                "`decl %V` reaches 8 elements of `%A`, which has 4",
            ),
            ("prim @f(%A: Buffer[(4,), f32]) { %A[-1] = 0.0; }", "index 0 of buffer `%A` is -1"),
        ];
        for (src, want) in cases {
            let errs = errors(src);
            assert!(errs.iter().any(|e| e.contains(want) && e.contains("@f")), "{src}\n got: {errs:?}\n want: {want}");
        }
    }

    #[test]
    fn call_tir_mistakes_are_reported() {
        let prim = "prim @p(%A: Buffer[(4,), f32], %B: Buffer[(4,), f32]) { %B[0] = %A[0]; }\n";
        let cases = [
            ("def @main(%x: Tensor[(4,), f32]) { @p(%x) }", "@p is a PrimFunc: call it with `call_tir(@p, …)`"),
            (
                "def @g(%x: Tensor[(4,), f32]) { %x }\ndef @main(%x: Tensor[(4,), f32]) { call_tir(@g, %x) }",
                "a graph function: it takes a PrimFunc",
            ),
            ("def @main(%x: Tensor[(4,), f32]) { call_tir(%x) }", "must be a global PrimFunc"),
        ];
        for (graph, want) in cases {
            let src = format!("{graph}\n{prim}");
            let errs = errors(&src);
            assert!(errs.iter().any(|e| e.contains(want)), "{src}\n got: {errs:?}\n want: {want}");
        }
    }

    #[test]
    fn scoping_is_checked_for_functions_built_in_memory() {
        let mut b = PrimFuncBuilder::new();
        let a = b.buffer(Buffer::new("A", DType::F32, &[4])).unwrap();
        b.param(Param::Buf(a));
        let i = b.var("i", PType::scalar(DType::I64)).unwrap();
        // A store that uses %i outside the loop that binds it.
        let (lo, ext) = (b.i64(0), b.i64(4));
        let nop = b.nop();
        let l = b.for_(i, lo, ext, ForKind::Serial, nop).unwrap();
        let iv = b.var_ref(i);
        let zero = b.float(0.0, PType::scalar(DType::F32)).unwrap();
        let st = b.store(a, &[iv], zero).unwrap();
        let body = b.seq(&[l, st]);
        let f = b.finish(body);
        let errs: Vec<String> = verify_prim_func("f", &f).iter().map(|e| e.to_string()).collect();
        assert!(errs.iter().any(|e| e.contains("variable `%i` is used outside its scope")), "{errs:?}");
    }
}
