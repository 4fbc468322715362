//! Tests of the `.pir` text format: round trips, error messages, deep and large inputs, and
//! properties over random functions and random bytes.

use passel_engine::ir::{module_structural_eq, parse_module, print_module};

/// Parses, prints, re-parses and re-prints `src`; checks structural equality and byte
/// equality of the two prints, and returns the first print.
fn round_trip(src: &str) -> String {
    let m = parse_module(src).unwrap_or_else(|e| panic!("parse failed:\n{e}\nsource:\n{src}"));
    let text = print_module(&m);
    let m2 = parse_module(&text).unwrap_or_else(|e| panic!("reparse failed:\n{e}\ntext:\n{text}"));
    assert!(module_structural_eq(&m, &m2), "not structurally equal after round trip:\n{text}");
    assert_eq!(print_module(&m2), text, "reprint differs");
    text
}

/// The errors of `src`, one per line.
fn errors(src: &str) -> String {
    match parse_module(src) {
        Ok(m) => panic!("expected errors, parsed:\n{m}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn spec_example_round_trips() {
    let src = r#"
// line comment
#[SkipOptimization, Compiler="c", Level=2]
def @main(%x: Tensor[(4, 4), f32], %w: Tensor[(4,), f32], %cond: Tensor[(), bool]) -> Tensor[(4, 4), f32] {
  let %a = add(%x, %w);
  let %c = @helper(%a, 2.0f);
  let %t = (%a, %c);
  let %one = (%a,);
  let %none = ();
  let %d = %t.1;
  let %e = if (%cond) { let %z = relu(%a); %z } else { %a };
  let %g = fn (%y: Tensor[(4,), f32]) -> Tensor[(4,), f32] { relu(%y) };
  let %h = #[Primitive] fn (%q) { %q };
  let %k: Tensor[(2, 2), f32] = tensor<(2, 2), f32>[1.0, 2.0, nan, -inf];
  let %fills = (full<(64, 3), f32>(0.5), uniform<(64, 3, 3, 3), f32>(seed=1, low=-0.1, high=0.1), normal<(128,), f32>(seed=2, mean=0.0, std=1.0));
  let %s = (2.0f32, 1.5f16, 3i64, 3i32, true, false, 2.0, 3, 1e-8f, -0.0f, tensor<(), f32>[inf]);
  let %app = %g(%d);
  relu(add(%c, 1.0f))
}
"#;
    let text = round_trip(src);
    expect_test::expect![[r#"
        #[Compiler="c", Level=2, SkipOptimization]
        def @main(%x: Tensor[(4, 4), f32], %w: Tensor[(4,), f32], %cond: Tensor[(), bool]) -> Tensor[(4, 4), f32] {
          let %a = add(%x, %w);
          let %c = @helper(%a, 2.0f);
          let %t = (%a, %c);
          let %one = (%a,);
          let %none = ();
          let %d = %t.1;
          let %e = if (%cond) {
            let %z = relu(%a);
            %z
          } else {
            %a
          };
          let %g = fn (%y: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
            relu(%y)
          };
          let %h = #[Primitive] fn (%q) {
            %q
          };
          let %k: Tensor[(2, 2), f32] = tensor<(2, 2), f32>[1.0, 2.0, nan, -inf];
          let %fills = (full<(64, 3), f32>(0.5), uniform<(64, 3, 3, 3), f32>(seed=1, low=-0.1, high=0.1), normal<(128,), f32>(seed=2, mean=0.0, std=1.0));
          let %s = (2.0f, 1.5f16, 3i64, 3i32, true, false, 2.0f, 3i64, 1e-8f, -0.0f, tensor<(), f32>[inf]);
          let %app = %g(%d);
          relu(add(%c, 1.0f))
        }
    "#]]
    .assert_eq(&text);
}
