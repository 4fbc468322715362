//! PrimFunc passes run through the one pass infrastructure: fan-out over PrimFuncs with
//! worker contexts, instruments, SkipOptimization, results identical at any thread count.

use std::sync::{Arc, Mutex};

use passel_engine::ir::{parse_module, print_module, Module};
use passel_engine::tir::{PrimFunc, StmtKind};
use passel_engine::transform::{
    function_pass, plan, prim_func_pass, Diagnostic, Instrument, InstrumentError, PassContext, PassError, PassInfo,
    PassKind, Stage,
};
use passel_engine::{sequential, MemoryMode, Pass, Session};

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

/// A PrimFunc pass that records (pass, PrimFunc) for every body call into `log`.
fn logged(name: &'static str, log: &Arc<Mutex<Vec<String>>>, rewrite: bool) -> passel_engine::transform::PrimFuncPass {
    let log = log.clone();
    prim_func_pass(name, 0, move |f, _, _| {
        let text = passel_engine::tir::print_prim_func("f", &f);
        let size = if text.contains("(8,)") { "8" } else { "4" };
        log.lock().unwrap().push(format!("{name}:{size}"));
        Ok(if rewrite { parallelize(f) } else { f })
    })
}

#[test]
fn consecutive_prim_func_passes_plan_as_one_stage_and_run_fused_like_pass_by_pass() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let graph = function_pass("Graph", 0, |f, _, _| Ok(f));
    let seq = sequential(
        "p",
        vec![
            logged("P1", &log, true).shared(),
            logged("P2", &log, false).shared(),
            graph.shared(),
            logged("P3", &log, false).shared(),
            logged("P4", &log, false).on_calling_thread().shared(),
        ],
    );
    let ctx = PassContext::builder().num_threads(1).build().unwrap();
    let stages = plan(&seq, &ctx).unwrap();
    let shape: Vec<String> = stages
        .iter()
        .map(|s| match s {
            Stage::Prim(_) => format!("prim[{}]", s.label()),
            Stage::Function(_) => format!("fn[{}]", s.label()),
            other => format!("other[{}]", other.label()),
        })
        .collect();
    assert_eq!(shape, ["prim[P1,P2]", "fn[Graph]", "prim[P3]", "prim[P4]"]);
    // Fused: one task per PrimFunc runs both passes of the stage (@b is SkipOptimization).
    let m = parse_module(SRC).unwrap();
    let fused = ctx.scope(|| seq.run(m.clone(), &ctx)).unwrap().unwrap();
    assert_eq!(log.lock().unwrap()[..4], ["P1:4", "P2:4", "P1:8", "P2:8"]);
    // With an instrument attached the stage runs pass by pass; the module is the same.
    log.lock().unwrap().clear();
    let names = Arc::new(Names::default());
    let watched = PassContext::builder().num_threads(1).instrument(names).build().unwrap();
    let unfused = watched.scope(|| seq.run(m, &watched)).unwrap().unwrap();
    assert_eq!(log.lock().unwrap()[..4], ["P1:4", "P1:8", "P2:4", "P2:8"]);
    assert_eq!(print_module(&fused), print_module(&unfused));
    assert!(print_module(&fused).contains("parallel(0, 8)"));
}

#[test]
fn a_fused_prim_func_stage_reports_the_first_failing_pass_and_its_diagnostics_pass_by_pass() {
    let seq = sequential(
        "p",
        vec![
            prim_func_pass("Warn", 0, |f, _, ctx| {
                ctx.emit(Diagnostic::warning("Warn", format!("{} params", f.params().len())));
                Ok(f)
            })
            .shared(),
            prim_func_pass("Fail", 0, |f, _, _| {
                if f.params().len() == 1 {
                    return Err(PassError::msg("one param"));
                }
                Ok(f)
            })
            .shared(),
        ],
    );
    let m = parse_module(SRC).unwrap();
    let run = |threads: usize, instrumented: bool| {
        let mut b = PassContext::builder().num_threads(threads);
        if instrumented {
            b = b.instrument(Arc::new(Names::default()));
        }
        let ctx = b.build().unwrap();
        let err = ctx.scope(|| seq.run(m.clone(), &ctx)).unwrap().unwrap_err().to_string();
        let diags: Vec<String> =
            ctx.diagnostics().take().iter().map(|d| format!("{:?}:{}", d.function, d.message)).collect();
        (err, diags)
    };
    let (err, diags) = run(2, false);
    assert!(err.contains("Fail") && err.contains("@c"), "{err}");
    assert_eq!(diags.len(), 2, "{diags:?}");
    assert_eq!((err.clone(), diags.clone()), run(1, true));
}

#[test]
fn a_session_carries_prim_funcs_and_reruns_only_the_prim_funcs_that_changed() {
    for mode in [MemoryMode::Full, MemoryMode::Lean] {
        let pipeline = |log: &Arc<Mutex<Vec<String>>>| {
            sequential("p", vec![logged("P1", log, true).shared(), logged("P2", log, false).shared()])
        };
        let log = Arc::new(Mutex::new(Vec::new()));
        let seq = pipeline(&log);
        let ctx = PassContext::builder().num_threads(2).build().unwrap();
        // A cold serial run of the same passes (logging elsewhere).
        let cold_seq = pipeline(&Arc::new(Mutex::new(Vec::new())));
        let cold = |m: &Module| {
            let ctx = PassContext::builder().num_threads(1).build().unwrap();
            print_module(&ctx.scope(|| cold_seq.run(m.clone(), &ctx)).unwrap().unwrap())
        };
        let mut session = Session::new(seq.clone(), &ctx).unwrap();
        session.set_memory_mode(mode);
        let m = parse_module(SRC).unwrap();
        session.load(&m);
        let out = session.run().unwrap();
        assert_eq!(print_module(&out.module), cold(&m), "{mode:?}");
        let stage = &out.stats.stages[0];
        assert_eq!((stage.label.as_str(), stage.recomputed.len(), stage.reused), ("P1,P2", 3, 0), "{mode:?}");
        log.lock().unwrap().clear();
        // Edit @c only: the stage runs on @c alone.
        let edited = parse_module(&SRC.replace("%A[%i] = 1.0;", "%A[%i] = 2.0;")).unwrap();
        let changed = session.load(&edited);
        assert_eq!(changed, [Arc::<str>::from("c")]);
        let out = session.run().unwrap();
        assert_eq!(print_module(&out.module), cold(&edited), "{mode:?}");
        assert!(print_module(&out.module).contains("2.0"));
        let stage = &out.stats.stages[0];
        let recomputed: Vec<&str> = stage.recomputed.iter().map(|n| &**n).collect();
        assert_eq!((recomputed, stage.reused), (vec!["c"], 2), "{mode:?}");
        assert_eq!(*log.lock().unwrap(), ["P1:8", "P2:8"], "{mode:?}");
        // Graph edits (a body, then a new function) leave every PrimFunc alone. (The body edit
        // keeps its length: a PrimFunc that moves in its file counts as changed, `same_prims`.)
        log.lock().unwrap().clear();
        let body = SRC.replace("%A[%i] = 1.0;", "%A[%i] = 2.0;").replace("call_tir(@a, %x)", "relu(relu(%x))  ");
        let graph_edit = parse_module(&body).unwrap();
        session.load(&graph_edit);
        let out = session.run().unwrap();
        assert_eq!(print_module(&out.module), cold(&graph_edit), "{mode:?}");
        let added = parse_module(&format!(
            "{body}\ndef @g(%y: Tensor[(4,), f32]) -> Tensor[(4,), f32] {{\n  negative(%y)\n}}\n"
        ))
        .unwrap();
        session.load(&added);
        let out = session.run().unwrap();
        assert_eq!(print_module(&out.module), cold(&added), "{mode:?}");
        assert!(out.stats.stages[0].recomputed.is_empty(), "{mode:?}");
        assert!(log.lock().unwrap().is_empty(), "{mode:?}");
    }
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
