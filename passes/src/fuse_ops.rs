//! FuseOps (function pass, opt level 0, requires InferType): groups operator calls into
//! nested functions marked `Primitive`, each called once where its last operator was, as
//! TVM's `FuseOps` does (in simplified form: greedy over producer → consumer edges instead of
//! TVM's post-dominator tree).
//!
//! What it does. A producer call `P` fuses into the group of its consumer call `C` when
//! - `P` is `C`'s operand directly, or through a let-bound variable used exactly once, by `C`,
//!   in the same block (not across an `if` branch, nested block or function boundary),
//!   possibly through alias bindings (`let %b = %a;`, each variable used once, as
//!   SimplifyInference and FoldScaleAxis leave them) — a value with several users ends a
//!   group;
//! - both are pure, non-tuple-result operators, `P`'s subtree has no effects, and neither
//!   is `Opaque` (opaque ops stand alone);
//! - the fusion patterns allow it: a chain of elementwise / broadcast / injective ops fuses;
//!   an out-elemwise-fusable op (`conv2d`, `dense`, `matmul`) absorbs following elementwise
//!   and broadcast ops but nothing fuses into its inputs, and its group holds no injective op;
//!   a reduction absorbs a preceding elementwise / broadcast / injective chain and ends its
//!   group; a group holds at most one out-elemwise-fusable or reduce op;
//! - the merged group has at most `relay.FuseOps.max_depth` operators (config key, integer,
//!   default 256; a value below 2 disables fusion);
//! - when `P` is let-bound (its binding moves into the fused function), every input of `P`'s
//!   group is an atom, so no computation is reordered.
//!
//! A group of two or more calls becomes `#[Primitive] fn (%p0, …) { body }(inputs…)`: its
//! variables and compound non-member operands become parameters (one parameter per distinct
//! variable), constants stay inside the body, and the bindings of let-bound interior members
//! are removed. Parameter names `%p<k>` are fresh per function, in arena order, so the
//! output is deterministic.
//!
//! What it deliberately does not do: wrap a single call in a function (TVM does; here a lone
//! call already is its own group), fuse into or out of a `Primitive` function (so a second
//! run changes nothing), fuse tuple fields or projections, or duplicate computation.
//!
//! Phases:
//! 1. Analysis: use counts, scopes and effects in arena order, then, in evaluation order
//!    (every producer, let-bound or not, before its consumer), a union-find over calls that
//!    merges each producer's group into its consumer's.
//! 2. One copy of the live nodes ([`passel_engine::ir::rewrite::Rewriter`]) in which the last call of each
//!    group becomes the call of a new `Primitive` function built from the group's members.

use std::sync::Arc;

use passel_engine::ir::{body_nesting, fn_attr, AttrValue, Attrs, ExprKind, Function, NodeId, MAX_BODY_NESTING};
use passel_engine::op;
use passel_engine::op::OpPattern;
use passel_engine::transform::ConfigType;
use rustc_hash::{FxHashMap, FxHashSet};

use crate::census::{more, Counter};
use passel_engine::ir::rewrite::{bound_values, eval_order, Propagate, Rewriter, NONE};
use passel_engine::transform::Statistic;

/// This pass's statistics (`passel run --stats`), read off the census of each function it
/// changed (net counts: before − after).
/// The registry name.
pub const NAME: &str = "FuseOps";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// The `FuseOps` pass as registered: name, opt level, required passes and, for a module pass,
/// its per-function forms and session firewall.
pub fn pass() -> passel_engine::transform::FunctionPass {
    passel_engine::transform::function_pass(NAME, 0, |func, _module, ctx| {
        let depth = ctx.get_config(MAX_DEPTH_KEY, DEFAULT_MAX_DEPTH);
        let (out, too_deep) = fuse_ops_within_nesting(&func, usize::try_from(depth).unwrap_or(0));
        if too_deep {
            let message = format!(
                "not fused: the primitive functions would nest `if` / closure bodies more than {} deep, \
                 deeper than the text format prints",
                passel_engine::ir::MAX_BODY_NESTING
            );
            ctx.emit(passel_engine::transform::Diagnostic::warning(NAME, message));
        }
        Ok(crate::census::counted(ctx, &func, out, STATISTICS))
    })
    .with_required(&["InferType"])
}

pub(crate) static STATISTICS: &[Counter] = &[(&GROUPS_FORMED, |b, a| more(b.primitives, a.primitives))];
static GROUPS_FORMED: Statistic = Statistic::new("FuseOps", "groups formed", "fused groups (Primitive functions) made");

/// Config key bounding the number of operators in one fused function.
pub const MAX_DEPTH_KEY: &str = "relay.FuseOps.max_depth";
/// Default of [`MAX_DEPTH_KEY`] (TVM's).
pub const DEFAULT_MAX_DEPTH: i64 = 256;
/// Longest chain of alias bindings (`let %b = %a;`) looked through between two calls.
const MAX_ALIASES: usize = 64;

passel_engine::register_config!(
    MAX_DEPTH_KEY,
    ConfigType::Int,
    "FuseOps: largest number of operators fused into one primitive function (default 256)",
    min = 0
);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Anchor {
    OutEWise,
    Reduce,
}

#[derive(Clone, Copy)]
struct Group {
    n_ops: usize,
    anchor: Option<Anchor>,
    injective: bool,
    opaque: bool,
    /// Some member has a compound operand that is not a member.
    compound_inputs: bool,
}

/// Runs FuseOps on `func` with groups of at most `max_depth` operators; returns `func` itself
/// (pointer-equal) when nothing fuses.
pub fn fuse_ops(func: &Arc<Function>, max_depth: usize) -> Arc<Function> {
    fuse_ops_within_nesting(func, max_depth).0
}

/// [`fuse_ops`], except that a function whose fused form would nest its bodies deeper than
/// [`MAX_BODY_NESTING`] (each primitive function is a closure body, one level below where its
/// group was) is returned as it was, with `true`.
pub fn fuse_ops_within_nesting(func: &Arc<Function>, max_depth: usize) -> (Arc<Function>, bool) {
    let out = fuse_unchecked(func, max_depth);
    if Arc::ptr_eq(&out, func) {
        return (out, false);
    }
    let nesting = body_nesting(&out);
    if nesting > MAX_BODY_NESTING && nesting > body_nesting(func) {
        return (Arc::clone(func), true);
    }
    (out, false)
}

fn fuse_unchecked(func: &Arc<Function>, max_depth: usize) -> Arc<Function> {
    if max_depth < 2 || !func.is_well_formed() {
        return Arc::clone(func);
    }
    let Some(plan) = plan(func, max_depth) else { return Arc::clone(func) };
    let mut names = Fresh::new(func);
    let mut rw = Rewriter::new(func, Propagate::Nothing);
    for &var in &plan.dropped {
        rw.drop_binding(var);
    }
    let out = rw.run(|rw, id| {
        let members = plan.groups.get(&id.0)?;
        emit_group(rw, &plan, members, &mut names)
    });
    match out {
        Some(new) => Arc::new(new),
        None => Arc::clone(func),
    }
}

/// The result of the analysis.
struct Plan {
    /// Group root (its last call) → members in arena order, for groups of two or more calls.
    groups: FxHashMap<u32, Vec<NodeId>>,
    /// Let-bound variables of interior members; their bindings are removed.
    dropped: Vec<NodeId>,
    /// Variable of a removed binding → the member it was bound to.
    via_var: FxHashMap<u32, NodeId>,
    /// Whether each node is a member of some emitted group.
    member: Vec<bool>,
}

fn plan(func: &Function, max_depth: usize) -> Option<Plan> {
    let n = func.num_nodes();
    let live = func.live_mask();
    let bound = bound_values(func);

    // Uses of each variable (not counting its binding), scopes and frozen (inside a
    // Primitive function) nodes, by a backward sweep from users to operands.
    let mut uses = vec![0u32; n];
    let mut scope = vec![NONE; n];
    let mut frozen = vec![false; n];
    for i in (0..n).rev() {
        if !live[i] {
            continue;
        }
        let id = NodeId(i as u32);
        let (s, fr) = (scope[i], frozen[i]);
        let mut set = |o: NodeId, s: NodeId, fr: bool| {
            scope[o.index()] = s;
            frozen[o.index()] |= fr;
        };
        match *func.kind(id) {
            ExprKind::Block { bindings, result } => {
                for (_, value) in func.bindings(bindings) {
                    set(value, id, fr);
                }
                set(result, id, fr);
            }
            ExprKind::If { cond, then_, else_ } => {
                set(cond, s, fr);
                set(then_, id, fr);
                set(else_, id, fr);
            }
            ExprKind::Func { idx } => {
                let c = func.closure(idx);
                set(c.body, id, fr || c.attrs.flag(fn_attr::PRIMITIVE));
            }
            _ => func.for_each_operand(id, |o| set(o, s, fr)),
        }
        passel_engine::ir::rewrite::for_each_use(func, id, |o| uses[o.index()] += 1);
    }

    let mut impure = vec![false; n];
    for id in func.node_ids() {
        let mut imp = match *func.kind(id) {
            ExprKind::Apply { .. } => true,
            ExprKind::Call { op, .. } => op::is_stateful(op),
            _ => false,
        };
        if !matches!(func.kind(id), ExprKind::Func { .. }) {
            func.for_each_operand(id, |o| imp |= impure[o.index()]);
        }
        impure[id.index()] = imp;
    }

    // Union-find over calls; a group's representative is its last call (the output).
    let mut parent: Vec<u32> = (0..n as u32).collect();
    let mut info: Vec<Option<Group>> = vec![None; n];
    let find = |parent: &mut Vec<u32>, mut x: u32| {
        let mut root = x;
        while parent[root as usize] != root {
            root = parent[root as usize];
        }
        while parent[x as usize] != root {
            let next = parent[x as usize];
            parent[x as usize] = root;
            x = next;
        }
        root
    };
    let mut via_var: FxHashMap<u32, NodeId> = FxHashMap::default();
    let mut dropped = Vec::new();
    let mut chain = Vec::new();
    // Evaluation order puts every producer, also a let-bound one, before its consumer.
    let order = eval_order(func);
    for &id in &order {
        let i = id.index();
        if !live[i] || frozen[i] {
            continue;
        }
        let Some(pattern) = fusable_pattern(func, id) else { continue };
        let mut g = Group {
            n_ops: 1,
            anchor: match pattern {
                OpPattern::OutEWiseFusable => Some(Anchor::OutEWise),
                OpPattern::Reduce => Some(Anchor::Reduce),
                _ => None,
            },
            injective: pattern == OpPattern::Injective,
            opaque: pattern == OpPattern::Opaque,
            compound_inputs: false,
        };
        let ExprKind::Call { args, .. } = *func.kind(id) else { continue };
        for &o in func.ids(args) {
            let (producer, var) = match func.kind(o) {
                ExprKind::Call { .. } => (o, None),
                ExprKind::Var { .. } => {
                    // Follow alias bindings (`let %b = %a;`), each variable used only once.
                    chain.clear();
                    let mut v = o;
                    let value = loop {
                        let value = bound[v.index()];
                        if value == NONE || uses[v.index()] != 1 || chain.len() > MAX_ALIASES {
                            break NONE;
                        }
                        chain.push(v);
                        match func.kind(value) {
                            ExprKind::Var { .. } => v = value,
                            _ => break value,
                        }
                    };
                    if value == NONE || scope[value.index()] != scope[i] {
                        continue;
                    }
                    (value, Some(o))
                }
                kind => {
                    g.compound_inputs |= !kind.is_atom();
                    continue;
                }
            };
            let root = find(&mut parent, producer.0);
            let Some(gp) = info[root as usize].filter(|_| root == producer.0) else {
                g.compound_inputs |= var.is_none();
                continue;
            };
            let ok = !g.opaque
                && !gp.opaque
                && pattern != OpPattern::OutEWiseFusable
                && gp.anchor != Some(Anchor::Reduce)
                && !(gp.anchor.is_some() && g.anchor.is_some())
                && !(gp.anchor.or(g.anchor) == Some(Anchor::OutEWise) && (gp.injective || g.injective))
                && gp.n_ops + g.n_ops <= max_depth
                && !impure[producer.index()]
                && !(var.is_some() && gp.compound_inputs);
            if !ok {
                g.compound_inputs |= var.is_none();
                continue;
            }
            parent[root as usize] = id.0;
            info[root as usize] = None;
            g = Group {
                n_ops: g.n_ops + gp.n_ops,
                anchor: g.anchor.or(gp.anchor),
                injective: g.injective || gp.injective,
                opaque: false,
                compound_inputs: g.compound_inputs || gp.compound_inputs,
            };
            if var.is_some() {
                for &v in &chain {
                    via_var.insert(v.0, producer);
                    dropped.push(v);
                }
            }
        }
        info[i] = Some(g);
    }

    // Members in evaluation order, so each one's producers come before it.
    let mut groups: FxHashMap<u32, Vec<NodeId>> = FxHashMap::default();
    for &id in &order {
        let i = id.index();
        if live[i] && (parent[i] != i as u32 || info[i].is_some_and(|g| g.n_ops >= 2)) {
            let root = find(&mut parent, i as u32);
            groups.entry(root).or_default().push(id);
        }
    }
    groups.retain(|_, members| members.len() >= 2);
    if groups.is_empty() {
        return None;
    }
    let mut member = vec![false; n];
    for members in groups.values() {
        for m in members {
            member[m.index()] = true;
        }
    }
    Some(Plan { groups, dropped, via_var, member })
}

/// The fusion pattern of a call that may join a group, or `None` for anything else (a
/// stateful, tuple-result, unknown or wrong-arity call counts as not fusable at all).
fn fusable_pattern(func: &Function, id: NodeId) -> Option<OpPattern> {
    let ExprKind::Call { op, attrs, args } = *func.kind(id) else { return None };
    let def = op::try_get(op)?;
    if def.stateful || def.tuple_result || !def.arity.accepts(args.len as usize) {
        return None;
    }
    def.check_attrs(func.call_attrs(attrs)).ok()?;
    Some(def.pattern)
}

/// Builds the `Primitive` function of one group and its call; returns the call.
fn emit_group(rw: &mut Rewriter<'_>, plan: &Plan, members: &[NodeId], names: &mut Fresh<'_>) -> Option<NodeId> {
    let f = rw.func;
    let root = *members.last()?;
    let mut new_of: FxHashMap<u32, NodeId> = FxHashMap::default();
    // Old input → its parameter; atoms are shared, compound inputs get one each.
    let mut param_of: FxHashMap<u32, NodeId> = FxHashMap::default();
    let mut params = Vec::new();
    let mut inputs = Vec::new();
    let mut args = Vec::new();
    for &m in members {
        let ExprKind::Call { op, attrs, args: old_args } = *f.kind(m) else { return None };
        args.clear();
        for &o in f.ids(old_args) {
            let internal = if plan.member[o.index()] && new_of.contains_key(&o.0) {
                Some(o)
            } else {
                plan.via_var.get(&o.0).copied().filter(|p| new_of.contains_key(&p.0))
            };
            let new = match internal {
                Some(p) => new_of[&p.0],
                None if matches!(f.kind(o), ExprKind::Const { .. }) => rw.map(o),
                None => match param_of.get(&o.0) {
                    Some(&p) => p,
                    None => {
                        let name = names.next();
                        let p = rw.b.var(&name, f.ty(o).cloned());
                        if f.kind(o).is_atom() {
                            param_of.insert(o.0, p);
                        }
                        params.push(p);
                        inputs.push(o);
                        p
                    }
                },
            };
            args.push(new);
        }
        let call = rw.b.call(op, &args, f.call_attrs(attrs).clone());
        rw.b.set_ty(call, f.ty(m).cloned());
        new_of.insert(m.0, call);
    }
    let body = new_of[&root.0];
    let attrs = Attrs::new().with(fn_attr::PRIMITIVE, AttrValue::Bool(true));
    let closure = rw.b.closure(&params, body, f.ty(root).cloned(), attrs);
    let mapped: Vec<NodeId> = inputs.iter().map(|&o| rw.map(o)).collect();
    let apply = rw.b.apply(closure, &mapped);
    rw.b.set_ty(apply, f.ty(root).cloned());
    Some(apply)
}

/// Fresh parameter names `p<k>` for one function, skipping names it already has.
struct Fresh<'f> {
    taken: FxHashSet<&'f str>,
    next: u32,
}

impl<'f> Fresh<'f> {
    fn new(func: &'f Function) -> Fresh<'f> {
        let mut taken = FxHashSet::default();
        for node in func.nodes() {
            if let ExprKind::Var { name } = node.kind {
                let name = func.sym(name);
                // Only names of the form `p<digits>` can collide.
                if name.strip_prefix('p').is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())) {
                    taken.insert(name);
                }
            }
        }
        Fresh { taken, next: 0 }
    }

    fn next(&mut self) -> String {
        loop {
            let name = format!("p{}", self.next);
            self.next += 1;
            if !self.taken.contains(name.as_str()) {
                return name;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use passel_engine::interp::{assert_values_close, eval_function, random_args};
    use passel_engine::ir::{parse_module, print_module, Module};

    use super::*;
    use crate::test_util::typed;

    fn run(module: &Module, max_depth: usize) -> Module {
        let mut out = module.clone();
        for (name, func) in module.iter() {
            out.insert(name, fuse_ops(func, max_depth)).expect("a valid name");
        }
        out
    }

    fn primitive_count(module: &Module) -> usize {
        module
            .iter()
            .map(|(_, f)| {
                let live = f.live_mask();
                f.nodes()
                    .iter()
                    .zip(live)
                    .filter(|(n, l)| {
                        *l && matches!(n.kind, ExprKind::Func { idx } if f.closure(idx).attrs.flag(fn_attr::PRIMITIVE))
                    })
                    .count()
            })
            .sum()
    }

    /// Fuses `@main`, checks the result on random inputs (bit-exact: fusion only moves
    /// calls) and that a second run changes nothing; returns the number of groups.
    fn check(text: &str, max_depth: usize) -> usize {
        let before = typed(text);
        let after = run(&before, max_depth);
        let main = before.get("main").expect("@main");
        for seed in 0..3 {
            let args = random_args(main, seed).expect("random args");
            let want = eval_function(&before, "main", &args).expect("input evaluates");
            let got = eval_function(&after, "main", &args).expect("output evaluates");
            assert_values_close(&got, &want, 0.0, 0.0).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        }
        let text = print_module(&after);
        let reparsed = parse_module(&text).unwrap_or_else(|e| panic!("fused output does not parse: {e}\n{text}"));
        assert_eq!(print_module(&reparsed), text, "fused output does not print back the same");
        let (retyped, diags) = crate::infer_module(&after);
        assert!(diags.is_empty(), "fused module does not type: {}", print_module(&after));
        let again = run(&retyped, max_depth);
        assert_eq!(print_module(&again), print_module(&retyped), "second run changed the module");
        primitive_count(&after)
    }

    const CONV_BLOCK: &str = "def @main(%x: Tensor[(1, 2, 5, 5), f32], %w: Tensor[(3, 2, 3, 3), f32], \
        %b: Tensor[(3,), f32], %y: Tensor[(1, 3, 3, 3), f32]) {
          let %c = conv2d(%x, %w);
          let %d = bias_add(%c, %b);
          let %r = relu(%d);
          let %s = add(%r, %y);
          let %t = sum(transpose(%s, axes=[0, 2, 3, 1]), axis=[3]);
          %t
        }";

    #[test]
    fn fuse_ops_fuses_conv_with_following_elementwise_and_keeps_meaning() {
        // conv2d + bias_add + relu + add, then transpose + sum.
        assert_eq!(check(CONV_BLOCK, 256), 2);
    }

    #[test]
    fn fuse_ops_respects_max_depth() {
        // With groups of at most two ops: conv2d + bias_add, relu + add, transpose + sum.
        assert_eq!(check(CONV_BLOCK, 2), 3);
        assert_eq!(check(CONV_BLOCK, 1), 0);
    }

    #[test]
    fn fuse_ops_ends_groups_at_values_with_several_users() {
        let n = check(
            "def @main(%x: Tensor[(4,), f32]) {
               let %a = exp(%x);
               let %b = relu(%a);
               let %c = negative(%a);
               add(%b, %c)
             }",
            256,
        );
        // exp has two users and stands alone; relu, negative and add fuse.
        assert_eq!(n, 1);
    }

    #[test]
    fn fuse_ops_keeps_opaque_and_stateful_calls_alone() {
        let n = check(
            "def @main(%x: Tensor[(2, 4), f32]) {
               let %a = relu(%x);
               let %d = dropout(%a, rate=0.5);
               exp(%d)
             }",
            256,
        );
        assert_eq!(n, 0);
    }

    #[test]
    fn fuse_ops_does_not_fuse_into_primitive_functions_again() {
        let module = typed(CONV_BLOCK);
        let once = run(&module, 256);
        let (once, _) = crate::infer_module(&once);
        let func = once.get("main").expect("@main");
        assert!(Arc::ptr_eq(&fuse_ops(func, 256), func));
    }

    /// Regression (#20 item 9): a group fused inside `if`s nested at the limit becomes a
    /// closure one level deeper, which printed text `check` rejects. Such a function stays
    /// unfused, with a warning; one level shallower fuses and prints text that parses.
    #[test]
    fn fuse_ops_keeps_a_function_whose_bodies_would_nest_too_deep() {
        use passel_engine::transform::{get_pass, PassContext};
        let nested = |depth: u32| {
            let mut body = "let %a = negative(%x); let %b = relu(%a); exp(%b)".to_string();
            for _ in 0..depth {
                body = format!("if (%c) {{ {body} }} else {{ %x }}");
            }
            typed(&format!("def @main(%x: Tensor[(4,), f32], %c: Tensor[(), bool]) -> Tensor[(4,), f32] {{ {body} }}"))
        };
        let at_limit = nested(MAX_BODY_NESTING);
        let func = at_limit.get("main").expect("@main");
        let (out, too_deep) = fuse_ops_within_nesting(func, 256);
        assert!(too_deep && Arc::ptr_eq(&out, func));
        crate::link();
        let ctx = PassContext::builder().num_threads(1).build().expect("ctx");
        let pass = get_pass("FuseOps").expect("registered");
        let res = ctx.scope(|| pass.run(at_limit.clone(), &ctx)).expect("scope").expect("runs");
        parse_module(&print_module(&res)).expect("what is printed parses");
        let diags = ctx.diagnostics().take();
        assert!(diags.len() == 1 && diags[0].message.contains("not fused"), "{diags:?}");

        let below = nested(MAX_BODY_NESTING - 1);
        let fused = run(&below, 256);
        assert_eq!(primitive_count(&fused), 1);
        parse_module(&print_module(&fused)).expect("what is printed parses");
    }

    #[test]
    fn fuse_ops_pass_reads_max_depth_from_the_context() {
        use passel_engine::transform::{get_pass, PassContext};
        crate::link();
        let module = typed(CONV_BLOCK);
        let pass = get_pass("FuseOps").expect("registered");
        let groups_with = |depth: i64| {
            let ctx = PassContext::builder().config(MAX_DEPTH_KEY, depth).num_threads(1).build().expect("valid config");
            let out = ctx.scope(|| pass.run(module.clone(), &ctx)).expect("scope").expect("pass runs");
            primitive_count(&out)
        };
        assert_eq!(groups_with(DEFAULT_MAX_DEPTH), 2);
        assert_eq!(groups_with(2), 3);
        assert_eq!(groups_with(0), 0);
        let negative = PassContext::builder().config(MAX_DEPTH_KEY, -5i64).build();
        assert!(negative.is_err(), "a negative depth must be rejected");
        let wrong = PassContext::builder().config(MAX_DEPTH_KEY, "deep").build();
        assert!(wrong.is_err(), "a string for an int key must be rejected");
    }

    #[test]
    fn fuse_ops_fuses_let_bound_producer_whose_id_is_larger_than_its_users() {
        // Append-mode rewrites leave arenas like this: `add(%c, 1)` keeps its small id while
        // the conv2d bound to `%c` was rebuilt at the end. Evaluation order still fuses them.
        use passel_engine::ir::{Constant, DType, FunctionBuilder, Type};
        let op = |name| passel_engine::op::lookup(name).expect("op");
        let ty = |shape: Vec<u64>| Some(Type::tensor(shape, DType::F32));
        let mut b = FunctionBuilder::new();
        let x = b.var("x", ty(vec![1, 1, 3, 3]));
        let w = b.var("w", ty(vec![2, 1, 2, 2]));
        let c = b.var("c", ty(vec![1, 2, 2, 2]));
        let k = b.constant(Constant::scalar_f32(1.0));
        let add = b.call(op("add"), &[c, k], Attrs::new());
        b.set_ty(add, ty(vec![1, 2, 2, 2]));
        let conv = b.call(op("conv2d"), &[x, w], Attrs::new());
        b.set_ty(conv, ty(vec![1, 2, 2, 2]));
        let r = b.var("r", ty(vec![1, 2, 2, 2]));
        let body = b.block(&[(c, conv), (r, add)], r);
        let func = Arc::new(b.finish(&[x, w], body, ty(vec![1, 2, 2, 2]), Attrs::new()));
        let mut module = Module::new();
        module.insert("main", Arc::clone(&func)).expect("a valid name");
        let after = run(&module, 256);
        assert_eq!(primitive_count(&after), 1, "{}", print_module(&after));
        let args = random_args(&func, 0).expect("args");
        let want = eval_function(&module, "main", &args).expect("input evaluates");
        let got = eval_function(&after, "main", &args).expect("output evaluates");
        assert_values_close(&got, &want, 0.0, 0.0).expect("same values");
    }

    #[test]
    fn fuse_ops_keeps_meaning_on_untyped_bodies() {
        // Without InferType only the parameters are typed; fusion does not need more.
        let module = parse_module(
            "def @main(%x: Tensor[(2, 3), f32], %w: Tensor[(4, 3), f32]) {
               let %d = dense(%x, %w);
               let %r = relu(add(%d, 1.0f));
               sum(transpose(%r), axis=[0])
             }",
        )
        .expect("parses");
        let after = run(&module, 256);
        assert_eq!(primitive_count(&after), 2, "{}", print_module(&after));
        let main = module.get("main").expect("@main");
        let args = random_args(main, 5).expect("args");
        let want = eval_function(&module, "main", &args).expect("input evaluates");
        let got = eval_function(&after, "main", &args).expect("output evaluates");
        assert_values_close(&got, &want, 0.0, 0.0).expect("same values");
    }
}
