//! PrimFunc passes run through the one pass infrastructure: fan-out over PrimFuncs with
//! worker contexts, instruments, SkipOptimization, results identical at any thread count.

use std::sync::{Arc, Mutex};

use passel_engine::ir::{parse_module, print_module, Module};
use passel_engine::tir::{PrimFunc, StmtKind};
use passel_engine::transform::{prim_func_pass, Instrument, InstrumentError, PassContext, PassInfo, PassKind};
use passel_engine::{sequential, Pass};

const SRC: &str = r#"
def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  call_tir(@a, %x)
}

prim @a(%A: Buffer[(4,), f32], %B: Buffer[(4,), f32]) {
  for %i in serial(0, 4) {
    %B[%i] = %A[%i];
  }
}

#[SkipOptimization]
prim @b(%A: Buffer[(4,), f32]) {
  for %i in serial(0, 4) {
    %A[%i] = 0.0;
  }
}

prim @c(%A: Buffer[(8,), f32]) {
  for %i in serial(0, 8) {
    %A[%i] = 1.0;
  }
}
"#;

/// Makes every serial loop parallel: a small real rewrite through the builder.
fn parallelize(func: Arc<PrimFunc>) -> Arc<PrimFunc> {
    let text = passel_engine::tir::print_prim_func("f", &func);
    if !text.contains("serial(") {
        return func;
    }
    // Rebuild by reparsing the edited text: the parser is a client of the builder, and this
    // keeps the test independent of any pass under development.
    let edited = text.replace("serial(", "parallel(");
    let m = parse_module(&edited).expect("edited text parses");
    m.get_prim("f").expect("f").clone()
}

#[test]
fn a_prim_func_pass_rewrites_prim_funcs_and_leaves_the_rest() {
    let m = parse_module(SRC).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen2 = seen.clone();
    let pass = prim_func_pass("Parallelize", 0, move |f, _m, _ctx| {
        seen2.lock().unwrap().push(f.params().len());
        Ok(parallelize(f))
    });
    assert_eq!(pass.kind(), PassKind::PrimFunc);
    let out = PassContext::builder().build().unwrap();
    let out = out.scope(|| pass.run(m.clone(), &PassContext::current())).unwrap().unwrap();
    let text = print_module(&out);
    assert!(text.contains("prim @a(") && text.contains("for %i in parallel(0, 4)"), "{text}");
    // @b is marked SkipOptimization: untouched and not visited.
    assert!(text.contains("#[SkipOptimization]\nprim @b(%A: Buffer[(4,), f32]) {\n  for %i in serial(0, 4)"), "{text}");
    assert!(text.contains("for %i in parallel(0, 8)"), "{text}");
    assert_eq!(seen.lock().unwrap().len(), 2);
    // The graph function is the same Arc.
    assert!(Arc::ptr_eq(out.get("main").unwrap(), m.get("main").unwrap()));
}

#[test]
fn prim_func_passes_give_the_same_module_at_any_thread_count() {
    let m = parse_module(SRC).unwrap();
    let run = |threads: usize| -> Module {
        let seq = sequential(
            "tir",
            vec![
                prim_func_pass("Parallelize", 0, |f, _, _| Ok(parallelize(f))).shared(),
                prim_func_pass("Identity", 0, |f, _, _| Ok(f)).shared(),
            ],
        );
        let ctx = PassContext::builder().num_threads(threads).build().unwrap();
        ctx.scope(|| seq.run(m.clone(), &ctx)).unwrap().unwrap()
    };
    let one = print_module(&run(1));
    assert_eq!(one, print_module(&run(2)));
    assert_eq!(one, print_module(&run(4)));
}

#[derive(Default)]
struct Names(Mutex<Vec<String>>);

impl Instrument for Names {
    fn name(&self) -> &str {
        "names"
    }
    fn run_before_pass(&self, _m: &Module, info: &PassInfo) -> Result<(), InstrumentError> {
        self.0.lock().unwrap().push(info.name.to_string());
        Ok(())
    }
}

#[test]
fn instruments_see_prim_func_passes() {
    let m = parse_module(SRC).unwrap();
    let names = Arc::new(Names::default());
    let ctx = PassContext::builder().instrument(names.clone()).build().unwrap();
    let pass = prim_func_pass("Parallelize", 0, |f, _, _| Ok(parallelize(f)));
    ctx.scope(|| pass.run(m, &ctx)).unwrap().unwrap();
    assert_eq!(*names.0.lock().unwrap(), ["Parallelize"]);
}

#[test]
fn a_panicking_prim_func_pass_is_an_error_naming_the_function() {
    let m = parse_module(SRC).unwrap();
    let pass = prim_func_pass("Boom", 0, |f, _, _| {
        if matches!(f.stmt(f.body()).kind, StmtKind::For { .. }) && f.bufs()[0].shape[0] == 8 {
            panic!("boom");
        }
        Ok(f)
    });
    let ctx = PassContext::builder().build().unwrap();
    let err = ctx.scope(|| pass.run(m, &ctx)).unwrap().unwrap_err().to_string();
    assert!(err.contains("Boom") && err.contains("@c"), "{err}");
}

#[test]
fn the_incremental_session_refuses_prim_funcs_instead_of_dropping_them() {
    let m = parse_module(SRC).unwrap();
    let ctx = PassContext::builder().build().unwrap();
    let mut session = passel_engine::Session::new(sequential("p", vec![]), &ctx).unwrap();
    session.load(&m);
    let err = session.run().map(|_| ()).unwrap_err().to_string();
    assert!(err.contains("PrimFuncs (@a, …)") && err.contains("does not carry"), "{err}");
}

#[test]
fn a_prim_func_pass_on_the_calling_thread_runs_every_body_there_at_any_thread_count() {
    let m = parse_module(SRC).unwrap();
    let threads = Arc::new(Mutex::new(Vec::new()));
    let seen = threads.clone();
    let pass = prim_func_pass("Parallelize", 0, move |f, _, _| {
        seen.lock().unwrap().push(std::thread::current().id());
        Ok(parallelize(f))
    })
    .on_calling_thread();
    assert!(pass.runs_on_calling_thread());
    let ctx = PassContext::builder().num_threads(2).build().unwrap();
    let out = ctx.scope(|| pass.run(m.clone(), &ctx)).unwrap().unwrap();
    let here = std::thread::current().id();
    assert_eq!(*threads.lock().unwrap(), vec![here, here]);
    // The same output as the fanned-out pass.
    let fanned = prim_func_pass("Parallelize", 0, |f, _, _| Ok(parallelize(f)));
    let expected = ctx.scope(|| fanned.run(m.clone(), &ctx)).unwrap().unwrap();
    assert_eq!(print_module(&out), print_module(&expected));
}
