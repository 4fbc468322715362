//! SimplifyInference, FoldScaleAxis and FuseOps together and on malformed input: a
//! conv / batch-norm / relu block keeps its meaning through the whole inference pipeline,
//! and none of the passes panics on arenas the parser would reject.

use std::sync::Arc;

use passel_engine::interp::{assert_values_close, eval_function, random_args};
use passel_engine::ir::{
    fn_attr, parse_module, print_module, Attrs, Constant, ExprKind, Function, FunctionBuilder, OpId,
};
use passel_engine::op;
use passel_engine::transform::PassContext;
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
    m.insert("main", Arc::clone(func));
    print_module(&m)
}
