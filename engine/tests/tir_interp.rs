//! The PrimFunc interpreter: loop-level text in, tensors out.

use passel_engine::interp::{
    block_nest_count, reduce_nest_count, run_prim_func, InterpError, PrimArg, PrimScalar, MAX_PRIM_DEPTH,
};
use passel_engine::ir::{parse_module, DType, Tensor, TensorData};
use passel_engine::tir::{BinOp, Buffer, Param, PrimFuncBuilder};
use proptest::prelude::*;

fn run(src: &str, name: &str, args: Vec<PrimArg>) -> Result<Vec<Tensor>, InterpError> {
    let m = parse_module(src).unwrap_or_else(|e| panic!("parses:\n{e}\n{src}"));
    let f = m.get_prim(name).unwrap_or_else(|| panic!("no prim @{name}"));
    run_prim_func(name, f, args)
}

fn ok(src: &str, name: &str, args: Vec<PrimArg>) -> Vec<Tensor> {
    run(src, name, args).unwrap_or_else(|e| panic!("runs: {e}\n{src}"))
}

fn err(src: &str, name: &str, args: Vec<PrimArg>) -> String {
    match run(src, name, args) {
        Ok(out) => panic!("expected an error, got {out:?}\n{src}"),
        Err(e) => e.to_string(),
    }
}

fn tensor(shape: &[u64], dtype: DType, vals: &[f64]) -> PrimArg {
    PrimArg::Buffer(Tensor::from_f64s(shape, dtype, vals).expect("tensor"))
}

fn f32s(t: &Tensor) -> Vec<f32> {
    match &t.0 {
        TensorData::F32(a) => a.iter().copied().collect(),
        other => panic!("not f32: {other:?}"),
    }
}

fn i64s(t: &Tensor) -> Vec<i64> {
    match &t.0 {
        TensorData::I64(a) => a.iter().copied().collect(),
        TensorData::I32(a) => a.iter().map(|&v| v as i64).collect(),
        TensorData::I8(a) => a.iter().map(|&v| v as i64).collect(),
        TensorData::U8(a) => a.iter().map(|&v| v as i64).collect(),
        TensorData::Bool(a) => a.iter().map(|&v| v as i64).collect(),
        other => panic!("not an integer tensor: {other:?}"),
    }
}

#[test]
fn elementwise_add() {
    let src = r#"
prim @add(%A: Buffer[(2, 3), f32], %B: Buffer[(2, 3), f32], %C: Buffer[(2, 3), f32]) {
  for %i in serial(0, 2) {
    for %j in parallel(0, 3) {
      %C[%i, %j] = add(%A[%i, %j], %B[%i, %j]);
    }
  }
}
"#;
    let a = tensor(&[2, 3], DType::F32, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let b = tensor(&[2, 3], DType::F32, &[10.0, 20.0, 30.0, 40.0, 50.0, 60.0]);
    let out = ok(src, "add", vec![a, b]);
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].shape(), &[2, 3]);
    assert_eq!(out[0].dtype(), DType::F32);
    assert_eq!(f32s(&out[0]), vec![11.0, 22.0, 33.0, 44.0, 55.0, 66.0]);
}

const MATMUL: &str = r#"
prim @matmul(%A: Buffer[(2, 3), f32], %B: Buffer[(3, 2), f32], %C: Buffer[(2, 2), f32]) {
  for %i in serial(0, 2) {
    for %j in serial(0, 2) {
      alloc %acc: Buffer[(1,), f32, scope="local"];
      for %k in serial(0, 3) {
        %acc[0] = add(%acc[0], mul(%A[%i, %k], %B[%k, %j]));
      }
      %C[%i, %j] = %acc[0];
    }
  }
}
"#;

#[test]
fn matmul_with_a_local_accumulator() {
    let a = tensor(&[2, 3], DType::F32, &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let b = tensor(&[3, 2], DType::F32, &[7.0, 8.0, 9.0, 10.0, 11.0, 12.0]);
    let out = ok(MATMUL, "matmul", vec![a, b]);
    // The accumulator is zero-filled afresh for every (i, j).
    assert_eq!(f32s(&out[0]), vec![58.0, 64.0, 139.0, 154.0]);
}

#[test]
fn integer_division_rounds_as_tvm() {
    let src = r#"
prim @divs(%X: Buffer[(4,), i64], %Y: Buffer[(4,), i64], %D: Buffer[(4,), i64], %M: Buffer[(4,), i64], %FD: Buffer[(4,), i64], %FM: Buffer[(4,), i64]) {
  for %i in serial(0, 4) {
    %D[%i] = div(%X[%i], %Y[%i]);
    %M[%i] = mod(%X[%i], %Y[%i]);
    %FD[%i] = floordiv(%X[%i], %Y[%i]);
    %FM[%i] = floormod(%X[%i], %Y[%i]);
  }
}
"#;
    let x = tensor(&[4], DType::I64, &[-7.0, 7.0, -7.0, 7.0]);
    let y = tensor(&[4], DType::I64, &[2.0, -2.0, -2.0, 2.0]);
    let out = ok(src, "divs", vec![x, y]);
    assert_eq!(i64s(&out[0]), vec![-3, -3, 3, 3], "div truncates");
    assert_eq!(i64s(&out[1]), vec![-1, 1, -1, 1], "mod has the dividend's sign");
    assert_eq!(i64s(&out[2]), vec![-4, -4, 3, 3], "floordiv rounds down");
    assert_eq!(i64s(&out[3]), vec![1, -1, -1, 1], "floormod has the divisor's sign");
}

#[test]
fn float_floordiv_and_floormod() {
    let src = r#"
prim @f(%O: Buffer[(4,), f32]) {
  %O[0] = floordiv(-7.0, 2.0);
  %O[1] = floormod(-7.0, 2.0);
  %O[2] = mod(-7.0, 2.0);
  %O[3] = floormod(7.5, -2.0);
}
"#;
    let out = ok(src, "f", vec![]);
    assert_eq!(f32s(&out[0]), vec![-4.0, 1.0, -1.0, -0.5]);
}

#[test]
fn narrow_integers_wrap() {
    let src = r#"
prim @w(%A: Buffer[(2,), i8], %B: Buffer[(2,), u8], %O8: Buffer[(4,), i8], %OU: Buffer[(4,), u8]) {
  %O8[0] = add(%A[0], %A[1]);
  %O8[1] = mul(%A[0], 2i8);
  %O8[2] = sub(-128i8, 1i8);
  %O8[3] = div(-128i8, -1i8);
  %OU[0] = add(%B[0], %B[1]);
  %OU[1] = sub(%B[1], %B[0]);
  %OU[2] = mul(16u8, 16u8);
  %OU[3] = bitwise_not(5u8);
}
"#;
    let a = tensor(&[2], DType::I8, &[100.0, 100.0]);
    let b = tensor(&[2], DType::U8, &[200.0, 100.0]);
    let out = ok(src, "w", vec![a, b]);
    assert_eq!(out[0].dtype(), DType::I8);
    assert_eq!(i64s(&out[0]), vec![(100i8).wrapping_add(100) as i64, (100i8).wrapping_mul(2) as i64, 127, -128]);
    assert_eq!(out[1].dtype(), DType::U8);
    assert_eq!(i64s(&out[1]), vec![44, 156, 0, 250]);
}

#[test]
fn f32_arithmetic_rounds_like_rust_f32() {
    let src = r#"
prim @r(%O: Buffer[(3,), f32], %P: Buffer[(1,), f64]) {
  %O[0] = add(0.1, 0.2);
  %O[1] = div(1.0, 3.0);
  %O[2] = mul(add(0.1, 0.2), 3.0);
  %P[0] = add(0.1f64, 0.2f64);
}
"#;
    let out = ok(src, "r", vec![]);
    let o = f32s(&out[0]);
    assert_eq!(o[0].to_bits(), (0.1f32 + 0.2f32).to_bits());
    assert_eq!(o[1].to_bits(), (1.0f32 / 3.0f32).to_bits());
    assert_eq!(o[2].to_bits(), ((0.1f32 + 0.2f32) * 3.0f32).to_bits());
    assert_eq!(out[1].to_f64s(), vec![0.1f64 + 0.2f64]);
}

#[test]
fn vectors_load_and_store_lane_by_lane() {
    let src = r#"
prim @v(%A: Buffer[(8,), f32], %B: Buffer[(8,), f32], %I: Buffer[(4,), i32]) {
  for %i in serial(0, 2) {
    %B[ramp(mul(%i, 4), 1, 4)] = add(%A[ramp(mul(%i, 4), 1, 4)], broadcast(10.0, 4));
  }
  %I[ramp(0, 1, 4)] = ramp(3i32, -2i32, 4);
}
"#;
    let a = tensor(&[8], DType::F32, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
    let out = ok(src, "v", vec![a]);
    assert_eq!(f32s(&out[0]), vec![10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0, 17.0]);
    assert_eq!(i64s(&out[1]), vec![3, 1, -1, -3]);
}

#[test]
fn vector_select_and_strided_ramp() {
    let src = r#"
prim @v(%A: Buffer[(8,), f32], %B: Buffer[(4,), f32]) {
  let %x = %A[ramp(0, 2, 4)];
  eval %x[0];
  %B[ramp(0, 1, 4)] = select(lt(%A[ramp(0, 2, 4)], broadcast(3.0, 4)), %A[ramp(1, 2, 4)], broadcast(-1.0, 4));
}
"#;
    // `%x` is a vector variable: not allowed, so the first form is a parse error.
    assert!(parse_module(src).is_err());
    let src = r#"
prim @v(%A: Buffer[(8,), f32], %B: Buffer[(4,), f32]) {
  %B[ramp(0, 1, 4)] = select(lt(%A[ramp(0, 2, 4)], broadcast(3.0, 4)), %A[ramp(1, 2, 4)], broadcast(-1.0, 4));
}
"#;
    let a = tensor(&[8], DType::F32, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
    let out = ok(src, "v", vec![a]);
    assert_eq!(f32s(&out[0]), vec![1.0, 3.0, -1.0, -1.0]);
}

#[test]
fn decl_views_share_storage_with_strides_and_offset() {
    let src = r#"
prim @d(%A: Buffer[(12,), f32], %O: Buffer[(2, 2), f32]) {
  decl %V: Buffer[(2, 2), f32, strides=[4, 2], offset=3] = %A;
  for %i in serial(0, 2) {
    for %j in serial(0, 2) {
      %O[%i, %j] = %V[%i, %j];
    }
  }
  %V[1, 1] = 100.0;
  %O[0, 0] = %A[9];
}
"#;
    let a = tensor(&[12], DType::F32, &(0..12).map(f64::from).collect::<Vec<_>>());
    let out = ok(src, "d", vec![a]);
    // V[i, j] = A[3 + 4i + 2j]; the write through V is visible through A (A[3 + 4 + 2] = A[9]).
    assert_eq!(f32s(&out[0]), vec![100.0, 5.0, 7.0, 9.0]);
}

#[test]
fn decl_over_an_alloc_and_strided_parameters() {
    let src = r#"
prim @d(%A: Buffer[(2, 2), f32, strides=[4, 1], offset=1], %O: Buffer[(2, 2), f32, strides=[1, 2]]) {
  alloc %T: Buffer[(4,), f32];
  decl %T2: Buffer[(2, 2), f32] = %T;
  for %i in serial(0, 2) {
    for %j in serial(0, 2) {
      %T2[%i, %j] = mul(%A[%i, %j], 2.0);
    }
  }
  for %k in serial(0, 4) {
    %O[floordiv(%k, 2), floormod(%k, 2)] = %T[%k];
  }
}
"#;
    // A views the 2x4 tensor's row-major storage from offset 1: A[i, j] = t[1 + 4i + j].
    let a = tensor(&[2, 4], DType::F32, &[0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0]);
    let out = ok(src, "d", vec![a]);
    // O is column-major storage, returned in its logical (row-major) order.
    assert_eq!(out[0].shape(), &[2, 2]);
    assert_eq!(f32s(&out[0]), vec![2.0, 4.0, 10.0, 12.0]);
}

#[test]
fn scalars_lets_ifs_and_casts() {
    let src = r#"
prim @s(%n: i32, %x: f32, %O: Buffer[(6,), i64], %F: Buffer[(3,), f32]) {
  let %m = mul(%n, 3i32);
  %O[0] = cast(%m, i64);
  if (gt(%m, 10i32)) {
    %O[1] = 1;
  } else {
    %O[1] = 2;
  }
  %O[2] = cast(f32(inf), i64);
  %O[3] = cast(f32(nan), i64);
  %O[4] = cast(cast(-1.5, i8), i64);
  %O[5] = let %t = cast(%x, i64) in add(%t, %t);
  %F[0] = round(2.5);
  %F[1] = round(-3.5);
  %F[2] = cast(select(isnan(f32(nan)), 1i32, 0i32), f32);
}
"#;
    let out = ok(src, "s", vec![PrimArg::Scalar(PrimScalar::Int(4)), PrimArg::Scalar(PrimScalar::Float(2.75))]);
    assert_eq!(i64s(&out[0]), vec![12, 1, i64::MAX, 0, -1, 4]);
    assert_eq!(f32s(&out[1]), vec![2.0, -4.0, 1.0]);
}

#[test]
fn intrinsics_match_the_graph_kernels() {
    use passel_engine::interp::eval_call;
    use passel_engine::ir::Attrs;
    let src = r#"
prim @u(%X: Buffer[(5,), f32], %E: Buffer[(5,), f32], %R: Buffer[(5,), f32], %S: Buffer[(5,), f32]) {
  for %i in serial(0, 5) {
    %E[%i] = erf(%X[%i]);
    %R[%i] = round(%X[%i]);
    %S[%i] = sigmoid(%X[%i]);
  }
}
"#;
    let xs = [-2.5, -0.5, 0.3, 1.5, 2.5];
    let out = ok(src, "u", vec![tensor(&[5], DType::F32, &xs)]);
    let x = Tensor::from_f64s(&[5], DType::F32, &xs).expect("tensor");
    for (i, op) in ["erf", "round", "sigmoid"].into_iter().enumerate() {
        let id = passel_engine::op::lookup(op).unwrap_or_else(|| panic!("op {op}"));
        let want = eval_call(id, &Attrs::new(), std::slice::from_ref(&x)).expect("kernel");
        assert_eq!(f32s(&out[i]), f32s(&want[0]), "{op}");
    }
    assert_eq!(f32s(&out[1]), vec![-2.0, -0.0, 0.0, 2.0, 2.0]);
}

#[test]
fn bit_operations_and_shifts() {
    let src = r#"
prim @b(%O: Buffer[(6,), i32], %U: Buffer[(2,), u8]) {
  %O[0] = bitwise_and(12i32, 10i32);
  %O[1] = bitwise_or(12i32, 10i32);
  %O[2] = bitwise_xor(12i32, 10i32);
  %O[3] = shift_left(1i32, 31i32);
  %O[4] = shift_right(-8i32, 1i32);
  %O[5] = shift_left(1i32, 40i32);
  %U[0] = shift_right(200u8, 3u8);
  %U[1] = shift_left(200u8, 1u8);
}
"#;
    let out = ok(src, "b", vec![]);
    assert_eq!(i64s(&out[0]), vec![8, 14, 6, i32::MIN as i64, -4, 0]);
    assert_eq!(i64s(&out[1]), vec![25, 144]);
}

#[test]
fn a_long_chain_of_flat_lets_does_not_nest() {
    let n = 5000;
    let mut src = String::from("prim @l(%O: Buffer[(1,), i64]) {\n  let %v0 = 0;\n");
    for i in 1..=n {
        src.push_str(&format!("  let %v{i} = add(%v{}, 1);\n", i - 1));
    }
    src.push_str(&format!("  %O[0] = %v{n};\n}}\n"));
    let out = ok(&src, "l", vec![]);
    assert_eq!(i64s(&out[0]), vec![n]);
}

#[test]
fn deep_expressions_run_up_to_the_limit_and_are_refused_beyond() {
    let nest = |depth: usize| {
        let mut e = String::from("1");
        for _ in 0..depth {
            e = format!("add({e}, 1)");
        }
        format!("prim @d(%O: Buffer[(1,), i64]) {{ %O[0] = {e}; }}")
    };
    // The parser's own nesting limit is lower than the interpreter's; build a deep function
    // within the parser's limit and check it runs (in a debug build, on a test thread).
    let src = nest(400);
    let out = ok(&src, "d", vec![]);
    assert_eq!(i64s(&out[0]), vec![401]);

    // Deeper, with the builder: just under the limit runs, over it is refused.
    let built = |depth: usize| {
        let mut b = PrimFuncBuilder::new();
        let o = b.buffer(Buffer::new("O", DType::I64, &[1])).expect("buffer");
        b.param(Param::Buf(o));
        let mut e = b.i64(1);
        for _ in 0..depth {
            let one = b.i64(1);
            e = b.bin(BinOp::Add, e, one).expect("add");
        }
        let zero = b.i64(0);
        let s = b.store(o, &[zero], e).expect("store");
        b.finish(s)
    };
    let out = run_prim_func("d", &built(MAX_PRIM_DEPTH - 10), vec![]).expect("runs");
    assert_eq!(i64s(&out[0]), vec![MAX_PRIM_DEPTH as i64 - 9]);
    let e = run_prim_func("d", &built(MAX_PRIM_DEPTH + 10), vec![]).expect_err("too deep").to_string();
    assert!(e.contains("in @d: expressions and loops nest"), "{e}");
    assert!(e.contains(&format!("deeper than the interpreter's limit of {MAX_PRIM_DEPTH}")), "{e}");
}

// ---- errors ----

#[test]
fn out_of_bounds_accesses_name_the_buffer_indices_and_shape() {
    let src = r#"
prim @oob(%A: Buffer[(4, 4), f32], %B: Buffer[(4,), f32]) {
  for %i in serial(0, 5) {
    %B[%i] = %A[%i, 0];
  }
}
"#;
    let a = tensor(&[4, 4], DType::F32, &[0.0; 16]);
    let e = err(src, "oob", vec![a]);
    assert!(e.contains("@oob"), "{e}");
    assert!(e.contains("out-of-bounds load `%A[4, 0]` (shape (4, 4))"), "{e}");
    assert!(e.contains("in store to `%B`"), "{e}");

    let src = r#"
prim @oob(%B: Buffer[(4,), f32]) {
  %B[-1] = 1.0;
}
"#;
    let e = err(src, "oob", vec![]);
    assert!(e.contains("out-of-bounds store `%B[-1]` (shape (4,))"), "{e}");

    let src = r#"
prim @oob(%B: Buffer[(4,), f32]) {
  %B[ramp(2, 1, 4)] = broadcast(1.0, 4);
}
"#;
    let e = err(src, "oob", vec![]);
    assert!(e.contains("out-of-bounds store `%B[[2, 3, 4, 5]]` (shape (4,))"), "{e}");
}

#[test]
fn division_by_zero_is_an_error() {
    for op in ["div", "mod", "floordiv", "floormod"] {
        let src = format!(
            r#"
prim @z(%n: i32, %O: Buffer[(1,), i32]) {{
  %O[0] = {op}(7i32, %n);
}}
"#
        );
        let e = err(&src, "z", vec![PrimArg::Scalar(PrimScalar::Int(0))]);
        assert!(e.contains("@z"), "{e}");
        assert!(e.contains(&format!("integer division by zero in `{op}` in store to `%O`")), "{e}");
    }
    // Float division by zero is IEEE.
    let src = "prim @z(%O: Buffer[(1,), f32]) { %O[0] = div(1.0, 0.0); }";
    assert_eq!(f32s(&ok(src, "z", vec![])[0]), vec![f32::INFINITY]);
}

#[test]
fn negative_extents_are_errors() {
    let src = r#"
prim @neg(%n: i64, %O: Buffer[(1,), f32]) {
  for %i in serial(0, %n) {
    %O[0] = 1.0;
  }
}
"#;
    let e = err(src, "neg", vec![PrimArg::Scalar(PrimScalar::Int(-3))]);
    assert!(e.contains("in @neg: loop `%i` has a negative extent -3"), "{e}");
    let out = ok(src, "neg", vec![PrimArg::Scalar(PrimScalar::Int(0))]);
    assert_eq!(f32s(&out[0]), vec![0.0]);
}

#[test]
fn too_large_allocs_are_errors() {
    let src = r#"
prim @big(%O: Buffer[(1,), f32]) {
  alloc %T: Buffer[(65536, 65536), f32];
  %O[0] = %T[0, 0];
}
"#;
    let e = err(src, "big", vec![]);
    assert!(e.contains("alloc of `%T` needs 4294967296 elements, more than the limit"), "{e}");
}

#[test]
fn bad_arguments_are_errors() {
    let src = "prim @f(%A: Buffer[(2, 2), f32], %n: i32, %O: Buffer[(2,), f32]) { }";
    let a = || tensor(&[2, 2], DType::F32, &[0.0; 4]);
    let int = |v| PrimArg::Scalar(PrimScalar::Int(v));

    let e = err(src, "f", vec![a(), int(1), a(), a()]);
    assert!(e.contains("in @f: takes 3 parameters, got 4 arguments"), "{e}");

    let e = err(src, "f", vec![a()]);
    assert!(e.contains("parameter 2 (`%n: i32`) has no argument"), "{e}");

    let e = err(src, "f", vec![tensor(&[2, 2], DType::F64, &[0.0; 4]), int(1)]);
    assert!(
        e.contains("argument 1 (`%A: Buffer[(2, 2), f32]`): expected dtype f32, got a tensor Tensor[(2, 2), f64]"),
        "{e}"
    );

    let e = err(src, "f", vec![tensor(&[3], DType::F32, &[0.0; 3]), int(1)]);
    assert!(e.contains("argument 1 (`%A: Buffer[(2, 2), f32]`): expected 4 elements"), "{e}");

    let e = err(src, "f", vec![int(1), int(1)]);
    assert!(e.contains("argument 1 (`%A: Buffer[(2, 2), f32]`) is a buffer parameter, got the scalar"), "{e}");

    let e = err(src, "f", vec![a(), a()]);
    assert!(e.contains("argument 2 (`%n: i32`) is a scalar parameter, got a tensor"), "{e}");

    let e = err(src, "f", vec![a(), PrimArg::Scalar(PrimScalar::Float(1.0))]);
    assert!(e.contains("argument 2 (`%n: i32`): expected an integer, got the float 1"), "{e}");

    let e = err(src, "f", vec![a(), int(1 << 40)]);
    assert!(e.contains("argument 2 (`%n: i32`): 1099511627776 does not fit in i32"), "{e}");

    // A strided view must reach no further than the tensor.
    let src = "prim @g(%A: Buffer[(2, 2), f32, strides=[4, 1]]) { }";
    let e = err(src, "g", vec![tensor(&[5], DType::F32, &[0.0; 5])]);
    assert!(e.contains("reaches 6 elements"), "{e}");
    assert!(run(src, "g", vec![tensor(&[6], DType::F32, &[0.0; 6])]).is_ok());
}

#[test]
fn a_view_past_its_storage_is_an_error() {
    let src = r#"
prim @v(%A: Buffer[(4,), f32], %O: Buffer[(1,), f32]) {
  decl %V: Buffer[(8,), f32] = %A;
  %O[0] = %V[7];
}
"#;
    let e = err(src, "v", vec![tensor(&[4], DType::F32, &[0.0; 4])]);
    assert!(e.contains("view `%V` reaches 8 elements but the storage of `%A` has 4"), "{e}");
}

// ---- properties ----

/// An affine index expression over loop variables `%i` and `%j`: text and a Rust evaluator.
#[derive(Clone, Debug)]
enum Affine {
    I,
    J,
    Const(i64),
    Add(Box<Affine>, Box<Affine>),
    Sub(Box<Affine>, Box<Affine>),
    Mul(Box<Affine>, i64),
    FloorDiv(Box<Affine>, i64),
    FloorMod(Box<Affine>, i64),
    Div(Box<Affine>, i64),
    Mod(Box<Affine>, i64),
    Min(Box<Affine>, Box<Affine>),
    Max(Box<Affine>, Box<Affine>),
}

impl Affine {
    fn text(&self) -> String {
        match self {
            Affine::I => "%i".into(),
            Affine::J => "%j".into(),
            Affine::Const(c) => c.to_string(),
            Affine::Add(a, b) => format!("add({}, {})", a.text(), b.text()),
            Affine::Sub(a, b) => format!("sub({}, {})", a.text(), b.text()),
            Affine::Mul(a, c) => format!("mul({}, {c})", a.text()),
            Affine::FloorDiv(a, c) => format!("floordiv({}, {c})", a.text()),
            Affine::FloorMod(a, c) => format!("floormod({}, {c})", a.text()),
            Affine::Div(a, c) => format!("div({}, {c})", a.text()),
            Affine::Mod(a, c) => format!("mod({}, {c})", a.text()),
            Affine::Min(a, b) => format!("min({}, {})", a.text(), b.text()),
            Affine::Max(a, b) => format!("max({}, {})", a.text(), b.text()),
        }
    }

    fn eval(&self, i: i64, j: i64) -> i64 {
        match self {
            Affine::I => i,
            Affine::J => j,
            Affine::Const(c) => *c,
            Affine::Add(a, b) => a.eval(i, j).wrapping_add(b.eval(i, j)),
            Affine::Sub(a, b) => a.eval(i, j).wrapping_sub(b.eval(i, j)),
            Affine::Mul(a, c) => a.eval(i, j).wrapping_mul(*c),
            // Values stay small, so the f64 quotient is exact enough to floor.
            Affine::FloorDiv(a, c) => (a.eval(i, j) as f64 / *c as f64).floor() as i64,
            Affine::FloorMod(a, c) => {
                let x = a.eval(i, j);
                x - (x as f64 / *c as f64).floor() as i64 * c
            }
            Affine::Div(a, c) => a.eval(i, j) / c,
            Affine::Mod(a, c) => a.eval(i, j) % c,
            Affine::Min(a, b) => a.eval(i, j).min(b.eval(i, j)),
            Affine::Max(a, b) => a.eval(i, j).max(b.eval(i, j)),
        }
    }
}

fn affine() -> impl Strategy<Value = Affine> {
    let leaf = prop_oneof![Just(Affine::I), Just(Affine::J), (-20i64..20).prop_map(Affine::Const)];
    let nonzero = prop_oneof![-9i64..=-1, 1i64..=9];
    leaf.prop_recursive(5, 32, 2, move |inner| {
        let nz = nonzero.clone();
        prop_oneof![
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Affine::Add(Box::new(a), Box::new(b))),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Affine::Sub(Box::new(a), Box::new(b))),
            (inner.clone(), -7i64..7).prop_map(|(a, c)| Affine::Mul(Box::new(a), c)),
            (inner.clone(), nz.clone()).prop_map(|(a, c)| Affine::FloorDiv(Box::new(a), c)),
            (inner.clone(), nz.clone()).prop_map(|(a, c)| Affine::FloorMod(Box::new(a), c)),
            (inner.clone(), nz.clone()).prop_map(|(a, c)| Affine::Div(Box::new(a), c)),
            (inner.clone(), nz).prop_map(|(a, c)| Affine::Mod(Box::new(a), c)),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| Affine::Min(Box::new(a), Box::new(b))),
            (inner.clone(), inner).prop_map(|(a, b)| Affine::Max(Box::new(a), Box::new(b))),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn affine_index_expressions_evaluate_as_rust_does(e in affine(), lo in -5i64..5) {
        let src = format!(
            r#"
prim @p(%O: Buffer[(4, 3), i64]) {{
  for %i in serial({lo}, 4) {{
    for %j in serial(0, 3) {{
      %O[sub(%i, {lo}), %j] = {};
    }}
  }}
}}
"#,
            e.text()
        );
        // `serial(lo, 4)` has extent 4: i runs lo..lo + 4.
        let out = ok(&src, "p", vec![]);
        let got = i64s(&out[0]);
        let mut want = Vec::new();
        for i in lo..lo + 4 {
            for j in 0..3 {
                want.push(e.eval(i, j));
            }
        }
        prop_assert_eq!(got, want, "{}", e.text());
    }
}

/// Runs `src` as written (loop nests whose body is one store take the block path) and with
/// every such store wrapped in an `attr` (which keeps them on the scalar path): the results,
/// or the errors, are the same (the same error text; tensors by [`first_difference`]: the same
/// bits, except that any two NaNs agree). On a difference it names the first differing
/// element of every output that differs.
fn block_and_scalar_agree(src: &str, name: &str, args: Vec<PrimArg>) -> Result<Vec<Tensor>, String> {
    let scalar_src = src.replace("/*S*/", "attr \"scalar\" = 0 {").replace("/*E*/", "}");
    let block_src = src.replace("/*S*/", "").replace("/*E*/", "");
    let count = |src: &str| {
        let m = parse_module(src).unwrap_or_else(|e| panic!("parses:\n{e}\n{src}"));
        block_nest_count(m.get_prim(name).expect("prim")).expect("compiles")
    };
    let marked = src.matches("/*S*/").count();
    assert_eq!(count(&block_src), marked, "every marked nest takes the block path:\n{block_src}");
    assert_eq!(count(&scalar_src), 0, "no nest of\n{scalar_src}\ntakes the block path");
    let a = run(&block_src, name, args.clone()).map_err(|e| e.to_string());
    let b = run(&scalar_src, name, args).map_err(|e| e.to_string());
    match (&a, &b) {
        (Ok(x), Ok(y)) => {
            assert_eq!(x.len(), y.len(), "block path and scalar path return different numbers of tensors");
            let diffs: Vec<String> = x
                .iter()
                .zip(y)
                .enumerate()
                .filter_map(|(k, (x, y))| first_difference(x, y).map(|d| format!("output {k}: {d}")))
                .collect();
            assert!(diffs.is_empty(), "block path and scalar path differ in\n{}\non\n{block_src}", diffs.join("\n"));
        }
        _ => assert_eq!(a, b, "block path and scalar path differ on\n{block_src}"),
    }
    a
}

/// The first element (row-major) where `block` and `scalar` differ, with both values and
/// their bits, or their dtype or shape mismatch; `None` when they agree. Elements agree when
/// their bits are equal or both are NaN: the sign and payload of a NaN that arithmetic
/// produces are not fixed (Rust lets the compiler commute `x * y` and `x + y`, and x86 takes
/// a result NaN from the first operand, so `mul(NaN, -NaN)` is either NaN at opt-level 3), and
/// no operation of the loop level can tell two NaNs apart (the interpreter's semantics, in
/// the header of `engine/src/interp/prim.rs`).
fn first_difference(block: &Tensor, scalar: &Tensor) -> Option<String> {
    if block.dtype() != scalar.dtype() || block.shape() != scalar.shape() {
        return Some(format!(
            "block {:?}{:?}, scalar {:?}{:?}",
            block.dtype(),
            block.shape(),
            scalar.dtype(),
            scalar.shape()
        ));
    }
    let (xb, yb) = (block.to_le_bytes(), scalar.to_le_bytes());
    let width = xb.len() / block.len().max(1);
    let (xv, yv) = (block.to_f64s(), scalar.to_f64s());
    let k = (0..block.len()).find(|&k| {
        let same_bits = xb[k * width..(k + 1) * width] == yb[k * width..(k + 1) * width];
        let both_nan = xv[k].is_nan() && yv[k].is_nan();
        !(same_bits || both_nan)
    })?;
    let hex = |b: &[u8]| b.iter().rev().map(|v| format!("{v:02x}")).collect::<String>();
    let mut at = Vec::new();
    let mut rest = k;
    for &d in block.shape().iter().rev() {
        at.push(rest % d);
        rest /= d;
    }
    at.reverse();
    Some(format!(
        "element {at:?} (flat {k}): block {} (0x{}), scalar {} (0x{})",
        xv[k],
        hex(&xb[k * width..(k + 1) * width]),
        yv[k],
        hex(&yb[k * width..(k + 1) * width])
    ))
}

#[test]
fn block_nests_compute_what_the_scalar_loops_compute() {
    // A map nest with broadcasting, a select, a comparison and a read of its own element.
    let src = r#"
prim @m(%A: Buffer[(3, 300), f32], %B: Buffer[(300,), f32], %C: Buffer[(3, 300), f32]) {
  for %i in serial(0, 3) {
    for %j in serial(0, 300) {
      /*S*/ %C[%i, %j] = select(lt(%A[%i, %j], %B[%j]), mul(%A[%i, %j], 3.0f), sub(%B[%j], %C[%i, %j])); /*E*/
    }
  }
  for %i in serial(0, 3) {
    for %j in serial(0, 300) {
      /*S*/ %C[%i, %j] = add(%C[%i, %j], 0.5f); /*E*/
    }
  }
}
"#;
    let a: Vec<f64> = (0..900).map(|i| ((i * 37 % 101) as f64) * 0.013 - 0.6).collect();
    let b: Vec<f64> = (0..300).map(|i| ((i * 11 % 53) as f64) * 0.02 - 0.5).collect();
    let out = block_and_scalar_agree(src, "m", vec![tensor(&[3, 300], DType::F32, &a), tensor(&[300], DType::F32, &b)])
        .expect("runs");
    let want: Vec<f32> = (0..900)
        .map(|k| {
            let (x, y) = (a[k] as f32, b[k % 300] as f32);
            (if x < y { x * 3.0 } else { y - 0.0 }) + 0.5
        })
        .collect();
    assert_eq!(f32s(&out[0]), want);

    // Reductions: f32 sums in loop order (rounded every step), integer products that wrap,
    // a max over a window with clamped loads.
    let src = r#"
prim @r(%A: Buffer[(4, 700), f32], %I: Buffer[(4, 9), i32], %S: Buffer[(4,), f32], %P: Buffer[(4,), i32], %M: Buffer[(4, 700), f32]) {
  for %i in serial(0, 4) {
    %S[%i] = 0.0f;
    for %k in serial(0, 700) {
      /*S*/ %S[%i] = add(%S[%i], mul(%A[%i, %k], %A[%i, %k])); /*E*/
    }
    %P[%i] = 1i32;
    for %k in serial(0, 9) {
      /*S*/ %P[%i] = mul(%P[%i], %I[%i, %k]); /*E*/
    }
    for %j in serial(0, 700) {
      %M[%i, %j] = f32(-inf);
      for %r in serial(0, 3) {
        /*S*/ %M[%i, %j] = max(%M[%i, %j], %A[%i, min(max(sub(add(%j, %r), 1), 0), 699)]); /*E*/
      }
    }
  }
}
"#;
    let a: Vec<f64> = (0..2800).map(|i| ((i * 29 % 97) as f64) * 0.01 - 0.5).collect();
    let ints: Vec<f64> = (0..36).map(|i| ((i * 7 % 13) as f64) - 6.0).collect();
    block_and_scalar_agree(src, "r", vec![tensor(&[4, 700], DType::F32, &a), tensor(&[4, 9], DType::I32, &ints)])
        .expect("runs");
}

#[test]
fn block_nests_report_errors_as_the_scalar_loops_do() {
    // Out of bounds in the middle of the second block, after the first block was stored.
    let src = r#"
prim @oob(%A: Buffer[(400,), f32], %B: Buffer[(400,), f32]) {
  for %i in serial(0, 400) {
    /*S*/ %B[%i] = %A[select(lt(%i, 300), %i, add(%i, 100))]; /*E*/
  }
}
"#;
    let e = block_and_scalar_agree(src, "oob", vec![tensor(&[400], DType::F32, &[1.0; 400])]).unwrap_err();
    assert!(e.contains("out-of-bounds load `%A[400]` (shape (400,))"), "{e}");
    // A division by zero inside a reduction.
    let src = r#"
prim @z(%A: Buffer[(600,), i32], %S: Buffer[(1,), i32]) {
  for %k in serial(0, 600) {
    /*S*/ %S[0] = add(%S[0], div(600i32, %A[%k])); /*E*/
  }
}
"#;
    let mut vals = vec![1.0; 600];
    vals[450] = 0.0;
    let e = block_and_scalar_agree(src, "z", vec![tensor(&[600], DType::I32, &vals)]).unwrap_err();
    assert!(e.contains("integer division by zero in `div`"), "{e}");
}

#[test]
fn block_nests_with_lets_and_i32_loops_compute_what_the_scalar_loops_compute() {
    // What the lowering pipeline leaves: i32 loops (NarrowDataType), flat indices
    // (FlattenBuffer) and `let`s before the store (CommonSubexprElimTIR). A padded 3-tap
    // convolution as a reduction whose accumulator index is a `let`, then a map whose
    // stored index and value share a `let`.
    let src = r#"
prim @c(%A: Buffer[(2, 300), f32], %W: Buffer[(3,), f32], %O: Buffer[(600,), f32], %P: Buffer[(600,), f32]) {
  decl %A_1: Buffer[(600,), f32] = %A;
  for %i in serial(0i32, 2i32) {
    for %j in serial(0i32, 300i32) {
      %O[add(%j, mul(%i, 300i32))] = 0.0f;
      for %r in serial(0i32, 3i32) {
        /*S*/ let %v1 = sub(add(%r, %j), 1i32);
        let %v2 = add(%j, mul(%i, 300i32));
        %O[%v2] = add(%O[%v2], mul(select(and(ge(%v1, 0i32), lt(%v1, 300i32)), %A_1[add(mul(%i, 300i32), min(max(%v1, 0i32), 299i32))], 0.0f), %W[%r])); /*E*/
      }
    }
  }
  for %i in serial(0i32, 2i32) {
    for %j in serial(0i32, 300i32) {
      /*S*/ let %v3 = add(%j, mul(%i, 300i32));
      let %x = mul(%O[%v3], 0.5f);
      %P[%v3] = select(lt(%x, 0.0f), 0.0f, %x); /*E*/
    }
  }
}
"#;
    let a: Vec<f64> = (0..600).map(|i| ((i * 37 % 101) as f64) * 0.013 - 0.6).collect();
    let w = [0.25, -0.5, 0.75];
    let out = block_and_scalar_agree(src, "c", vec![tensor(&[2, 300], DType::F32, &a), tensor(&[3], DType::F32, &w)])
        .expect("runs");
    assert_eq!(reduces(src, "c"), 1, "the convolution runs with its output loops");
    let at = |i: usize, j: i64| if (0..300).contains(&j) { a[i * 300 + j as usize] as f32 } else { 0.0 };
    let want: Vec<f32> = (0..600)
        .map(|k| {
            let (i, j) = (k / 300, (k % 300) as i64);
            let mut acc = 0.0f32;
            for (r, &wr) in w.iter().enumerate() {
                acc += at(i, j + r as i64 - 1) * wr as f32;
            }
            (acc * 0.5).max(0.0)
        })
        .collect();
    assert_eq!(f32s(&out[1]), want);

    // An error in a `let` value: the division by zero is reported as the scalar loops report it.
    let src = r#"
prim @z(%A: Buffer[(600,), i32], %S: Buffer[(600,), i32]) {
  for %k in serial(0i32, 600i32) {
    /*S*/ let %q = div(600i32, %A[%k]);
    %S[%k] = add(%q, 1i32); /*E*/
  }
}
"#;
    let mut vals = vec![1.0; 600];
    vals[450] = 0.0;
    let e = block_and_scalar_agree(src, "z", vec![tensor(&[600], DType::I32, &vals)]).unwrap_err();
    assert!(e.contains("integer division by zero in `div`"), "{e}");
}

#[test]
fn block_nests_with_casts_and_intrinsics_compute_what_the_scalar_loops_compute() {
    // Float intrinsics of one and two arguments, `isnan`, casts both ways (saturating float →
    // integer), integer intrinsics; NaN and infinities among the inputs.
    let src = r#"
prim @u(%A: Buffer[(2, 300), f32], %F: Buffer[(2, 300), f32], %I: Buffer[(2, 300), i32], %H: Buffer[(2, 300), f16]) {
  for %i in serial(0i32, 2i32) {
    for %j in serial(0i32, 300i32) {
      /*S*/ %F[%i, %j] = add(mul(%A[%i, %j], sigmoid(%A[%i, %j])), select(isnan(%A[%i, %j]), 7.0f, pow(abs(%A[%i, %j]), 0.5f))); /*E*/
    }
  }
  for %i in serial(0, 2) {
    for %j in serial(0, 300) {
      /*S*/ %I[%i, %j] = bitwise_and(shift_left(abs(cast(mul(%A[%i, %j], 1000000000.0f), i32)), 3i32), cast(%j, i32)); /*E*/
    }
  }
  for %i in serial(0, 2) {
    for %j in serial(0, 300) {
      /*S*/ %H[%i, %j] = cast(add(exp(cast(%A[%i, %j], f16)), cast(floordiv(%j, 7), f16)), f16); /*E*/
    }
  }
}
"#;
    let mut a: Vec<f64> = (0..600).map(|i| ((i * 37 % 101) as f64) * 0.07 - 3.5).collect();
    a[10] = f64::NAN;
    a[20] = f64::INFINITY;
    a[30] = f64::NEG_INFINITY;
    a[40] = 1e30;
    block_and_scalar_agree(src, "u", vec![tensor(&[2, 300], DType::F32, &a)]).expect("runs");
}

#[test]
fn nan_results_of_both_paths_agree_as_nans_and_nothing_computed_from_them_differs() {
    // With %A NaN, `sigmoid` gives a NaN of the other sign, so `mul` and `add` see two NaNs of
    // opposite signs: which one is the result is not fixed (at opt-level 3 the block path's
    // loop computes `y * x` and gets the other sign than the scalar closure). Every operation
    // on the result gives the same value either way: isnan, comparisons, casts to integers
    // (NaN → 0), abs, select.
    let src = r#"
prim @n(%A: Buffer[(300,), f32], %F: Buffer[(300,), f32], %G: Buffer[(300,), f32], %I: Buffer[(300,), i32], %J: Buffer[(300,), f32]) {
  for %i in serial(0, 300) {
    /*S*/ %F[%i] = mul(%A[%i], sigmoid(%A[%i])); /*E*/
  }
  for %i in serial(0, 300) {
    /*S*/ %G[%i] = add(neg(%A[%i]), %A[%i]); /*E*/
  }
  for %i in serial(0, 300) {
    /*S*/ %I[%i] = add(add(mul(cast(isnan(mul(%A[%i], sigmoid(%A[%i]))), i32), 100i32), mul(cast(gt(add(neg(%A[%i]), %A[%i]), 0.0f), i32), 10i32)), cast(mul(%A[%i], sigmoid(%A[%i])), i32)); /*E*/
  }
  for %i in serial(0, 300) {
    /*S*/ %J[%i] = select(isnan(%F[%i]), abs(%F[%i]), 2.0f); /*E*/
  }
}
"#;
    let a: Vec<f64> = (0..300)
        .map(|i| match i % 4 {
            0 => f64::NAN,
            1 => -f64::NAN,
            2 => 3.0,
            _ => -2.0,
        })
        .collect();
    let out = block_and_scalar_agree(src, "n", vec![tensor(&[300], DType::F32, &a)]).expect("runs");
    let (f, g, j) = (f32s(&out[0]), f32s(&out[1]), f32s(&out[3]));
    let ints = i64s(&out[2]);
    for k in 0..300 {
        let nan = k % 4 < 2;
        assert_eq!(f[k].is_nan(), nan, "F[{k}] = {}", f[k]);
        assert_eq!(g[k].is_nan(), nan, "G[{k}] = {}", g[k]);
        // isnan → 100, NaN > 0 is false, cast(NaN, i32) = 0; else x·sigmoid(x) truncated.
        let want = match k % 4 {
            0 | 1 => 100,
            2 => 2, // 3 · 0.9526 = 2.86
            _ => 0, // -2 · 0.1192 = -0.24
        };
        assert_eq!(ints[k], want, "I[{k}]");
        if nan {
            assert!(j[k].is_nan() && j[k].is_sign_positive(), "J[{k}] = {:#x}", j[k].to_bits());
        } else {
            assert_eq!(j[k], 2.0);
        }
    }
}

#[test]
fn block_and_scalar_results_agree_by_bits_except_between_nans() {
    let t = |v: f32| Tensor::from_f64s(&[2, 2], DType::F32, &[1.0, 2.0, 3.0, v as f64]).expect("tensor");
    assert_eq!(first_difference(&t(f32::NAN), &t(-f32::NAN)), None);
    assert_eq!(first_difference(&t(f32::from_bits(0x7fc0_0001)), &t(f32::NAN)), None);
    assert_eq!(first_difference(&t(5.0), &t(5.0)), None);
    let d = first_difference(&t(f32::NAN), &t(4.0)).expect("NaN and a number differ");
    assert!(d.starts_with("element [1, 1] (flat 3): block NaN (0x7fc00000), scalar 4 (0x40800000)"), "{d}");
    // -0.0 and 0.0 compare equal but are told apart (1 / x), so their bits must match.
    assert!(first_difference(&t(0.0), &t(-0.0)).is_some());
    let i = Tensor::from_f64s(&[3], DType::I32, &[1.0, 2.0, 3.0]).expect("tensor");
    let k = Tensor::from_f64s(&[3], DType::I32, &[1.0, 2.0, -3.0]).expect("tensor");
    assert_eq!(
        first_difference(&i, &k).as_deref(),
        Some("element [2] (flat 2): block 3 (0x00000003), scalar -3 (0xfffffffd)")
    );
    assert!(first_difference(&t(0.0), &i).is_some());
}

/// How many initialised reductions of `src` (markers removed) run with their outer loops.
fn reduces(src: &str, name: &str) -> usize {
    let src = src.replace("/*S*/", "").replace("/*E*/", "");
    let m = parse_module(&src).unwrap_or_else(|e| panic!("parses:\n{e}\n{src}"));
    reduce_nest_count(m.get_prim(name).expect("prim")).expect("compiles")
}

#[test]
fn initialised_reductions_run_as_one_block_nest_over_their_outer_loops() {
    // What LegalizeOps + FuseTIR + the tir pipeline make of a padded convolution: an init
    // store, then a 3×3-tap reduction with `let`s (18 iterations: 14 outer iterations share a
    // block), and an integer product initialised in another buffer's element.
    let src = r#"
prim @conv(%A: Buffer[(2, 40, 40), f32], %W: Buffer[(3, 2, 3, 3), f32], %I: Buffer[(7, 5), i32], %O: Buffer[(3, 40, 40), f32], %P: Buffer[(7,), i32], %Q: Buffer[(7,), i32]) {
  decl %A_1: Buffer[(3200,), f32] = %A;
  decl %W_1: Buffer[(54,), f32] = %W;
  decl %O_1: Buffer[(4800,), f32] = %O;
  for %c in serial(0i32, 3i32) {
    for %y in serial(0i32, 40i32) {
      for %x in serial(0i32, 40i32) {
        %O_1[add(add(%x, mul(%y, 40i32)), mul(%c, 1600i32))] = 0.5f;
        for %k in serial(0i32, 2i32) {
          for %ry in serial(0i32, 3i32) {
            for %rx in serial(0i32, 3i32) {
              /*S*/ let %v3 = sub(add(%rx, %x), 1i32);
              let %v2 = sub(add(%ry, %y), 1i32);
              let %v1 = add(add(%x, mul(%y, 40i32)), mul(%c, 1600i32));
              %O_1[%v1] = add(%O_1[%v1], mul(select(and(and(ge(%v2, 0i32), lt(%v2, 40i32)), and(ge(%v3, 0i32), lt(%v3, 40i32))), %A_1[add(add(mul(%k, 1600i32), mul(min(max(%v2, 0i32), 39i32), 40i32)), min(max(%v3, 0i32), 39i32))], 0.0f), %W_1[add(add(add(%rx, mul(%ry, 3i32)), mul(%k, 9i32)), mul(%c, 18i32))])); /*E*/
            }
          }
        }
      }
    }
  }
  for %i in serial(0, 7) {
    %Q[%i] = 1i32;
    for %k in serial(0, 5) {
      /*S*/ %P[%i] = mul(%P[%i], %I[%i, %k]); /*E*/
    }
  }
}
"#;
    let a: Vec<f64> = (0..3200).map(|i| ((i * 37 % 101) as f64) * 0.013 - 0.6).collect();
    let w: Vec<f64> = (0..54).map(|i| ((i * 11 % 23) as f64) * 0.05 - 0.5).collect();
    let ints: Vec<f64> = (0..35).map(|i| ((i * 7 % 13) as f64) - 6.0).collect();
    let args = vec![
        tensor(&[2, 40, 40], DType::F32, &a),
        tensor(&[3, 2, 3, 3], DType::F32, &w),
        tensor(&[7, 5], DType::I32, &ints),
    ];
    let out = block_and_scalar_agree(src, "conv", args).expect("runs");
    assert_eq!(reduces(src, "conv"), 2, "both run with their outer loops");
    // The convolution, computed here in the same order (f32, rounded every step).
    let at = |k: usize, y: i64, x: i64| {
        if (0..40).contains(&y) && (0..40).contains(&x) {
            a[k * 1600 + y as usize * 40 + x as usize] as f32
        } else {
            0.0
        }
    };
    let want: Vec<f32> = (0..4800)
        .map(|o| {
            let (c, y, x) = (o / 1600, (o / 40 % 40) as i64, (o % 40) as i64);
            let mut acc = 0.5f32;
            for k in 0..2 {
                for ry in 0..3 {
                    for rx in 0..3 {
                        acc += at(k, y + ry - 1, x + rx - 1) * w[c * 18 + k * 9 + ry as usize * 3 + rx as usize] as f32;
                    }
                }
            }
            acc
        })
        .collect();
    assert_eq!(f32s(&out[0]), want);
    // `%P` is never initialised (the init stores into `%Q`): products of zero; `%Q` is all ones.
    assert_eq!(i64s(&out[1]), vec![0; 7]);
    assert_eq!(i64s(&out[2]), vec![1; 7]);
}

#[test]
fn initialised_reductions_report_errors_and_keep_partial_results_as_the_scalar_loops_do() {
    // An out-of-bounds load in outer iteration 23 (the third block: 10 outer iterations of 24
    // reduction steps per block): the first 23 outputs are stored, then the error.
    let src = r#"
prim @oob(%A: Buffer[(40, 24), f32], %S: Buffer[(40,), f32]) {
  for %i in serial(0, 40) {
    %S[%i] = 0.0f;
    for %k in serial(0, 24) {
      /*S*/ %S[%i] = add(%S[%i], %A[select(lt(%i, 23), %i, add(%i, 100)), %k]); /*E*/
    }
  }
}
"#;
    let e = block_and_scalar_agree(src, "oob", vec![tensor(&[40, 24], DType::F32, &[1.0; 960])]).unwrap_err();
    assert!(e.contains("out-of-bounds load `%A[123, 0]` (shape (40, 24))"), "{e}");
    assert_eq!(reduces(src, "oob"), 1);
    // A division by zero in an integer fold (`div` as the reduction's operator) in outer
    // iteration 4, and in a term in outer iteration 6.
    for (op, zero_at) in [("div(%S[%i], %A[%i, %k])", 4 * 6 + 2), ("add(%S[%i], div(60i32, %A[%i, %k]))", 6 * 6 + 5)] {
        let src = format!(
            r#"
prim @z(%A: Buffer[(10, 6), i32], %S: Buffer[(10,), i32]) {{
  for %i in serial(0, 10) {{
    %S[%i] = 1000i32;
    for %k in serial(0, 6) {{
      /*S*/ %S[%i] = {op}; /*E*/
    }}
  }}
}}
"#
        );
        let mut vals = vec![2.0; 60];
        vals[zero_at] = 0.0;
        let e = block_and_scalar_agree(&src, "z", vec![tensor(&[10, 6], DType::I32, &vals)]).unwrap_err();
        assert!(e.contains("integer division by zero in `div`"), "{e}");
        assert_eq!(reduces(&src, "z"), 1);
    }
}

#[test]
fn reductions_that_read_what_they_store_stay_on_the_scalar_loops() {
    // The first term reads the accumulator's buffer at another element, and the second init
    // value reads the buffer the reduction stores: neither may be computed ahead of the stores.
    // Only the second reduction nest, alone, takes the block path (marked).
    let src = r#"
prim @r(%A: Buffer[(8, 4), f32], %S: Buffer[(8,), f32], %T: Buffer[(8,), f32]) {
  for %i in serial(0, 8) {
    %S[%i] = 1.0f;
    for %k in serial(0, 4) {
      %S[%i] = add(%S[%i], mul(%A[%i, %k], %S[0]));
    }
  }
  for %i in serial(0, 8) {
    %T[%i] = %S[%i];
    for %k in serial(0, 4) {
      /*S*/ %S[%i] = add(%S[%i], %A[%i, %k]); /*E*/
    }
  }
}
"#;
    let a: Vec<f64> = (0..32).map(|i| i as f64 * 0.25).collect();
    let out = block_and_scalar_agree(src, "r", vec![tensor(&[8, 4], DType::F32, &a)]).expect("runs");
    assert_eq!(reduces(src, "r"), 0);
    let mut s = [0f32; 8];
    for i in 0..8 {
        s[i] = 1.0;
        for k in 0..4 {
            s[i] += a[i * 4 + k] as f32 * s[0];
        }
    }
    let t = s;
    for i in 0..8 {
        for k in 0..4 {
            s[i] += a[i * 4 + k] as f32;
        }
    }
    assert_eq!(f32s(&out[0]), s.to_vec());
    assert_eq!(f32s(&out[1]), t.to_vec());
}

#[test]
fn affine_indices_compute_what_the_scalar_loops_compute() {
    // Index arithmetic affine in the loop variables (sums, differences, products by constants,
    // casts, `let`s, extent-1 loops, row-major flat indices, a reversed axis) runs as filled
    // ramps; the results are the scalar loops' (and the transposes are checked by hand).
    let src = r#"
prim @t(%A: Buffer[(6, 50), f32], %B: Buffer[(50, 6), f32], %C: Buffer[(300,), f32], %D: Buffer[(1, 6, 50), f32]) {
  decl %B_1: Buffer[(300,), f32] = %B;
  for %i in serial(0i32, 6i32) {
    for %j in serial(0i32, 50i32) {
      /*S*/ let %v = add(mul(%j, 6i32), %i);
      %B_1[%v] = %A[%i, sub(49i32, %j)]; /*E*/
    }
  }
  for %z in serial(0i32, 1i32) {
    for %i in serial(0i32, 6i32) {
      for %j in serial(0i32, 50i32) {
        /*S*/ %C[cast(add(add(mul(%z, 300i32), mul(%i, 50i32)), %j), i64)] = mul(%A[%i, %j], 2.0f); /*E*/
      }
    }
  }
  for %z in serial(0, 1) {
    for %i in serial(0, 6) {
      for %j in serial(0, 50) {
        /*S*/ %D[%z, %i, %j] = add(%C[add(mul(%i, 50), %j)], %B[%j, sub(5, %i)]); /*E*/
      }
    }
  }
}
"#;
    let a: Vec<f64> = (0..300).map(|i| ((i * 37 % 101) as f64) * 0.013 - 0.6).collect();
    let out = block_and_scalar_agree(src, "t", vec![tensor(&[6, 50], DType::F32, &a)]).expect("runs");
    let b = f32s(&out[0]);
    for i in 0..6 {
        for j in 0..50 {
            assert_eq!(b[j * 6 + i], a[i * 50 + 49 - j] as f32);
        }
    }
    let d = f32s(&out[2]);
    for i in 0..6 {
        for j in 0..50 {
            assert_eq!(d[i * 50 + j], a[i * 50 + j] as f32 * 2.0 + b[j * 6 + 5 - i]);
        }
    }

    // An index whose u8 arithmetic wraps (100 + %i past 255) is not affine: it runs on the index
    // registers and wraps as the scalar loops do; an index that leaves its dimension (the last
    // iteration of `add(%i, 1)`) is an error reported as the scalar loops report it.
    let src = r#"
prim @w(%A: Buffer[(300,), f32], %B: Buffer[(200,), f32]) {
  for %i in serial(0u8, 200u8) {
    /*S*/ %B[%i] = %A[add(%i, 100u8)]; /*E*/
  }
}
"#;
    let a: Vec<f64> = (0..300).map(|i| i as f64).collect();
    let out = block_and_scalar_agree(src, "w", vec![tensor(&[300], DType::F32, &a)]).expect("runs");
    let want: Vec<f32> = (0..200u32).map(|i| ((i + 100) % 256) as f32).collect();
    assert_eq!(f32s(&out[0]), want);
    let src = r#"
prim @o(%A: Buffer[(400,), f32], %B: Buffer[(400,), f32]) {
  for %i in serial(0i32, 400i32) {
    /*S*/ %B[%i] = %A[add(%i, 1i32)]; /*E*/
  }
}
"#;
    let e = block_and_scalar_agree(src, "o", vec![tensor(&[400], DType::F32, &[1.0; 400])]).unwrap_err();
    assert!(e.contains("out-of-bounds load `%A[400]` (shape (400,))"), "{e}");

    // An initialised reduction whose init and accumulator offsets are affine in the outer loops
    // (one of extent 1), filled once per outer iteration.
    let src = r#"
prim @m(%A: Buffer[(5, 8), f32], %W: Buffer[(8, 7), f32], %O: Buffer[(35,), f32]) {
  for %z in serial(0i32, 1i32) {
    for %i in serial(0i32, 5i32) {
      for %j in serial(0i32, 7i32) {
        %O[add(add(mul(%i, 7i32), %j), mul(%z, 35i32))] = 0.5f;
        for %k in serial(0i32, 8i32) {
          /*S*/ let %acc = add(mul(%i, 7i32), %j);
          %O[%acc] = add(%O[%acc], mul(%A[%i, %k], %W[%k, %j])); /*E*/
        }
      }
    }
  }
}
"#;
    let a: Vec<f64> = (0..40).map(|i| ((i * 13 % 17) as f64) * 0.1 - 0.8).collect();
    let w: Vec<f64> = (0..56).map(|i| ((i * 5 % 11) as f64) * 0.2 - 1.0).collect();
    let out = block_and_scalar_agree(src, "m", vec![tensor(&[5, 8], DType::F32, &a), tensor(&[8, 7], DType::F32, &w)])
        .expect("runs");
    assert_eq!(reduces(src, "m"), 1, "the matmul runs with its output loops");
    let o = f32s(&out[0]);
    for i in 0..5 {
        for j in 0..7 {
            let mut acc = 0.5f32;
            for k in 0..8 {
                acc += a[i * 8 + k] as f32 * w[k * 7 + j] as f32;
            }
            assert_eq!(o[i * 7 + j], acc);
        }
    }
}
