//! A custom function pass and module pass in a few lines, registered, run as a textual
//! pipeline under a context with the timing instrument.
//!
//! Run with `cargo run -p passel-engine --example custom_pass`.

use std::sync::Arc;

use passel_engine::ir::{fn_attr, print_module, AttrValue, Attrs, DType, FunctionBuilder, Module, Type};
use passel_engine::transform::{
    function_pass, module_pass, parse_pipeline, print_pipeline, Diagnostic, FunctionPass, ModulePass, Pass,
    PassContext, PassError, PassTimingInstrument,
};
use passel_engine::{op, register_pass};

/// Marks small functions `Inline`; returns the same `Arc` when there is nothing to do.
fn mark_inline() -> FunctionPass {
    function_pass("MarkInline", 1, |func, _module, ctx| {
        if func.num_nodes() > 4 || func.attrs().flag(fn_attr::INLINE) {
            return Ok(func);
        }
        ctx.emit(Diagnostic::warning("MarkInline", format!("inlining a {}-node function", func.num_nodes())));
        let attrs = func.attrs().clone().with(fn_attr::INLINE, AttrValue::Bool(true));
        Ok(Arc::new(func.with_attrs(attrs)))
    })
}

/// Removes functions whose name starts with `unused_`; needs `MarkInline` first.
fn remove_unused() -> ModulePass {
    module_pass("RemoveUnused", 0, |mut module, _ctx| {
        let doomed: Vec<String> =
            module.iter().map(|(name, _)| name.to_string()).filter(|n| n.starts_with("unused_")).collect();
        for name in doomed {
            module.remove(&name).map_err(|e| PassError::msg(e.to_string()))?;
        }
        Ok(module)
    })
    .with_required(&["MarkInline"])
}

register_pass!("MarkInline", || Box::new(mark_inline()));
register_pass!("RemoveUnused", || Box::new(remove_unused()));

fn relu_module() -> Module {
    let mut module = Module::new();
    for name in ["main", "unused_helper"] {
        let mut b = FunctionBuilder::new();
        let ty = Type::tensor(vec![8], DType::F32);
        let x = b.var("x", Some(ty.clone()));
        let relu = op::lookup("relu").expect("relu is a built-in operator");
        let body = b.call(relu, &[x], Attrs::new());
        module.add(name, b.finish(&[x], body, Some(ty), Attrs::new())).expect("names are distinct");
    }
    module
}

fn main() -> Result<(), PassError> {
    let pipeline = parse_pipeline("remove-unused,[MarkInline]")?;
    println!("pipeline: {}", print_pipeline(&pipeline));

    let timing = Arc::new(PassTimingInstrument::new());
    let ctx = PassContext::builder().opt_level(2).instrument(timing.clone()).build()?;
    let (module, report) = ctx.scope(|| -> Result<_, PassError> {
        let module = pipeline.run(relu_module(), &ctx)?;
        let report = timing.render().map_err(|e| PassError::msg(e.message))?;
        Ok((module, report))
    })??;

    println!("{}", print_module(&module));
    for diag in ctx.diagnostics().take() {
        println!("warning in {} on @{}: {}", diag.pass, diag.function.unwrap_or_default(), diag.message);
    }
    print!("{report}");
    Ok(())
}
