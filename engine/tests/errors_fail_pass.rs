//! `PassContextBuilder::errors_fail_pass` (what the Python package sets, TVM's behaviour): a
//! pass that reports an error diagnostic fails with `PassError::ErrorReported` once its body
//! returns, and the passes after it do not run — as a fused stage of function passes, pass by
//! pass under an instrument, as a module pass, and in a session, at 1 and 2 threads, with the
//! same error and diagnostics. Off (the default), the run goes on.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use passel_engine::ir::{parse_module, Module};
use passel_engine::transform::{Diagnostic, Instrument, Pass, PassContext, PassError};
use passel_engine::{function_pass, module_pass, sequential, Session};

const MODULE: &str = "\
def @a(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  add(%x, %x)
}

def @b(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  negative(%x)
}

def @c(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  negative(%x)
}
";

fn module() -> Module {
    parse_module(MODULE).expect("test module parses")
}

/// A function pass that reports an error on every function but `@a`, and a warning on `@a`.
fn report() -> Arc<dyn Pass> {
    function_pass("Report", 0, |func, module, ctx| {
        let is_a = module.get("a").is_some_and(|a| Arc::ptr_eq(a, &func));
        ctx.emit(if is_a {
            Diagnostic::warning("Report", "looks odd")
        } else {
            Diagnostic::error("Report", "ill-typed")
        });
        Ok(func)
    })
    .shared()
}

fn counted(name: &str, calls: &Arc<AtomicUsize>) -> Arc<dyn Pass> {
    let calls = calls.clone();
    function_pass(name, 0, move |func, _module, _ctx| {
        calls.fetch_add(1, Ordering::Relaxed);
        Ok(func)
    })
    .shared()
}

struct Quiet;

impl Instrument for Quiet {
    fn name(&self) -> &str {
        "quiet"
    }
}

fn diagnostics(ctx: &PassContext) -> Vec<String> {
    ctx.diagnostics()
        .snapshot()
        .iter()
        .map(|d| format!("{:?} @{}: {}", d.severity, d.function.as_deref().unwrap_or("?"), d.message))
        .collect()
}

#[test]
fn a_reported_error_fails_its_pass_and_stops_the_run_fused_or_not_at_any_thread_count() {
    let mut seen = Vec::new();
    for threads in [1, 2] {
        for instrumented in [false, true] {
            let calls = Arc::new(AtomicUsize::new(0));
            let seq = sequential("seq", vec![counted("Before", &calls), report(), counted("After", &calls)]);
            let mut b = PassContext::builder().num_threads(threads).errors_fail_pass(true);
            if instrumented {
                b = b.instrument(Arc::new(Quiet));
            }
            let ctx = b.build().unwrap();
            let err = ctx.scope(|| seq.run(module(), &ctx)).unwrap().unwrap_err();
            match &err {
                PassError::ErrorReported { pass, diagnostic } => {
                    assert_eq!(pass, "Report");
                    assert_eq!(diagnostic.function.as_deref(), Some("b"));
                    assert_eq!(diagnostic.message, "ill-typed");
                }
                other => panic!("expected ErrorReported, got {other:?}"),
            }
            assert_eq!(err.to_string(), "in pass Report on function @b: ill-typed");
            if instrumented {
                // Pass by pass: `Before` ran on the three functions; `After` never ran. (Fused,
                // a function's task may go on to `After` before the merge sees the error, as
                // with any failing pass; its output is dropped and no hook can observe it.)
                assert_eq!(calls.load(Ordering::Relaxed), 3, "threads {threads}");
            }
            seen.push(diagnostics(&ctx));
        }
    }
    assert_eq!(seen[0], ["Warning @a: looks odd", "Error @b: ill-typed", "Error @c: ill-typed"]);
    assert!(seen.iter().all(|s| *s == seen[0]), "{seen:?}");
}

#[test]
fn without_the_setting_a_reported_error_is_only_a_diagnostic() {
    let calls = Arc::new(AtomicUsize::new(0));
    let seq = sequential("seq", vec![report(), counted("After", &calls)]);
    let ctx = PassContext::builder().build().unwrap();
    assert!(!ctx.errors_fail_pass());
    ctx.scope(|| seq.run(module(), &ctx)).unwrap().unwrap();
    assert_eq!(calls.load(Ordering::Relaxed), 3);
    assert!(ctx.diagnostics().has_errors());
}

#[test]
fn a_module_pass_that_reports_an_error_fails_and_a_warning_does_not() {
    let warn = module_pass("Warn", 0, |m, ctx| {
        ctx.emit(Diagnostic::warning("Warn", "just so you know"));
        Ok(m)
    });
    let fail = module_pass("Fail", 0, |m, ctx| {
        ctx.emit(Diagnostic::error("Fail", "broken").in_function("c"));
        Ok(m)
    });
    let ctx = PassContext::builder().errors_fail_pass(true).build().unwrap();
    ctx.scope(|| warn.run(module(), &ctx)).unwrap().unwrap();
    let err = ctx.scope(|| fail.run(module(), &ctx)).unwrap().unwrap_err();
    assert_eq!(err.to_string(), "in pass Fail on function @c: broken");
}

#[test]
fn a_session_fails_at_the_same_pass() {
    let calls = Arc::new(AtomicUsize::new(0));
    let seq = sequential("seq", vec![report(), counted("After", &calls)]);
    for threads in [1, 2] {
        let ctx = PassContext::builder().num_threads(threads).errors_fail_pass(true).build().unwrap();
        let mut session = Session::new(seq.clone(), &ctx).expect("session");
        session.load(&module());
        match session.run() {
            Err(passel_engine::SessionError::Pass(PassError::ErrorReported { pass, diagnostic })) => {
                assert_eq!((pass.as_str(), diagnostic.function.as_deref()), ("Report", Some("b")));
            }
            Err(e) => panic!("expected ErrorReported, got {e}"),
            Ok(_) => panic!("the reported error did not fail the run"),
        }
    }
}
