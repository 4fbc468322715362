//! FoldScaleAxis: folds a constant per-channel scale into the weight of the `conv2d` or
//! `dense` next to it, as TVM's `FoldScaleAxis` does. After SimplifyInference a batch norm
//! is such a scale, and folding it leaves one convolution with a constant weight that
//! FoldConstant precomputes.
//!
//! `FoldScaleAxis` (sequential, opt level 0) is a `Sequential` of three registered passes, in
//! TVM's order (the seed recommends backward first):
//! 1. `BackwardFoldScaleAxis` (function pass, opt level 3, requires InferType,
//!    [`backward`]): `multiply(conv2d(x, w), s)` → `conv2d(x, w * s')`, also through
//!    `bias_add` (the bias is scaled too) and `relu` (only for a strictly positive scale);
//! 2. `ForwardFoldScaleAxis` (function pass, opt level 3, requires InferType, [`forward`]):
//!    `conv2d(multiply(x, s), w)` → `conv2d(x, w * s')`;
//! 3. `FoldConstant`, which turns `w * s'` into a constant when `w` is one.
//!
//! Shared rules (this file): the scale `s` is a constant, directly or through a let-bound
//! variable, finite in every element, of the data's dtype, and broadcasts along the channel
//! axis only (after padding its shape with leading 1s, every dimension is 1 except, possibly,
//! the channel one, which equals the channel count); the `multiply` does not broadcast its
//! other operand to a bigger shape; every value on the folded path has no other user (it is
//! a direct operand, or a let-bound variable used exactly once, possibly through alias
//! bindings `let %b = %a;`). Channel axes: `conv2d` data and output are NCHW (axis 1),
//! weights OIHW; `dense` data and output have the channel last, weights are `[M, K]`. The rewritten weight and bias are written as `multiply` (with a
//! `reshape` of the scale when its shape would not broadcast along the weight's axis), and
//! each new node gets the type its operator's relation gives.
//!
//! What it deliberately does not do: fold non-constant or non-finite scales, fold into a
//! grouped convolution's input channels, fold through other operators (add, pooling, …),
//! or move any computation: a folded `multiply` is replaced by its input in place, so a
//! let-bound one becomes an alias (`let %m = %r;`) for CanonicalizeBindings to remove.

use std::sync::Arc;

use passel_engine::ir::{AttrValue, Attrs, Constant, ExprKind, Function, FunctionBuilder, NodeId, OpId, Type};
use passel_engine::op;
use passel_engine::transform::{function_pass, FunctionPass, Sequential};

use crate::census::{counted, fewer, Counter};
use passel_engine::ir::rewrite::{Rewriter, NONE};
use passel_engine::transform::Statistic;

/// This pass's statistics (`passel run --stats`), read off the census of each function it
/// changed (net counts: before − after).
pub(crate) static BACKWARD_STATISTICS: &[Counter] =
    &[(&BACKWARD_CHANGED, |_, _| 1), (&BACKWARD_CALLS, |b, a| fewer(b.calls, a.calls))];
pub(crate) static FORWARD_STATISTICS: &[Counter] =
    &[(&FORWARD_CHANGED, |_, _| 1), (&FORWARD_CALLS, |b, a| fewer(b.calls, a.calls))];
static BACKWARD_CHANGED: Statistic =
    Statistic::new("BackwardFoldScaleAxis", "functions changed", "functions with a scale folded into a weight");
static BACKWARD_CALLS: Statistic = Statistic::new("BackwardFoldScaleAxis", "calls removed", "operator calls removed");
static FORWARD_CHANGED: Statistic =
    Statistic::new("ForwardFoldScaleAxis", "functions changed", "functions with a scale folded into a weight");
static FORWARD_CALLS: Statistic = Statistic::new("ForwardFoldScaleAxis", "calls removed", "operator calls removed");

mod backward;
mod forward;

pub use backward::backward_fold_scale_axis;
pub use forward::forward_fold_scale_axis;

/// Longest chain of alias bindings looked through.
const MAX_ALIASES: usize = 64;

/// Largest scale (in elements) whose values are read to check finiteness and sign.
const SCALE_ELEMENT_BUDGET: u64 = 1 << 20;

/// The registry name of [`backward_pass`].
pub const BACKWARD_NAME: &str = "BackwardFoldScaleAxis";

passel_engine::register_pass!(BACKWARD_NAME, || Box::new(backward_pass()));

/// The `BackwardFoldScaleAxis` pass.
pub fn backward_pass() -> FunctionPass {
    function_pass(BACKWARD_NAME, 3, |func, _module, ctx| {
        Ok(counted(ctx, &func, backward_fold_scale_axis(&func), BACKWARD_STATISTICS))
    })
    .with_required(&["InferType"])
}

/// The registry name of [`forward_pass`].
pub const FORWARD_NAME: &str = "ForwardFoldScaleAxis";

passel_engine::register_pass!(FORWARD_NAME, || Box::new(forward_pass()));

/// The `ForwardFoldScaleAxis` pass.
pub fn forward_pass() -> FunctionPass {
    function_pass(FORWARD_NAME, 3, |func, _module, ctx| {
        Ok(counted(ctx, &func, forward_fold_scale_axis(&func), FORWARD_STATISTICS))
    })
    .with_required(&["InferType"])
}

/// The registry name of [`fold_scale_axis_pass`].
pub const NAME: &str = "FoldScaleAxis";

passel_engine::register_pass!(NAME, || Box::new(fold_scale_axis_pass()));

/// The `FoldScaleAxis` sequential: backward, forward, then the registered FoldConstant's pass
/// (built by its constructor, not looked up, so that constructing it cannot fail).
pub fn fold_scale_axis_pass() -> Sequential {
    let passes = vec![backward_pass().shared(), forward_pass().shared(), crate::fold_constant::pass().shared()];
    Sequential::new(NAME, passes).with_opt_level(0)
}

/// The operators the two directions look at.
struct Ops {
    multiply: OpId,
    conv2d: OpId,
    dense: OpId,
    bias_add: OpId,
    relu: OpId,
    reshape: OpId,
}

impl Ops {
    fn lookup() -> Option<Ops> {
        Some(Ops {
            multiply: op::lookup("multiply")?,
            conv2d: op::lookup("conv2d")?,
            dense: op::lookup("dense")?,
            bias_add: op::lookup("bias_add")?,
            relu: op::lookup("relu")?,
            reshape: op::lookup("reshape")?,
        })
    }

    /// The ops, when `func` is worth analysing: well formed and calling `multiply` somewhere
    /// (both directions fold only scales applied by a `multiply`).
    fn worth_trying(func: &Function) -> Option<Ops> {
        let ops = Ops::lookup()?;
        let any = func.nodes().iter().any(|n| matches!(n.kind, ExprKind::Call { op, .. } if op == ops.multiply));
        (any && func.is_well_formed()).then_some(ops)
    }

    /// For a `conv2d` or `dense` call: its kind, or `None` for anything else.
    fn layer(&self, func: &Function, id: NodeId) -> Option<Layer> {
        match *func.kind(id) {
            ExprKind::Call { op, args, .. } if op == self.conv2d && args.len == 2 => Some(Layer::Conv2d),
            ExprKind::Call { op, args, .. } if op == self.dense && args.len == 2 => Some(Layer::Dense),
            _ => None,
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Layer {
    Conv2d,
    Dense,
}

/// What the analysis found about a candidate scale.
#[derive(Clone)]
struct Scale {
    /// The scale's node: a constant, or a variable bound to one.
    atom: NodeId,
    /// Its value.
    constant: Arc<Constant>,
    /// Length of the scale along the channel axis: the channel count, or 1 for a uniform
    /// scale.
    len: u64,
    /// Rank of the scale.
    rank: usize,
    /// Every element is strictly positive.
    positive: bool,
}

/// Facts about the function the analysis needs.
struct Facts<'f> {
    func: &'f Function,
    bound: Vec<NodeId>,
    uses: Vec<u32>,
}

impl<'f> Facts<'f> {
    fn new(func: &'f Function) -> Facts<'f> {
        let n = func.num_nodes();
        let live = func.live_mask();
        let mut uses = vec![0u32; n];
        for (i, &l) in live.iter().enumerate() {
            if !l {
                continue;
            }
            passel_engine::ir::rewrite::for_each_use(func, NodeId(i as u32), |o| uses[o.index()] += 1);
        }
        Facts { func, bound: passel_engine::ir::rewrite::bound_values(func), uses }
    }

    /// The compound value behind operand `o` when `o` is its only user: `o` itself if
    /// compound, or the value of a let-bound variable used exactly once, also through alias
    /// bindings (`let %b = %a;`) whose variables are used once.
    fn single_use_value(&self, o: NodeId) -> Option<NodeId> {
        let mut cur = o;
        for _ in 0..=MAX_ALIASES {
            match self.func.kind(cur) {
                ExprKind::Var { .. } => {
                    let value = self.bound[cur.index()];
                    if value == NONE || self.uses[cur.index()] != 1 {
                        return None;
                    }
                    cur = value;
                }
                kind if kind.is_atom() => return None,
                _ => return Some(cur),
            }
        }
        None
    }

    /// The constant behind atom `o`: a constant node or a variable bound to one.
    fn constant(&self, o: NodeId) -> Option<&'f Arc<Constant>> {
        let c = match self.func.kind(o) {
            ExprKind::Const { .. } => o,
            ExprKind::Var { .. } if self.bound[o.index()] != NONE => self.bound[o.index()],
            _ => return None,
        };
        match *self.func.kind(c) {
            ExprKind::Const { idx } => Some(self.func.constant(idx)),
            _ => None,
        }
    }

    /// `s` as a per-channel scale along `axis` of `data` (a tensor type of the same dtype).
    fn scale(&self, s: NodeId, data: &Type, axis: usize) -> Option<Scale> {
        let c = self.constant(s)?;
        let data = data.as_tensor()?;
        let sty = c.tensor_type();
        if sty.dtype != data.dtype || !data.dtype.is_float() || sty.shape.len() > data.shape.len() {
            return None;
        }
        let pad = data.shape.len() - sty.shape.len();
        let mut len = 1;
        for (i, &d) in sty.shape.iter().enumerate() {
            if pad + i == axis && d == data.shape[axis] {
                len = d;
            } else if d != 1 {
                return None;
            }
        }
        if sty.num_elements().is_none_or(|n| n > SCALE_ELEMENT_BUDGET) {
            return None;
        }
        let values = c.materialize().ok()?.to_f64s();
        if !values.iter().all(|v| v.is_finite()) {
            return None;
        }
        let positive = values.iter().all(|&v| v > 0.0);
        Some(Scale { atom: s, constant: Arc::clone(c), len, rank: sty.shape.len(), positive })
    }
}

/// The scale operand and the other operand of `multiply(a, b)`, trying the constant on
/// either side.
fn split_multiply(facts: &Facts<'_>, ops: &Ops, mul: NodeId) -> Option<[(NodeId, NodeId); 2]> {
    let ExprKind::Call { op, args, .. } = *facts.func.kind(mul) else { return None };
    if op != ops.multiply || args.len != 2 {
        return None;
    }
    let a = facts.func.ids(args);
    Some([(a[0], a[1]), (a[1], a[0])])
}

/// Pushes a call and gives it the type its relation computes from the operands' types.
fn typed_call(b: &mut FunctionBuilder, op: OpId, args: &[NodeId], attrs: Attrs) -> NodeId {
    let tys: Option<Vec<Type>> = args.iter().map(|&a| b.ty(a).cloned()).collect();
    let ty = tys.and_then(|tys| (op::get(op).type_rel)(&tys, &attrs).ok());
    let id = b.call(op, args, attrs);
    b.set_ty(id, ty);
    id
}

/// The scale, reshaped to `shape` unless its rank is 0 (a scalar broadcasts anywhere) or
/// `keep` says its shape already broadcasts correctly. A let-bound scale is written as its
/// constant: the weight may come before the variable's binding (backward folding).
fn reshaped_scale(rw: &mut Rewriter<'_>, ops: &Ops, scale: &Scale, shape: &[u64], keep: bool) -> Option<NodeId> {
    let s = match rw.func.kind(scale.atom) {
        ExprKind::Var { .. } => rw.constant(Arc::clone(&scale.constant)),
        _ => rw.map(scale.atom),
    };
    if scale.rank == 0 || keep {
        return Some(s);
    }
    let shape: Option<Vec<i64>> = shape.iter().map(|&d| i64::try_from(d).ok()).collect();
    let attrs = Attrs::new().with("newshape", AttrValue::Ints(shape?.into()));
    Some(typed_call(&mut rw.b, ops.reshape, &[s], attrs))
}

/// A copy of call `old` with operand `index` replaced by `new_operand`, keeping its type.
fn with_operand(rw: &mut Rewriter<'_>, old: NodeId, index: usize, new_operand: NodeId) -> Option<NodeId> {
    let f = rw.func;
    let ExprKind::Call { op, attrs, args } = *f.kind(old) else { return None };
    let mut new_args: Vec<NodeId> = f.ids(args).iter().map(|&a| rw.map(a)).collect();
    *new_args.get_mut(index)? = new_operand;
    let call = rw.b.call(op, &new_args, f.call_attrs(attrs).clone());
    rw.b.set_ty(call, f.ty(old).cloned());
    Some(call)
}

#[cfg(test)]
mod tests {
    use passel_engine::interp::{assert_values_close, eval_function, random_args};
    use passel_engine::ir::{print_module, Module};
    use passel_engine::transform::PassContext;

    use super::*;
    use crate::test_util::typed;

    /// Folding reassociates one product per weight element: `(x*s)*w` vs `x*(w*s)`.
    const RTOL: f64 = 1e-5;
    const ATOL: f64 = 1e-5;

    fn run_sequential(module: &Module) -> Module {
        crate::link();
        let seq = fold_scale_axis_pass();
        let ctx = PassContext::builder().opt_level(3).num_threads(1).build().expect("context");
        ctx.scope(|| passel_engine::transform::Pass::run(&seq, module.clone(), &ctx))
            .expect("scope")
            .expect("FoldScaleAxis runs")
    }

    fn count_op(module: &Module, name: &str) -> usize {
        let op = op::lookup(name).expect("op");
        module
            .iter()
            .map(|(_, f)| {
                let live = f.live_mask();
                f.nodes()
                    .iter()
                    .zip(live)
                    .filter(|(n, l)| *l && matches!(n.kind, ExprKind::Call { op: o, .. } if o == op))
                    .count()
            })
            .sum()
    }

    /// Runs the sequential, compares `@main` on random inputs, checks that the multiplies are
    /// gone (`expect_multiplies` left) and that a second run changes nothing.
    fn check(text: &str, expect_multiplies: usize) {
        let before = typed(text);
        let after = run_sequential(&before);
        let main = before.get("main").expect("@main");
        for seed in 0..4 {
            let args = random_args(main, seed).expect("random args");
            let want = eval_function(&before, "main", &args).expect("input evaluates");
            let got = eval_function(&after, "main", &args).expect("output evaluates");
            assert_values_close(&got, &want, RTOL, ATOL).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        }
        assert_eq!(count_op(&after, "multiply"), expect_multiplies, "{}", print_module(&after));
        let again = run_sequential(&after);
        assert_eq!(print_module(&again), print_module(&after), "second run changed the module");
    }

    const W_CONV: &str = "uniform<(3, 2, 3, 3), f32>(seed=1, low=-1.0, high=1.0)";
    const S3: &str = "tensor<(3, 1, 1), f32>[0.5, 2.0, 1.5]";
    const S2: &str = "tensor<(2, 1, 1), f32>[0.5, -2.0]";

    #[test]
    fn backward_folds_scale_through_bias_add_and_relu_into_conv_weight() {
        check(
            &format!(
                "def @main(%x: Tensor[(1, 2, 5, 5), f32]) {{
                   let %c = conv2d(%x, {W_CONV}, padding=[1]);
                   let %d = bias_add(%c, tensor<(3,), f32>[0.5, -0.25, 0.125]);
                   let %r = relu(%d);
                   multiply(%r, {S3})
                 }}"
            ),
            0,
        );
    }

    #[test]
    fn backward_folds_output_scale_of_dense() {
        check(
            "def @main(%x: Tensor[(4, 3), f32]) {
               multiply(tensor<(2,), f32>[3.0, -1.0], dense(%x, uniform<(2, 3), f32>(seed=2, low=-1.0, high=1.0)))
             }",
            0,
        );
    }

    #[test]
    fn forward_folds_input_scale_of_conv_and_dense() {
        check(
            &format!(
                "def @main(%x: Tensor[(1, 2, 5, 5), f32], %y: Tensor[(4, 3), f32]) {{
                   let %xs = multiply(%x, {S2});
                   let %c = conv2d(%xs, uniform<(3, 2, 3, 3), f32>(seed=3, low=-1.0, high=1.0), padding=[1]);
                   let %d = dense(multiply(%y, tensor<(3,), f32>[1.0, 2.0, -3.0]), uniform<(5, 3), f32>(seed=4, low=-1.0, high=1.0));
                   (%c, %d)
                 }}"
            ),
            0,
        );
    }

    #[test]
    fn negative_scale_is_not_folded_through_relu() {
        check(
            "def @main(%x: Tensor[(4, 3), f32]) {
               multiply(relu(dense(%x, uniform<(2, 3), f32>(seed=2, low=-1.0, high=1.0))), tensor<(2,), f32>[3.0, -1.0])
             }",
            1,
        );
    }

    #[test]
    fn scale_with_another_user_is_not_folded() {
        check(
            &format!(
                "def @main(%x: Tensor[(1, 2, 5, 5), f32]) {{
                   let %c = conv2d(%x, {W_CONV});
                   (multiply(%c, {S3}), %c)
                 }}"
            ),
            1,
        );
    }

    #[test]
    fn fold_scale_axis_sequential_holds_the_registered_passes() {
        crate::link();
        let seq = fold_scale_axis_pass();
        let names: Vec<&str> = seq.passes().iter().map(|p| p.info().name.as_str()).collect();
        assert_eq!(names, ["BackwardFoldScaleAxis", "ForwardFoldScaleAxis", "FoldConstant"]);
        for pass in seq.passes() {
            let registered = passel_engine::transform::get_pass(&pass.info().name).expect("registered");
            assert_eq!(registered.info(), pass.info(), "{} differs from the registered pass", pass.info().name);
            assert_eq!(registered.kind(), pass.kind());
        }
    }
}
