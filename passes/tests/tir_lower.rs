//! LegalizeOps against the graph level: every operator with a loop-level definition is
//! lowered on sample calls, and the lowered module evaluates to what the graph kernels give.

use passel_engine::interp::{assert_values_close, eval_function, random_args};
use passel_engine::ir::{parse_module, ExprKind};
use passel_engine::tir::lower::{LOWERED_OPS, NOT_LOWERED};

/// One sample call per lowered operator: `(op, module text)`.
const SAMPLES: &[(&str, &str)] = &[
    ("unary", "def @main(%x: Tensor[(2, 3), f32]) { OP(%x) }"),
    ("add", "def @main(%x: Tensor[(2, 3), f32], %y: Tensor[(3,), f32]) { OP(%x, %y) }"),
    ("compare", "def @main(%x: Tensor[(2, 3), f32], %y: Tensor[(2, 1), f32]) { OP(%x, %y) }"),
    ("where", "def @main(%c: Tensor[(2, 3), bool], %x: Tensor[(2, 3), f32], %y: Tensor[(3,), f32]) { where(%c, %x, %y) }"),
    ("logical_not", "def @main(%c: Tensor[(2, 3), bool]) { logical_not(%c) }"),
    ("clip", "def @main(%x: Tensor[(2, 3), f32]) { clip(%x, a_min=-0.5, a_max=0.25) }"),
    ("leaky_relu", "def @main(%x: Tensor[(2, 3), f32]) { leaky_relu(%x, alpha=0.1) }"),
    ("elu", "def @main(%x: Tensor[(2, 3), f32]) { elu(%x, alpha=0.7) }"),
    ("hard_sigmoid", "def @main(%x: Tensor[(2, 3), f32]) { hard_sigmoid(%x, alpha=0.3, beta=0.4) }"),
    ("gelu", "def @main(%x: Tensor[(2, 3), f32]) { gelu(%x) }"),
    ("gelu", "def @main(%x: Tensor[(2, 3), f32]) { gelu(%x, approximate=\"tanh\") }"),
    ("cast", "def @main(%x: Tensor[(2, 3), f32]) { cast(%x, dtype=i32) }"),
    ("reshape", "def @main(%x: Tensor[(2, 3, 4), f32]) { reshape(%x, newshape=[4, 6]) }"),
    ("transpose", "def @main(%x: Tensor[(2, 3, 4), f32]) { transpose(%x, axes=[2, 0, 1]) }"),
    ("transpose", "def @main(%x: Tensor[(2, 3), f32]) { transpose(%x) }"),
    ("broadcast_to", "def @main(%x: Tensor[(3, 1), f32]) { broadcast_to(%x, shape=[2, 3, 4]) }"),
    ("sum", "def @main(%x: Tensor[(2, 3, 4), f32]) { sum(%x, axis=[1]) }"),
    ("mean", "def @main(%x: Tensor[(2, 3, 4), f32]) { mean(%x, axis=[0, 2], keepdims=true) }"),
    ("max", "def @main(%x: Tensor[(2, 3, 4), f32]) { max(%x) }"),
    ("min", "def @main(%x: Tensor[(2, 3, 4), f32]) { min(%x, axis=[-1]) }"),
    ("softmax", "def @main(%x: Tensor[(2, 5), f32]) { softmax(%x) }"),
    ("bias_add", "def @main(%x: Tensor[(2, 3, 4), f32], %b: Tensor[(3,), f32]) { bias_add(%x, %b) }"),
    ("layer_norm", "def @main(%x: Tensor[(2, 5), f32], %g: Tensor[(5,), f32], %b: Tensor[(5,), f32]) { layer_norm(%x, %g, %b, epsilon=0.001) }"),
    ("matmul", "def @main(%x: Tensor[(2, 1, 3, 4), f32], %y: Tensor[(5, 4, 2), f32]) { matmul(%x, %y) }"),
    ("matmul", "def @main(%x: Tensor[(4,), f32], %y: Tensor[(3, 4, 2), f32]) { matmul(%x, %y) }"),
    ("matmul", "def @main(%x: Tensor[(3, 4), f32], %y: Tensor[(4,), f32]) { matmul(%x, %y) }"),
    ("dense", "def @main(%x: Tensor[(2, 3, 4), f32], %w: Tensor[(5, 4), f32]) { dense(%x, %w) }"),
    ("conv2d", "def @main(%x: Tensor[(1, 4, 5, 5), f32], %w: Tensor[(6, 2, 3, 3), f32]) { conv2d(%x, %w, strides=[2, 1], padding=[1, 0, 1, 2], dilation=[1, 2], groups=2) }"),
    ("max_pool2d", "def @main(%x: Tensor[(1, 2, 5, 5), f32]) { max_pool2d(%x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1]) }"),
    ("avg_pool2d", "def @main(%x: Tensor[(1, 2, 5, 5), f32]) { avg_pool2d(%x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1]) }"),
    ("avg_pool2d", "def @main(%x: Tensor[(1, 2, 5, 5), f32]) { avg_pool2d(%x, pool_size=[2, 2], padding=[1, 1], count_include_pad=true) }"),
    ("global_avg_pool2d", "def @main(%x: Tensor[(1, 2, 3, 4), f32]) { global_avg_pool2d(%x) }"),
    ("global_max_pool2d", "def @main(%x: Tensor[(1, 2, 3, 4), f32]) { global_max_pool2d(%x) }"),
    ("mish", "def @main(%x: Tensor[(2, 3), f32]) { mish(%x) }"),
    ("selu", "def @main(%x: Tensor[(2, 3), f32]) { selu(%x, alpha=1.5, gamma=1.25) }"),
    ("celu", "def @main(%x: Tensor[(2, 3), f32]) { celu(%x, alpha=0.5) }"),
    ("thresholded_relu", "def @main(%x: Tensor[(2, 3), f32]) { thresholded_relu(%x, alpha=0.25) }"),
    ("shrink", "def @main(%x: Tensor[(2, 3), f32]) { shrink(%x, bias=0.125, lambd=0.25) }"),
    ("isinf", "def @main(%x: Tensor[(2, 3), f32]) { isinf(%x, detect_negative=false) }"),
    ("bitwise_not", "def @main(%x: Tensor[(2, 3), i32]) { bitwise_not(%x) }"),
    ("dropout", "def @main(%x: Tensor[(2, 3), f32]) { dropout(%x, rate=0.5) }"),
    ("mod", "def @main(%x: Tensor[(2, 3), f32], %y: Tensor[(3,), f32]) { mod(%x, %y) }"),
    ("mod", "def @main(%x: Tensor[(2, 3), f32], %y: Tensor[(2, 3), f32]) { mod(%x, %y, fmod=true) }"),
    ("logical", "def @main(%x: Tensor[(2, 3), bool], %y: Tensor[(3,), bool]) { OP(%x, %y) }"),
    ("bitwise", "def @main(%x: Tensor[(2, 3), i32], %y: Tensor[(2, 3), i32]) { OP(%x, %y) }"),
    ("right_shift", "def @main(%x: Tensor[(2, 3), u8], %y: Tensor[(2, 3), u8]) { right_shift(%x, %y) }"),
    ("zeros", "def @main() { zeros(shape=[2, 3], dtype=i32) }"),
    ("ones", "def @main() { ones(shape=[2, 3]) }"),
    ("concatenate", "def @main(%x: Tensor[(2, 3), f32], %y: Tensor[(2, 1), f32], %z: Tensor[(2, 2), f32]) { concatenate(%x, %y, %z, axis=-1) }"),
    ("take", "def @main(%x: Tensor[(2, 6, 3), f32], %i: Tensor[(2, 2), i64]) { take(%x, %i, axis=1) }"),
    ("take", "def @main(%x: Tensor[(6,), f32], %i: Tensor[(4,), i32]) { take(%x, %i) }"),
    ("gather_elements", "def @main(%x: Tensor[(6, 2), f32], %i: Tensor[(3, 2), i64]) { gather_elements(%x, %i) }"),
    ("scatter_elements", "def @main(%x: Tensor[(2, 6), f32], %i: Tensor[(2, 3), i64], %u: Tensor[(2, 3), f32]) { scatter_elements(%x, %i, %u, axis=1) }"),
    ("scatter_elements", "def @main(%x: Tensor[(6, 2), f32], %i: Tensor[(4, 2), i32], %u: Tensor[(4, 2), f32]) { scatter_elements(%x, %i, %u, reduction=\"add\") }"),
    ("scatter_nd", "def @main(%x: Tensor[(6, 6, 2), f32], %i: Tensor[(3, 2), i64], %u: Tensor[(3, 2), f32]) { scatter_nd(%x, %i, %u, reduction=\"max\") }"),
    ("scatter_nd", "def @main(%x: Tensor[(6, 3), i32], %i: Tensor[(2, 1), i64], %u: Tensor[(2, 3), i32]) { scatter_nd(%x, %i, %u) }"),
    ("strided_slice", "def @main(%x: Tensor[(5, 6), f32]) { strided_slice(%x, begin=[-1, 1], end=[-10, 100], strides=[-2, 2]) }"),
    ("strided_slice", "def @main(%x: Tensor[(5, 6, 2), f32]) { strided_slice(%x, begin=[1], end=[3], axes=[1]) }"),
    ("pad", "def @main(%x: Tensor[(2, 3), f32]) { pad(%x, pad_width=[1, 2, 0, 1], pad_value=0.5) }"),
    ("pad", "def @main(%x: Tensor[(2, 3), f32]) { pad(%x, pad_width=[1, 4, 2, 3], pad_mode=\"reflect\") }"),
    ("pad", "def @main(%x: Tensor[(2, 3), f32]) { pad(%x, pad_width=[1, -1, 0, 2], pad_mode=\"edge\") }"),
    ("trilu", "def @main(%x: Tensor[(2, 3, 4), f32]) { trilu(%x, k=1) }"),
    ("trilu", "def @main(%x: Tensor[(3, 4), i32]) { trilu(%x, upper=false, k=-1) }"),
    ("one_hot", "def @main(%i: Tensor[(2, 3), i64], %v: Tensor[(2,), f32]) { one_hot(%i, %v, depth=4, axis=1) }"),
    ("prod", "def @main(%x: Tensor[(2, 3, 4), f32]) { prod(%x, axis=[1]) }"),
    ("argmax", "def @main(%x: Tensor[(2, 3, 4), f32]) { argmax(%x, axis=1) }"),
    ("argmax", "def @main(%x: Tensor[(2, 3, 4), i32]) { argmax(%x, axis=-1, keepdims=true, select_last_index=true) }"),
    ("argmin", "def @main(%x: Tensor[(2, 3, 4), f32]) { argmin(%x, axis=2, keepdims=true) }"),
    ("argmin", "def @main(%x: Tensor[(5, 3), i64]) { argmin(%x, select_last_index=true) }"),
    ("cumsum", "def @main(%x: Tensor[(2, 3, 4), f32]) { cumsum(%x, axis=1) }"),
    ("cumsum", "def @main(%x: Tensor[(2, 5), i32]) { cumsum(%x, axis=-1, exclusive=true, reverse=true) }"),
    ("cumprod", "def @main(%x: Tensor[(2, 5), f32]) { cumprod(%x, axis=1, reverse=true) }"),
    ("conv2d_transpose", "def @main(%x: Tensor[(1, 4, 3, 3), f32], %w: Tensor[(4, 3, 3, 2), f32]) { conv2d_transpose(%x, %w, strides=[2, 1], padding=[1, 0, 0, 1], dilation=[1, 2], groups=2, output_padding=[1, 0]) }"),
    ("einsum", "def @main(%x: Tensor[(2, 3, 4), f32], %y: Tensor[(2, 4, 5), f32]) { einsum(%x, %y, equation=\"bij,bjk->bik\") }"),
    ("einsum", "def @main(%x: Tensor[(3, 3), f32]) { einsum(%x, equation=\"ii->i\") }"),
    ("resize2d", "def @main(%x: Tensor[(1, 2, 3, 4), f32]) { resize2d(%x, size=[5, 7], method=\"linear\") }"),
    ("resize2d", "def @main(%x: Tensor[(1, 1, 4, 4), f32]) { resize2d(%x, size=[3, 6], method=\"cubic\", coordinate_transformation_mode=\"align_corners\") }"),
    ("resize2d", "def @main(%x: Tensor[(2, 3, 3), f32]) { resize2d(%x, size=[6, 2]) }"),
    ("grid_sample", "def @main(%x: Tensor[(1, 2, 3, 4), f32], %g: Tensor[(1, 2, 3, 2), f32]) { grid_sample(%x, add(%g, %g)) }"),
    ("grid_sample", "def @main(%x: Tensor[(1, 1, 3, 4), f32], %g: Tensor[(1, 3, 2, 2), f32]) { grid_sample(%x, add(%g, %g), mode=\"cubic\", padding_mode=\"reflection\") }"),
    ("grid_sample", "def @main(%x: Tensor[(2, 1, 4, 3), f32], %g: Tensor[(2, 2, 2, 2), f32]) { grid_sample(%x, add(%g, %g), mode=\"nearest\", padding_mode=\"border\", align_corners=true) }"),
    ("split", "def @main(%x: Tensor[(2, 6), f32]) { split(%x, indices_or_sections=3, axis=1) }"),
    ("split", "def @main(%x: Tensor[(5, 2), f32]) { split(%x, indices=[1, 4]) }"),
    ("batch_norm", "def @main(%x: Tensor[(2, 3, 4), f32], %g: Tensor[(3,), f32], %b: Tensor[(3,), f32], %m: Tensor[(3,), f32], %v: Tensor[(3,), f32]) { batch_norm(%x, %g, %b, %m, abs(%v), epsilon=0.01) }"),
    ("topk", "def @main(%x: Tensor[(3, 5), f32]) { topk(%x, k=3) }"),
    ("topk", "def @main(%x: Tensor[(4, 3), i32]) { topk(%x, k=2, axis=0, largest=false) }"),
    ("lrn", "def @main(%x: Tensor[(1, 5, 2, 2), f32]) { lrn(%x, size=3, alpha=0.001, beta=0.75, bias=2.0) }"),
];

const UNARY: &[&str] = &[
    "negative",
    "exp",
    "log",
    "sqrt",
    "tanh",
    "sigmoid",
    "relu",
    "erf",
    "reciprocal",
    "abs",
    "hard_swish",
    "floor",
    "ceil",
    "round",
    "sign",
    "sin",
    "cos",
    "tan",
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "softplus",
    "softsign",
    "isnan",
    "isinf",
];
const BINARY: &[&str] = &["add", "subtract", "multiply", "divide", "maximum", "minimum", "power"];
const COMPARE: &[&str] = &["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"];
const LOGICAL: &[&str] = &["logical_and", "logical_or", "logical_xor"];
const BITWISE: &[&str] = &["bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"];

/// Every (op, text) pair to check.
fn cases() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (op, text) in SAMPLES {
        match *op {
            "unary" => out.extend(UNARY.iter().map(|u| (u.to_string(), text.replace("OP", u)))),
            "add" => out.extend(BINARY.iter().map(|u| (u.to_string(), text.replace("OP", u)))),
            "compare" => out.extend(COMPARE.iter().map(|u| (u.to_string(), text.replace("OP", u)))),
            "logical" => out.extend(LOGICAL.iter().map(|u| (u.to_string(), text.replace("OP", u)))),
            "bitwise" => out.extend(BITWISE.iter().map(|u| (u.to_string(), text.replace("OP", u)))),
            _ => out.push((op.to_string(), text.to_string())),
        }
    }
    out
}

/// Issue #31: every registered operator has a loop-level definition and a sample call here,
/// except the few in `NOT_LOWERED`, which cannot have one (docs/tir.md argues each).
#[test]
fn every_registered_operator_is_lowered_or_excluded() {
    let sampled: std::collections::BTreeSet<String> = cases().into_iter().map(|(op, _)| op).collect();
    let mut missing = Vec::new();
    for (_, def) in passel_engine::op::all() {
        let excluded = NOT_LOWERED.iter().any(|(n, _)| *n == def.name);
        let lowered = LOWERED_OPS.contains(&def.name);
        assert!(!(excluded && lowered), "`{}` is both lowered and listed as impossible to lower", def.name);
        if !excluded && !lowered {
            missing.push(def.name);
        } else if lowered {
            assert!(sampled.contains(def.name), "`{}` has a lowering but no sample call here", def.name);
        }
    }
    assert!(missing.is_empty(), "operators without a loop-level definition: {missing:?}");
    for op in LOWERED_OPS.iter().chain(NOT_LOWERED.iter().map(|(n, _)| n)) {
        assert!(passel_engine::op::lookup(op).is_some(), "`{op}` is not a registered operator");
    }
}

#[test]
fn lowered_calls_evaluate_as_the_graph_kernels() {
    for (op, text) in cases() {
        let m = parse_module(&text).unwrap_or_else(|e| panic!("{op}: {e}"));
        let lowered = passel_passes::run_pipeline_text("InferType,LegalizeOps", m.clone())
            .unwrap_or_else(|e| panic!("{op}: {e}"));
        let main = lowered.get("main").expect("main");
        let calls: Vec<&str> = main
            .nodes()
            .iter()
            .filter_map(|n| match n.kind {
                ExprKind::Call { op, .. } => Some(passel_engine::op::get(op).name),
                _ => None,
            })
            .collect();
        assert!(calls.iter().all(|&c| c == "call_tir"), "{op}: not lowered: {calls:?}\n{lowered}");
        assert!(lowered.num_prims() >= 1, "{op}");
        for seed in 0..3 {
            let args = random_args(m.get("main").unwrap(), seed).expect("args");
            let want = eval_function(&m, "main", &args).unwrap_or_else(|e| panic!("{op}: graph eval: {e}"));
            let got =
                eval_function(&lowered, "main", &args).unwrap_or_else(|e| panic!("{op}: lowered eval: {e}\n{lowered}"));
            assert_values_close(&got, &want, 1e-5, 1e-6)
                .unwrap_or_else(|e| panic!("{op} (seed {seed}): {e}\n{lowered}"));
        }
    }
}

/// How many `select`s a run of `f` evaluates: each `select` node times the iterations of the
/// loops around it (every loop of a lowered operator has a constant range).
fn selects_evaluated(f: &passel_engine::tir::PrimFunc) -> u64 {
    use passel_engine::tir::{PExprKind, StmtId, StmtKind};
    let mut total = 0u64;
    let mut stack: Vec<(StmtId, u64)> = vec![(f.body(), 1)];
    let (mut exprs, mut ops) = (Vec::new(), Vec::new());
    while let Some((s, times)) = stack.pop() {
        exprs.clear();
        f.stmt_exprs(s, &mut exprs);
        let mut todo = exprs.clone();
        while let Some(e) = todo.pop() {
            if matches!(f.expr(e).kind, PExprKind::Select(..)) {
                total += times;
            }
            ops.clear();
            f.expr_operands(e, &mut ops);
            todo.extend_from_slice(&ops);
        }
        let inner = match f.stmt(s).kind {
            StmtKind::For { extent, .. } => match f.expr(extent).kind {
                PExprKind::Int(n) => times * n.max(0) as u64,
                _ => panic!("a lowered loop with a non-constant extent"),
            },
            _ => times,
        };
        stack.extend(f.children(s).as_slice().iter().map(|&c| (c, inner)));
    }
    total
}

/// LoopPartition (with `partition_const_loop`, then Simplify and RemoveNoOp) on the padded
/// conv2d and pool lowerings: the result is the same, and the selects that guard the padding
/// run only at the borders.
#[test]
fn loop_partition_removes_padding_selects_from_lowered_windows() {
    use passel_engine::interp::{run_prim_func, PrimArg};
    use passel_passes::tir::{loop_partition, remove_no_op, simplify};
    let cases = [
        ("conv2d", "def @main(%x: Tensor[(1, 2, 8, 8), f32], %w: Tensor[(3, 2, 3, 3), f32]) { conv2d(%x, %w, padding=[1, 1, 1, 1]) }"),
        ("max_pool2d", "def @main(%x: Tensor[(1, 2, 8, 8), f32]) { max_pool2d(%x, pool_size=[3, 3], strides=[1, 1], padding=[1, 1]) }"),
        ("avg_pool2d", "def @main(%x: Tensor[(1, 2, 8, 8), f32]) { avg_pool2d(%x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1]) }"),
    ];
    let cfg = loop_partition::PartitionConfig { partition_const_loop: true, ..Default::default() };
    for (op, text) in cases {
        let m = parse_module(text).unwrap_or_else(|e| panic!("{op}: {e}"));
        let lowered = passel_passes::run_pipeline_text("InferType,LegalizeOps", m.clone()).expect("lowers");
        let (_, f) = lowered.prim_funcs().next().expect("one PrimFunc");
        let f = f.clone();
        let g = remove_no_op::remove_no_op(&simplify::simplify(&loop_partition::loop_partition(&f, cfg)));
        let errors = passel_engine::tir::verify_prim_func("f", &g);
        assert!(errors.is_empty(), "{op}: {errors:?}");
        let (before, after) = (selects_evaluated(&f), selects_evaluated(&g));
        eprintln!("{op}: selects evaluated {before} -> {after}");
        assert!(after * 2 < before, "{op}: selects evaluated {before} -> {after}");
        let args = random_args(m.get("main").unwrap(), 7).expect("args");
        let inputs: Vec<PrimArg> =
            args.iter().map(|a| PrimArg::Buffer(a.as_tensor().expect("tensor").clone())).collect();
        let want = run_prim_func("f", &f, inputs.clone()).expect("runs");
        let got = run_prim_func("f", &g, inputs).expect("partitioned runs");
        assert_eq!(format!("{got:?}"), format!("{want:?}"), "{op}");
    }
}

/// The default tir pipeline on lowered operators: every pass's output verifies, the lowered
/// module still evaluates as the graph kernels, and afterwards every buffer access has one
/// index (FlattenBuffer).
#[test]
fn tir_pipeline_keeps_lowered_operators_correct() {
    use passel_engine::tir::{PExprKind, StmtKind};
    use passel_engine::transform::{Pass, PassContext, VERIFY_EACH};
    use passel_passes::tir::loop_partition::PARTITION_CONST_LOOP_KEY;
    let cases = [
        "def @main(%x: Tensor[(1, 2, 6, 6), f32], %w: Tensor[(3, 2, 3, 3), f32]) { conv2d(%x, %w, padding=[1, 1, 1, 1]) }",
        "def @main(%x: Tensor[(1, 2, 6, 6), f32]) { max_pool2d(%x, pool_size=[3, 3], strides=[2, 2], padding=[1, 1]) }",
        "def @main(%x: Tensor[(2, 5), f32]) { softmax(%x) }",
        "def @main(%x: Tensor[(2, 1, 3, 4), f32], %y: Tensor[(5, 4, 2), f32]) { matmul(%x, %y) }",
    ];
    let ctx = PassContext::builder()
        .opt_level(3)
        .num_threads(1)
        .config(VERIFY_EACH, true)
        .config(PARTITION_CONST_LOOP_KEY, true)
        .build()
        .expect("context");
    for text in cases {
        let m = parse_module(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        let lowered = passel_passes::run_pipeline_text("InferType,LegalizeOps", m.clone()).expect("lowers");
        let out = ctx.scope(|| passel_passes::tir_pipeline().run(lowered.clone(), &ctx)).expect("scope").expect("runs");
        let errors: Vec<String> = ctx.diagnostics().take().into_iter().map(|d| d.message).collect();
        assert!(errors.is_empty(), "{text}: {errors:?}");
        for (_, f) in out.prim_funcs() {
            for e in f.exprs() {
                if let PExprKind::Load(_, r) = e.kind {
                    assert_eq!(f.operands(r).len(), 1, "{text}: a load with several indices");
                }
            }
            for s in f.stmts() {
                if let StmtKind::Store { indices, .. } = s.kind {
                    assert_eq!(f.operands(indices).len(), 1, "{text}: a store with several indices");
                }
            }
        }
        for seed in 0..2 {
            let args = random_args(m.get("main").unwrap(), seed).expect("args");
            let want = eval_function(&m, "main", &args).expect("graph eval");
            let got = eval_function(&out, "main", &args).unwrap_or_else(|e| panic!("{text}: {e}\n{out}"));
            assert_values_close(&got, &want, 1e-5, 1e-6).unwrap_or_else(|e| panic!("{text}: {e}\n{out}"));
        }
    }
}
