//! SimplifyInference, FoldScaleAxis and FuseOps together and on malformed input: a
//! conv / batch-norm / relu block keeps its meaning through the whole inference pipeline,
//! and none of the passes panics on arenas the parser would reject.

use std::sync::Arc;

use passel_engine::interp::{assert_values_close, eval_function, random_args};
use passel_engine::ir::{
    fn_attr, parse_module, print_module, Attrs, Constant, ExprKind, Function, FunctionBuilder, OpId,
};
use passel_engine::op;
use passel_engine::transform::{Pass as _, PassContext};
use passel_passes::{backward_fold_scale_axis, forward_fold_scale_axis, fuse_ops, simplify_inference};

type Pass = fn(&Arc<Function>) -> Arc<Function>;

fn fuse_default(func: &Arc<Function>) -> Arc<Function> {
    fuse_ops(func, 256)
}

const PASSES: [(&str, Pass); 4] = [
    ("SimplifyInference", simplify_inference),
    ("BackwardFoldScaleAxis", backward_fold_scale_axis),
    ("ForwardFoldScaleAxis", forward_fold_scale_axis),
    ("FuseOps", fuse_default),
];

const BLOCK: &str = "
def @main(%x: Tensor[(1, 3, 6, 6), f32]) -> Tensor[(1, 4, 6, 6), f32] {
  let %xs = multiply(%x, tensor<(3, 1, 1), f32>[0.5, 1.0, 2.0]);
  let %c = conv2d(%xs, uniform<(4, 3, 3, 3), f32>(seed=7, low=-0.5, high=0.5), padding=[1]);
  let %bn = batch_norm(%c, tensor<(4,), f32>[1.0, 0.5, 2.0, 1.5], tensor<(4,), f32>[0.1, 0.2, -0.3, 0.0],
                       tensor<(4,), f32>[0.0, 0.1, -0.1, 0.2], tensor<(4,), f32>[1.0, 0.5, 2.0, 0.25]);
  let %y = %bn.0;
  let %r = relu(%y);
  let %d = dropout(%r, rate=0.5);
  %d
}
";

fn run(pipeline: &str, module: passel_engine::ir::Module) -> passel_engine::ir::Module {
    passel_passes::run_pipeline_text(pipeline, module).unwrap_or_else(|e| panic!("{pipeline}: {e}"))
}

#[test]
fn inference_pipeline_keeps_meaning_and_leaves_one_fused_conv() {
    passel_passes::link();
    let before = run("InferType", parse_module(BLOCK).expect("parses"));
    let after = run(
        "SimplifyInference,FoldConstant,FoldScaleAxis,CanonicalizeBindings,DeadCodeElimination,FuseOps",
        before.clone(),
    );
    let main = before.get("main").expect("@main");
    for seed in 0..3 {
        let args = random_args(main, seed).expect("args");
        let want = eval_function(&before, "main", &args).expect("input evaluates");
        let got = eval_function(&after, "main", &args).expect("output evaluates");
        assert_values_close(&got, &want, 1e-4, 1e-5)
            .unwrap_or_else(|e| panic!("seed {seed}: {e}\n{}", print_module(&after)));
    }
    let text = print_module(&after);
    let func = after.get("main").expect("@main");
    let live = func.live_mask();
    let mut primitives = 0;
    for (node, l) in func.nodes().iter().zip(live) {
        match node.kind {
            ExprKind::Func { idx } if l && func.closure(idx).attrs.flag(fn_attr::PRIMITIVE) => primitives += 1,
            ExprKind::Call { op, .. } if l => {
                let name = op::get(op).name;
                assert!(
                    !["batch_norm", "dropout", "multiply"].contains(&name),
                    "{name} left after the pipeline:\n{text}"
                );
            }
            _ => {}
        }
    }
    // conv2d + add (the folded shift) + relu in one primitive function.
    assert_eq!(primitives, 1, "{text}");
    assert!(text.contains("relu(add(conv2d("), "{text}");
}

#[test]
fn fold_scale_axis_runs_only_at_opt_level_3_inside_its_sequential() {
    passel_passes::link();
    let module = run("InferType", parse_module(BLOCK).expect("parses"));
    let seq = passel_engine::transform::get_pass("FoldScaleAxis").expect("registered");
    for (level, folds) in [(2, false), (3, true)] {
        let ctx = PassContext::builder().opt_level(level).num_threads(1).build().expect("context");
        let out = ctx.scope(|| seq.run(module.clone(), &ctx)).expect("scope").expect("runs");
        let text = print_module(&out);
        assert_eq!(!text.contains("multiply(%x,"), folds, "opt level {level}:\n{text}");
    }
}

fn op_id(name: &str) -> OpId {
    op::lookup(name).expect("built-in operator")
}

/// Arenas the parser never produces: wrong arities, unknown operators, variables bound twice
/// or used before their binding, and a cycle of aliases.
fn malformed() -> Vec<Function> {
    let mut out = Vec::new();
    for name in ["batch_norm", "layer_norm", "dropout", "conv2d", "dense", "multiply", "relu", "bias_add"] {
        let mut b = FunctionBuilder::new();
        let x = b.var("x", None);
        let call = b.call(op_id(name), &[x], Attrs::new());
        let p = b.proj(call, 2);
        let k = b.constant(Constant::scalar_f32(2.0));
        let m = b.call(op_id("multiply"), &[call, k], Attrs::new());
        let body = b.tuple(&[p, m]);
        out.push(b.finish(&[x], body, None, Attrs::new()));
    }
    let mut b = FunctionBuilder::new();
    let x = b.var("x", None);
    let bogus = b.call(OpId(u16::MAX - 1), &[x, x], Attrs::new());
    let r = b.call(op_id("relu"), &[bogus], Attrs::new());
    out.push(b.finish(&[x], r, None, Attrs::new()));

    let mut b = FunctionBuilder::new();
    let x = b.var("x", None);
    let v = b.var("v", None);
    let early = b.call(op_id("relu"), &[v], Attrs::new());
    let u = b.var("u", None);
    let e = b.call(op_id("exp"), &[x], Attrs::new());
    let n = b.call(op_id("negative"), &[x], Attrs::new());
    let body = b.block(&[(u, early), (v, e), (v, n)], u);
    out.push(b.finish(&[x], body, None, Attrs::new()));

    let mut b = FunctionBuilder::new();
    let x = b.var("x", None);
    let va = b.var("a", None);
    let vb = b.var("b", None);
    let r = b.call(op_id("exp"), &[va], Attrs::new());
    let body = b.block(&[(va, vb), (vb, va)], r);
    out.push(b.finish(&[x], body, None, Attrs::new()));
    out
}

#[test]
fn passes_do_not_panic_on_malformed_arenas_and_are_stable_on_them() {
    for (i, func) in malformed().into_iter().enumerate() {
        let func = Arc::new(func);
        for (name, pass) in PASSES {
            let once = pass(&func);
            let twice = pass(&once);
            assert!(
                Arc::ptr_eq(&once, &twice) || print_module_of(&once) == print_module_of(&twice),
                "{name} is not stable on malformed case {i}"
            );
        }
    }
}

fn print_module_of(func: &Arc<Function>) -> String {
    let mut m = passel_engine::ir::Module::new();
    m.insert("main", Arc::clone(func)).expect("a valid name");
    print_module(&m)
}

fn prop_cases() -> u32 {
    std::env::var("PASSEL_FUSE_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(32)
}

/// A let-chain over `(3, 3)` tensors of random elementwise, broadcast, injective, reduce and
/// opaque calls and aliases, each reading earlier values (so some values have several users).
fn random_program(steps: &[(u8, usize, usize)], extra: usize) -> String {
    let mut text = String::from("def @main(%x: Tensor[(3, 3), f32], %y: Tensor[(3, 3), f32]) {\n");
    let mut names = vec!["%x".to_string(), "%y".to_string()];
    for (i, &(kind, a, b)) in steps.iter().enumerate() {
        let (a, b) = (&names[a % names.len()], &names[b % names.len()]);
        let value = match kind % 11 {
            10 => a.clone(),
            0 => format!("relu({a})"),
            1 => format!("negative({a})"),
            2 => format!("tanh({a})"),
            3 => format!("add({a}, {b})"),
            4 => format!("multiply({a}, {b})"),
            5 => format!("maximum({a}, 0.5f)"),
            6 => format!("transpose({a})"),
            7 => format!("sum({a}, axis=[1], keepdims=true)"),
            8 => format!("dropout({a}, rate=0.5)"),
            _ => format!("subtract(relu({a}), {b})"),
        };
        text.push_str(&format!("  let %v{i} = {value};\n"));
        names.push(format!("%v{i}"));
    }
    let last = names.last().cloned().unwrap_or_default();
    let other = &names[extra % names.len()];
    text.push_str(&format!("  ({last}, {other})\n}}\n"));
    text
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: prop_cases(), ..Default::default() })]

    /// `PASSEL_FUSE_CASES=2000 cargo test -p passel-passes --test inference_pipeline` runs more.
    #[test]
    fn fuse_ops_and_simplify_inference_keep_meaning_and_are_idempotent(
        steps in proptest::collection::vec((0u8..11, 0usize..64, 0usize..64), 1..24),
        extra in 0usize..64,
        depth in 1usize..6,
    ) {
        passel_passes::link();
        let text = random_program(&steps, extra);
        let before = run("InferType", parse_module(&text).expect("generated program parses"));
        let main = before.get("main").expect("@main");
        let args = random_args(main, 1).expect("args");
        let want = eval_function(&before, "main", &args).expect("input evaluates");
        for pipeline in ["FuseOps", "SimplifyInference,FuseOps"] {
            let ctx = PassContext::builder()
                .opt_level(3)
                .num_threads(1)
                .config("relay.FuseOps.max_depth", depth as i64)
                .build()
                .expect("context");
            let seq = passel_engine::transform::parse_pipeline(pipeline).expect("pipeline");
            let once = ctx.scope(|| seq.run(before.clone(), &ctx)).expect("scope").expect("runs");
            let got = eval_function(&once, "main", &args).expect("output evaluates");
            // Fusion only moves calls and dropout is the identity: results are bit-exact.
            proptest::prop_assert!(assert_values_close(&got, &want, 0.0, 0.0).is_ok(), "{}\n{}", text, print_module(&once));
            let twice = ctx.scope(|| seq.run(once.clone(), &ctx)).expect("scope").expect("runs");
            proptest::prop_assert_eq!(print_module(&twice), print_module(&once));
        }
    }
}

#[test]
fn fuse_ops_and_simplify_inference_handle_deep_chains_without_recursion() {
    // relu(dropout(relu(dropout(… x …)))) nested 20,000 deep, built in memory.
    let (relu, dropout) = (op_id("relu"), op_id("dropout"));
    let mut b = FunctionBuilder::new();
    let ty = passel_engine::ir::Type::tensor(vec![2], passel_engine::ir::DType::F32);
    let x = b.var("x", Some(ty.clone()));
    let mut cur = x;
    for i in 0..20_000 {
        let op = if i % 2 == 0 { relu } else { dropout };
        cur = b.call(op, &[cur], Attrs::new());
        b.set_ty(cur, Some(ty.clone()));
    }
    let func = Arc::new(b.finish(&[x], cur, Some(ty), Attrs::new()));
    let simplified = simplify_inference(&func);
    assert!(!Arc::ptr_eq(&simplified, &func));
    let fused = fuse_ops(&simplified, 256);
    let primitives = fused
        .nodes()
        .iter()
        .zip(fused.live_mask())
        .filter(|(n, l)| *l && matches!(n.kind, ExprKind::Func { .. }))
        .count();
    // 10,000 relus in groups of at most 256.
    assert_eq!(primitives, 10_000usize.div_ceil(256));
}

fn tensor_text(shape: &str, values: &[f32]) -> String {
    let elems: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("tensor<{shape}, f32>[{}]", elems.join(", "))
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig { cases: prop_cases(), ..Default::default() })]

    #[test]
    fn fold_scale_axis_keeps_meaning_for_any_finite_scales_and_paths(
        out_scale in proptest::collection::vec(-4.0f32..4.0, 3),
        in_scale in proptest::collection::vec(-4.0f32..4.0, 2),
        path in proptest::collection::vec(0u8..2, 0..4),
        conv in proptest::bool::ANY,
        in_relu in proptest::bool::ANY,
    ) {
        passel_passes::link();
        let (data, layer, s_out, s_in) = if conv {
            (
                "Tensor[(1, 2, 4, 4), f32]",
                "conv2d(%xs, %w, padding=[1])".to_string(),
                tensor_text("(3, 1, 1)", &out_scale),
                tensor_text("(2, 1, 1)", &in_scale),
            )
        } else {
            ("Tensor[(4, 2), f32]", "dense(%xs, %w)".to_string(), tensor_text("(3,)", &out_scale), tensor_text("(2,)", &in_scale))
        };
        let w_ty = if conv { "Tensor[(3, 2, 3, 3), f32]" } else { "Tensor[(3, 2), f32]" };
        let mut text = format!("def @main(%x: {data}, %w: {w_ty}, %b: Tensor[(3,), f32]) {{\n");
        text.push_str(&format!("  let %xm = multiply(%x, {s_in});\n"));
        text.push_str(if in_relu { "  let %xs = relu(%xm);\n" } else { "  let %xs = %xm;\n" });
        text.push_str(&format!("  let %v0 = {layer};\n"));
        let axis = if conv { 1 } else { -1 };
        for (i, step) in path.iter().enumerate() {
            let value = if *step == 0 { format!("relu(%v{i})") } else { format!("bias_add(%v{i}, %b, axis={axis})") };
            text.push_str(&format!("  let %v{} = {value};\n", i + 1));
        }
        text.push_str(&format!("  multiply(%v{}, {s_out})\n}}\n", path.len()));
        let before = run("InferType", parse_module(&text).expect("generated program parses"));
        let after = run("FoldScaleAxis", before.clone());
        let main = before.get("main").expect("@main");
        for seed in 0..2 {
            let args = random_args(main, seed).expect("args");
            let want = eval_function(&before, "main", &args).expect("input evaluates");
            let got = eval_function(&after, "main", &args).expect("output evaluates");
            proptest::prop_assert!(
                assert_values_close(&got, &want, 1e-4, 1e-4).is_ok(),
                "{}\n{}\n{:?}", text, print_module(&after), assert_values_close(&got, &want, 1e-4, 1e-4)
            );
        }
        let again = run("FoldScaleAxis", after.clone());
        proptest::prop_assert_eq!(print_module(&again), print_module(&after));
        // The input scale folds unless a relu sees a non-positive scale; so does the output
        // scale.
        let text_after = print_module(&after);
        let in_blocked = in_relu && in_scale.iter().any(|&v| v <= 0.0);
        proptest::prop_assert_eq!(text_after.contains("multiply(%x,"), in_blocked, "{}", text_after);
        let blocked = path.contains(&0) && out_scale.iter().any(|&v| v <= 0.0);
        proptest::prop_assert_eq!(text_after.contains(&format!("multiply(%v{},", path.len())), blocked, "{}", text_after);
    }
}
