//! CommonSubexprElimTIR (prim_func pass, opt level 0): TVM's
//! `tir.transform.CommonSubexprElimTIR(enable_cse_tir, identify_equiv_terms)`, binding a
//! subexpression that a statement computes more than once to a `let` variable.
//!
//! Arguments and configs, as TVM's lowering pipeline passes them: `enable_cse_tir` is
//! `!tir.disable_cse_tir` (default false) and `identify_equiv_terms` is
//! `tir.enable_equiv_terms_in_cse_tir` (default false). Disabled, the pass changes nothing.
//!
//! What it does, with TVM's eligibility rules: an expression is a candidate when it is not a
//! leaf, not `bool`, not a `ramp` or `broadcast`, and contains no load, intrinsic call,
//! `let` or variable bound by a `let` expression (loads depend on memory; TVM also leaves
//! calls alone). Within one statement's own
//! expressions (a store's indices and value, a condition, a `let` value, loop bounds), a
//! candidate computed at least twice becomes `let %cse_vN = e;` around the statement, its
//! occurrences replaced by `%cse_vN`. Larger expressions are chosen first; an expression
//! inside a chosen one counts once (its copy in the `let` value). With
//! `identify_equiv_terms`, expressions equal up to the order of the operands of commutative
//! operators (`add mul min max eq ne and or`) count as one (TVM normalizes with its
//! arithmetic simplifier; this is the part of that which needs no rewriting). Names are
//! `cse_v1`, `cse_v2`, … in order of creation per function.
//!
//! Not done (TVM does): sharing a subexpression between different statements (TVM places the
//! binding at the innermost scope that holds every occurrence).
//!
//! Phases:
//! 1. Expressions in ascending order: a value number per expression (hash-consing of
//!    eligible expressions) and the size of each.
//! 2. Statements in ascending order, each rebuilt over its children, with its repeated
//!    candidates bound by `let`s.
//! 3. Nothing repeated → the input `Arc`.

use std::sync::Arc;

use passel_engine::tir::{BinOp, PExprId, PExprKind, PrimFunc, PrimFuncBuilder, StmtId};
use passel_engine::transform::{ConfigType, PassContext, PrimFuncPass};
use rustc_hash::FxHashMap;

use super::copy::Copier;

/// The registry name.
pub const NAME: &str = "CommonSubexprElimTIR";

passel_engine::register_pass!(NAME, || Box::new(pass()));

/// Config key: turn the pass off.
pub const DISABLE_CSE_TIR_KEY: &str = "tir.disable_cse_tir";
/// Config key: identify expressions equal up to commutative operand order.
pub const ENABLE_EQUIV_TERMS_KEY: &str = "tir.enable_equiv_terms_in_cse_tir";

passel_engine::register_config!(
    DISABLE_CSE_TIR_KEY,
    ConfigType::Bool,
    "CommonSubexprElimTIR changes nothing (default false)"
);
passel_engine::register_config!(
    ENABLE_EQUIV_TERMS_KEY,
    ConfigType::Bool,
    "CommonSubexprElimTIR identifies expressions equal up to commutative operand order (default false)"
);

/// The `CommonSubexprElimTIR` pass as registered.
pub fn pass() -> PrimFuncPass {
    passel_engine::transform::prim_func_pass(NAME, 0, |func, _module, ctx| {
        let (enable, equiv) = options(ctx);
        Ok(common_subexpr_elim(&func, enable, equiv))
    })
}

/// `(enable_cse_tir, identify_equiv_terms)` as the context configures them.
pub fn options(ctx: &PassContext) -> (bool, bool) {
    (!ctx.get_config(DISABLE_CSE_TIR_KEY, false), ctx.get_config(ENABLE_EQUIV_TERMS_KEY, false))
}

/// Runs CommonSubexprElimTIR on `func`; returns `func` itself when nothing repeats.
pub fn common_subexpr_elim(func: &Arc<PrimFunc>, enable_cse_tir: bool, identify_equiv_terms: bool) -> Arc<PrimFunc> {
    if !enable_cse_tir {
        return func.clone();
    }
    super::rebuilt(func, run(func, identify_equiv_terms))
}

/// A hash-consing key: the node with its operands' value numbers.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    Int(i64, passel_engine::tir::PType),
    Float(u64, passel_engine::tir::PType),
    Var(u32),
    Node(u8, u32, passel_engine::tir::PType, Vec<u32>),
}

fn run(f: &PrimFunc, equiv: bool) -> Result<Option<PrimFunc>, String> {
    // Phase 1: value numbers, eligibility and sizes.
    let ne = f.exprs().len();
    let mut vn = vec![0u32; ne];
    let mut eligible = vec![false; ne];
    let mut clean = vec![true; ne];
    let mut size = vec![1u32; ne];
    let mut table: FxHashMap<Key, u32> = FxHashMap::default();
    let mut ops = Vec::new();
    // Variables bound by `let` expressions: an expression using one cannot leave its `let`.
    let mut let_bound = vec![false; f.vars().len()];
    for e in f.exprs() {
        if let PExprKind::Let(v, _, _) = e.kind {
            let_bound[v.index()] = true;
        }
    }
    for i in 0..ne {
        let e = PExprId(i as u32);
        let node = f.expr(e);
        ops.clear();
        f.expr_operands(e, &mut ops);
        let mut operand_vns: Vec<u32> = ops.iter().map(|o| vn[o.index()]).collect();
        clean[i] = ops.iter().all(|o| clean[o.index()])
            && !matches!(node.kind, PExprKind::Load(..) | PExprKind::Call(..) | PExprKind::Let(..))
            && !matches!(node.kind, PExprKind::Var(v) if let_bound[v.index()]);
        size[i] = 1 + ops.iter().map(|o| size[o.index()]).sum::<u32>();
        let key = match node.kind {
            PExprKind::Int(v) => Key::Int(v, node.ty),
            PExprKind::Float(v) => Key::Float(v.to_bits(), node.ty),
            PExprKind::Var(v) => Key::Var(v.0),
            PExprKind::Bin(op, _, _) => {
                let commutative = matches!(
                    op,
                    BinOp::Add | BinOp::Mul | BinOp::Min | BinOp::Max | BinOp::Eq | BinOp::Ne | BinOp::And | BinOp::Or
                );
                if equiv && commutative {
                    operand_vns.sort_unstable();
                }
                Key::Node(1, op as u32, node.ty, operand_vns)
            }
            PExprKind::Not(_) => Key::Node(2, 0, node.ty, operand_vns),
            PExprKind::Select(..) => Key::Node(3, 0, node.ty, operand_vns),
            PExprKind::Cast(_) => Key::Node(4, 0, node.ty, operand_vns),
            // Never shared: each gets a number of its own.
            _ => Key::Node(255, i as u32, node.ty, Vec::new()),
        };
        let next = table.len() as u32;
        vn[i] = *table.entry(key).or_insert(next);
        eligible[i] = clean[i]
            && !node.kind.is_immediate()
            && !matches!(node.kind, PExprKind::Var(_) | PExprKind::Ramp(..) | PExprKind::Broadcast(_))
            && node.ty.dtype != passel_engine::ir::DType::Bool
            && node.ty.is_scalar();
    }
    // Phase 2: statements.
    let n = f.stmts().len();
    let mut b = PrimFuncBuilder::with_signature_of(f);
    let mut copier = Copier::new(f);
    let mut out: Vec<StmtId> = Vec::with_capacity(n);
    let mut count = 0u32;
    let mut changed = false;
    let mut roots = Vec::new();
    for i in 0..n {
        let s = StmtId(i as u32);
        roots.clear();
        f.stmt_exprs(s, &mut roots);
        // Every node of the statement's trees, with its parent.
        let mut nodes: Vec<(PExprId, Option<PExprId>)> = roots.iter().map(|&r| (r, None)).collect();
        let mut k = 0;
        while k < nodes.len() {
            let e = nodes[k].0;
            ops.clear();
            f.expr_operands(e, &mut ops);
            nodes.extend(ops.iter().map(|&o| (o, Some(e))));
            k += 1;
        }
        let parent: FxHashMap<PExprId, PExprId> = nodes.iter().filter_map(|&(e, p)| p.map(|p| (e, p))).collect();
        let mut groups: FxHashMap<u32, Vec<PExprId>> = FxHashMap::default();
        for &(e, _) in &nodes {
            if eligible[e.index()] {
                groups.entry(vn[e.index()]).or_default().push(e);
            }
        }
        let mut cands: Vec<(u32, Vec<PExprId>)> = groups.into_iter().filter(|(_, v)| v.len() >= 2).collect();
        if cands.is_empty() {
            out.push(copier.node(&mut b, s, &out, false)?);
            continue;
        }
        // Larger first; ties in program order.
        for c in &mut cands {
            c.1.sort_unstable();
        }
        cands.sort_unstable_by_key(|(_, occ)| (std::cmp::Reverse(size[occ[0].index()]), occ[0]));
        // Dead: nodes inside a replaced occurrence that is not the kept copy.
        let mut dead: FxHashMap<PExprId, ()> = FxHashMap::default();
        let mut chosen: Vec<(PExprId, passel_engine::tir::VarId)> = Vec::new();
        for (_, occ) in cands {
            let live: Vec<PExprId> = occ
                .iter()
                .copied()
                .filter(|&e| {
                    let mut p = Some(e);
                    while let Some(x) = p {
                        if dead.contains_key(&x) {
                            return false;
                        }
                        p = parent.get(&x).copied();
                    }
                    true
                })
                .collect();
            if live.len() < 2 {
                continue;
            }
            count += 1;
            let var = b.var(&format!("cse_v{count}"), f.expr(live[0]).ty)?;
            for &e in &live {
                copier.subst.insert(e, var);
            }
            // Every copy but the first is replaced whole: its inside no longer counts.
            for &e in &live[1..] {
                let mut stack = vec![e];
                while let Some(x) = stack.pop() {
                    ops.clear();
                    f.expr_operands(x, &mut ops);
                    for &o in &ops {
                        dead.insert(o, ());
                        stack.push(o);
                    }
                }
            }
            chosen.push((live[0], var));
        }
        if chosen.is_empty() {
            out.push(copier.node(&mut b, s, &out, false)?);
            continue;
        }
        changed = true;
        let mut stmt = copier.node(&mut b, s, &out, false)?;
        // Later (smaller) bindings are used by earlier ones' values: they go outside.
        for &(e, var) in &chosen {
            let value = copier.expr_value(&mut b, e)?;
            stmt = b.let_stmt(var, value, stmt)?;
        }
        copier.subst.clear();
        out.push(stmt);
    }
    if !changed {
        return Ok(None);
    }
    Ok(Some(b.finish(out[f.body().index()])))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prim(src: &str) -> Arc<PrimFunc> {
        let m = passel_engine::ir::parse_module(src).expect("parses");
        m.get_prim("f").expect("@f").clone()
    }

    #[test]
    fn cse_returns_the_same_arc_when_disabled_or_nothing_repeats() {
        let f = prim("prim @f(%A: Buffer[(8,), i64], %x: i64, %y: i64) { %A[0] = mul(add(%x, %y), add(%x, %y)); }");
        assert!(Arc::ptr_eq(&common_subexpr_elim(&f, false, false), &f));
        assert!(!Arc::ptr_eq(&common_subexpr_elim(&f, true, false), &f));
        let g = prim("prim @f(%A: Buffer[(8,), i64], %x: i64, %y: i64) { %A[0] = add(%x, %y); }");
        assert!(Arc::ptr_eq(&common_subexpr_elim(&g, true, false), &g));
    }

    #[test]
    fn cse_identifies_commuted_terms_only_when_asked() {
        let f = prim("prim @f(%A: Buffer[(8,), i64], %x: i64, %y: i64) { %A[0] = sub(add(%x, %y), add(%y, %x)); }");
        assert!(Arc::ptr_eq(&common_subexpr_elim(&f, true, false), &f));
        expect_test::expect![[r#"
            prim @f(%A: Buffer[(8,), i64], %x: i64, %y: i64) {
              let %cse_v1 = add(%x, %y);
              %A[0] = sub(%cse_v1, %cse_v1);
            }
        "#]]
        .assert_eq(&passel_engine::tir::print_prim_func("f", &common_subexpr_elim(&f, true, true)));
    }

    #[test]
    fn cse_reads_its_options_from_the_context() {
        let ctx = PassContext::builder()
            .config(DISABLE_CSE_TIR_KEY, true)
            .config(ENABLE_EQUIV_TERMS_KEY, true)
            .build()
            .expect("valid config");
        assert_eq!(options(&ctx), (false, true));
        assert_eq!(options(&PassContext::builder().build().expect("default")), (true, false));
    }
}
