//! `testing.verify_each`: the verifier runs after every pass and names the pass that broke the
//! IR — in a would-be fused stage of function passes, as a module pass, at 1 and 2 threads, and
//! in a session; off, nothing is verified.

use std::sync::Arc;

use passel_engine::ir::{parse_module, print_module, ExprKind, Function, Module, NodeId};
use passel_engine::transform::{list_configs, Pass, PassContext, PassError, Sequential, VERIFY_EACH};
use passel_engine::{function_pass, module_pass, sequential, Session};

const MODULE: &str = "\
def @a(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  add(%x, %x)
}

def @b(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  negative(%x)
}
";

fn module() -> Module {
    parse_module(MODULE).expect("test module parses")
}

/// `func` with a projection of a node that does not exist appended as its body: the arena is
/// malformed (`push_unchecked`), as a buggy pass might build it.
fn broken(func: &Function) -> Function {
    let mut b = func.to_builder();
    let bad = b.push_unchecked(ExprKind::Proj { tuple: NodeId(1000), index: 0 }, None);
    b.finish(func.params(), bad, func.ret_ty().cloned(), func.attrs().clone())
}

fn identity(name: &str) -> Arc<dyn Pass> {
    function_pass(name, 0, |func, _module, _ctx| Ok(func)).shared()
}

/// A function pass that breaks function `@b`.
fn break_b() -> Arc<dyn Pass> {
    function_pass("BreakB", 0, |func, module, _ctx| {
        let is_b = module.get("b").is_some_and(|b| Arc::ptr_eq(b, &func));
        Ok(if is_b { Arc::new(broken(&func)) } else { func })
    })
    .shared()
}

/// A module pass that breaks function `@b`.
fn break_b_module() -> Arc<dyn Pass> {
    module_pass("BreakBModule", 0, |mut module, _ctx| {
        let b = module.get("b").cloned().ok_or_else(|| PassError::msg("no @b"))?;
        module.insert("b", broken(&b)).map_err(|e| PassError::msg(e.to_string()))?;
        Ok(module)
    })
    .shared()
}

fn ctx(threads: usize, verify_each: bool) -> PassContext {
    PassContext::builder().num_threads(threads).config(VERIFY_EACH, verify_each).build().expect("valid context")
}

fn run(pipeline: &Sequential, ctx: &PassContext) -> Result<Module, PassError> {
    ctx.scope(|| pipeline.run(module(), ctx)).expect("scope")
}

fn assert_blames(err: PassError, pass: &str) {
    match &err {
        PassError::VerifyEach { pass: p, function, errors, .. } => {
            assert_eq!(p, pass);
            assert_eq!(function, "b");
            assert!(errors.first().is_some_and(|e| e.starts_with("@b %")), "{err}");
        }
        other => panic!("expected a verify-each error, got {other}"),
    }
    let text = err.to_string();
    assert!(text.starts_with(&format!("pass {pass} broke the IR of @b (testing.verify_each): @b %")), "{text}");
}

#[test]
fn verify_each_is_a_registered_bool_config() {
    let key = list_configs().into_iter().find(|k| k.key == VERIFY_EACH).expect("listed");
    assert_eq!(key.ty.name(), "bool");
}

#[test]
fn verify_each_names_the_function_pass_that_broke_the_ir_in_a_stage() {
    // Three function passes: a stage the executor would fuse without verify_each.
    let pipeline = sequential("p", vec![identity("Before"), break_b(), identity("After")]);
    for threads in [1, 2] {
        assert_blames(run(&pipeline, &ctx(threads, true)).expect_err("broken IR is caught"), "BreakB");
    }
}

#[test]
fn verify_each_names_the_module_pass_that_broke_the_ir() {
    let pipeline = sequential("p", vec![identity("Before"), break_b_module(), identity("After")]);
    for threads in [1, 2] {
        assert_blames(run(&pipeline, &ctx(threads, true)).expect_err("broken IR is caught"), "BreakBModule");
    }
    // A pass run on its own is checked too, nested sequentials as well.
    let c = ctx(1, true);
    let err = c.scope(|| break_b_module().run(module(), &c)).expect("scope").expect_err("caught");
    assert_blames(err, "BreakBModule");
    let nested = sequential("outer", vec![Arc::new(sequential("inner", vec![break_b()]))]);
    assert_blames(run(&nested, &c).expect_err("caught"), "BreakB");
}

#[test]
fn without_verify_each_the_broken_output_is_returned() {
    let pipeline = sequential("p", vec![identity("Before"), break_b(), identity("After")]);
    for threads in [1, 2] {
        let out = run(&pipeline, &ctx(threads, false)).expect("not verified");
        assert!(!out.get("b").expect("@b").is_well_formed());
        assert!(print_module(&out).contains("// @b is malformed"));
    }
}

#[test]
fn a_pass_is_not_blamed_for_ir_that_was_broken_when_it_got_it() {
    // After BreakB (unchecked here), Later gets a broken @b and returns it as it is.
    let pipeline = sequential("p", vec![break_b()]);
    let broken_input = run(&pipeline, &ctx(1, false)).expect("not verified");
    let later = sequential("q", vec![identity("Later"), break_b_module()]);
    for threads in [1, 2] {
        let c = ctx(threads, true);
        let out = c.scope(|| later.run(broken_input.clone(), &c)).expect("scope").expect("not blamed");
        assert!(!out.get("b").expect("@b").is_well_formed());
    }
}

#[test]
fn a_session_with_verify_each_names_the_pass_that_broke_the_ir() {
    let pipeline = sequential("p", vec![identity("Before"), break_b(), identity("After")]);
    for threads in [1, 2] {
        let mut s = Session::new(pipeline.clone(), &ctx(threads, true)).expect("session");
        s.load(&module());
        match s.run() {
            Err(passel_engine::SessionError::Pass(e)) => assert_blames(e, "BreakB"),
            Err(e) => panic!("expected a pass error, got {e}"),
            Ok(_) => panic!("broken IR was not caught"),
        }
        let mut s = Session::new(pipeline.clone(), &ctx(threads, false)).expect("session");
        s.load(&module());
        let out = s.run().expect("not verified");
        assert!(!out.module.get("b").expect("@b").is_well_formed());
    }
    // A module pass in a session runs through the instrumented call, which verifies.
    let modular = sequential("p", vec![identity("Before"), break_b_module()]);
    let mut s = Session::new(modular, &ctx(1, true)).expect("session");
    s.load(&module());
    match s.run() {
        Err(passel_engine::SessionError::Pass(e)) => assert_blames(e, "BreakBModule"),
        Err(e) => panic!("expected a pass error, got {e}"),
        Ok(_) => panic!("broken IR was not caught"),
    }
}
