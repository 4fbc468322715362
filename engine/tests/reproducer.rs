//! Crash reproducers, engine side: `ReproducerInstrument` records the first failing pass call
//! (innermost, with its input) and `reproducer_pipeline` names the pipeline from it, required
//! dependencies and nested sequentials included.

use std::sync::Arc;

use passel_engine::ir::{parse_module, Module};
use passel_engine::register_pass;
use passel_engine::transform::{
    module_pass, reproducer_pipeline, Diagnostic, Pass, PassContext, PassError, PassFailure, ReproducerError,
    ReproducerInstrument, Sequential,
};

register_pass!("ReproOk", || Box::new(module_pass("ReproOk", 0, |m, _| Ok(m))));
register_pass!("ReproFail", || Box::new(module_pass("ReproFail", 0, |_, _| Err(PassError::msg("boom")))));
register_pass!("ReproNeedsFail", || {
    Box::new(module_pass("ReproNeedsFail", 0, |m, _| Ok(m)).with_required(&["ReproFail"]))
});
register_pass!("ReproNeedsOk", || Box::new(module_pass("ReproNeedsOk", 0, |m, _| Ok(m)).with_required(&["ReproOk"])));
register_pass!("ReproDiag", || {
    Box::new(module_pass("ReproDiag", 0, |m, ctx| {
        ctx.emit(Diagnostic::error("ReproDiag", "bad").in_function("f"));
        Ok(m)
    }))
});
register_pass!("ReproAddsFunction", || {
    Box::new(module_pass("ReproAddsFunction", 0, |mut m: Module, _| {
        let g = m.get("f").cloned().ok_or_else(|| PassError::msg("no @f"))?;
        m.insert("g", g).map_err(|e| PassError::msg(e.to_string()))?;
        Ok(m)
    }))
});

fn get(name: &str) -> Arc<dyn Pass> {
    passel_engine::transform::get_pass(name).expect("registered")
}

fn input() -> Module {
    parse_module("def @f(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] { relu(%x) }").expect("parses")
}

/// Runs `seq` under a reproducer instrument; the failure, the run's error and the context.
fn run(seq: &Sequential) -> (Option<PassFailure>, Option<PassError>, PassContext) {
    let inst = Arc::new(ReproducerInstrument::new());
    let ctx = PassContext::builder().opt_level(3).num_threads(2).instrument(inst.clone()).build().expect("context");
    let res = ctx.scope(|| seq.run(input(), &ctx)).expect("scope");
    (inst.failure(), res.err(), ctx)
}

fn pipeline(seq: &Sequential, local: bool) -> String {
    let (failure, _, ctx) = run(seq);
    reproducer_pipeline(seq, &ctx, &failure.expect("a failure"), local).expect("named")
}

#[test]
fn the_innermost_failing_call_is_recorded_with_its_input() {
    let inner = Sequential::new("Inner", vec![get("ReproOk"), get("ReproAddsFunction"), get("ReproFail")]);
    let seq = Sequential::new("Outer", vec![get("ReproOk"), inner.shared(), get("ReproOk")]);
    let (failure, error, _) = run(&seq);
    let failure = failure.expect("a failure");
    // Calls: Outer (1), ReproOk (2), Inner (3), ReproOk (4), ReproAddsFunction (5), ReproFail (6).
    assert_eq!((failure.call, failure.pass.as_str()), (6, "ReproFail"));
    let names: Vec<&str> = failure.input.iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["f", "g"], "the input of ReproFail is ReproAddsFunction's output");
    assert!(failure.diagnostic.is_none());
    assert_eq!(failure.message(error.as_ref()).as_deref(), Some("in pass ReproFail: boom"));
    assert_eq!(failure.function(error.as_ref()), None);
}

#[test]
fn a_pass_reporting_an_error_diagnostic_fails_first_even_when_a_later_pass_errs() {
    let seq = Sequential::new("P", vec![get("ReproOk"), get("ReproDiag"), get("ReproFail")]);
    let (failure, error, _) = run(&seq);
    let failure = failure.expect("a failure");
    assert_eq!(failure.pass, "ReproDiag");
    assert_eq!(failure.message(error.as_ref()).as_deref(), Some("ReproDiag @f: bad"));
    assert_eq!(failure.function(error.as_ref()).as_deref(), Some("f"));
}

#[test]
fn stop_at_failure_ends_the_run_at_the_first_error_diagnostic() {
    let seq = Sequential::new("P", vec![get("ReproDiag"), get("ReproAddsFunction")]);
    let inst = Arc::new(ReproducerInstrument::new().stop_at_failure());
    let ctx = PassContext::builder().instrument(inst.clone()).build().expect("context");
    let res = ctx.scope(|| seq.run(input(), &ctx)).expect("scope");
    assert!(matches!(res, Err(PassError::Instrument { .. })), "{res:?}");
    let failure = inst.failure().expect("a failure");
    assert_eq!(failure.message(res.as_ref().err()).as_deref(), Some("ReproDiag @f: bad"));
    // Without it the run goes on (ReproAddsFunction adds @g).
    let (failure, error, _) = run(&seq);
    assert_eq!((failure.map(|f| f.pass), error), (Some("ReproDiag".to_string()), None));
}

#[test]
fn nothing_is_recorded_when_no_pass_fails() {
    let seq = Sequential::new("P", vec![get("ReproOk"), get("ReproNeedsOk")]);
    assert!(run(&seq).0.is_none());
}

#[test]
fn pipelines_from_the_failing_call_name_dependencies_once() {
    let tail = Sequential::new("Tail", vec![get("ReproOk"), get("ReproNeedsOk")]).with_required(&["ReproOk"]);
    let seq = Sequential::new("P", vec![get("ReproNeedsOk"), get("ReproNeedsFail"), tail.shared(), get("ReproOk")]);
    // The failing call is ReproNeedsFail's dependency: it is named, then ReproNeedsFail (which
    // runs it again), then the nested sequential spelled out: its own dependency ReproOk, then its
    // passes (ReproNeedsOk's dependency is left to ReproNeedsOk).
    assert_eq!(pipeline(&seq, false), "ReproFail,ReproNeedsFail,ReproOk,ReproOk,ReproNeedsOk,ReproOk");
    assert_eq!(pipeline(&seq, true), "ReproFail");
}

#[test]
fn a_pass_outside_the_registry_cannot_be_named() {
    let unregistered = module_pass("NotRegistered", 0, |m, _| Ok(m)).shared();
    let seq = Sequential::new("P", vec![get("ReproFail"), unregistered]);
    let (failure, _, ctx) = run(&seq);
    let failure = failure.expect("a failure");
    assert_eq!(reproducer_pipeline(&seq, &ctx, &failure, true).as_deref(), Ok("ReproFail"));
    assert_eq!(
        reproducer_pipeline(&seq, &ctx, &failure, false),
        Err(ReproducerError::Unregistered("NotRegistered".into()))
    );
    let wrong = PassFailure { call: 1, ..failure };
    assert_eq!(
        reproducer_pipeline(&seq, &ctx, &wrong, true),
        Err(ReproducerError::NotInPlan { call: 1, pass: "ReproFail".into() })
    );
}
