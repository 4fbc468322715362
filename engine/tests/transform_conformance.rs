//! Conformance suite for the pass infrastructure: one or more tests per numbered rule of
//! `docs/pass-semantics.md` (the rule is named in each section header), including
//! every failure example with the exact instrument callback sequence.

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use passel_engine::ir::{fn_attr, AttrValue, Attrs, DType, Function, FunctionBuilder, Module, Type};
use passel_engine::op;
use passel_engine::transform::{
    function_pass, get_pass, list_configs, list_passes, module_pass, parse_config_assignment, parse_pipeline,
    print_pipeline, sequential, ConfigError, ConfigType, ConfigValue, Diagnostic, DumpIrInstrument, Hook, Instrument,
    InstrumentError, Pass, PassContext, PassError, PassInfo, PassKind, PassTimingInstrument, PrintIr,
    PrintIrInstrument, RunsAs, Sequential, Sink,
};
use passel_engine::{register_config, register_pass};

// ---------------------------------------------------------------------------------------------
// Fixtures

register_config!("testing.int_key", ConfigType::Int, "an int for tests");
register_config!("testing.float_key", ConfigType::Float, "a float for tests");
register_config!("testing.str_key", ConfigType::Str, "a string for tests");
register_config!("testing.bool_key", ConfigType::Bool, "a bool for tests");
register_config!("testing.size_key", ConfigType::Int, "a size for tests", min = 0);
register_config!("testing.dup_key", ConfigType::Int, "registered twice on purpose");
register_config!("testing.dup_key", ConfigType::Bool, "registered twice on purpose");

register_pass!("TestNoop", || Box::new(module_pass("TestNoop", 0, |m, _| Ok(m))));
register_pass!("TestDep", || Box::new(module_pass("TestDep", 0, |m, _| Ok(m))));
register_pass!("TestHighDep", || Box::new(module_pass("TestHighDep", 4, |m, _| Ok(m))));
register_pass!("TestNeedsDep", || Box::new(module_pass("TestNeedsDep", 0, |m, _| Ok(m)).with_required(&["TestDep"])));
register_pass!("TestNeedsHighDep", || {
    Box::new(module_pass("TestNeedsHighDep", 0, |m, _| Ok(m)).with_required(&["TestHighDep"]))
});
register_pass!("TestNeedsMissing", || {
    Box::new(module_pass("TestNeedsMissing", 0, |m, _| Ok(m)).with_required(&["TestNop"]))
});
register_pass!("TestRelu", || Box::new(function_pass("TestRelu", 1, |f, _, _| Ok(f))));
register_pass!("TestDupPass", || Box::new(module_pass("TestDupPass", 0, |m, _| Ok(m))));
register_pass!("TestDupPass", || Box::new(module_pass("TestDupPass", 0, |m, _| Ok(m))));

type Log = Arc<Mutex<Vec<String>>>;

fn new_log() -> Log {
    Arc::new(Mutex::new(Vec::new()))
}

fn events(log: &Log) -> Vec<String> {
    log.lock().unwrap().clone()
}

fn push(log: &Log, ev: impl Into<String>) {
    log.lock().unwrap().push(ev.into());
}

#[derive(Clone, Copy, PartialEq)]
enum Fail {
    Never,
    Err(Hook),
    Panic(Hook),
}

/// Records every callback as "<name> <hook> [<pass>]"; fails (or panics) in one chosen hook.
struct Rec {
    name: &'static str,
    log: Log,
    fail: Fail,
    should_run: bool,
}

fn rec(name: &'static str, log: &Log) -> Arc<Rec> {
    Arc::new(Rec { name, log: log.clone(), fail: Fail::Never, should_run: true })
}

fn rec_failing(name: &'static str, log: &Log, fail: Fail) -> Arc<Rec> {
    Arc::new(Rec { name, log: log.clone(), fail, should_run: true })
}

fn rec_vetoing(name: &'static str, log: &Log) -> Arc<Rec> {
    Arc::new(Rec { name, log: log.clone(), fail: Fail::Never, should_run: false })
}

impl Rec {
    fn hook(&self, hook: Hook, ev: String) -> Result<(), InstrumentError> {
        push(&self.log, ev);
        match self.fail {
            Fail::Err(h) if h == hook => Err(InstrumentError::new(format!("{} broken", self.name))),
            Fail::Panic(h) if h == hook => panic!("{} exploded", self.name),
            _ => Ok(()),
        }
    }
}

impl Instrument for Rec {
    fn name(&self) -> &str {
        self.name
    }
    fn enter_pass_ctx(&self) -> Result<(), InstrumentError> {
        self.hook(Hook::Enter, format!("{} enter", self.name))
    }
    fn exit_pass_ctx(&self) -> Result<(), InstrumentError> {
        self.hook(Hook::Exit, format!("{} exit", self.name))
    }
    fn should_run(&self, _: &Module, info: &PassInfo) -> Result<bool, InstrumentError> {
        self.hook(Hook::ShouldRun, format!("{} should_run {}", self.name, info.name))?;
        Ok(self.should_run)
    }
    fn run_before_pass(&self, _: &Module, info: &PassInfo) -> Result<(), InstrumentError> {
        self.hook(Hook::BeforePass, format!("{} before {}", self.name, info.name))
    }
    fn run_after_pass(&self, _: &Module, info: &PassInfo) -> Result<(), InstrumentError> {
        self.hook(Hook::AfterPass, format!("{} after {}", self.name, info.name))
    }
}

/// Vetoes exactly one pass name.
struct Veto(&'static str);

impl Instrument for Veto {
    fn name(&self) -> &str {
        "Veto"
    }
    fn should_run(&self, _: &Module, info: &PassInfo) -> Result<bool, InstrumentError> {
        Ok(info.name != self.0)
    }
}

/// `fn(x: Tensor[4, f32]) { relu(x) }`, optionally marked `SkipOptimization`.
fn relu_function(skip: bool) -> Function {
    let mut b = FunctionBuilder::new();
    let ty = Type::tensor(vec![4], DType::F32);
    let x = b.var("x", Some(ty.clone()));
    let relu = op::lookup("relu").expect("relu is registered");
    let body = b.call(relu, &[x], Attrs::new());
    let attrs = if skip { Attrs::new().with(fn_attr::SKIP_OPTIMIZATION, AttrValue::Bool(true)) } else { Attrs::new() };
    b.finish(&[x], body, Some(ty), attrs)
}

fn module_of(names: &[&str]) -> Module {
    let mut m = Module::new();
    for n in names {
        m.add(n, relu_function(false)).unwrap();
    }
    m
}

fn tiny_module() -> Module {
    module_of(&["main", "helper"])
}

/// A module pass that logs "pass <name>" and returns its input.
fn logging_pass(name: &'static str, opt_level: u32, log: &Log) -> Arc<dyn Pass> {
    let log = log.clone();
    module_pass(name, opt_level, move |m, _| {
        push(&log, format!("pass {name}"));
        Ok(m)
    })
    .shared()
}

fn ctx_with(insts: Vec<Arc<dyn Instrument>>) -> PassContext {
    let mut b = PassContext::builder();
    for i in insts {
        b = b.instrument(i);
    }
    b.build().unwrap()
}

fn vec_sink() -> (Arc<Mutex<Vec<u8>>>, Sink) {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink: Sink = buf.clone();
    (buf, sink)
}

fn sink_text(buf: &Arc<Mutex<Vec<u8>>>) -> String {
    String::from_utf8(buf.lock().unwrap().clone()).unwrap()
}

// ---------------------------------------------------------------------------------------------
// Rule 1: fields and defaults

#[test]
fn context_defaults_to_opt_level_2_and_empty_lists() {
    let ctx = PassContext::builder().build().unwrap();
    assert_eq!(ctx.opt_level(), 2);
    assert!(ctx.required_pass().is_empty() && ctx.disabled_pass().is_empty());
    assert!(ctx.config().is_empty() && ctx.instruments().is_empty());
    assert!(ctx.diagnostics().snapshot().is_empty());
    assert!(ctx.num_threads() >= 1);
    assert_eq!(PassContext::current().opt_level(), 2);
}

#[test]
fn context_builder_sets_every_field() {
    let log = new_log();
    let ctx = PassContext::builder()
        .opt_level(3)
        .require("A")
        .disable("B")
        .config("testing.int_key", 5)
        .instrument(rec("I", &log))
        .num_threads(1)
        .build()
        .unwrap();
    assert_eq!(ctx.opt_level(), 3);
    assert_eq!(ctx.required_pass(), ["A".to_string()]);
    assert_eq!(ctx.disabled_pass(), ["B".to_string()]);
    assert_eq!(ctx.get_config("testing.int_key", 0i64), 5);
    assert_eq!(ctx.instruments().len(), 1);
    assert_eq!(ctx.num_threads(), 1);
}

#[test]
fn diagnostics_carry_pass_function_and_location() {
    let ctx = PassContext::builder().build().unwrap();
    ctx.emit(Diagnostic::warning("P", "odd").in_function("main").at_node(passel_engine::ir::NodeId(3)));
    let d = ctx.diagnostics().snapshot();
    assert_eq!(d[0].pass, "P");
    assert_eq!(d[0].function.as_deref(), Some("main"));
    assert_eq!(d[0].node, Some(passel_engine::ir::NodeId(3)));
    assert!(!ctx.diagnostics().has_errors());
}

// ---------------------------------------------------------------------------------------------
// Rule 2: per-thread stacks and defaults

#[test]
fn current_is_innermost_entered_context() {
    let outer = PassContext::builder().opt_level(1).build().unwrap();
    let inner = PassContext::builder().opt_level(3).build().unwrap();
    outer
        .scope(|| {
            assert_eq!(PassContext::current().opt_level(), 1);
            inner.scope(|| assert_eq!(PassContext::current().opt_level(), 3)).unwrap();
            assert_eq!(PassContext::current().opt_level(), 1);
        })
        .unwrap();
    assert_eq!(PassContext::current().opt_level(), 2);
}

#[test]
fn spawned_thread_sees_its_default_while_another_thread_is_in_scope() {
    let ctx = PassContext::builder().opt_level(3).disable("X").build().unwrap();
    let _guard = ctx.enter().unwrap();
    assert_eq!(PassContext::current().opt_level(), 3);
    let seen = std::thread::spawn(|| {
        let cur = PassContext::current();
        (cur.opt_level(), cur.disabled_pass().to_vec())
    })
    .join()
    .unwrap();
    assert_eq!(seen, (2, Vec::<String>::new()));
}

// ---------------------------------------------------------------------------------------------
// Rules 3, 4, 5: entering, exiting, re-entering

#[test]
fn enter_runs_enter_callbacks_in_order_and_exit_pops_then_runs_exits() {
    let log = new_log();
    let ctx = ctx_with(vec![rec("A", &log), rec("B", &log)]);
    let guard = ctx.enter().unwrap();
    assert_eq!(events(&log), ["A enter", "B enter"]);
    assert_eq!(PassContext::current().instruments().len(), 2);
    guard.exit().unwrap();
    assert_eq!(events(&log), ["A enter", "B enter", "A exit", "B exit"]);
    assert!(PassContext::current().instruments().is_empty());
}

#[test]
fn dropping_the_guard_exits_the_context() {
    let log = new_log();
    let ctx = ctx_with(vec![rec("A", &log)]);
    {
        let _guard = ctx.enter().unwrap();
    }
    assert_eq!(events(&log), ["A enter", "A exit"]);
    assert_eq!(PassContext::current().instruments().len(), 0);
}

#[test]
fn exiting_a_context_that_is_not_innermost_is_an_error() {
    let a = PassContext::builder().opt_level(1).build().unwrap();
    let b = PassContext::builder().opt_level(3).build().unwrap();
    let ga = a.enter().unwrap();
    let gb = b.enter().unwrap();
    let err = a.exit().unwrap_err();
    assert_eq!(err.to_string(), "exiting a pass context that is not the innermost entered context of this thread");
    // The stack is unchanged by the failed exit.
    assert_eq!(PassContext::current().opt_level(), 3);
    gb.exit().unwrap();
    ga.exit().unwrap();
    assert_eq!(PassContext::current().opt_level(), 2);
    // Exiting a context that is not entered at all is the same error.
    assert!(matches!(a.exit(), Err(PassError::Context(_))));
}

#[test]
fn guard_exited_out_of_order_reports_and_still_leaves_the_stack_sound() {
    let log = new_log();
    let a = PassContext::builder().opt_level(1).instrument(rec("A", &log)).build().unwrap();
    let b = PassContext::builder().opt_level(3).instrument(rec("B", &log)).build().unwrap();
    let ga = a.enter().unwrap();
    let gb = b.enter().unwrap();
    assert!(matches!(ga.exit(), Err(PassError::Context(_))));
    assert_eq!(PassContext::current().opt_level(), 3);
    gb.exit().unwrap();
    assert_eq!(PassContext::current().opt_level(), 2);
    assert_eq!(events(&log), ["A enter", "B enter", "A exit", "B exit"]);
}

#[test]
fn reentering_an_entered_context_runs_callbacks_once_per_entry() {
    let log = new_log();
    let ctx = ctx_with(vec![rec("A", &log)]);
    ctx.scope(|| ctx.scope(|| assert!(PassContext::current().instruments().len() == 1)).unwrap()).unwrap();
    assert_eq!(events(&log), ["A enter", "A enter", "A exit", "A exit"]);
}

// ---------------------------------------------------------------------------------------------
// Rule 6: only the innermost context's instruments fire

#[test]
fn only_innermost_context_instruments_fire() {
    let log = new_log();
    let outer = ctx_with(vec![rec("A", &log)]);
    let inner = ctx_with(vec![rec("B", &log)]);
    let pass = logging_pass("P", 0, &log);
    outer
        .scope(|| {
            inner.scope(|| pass.run(tiny_module(), &PassContext::current()).unwrap()).unwrap();
        })
        .unwrap();
    assert_eq!(
        events(&log),
        ["A enter", "B enter", "B should_run P", "B before P", "pass P", "B after P", "B exit", "A exit"]
    );
}

// ---------------------------------------------------------------------------------------------
// Rules 7–10: config registry and validation

#[test]
fn config_key_registered_twice_is_an_error() {
    let err = PassContext::builder().config("testing.dup_key", 1).build().unwrap_err();
    assert_eq!(err.to_string(), "config key `testing.dup_key` is registered more than once");
}

#[test]
fn unknown_config_key_lists_sorted_valid_keys_and_suggests_closest() {
    let err = PassContext::builder().config("testing.imutable_module", true).build().unwrap_err();
    let valid: Vec<&str> = list_configs().iter().map(|k| k.key).collect();
    let mut sorted = valid.clone();
    sorted.sort();
    assert_eq!(valid, sorted);
    assert_eq!(
        err.to_string(),
        format!(
            "unknown config key `testing.imutable_module` (did you mean `testing.immutable_module`?); valid keys: {}",
            valid.join(", ")
        )
    );
}

#[test]
fn config_entry_without_value_is_an_error() {
    let err = PassContext::builder().config_entry("testing.int_key", None).build().unwrap_err();
    assert_eq!(err.to_string(), "config key `testing.int_key` has no value");
    assert!(matches!(parse_config_assignment("testing.int_key="), Err(ConfigError::MissingValue { .. })));
}

#[test]
fn wrong_config_type_names_key_expected_and_actual() {
    let err = PassContext::builder().config("testing.int_key", 1.5).build().unwrap_err();
    assert_eq!(err.to_string(), "config key `testing.int_key` expects int, got float");
    let err = PassContext::builder().config("testing.bool_key", "yes").build().unwrap_err();
    assert_eq!(err.to_string(), "config key `testing.bool_key` expects bool, got string");
    let err = PassContext::builder().config("testing.str_key", 3).build().unwrap_err();
    assert_eq!(err.to_string(), "config key `testing.str_key` expects string, got int");
}

#[test]
fn a_bool_config_accepts_an_int_but_an_int_config_refuses_a_bool() {
    let ctx = PassContext::builder().config("testing.bool_key", 1).build().unwrap();
    assert!(ctx.get_config("testing.bool_key", false));
    let err = PassContext::builder().config("testing.int_key", true).build().unwrap_err();
    assert_eq!(err.to_string(), "config key `testing.int_key` expects int, got bool");
    let ctx = PassContext::builder().config("testing.float_key", 2).build().unwrap();
    assert_eq!(ctx.get_config("testing.float_key", 0.0), 2.0);
}

#[test]
fn config_assignments_parse_from_cli_text() {
    assert_eq!(parse_config_assignment("testing.int_key=7").unwrap(), ("testing.int_key".into(), ConfigValue::Int(7)));
    assert_eq!(
        parse_config_assignment("testing.bool_key=true").unwrap(),
        ("testing.bool_key".into(), ConfigValue::Bool(true))
    );
    assert_eq!(
        parse_config_assignment("testing.str_key=abc").unwrap(),
        ("testing.str_key".into(), ConfigValue::Str("abc".into()))
    );
    assert_eq!(
        parse_config_assignment("testing.int_key=1.5").unwrap_err().to_string(),
        "config key `testing.int_key` expects int, got float"
    );
    assert!(matches!(parse_config_assignment("testing.int_key"), Err(ConfigError::BadAssignment { .. })));
}

#[test]
fn list_configs_returns_every_key_with_its_type() {
    let keys = list_configs();
    let find = |k: &str| keys.iter().find(|c| c.key == k).map(|c| c.ty);
    assert_eq!(find("testing.immutable_module"), Some(ConfigType::Bool));
    assert_eq!(find("testing.int_key"), Some(ConfigType::Int));
    assert_eq!(find("testing.float_key"), Some(ConfigType::Float));
    assert_eq!(find("testing.str_key"), Some(ConfigType::Str));
    // A range restriction is in the doc, never a type of its own (TVM lists such keys as IntImm).
    assert_eq!(find("testing.size_key"), Some(ConfigType::Int));
    let size = keys.iter().find(|c| c.key == "testing.size_key").unwrap();
    assert_eq!(size.doc_with_range(), "a size for tests (at least 0)");
}

#[test]
fn a_restricted_int_config_refuses_values_below_its_minimum() {
    assert_eq!(
        parse_config_assignment("testing.size_key=-1").unwrap_err().to_string(),
        "config key `testing.size_key` expects an int of at least 0, got -1"
    );
    assert_eq!(parse_config_assignment("testing.size_key=0").unwrap().1, ConfigValue::Int(0));
    let err = PassContext::builder().config("testing.size_key", -3).build().unwrap_err();
    assert_eq!(err.to_string(), "config key `testing.size_key` expects an int of at least 0, got -3");
}

#[test]
fn get_config_returns_default_when_key_absent() {
    let ctx = PassContext::builder().build().unwrap();
    assert_eq!(ctx.get_config("testing.int_key", 42i64), 42);
    assert_eq!(ctx.get_config("testing.str_key", String::from("d")), "d");
}

// ---------------------------------------------------------------------------------------------
// Rule 11: testing.immutable_module

/// TVM hashes the pass's *input* before and after it: a pass returning a changed module is fine
/// (the old reading failed every such pass). In passel a pass owning its input cannot change
/// the caller's copy: editing it copies on write, so even the TVM "mutate and return the same
/// module" pattern passes.
#[test]
fn immutable_module_checks_the_input_not_the_output() {
    let adds = module_pass("AddFunc", 0, |mut m, _| {
        m.add("extra", relu_function(false)).map_err(|e| PassError::msg(e.to_string()))?;
        Ok(m)
    });
    let replaces = module_pass("Replace", 0, |_, _| Ok(module_of(&["other"])));
    let rebuild = function_pass("Rebuild", 0, |_, _, _| Ok(Arc::new(relu_function(true))));
    for threads in [1, 2] {
        let ctx = PassContext::builder().config("testing.immutable_module", true).num_threads(threads).build().unwrap();
        let input = tiny_module();
        let before = passel_engine::ir::print_module(&input);
        assert_eq!(adds.run(input.clone(), &ctx).unwrap().len(), 3);
        assert_eq!(replaces.run(input.clone(), &ctx).unwrap().len(), 1);
        let seq = sequential("S", vec![adds.clone().shared(), rebuild.clone().shared(), replaces.clone().shared()]);
        assert_eq!(seq.run(input.clone(), &ctx).unwrap().len(), 1);
        // The caller's copy of the input is untouched.
        assert_eq!(passel_engine::ir::print_module(&input), before);
    }
}

// ---------------------------------------------------------------------------------------------
// Rules 12, 13: which passes run

#[test]
fn pass_enabled_disabled_beats_required_beats_opt_level() {
    let info = PassInfo::new("P", 3);
    let at = |b: passel_engine::transform::PassContextBuilder| b.build().unwrap().pass_enabled(&info);
    assert!(!at(PassContext::builder().opt_level(2)));
    assert!(at(PassContext::builder().opt_level(3)));
    assert!(at(PassContext::builder().opt_level(2).require("P")));
    assert!(!at(PassContext::builder().opt_level(3).require("P").disable("P")));
}

#[test]
fn opt_level_filtering_applies_only_inside_sequential() {
    let log = new_log();
    let high = logging_pass("High", 4, &log);
    let ctx = PassContext::builder().opt_level(1).disable("High").build().unwrap();
    high.run(tiny_module(), &ctx).unwrap();
    assert_eq!(events(&log), ["pass High"]);
    sequential("S", vec![high.clone()]).run(tiny_module(), &ctx).unwrap();
    assert_eq!(events(&log), ["pass High"]);
    let ctx = PassContext::builder().opt_level(1).require("High").build().unwrap();
    sequential("S", vec![high]).run(tiny_module(), &ctx).unwrap();
    assert_eq!(events(&log), ["pass High", "pass High"]);
}

// ---------------------------------------------------------------------------------------------
// Rules 14–17: required dependencies

#[test]
fn required_passes_run_before_the_pass_that_needs_them() {
    let log = new_log();
    let ctx = ctx_with(vec![rec("A", &log)]);
    let seq = Sequential::unnamed(vec![get_pass("TestNeedsDep").unwrap()]);
    seq.run(tiny_module(), &ctx).unwrap();
    let befores: Vec<String> = events(&log).into_iter().filter(|e| e.starts_with("A before")).collect();
    assert_eq!(befores, ["A before sequential", "A before TestDep", "A before TestNeedsDep"]);
}

#[test]
fn shared_required_dependency_is_not_deduplicated() {
    let log = new_log();
    let ctx = ctx_with(vec![rec("A", &log)]);
    let seq = Sequential::unnamed(vec![get_pass("TestNeedsDep").unwrap(), get_pass("TestNeedsDep").unwrap()]);
    seq.run(tiny_module(), &ctx).unwrap();
    let deps = events(&log).iter().filter(|e| *e == "A before TestDep").count();
    assert_eq!(deps, 2);
}

#[test]
fn required_passes_ignore_disabled_and_opt_level() {
    let log = new_log();
    let ctx = PassContext::builder().opt_level(0).disable("TestDep").instrument(rec("A", &log)).build().unwrap();
    let seq = Sequential::unnamed(vec![get_pass("TestNeedsDep").unwrap(), get_pass("TestNeedsHighDep").unwrap()]);
    seq.run(tiny_module(), &ctx).unwrap();
    let befores: Vec<String> = events(&log).into_iter().filter(|e| e.starts_with("A before")).collect();
    assert_eq!(
        befores,
        [
            "A before sequential",
            "A before TestDep",
            "A before TestNeedsDep",
            "A before TestHighDep",
            "A before TestNeedsHighDep"
        ]
    );
}

#[test]
fn required_pass_can_be_vetoed_by_should_run() {
    let log = new_log();
    let ctx = ctx_with(vec![Arc::new(Veto("TestDep")), rec("A", &log)]);
    Sequential::unnamed(vec![get_pass("TestNeedsDep").unwrap()]).run(tiny_module(), &ctx).unwrap();
    let befores: Vec<String> = events(&log).into_iter().filter(|e| e.starts_with("A before")).collect();
    assert_eq!(befores, ["A before sequential", "A before TestNeedsDep"]);
    assert!(events(&log).contains(&"A should_run TestDep".to_string()));
}

#[test]
fn required_passes_do_not_run_when_the_needing_pass_is_skipped() {
    let log = new_log();
    let ctx = PassContext::builder().disable("TestNeedsDep").instrument(rec("A", &log)).build().unwrap();
    Sequential::unnamed(vec![get_pass("TestNeedsDep").unwrap()]).run(tiny_module(), &ctx).unwrap();
    assert_eq!(events(&log), ["A should_run sequential", "A before sequential", "A after sequential"]);
}

#[test]
fn sequential_own_required_list_is_ignored_when_called_directly() {
    let log = new_log();
    let ctx = ctx_with(vec![rec("A", &log)]);
    let seq = sequential("S", vec![]).with_required(&["TestDep"]);
    seq.run(tiny_module(), &ctx).unwrap();
    assert_eq!(events(&log), ["A should_run S", "A before S", "A after S"]);
    // Nested in another sequential, the outer one runs the dependency.
    log.lock().unwrap().clear();
    sequential("Outer", vec![seq.shared()]).run(tiny_module(), &ctx).unwrap();
    assert!(events(&log).contains(&"A before TestDep".to_string()));
}

#[test]
fn unknown_required_pass_is_an_error_naming_and_suggesting() {
    let seq = Sequential::unnamed(vec![get_pass("TestNeedsMissing").unwrap()]);
    let err = seq.run(tiny_module(), &PassContext::builder().build().unwrap()).unwrap_err();
    assert_eq!(err.to_string(), "unknown pass `TestNop` (did you mean `TestNoop`, `TestDep`?)");
}

// ---------------------------------------------------------------------------------------------
// Rule 18: sequential defaults and nesting

#[test]
fn sequential_defaults_to_name_sequential_and_opt_level_0() {
    let seq = Sequential::unnamed(vec![]);
    assert_eq!(seq.info().name, "sequential");
    assert_eq!(seq.info().opt_level, 0);
    assert_eq!(seq.kind(), PassKind::Sequential);
}

#[test]
fn nested_sequentials_apply_the_enabled_rule_at_every_level() {
    let log = new_log();
    let inner = sequential("Inner", vec![logging_pass("Low", 1, &log), logging_pass("High", 3, &log)]);
    let skipped = sequential("Skipped", vec![logging_pass("InSkipped", 0, &log)]).with_opt_level(3);
    let outer = sequential("Outer", vec![inner.shared(), skipped.shared(), logging_pass("Last", 0, &log)]);
    outer.run(tiny_module(), &PassContext::builder().opt_level(2).build().unwrap()).unwrap();
    assert_eq!(events(&log), ["pass Low", "pass Last"]);
}

// ---------------------------------------------------------------------------------------------
// Rules 19–22: one pass call with instruments

#[test]
fn should_run_is_asked_of_every_instrument_and_any_no_skips_the_pass() {
    let log = new_log();
    let ctx = ctx_with(vec![rec_vetoing("A", &log), rec("B", &log)]);
    let input = tiny_module();
    let out = ctx.scope(|| logging_pass("P", 0, &log).run(input.clone(), &ctx).unwrap()).unwrap();
    assert!(out.ptr_eq(&input));
    assert_eq!(events(&log), ["A enter", "B enter", "A should_run P", "B should_run P", "A exit", "B exit"]);
}

#[test]
fn pass_call_order_is_should_run_all_then_before_all_then_pass_then_after_all() {
    let log = new_log();
    let ctx = ctx_with(vec![rec("A", &log), rec("B", &log)]);
    ctx.scope(|| logging_pass("P", 0, &log).run(tiny_module(), &ctx).unwrap()).unwrap();
    assert_eq!(
        events(&log),
        [
            "A enter",
            "B enter",
            "A should_run P",
            "B should_run P",
            "A before P",
            "B before P",
            "pass P",
            "A after P",
            "B after P",
            "A exit",
            "B exit"
        ]
    );
}

#[test]
fn required_pass_in_context_skips_should_run_but_gets_before_and_after() {
    let log = new_log();
    let ctx = PassContext::builder().require("P").instrument(rec_vetoing("A", &log)).build().unwrap();
    logging_pass("P", 0, &log).run(tiny_module(), &ctx).unwrap();
    assert_eq!(events(&log), ["A before P", "pass P", "A after P"]);
}

#[test]
fn nested_pass_calls_nest_their_hooks() {
    let log = new_log();
    let ctx = ctx_with(vec![rec("A", &log)]);
    let seq = sequential("S", vec![logging_pass("P1", 0, &log), logging_pass("P2", 0, &log)]);
    seq.run(tiny_module(), &ctx).unwrap();
    assert_eq!(
        events(&log),
        [
            "A should_run S",
            "A before S",
            "A should_run P1",
            "A before P1",
            "pass P1",
            "A after P1",
            "A should_run P2",
            "A before P2",
            "pass P2",
            "A after P2",
            "A after S"
        ]
    );
}

#[test]
fn pass_without_instruments_just_runs() {
    let log = new_log();
    logging_pass("P", 0, &log).run(tiny_module(), &PassContext::builder().build().unwrap()).unwrap();
    assert_eq!(events(&log), ["pass P"]);
}

// ---------------------------------------------------------------------------------------------
// Rules 23–25: failures

#[test]
fn enter_failure_exits_entered_instruments_in_reverse_and_does_not_push() {
    for fail in [Fail::Err(Hook::Enter), Fail::Panic(Hook::Enter)] {
        let log = new_log();
        let ctx = PassContext::builder()
            .opt_level(3)
            .instrument(rec("A", &log))
            .instrument(rec_failing("B", &log, fail))
            .instrument(rec("C", &log))
            .build()
            .unwrap();
        let err = ctx.enter().err().expect("enter fails");
        assert!(matches!(err, PassError::Instrument { hook: Hook::Enter, ref instrument, .. } if instrument == "B"));
        assert_eq!(events(&log), ["A enter", "B enter", "A exit"]);
        assert!(ctx.instruments().is_empty());
        assert_eq!(PassContext::current().opt_level(), 2);
    }
}

#[test]
fn enter_failure_with_three_instruments_reverses_exits() {
    let log = new_log();
    let ctx = ctx_with(vec![rec("A", &log), rec("B", &log), rec_failing("C", &log, Fail::Err(Hook::Enter))]);
    let err = ctx.scope(|| ()).unwrap_err();
    assert_eq!(err.to_string(), "instrument C failed in enter_pass_ctx: C broken");
    assert_eq!(events(&log), ["A enter", "B enter", "C enter", "B exit", "A exit"]);
}

#[test]
fn exit_failure_stops_remaining_exits_and_clears_instruments() {
    for fail in [Fail::Err(Hook::Exit), Fail::Panic(Hook::Exit)] {
        let log = new_log();
        let ctx = PassContext::builder()
            .opt_level(3)
            .instrument(rec("A", &log))
            .instrument(rec_failing("B", &log, fail))
            .instrument(rec("C", &log))
            .build()
            .unwrap();
        let guard = ctx.enter().unwrap();
        let err = guard.exit().unwrap_err();
        assert!(matches!(err, PassError::Instrument { hook: Hook::Exit, .. }));
        assert_eq!(events(&log), ["A enter", "B enter", "C enter", "A exit", "B exit"]);
        assert!(ctx.instruments().is_empty());
        // The stack was popped before the exits ran.
        assert_eq!(PassContext::current().opt_level(), 2);
    }
}

#[test]
fn should_run_failure_propagates_and_exits_happen_on_leaving_scope() {
    let log = new_log();
    let ctx = ctx_with(vec![rec_failing("A", &log, Fail::Err(Hook::ShouldRun)), rec("B", &log)]);
    let res = ctx.scope(|| logging_pass("P", 0, &log).run(tiny_module(), &ctx)).unwrap();
    assert_eq!(res.unwrap_err().to_string(), "instrument A failed in should_run: A broken");
    assert_eq!(events(&log), ["A enter", "B enter", "A should_run P", "A exit", "B exit"]);
}

#[test]
fn before_pass_failure_stops_remaining_before_hooks_and_the_pass() {
    let log = new_log();
    let ctx = ctx_with(vec![rec("A", &log), rec_failing("B", &log, Fail::Panic(Hook::BeforePass)), rec("C", &log)]);
    let res = ctx.scope(|| logging_pass("P", 0, &log).run(tiny_module(), &ctx)).unwrap();
    assert_eq!(res.unwrap_err().to_string(), "instrument B failed in run_before_pass: panicked: B exploded");
    assert_eq!(
        events(&log),
        [
            "A enter",
            "B enter",
            "C enter",
            "A should_run P",
            "B should_run P",
            "C should_run P",
            "A before P",
            "B before P",
            "A exit",
            "B exit",
            "C exit"
        ]
    );
}

#[test]
fn after_pass_failure_stops_remaining_after_hooks() {
    let log = new_log();
    let ctx = ctx_with(vec![rec_failing("A", &log, Fail::Err(Hook::AfterPass)), rec("B", &log)]);
    let res = ctx.scope(|| logging_pass("P", 0, &log).run(tiny_module(), &ctx)).unwrap();
    assert!(matches!(res, Err(PassError::Instrument { hook: Hook::AfterPass, .. })));
    assert_eq!(
        events(&log),
        [
            "A enter",
            "B enter",
            "A should_run P",
            "B should_run P",
            "A before P",
            "B before P",
            "pass P",
            "A after P",
            "A exit",
            "B exit"
        ]
    );
}

#[test]
fn failing_pass_gets_no_after_hook_and_exits_on_leaving_scope() {
    let log = new_log();
    let ctx = ctx_with(vec![rec("A", &log)]);
    let log2 = log.clone();
    let failing = module_pass("P", 0, move |_, _| {
        push(&log2, "pass P");
        Err(PassError::msg("no good"))
    });
    let res = ctx.scope(|| failing.run(tiny_module(), &ctx)).unwrap();
    assert_eq!(res.unwrap_err().to_string(), "in pass P: no good");
    assert_eq!(events(&log), ["A enter", "A should_run P", "A before P", "pass P", "A exit"]);
}

#[test]
fn panicking_pass_is_caught_gets_no_after_hook_and_keeps_the_stack_sound() {
    let log = new_log();
    let ctx = PassContext::builder().opt_level(3).instrument(rec("A", &log)).build().unwrap();
    let log2 = log.clone();
    let panicking = module_pass("P", 0, move |_, _| {
        push(&log2, "pass P");
        panic!("kaboom")
    });
    let res = ctx.scope(|| panicking.run(tiny_module(), &ctx)).unwrap();
    assert_eq!(res.unwrap_err().to_string(), "in pass P: panicked: kaboom");
    assert_eq!(events(&log), ["A enter", "A should_run P", "A before P", "pass P", "A exit"]);
    assert_eq!(PassContext::current().opt_level(), 2);
}

#[test]
fn panic_escaping_a_scope_still_exits_the_context() {
    let log = new_log();
    let ctx = PassContext::builder().opt_level(3).instrument(rec("A", &log)).build().unwrap();
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| ctx.scope(|| panic!("outside a pass"))));
    assert!(res.is_err());
    assert_eq!(events(&log), ["A enter", "A exit"]);
    assert_eq!(PassContext::current().opt_level(), 2);
}

// ---------------------------------------------------------------------------------------------
// Rule 26: override_instruments

#[test]
fn override_instruments_on_default_context_persists_on_the_thread() {
    let log = new_log();
    PassContext::current().override_instruments(vec![rec("A", &log)]).unwrap();
    assert_eq!(events(&log), ["A enter"]);
    // A later `current()` is the same default, still holding A.
    logging_pass("P", 0, &log).run(tiny_module(), &PassContext::current()).unwrap();
    assert_eq!(events(&log)[1..4], ["A should_run P", "A before P", "pass P"]);
    PassContext::current().override_instruments(vec![rec("B", &log)]).unwrap();
    assert_eq!(events(&log)[5..], ["A exit", "B enter"]);
    // Another thread's default is untouched.
    let other = std::thread::spawn(|| PassContext::current().instruments().len()).join().unwrap();
    assert_eq!(other, 0);
    PassContext::current().override_instruments(vec![]).unwrap();
}

#[test]
fn override_instruments_enter_failure_clears_the_list() {
    let log = new_log();
    let ctx = ctx_with(vec![rec("A", &log)]);
    let guard = ctx.enter().unwrap();
    let err =
        ctx.override_instruments(vec![rec("B", &log), rec_failing("C", &log, Fail::Err(Hook::Enter))]).unwrap_err();
    assert!(matches!(err, PassError::Instrument { hook: Hook::Enter, .. }));
    assert_eq!(events(&log), ["A enter", "A exit", "B enter", "C enter", "B exit"]);
    assert!(ctx.instruments().is_empty());
    guard.exit().unwrap();
    assert_eq!(events(&log).len(), 5);
}

#[test]
fn override_instruments_exit_failure_stops_and_clears() {
    let log = new_log();
    let ctx = ctx_with(vec![rec_failing("A", &log, Fail::Err(Hook::Exit)), rec("B", &log)]);
    let _guard = ctx.enter().unwrap();
    let err = ctx.override_instruments(vec![rec("C", &log)]).unwrap_err();
    assert!(matches!(err, PassError::Instrument { hook: Hook::Exit, .. }));
    assert_eq!(events(&log), ["A enter", "B enter", "A exit"]);
    assert!(ctx.instruments().is_empty());
}

// ---------------------------------------------------------------------------------------------
// Rules 27, 28: pass kinds

#[test]
fn module_pass_may_add_and_remove_functions() {
    let pass = module_pass("Reshape", 0, |mut m, _| {
        m.remove("helper").map_err(|e| PassError::msg(e.to_string()))?;
        m.add("fresh", relu_function(false)).map_err(|e| PassError::msg(e.to_string()))?;
        Ok(m)
    });
    let out = pass.run(tiny_module(), &PassContext::builder().build().unwrap()).unwrap();
    let names: Vec<&str> = out.iter().map(|(n, _)| n).collect();
    assert_eq!(names, ["main", "fresh"]);
    assert_eq!(pass.kind(), PassKind::Module);
}

#[test]
fn function_pass_skips_functions_marked_skip_optimization() {
    let calls = Arc::new(AtomicUsize::new(0));
    let c = calls.clone();
    let pass = function_pass("Count", 0, move |f, _, _| {
        c.fetch_add(1, Ordering::SeqCst);
        Ok(Arc::new((*f).clone()))
    });
    let mut m = tiny_module();
    m.add("skipped", relu_function(true)).unwrap();
    let input = m.clone();
    let out = pass.run(m, &PassContext::builder().num_threads(1).build().unwrap()).unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert!(Arc::ptr_eq(out.get("skipped").unwrap(), input.get("skipped").unwrap()));
    assert!(!Arc::ptr_eq(out.get("main").unwrap(), input.get("main").unwrap()));
    assert_eq!(pass.kind(), PassKind::Function);
}

#[test]
fn unchanged_function_pass_returns_pointer_equal_functions() {
    let pass = function_pass("Identity", 0, |f, _, _| Ok(f));
    let input = tiny_module();
    let out = pass.run(input.clone(), &PassContext::builder().build().unwrap()).unwrap();
    assert!(out.ptr_eq(&input));
}

#[test]
fn function_pass_sees_the_whole_module_read_only() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let pass = function_pass("Look", 0, move |f, m, _| {
        s.lock().unwrap().push(m.len());
        Ok(f)
    });
    pass.run(module_of(&["a", "b", "c"]), &PassContext::builder().num_threads(1).build().unwrap()).unwrap();
    assert_eq!(*seen.lock().unwrap(), [3, 3, 3]);
}

#[test]
fn parallel_function_pass_matches_serial_including_diagnostic_order() {
    let names: Vec<String> = (0..16).map(|i| format!("f{i}")).collect();
    let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let pass = function_pass("Diag", 0, |f, _, ctx| {
        // Inside a task, `current()` is the task's copy of the context.
        assert_eq!(PassContext::current().opt_level(), ctx.opt_level());
        // The machinery fills in the function name.
        ctx.emit(Diagnostic::warning("Diag", "seen"));
        Ok(Arc::new((*f).clone()))
    });
    let run = |threads| {
        let ctx = PassContext::builder().opt_level(3).num_threads(threads).build().unwrap();
        let out = ctx.scope(|| pass.run(module_of(&name_refs), &ctx)).unwrap().unwrap();
        let diags: Vec<String> = ctx.diagnostics().take().into_iter().filter_map(|d| d.function).collect();
        (passel_engine::ir::print_module(&out), diags)
    };
    let serial = run(1);
    assert_eq!(serial.1, names);
    assert_eq!(run(2), serial);
    assert_eq!(run(4), serial);
}

// ---------------------------------------------------------------------------------------------
// Rule 29: errors are reported once, with pass and function

#[test]
fn function_pass_error_names_pass_and_function_once() {
    let pass = function_pass("Picky", 0, |f, m, _| {
        if Arc::ptr_eq(&f, m.get("helper").unwrap()) {
            Err(PassError::msg("does not like helper"))
        } else {
            Ok(f)
        }
    });
    let seq = sequential("Outer", vec![sequential("Inner", vec![pass.shared()]).shared()]);
    for threads in [1, 2] {
        let ctx = PassContext::builder().num_threads(threads).build().unwrap();
        let err = seq.run(tiny_module(), &ctx).unwrap_err();
        assert_eq!(err.to_string(), "in pass Picky on function @helper: does not like helper");
    }
}

#[test]
fn function_pass_panic_is_caught_and_names_pass_and_function() {
    let pass = function_pass("Crashy", 0, |f, m, _| {
        if Arc::ptr_eq(&f, m.get("main").unwrap()) {
            panic!("index out of range")
        }
        Ok(f)
    });
    for threads in [1, 2] {
        let ctx = PassContext::builder().opt_level(3).num_threads(threads).build().unwrap();
        let res = ctx.scope(|| pass.run(tiny_module(), &ctx)).unwrap();
        let err = res.unwrap_err();
        assert!(matches!(err, PassError::InPass { panicked: true, .. }));
        assert_eq!(err.to_string(), "in pass Crashy on function @main: panicked: index out of range");
        assert_eq!(PassContext::current().opt_level(), 2);
    }
}

// ---------------------------------------------------------------------------------------------
// Rule 30: PrintIR

#[test]
fn print_ir_pass_prints_header_and_module_and_returns_it_unchanged() {
    let (buf, sink) = vec_sink();
    let pass = PrintIr::to_sink("after parsing", sink);
    assert_eq!((pass.info().name.as_str(), pass.info().opt_level, pass.kind()), ("PrintIR", 0, PassKind::Module));
    let input = tiny_module();
    let out = pass.run(input.clone(), &PassContext::builder().build().unwrap()).unwrap();
    assert!(out.ptr_eq(&input));
    assert_eq!(sink_text(&buf), format!("PrintIR(after parsing):\n{}", passel_engine::ir::print_module(&input)));
}

// ---------------------------------------------------------------------------------------------
// Rule 31: timing

/// Checks one rendered line: tabs, name, then `Nus [Nus] (P%; P%) cpu Nus`.
fn check_timing_line(line: &str, depth: usize, name: &str) {
    let rest = line.strip_prefix(&"\t".repeat(depth)).unwrap_or_else(|| panic!("indent of {line:?}"));
    assert!(!rest.starts_with('\t'), "too deep: {line:?}");
    let rest = rest.strip_prefix(&format!("{name}: ")).unwrap_or_else(|| panic!("name of {line:?}"));
    let (total, rest) = rest.split_once("us [").unwrap();
    let (self_t, rest) = rest.split_once("us] (").unwrap();
    let (pct_total, rest) = rest.split_once("%; ").unwrap();
    let (pct_parent, rest) = rest.split_once("%) cpu ").unwrap();
    let cpu = rest.strip_suffix("us").unwrap();
    assert!(total.parse::<u64>().unwrap() >= self_t.parse::<u64>().unwrap());
    for p in [pct_total, pct_parent] {
        assert_eq!(p.split_once('.').map(|(_, decimals)| decimals.len()), Some(2), "{line:?}");
        let p: f64 = p.parse().unwrap();
        assert!((0.0..=100.0).contains(&p), "{line:?}");
    }
    cpu.parse::<u64>().unwrap();
}

#[test]
fn timing_renders_a_tree_in_call_order_with_tvm_columns() {
    let timing = Arc::new(PassTimingInstrument::new());
    let ctx = ctx_with(vec![timing.clone()]);
    let log = new_log();
    let seq = sequential(
        "Outer",
        vec![logging_pass("P1", 0, &log), sequential("Inner", vec![logging_pass("P2", 0, &log)]).shared()],
    );
    let report = ctx
        .scope(|| {
            seq.run(tiny_module(), &ctx).unwrap();
            timing.render().unwrap()
        })
        .unwrap();
    let lines: Vec<&str> = report.lines().collect();
    assert!(lines[0].starts_with("Total: ") && lines[0].ends_with("us"), "{report}");
    check_timing_line(lines[1], 0, "Outer");
    check_timing_line(lines[2], 1, "P1");
    check_timing_line(lines[3], 1, "Inner");
    check_timing_line(lines[4], 2, "P2");
    assert_eq!(lines.len(), 5);
    assert!(lines[1].contains("(100.00%; 100.00%)"), "{report}");
    // Exiting the scope cleared the data: nothing profiled renders as "", as in TVM.
    assert_eq!(timing.render().unwrap(), "");
}

#[test]
fn timing_keeps_data_until_the_outermost_entry_exits() {
    let timing = Arc::new(PassTimingInstrument::new());
    let ctx = ctx_with(vec![timing.clone()]);
    let log = new_log();
    let report = ctx
        .scope(|| {
            ctx.scope(|| logging_pass("Inner", 0, &log).run(tiny_module(), &ctx).unwrap()).unwrap();
            timing.render().unwrap()
        })
        .unwrap();
    assert_eq!(report.lines().count(), 2, "{report}");
    assert_eq!(timing.render().unwrap(), "");
}

/// TVM's `RenderPassProfiles` returns `""` when nothing was profiled, not a zero total.
#[test]
fn timing_render_with_nothing_profiled_is_empty() {
    let timing = Arc::new(PassTimingInstrument::new());
    assert_eq!(timing.render().unwrap(), "");
    let ctx = ctx_with(vec![timing.clone()]);
    let report = ctx.scope(|| timing.render().unwrap()).unwrap();
    assert_eq!(report, "");
}

#[test]
fn timing_render_during_a_pass_is_an_error() {
    let timing = Arc::new(PassTimingInstrument::new());
    let ctx = ctx_with(vec![timing.clone()]);
    let t = timing.clone();
    let pass = module_pass("Peek", 0, move |m, _| match t.render() {
        Err(e) => Err(PassError::msg(e.message)),
        Ok(_) => Ok(m),
    });
    let res = ctx.scope(|| pass.run(tiny_module(), &ctx)).unwrap();
    assert_eq!(res.unwrap_err().to_string(), "in pass Peek: cannot render pass timings while a pass is running");
}

#[test]
fn two_timing_instruments_do_not_share_state() {
    let t1 = Arc::new(PassTimingInstrument::new());
    let t2 = Arc::new(PassTimingInstrument::new());
    let log = new_log();
    let c1 = ctx_with(vec![t1.clone()]);
    let c2 = ctx_with(vec![t2.clone()]);
    let _g1 = c1.enter().unwrap();
    logging_pass("OnlyOne", 0, &log).run(tiny_module(), &c1).unwrap();
    let _g2 = c2.enter().unwrap();
    logging_pass("OnlyTwo", 0, &log).run(tiny_module(), &c2).unwrap();
    let (r1, r2) = (t1.render().unwrap(), t2.render().unwrap());
    assert!(r1.contains("OnlyOne") && !r1.contains("OnlyTwo"), "{r1}");
    assert!(r2.contains("OnlyTwo") && !r2.contains("OnlyOne"), "{r2}");
}

#[test]
fn timing_leaves_no_dangling_entry_after_a_failing_pass() {
    let timing = Arc::new(PassTimingInstrument::new());
    let ctx = ctx_with(vec![timing.clone()]);
    let log = new_log();
    let failing = module_pass("Fails", 0, |_, _| Err(PassError::msg("no")));
    let report = ctx
        .scope(|| {
            assert!(sequential("S", vec![failing.shared()]).run(tiny_module(), &ctx).is_err());
            logging_pass("After", 0, &log).run(tiny_module(), &ctx).unwrap();
            timing.render().unwrap()
        })
        .unwrap();
    let lines: Vec<&str> = report.lines().collect();
    assert_eq!(lines.len(), 2, "{report}");
    check_timing_line(lines[1], 0, "After");
}

#[test]
fn timing_leaves_no_dangling_entry_when_another_instrument_fails_after_the_pass() {
    let timing = Arc::new(PassTimingInstrument::new());
    let log = new_log();
    let ctx = ctx_with(vec![rec_failing("A", &log, Fail::Err(Hook::AfterPass)), timing.clone()]);
    let report = ctx
        .scope(|| {
            assert!(logging_pass("Broken", 0, &log).run(tiny_module(), &ctx).is_err());
            timing.render().unwrap()
        })
        .unwrap();
    // Nothing completed, so nothing is profiled: the report is empty, as in TVM.
    assert_eq!(report, "");
}

// ---------------------------------------------------------------------------------------------
// Rule 32: printing and dumping

#[test]
fn print_ir_instrument_prints_before_and_after_named_passes() {
    let (buf, sink) = vec_sink();
    let inst = PrintIrInstrument::new().before("p-one").after("PTwo").to_sink(sink);
    let ctx = ctx_with(vec![Arc::new(inst)]);
    let log = new_log();
    let m = tiny_module();
    let text = passel_engine::ir::print_module(&m);
    sequential("S", vec![logging_pass("POne", 0, &log), logging_pass("PTwo", 0, &log)]).run(m, &ctx).unwrap();
    assert_eq!(sink_text(&buf), format!("PrintIR(before POne):\n{text}PrintIR(after PTwo):\n{text}"));
}

#[test]
fn print_ir_instrument_before_all_and_after_all_name_each_pass() {
    let (buf, sink) = vec_sink();
    let ctx = ctx_with(vec![Arc::new(PrintIrInstrument::new().before_all().after_all().to_sink(sink))]);
    let log = new_log();
    sequential("S", vec![logging_pass("P", 0, &log)]).run(Module::new(), &ctx).unwrap();
    assert_eq!(sink_text(&buf), "PrintIR(before S):\nPrintIR(before P):\nPrintIR(after P):\nPrintIR(after S):\n");
}

#[test]
fn print_ir_after_change_prints_only_when_the_module_changed() {
    let (buf, sink) = vec_sink();
    let ctx = ctx_with(vec![Arc::new(PrintIrInstrument::new().after_change().to_sink(sink))]);
    let same = function_pass("Rebuild", 0, |_, _, _| Ok(Arc::new(relu_function(false))));
    let adds = module_pass("AddFunc", 0, |mut m, _| {
        m.add("extra", relu_function(false)).map_err(|e| PassError::msg(e.to_string()))?;
        Ok(m)
    });
    let out = sequential("S", vec![same.shared(), adds.shared()]).run(tiny_module(), &ctx).unwrap();
    let text = passel_engine::ir::print_module(&out);
    assert_eq!(sink_text(&buf), format!("PrintIR(after AddFunc):\n{text}PrintIR(after S):\n{text}"));
}

#[test]
fn dump_ir_writes_numbered_files_in_call_order() {
    let dir = std::env::temp_dir().join(format!("passel-dump-ir-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let ctx = ctx_with(vec![Arc::new(DumpIrInstrument::new(&dir))]);
    let log = new_log();
    let m = tiny_module();
    ctx.scope(|| sequential("S", vec![logging_pass("A", 0, &log), logging_pass("B", 0, &log)]).run(m.clone(), &ctx))
        .unwrap()
        .unwrap();
    let mut files: Vec<String> =
        std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    files.sort();
    assert_eq!(files, ["000_A.pir", "001_B.pir", "002_S.pir"]);
    assert_eq!(std::fs::read_to_string(dir.join("000_A.pir")).unwrap(), passel_engine::ir::print_module(&m));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dump_ir_io_error_is_an_instrument_failure() {
    let file = std::env::temp_dir().join(format!("passel-dump-ir-file-{}", std::process::id()));
    std::fs::File::create(&file).unwrap().write_all(b"not a dir").unwrap();
    let ctx = ctx_with(vec![Arc::new(DumpIrInstrument::new(file.join("sub")))]);
    let err = ctx.scope(|| ()).unwrap_err();
    assert!(
        matches!(err, PassError::Instrument { hook: Hook::Enter, ref instrument, .. } if instrument == "DumpIrInstrument")
    );
    std::fs::remove_file(&file).unwrap();
}

// ---------------------------------------------------------------------------------------------
// Registry and pipelines

#[test]
fn get_pass_accepts_tvm_and_cli_spellings() {
    for name in ["TestNeedsDep", "test-needs-dep", "test_needs_dep", "TESTNEEDSDEP"] {
        assert_eq!(get_pass(name).unwrap().info().name, "TestNeedsDep");
    }
    assert_eq!(
        get_pass("TestNop").unwrap_err().to_string(),
        "unknown pass `TestNop` (did you mean `TestNoop`, `TestDep`?)"
    );
    assert_eq!(get_pass("zzzzzzzz").unwrap_err().to_string(), "unknown pass `zzzzzzzz`");
    assert_eq!(get_pass("TestDupPass").unwrap_err().to_string(), "pass `TestDupPass` is registered more than once");
}

#[test]
fn list_passes_is_sorted_with_kind_opt_level_and_required() {
    let all = list_passes();
    let names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);
    let needs = all.iter().find(|p| p.name == "TestNeedsDep").unwrap();
    assert_eq!((needs.kind, needs.opt_level, needs.required.clone()), (PassKind::Module, 0, vec!["TestDep".into()]));
    let relu = all.iter().find(|p| p.name == "TestRelu").unwrap();
    assert_eq!((relu.kind, relu.opt_level), (PassKind::Function, 1));
    assert_eq!((needs.runs_as, relu.runs_as), (RunsAs::Barrier, RunsAs::Fused));
    assert!(names.contains(&"PrintIR"));
}

#[test]
fn pipeline_parses_and_prints_back_identically() {
    for text in ["TestNoop", "TestNoop,TestDep,TestNeedsDep", "TestNoop,[TestDep,[TestRelu]],TestNeedsDep", "[TestDep]"]
    {
        assert_eq!(print_pipeline(&parse_pipeline(text).unwrap()), text);
    }
    let seq = parse_pipeline(" test-noop , [ test-dep ] ").unwrap();
    assert_eq!(print_pipeline(&seq), "TestNoop,[TestDep]");
    assert_eq!(seq.info().name, "sequential");
    assert_eq!(seq.passes()[1].kind(), PassKind::Sequential);
}

#[test]
fn pipeline_errors_give_position_and_suggestions() {
    let err = |t: &str| parse_pipeline(t).unwrap_err().to_string();
    assert_eq!(
        err("TestNoop,TestNop"),
        "pipeline error at 9: unknown pass `TestNop` (did you mean `TestNoop`, `TestDep`?)"
    );
    assert_eq!(err("TestNoop,,TestDep"), "pipeline error at 9: expected a pass name or `[`, found `,`");
    assert_eq!(err("TestNoop,[TestDep"), "pipeline error at 9: unclosed `[`");
    assert_eq!(err("TestNoop]"), "pipeline error at 8: expected `,`, `]` or end of pipeline, found `]`");
    assert_eq!(err(""), "pipeline error at 0: expected a pass name or `[`, found end of pipeline");
}

#[test]
fn parsed_pipeline_runs_through_instruments() {
    let log = new_log();
    let ctx = ctx_with(vec![rec("A", &log)]);
    parse_pipeline("TestNoop,[TestNeedsDep]").unwrap().run(tiny_module(), &ctx).unwrap();
    let befores: Vec<String> = events(&log).into_iter().filter(|e| e.starts_with("A before")).collect();
    assert_eq!(
        befores,
        [
            "A before sequential",
            "A before TestNoop",
            "A before sequential",
            "A before TestDep",
            "A before TestNeedsDep"
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// Nesting depth of pipelines (a deep pipeline used to overflow the stack when run or dropped)

fn nested(depth: usize, leaf: Arc<dyn Pass>) -> Sequential {
    let mut seq = sequential("level1", vec![leaf]);
    for level in 2..=depth {
        seq = sequential(&format!("level{level}"), vec![seq.shared()]);
    }
    seq
}

#[test]
fn deep_sequentials_build_and_drop_without_recursion() {
    let seq = nested(100_000, module_pass("Leaf", 0, |m, _| Ok(m)).shared());
    assert_eq!(seq.depth(), 100_000);
    drop(seq);
}

#[test]
fn sequentials_deeper_than_the_limit_are_refused_before_any_pass_runs() {
    let log = new_log();
    let ctx = PassContext::builder().build().unwrap();
    let too_deep = nested(20_000, logging_pass("Leaf", 0, &log));
    let err = too_deep.run(tiny_module(), &ctx).unwrap_err();
    assert_eq!(
        err,
        PassError::PipelineTooDeep {
            name: "level20000".into(),
            depth: 20_000,
            max: passel_engine::transform::MAX_PIPELINE_DEPTH
        }
    );
    assert!(err.to_string().contains("at most 128"), "{err}");
    assert_eq!(passel_engine::transform::run_plain(&too_deep, tiny_module(), &ctx).unwrap_err(), err);
    assert!(events(&log).is_empty());
    // At the limit the pipeline runs, serially and in parallel.
    for threads in [1, 2] {
        let ctx = PassContext::builder().num_threads(threads).build().unwrap();
        let ok = nested(passel_engine::transform::MAX_PIPELINE_DEPTH, logging_pass("Leaf", 0, &log));
        assert!(ok.run(tiny_module(), &ctx).is_ok());
    }
    assert_eq!(events(&log), ["pass Leaf", "pass Leaf"]);
    let ctx = PassContext::builder().build().unwrap();
    let session = passel_engine::Session::new(nested(200, logging_pass("Leaf", 0, &log)), &ctx);
    assert!(matches!(session, Err(passel_engine::SessionError::Pass(PassError::PipelineTooDeep { depth: 200, .. }))));
}

#[test]
fn textual_pipelines_nest_at_most_the_limit() {
    let max = passel_engine::transform::MAX_PIPELINE_DEPTH;
    // The whole pipeline is level 1, so `max - 1` groups reach the limit.
    let ok = format!("{}TestNoop{}", "[".repeat(max - 1), "]".repeat(max - 1));
    assert_eq!(parse_pipeline(&ok).unwrap().depth(), max);
    let deep = format!("{}TestNoop{}", "[".repeat(7000), "]".repeat(7000));
    let err = parse_pipeline(&deep).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("pipeline error at {}: pipeline groups nest deeper than {max} levels", max - 1)
    );
}

/// Issue #26 item 14: names from the input are escaped and cut in messages (a zero-width space
/// printed "unknown pass `Fold`"; a 1M-character name made a megabyte-long error).
#[test]
fn unknown_pass_and_config_names_are_escaped_and_cut_in_messages() {
    let err = get_pass("Fold\u{200b}").expect_err("unknown").to_string();
    assert!(err.starts_with("unknown pass `Fold\\u{200b}`"), "{err}");
    let err = parse_pipeline("TestNoop,\u{0}").expect_err("bad pipeline").to_string();
    assert!(err.contains("\\u{0}") && !err.contains('\0'), "{err}");
    let long = "P".repeat(1_000_000);
    let err = get_pass(&long).expect_err("unknown").to_string();
    assert!(err.len() < 1000 && err.contains("(1000000 characters in all)"), "{} bytes", err.len());
    let err = parse_config_assignment(&format!("testing.\n{long}=1")).unwrap_err().to_string();
    assert!(!err.contains('\n') && err.contains("characters in all"), "{}", &err[..err.len().min(300)]);
}
