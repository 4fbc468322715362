//! Focused IR printing (`PrintIrInstrument::changed_functions`, `after_failure`, `filter`,
//! `diff`): what each prints, and that it is the same at 1, 2 and 8 threads.

use std::sync::{Arc, Mutex};

use passel_engine::ir::{parse_module, Function, Module};
use passel_engine::transform::{
    function_pass, sequential, Pass, PassContext, PassError, PrintIrInstrument, Sequential, Sink,
};

const SRC: &str = "\
def @a(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %y = negative(%x);
  %y
}

def @b(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %y = relu(%x);
  %y
}

def @c(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  let %y = relu(%x);
  %y
}
";

/// Replaces every `relu` function by a `negative` one (changes @b and @c); with `fail_on`, fails
/// on that function instead.
fn relu_to_negative(fail_on: Option<&'static str>) -> Sequential {
    let swap = function_pass("Swap", 0, move |func: Arc<Function>, module: &Module, _ctx| {
        let name = module.iter().find(|(_, f)| Arc::ptr_eq(f, &func)).map(|(n, _)| n.to_string()).unwrap_or_default();
        if fail_on == Some(name.as_str()) {
            return Err(PassError::msg("planted failure"));
        }
        let text = passel_engine::ir::print_function("t", &func);
        if !text.contains("relu") {
            return Ok(func);
        }
        let m = parse_module(&text.replace("relu", "negative")).map_err(|_| PassError::msg("reparse"))?;
        Ok(m.get("t").cloned().unwrap_or(func))
    });
    let keep = function_pass("Keep", 0, |func, _, _| Ok(func));
    sequential("S", vec![keep.shared(), swap.shared()])
}

fn printed(inst: PrintIrInstrument, pipeline: &Sequential, threads: usize) -> (String, bool) {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink: Sink = buf.clone();
    let ctx =
        PassContext::builder().num_threads(threads).instrument(Arc::new(inst.to_sink(sink))).build().expect("context");
    let module = parse_module(SRC).expect("parses");
    let ok = ctx.scope(|| pipeline.run(module, &ctx)).expect("scope").is_ok();
    let text = String::from_utf8(buf.lock().expect("lock").clone()).expect("utf8");
    (text, ok)
}

/// The output at 1 thread, checked equal at 2 and 8.
fn same_at_any_thread_count(make: impl Fn() -> PrintIrInstrument, pipeline: &Sequential) -> (String, bool) {
    let serial = printed(make(), pipeline, 1);
    for threads in [2, 8] {
        assert_eq!(printed(make(), pipeline, threads), serial, "{threads} threads");
    }
    serial
}

#[test]
fn after_change_prints_only_the_changed_functions() {
    let (text, ok) = same_at_any_thread_count(
        || PrintIrInstrument::new().after_change().changed_functions(),
        &relu_to_negative(None),
    );
    assert!(ok);
    let expected_b = "def @b(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  let %y = negative(%x);\n  %y\n}\n";
    assert!(text.starts_with("PrintIR(after Swap, changed: @b, @c):\n"), "{text}");
    assert!(text.contains(expected_b) && !text.contains("def @a"), "{text}");
    // The enclosing sequential changed the same functions.
    assert!(text.contains("PrintIR(after S, changed: @b, @c):\n"), "{text}");
    assert!(!text.contains("after Keep"), "Keep changed nothing: {text}");
}

#[test]
fn module_scope_prints_the_whole_module() {
    let (text, _) = same_at_any_thread_count(|| PrintIrInstrument::new().after_change(), &relu_to_negative(None));
    assert!(text.starts_with("PrintIR(after Swap):\ndef @a("), "{text}");
}

#[test]
fn filter_restricts_every_print_to_the_named_functions() {
    let (text, _) = same_at_any_thread_count(
        || PrintIrInstrument::new().after_all().after_change().changed_functions().filter("@c"),
        &relu_to_negative(None),
    );
    assert!(text.contains("def @c(") && !text.contains("def @b(") && !text.contains("def @a("), "{text}");
    assert!(text.starts_with("PrintIR(after Keep):\ndef @c("), "{text}");
    let (none, _) =
        same_at_any_thread_count(|| PrintIrInstrument::new().after_all().filter("missing"), &relu_to_negative(None));
    assert_eq!(none, "");
}

#[test]
fn diff_prints_a_unified_diff_per_changed_function() {
    let (text, _) = same_at_any_thread_count(|| PrintIrInstrument::new().diff(), &relu_to_negative(None));
    let swap = text.split("PrintIR(diff S):").next().unwrap_or_default();
    assert_eq!(
        swap,
        "PrintIR(diff Swap):\n\
         --- @b (before Swap)\n+++ @b (after Swap)\n@@ -1,4 +1,4 @@\n def @b(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n\
         -  let %y = relu(%x);\n+  let %y = negative(%x);\n   %y\n }\n\
         --- @c (before Swap)\n+++ @c (after Swap)\n@@ -1,4 +1,4 @@\n def @c(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n\
         -  let %y = relu(%x);\n+  let %y = negative(%x);\n   %y\n }\n"
    );
}

#[test]
fn after_failure_prints_the_failing_pass_input_once() {
    let (text, ok) =
        same_at_any_thread_count(|| PrintIrInstrument::new().after_failure(), &relu_to_negative(Some("c")));
    assert!(!ok);
    assert_eq!(text.matches("PrintIR(").count(), 1, "{text}");
    assert!(text.starts_with("PrintIR(after failure Swap):\ndef @a("), "{text}");
    assert!(text.contains("relu"), "the input, before the failing pass: {text}");
}
