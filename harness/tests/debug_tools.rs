//! The pipeline debugging tools on real pipelines: opt-bisect numbers executions the same at 1,
//! 2 and 8 threads, and `first_failing` finds a planted miscompile exactly; `passel run
//! --reproducer` writes the same crash reproducer at any thread count, cut down to the failing
//! function and its callees, and `passel run REPRODUCER` replays it to the same failure.

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
        assert_eq!(found.ok(), Some(Some(expected)), "{threads} threads");
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

fn passel(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_passel"))
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("passel runs")
}

/// A fresh temporary directory for one test.
fn temp_dir(test: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("passel-reproducer-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// `passel gen random` (20 functions calling each other) with `#[testing.fail="MODE"]` on each
/// function of `marked`.
fn marked_random(marked: &[(&str, &str)]) -> String {
    let gen = passel(&["gen", "random"]);
    assert!(gen.status.success());
    let mut text = String::from_utf8(gen.stdout).expect("utf-8");
    for (func, mode) in marked {
        let def = format!("def @{func}(");
        assert!(text.contains(&def), "no @{func}");
        text = text.replacen(&def, &format!("#[testing.fail=\"{mode}\"]\n{def}"), 1);
    }
    text
}

/// The `error:` line of a run's stderr.
fn error_line(out: &std::process::Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr);
    stderr.lines().find(|l| l.starts_with("error: ")).unwrap_or_else(|| panic!("no error line in {stderr}")).to_string()
}

fn def_names(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("def @"))
        .map(|l| l.split('(').next().unwrap_or_default().to_string())
        .collect()
}

const PIPELINE: &str = "FoldConstant,testing.FailOn,SimplifyExpr,DeadCodeElimination";

#[test]
fn reproducer_is_the_same_at_any_thread_count_and_replays_to_the_same_failure() {
    let dir = temp_dir("threads");
    let input = dir.join("in.pir");
    // Two failing functions: the reproducer is about the first in module order at any -j.
    std::fs::write(&input, marked_random(&[("f7", "error"), ("f12", "panic")])).expect("write");
    let input = input.to_str().expect("utf-8");
    let mut texts = Vec::new();
    for threads in ["1", "2", "8"] {
        let path = dir.join(format!("r{threads}.pir"));
        let path = path.to_str().expect("utf-8");
        let run = passel(&["run", input, "-O3", "-j", threads, "--passes", PIPELINE, "--reproducer", path]);
        assert_eq!(run.status.code(), Some(1));
        assert_eq!(error_line(&run), "error: in pass testing.FailOn on function @f7: failing as asked by testing.fail");
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(
            stderr.contains(&format!("note: wrote crash reproducer {path} (pass testing.FailOn on @f7;")),
            "{stderr}"
        );
        assert!(!stderr.contains("warning"), "{stderr}");
        texts.push(std::fs::read_to_string(path).expect("reproducer written"));
    }
    assert_eq!(texts[0], texts[1]);
    assert_eq!(texts[0], texts[2]);
    let text = &texts[0];
    assert!(
        text.starts_with("// passel-reproducer: --passes=testing.FailOn,SimplifyExpr,DeadCodeElimination -O3\n"),
        "{text}"
    );
    assert!(text.contains("// error: in pass testing.FailOn on function @f7: failing as asked by testing.fail\n"));
    // The replay needs no flag and fails the same way, at any -j.
    let path = dir.join("r1.pir");
    for threads in ["1", "8"] {
        let replay = passel(&["run", path.to_str().expect("utf-8"), "-j", threads]);
        assert_eq!(replay.status.code(), Some(1));
        assert_eq!(
            error_line(&replay),
            "error: in pass testing.FailOn on function @f7: failing as asked by testing.fail"
        );
        assert!(String::from_utf8_lossy(&replay.stderr).contains("is a crash reproducer"));
    }
    // Options on the command line win over the header's: without the failing pass it runs.
    let other = passel(&["run", path.to_str().expect("utf-8"), "--passes", "SimplifyExpr"]);
    assert!(other.status.success(), "{}", String::from_utf8_lossy(&other.stderr));
    let _ = std::fs::remove_dir_all(&dir);
}

/// @main → @mid → @leaf; @other and @unrelated are not reached from @mid.
const CALLS: &str = "def @leaf(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  relu(%x)
}

def @unrelated(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  let %c = multiply(2.0f, 3.0f);
  add(negative(%x), %c)
}

def @inner(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  @leaf(%x)
}

#[testing.fail=\"MODE\"]
def @mid(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  let %a = add(%x, 1.0f);
  @inner(%a)
}

def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  let %b = @mid(%x);
  @unrelated(%b)
}
";

/// Runs `pipeline` on [`CALLS`] with @mid failing in `mode`; returns the reproducer's text and
/// the run.
fn reproduce_calls(test: &str, mode: &str, pipeline: &str, extra: &[&str]) -> (String, std::process::Output) {
    let dir = temp_dir(test);
    let input = dir.join("in.pir");
    std::fs::write(&input, CALLS.replace("MODE", mode)).expect("write");
    let path = dir.join("r.pir");
    let mut args = vec!["run", input.to_str().expect("utf-8"), "--passes", pipeline, "--reproducer"];
    args.push(path.to_str().expect("utf-8"));
    args.extend(extra);
    let run = passel(&args);
    let text = std::fs::read_to_string(&path).expect("reproducer written");
    let replay = passel(&["run", path.to_str().expect("utf-8")]);
    if mode != "diagnostic" {
        assert_eq!(error_line(&replay), error_line(&run), "{text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
    (text, replay)
}

#[test]
fn reproducer_holds_the_failing_function_and_its_callees_only() {
    let (text, _) = reproduce_calls("callees", "error", "testing.FailOn", &[]);
    assert_eq!(def_names(&text), ["leaf", "inner", "mid"], "{text}");
    assert!(text.contains("// Reduced to @mid and the functions it references: 3 of 5 functions.\n"), "{text}");
}

#[test]
fn reproducer_of_a_panic_replays_to_the_same_panic() {
    let (text, replay) = reproduce_calls("panic", "panic", "FoldConstant,testing.FailOn", &["-j", "2"]);
    assert!(text
        .contains("// error: in pass testing.FailOn on function @mid: panicked: panicking as asked by testing.fail\n"));
    assert_eq!(
        error_line(&replay),
        "error: in pass testing.FailOn on function @mid: panicked: panicking as asked by testing.fail"
    );
}

#[test]
fn reproducer_of_a_module_pass_keeps_the_whole_input() {
    let (text, _) =
        reproduce_calls("module", "error", "FoldConstant,testing.FailOnModule,CanonicalizeBindings", &["-O3"]);
    assert!(
        text.starts_with("// passel-reproducer: --passes=testing.FailOnModule,CanonicalizeBindings -O3\n"),
        "{text}"
    );
    assert_eq!(def_names(&text), ["leaf", "unrelated", "inner", "mid", "main"]);
    // FoldConstant ran before the failing pass: its output is the reproducer's input.
    assert!(!text.contains("multiply(2.0f, 3.0f)") && text.contains("6.0f"), "{text}");
}

#[test]
fn reproducer_of_an_error_diagnostic_replays_to_the_same_diagnostic() {
    let (text, replay) = reproduce_calls("diagnostic", "diagnostic", "testing.FailOn,FoldConstant", &[]);
    assert!(text.contains("// diagnostic: testing.FailOn @mid: error diagnostic as asked by testing.fail\n"), "{text}");
    assert_eq!(def_names(&text), ["leaf", "inner", "mid"]);
    assert_eq!(replay.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&replay.stderr).contains("error diagnostic as asked by"));
}

#[test]
fn local_reproducer_names_the_failing_pass_alone_and_nested_pipelines_are_spelled_out() {
    let pipeline = "[FoldConstant,testing.FailOn],FoldScaleAxis,CanonicalizeBindings";
    let (full, _) = reproduce_calls("full", "error", pipeline, &["-O3", "--config", "relay.FuseOps.max_depth=4"]);
    assert!(
        full.starts_with(
            "// passel-reproducer: --passes=testing.FailOn,BackwardFoldScaleAxis,ForwardFoldScaleAxis,FoldConstant,\
             CanonicalizeBindings -O3 --config=relay.FuseOps.max_depth=4\n"
        ),
        "{full}"
    );
    let (local, _) =
        reproduce_calls("local", "error", pipeline, &["-O3", "--reproducer-local", "--disable", "fold-constant"]);
    assert!(local.starts_with("// passel-reproducer: --passes=testing.FailOn -O3 --disable=FoldConstant\n"), "{local}");
}

#[test]
fn failing_reproducer_writes_are_clear_errors() {
    let dir = temp_dir("write");
    let input = dir.join("in.pir");
    std::fs::write(&input, CALLS.replace("MODE", "error")).expect("write");
    let input = input.to_str().expect("utf-8");
    let dir_s = dir.to_str().expect("utf-8");
    for (path, why) in [("/dev/full", "No space left on device"), (dir_s, "Is a directory")] {
        let run = passel(&["run", input, "--passes", "testing.FailOn", "--reproducer", path]);
        assert_eq!(run.status.code(), Some(1));
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert!(stderr.contains(&format!("error: cannot write reproducer {path}: {why}")), "{stderr}");
        // The pipeline's own error is still reported.
        assert!(stderr.contains("error: in pass testing.FailOn on function @mid"), "{stderr}");
    }
    // Nothing fails: nothing is written.
    let quiet = dir.join("none.pir");
    let run = passel(&["run", input, "--passes", "FoldConstant", "--reproducer", quiet.to_str().expect("utf-8")]);
    assert!(run.status.success());
    assert!(!quiet.exists());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_broken_reproducer_header_is_a_clear_error() {
    let dir = temp_dir("header");
    let path = dir.join("r.pir");
    std::fs::write(
        &path,
        format!("// passel-reproducer: --passes=FoldConstant --frobnicate\n{}", CALLS.replace("MODE", "error")),
    )
    .expect("write");
    let run = passel(&["run", path.to_str().expect("utf-8")]);
    assert_eq!(run.status.code(), Some(1));
    assert!(
        error_line(&run).contains("unknown option `--frobnicate` in the reproducer header"),
        "{}",
        error_line(&run)
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Records the name of every pass call's before-hook.
#[derive(Default)]
struct Calls(std::sync::Mutex<Vec<String>>);

impl passel_engine::transform::Instrument for Calls {
    fn name(&self) -> &str {
        "Calls"
    }

    fn run_before_pass(
        &self,
        _module: &Module,
        info: &passel_engine::transform::PassInfo,
    ) -> Result<(), passel_engine::transform::InstrumentError> {
        self.0.lock().expect("lock").push(info.name.clone());
        Ok(())
    }
}

#[test]
fn planned_calls_are_the_calls_the_instruments_see() {
    use passel_engine::transform::{parse_pipeline, planned_calls, Pass};
    passel_passes::link();
    let module = module();
    let mut cases: Vec<(Sequential, u32, Vec<&str>, Vec<&str>)> =
        (0..=3).map(|level| (passel_passes::default_pipeline(level), level, vec![], vec![])).collect();
    cases.push((passel_passes::default_pipeline(1), 1, vec!["FoldConstant", "EliminateCommonSubexpr"], vec!["Inline"]));
    let grouped = "FoldConstant,[SimplifyExpr,[DeadCodeElimination,FoldScaleAxis]],CanonicalizeBindings";
    cases.push((parse_pipeline(grouped).expect("pipeline"), 3, vec![], vec!["InferType"]));
    for (pipeline, level, require, disable) in cases {
        let calls = Arc::new(Calls::default());
        let mut b = PassContext::builder().opt_level(level).num_threads(2).instrument(calls.clone());
        for name in &require {
            b = b.require(name);
        }
        for name in &disable {
            b = b.disable(name);
        }
        let ctx = b.build().expect("context");
        ctx.scope(|| pipeline.run(module.clone(), &ctx)).expect("scope").expect("runs");
        let planned: Vec<String> =
            planned_calls(&pipeline, &ctx).expect("plan").iter().map(|c| c.pass.info().name.clone()).collect();
        assert_eq!(planned, *calls.0.lock().expect("lock"), "-O{level}, {require:?}, {disable:?}");
    }
}

/// `passel run --verify-each` names the pass whose output does not verify, at any -j and in a
/// stage the executor would otherwise fuse; without it the broken function is printed and the
/// run succeeds. The reproducer header records the option.
#[test]
fn verify_each_names_the_pass_that_broke_the_ir() {
    let dir = temp_dir("verify-each");
    let input = dir.join("in.pir");
    std::fs::write(&input, marked_random(&[("f7", "malformed")])).expect("write");
    let input = input.to_str().expect("utf-8");
    for threads in ["1", "2"] {
        let run = passel(&["run", input, "-O3", "-j", threads, "--passes", PIPELINE, "--verify-each"]);
        assert_eq!(run.status.code(), Some(1));
        let line = error_line(&run);
        assert!(
            line.starts_with("error: pass testing.FailOn broke the IR of @f7 (testing.verify_each): @f7 %"),
            "{line}"
        );
        // Off, nothing is verified: the broken function comes out (no later pass reads it).
        let off = passel(&["run", input, "-O3", "-j", threads, "--passes", "FoldConstant,testing.FailOn"]);
        assert!(off.status.success(), "{}", String::from_utf8_lossy(&off.stderr));
        assert!(String::from_utf8_lossy(&off.stdout).contains("%testing_unbound"));
    }
    let path = dir.join("r.pir");
    let path = path.to_str().expect("utf-8");
    let run = passel(&["run", input, "-O3", "--passes", PIPELINE, "--verify-each", "--reproducer", path]);
    assert_eq!(run.status.code(), Some(1));
    let text = std::fs::read_to_string(path).expect("reproducer written");
    assert!(text.lines().next().is_some_and(|l| l.contains("--config=testing.verify_each=true")), "{text}");
    let help = passel(&["run", "--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("--verify-each"));
}
