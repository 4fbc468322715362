//! The default pipelines that `passel run -O N` uses.

use passel_engine::transform::{get_pass, Pass, Sequential};

/// Names of the standard pipeline, in order. Each pass has its own opt level, so running this
/// pipeline under a context with opt level N runs exactly the passes whose level is at most N
/// (TVM's rule); required passes such as InferType run before the passes that need them.
pub const STANDARD_PIPELINE: &[&str] =
    &["FoldConstant", "SimplifyExpr", "EliminateCommonSubexpr", "CanonicalizeBindings", "DeadCodeElimination"];

/// The standard pipeline for `opt_level` (0–3): [`STANDARD_PIPELINE`] as one `Sequential`
/// named `default-O<N>`. The context's opt level decides which passes run.
pub fn default_pipeline(opt_level: u32) -> Sequential {
    let passes = STANDARD_PIPELINE
        .iter()
        .map(|name| get_pass(name).unwrap_or_else(|e| panic!("standard pass {name} is not registered: {e}")))
        .collect();
    Sequential::new(&format!("default-O{opt_level}"), passes)
}

/// Runs a textual pipeline (`FoldConstant,[SimplifyExpr,DeadCodeElimination]`) on `module`
/// under a fresh context with opt level 3 and one thread, so every named pass runs together
/// with its required passes. Errors and error diagnostics come back as text, one per line.
/// Used by the filetests.
pub fn run_pipeline_text(
    pipeline: &str,
    module: passel_engine::ir::Module,
) -> Result<passel_engine::ir::Module, String> {
    use passel_engine::transform::{PassContext, Severity};
    let seq = passel_engine::transform::parse_pipeline(pipeline).map_err(|e| e.to_string())?;
    let ctx = PassContext::builder().opt_level(3).num_threads(1).build().map_err(|e| e.to_string())?;
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
