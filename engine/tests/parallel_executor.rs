//! The parallel executor: stage planning, fused stages, hooks in TVM's exact order around each
//! pass body whenever an instrument is attached, vetoes, pass bodies never run speculatively,
//! errors and panics (first in module order, pool still usable), diagnostics order, worker
//! copies, and `PassContext::map_functions`. Every parallel run is compared with the plain
//! pass-by-pass run on one thread.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use passel_engine::ir::{fn_attr, print_module, AttrValue, Attrs, DType, Function, FunctionBuilder, Module, Type};
use passel_engine::op;
use passel_engine::register_pass;
use passel_engine::transform::{
    chrome_trace_json, function_pass, module_pass, plan, run_plain, run_sequential, run_stage_on_function, sequential,
    trace_channel, Diagnostic, FunctionPass, Instrument, InstrumentError, Pass, PassContext, PassError, PassInfo,
    PassTimingInstrument, Sequential, Stage,
};

register_pass!("ExecTagNine", || Box::new(tag_pass("ExecTagNine", 9)));
register_pass!("ExecBarrier", || Box::new(module_pass("ExecBarrier", 0, |m, _| Ok(m))));

/// `fn(x: Tensor[4, f32]) { relu(x) }` with attributes.
fn relu_function(attrs: Attrs) -> Function {
    let mut b = FunctionBuilder::new();
    let ty = Type::tensor(vec![4], DType::F32);
    let x = b.var("x", Some(ty.clone()));
    let relu = op::lookup("relu").expect("relu is registered");
    let body = b.call(relu, &[x], Attrs::new());
    b.finish(&[x], body, Some(ty), attrs)
}

/// Functions f0..f{n-1}; every fifth one is marked `SkipOptimization`.
fn module_of(n: usize) -> Module {
    let mut m = Module::new();
    for i in 0..n {
        let attrs = Attrs::new().with("id", AttrValue::Int(i as i64));
        let attrs = if i % 5 == 4 { attrs.with(fn_attr::SKIP_OPTIMIZATION, AttrValue::Bool(true)) } else { attrs };
        m.add(&format!("f{i}"), relu_function(attrs)).expect("unique names");
    }
    m
}

/// A function pass appending digit `k` to the function's `trail` attribute, so the printed
/// module shows which passes ran on which function, in which order. It warns once per function.
fn tag_pass(name: &'static str, k: i64) -> FunctionPass {
    function_pass(name, 0, move |func, _module, ctx| {
        let prev = func.attrs().get("trail").and_then(AttrValue::as_int).unwrap_or(0);
        let attrs = func.attrs().clone().with("trail", AttrValue::Int(prev * 10 + k));
        ctx.emit(Diagnostic::warning(name, format!("tagged {k}")));
        Ok(Arc::new(func.with_attrs(attrs)))
    })
}

/// A function pass that fails (or panics) on the named functions (found by their `id`).
fn failing_pass(name: &'static str, victims: &'static [&'static str], panic: bool) -> FunctionPass {
    function_pass(name, 0, move |func, _module, _ctx| {
        let id = func.attrs().get("id").and_then(AttrValue::as_int).unwrap_or(-1);
        let me = format!("f{id}");
        if victims.contains(&me.as_str()) {
            if panic {
                panic!("boom in {me}");
            }
            return Err(PassError::msg(format!("cannot handle {me}")));
        }
        Ok(func)
    })
}

fn ctx(threads: usize, insts: Vec<Arc<dyn Instrument>>) -> PassContext {
    let mut b = PassContext::builder().num_threads(threads);
    for i in insts {
        b = b.instrument(i);
    }
    b.build().expect("valid context")
}

/// Runs `seq` under `ctx`: printed output (or error) and diagnostics.
fn outcome(seq: &Sequential, module: Module, ctx: &PassContext, plain: bool) -> (String, Vec<String>) {
    let res = ctx
        .scope(|| if plain { run_plain(seq, module, ctx) } else { run_sequential(seq, module, ctx) })
        .expect("context enters");
    let out = match res {
        Ok(m) => print_module(&m),
        Err(e) => format!("error: {e}"),
    };
    (out, ctx.diagnostics().take().iter().map(|d| format!("{d:?}")).collect())
}

type Log = Arc<Mutex<Vec<String>>>;

/// Records hooks (any attached instrument makes function stages run pass by pass).
struct Blind {
    log: Log,
    veto: Option<&'static str>,
}

impl Instrument for Blind {
    fn name(&self) -> &str {
        "Blind"
    }
    fn should_run(&self, _: &Module, info: &PassInfo) -> Result<bool, InstrumentError> {
        self.log.lock().unwrap().push(format!("should_run {}", info.name));
        Ok(self.veto != Some(info.name.as_str()))
    }
    fn run_before_pass(&self, _: &Module, info: &PassInfo) -> Result<(), InstrumentError> {
        self.log.lock().unwrap().push(format!("before {}", info.name));
        Ok(())
    }
    fn run_after_pass(&self, _: &Module, info: &PassInfo) -> Result<(), InstrumentError> {
        self.log.lock().unwrap().push(format!("after {}", info.name));
        Ok(())
    }
    fn on_pass_failed(&self, info: &PassInfo) {
        self.log.lock().unwrap().push(format!("failed {}", info.name));
    }
}

fn blind(veto: Option<&'static str>) -> (Log, Arc<dyn Instrument>) {
    let log: Log = Arc::new(Mutex::new(Vec::new()));
    (log.clone(), Arc::new(Blind { log, veto }))
}

fn stage_names(stages: &[Stage]) -> Vec<String> {
    stages
        .iter()
        .map(|s| match s {
            Stage::Function(ps) => {
                format!("F[{}]", ps.iter().map(|p| p.info().name.clone()).collect::<Vec<_>>().join(","))
            }
            Stage::Prelude(p) => format!("P[{}]", p.pass.info().name),
            Stage::Prim(_) => format!("T[{}]", s.label()),
            Stage::Module(p) => format!("M[{}]", p.info().name),
        })
        .collect()
}

#[test]
fn plan_groups_function_runs_between_barriers_with_required_and_disabled_passes() {
    let needs_tag = tag_pass("B", 2).with_required(&["ExecTagNine"]);
    let needs_barrier = tag_pass("D", 4).with_required(&["ExecBarrier"]);
    let nested = sequential("inner", vec![tag_pass("E", 5).shared()]);
    let seq = sequential(
        "outer",
        vec![
            tag_pass("A", 1).shared(),
            needs_tag.shared(),
            tag_pass("Off", 3).shared(),
            needs_barrier.shared(),
            nested.shared(),
            tag_pass("F", 6).shared(),
        ],
    );
    let ctx = PassContext::builder().disable("Off").build().expect("valid context");
    let stages = plan(&seq, &ctx).expect("plannable");
    assert_eq!(stage_names(&stages), ["F[A,ExecTagNine,B]", "M[ExecBarrier]", "F[D]", "M[inner]", "F[F]"],);
}

#[test]
fn plan_of_unknown_required_pass_is_an_error_and_running_reports_it_after_earlier_passes() {
    let seq =
        sequential("s", vec![tag_pass("A", 1).shared(), tag_pass("B", 2).with_required(&["NoSuchPass"]).shared()]);
    let ctx = ctx(2, vec![]);
    assert!(matches!(plan(&seq, &ctx), Err(PassError::UnknownPass { .. })));
    let (out, diags) = outcome(&seq, module_of(3), &ctx, false);
    assert!(out.starts_with("error: unknown pass `NoSuchPass`"), "{out}");
    // A ran before the error, as in the serial run.
    assert_eq!(diags.len(), 3);
}

fn pipeline() -> Sequential {
    sequential(
        "p",
        vec![
            tag_pass("A", 1).shared(),
            tag_pass("B", 2).shared(),
            module_pass("Barrier", 0, |m, _| Ok(m)).shared(),
            tag_pass("C", 3).shared(),
            tag_pass("D", 4).shared(),
            tag_pass("E", 5).shared(),
        ],
    )
}

#[test]
fn fused_stages_give_serial_output_diagnostics_and_hook_order_for_every_thread_count() {
    let (serial_log, inst) = blind(None);
    let serial = outcome(&pipeline(), module_of(23), &ctx(1, vec![inst]), true);
    assert!(serial.0.contains("trail=12345"), "{}", serial.0);
    for threads in [1, 2, 3, 8] {
        let (log, inst) = blind(None);
        let got = outcome(&pipeline(), module_of(23), &ctx(threads, vec![inst]), false);
        assert_eq!(got, serial, "threads {threads}");
        assert_eq!(*log.lock().unwrap(), serial_log.lock().unwrap().clone(), "threads {threads}");
    }
}

#[test]
fn veto_inside_a_fused_stage_skips_exactly_that_pass() {
    let (serial_log, inst) = blind(Some("D"));
    let serial = outcome(&pipeline(), module_of(12), &ctx(1, vec![inst]), true);
    assert!(serial.0.contains("trail=1235"), "{}", serial.0);
    for threads in [1, 2, 8] {
        let (log, inst) = blind(Some("D"));
        let got = outcome(&pipeline(), module_of(12), &ctx(threads, vec![inst]), false);
        assert_eq!(got, serial, "threads {threads}");
        assert_eq!(*log.lock().unwrap(), serial_log.lock().unwrap().clone(), "threads {threads}");
    }
}

#[test]
fn veto_of_the_first_and_last_pass_of_a_fused_stage_matches_serial() {
    for vetoed in ["C", "E"] {
        let (_, inst) = blind(Some(vetoed));
        let serial = outcome(&pipeline(), module_of(7), &ctx(1, vec![inst]), true);
        let (_, inst) = blind(Some(vetoed));
        assert_eq!(outcome(&pipeline(), module_of(7), &ctx(3, vec![inst]), false), serial, "veto {vetoed}");
    }
}

fn failing_pipeline(panic: bool) -> Sequential {
    sequential(
        "p",
        vec![
            tag_pass("A", 1).shared(),
            failing_pass("Late", &["f8"], panic).shared(),
            failing_pass("Early", &["f7", "f2"], panic).shared(),
            tag_pass("B", 2).shared(),
        ],
    )
}

#[test]
fn error_names_first_failing_pass_and_first_function_in_module_order() {
    let (serial_log, inst) = blind(None);
    let serial = outcome(&failing_pipeline(false), module_of(12), &ctx(1, vec![inst]), true);
    assert_eq!(serial.0, "error: in pass Late on function @f8: cannot handle f8");
    for threads in [1, 2, 3, 8] {
        let (log, inst) = blind(None);
        let got = outcome(&failing_pipeline(false), module_of(12), &ctx(threads, vec![inst]), false);
        assert_eq!(got, serial, "threads {threads}");
        assert_eq!(*log.lock().unwrap(), serial_log.lock().unwrap().clone(), "threads {threads}");
        assert!(log.lock().unwrap().contains(&"failed Late".to_string()));
    }
}

#[test]
fn panic_in_a_worker_is_reported_and_the_pool_stays_usable() {
    for threads in [2, 8] {
        let got = outcome(&failing_pipeline(true), module_of(12), &ctx(threads, vec![]), false);
        assert!(got.0.starts_with("error: in pass Late on function @f8"), "{}", got.0);
        assert!(got.0.contains("boom in f8"), "{}", got.0);
        // The same pool runs the next pipeline to completion.
        let next = outcome(&pipeline(), module_of(12), &ctx(threads, vec![]), false);
        let serial = outcome(&pipeline(), module_of(12), &ctx(1, vec![]), true);
        assert_eq!(next, serial);
    }
}

#[test]
fn error_in_the_first_pass_of_a_fused_stage_beats_errors_of_later_passes() {
    let seq = sequential(
        "p",
        vec![failing_pass("First", &["f8"], false).shared(), failing_pass("Second", &["f0"], false).shared()],
    );
    let serial = outcome(&seq, module_of(10), &ctx(1, vec![]), true);
    assert_eq!(serial.0, "error: in pass First on function @f8: cannot handle f8");
    assert_eq!(outcome(&seq, module_of(10), &ctx(2, vec![]), false), serial);
}

#[test]
fn current_inside_a_task_is_its_worker_copy() {
    let seq = sequential(
        "p",
        vec![
            function_pass("Cur", 0, |func, _, ctx| {
                let cur = PassContext::current();
                cur.emit(Diagnostic::warning("Cur", "via current"));
                assert_eq!(cur.diagnostics().snapshot().len(), ctx.diagnostics().snapshot().len());
                Ok(func)
            })
            .shared(),
            tag_pass("A", 1).shared(),
        ],
    );
    let serial = outcome(&seq, module_of(6), &ctx(1, vec![]), true);
    let got = outcome(&seq, module_of(6), &ctx(4, vec![]), false);
    assert_eq!(got, serial);
    assert_eq!(got.1.iter().filter(|d| d.contains("via current")).count(), 5);
}

#[test]
fn run_stage_on_function_runs_every_pass_and_reports_per_pass_diagnostics() {
    let module = module_of(2);
    let (name, func) = (&module.entries()[0].0, &module.entries()[0].1);
    let passes = [tag_pass("A", 1), tag_pass("B", 2)];
    let run = run_stage_on_function(&passes, name, func, &module, &PassContext::default());
    assert!(run.error.is_none());
    assert_eq!(run.func.attrs().get("trail").and_then(AttrValue::as_int), Some(12));
    assert_eq!(run.diagnostics.len(), 2);
    assert_eq!(run.diagnostics[1][0].function.as_deref(), Some("f0"));
}

#[test]
fn timing_reports_every_pass_with_cpu_time() {
    let timing = Arc::new(PassTimingInstrument::new());
    let ctx = ctx(2, vec![timing.clone()]);
    let report = ctx
        .scope(|| {
            pipeline().run(module_of(9), &ctx).expect("runs");
            timing.render().expect("renders")
        })
        .expect("context enters");
    for name in ["A", "B", "Barrier", "C", "D", "E"] {
        assert!(report.contains(&format!("\t{name}: ")), "{report}");
    }
}

#[test]
fn map_functions_merges_results_and_diagnostics_in_module_order_and_names_the_failing_function() {
    let module = module_of(17);
    for threads in [1, 2, 8] {
        let ctx = ctx(threads, vec![]);
        let names = ctx
            .map_functions("Mapper", &module, |worker, name, _func| {
                worker.emit(Diagnostic::warning("Mapper", "seen"));
                Ok(name.to_string())
            })
            .expect("no failure");
        assert_eq!(names, module.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>());
        let diags = ctx.diagnostics().take();
        let funcs: Vec<_> = diags.iter().map(|d| d.function.clone().unwrap_or_default()).collect();
        assert_eq!(funcs, names);
        let err = ctx
            .map_functions("Mapper", &module, |_, name, _| -> Result<(), PassError> {
                match name {
                    "f11" => panic!("bad {name}"),
                    "f13" => Err(PassError::msg("worse")),
                    _ => Ok(()),
                }
            })
            .expect_err("f11 panics");
        assert_eq!(err.to_string(), "in pass Mapper on function @f11: panicked: bad f11", "threads {threads}");
    }
}

#[test]
fn chrome_trace_is_json_with_one_track_per_worker_and_an_event_per_task() {
    let (tracer, rx) = trace_channel();
    let ctx = PassContext::builder().num_threads(3).trace(tracer).build().expect("valid context");
    let module = module_of(40);
    let seq = sequential("p", vec![tag_pass("A", 1).shared(), module_pass("M", 0, |m, _| Ok(m)).shared()]);
    ctx.scope(|| seq.run(module, &ctx)).expect("enters").expect("runs");
    let events: Vec<_> = rx.try_iter().collect();
    // 8 of the 40 functions are SkipOptimization: no task runs for them.
    assert_eq!(events.len(), 32);
    let json: serde_json::Value = serde_json::from_str(&chrome_trace_json(&events)).expect("valid JSON");
    let list = json["traceEvents"].as_array().expect("traceEvents array");
    let tasks: Vec<_> = list.iter().filter(|e| e["ph"] == "X").collect();
    assert_eq!(tasks.len(), 32);
    assert!(tasks.iter().all(|e| e["name"] == "A" && e["args"]["function"].is_string()));
    let mut task_tids: Vec<u64> = tasks.iter().map(|e| e["tid"].as_u64().expect("tid")).collect();
    task_tids.sort();
    task_tids.dedup();
    let mut named: Vec<u64> = list.iter().filter(|e| e["ph"] == "M").map(|e| e["tid"].as_u64().expect("tid")).collect();
    named.sort();
    assert_eq!(named, task_tids, "one named track per thread that ran tasks");
    assert!(task_tids.iter().all(|&t| (1..=3).contains(&t)), "tasks run on the 3 pool workers: {task_tids:?}");
}

/// `func` with digit `k` appended to its `trail` attribute.
fn append_trail(func: &Arc<Function>, k: i64) -> Arc<Function> {
    let prev = func.attrs().get("trail").and_then(AttrValue::as_int).unwrap_or(0);
    Arc::new(func.with_attrs(func.attrs().clone().with("trail", AttrValue::Int(prev * 10 + k))))
}

/// A function-local module pass: appends `k` to every function's trail (`SkipOptimization` ones
/// too) and warns once per function. Its module body counts its calls in `module_runs`, so a
/// test can tell whether the executor ran the body or the per-function form.
fn local_tag_pass(name: &'static str, k: i64, module_runs: Arc<AtomicUsize>) -> Arc<dyn Pass> {
    module_pass(name, 0, move |m, ctx| {
        module_runs.fetch_add(1, Ordering::SeqCst);
        let mut out = m.clone();
        let new = m
            .iter()
            .map(|(fname, f)| {
                ctx.emit(Diagnostic::warning(name, format!("tagged {k}")).in_function(fname));
                append_trail(f, k)
            })
            .collect();
        out.replace_all(new);
        Ok(out)
    })
    .with_function_form(move |func, _module, ctx| {
        ctx.emit(Diagnostic::warning(name, format!("tagged {k}")));
        Ok(append_trail(&func, k))
    })
    .shared()
}

/// A function pass that drops the declared result type of function `f1` (a signature change).
fn drop_result_type_of_f1() -> FunctionPass {
    function_pass("DropRet", 0, |func, _module, _ctx| {
        if func.attrs().get("id").and_then(AttrValue::as_int) != Some(1) {
            return Ok(func);
        }
        let mut b = FunctionBuilder::new();
        let x = b.var("x", Some(Type::tensor(vec![4], DType::F32)));
        let body = b.call(op::lookup("relu").expect("relu"), &[x], Attrs::new());
        Ok(Arc::new(b.finish(&[x], body, None, func.attrs().clone())))
    })
}

fn local_pipeline(first: FunctionPass, module_runs: &Arc<AtomicUsize>) -> Sequential {
    sequential(
        "p",
        vec![
            first.shared(),
            local_tag_pass("Local", 7, module_runs.clone()),
            tag_pass("B", 2).shared(),
            module_pass("Barrier", 0, |m, _| Ok(m)).shared(),
            local_tag_pass("Alone", 8, module_runs.clone()),
        ],
    )
}

#[test]
fn function_local_module_pass_joins_the_function_stage_and_matches_serial() {
    let runs = Arc::new(AtomicUsize::new(0));
    let names = stage_names(&plan(&local_pipeline(tag_pass("A", 1), &runs), &PassContext::default()).expect("plan"));
    assert_eq!(names, ["F[A,Local,B]", "M[Barrier]", "F[Alone]"]);

    let (serial_log, inst) = blind(None);
    let serial = outcome(&local_pipeline(tag_pass("A", 1), &runs), module_of(23), &ctx(1, vec![inst]), true);
    // Functions marked SkipOptimization get the module pass's tags but not the function passes'.
    assert!(serial.0.contains("trail=1728") && serial.0.contains("trail=78"), "{}", serial.0);
    assert_eq!(runs.swap(0, Ordering::SeqCst), 2);
    for threads in [1, 2, 3] {
        let (log, inst) = blind(None);
        let got = outcome(&local_pipeline(tag_pass("A", 1), &runs), module_of(23), &ctx(threads, vec![inst]), false);
        assert_eq!(got, serial, "threads {threads}");
        assert_eq!(*log.lock().unwrap(), serial_log.lock().unwrap().clone(), "threads {threads}");
        // Under an instrument every stage runs pass by pass: both module bodies ran.
        assert_eq!(runs.swap(0, Ordering::SeqCst), 2, "threads {threads}");
        // Without one the stage fuses: "Local" ran in its per-function form; "Alone", a stage
        // of one pass, ran its body.
        let got = outcome(&local_pipeline(tag_pass("A", 1), &runs), module_of(23), &ctx(threads, vec![]), false);
        assert_eq!(got, serial, "threads {threads}");
        assert_eq!(runs.swap(0, Ordering::SeqCst), 1, "threads {threads}");
    }
}

#[test]
fn signature_change_before_a_function_local_module_pass_falls_back_to_its_module_body() {
    let runs = Arc::new(AtomicUsize::new(0));
    let (serial_log, inst) = blind(None);
    let serial = outcome(&local_pipeline(drop_result_type_of_f1(), &runs), module_of(9), &ctx(1, vec![inst]), true);
    runs.store(0, Ordering::SeqCst);
    for threads in [1, 2] {
        let (log, inst) = blind(None);
        let got =
            outcome(&local_pipeline(drop_result_type_of_f1(), &runs), module_of(9), &ctx(threads, vec![inst]), false);
        assert_eq!(got, serial, "threads {threads}");
        assert_eq!(*log.lock().unwrap(), serial_log.lock().unwrap().clone(), "threads {threads}");
        assert_eq!(runs.swap(0, Ordering::SeqCst), 2, "both module bodies ran (threads {threads})");
    }
}

#[test]
fn function_local_module_pass_runs_its_body_when_a_signature_is_not_declared() {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut m = module_of(6);
    let mut b = FunctionBuilder::new();
    let x = b.var("x", Some(Type::tensor(vec![4], DType::F32)));
    let body = b.call(op::lookup("relu").expect("relu"), &[x], Attrs::new());
    m.add("undeclared", b.finish(&[x], body, None, Attrs::new())).expect("unique");
    let serial = outcome(&local_pipeline(tag_pass("A", 1), &runs), m.clone(), &ctx(1, vec![]), true);
    runs.store(0, Ordering::SeqCst);
    let got = outcome(&local_pipeline(tag_pass("A", 1), &runs), m, &ctx(2, vec![]), false);
    assert_eq!(got, serial);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// A split module pass: its prelude removes the functions whose `id` is in `pruned` (and warns
/// how many it removed; it panics when `pruned` holds -1), then appends `k` to every remaining
/// function's trail (`SkipOptimization` ones too) and warns once per function. Its module body
/// counts its calls in `module_runs`.
fn split_tag_pass(name: &'static str, k: i64, pruned: &'static [i64], module_runs: Arc<AtomicUsize>) -> Arc<dyn Pass> {
    fn prune(m: &Module, pruned: &[i64], name: &str, ctx: &PassContext) -> Module {
        assert!(!pruned.contains(&-1), "prelude panics");
        let mut out = Module::new();
        let mut removed = 0;
        for (fname, f) in m.iter() {
            if pruned.contains(&f.attrs().get("id").and_then(AttrValue::as_int).unwrap_or(-2)) {
                removed += 1;
            } else {
                out.add(fname, f.clone()).expect("unique names");
            }
        }
        ctx.emit(Diagnostic::warning(name, format!("pruned {removed}")));
        out
    }
    module_pass(name, 0, move |m, ctx| {
        module_runs.fetch_add(1, Ordering::SeqCst);
        let mut out = prune(&m, pruned, name, ctx);
        let new = out
            .iter()
            .map(|(fname, f)| {
                ctx.emit(Diagnostic::warning(name, format!("tagged {k}")).in_function(fname));
                append_trail(f, k)
            })
            .collect();
        out.replace_all(new);
        Ok(out)
    })
    .with_prelude_and_function_form(
        move |m, ctx| prune(m, pruned, name, ctx),
        move |func, _module, ctx| {
            ctx.emit(Diagnostic::warning(name, format!("tagged {k}")));
            Ok(append_trail(&func, k))
        },
    )
    .shared()
}

fn split_pipeline(pruned: &'static [i64], module_runs: &Arc<AtomicUsize>) -> Sequential {
    sequential(
        "p",
        vec![
            tag_pass("A", 1).shared(),
            split_tag_pass("Split", 7, pruned, module_runs.clone()),
            tag_pass("B", 2).shared(),
            tag_pass("C", 3).shared(),
            module_pass("Barrier", 0, |m, _| Ok(m)).shared(),
            split_tag_pass("Alone", 8, &[], module_runs.clone()),
        ],
    )
}

/// Runs `split_pipeline` plainly on one thread and planned on 1–3 threads, with a `Blind`
/// instrument vetoing `veto`: outputs, diagnostics and hook logs agree. Returns the serial
/// output and how many module bodies each planned run ran: with no instrument attached when
/// `veto` is `None` (so stages fuse), else under the vetoing instrument.
fn check_split_against_serial(pruned: &'static [i64], veto: Option<&'static str>) -> (String, Vec<usize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let (serial_log, inst) = blind(veto);
    let serial = outcome(&split_pipeline(pruned, &runs), module_of(23), &ctx(1, vec![inst]), true);
    runs.store(0, Ordering::SeqCst);
    let mut bodies = Vec::new();
    for threads in [1, 2, 3] {
        let (log, inst) = blind(veto);
        let got = outcome(&split_pipeline(pruned, &runs), module_of(23), &ctx(threads, vec![inst]), false);
        assert_eq!(got, serial, "threads {threads}, veto {veto:?}");
        let expected = serial_log.lock().unwrap().clone();
        assert_eq!(*log.lock().unwrap(), expected, "threads {threads}, veto {veto:?}");
        if veto.is_none() {
            runs.store(0, Ordering::SeqCst);
            let got = outcome(&split_pipeline(pruned, &runs), module_of(23), &ctx(threads, vec![]), false);
            assert_eq!(got, serial, "threads {threads}, no instrument");
        }
        bodies.push(runs.swap(0, Ordering::SeqCst));
    }
    (serial.0, bodies)
}

#[test]
fn split_module_pass_runs_its_prelude_as_a_barrier_and_fuses_its_function_part() {
    let runs = Arc::new(AtomicUsize::new(0));
    let names = stage_names(&plan(&split_pipeline(&[2, 3], &runs), &PassContext::default()).expect("plan"));
    assert_eq!(names, ["F[A]", "P[Split]", "F[Split,B,C]", "M[Barrier]", "P[Alone]", "F[Alone]"]);
    let (out, bodies) = check_split_against_serial(&[2, 3], None);
    assert!(!out.contains("id=2,") && !out.contains("id=3,") && out.contains("trail=17238"), "{out}");
    // Functions marked SkipOptimization get the split passes' tags but not the function passes'.
    assert!(out.contains("trail=78"), "{out}");
    // "Split" ran as prelude + per-function part; "Alone", a stage of one pass, ran its body.
    assert_eq!(bodies, [1, 1, 1]);
}

#[test]
fn veto_of_a_split_pass_drops_its_prelude_and_veto_after_it_keeps_it() {
    let (out, bodies) = check_split_against_serial(&[2, 3], Some("Split"));
    assert!(out.contains("id=2,") && out.contains("trail=1238"), "{out}");
    assert_eq!(bodies, [1, 1, 1]);
    let (out, _) = check_split_against_serial(&[2, 3], Some("B"));
    assert!(!out.contains("id=2,") && out.contains("trail=1738"), "{out}");
}

#[test]
fn split_pass_runs_its_module_body_when_the_stage_cannot_fuse_or_the_prelude_panics() {
    // A panicking prelude: the module body runs and reports the panic as the serial run does.
    let (out, bodies) = check_split_against_serial(&[-1], None);
    assert!(out.starts_with("error:") && out.contains("Split"), "{out}");
    assert_eq!(bodies, [1, 1, 1]);
    // An instrument that observes the IR: stages run pass by pass, so both split passes run
    // their module bodies and every hook sees the serial run's modules.
    struct Watcher;
    impl Instrument for Watcher {
        fn name(&self) -> &str {
            "Watcher"
        }
    }
    let runs = Arc::new(AtomicUsize::new(0));
    let serial = outcome(&split_pipeline(&[2], &runs), module_of(9), &ctx(1, vec![Arc::new(Watcher)]), true);
    runs.store(0, Ordering::SeqCst);
    let got = outcome(&split_pipeline(&[2], &runs), module_of(9), &ctx(2, vec![Arc::new(Watcher)]), false);
    assert_eq!(got, serial);
    assert_eq!(runs.load(Ordering::SeqCst), 2);
}

/// A function pass with a side effect: it counts its body calls per function.
fn counting_pass(name: &'static str, k: i64, calls: &Arc<AtomicUsize>) -> Arc<dyn Pass> {
    let calls = calls.clone();
    let tag = tag_pass(name, k);
    function_pass(name, 0, move |func, module, ctx| {
        calls.fetch_add(1, Ordering::SeqCst);
        (tag.body())(func, module, ctx)
    })
    .shared()
}

/// A pass body runs only after its `should_run` said yes, never for a vetoed pass, and never
/// twice (it once ran every body of a stage speculatively and, after a veto, the earlier passes
/// again without hooks). Python passes have side effects, so this is observable.
#[test]
fn fused_stage_runs_no_body_of_a_vetoed_pass_and_none_twice() {
    let n = 10;
    // Functions f4 and f9 are marked SkipOptimization: function passes leave them alone.
    let visited = n - 2;
    for veto in [None, Some("P1"), Some("P2"), Some("P3")] {
        for threads in [1, 2] {
            let calls: Vec<Arc<AtomicUsize>> = (0..3).map(|_| Arc::new(AtomicUsize::new(0))).collect();
            let seq = sequential(
                "p",
                vec![
                    counting_pass("P1", 1, &calls[0]),
                    counting_pass("P2", 2, &calls[1]),
                    counting_pass("P3", 3, &calls[2]),
                ],
            );
            let (log, inst) = blind(veto);
            let (out, _) = outcome(&seq, module_of(n), &ctx(threads, vec![inst]), false);
            let counts: Vec<usize> = calls.iter().map(|c| c.load(Ordering::SeqCst)).collect();
            let expected: Vec<usize> =
                ["P1", "P2", "P3"].iter().map(|p| if veto == Some(*p) { 0 } else { visited }).collect();
            assert_eq!(counts, expected, "veto {veto:?}, threads {threads}");
            let trail: String = ["P1", "P2", "P3"]
                .iter()
                .zip(["1", "2", "3"])
                .filter(|(p, _)| veto != Some(**p))
                .map(|(_, d)| d)
                .collect();
            assert!(out.contains(&format!("trail={trail}")), "veto {veto:?}: {out}");
            // TVM's order: each pass's should_run, then (unless vetoed) its before- and
            // after-hooks, before the next pass is asked.
            let expected_log: Vec<String> = ["P1", "P2", "P3"]
                .iter()
                .flat_map(|p| {
                    let hooks: &[&str] =
                        if veto == Some(*p) { &["should_run"] } else { &["should_run", "before", "after"] };
                    hooks.iter().map(move |h| format!("{h} {p}"))
                })
                .collect();
            assert_eq!(*log.lock().unwrap(), expected_log, "veto {veto:?}, threads {threads}");
        }
    }
}

/// A pass body that writes to the log its instrument writes to sees TVM's exact order whatever
/// the instrument: should_run, run_before_pass, the body (on every function), run_after_pass,
/// then the next pass. (Stages used to be fused under an instrument that declared it did not
/// observe the IR: every should_run of the stage first, then every body, then the other hooks.)
#[test]
fn under_any_instrument_pass_bodies_run_between_their_own_hooks_in_tvm_order() {
    fn logging_pass(name: &'static str, log: &Log) -> Arc<dyn Pass> {
        let log = log.clone();
        function_pass(name, 0, move |func, _module, _ctx| {
            log.lock().unwrap().push(format!("body {name}"));
            Ok(func)
        })
        .shared()
    }
    let functions = 6;
    // f4 is marked SkipOptimization: its body is not run.
    let visited = functions - 1;
    for threads in [1, 2, 3] {
        let (log, inst) = blind(None);
        let seq = sequential("p", vec![logging_pass("T1", &log), logging_pass("T2", &log), logging_pass("T3", &log)]);
        let (out, _) = outcome(&seq, module_of(functions), &ctx(threads, vec![inst]), false);
        assert!(!out.starts_with("error"), "{out}");
        let mut expected = Vec::new();
        for p in ["T1", "T2", "T3"] {
            expected.push(format!("should_run {p}"));
            expected.push(format!("before {p}"));
            expected.extend(std::iter::repeat_n(format!("body {p}"), visited));
            expected.push(format!("after {p}"));
        }
        assert_eq!(*log.lock().unwrap(), expected, "threads {threads}");
    }
}

/// Issue #20: a thread count above `MAX_THREADS` is a build error, not a pool that spawns
/// threads until the process aborts; the cap itself is accepted.
#[test]
fn num_threads_above_the_cap_is_an_error() {
    use passel_engine::transform::{ContextError, MAX_THREADS};
    let err = PassContext::builder().num_threads(1 << 20).build().expect_err("over the cap");
    assert_eq!(err, PassError::Context(ContextError::TooManyThreads { requested: 1 << 20, max: MAX_THREADS }));
    assert!(err.to_string().contains("1024"), "{err}");
    let ctx = PassContext::builder().num_threads(MAX_THREADS).build().expect("the cap is valid");
    assert_eq!(ctx.num_threads(), MAX_THREADS);
}

/// `tag_pass` built `on_calling_thread`, recording the thread of every call.
fn calling_thread_tag_pass(
    name: &'static str,
    k: i64,
    threads: Arc<Mutex<Vec<std::thread::ThreadId>>>,
) -> FunctionPass {
    let tag = tag_pass(name, k);
    function_pass(name, 0, move |func, module, ctx| {
        threads.lock().unwrap().push(std::thread::current().id());
        tag.body()(func, module, ctx)
    })
    .on_calling_thread()
}

#[test]
fn a_calling_thread_pass_is_a_stage_of_its_own_and_runs_only_on_the_calling_thread() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seq = sequential(
        "p",
        vec![
            tag_pass("A", 1).shared(),
            calling_thread_tag_pass("Py", 7, seen.clone()).shared(),
            calling_thread_tag_pass("Py2", 8, seen.clone()).shared(),
            tag_pass("B", 2).shared(),
            tag_pass("C", 3).shared(),
        ],
    );
    let stages = plan(&seq, &ctx(2, vec![])).expect("plannable");
    assert_eq!(stage_names(&stages), ["F[A]", "F[Py]", "F[Py2]", "F[B,C]"]);
    let (serial_out, serial_diags) = outcome(&seq, module_of(40), &ctx(1, vec![]), true);
    for threads in [1, 2, 4] {
        seen.lock().unwrap().clear();
        let (out, diags) = outcome(&seq, module_of(40), &ctx(threads, vec![]), false);
        assert_eq!(out, serial_out, "{threads} threads");
        assert_eq!(diags, serial_diags, "{threads} threads");
        let seen = seen.lock().unwrap();
        // 32 of the 40 functions are not marked SkipOptimization; two passes visit each.
        assert_eq!(seen.len(), 64);
        assert!(
            seen.iter().all(|&t| t == std::thread::current().id()),
            "{threads} threads: ran off the calling thread"
        );
    }
    // Run on its own, outside a Sequential, it stays on the calling thread too.
    seen.lock().unwrap().clear();
    let ctx2 = ctx(2, vec![]);
    let alone = calling_thread_tag_pass("Py", 7, seen.clone());
    ctx2.scope(|| alone.run(module_of(10), &ctx2)).expect("enters").expect("runs");
    assert!(seen.lock().unwrap().iter().all(|&t| t == std::thread::current().id()));
}
