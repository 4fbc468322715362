//! Tests of the `.pir` text format: round trips, error messages, deep and large inputs, and
//! properties over random functions and random bytes.

use passel_engine::ir::{module_structural_eq, parse_module, print_module, ExprKind};

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

#[test]
fn unexpected_token_is_reported_with_line_and_col() {
    let src = "def @f(%x: Tensor[(), f32]) {\n  let %a = relu(%x) ;\n  let = %a;\n  %a\n}\n";
    expect_test::expect!["3:7: expected a variable `%name`, found `=`"].assert_eq(&errors(src));
}

#[test]
fn unterminated_block_names_its_opening_brace() {
    let src = "def @f(%x: Tensor[(), f32]) {\n  let %a = relu(%x);\n";
    expect_test::expect!["3:1: unterminated block (the `{` at 1:29 is not closed)"].assert_eq(&errors(src));
}

#[test]
fn unknown_op_suggests_close_names() {
    let src = "def @f(%x: Tensor[(), f32]) {\n  ad(%x, %x)\n}\n";
    expect_test::expect!["2:3: unknown operator `ad` (did you mean `add` or `pad` or `abs`?)"].assert_eq(&errors(src));
    let src = "def @f(%x: Tensor[(), f32]) {\n  frobnicate(%x, %x)\n}\n";
    expect_test::expect!["2:3: unknown operator `frobnicate`"].assert_eq(&errors(src));
}

#[test]
fn wrong_arity_is_reported_at_the_call() {
    let src = "def @f(%x: Tensor[(), f32]) {\n  relu(add(%x))\n}\n";
    expect_test::expect!["2:8: operator `add` takes 2 arguments, got 1"].assert_eq(&errors(src));
}

#[test]
fn bad_attribute_is_reported_at_the_call() {
    let src = "def @f(%x: Tensor[(), f32]) {\n  relu(%x, axis=1)\n}\n";
    expect_test::expect!["2:3: operator `relu` takes no attributes, got `axis`"].assert_eq(&errors(src));
}

#[test]
fn duplicate_attributes_are_errors_at_the_second_key() {
    let src = "def @f(%x: Tensor[(2, 2), f32]) {\n  sum(%x, axis=1, axis=0)\n}\n";
    expect_test::expect![[r#"
        2:19: duplicate call attribute `axis`
        2:3: attribute `axis` of `sum` must be ints, got int"#]]
    .assert_eq(&errors(src));
    let e = parse_module(src).unwrap_err();
    let span = e.0[0].span;
    assert_eq!(&src[span.start as usize..span.end as usize], "axis");
    assert_eq!(span.start as usize, src.rfind("axis").unwrap());
    let src = "#[Inline, Level=1, Level=2]\ndef @f() { () }\n";
    expect_test::expect!["1:20: duplicate function attribute `Level`"].assert_eq(&errors(src));
    let src = "def @f() { let %g = #[Primitive, Primitive] fn () { () }; %g }\n";
    expect_test::expect!["1:34: duplicate function attribute `Primitive`"].assert_eq(&errors(src));
}

/// Regression (issue #26): each attribute was a sorted insert, so a list given out of order
/// parsed in quadratic time (400,000 attributes: 37 s). The list is now sorted once; the
/// values, their order and the duplicate errors are as before.
#[test]
fn a_large_out_of_order_attribute_list_parses_sorted_with_its_duplicates_reported() {
    let n = 50_000;
    let keys: Vec<String> = (0..n).rev().map(|i| format!("k{i:06}={i}")).collect();
    let src = format!("#[{}]\ndef @f() {{ () }}\n", keys.join(", "));
    let module = parse_module(&src).unwrap();
    let attrs = module.get("f").unwrap().attrs();
    assert_eq!(attrs.len(), n);
    let names: Vec<&str> = attrs.iter().map(|(k, _)| k).collect();
    assert!(names.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(attrs.get("k000007").and_then(|v| v.as_int()), Some(7));
    assert_eq!(attrs.get("k049999").and_then(|v| v.as_int()), Some(49_999));
    // Repeats are reported at each later key, in source order.
    let src = format!("#[{}, k000005=1, k000003=2, k000005=3]\ndef @f() {{ () }}\n", keys.join(", "));
    let e = parse_module(&src).unwrap_err();
    let dups: Vec<&str> = e.0.iter().map(|d| &src[d.span.start as usize..d.span.end as usize]).collect();
    assert_eq!(dups, ["k000005", "k000003", "k000005"]);
    assert!(e.0.windows(2).all(|w| w[0].span.start < w[1].span.start));
    assert!(e.0.iter().all(|d| d.to_string().contains("duplicate function attribute")), "{e}");
}

#[test]
fn near_misses_of_well_known_function_attributes_are_errors() {
    let src = "#[inline]\ndef @f() { () }\n";
    expect_test::expect!["1:3: unknown function attribute `inline` (did you mean `Inline`?)"].assert_eq(&errors(src));
    let src = "#[SkipOptimisation, Exportd]\ndef @f() { () }\n";
    expect_test::expect![[r#"
        1:3: unknown function attribute `SkipOptimisation` (did you mean `SkipOptimization`?)
        1:21: unknown function attribute `Exportd` (did you mean `Exported`?)"#]]
    .assert_eq(&errors(src));
    // User-defined attributes far from every well-known name stay allowed.
    let m = parse_module("#[Compiler=\"c\", Closure, Inline]\ndef @f() { () }\n").unwrap();
    assert!(print_module(&m).contains("Compiler"));
}

#[test]
fn undefined_variable_is_an_error() {
    let src = "def @f(%x: Tensor[(), f32]) {\n  let %a = { let %inner = relu(%x); %inner };\n  add(%y, %inner)\n}\n";
    expect_test::expect![[r#"
        3:7: undefined variable `%y`
        3:11: undefined variable `%inner`"#]]
    .assert_eq(&errors(src));
}

#[test]
fn duplicate_definitions_are_errors() {
    let src = "def @f(%x: Tensor[(), f32]) {\n  let %x = relu(%x);\n  %x\n}\n\ndef @f() { 1.0f }\n";
    expect_test::expect![[r#"
        2:7: `%x` is already defined at 1:8 (a variable has a single definition per function)
        6:5: function `@f` is defined twice (first at 1:5)"#]]
    .assert_eq(&errors(src));
}

#[test]
fn several_errors_are_reported_in_one_parse() {
    let src = "\
def @f(%x: Tensor[(), f32]) {
  let %a = relu(%x;
  let %b = reluu(%x);
  let %c = add(%x, %x, %x);
  %c
}

def @g() -> Tensor[(), f32] {
  let %q = (1.0f, ;
  @f(%nope)
}

def @h() { 2i9 }
";
    expect_test::expect![[r#"
        2:19: expected `,` or `)`, found `;`
        3:12: unknown operator `reluu` (did you mean `relu` or `gelu` or `elu`?)
        4:12: operator `add` takes 2 arguments, got 3
        9:19: expected an expression, found `;`
        10:6: undefined variable `%nope`
        13:12: invalid number literal `2i9`"#]]
    .assert_eq(&errors(src));
}

#[test]
fn unknown_globals_are_left_to_the_verifier() {
    round_trip("def @main() {\n  @missing(1.0f)\n}\n");
}

// ---- size and depth ----

use passel_engine::ir::{
    print_function, structural_eq, AttrValue, Attrs, Constant, DType, Fill, FunctionBuilder, Module, NodeId, Tensor,
    TensorData, TensorType, Type,
};
use passel_engine::op;

#[test]
fn a_million_bindings_parse_print_and_round_trip() {
    let n = 1_000_000;
    let mut src = String::with_capacity(n * 32);
    src.push_str("def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {\n  let %v0 = relu(%x);\n");
    for i in 1..n {
        src.push_str(&format!("  let %v{i} = add(%v{}, %x);\n", i - 1));
    }
    src.push_str(&format!("  %v{}\n}}\n", n - 1));
    let m = parse_module(&src).expect("parses");
    assert_eq!(m.get("main").map(|f| f.num_bindings()), Some(n));
    let text = print_module(&m);
    assert_eq!(text, src, "the canonical text is the input");
    let m2 = parse_module(&text).expect("reparses");
    assert!(module_structural_eq(&m, &m2));
}

/// Checks that `src` either round-trips or fails only with the nesting error.
fn round_trip_or_nesting_error(src: &str) -> bool {
    match parse_module(src) {
        Ok(_) => {
            round_trip(src);
            true
        }
        Err(e) => {
            assert_eq!(e.0.len(), 1, "{e}");
            assert!(e.0[0].to_string().ends_with("nesting deeper than 512 levels"), "{e}");
            false
        }
    }
}

fn nested_calls(depth: usize) -> String {
    format!("def @f(%x: Tensor[(), f32]) {{\n  {}%x{}\n}}\n", "relu(".repeat(depth), ")".repeat(depth))
}

fn nested_ifs(depth: usize) -> String {
    let mut s = String::from("def @f(%c: Tensor[(), bool]) {\n");
    for i in 0..depth {
        s.push_str(&format!("if (%c) {{ let %a{i} = relu(1.0f); %a{i} }} else {{\n"));
    }
    s.push_str("2.0f");
    s.push_str(&"}".repeat(depth));
    s.push_str("\n}\n");
    s
}

fn nested_fns_and_tuples(depth: usize) -> String {
    format!("def @f() {{\n  {}1.0f{}\n}}\n", "fn () { ((".repeat(depth), ",),) }".repeat(depth))
}

#[test]
fn deep_nesting_round_trips_up_to_the_limit_and_is_an_error_beyond() {
    // Near the limit the parser's own stack must suffice on a 2 MiB test thread.
    // The body block and the innermost `%x` take one level each.
    for depth in [10, 200, 500, 510, 511] {
        assert!(round_trip_or_nesting_error(&nested_calls(depth)) == (depth <= 510), "calls at {depth}");
    }
    for depth in [10, 100, 254, 255, 256, 300] {
        round_trip_or_nesting_error(&nested_ifs(depth));
        round_trip_or_nesting_error(&nested_fns_and_tuples(depth));
    }
    assert!(!round_trip_or_nesting_error(&nested_calls(100_000)));
    assert!(!round_trip_or_nesting_error(&nested_ifs(100_000)));
    assert!(!round_trip_or_nesting_error(&nested_fns_and_tuples(100_000)));
}

#[test]
fn printing_a_hundred_thousand_deep_tree_does_not_recurse() {
    let relu = op::lookup("relu").expect("relu");
    let mut b = FunctionBuilder::new();
    let x = b.var("x", Some(Type::scalar(DType::F32)));
    let c = b.var("c", Some(Type::scalar(DType::Bool)));
    let mut e = x;
    for i in 0..100_000 {
        e = match i % 4 {
            0 => b.call(relu, &[e], Attrs::new()),
            1 => {
                let one = b.constant(Constant::scalar_f32(1.0));
                let v = b.var("v", None);
                let then_ = b.block(&[(v, one)], v);
                b.if_(c, then_, e)
            }
            2 => {
                let t = b.tuple(&[e]);
                b.proj(t, 0)
            }
            _ => {
                let v = b.var("v", None);
                b.block(&[(v, e)], v)
            }
        };
    }
    let func = b.finish(&[x, c], e, None, Attrs::new());
    let text = print_function("deep", &func);
    assert!(text.len() < 100_000 * 400, "indentation is capped, output stays linear: {}", text.len());
    assert!(text.contains("%v_49999"), "names are made unique");
    assert!(!round_trip_or_nesting_error(&text));
}

// ---- properties ----

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Builds random well-formed functions with [`FunctionBuilder`].
struct Gen {
    rng: ChaCha8Rng,
    b: FunctionBuilder,
    scope: Vec<NodeId>,
    /// Large constants made so far, reused to exercise sharing in the resources section.
    large: Vec<Tensor>,
}

/// Names include duplicates and spellings the printer must repair.
const NAMES: &[&str] = &["x", "x", "x_1", "a.b", "0", "t.1", "weird name", "", "ünï", "y."];
const KEYS: &[&str] = &["SkipOptimization", "Primitive", "Compiler", "Level", "k.v", "_x"];

impl Gen {
    fn new(seed: u64) -> Gen {
        Gen { rng: ChaCha8Rng::seed_from_u64(seed), b: FunctionBuilder::new(), scope: Vec::new(), large: Vec::new() }
    }

    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.rng.gen_range(0..xs.len())]
    }

    fn dtype(&mut self) -> DType {
        *self.pick(&DType::ALL)
    }

    fn shape(&mut self) -> Vec<u64> {
        let rank = self.rng.gen_range(0..4);
        (0..rank).map(|_| self.rng.gen_range(0..4)).collect()
    }

    fn ty(&mut self, depth: u32) -> Type {
        match if depth == 0 { 0 } else { self.rng.gen_range(0..4) } {
            0 | 1 => {
                let (shape, dtype) = (self.shape(), self.dtype());
                Type::tensor(shape, dtype)
            }
            2 => {
                let n = self.rng.gen_range(0..3);
                Type::tuple((0..n).map(|_| self.ty(depth - 1)).collect::<Vec<_>>())
            }
            _ => {
                let n = self.rng.gen_range(0..3);
                let params: Vec<Type> = (0..n).map(|_| self.ty(depth - 1)).collect();
                Type::func(params, self.ty(depth - 1))
            }
        }
    }

    fn opt_ty(&mut self) -> Option<Type> {
        self.rng.gen_bool(0.5).then(|| self.ty(2))
    }

    /// A `full` value the parser accepts for `dtype`.
    fn fill_value(&mut self, dtype: DType) -> f64 {
        match dtype {
            DType::I64 | DType::I32 | DType::I16 => self.rng.gen_range(-1000..1000) as f64,
            DType::I8 => self.rng.gen_range(-128..128) as f64,
            DType::U8 => self.rng.gen_range(0..256) as f64,
            DType::U16 | DType::U32 | DType::U64 => self.rng.gen_range(0..1000) as f64,
            DType::Bool => self.rng.gen_range(0..2) as f64,
            DType::F64 => self.f64(),
            DType::F32 | DType::F16 => {
                let v = self.f64();
                let fits = match dtype {
                    DType::F32 => (v as f32).is_finite(),
                    _ => half::f16::from_f64(v).is_finite(),
                };
                if !v.is_finite() || fits {
                    v
                } else {
                    0.5
                }
            }
        }
    }

    fn f64(&mut self) -> f64 {
        let v = match self.rng.gen_range(0..4) {
            0 => f64::from_bits(self.rng.gen()),
            1 => self.rng.gen_range(-10.0..10.0),
            2 => *self.pick(&[f64::INFINITY, f64::NEG_INFINITY, f64::NAN, -0.0, 1e300, 5e-324]),
            _ => self.rng.gen_range(-5..5) as f64,
        };
        if v.is_nan() {
            f64::NAN // NaN payloads are not kept by the text format.
        } else {
            v
        }
    }

    fn attr_value(&mut self) -> AttrValue {
        match self.rng.gen_range(0..6) {
            0 => AttrValue::Bool(self.rng.gen()),
            1 => AttrValue::Int(self.rng.gen()),
            // NaN is left out: `AttrValue`'s equality is IEEE, so a NaN attribute never equals itself.
            2 => AttrValue::Float(self.f64())
                .as_float()
                .filter(|v| !v.is_nan())
                .map_or(AttrValue::Int(0), AttrValue::Float),
            3 => {
                let n = self.rng.gen_range(0..6);
                let s: String =
                    (0..n).map(|_| *self.pick(&['a', '"', '\\', '\n', '\u{7f}', 'é', '\0', '\'', '{'])).collect();
                AttrValue::Str(s.into())
            }
            4 => {
                let n = self.rng.gen_range(0..4);
                AttrValue::Ints((0..n).map(|_| self.rng.gen()).collect::<Vec<i64>>().into())
            }
            _ => AttrValue::DType(self.dtype()),
        }
    }

    fn attrs(&mut self) -> Attrs {
        let mut attrs = Attrs::new();
        for _ in 0..self.rng.gen_range(0..3) {
            let key = *self.pick(KEYS);
            let value = self.attr_value();
            attrs.set(key, value);
        }
        attrs
    }

    /// A dense constant above the inline limit, from random bytes (so floats include NaN
    /// payloads, `-0.0` and subnormals), sometimes equal to an earlier one or the same bytes
    /// under another shape.
    fn large_constant(&mut self) -> Constant {
        if !self.large.is_empty() && self.rng.gen_bool(0.4) {
            let t = self.pick(&self.large.clone()).clone();
            if self.rng.gen_bool(0.5) {
                return Constant::Dense(t);
            }
            let flat = [t.len() as u64];
            return Constant::Dense(Tensor::from_le_bytes(&flat, t.dtype(), &t.to_le_bytes()).expect("same bytes"));
        }
        let shapes: [&[u64]; 3] = [&[1025], &[33, 32], &[2, 3, 200]];
        let shape = *self.pick(&shapes);
        let dtype = self.dtype();
        let n: u64 = shape.iter().product();
        let bytes: Vec<u8> = (0..n * dtype.size_bytes() as u64)
            .map(|_| if dtype == DType::Bool { self.rng.gen_range(0..2) } else { self.rng.gen() })
            .collect();
        let t = Tensor::from_le_bytes(shape, dtype, &bytes).expect("sized");
        self.large.push(t.clone());
        Constant::Dense(t)
    }

    fn constant(&mut self) -> Constant {
        if self.rng.gen_bool(0.05) {
            return self.large_constant();
        }
        let shape = if self.rng.gen_bool(0.5) { vec![] } else { self.shape() };
        let dtype = self.dtype();
        if self.rng.gen_bool(0.3) {
            // Only values the parser accepts for the dtype: integral values in range for
            // integers, 0 or 1 for bool, values that stay finite (or were not) for floats, and
            // finite ordered bounds for `uniform`.
            let fill = match self.rng.gen_range(0..3) {
                0 => Fill::Full(self.fill_value(dtype)),
                1 => {
                    let (a, b) = (self.rng.gen_range(-10.0..10.0), self.rng.gen_range(-10.0..10.0));
                    Fill::Uniform { seed: self.rng.gen(), low: f64::min(a, b), high: f64::max(a, b) }
                }
                _ => Fill::Normal { seed: self.rng.gen(), mean: self.f64(), std: self.f64() },
            };
            let mut shape = shape;
            if self.rng.gen_bool(0.1) {
                shape = vec![1 << 40, 1 << 20]; // never materialized
            }
            return Constant::Fill { ty: TensorType { shape: shape.into(), dtype }, fill };
        }
        let n: u64 = shape.iter().product();
        let dims = ndarray::IxDyn(&shape.iter().map(|&d| d as usize).collect::<Vec<_>>());
        let data = match dtype {
            DType::F32 => TensorData::F32(ndarray::ArcArray::from_shape_fn(dims, |_| {
                let v = self.f64() as f32;
                if v.is_nan() {
                    f32::NAN
                } else {
                    v
                }
            })),
            DType::F16 => TensorData::F16(ndarray::ArcArray::from_shape_fn(dims, |_| {
                let v = half::f16::from_f64(self.f64());
                if v.is_nan() {
                    half::f16::NAN
                } else {
                    v
                }
            })),
            DType::I64 => TensorData::I64(ndarray::ArcArray::from_shape_fn(dims, |_| self.rng.gen())),
            DType::I32 => TensorData::I32(ndarray::ArcArray::from_shape_fn(dims, |_| self.rng.gen())),
            DType::Bool => TensorData::Bool(ndarray::ArcArray::from_shape_fn(dims, |_| self.rng.gen())),
            DType::F64 => TensorData::F64(ndarray::ArcArray::from_shape_fn(dims, |_| self.f64())),
            DType::I8 => TensorData::I8(ndarray::ArcArray::from_shape_fn(dims, |_| self.rng.gen())),
            DType::I16 => TensorData::I16(ndarray::ArcArray::from_shape_fn(dims, |_| self.rng.gen())),
            DType::U8 => TensorData::U8(ndarray::ArcArray::from_shape_fn(dims, |_| self.rng.gen())),
            DType::U16 => TensorData::U16(ndarray::ArcArray::from_shape_fn(dims, |_| self.rng.gen())),
            DType::U32 => TensorData::U32(ndarray::ArcArray::from_shape_fn(dims, |_| self.rng.gen())),
            DType::U64 => TensorData::U64(ndarray::ArcArray::from_shape_fn(dims, |_| self.rng.gen())),
        };
        let t = Tensor(data);
        assert_eq!(t.len() as u64, n);
        Constant::Dense(t)
    }

    fn expr(&mut self, depth: u32) -> NodeId {
        let choice = if depth == 0 { self.rng.gen_range(0..3) } else { self.rng.gen_range(0..12) };
        match choice {
            0 if !self.scope.is_empty() => *self.pick(&self.scope.clone()),
            0 | 1 => {
                let c = self.constant();
                self.b.constant(c)
            }
            2 => {
                let name = *self.pick(&["main", "helper", "f.x", "g_1"]);
                self.b.global(name)
            }
            3 => {
                let e = self.expr(depth - 1);
                let relu = op::lookup("relu").expect("relu");
                self.b.call(relu, &[e], Attrs::new())
            }
            4 => {
                let (a, c) = (self.expr(depth - 1), self.expr(depth - 1));
                let add = op::lookup("add").expect("add");
                self.b.call(add, &[a, c], Attrs::new())
            }
            5 => {
                let n = self.rng.gen_range(0..4);
                let fields: Vec<NodeId> = (0..n).map(|_| self.expr(depth - 1)).collect();
                self.b.tuple(&fields)
            }
            6 => {
                let t = self.expr(depth - 1);
                let i = self.rng.gen_range(0..3);
                self.b.proj(t, i)
            }
            7 => {
                let c = self.expr(depth - 1);
                let t = self.block(depth - 1);
                let e = self.block(depth - 1);
                self.b.if_(c, t, e)
            }
            8 => {
                let mark = self.scope.len();
                let n = self.rng.gen_range(0..3);
                let params: Vec<NodeId> = (0..n)
                    .map(|_| {
                        let (name, ty) = (*self.pick(NAMES), self.opt_ty());
                        let p = self.b.var(name, ty);
                        self.scope.push(p);
                        p
                    })
                    .collect();
                let body = self.block(depth - 1);
                self.scope.truncate(mark);
                let (ret, attrs) = (self.opt_ty(), self.attrs());
                self.b.closure(&params, body, ret, attrs)
            }
            9 => {
                let callee = self.expr(depth - 1);
                let n = self.rng.gen_range(0..3);
                let args: Vec<NodeId> = (0..n).map(|_| self.expr(depth - 1)).collect();
                self.b.apply(callee, &args)
            }
            _ => self.block(depth - 1),
        }
    }

    fn block(&mut self, depth: u32) -> NodeId {
        let mark = self.scope.len();
        let n = self.rng.gen_range(0..4);
        let mut pairs = Vec::new();
        for _ in 0..n {
            let value = self.expr(depth);
            let (name, ty) = (*self.pick(NAMES), self.opt_ty());
            let var = self.b.var(name, ty);
            self.scope.push(var);
            pairs.push((var, value));
        }
        let result = self.expr(depth);
        self.scope.truncate(mark);
        self.b.block(&pairs, result)
    }

    fn function(mut self) -> passel_engine::ir::Function {
        let n = self.rng.gen_range(0..3);
        let params: Vec<NodeId> = (0..n)
            .map(|_| {
                let (name, ty) = (*self.pick(NAMES), self.opt_ty());
                let p = self.b.var(name, ty);
                self.scope.push(p);
                p
            })
            .collect();
        // Dead nodes are not printed.
        let _dead = self.expr(1);
        let depth = self.rng.gen_range(0..5);
        let body = self.block(depth);
        let (ret, attrs) = (self.opt_ty(), self.attrs());
        self.b.finish(&params, body, ret, attrs)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn print_then_parse_round_trips(seed in any::<u64>()) {
        let mut m = Module::new();
        let f = Gen::new(seed).function();
        let g = Gen::new(seed ^ 0x9e37_79b9).function();
        m.add("main", f).expect("fresh");
        m.add("helper", g).expect("fresh");
        let text = print_module(&m);
        let m2 = match parse_module(&text) {
            Ok(m2) => m2,
            Err(e) => panic!("{e}\n{text}"),
        };
        for ((_, a), (_, b)) in m.iter().zip(m2.iter()) {
            prop_assert!(structural_eq(a, b), "{}", text);
        }
        prop_assert_eq!(print_module(&m2), text);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let src = String::from_utf8_lossy(&bytes);
        let _ = parse_module(&src);
    }

    #[test]
    fn token_soup_never_panics(toks in proptest::collection::vec(0usize..TOKENS.len(), 0..120)) {
        let src: Vec<&str> = toks.iter().map(|&i| TOKENS[i]).collect();
        if let Ok(m) = parse_module(&src.join(" ")) {
            round_trip(&print_module(&m));
        }
    }
}

const TOKENS: &[&str] = &[
    "def",
    "@f",
    "@main",
    "(",
    ")",
    "{",
    "}",
    "[",
    "]",
    "<",
    ">",
    "%x",
    "%y",
    "%t.1",
    "let",
    "=",
    ";",
    ":",
    ",",
    ".",
    "0",
    "1",
    "relu",
    "add",
    "nope",
    "1.0f",
    "2i64",
    "-inf",
    "nan",
    "true",
    "if",
    "else",
    "fn",
    "->",
    "Tensor",
    "f32",
    "bool",
    "tensor",
    "full",
    "uniform",
    "seed",
    "#",
    "\"s\\",
    "\"a\"",
    "99999999999999999999",
    "// c\n",
    "é",
    "resource",
    "resources",
    "<(2,), bool>",
    "(r0)",
    "r0",
    "\"0100\"",
    "\"0g\"",
];

fn nested_types(depth: usize) -> String {
    format!("def @f(%x: {}Tensor[(), f32]{}) {{\n  %x\n}}\n", "(".repeat(depth), ",)".repeat(depth))
}

#[test]
fn the_nesting_limit_is_reached_within_a_one_mebibyte_stack() {
    // About 1 KiB of stack per level at opt-level 0 and half that at opt-level 1, so any
    // thread with a default stack can parse untrusted text.
    let worker = std::thread::Builder::new().stack_size(1 << 20).spawn(|| {
        for src in [nested_calls(600), nested_ifs(600), nested_types(600), nested_fns_and_tuples(600)] {
            assert!(!round_trip_or_nesting_error(&src));
        }
    });
    assert!(worker.expect("spawn").join().is_ok());
}

#[test]
fn literal_errors_name_the_literal() {
    let rank65 = vec!["1"; 65].join(", ");
    let src = format!(
        "def @a() {{ full<(18446744073709551616,), f32>(0.0) }}\n\
         def @b() {{ full<({rank65}), f32>(0.0) }}\n\
         def @c() {{ tensor<(2,), i32>[1, 2, 3] }}\n\
         def @d() {{ tensor<(1,), i32>[1.5] }}\n\
         def @e() {{ 99999999999999999999 }}\n\
         def @f() {{ relu(1.0f, \"x\") }}\n"
    );
    expect_test::expect![[r#"
        1:18: invalid dimension `18446744073709551616`
        2:210: tensor rank above 64
        3:12: tensor of shape [2] needs 2 values, got 3
        4:30: `1.5` is not a valid i32 value
        5:12: number `99999999999999999999` is out of range for i64
        6:23: expected an expression, found `"x"`"#]]
    .assert_eq(&errors(&src));
}

#[test]
fn huge_fills_and_long_dtype_names_parse_without_materializing() {
    let m = parse_module("def @w() { full<(1073741824, 1073741824), float32>(0.5) }").expect("parses");
    expect_test::expect![[r#"
        def @w() {
          full<(1073741824, 1073741824), f32>(0.5)
        }
    "#]]
    .assert_eq(&m.to_string());
}

#[test]
fn a_block_without_bindings_is_its_result() {
    let a = parse_module("def @f(%x: Tensor[(), f32]) { { { relu({ %x }) } } }").expect("parses");
    let b = parse_module("def @f(%x: Tensor[(), f32]) { relu(%x) }").expect("parses");
    assert!(module_structural_eq(&a, &b));
    assert_eq!(a.to_string(), b.to_string());
}

#[test]
fn every_live_node_carries_its_source_span() {
    let src = "def @f(%x: Tensor[(), f32], %c: Tensor[(), bool]) {\n  let %t = (relu(%x), 1.0f);\n  let %g = fn (%y) { add(%y, %t.0) };\n  if (%c) { %g(%x) } else { @f(%x, %c) }\n}\n";
    let m = parse_module(src).expect("parses");
    let f = m.get("f").expect("f");
    let live = f.live_mask();
    let mut texts = Vec::new();
    for id in f.node_ids().filter(|id| live[id.index()]) {
        let span = f.span(id).unwrap_or_else(|| panic!("{id} has no span"));
        texts.push(src[span.start as usize..span.end as usize].replace('\n', " "));
    }
    expect_test::expect![[r#"
        [
            "%x: Tensor[(), f32]",
            "%c: Tensor[(), bool]",
            "relu(%x)",
            "1.0f",
            "(relu(%x), 1.0f)",
            "let %t",
            "%y",
            "%t.0",
            "add(%y, %t.0)",
            "fn (%y) { add(%y, %t.0) }",
            "let %g",
            "%g(%x)",
            "@f",
            "@f(%x, %c)",
            "if (%c) { %g(%x) } else { @f(%x, %c) }",
            "{   let %t = (relu(%x), 1.0f);   let %g = fn (%y) { add(%y, %t.0) };   if (%c) { %g(%x) } else { @f(%x, %c) } }",
        ]
    "#]]
    .assert_debug_eq(&texts);
}

#[test]
fn repeated_scalar_operator_arguments_share_one_constant_node() {
    let src = "def @f(%x: Tensor[(), f32]) {\n  let %a = multiply(%x, 0.5f);\n  let %b = multiply(%a, 0.5f);\n  let %c = add(%b, 0.25f);\n  %c\n}\n";
    let m = parse_module(src).expect("parses");
    let f = m.get("f").expect("f");
    let consts: Vec<_> = f.node_ids().filter(|&id| matches!(f.kind(id), ExprKind::Const { .. })).collect();
    // One node for `0.5f` (used twice) and one for `0.25f`.
    assert_eq!(consts.len(), 2);
    assert_eq!(round_trip(src), src);
}

#[test]
fn scalar_constants_are_shared_between_functions_but_print_per_function() {
    let src =
        "def @f(%x: Tensor[(), f32]) {\n  add(%x, 1.5f)\n}\n\ndef @g(%x: Tensor[(), f32]) {\n  add(%x, 1.5f)\n}\n";
    let m = parse_module(src).expect("parses");
    let (f, g) = (m.get("f").expect("f"), m.get("g").expect("g"));
    let first_const = |func: &passel_engine::ir::Function| {
        func.node_ids()
            .find_map(|id| match *func.kind(id) {
                ExprKind::Const { idx } => Some(std::sync::Arc::clone(func.constant(idx))),
                _ => None,
            })
            .expect("a constant")
    };
    assert!(std::sync::Arc::ptr_eq(&first_const(f), &first_const(g)));
    assert_eq!(round_trip(src), src);
}

#[test]
fn a_repeated_literal_outside_operator_arguments_keeps_its_own_span() {
    let src = "def @f(%x: Tensor[(), f32]) {\n  let %a = add(%x, 1.0f);\n  if (1.0f) { %a } else { %x }\n}\n";
    let m = parse_module(src).expect("parses");
    let errs = passel_engine::ir::verify_module(&m).expect_err("the condition is not a bool");
    let span = errs[0].span.expect("a span");
    assert_eq!(&src[span.start as usize..span.end as usize], "1.0f");
    assert_eq!(span.start as usize, src.find("if (1.0f)").expect("the if") + 4);
}

// ---- large constants: the resources section ----

/// A 2000-element f32 tensor whose bits include a NaN payload, `-0.0` and a subnormal.
fn odd_floats() -> Tensor {
    let mut bits: Vec<u32> = (0..2000u32).map(|i| (i as f32 * 0.25 - 7.0).to_bits()).collect();
    bits[0] = 0x7fc0_0001; // quiet NaN with a payload
    bits[1] = 0xffa0_0000; // negative signalling-pattern NaN
    bits[2] = 0x8000_0000; // -0.0
    bits[3] = 0x0000_0001; // smallest subnormal
    let bytes: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
    Tensor::from_le_bytes(&[2000], DType::F32, &bytes).expect("sized")
}

fn const_function(consts: &[Constant]) -> passel_engine::ir::Function {
    let mut b = FunctionBuilder::new();
    let ids: Vec<NodeId> = consts.iter().map(|c| b.constant(c.clone())).collect();
    let body = b.tuple(&ids);
    b.finish(&[], body, None, Attrs::new())
}

#[test]
fn large_constants_print_as_shared_resources_and_parse_back_bit_exact() {
    let big = odd_floats();
    // The same bytes as another allocation, and under another shape and dtype.
    let copy = Tensor::from_le_bytes(&[2000], DType::F32, &big.to_le_bytes()).expect("sized");
    let as_i32 = Tensor::from_le_bytes(&[40, 50], DType::I32, &big.to_le_bytes()).expect("sized");
    let small = Tensor::from_f64s(&[4], DType::F32, &[1.0, 2.0, 3.0, 4.0]).expect("sized");
    let mask = Tensor::from_le_bytes(&[1100], DType::Bool, &vec![1u8; 1100]).expect("sized");
    let mut m = Module::new();
    m.add("a", const_function(&[Constant::Dense(big.clone()), Constant::Dense(small)])).expect("fresh");
    m.add("b", const_function(&[Constant::Dense(copy), Constant::Dense(as_i32), Constant::Dense(mask)]))
        .expect("fresh");
    let text = print_module(&m);
    let (code, section) = text.split_once("\nresources {\n").expect("a resources section");
    expect_test::expect![[r#"
        def @a() {
          (resource<(2000,), f32>(r0), tensor<(4,), f32>[1.0, 2.0, 3.0, 4.0])
        }

        def @b() {
          (resource<(2000,), f32>(r0), resource<(40, 50), i32>(r0), resource<(1100,), bool>(r1))
        }
    "#]]
    .assert_eq(code);
    let entries: Vec<&str> = section.lines().collect();
    assert_eq!(entries.len(), 3, "two blobs and the closing brace");
    assert!(entries[0].starts_with("  r0 = \"0100c07f0000a0ff000000800100000"), "{}", &entries[0][..60]);
    assert_eq!(entries[0].len(), "  r0 = \"\";".len() + 2 * 8000);
    assert_eq!(entries[2], "}");
    let m2 = parse_module(&text).unwrap_or_else(|e| panic!("{e}"));
    assert!(module_structural_eq(&m, &m2));
    assert_eq!(print_module(&m2), text, "fmt is a fixed point");
    let ExprKind::Tuple { fields } = *m2.get("a").unwrap().kind(m2.get("a").unwrap().body()) else { panic!() };
    let f = m2.get("a").unwrap();
    let ExprKind::Const { idx } = *f.kind(f.ids(fields)[0]) else { panic!() };
    assert!(matches!(&**f.constant(idx), Constant::Dense(t) if t.to_le_bytes() == big.to_le_bytes()));
    // A function printed alone carries its own section.
    let alone = print_function("a", m.get("a").unwrap());
    assert!(alone.contains("resource<(2000,), f32>(r0)") && alone.contains("\nresources {\n  r0 = \""));
    round_trip(&alone);
}

#[test]
fn a_resource_longer_than_the_printers_hex_piece_round_trips() {
    // 10,007 f32 = 40,028 bytes: the printer hex-encodes 16 KiB pieces, so this blob takes
    // three, the last one partial.
    let vals: Vec<f64> = (0..10_007).map(|i| (i as f64 * 0.37).sin() * 1e3).collect();
    let t = Tensor::from_f64s(&[10_007], DType::F32, &vals).expect("sized");
    let mut m = Module::new();
    m.add("a", const_function(&[Constant::Dense(t.clone())])).expect("fresh");
    let text = print_module(&m);
    let blob = text.lines().find(|l| l.starts_with("  r0 = \"")).expect("a blob");
    assert_eq!(blob.len(), "  r0 = \"\";".len() + 2 * 40_028);
    let hex: String = t.to_le_bytes().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(&blob[8..blob.len() - 2], hex);
    let m2 = parse_module(&text).unwrap_or_else(|e| panic!("{e}"));
    assert!(module_structural_eq(&m, &m2));
    assert_eq!(print_module(&m2), text);
}

#[test]
fn fills_and_small_dense_constants_stay_inline() {
    let text =
        round_trip("def @f() { (uniform<(1000000,), f32>(seed=1, low=0.0, high=1.0), tensor<(2,), i64>[1, 2]) }");
    assert!(!text.contains("resource"), "{text}");
}

#[test]
fn malformed_resources_are_errors_with_a_position() {
    let head = "def @f() {\n  resource<(2,), f32>(r0)\n}\n";
    let cases: &[(&str, &str)] = &[
        (
            "resources {\n  r0 = \"0000803f\";\n}\n",
            "2:3: resource `r0` does not fit its type: shape [2] of f32 needs 8 bytes, got 4",
        ),
        ("resources {\n  r0 = \"0000803f0000803x\";\n}\n", "5:24: resource `r0`: `x` is not a hex digit"),
        ("resources {\n  r0 = \"0000803f0000803\";\n}\n", "5:9: resource `r0` has an odd number of hex digits (15)"),
        ("resources {\n  r1 = \"0000803f0000803f\";\n}\n", "2:3: unknown resource `r0`"),
        (
            "resources {\n  r0 = \"0000803f0000803f\";\n  r0 = \"0000803f0000803f\";\n}\n",
            "6:3: resource `r0` is defined twice (first at 5:3)",
        ),
        (
            "resources {\n  r0 = \"0000803f0000803f\";\n}\ndef @g() { 1.0f }\n",
            "7:1: the `resources` section must come last",
        ),
        ("resources {\n  r0 = \"0000803f0000803f\";\n", "6:1: unterminated `resources` section (it starts at 4:1)"),
        ("resources {\n  r0 = 12;\n}\n", "5:8: expected a hex string `\"…\"`, found `12`"),
        ("", "2:3: unknown resource `r0`"),
    ];
    for (section, want) in cases {
        let got = errors(&format!("{head}{section}"));
        assert_eq!(got, *want, "section:\n{section}");
    }
    // A bool byte is true when not 0 (ONNX's rule, `Tensor::from_le_bytes`); it prints as 1.
    let bools = "def @f() {\n  resource<(2,), bool>(r0)\n}\nresources {\n  r0 = \"0102\";\n}\n";
    let printed = print_module(&parse_module(bools).expect("parses"));
    assert!(printed.contains("[true, true]") || printed.contains("0101"), "{printed}");
    let two = "def @f() { 1.0f }\nresources {\n}\nresources {\n}\n";
    assert!(errors(two).contains("4:1: the `resources` section must come last"), "{}", errors(two));
}

/// Issue #20: a name that would print and re-parse as something else is refused by every
/// way into a module, and a valid dotted name round-trips.
#[test]
fn module_refuses_names_that_do_not_reparse() {
    use passel_engine::ir::ModuleError;
    let f = parse_module("def @f() { 1.0f }").expect("parses").entries()[0].1.clone();
    let mut m = Module::new();
    for bad in ["", "a b", "f() { 2.0f }\ndef @g", "a-b", "x.1", "é"] {
        assert_eq!(m.add(bad, f.clone()), Err(ModuleError::InvalidName(bad.to_string())), "{bad:?}");
        assert!(m.insert(bad, f.clone()).is_err(), "{bad:?}");
    }
    assert!(m.is_empty());
    m.add("nn.main_2", f.clone()).expect("valid");
    assert!(m.rename("nn.main_2", "a b").is_err());
    let text = print_module(&m);
    let back = parse_module(&text).expect("re-parses");
    assert_eq!(back.entries().len(), 1);
    assert_eq!(&*back.entries()[0].0, "nn.main_2");
}
