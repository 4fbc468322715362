//! The default pipelines that `passel run -O N` uses, and [`standard_session`], an incremental
//! session with the standard passes linked in.
//!
//! As in TVM's `relay.build` (and its VM compiler's `OptimizeModule`), there is one ordered
//! list of passes and the context's opt level selects from it: a pass runs at `-O N` when its
//! own opt level is at most N (or it is required by a pass that runs). With the passes
//! registered here that gives:
//!
//! | level | passes that run (InferType runs before each pass that requires it) |
//! |-------|------------------------------------------------------------------------|
//! | -O0   | SimplifyInference, FoldScaleAxis (its FoldConstant only), SimplifyExpr, FuseOps |
//! | -O1   | + Inline, EliminateCommonSubexpr, CanonicalizeBindings, DeadCodeElimination |
//! | -O2   | + FoldConstant (also inside FoldScaleAxis) |
//! | -O3   | + Backward/ForwardFoldScaleAxis |
//!
//! The levels are TVM's: Relax's where Relax has the pass (EliminateCommonSubexpr 1,
//! CanonicalizeBindings 1), Relay's otherwise, and FoldConstant at Relay's 2, which the
//! pass-infrastructure design pins (docs/python.md has the table).
//!
//! The order follows TVM's: Inline first (the VM compiler inlines before optimizing, so the
//! inlined bodies are optimized with their callers; with the default `relay.Inline.max_size`
//! of 0 only functions marked `Inline` are inlined), then the simplifications, then the
//! clean-ups, and FuseOps last, so no other pass has to look inside the `Primitive` functions it
//! makes and dead or duplicated values do not end fusion groups early. ToANormalForm, ToGraphNormalForm and LambdaLift are not part of
//! TVM's build pipeline (the VM uses them while lowering), so they are not here either.

use std::sync::Arc;

use passel_engine::transform::{get_pass, Pass, PassContext, Sequential};
use passel_engine::{Session, SessionError};

/// Names of the standard pipeline, in order. Each pass has its own opt level, so running this
/// pipeline under a context with opt level N runs exactly the passes whose level is at most N
/// (TVM's rule); required passes such as InferType run before the passes that need them.
pub const STANDARD_PIPELINE: &[&str] = &[
    "Inline",
    "SimplifyInference",
    "FoldConstant",
    "FoldScaleAxis",
    "SimplifyExpr",
    "EliminateCommonSubexpr",
    "CanonicalizeBindings",
    "DeadCodeElimination",
    "FuseOps",
];

/// The standard pipeline for `opt_level` (0–3): [`STANDARD_PIPELINE`] as one `Sequential`
/// named `default-O<N>`. The context's opt level decides which passes run.
pub fn default_pipeline(opt_level: u32) -> Sequential {
    named_sequential(&format!("default-O{opt_level}"), STANDARD_PIPELINE)
}

/// The lowering pipeline's pass names, in order: the graph level's operators become
/// PrimFuncs (LegalizeOps), each fused group one PrimFunc (FuseTIR), then the default tir
/// pipeline ([`TIR_PIPELINE`]). `passel run --lower` runs it after the standard pipeline:
/// TVM's `relax.build` order, graph optimisation with fusion first, then legalisation,
/// FuseTIR and the tir passes.
pub fn lower_pass_names() -> Vec<&'static str> {
    let mut names = vec![crate::legalize_ops::NAME, crate::fuse_tir::NAME];
    names.extend_from_slice(TIR_PIPELINE);
    names
}

/// The lowering pipeline ([`lower_pass_names`]) as one `Sequential` named `lower`.
pub fn lower_pipeline() -> Sequential {
    named_sequential("lower", &lower_pass_names())
}

/// The standard pipeline for `opt_level` followed by the lowering pipeline, named
/// `build-O<N>`: what `passel run --lower` runs.
pub fn build_pipeline(opt_level: u32) -> Sequential {
    Sequential::new(
        &format!("build-O{opt_level}"),
        vec![Arc::new(default_pipeline(opt_level)) as Arc<dyn Pass>, Arc::new(lower_pipeline())],
    )
}

fn named_sequential(name: &str, names: &[&str]) -> Sequential {
    let passes = names
        .iter()
        .map(|name| get_pass(name).unwrap_or_else(|e| panic!("standard pass {name} is not registered: {e}")))
        .collect();
    Sequential::new(name, passes)
}

/// The loop-level passes in the order TVM's default tir lowering applies them
/// (`tvm.s_tir.pipeline`: StmtSimplify, FlattenBuffer, NarrowDataType(32), LoopPartition,
/// VectorizeLoop, StorageRewrite, UnrollLoop, StmtSimplify, RemoveNoOp, CommonSubexprElim),
/// leaving out the passes this library does not have. The configs decide as in TVM:
/// `tir.disable_vectorize` makes VectorizeLoop serialize, `tir.disable_cse_tir` turns
/// CommonSubexprElimTIR off, `tir.LoopPartition.*` and `tir.UnrollLoop.*` configure theirs.
pub const TIR_PIPELINE: &[&str] = &[
    "Simplify",
    "FlattenBuffer",
    "NarrowDataType",
    "LoopPartition",
    "VectorizeLoop",
    "StorageRewrite",
    "UnrollLoop",
    "Simplify",
    "RemoveNoOp",
    "CommonSubexprElimTIR",
];

/// The default loop-level pipeline: [`TIR_PIPELINE`] as one `Sequential` named `tir-default`.
/// Every pass in it is a PrimFunc pass; graph functions are left alone.
pub fn tir_pipeline() -> Sequential {
    named_sequential("tir-default", TIR_PIPELINE)
}

/// Runs a textual pipeline (`FoldConstant,[SimplifyExpr,DeadCodeElimination]`) on `module`
/// under a fresh context with opt level 3, one thread and `testing.verify_each`, so every named
/// pass runs together with its required passes and a pass that breaks the IR is named. Errors
/// and error diagnostics come back as text, one per line. Used by the filetests.
pub fn run_pipeline_text(
    pipeline: &str,
    module: passel_engine::ir::Module,
) -> Result<passel_engine::ir::Module, String> {
    use passel_engine::transform::{PassContext, Severity};
    let seq = passel_engine::transform::parse_pipeline(pipeline).map_err(|e| e.to_string())?;
    let ctx = PassContext::builder()
        .opt_level(3)
        .num_threads(1)
        .config(passel_engine::transform::VERIFY_EACH, true)
        .build()
        .map_err(|e| e.to_string())?;
    let res = ctx.scope(|| seq.run(module, &ctx)).map_err(|e| e.to_string())?;
    let errors: Vec<String> = ctx
        .diagnostics()
        .take()
        .into_iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| format!("{}{}: {}", d.pass, d.function.map(|f| format!(" @{f}")).unwrap_or_default(), d.message))
        .collect();
    match res {
        Err(e) => Err(e.to_string()),
        Ok(_) if !errors.is_empty() => Err(errors.join("\n")),
        Ok(m) => Ok(m),
    }
}

/// A session for `pipeline` under `ctx` with the standard passes linked in. The standard
/// module passes bring their own per-function forms and firewalls (declared in their files in
/// passel-passes): InferType's function-local form, DeadCodeElimination's split
/// (reachability prelude, then per-function dead binding removal) and the firewalls of Inline
/// and of that prelude, which let an edit skip them on the edit path.
pub fn standard_session(pipeline: Sequential, ctx: &PassContext) -> Result<Session, SessionError> {
    Session::new(pipeline, ctx)
}

#[cfg(test)]
mod tests {
    use passel_engine::ir::{parse_module, print_module};
    use passel_engine::transform::{Pass, PassContext};

    use super::*;

    const SRC: &str = "def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %k = add(1.0f, 2.0f);
  let %a = @helper(multiply(%x, 1.0f));
  let %b = add(%a, %k);
  let %c = add(%a, %k);
  let %d = %c;
  multiply(%b, %d)
}

#[Inline]
def @helper(%p: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  relu(%p)
}
";

    fn run_at(level: u32) -> String {
        crate::link();
        let ctx = PassContext::builder().opt_level(level).num_threads(1).build().expect("context");
        let module = parse_module(SRC).expect("parses");
        let out = ctx.scope(|| default_pipeline(level).run(module, &ctx)).expect("scope").expect("pipeline runs");
        print_module(&out)
    }

    #[test]
    fn default_pipeline_runs_the_passes_of_each_opt_level() {
        let o0 = run_at(0);
        // SimplifyExpr (`multiply(%x, 1.0f)` goes) and FuseOps; no inlining, no folding.
        assert!(o0.contains("@helper(%x)") && o0.contains("add(1.0f, 2.0f)") && o0.contains("#[Primitive]"), "{o0}");
        // No CSE at -O0: the two equal sums are fused as two `add`s, beside the unfolded one.
        assert_eq!(o0.matches("add(").count(), 3, "{o0}");
        let o1 = run_at(1);
        // Inline, then DeadCodeElimination drops the inlined helper (its relu is fused); no folding yet.
        assert!(!o1.contains("@helper") && o1.contains("relu(") && o1.contains("add(1.0f, 2.0f)"), "{o1}");
        // EliminateCommonSubexpr (level 1) merges %b and %c: one sum is left beside `1 + 2`.
        assert_eq!(o1.matches("add(").count(), 2, "{o1}");
        assert!(o1.contains("multiply(%b, %b)"), "{o1}");
        let o2 = run_at(2);
        assert!(o2.contains("3.0f") && !o2.contains("add(1.0f, 2.0f)"), "{o2}");
        assert_eq!(o2.matches("add(").count(), 1, "{o2}");
        assert!(o2.contains("multiply(%b, %b)"), "{o2}");
        let o3 = run_at(3);
        assert_eq!(o3.matches("add(").count(), 1, "{o3}");
        assert!(o3.contains("multiply(%b, %b)"), "{o3}");
    }
}
