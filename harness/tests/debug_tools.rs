//! The pipeline debugging tools on real pipelines: opt-bisect numbers executions the same at 1,
//! 2 and 8 threads, and `first_failing` finds a planted miscompile exactly.

use std::sync::Arc;

use passel_engine::ir::{AttrValue, Function, Module};
use passel_engine::transform::{function_pass, get_pass, PassContext, Sequential};
use passel_harness::debug::bisect::{execution_line, first_failing, run_with_limit};
use passel_harness::gen::{chain, ChainOptions};

/// A pass (opt level 2, so bisect may skip it) that "miscompiles" @f7: it marks the function
/// with a `Planted` attribute the check looks for, and leaves every other function alone.
fn planted() -> Sequential {
    passel_passes::link();
    let plant = function_pass("Plant", 2, |func: Arc<Function>, module: &Module, _ctx| {
        let is_f7 = module.get("f7").is_some_and(|f| Arc::ptr_eq(f, &func));
        Ok(if is_f7 {
            Arc::new(func.with_attrs(func.attrs().clone().with("Planted", AttrValue::Bool(true))))
        } else {
            func
        })
    });
    let get = |name| get_pass(name).expect("registered");
    Sequential::new(
        "bisect-test",
        vec![get("FoldConstant"), plant.shared(), get("SimplifyExpr"), get("EliminateCommonSubexpr")],
    )
}

fn module() -> Module {
    chain(&ChainOptions { functions: 12, ops: 10, seed: 3, ..Default::default() })
}

fn builder(threads: usize) -> impl FnOnce() -> passel_engine::transform::PassContextBuilder {
    move || PassContext::builder().opt_level(3).num_threads(threads)
}

#[test]
fn bisect_log_and_output_are_the_same_at_any_thread_count() {
    let (module, pipeline) = (module(), planted());
    for limit in [0, 5, 13, 20, u64::MAX] {
        let serial = run_with_limit(&module, &pipeline, builder(1), limit).expect("runs");
        assert!(serial.log.lines().all(|l| l.starts_with("BISECT: ")), "{}", serial.log);
        for threads in [2, 8] {
            let run = run_with_limit(&module, &pipeline, builder(threads), limit).expect("runs");
            assert_eq!((&run.output, &run.log, run.executions), (&serial.output, &serial.log, serial.executions));
        }
    }
}

#[test]
fn bisect_finds_the_planted_miscompile_exactly() {
    let (module, pipeline) = (module(), planted());
    let full = run_with_limit(&module, &pipeline, builder(1), u64::MAX).expect("runs");
    // FoldConstant runs on the 12 functions (executions 1-12), then Plant (13-24); @f7 is the
    // eighth function, so Plant on @f7 is execution 20. SimplifyExpr (opt level 0) is required:
    // it gets no number; EliminateCommonSubexpr follows (25-36).
    let f7 = module.iter().position(|(n, _)| n == "f7").expect("f7") as u64;
    let expected = 12 + f7 + 1;
    assert_eq!(full.executions, 36, "{}", full.log);
    assert!(!full.log.contains("SimplifyExpr"), "required passes are not numbered: {}", full.log);
    for threads in [1, 2, 8] {
        let found = first_failing(full.executions, |limit| {
            let run = run_with_limit(&module, &pipeline, builder(threads), limit)?;
            Ok(run.output?.contains("Planted"))
        });
        assert_eq!(found, Ok(Some(expected)), "{threads} threads");
    }
    assert_eq!(
        execution_line(&full.log, expected),
        Some(format!("BISECT: running pass ({expected}) Plant on @f7").as_str())
    );
    let before = run_with_limit(&module, &pipeline, builder(1), expected - 1).expect("runs");
    assert_eq!(
        execution_line(&before.log, expected),
        Some(format!("BISECT: NOT running pass ({expected}) Plant on @f7").as_str())
    );
}
