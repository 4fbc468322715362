//! The library tour of README.md, compiled so it cannot go stale. Run with
//! `cargo run -p passel-passes --example readme_tour`.

use std::sync::Arc;

use passel_engine::ir::{fn_attr, AttrValue, Module};
use passel_engine::transform::{function_pass, parse_pipeline, Pass, PassContext, PassTimingInstrument};

// A function pass: runs on every function (in parallel across functions), skips
// `SkipOptimization` functions, and returns the same Arc when it changes nothing.
fn mark_inline() -> passel_engine::transform::FunctionPass {
    function_pass("MarkInline", 1, |func, _module, _ctx| {
        if func.num_nodes() > 4 || func.attrs().flag(fn_attr::INLINE) {
            return Ok(func);
        }
        let attrs = func.attrs().clone().with(fn_attr::INLINE, AttrValue::Bool(true));
        Ok(Arc::new(func.with_attrs(attrs)))
    })
}
passel_engine::register_pass!("MarkInline", || Box::new(mark_inline()));

fn optimize(module: Module) -> Result<Module, passel_engine::PassError> {
    let pipeline = parse_pipeline("FoldConstant,MarkInline,[SimplifyExpr,DeadCodeElimination]")?;
    let timing = Arc::new(PassTimingInstrument::new());
    let ctx = PassContext::builder().opt_level(3).num_threads(4).instrument(timing.clone()).build()?;
    let module = ctx.scope(|| pipeline.run(module, &ctx))??;
    Ok(module)
}

fn main() -> Result<(), passel_engine::PassError> {
    passel_passes::link();
    let src =
        "def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  let %c = multiply(2.0f, 0.5f);\n  add(%x, %c)\n}\n";
    let module = passel_engine::ir::parse_module(src).map_err(|e| passel_engine::PassError::msg(e.to_string()))?;
    print!("{}", passel_engine::ir::print_module(&optimize(module)?));
    Ok(())
}
