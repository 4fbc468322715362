//! The CLI under hostile or careless use (issue #20): failed writes, watch on missing paths
//! and symlinks, skipped-pass notes, capped and clipped error rendering, type errors in
//! `check`, and the run/check round trip. Each test runs the built binary on a reproducer at
//! small size.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

#[path = "support/cli.rs"]
mod cli;
use cli::{bin, passel, stderr, temp_dir, write};

/// A module large enough (about 100 KB printed) that its output cannot fit in a pipe buffer.
fn big_module(dir: &Path) -> PathBuf {
    let out = passel(&["gen", "chain", "--functions", "200", "--ops", "10"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let path = dir.join("big.pir");
    std::fs::write(&path, &out.stdout).expect("write");
    path
}

fn dev_full() -> Stdio {
    Stdio::from(std::fs::OpenOptions::new().write(true).open("/dev/full").expect("/dev/full exists"))
}

fn assert_no_panic(out: &Output, what: &str) {
    let err = stderr(out);
    assert_ne!(out.status.code(), Some(101), "{what} panicked: {err}");
    assert!(!err.contains("panicked"), "{what} panicked: {err}");
}

/// Runs `args` with the reading end of stdout (or stderr) closed before the command writes.
fn with_closed_pipe(args: &[&str], stream_is_stderr: bool) -> (Option<i32>, String) {
    let mut cmd = bin();
    cmd.args(args).stdin(Stdio::null());
    if stream_is_stderr {
        cmd.stdout(Stdio::null()).stderr(Stdio::piped());
    } else {
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    }
    let mut child = cmd.spawn().expect("spawn");
    let mut other = String::new();
    if stream_is_stderr {
        drop(child.stderr.take());
    } else {
        drop(child.stdout.take());
        // More than a pipe buffer is written to stdout, so a write fails after the drop.
        child.stderr.take().expect("stderr").read_to_string(&mut other).expect("read stderr");
    }
    let status = child.wait().expect("wait");
    (status.code(), other)
}

#[test]
fn closed_pipe_on_stdout_or_stderr_ends_quietly_with_141() {
    let dir = temp_dir("pipe");
    let big = big_module(&dir);
    let big = big.to_str().expect("utf-8 path");
    for args in [&["gen", "chain", "--functions", "300", "--ops", "10"][..], &["fmt", big], &["run", big]] {
        let (code, err) = with_closed_pipe(args, false);
        assert_eq!(code, Some(141), "{args:?}: {err}");
        assert!(err.is_empty(), "{args:?} wrote to stderr: {err}");
    }
    // `passel run --print-ir-after all -o /dev/null m.pir 2>&1 | head -1` used to panic.
    let (code, _) = with_closed_pipe(&["run", "-j", "1", "--print-ir-after", "all", "-o", "/dev/null", big], true);
    assert_eq!(code, Some(141));
}

#[test]
fn failed_writes_to_stderr_or_stdout_exit_1_without_a_panic() {
    let dir = temp_dir("full");
    let big = big_module(&dir);
    let big = big.to_str().expect("utf-8 path");
    let bad = write(&dir, "bad.pir", "def @f( {");
    let bad = bad.to_str().expect("utf-8 path");
    let stderr_full: &[&[&str]] = &[
        &["check", big],
        &["check", bad],
        &["run", "--timing", "-o", "/dev/null", big],
        &["run", "--print-ir-after", "all", "-o", "/dev/null", big],
        &["bench", "--functions", "4", "--ops", "4", "--repeats", "1", "--threads", "1", "--no-incremental"],
        &["watch", "--max-runs", "1", "/nonexistent/m.pir"],
    ];
    for args in stderr_full {
        let out =
            bin().args(*args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(dev_full()).output().expect("run");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
    }
    for args in [&["gen", "chain"][..], &["fmt", big], &["run", big], &["passes"], &["watch", "--max-runs", "1", big]] {
        let out = bin().args(args).stdin(Stdio::null()).stdout(dev_full()).output().expect("run");
        assert_no_panic(&out, &format!("{args:?}"));
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.matches("error:").count(), 1, "{args:?} must report once: {err}");
        assert!(err.contains("No space left on device"), "{args:?}: {err}");
    }
    let out = passel(&["run", big, "-o", "/nonexistent-dir/out.pir"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("cannot write /nonexistent-dir/out.pir"), "{}", stderr(&out));
}

/// Waits for `child` at most `secs` seconds; kills it and fails the test if it is still running.
fn wait_bounded(child: &mut std::process::Child, secs: u64, what: &str) -> std::process::ExitStatus {
    let start = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("wait") {
            return status;
        }
        if start.elapsed() > std::time::Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not exit within {secs} s");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

#[test]
fn watch_on_a_missing_file_or_a_directory_is_an_error_not_a_hang() {
    let dir = temp_dir("watch-missing");
    let missing = dir.join("missing.pir");
    for (path, reason) in [(missing.as_path(), "No such file"), (dir.as_path(), "it is a directory")] {
        let mut child = bin()
            .args(["watch", "--max-runs", "1"])
            .arg(path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let status = wait_bounded(&mut child, 30, "watch on a missing path");
        let mut err = String::new();
        child.stderr.take().expect("stderr").read_to_string(&mut err).expect("read");
        assert_eq!(status.code(), Some(1), "{err}");
        assert!(err.contains(&format!("error: cannot watch {}", path.display())) && err.contains(reason), "{err}");
    }
}

#[cfg(unix)]
#[test]
fn watch_through_a_symlink_sees_edits_of_its_target() {
    let dir = temp_dir("watch-link");
    std::fs::create_dir_all(dir.join("real")).expect("dir");
    std::fs::create_dir_all(dir.join("links")).expect("dir");
    let v1 = "def @main(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {\n  relu(%x)\n}\n";
    let target = write(&dir.join("real"), "m.pir", v1);
    let link = dir.join("links").join("link.pir");
    std::os::unix::fs::symlink(&target, &link).expect("symlink");
    let log = dir.join("log.txt");
    let mut child = bin()
        .args(["watch", "--max-runs", "2", "-j", "1"])
        .arg(&link)
        .stdin(Stdio::null())
        .stdout(Stdio::from(std::fs::File::create(&log).expect("log")))
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let start = std::time::Instant::now();
    while !std::fs::read_to_string(&log).unwrap_or_default().contains("run 1:") {
        assert!(start.elapsed() < std::time::Duration::from_secs(60), "no first run");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // Edit the target in place, in its own directory (the link's directory sees no event).
    std::fs::write(&target, v1.replace("relu", "negative")).expect("edit");
    let status = wait_bounded(&mut child, 60, "watch through a symlink");
    assert!(status.success());
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(text.contains("run 2: 1 functions, 1 edited, 1 recomputed (@main)"), "{text}");
}

#[test]
fn verifier_errors_are_capped_and_say_how_many_were_omitted() {
    let dir = temp_dir("verify-cap");
    let mut text = String::from("def @f(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {\n");
    for i in 0..1000 {
        text.push_str(&format!("  let %v{i} = @g{i}(%x);\n"));
    }
    text.push_str("  %x\n}\n");
    let path = write(&dir, "many.pir", &text);
    let out = passel(&["check", path.to_str().expect("utf-8")]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(err.matches("unknown global function").count(), 2 * 100, "{err}");
    assert!(err.contains("error: 900 more error(s) omitted (1000 in all; the first 100 are shown)"), "{err}");
    // Line numbers stay exact although the source is scanned once for all errors.
    assert!(err.contains("many.pir:101:14]"), "{err}");
}

#[test]
fn long_lines_are_clipped_around_the_span() {
    let dir = temp_dir("clip");
    // 1 MB on one line: `def def def …` (the 10 MB reproducer at small size).
    let path = write(&dir, "defs.pir", &"def ".repeat(250_000));
    let out = passel(&["check", path.to_str().expect("utf-8")]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1));
    assert!(err.len() < 100_000, "{} bytes of errors", err.len());
    let longest = err.lines().map(|l| l.chars().count()).max().unwrap_or(0);
    assert!(longest < 200, "a rendered line has {longest} characters");
    assert!(err.contains("error: too many errors: parsing stopped after 100"), "{err}");
    // A span far into a long line: the snippet is clipped on both sides, the column is exact.
    let mut text = String::from("def @f(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {");
    text.push_str(&" ".repeat(5000));
    text.push_str("add(%x, %nope) }\n");
    let path = write(&dir, "far.pir", &text);
    let err = stderr(&passel(&["check", path.to_str().expect("utf-8")]));
    assert!(err.contains("1:5061: undefined variable `%nope`") && err.contains("far.pir:1:5061]"), "{err}");
    assert!(err.contains("… ") && err.contains("add(%x, %nope) }"), "{err}");
    assert!(err.lines().all(|l| l.chars().count() < 200), "{err}");
}

const SMALL: &str = "def @f(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {\n  add(%x, 1.0f)\n}\n";

#[test]
fn a_pass_the_opt_level_skips_and_an_overridden_disable_are_noted() {
    let dir = temp_dir("notes");
    let m = write(&dir, "m.pir", SMALL);
    let m = m.to_str().expect("utf-8");
    let out = passel(&["run", "-O0", "--passes", "EliminateCommonSubexpr", m]);
    assert!(out.status.success());
    assert!(
        stderr(&out).contains(
            "note: pass EliminateCommonSubexpr is skipped: its opt level is 1 and this run's is 0; pass -O1 or \
             --require EliminateCommonSubexpr to run it"
        ),
        "{}",
        stderr(&out)
    );
    for args in [
        &["run", "--passes", "EliminateCommonSubexpr", m][..],
        &["run", "-O0", "--require", "EliminateCommonSubexpr", "--passes", "EliminateCommonSubexpr", m],
        &["run", m],
    ] {
        let out = passel(args);
        assert!(!stderr(&out).contains("note:"), "{args:?}: {}", stderr(&out));
    }
    let out = passel(&["run", "--disable", "InferType", "--passes", "SimplifyExpr,FoldConstant", m]);
    assert_eq!(
        stderr(&out),
        "note: --disable InferType has no effect here: it runs anyway before SimplifyExpr, which require(s) it\n"
    );
}

const TYPE_ERRORS: &str = "\
def @a(%x: Tensor[(4,), f32]) -> Tensor[(4,), i32] {
  relu(%x)
}

def @b(%c: Tensor[(), bool], %x: Tensor[(4,), f32]) {
  if (%c) { %x } else { 1 }
}

def @t(%x: Tensor[(4,), f32]) {
  let %p = (%x, %x);
  %p.5
}
";

#[test]
fn check_rejects_the_type_errors_run_rejects_with_their_location() {
    let dir = temp_dir("types");
    let m = write(&dir, "m.pir", TYPE_ERRORS);
    let out = passel(&["check", m.to_str().expect("utf-8")]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for (message, location) in [
        ("body has type Tensor[(4,), f32], declared result is Tensor[(4,), i32]", "m.pir:2:3]"),
        ("branches have different types: Tensor[(4,), f32] and Tensor[(), i64]", "m.pir:6:3]"),
        ("projection .5 of a tuple of 2 fields", "m.pir:11:3]"),
    ] {
        assert!(err.contains(message) && err.contains(location), "{message} at {location}: {err}");
    }
    // Wrong arity on a `fn` value: the verifier's, so check and run both refuse it.
    let arity = "def @g(%f: fn(Tensor[(4,), f32]) -> Tensor[(4,), f32], %x: Tensor[(4,), f32]) {\n  %f(%x, %x)\n}\n";
    let g = write(&dir, "g.pir", arity);
    for cmd in ["check", "run"] {
        let out = passel(&[cmd, g.to_str().expect("utf-8")]);
        assert_eq!(out.status.code(), Some(1));
        assert!(stderr(&out).contains("callee takes 1 arguments, got 2"), "{}", stderr(&out));
    }
}

#[test]
fn run_reports_each_diagnostic_once_with_its_span_and_snippet() {
    let dir = temp_dir("run-diags");
    let m = write(&dir, "m.pir", TYPE_ERRORS);
    let out = passel(&["run", m.to_str().expect("utf-8")]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(err.matches("error in pass InferType @a:").count(), 1, "{err}");
    assert_eq!(err.matches("error in pass InferType @t:").count(), 1, "{err}");
    assert!(err.contains("m.pir:11:3]") && err.contains("%p.5"), "{err}");
}

/// `def @f(%x) { let %v0 = relu(%x); let %v1 = relu(%v0); … }` with `n` bindings.
fn binding_chain(n: usize) -> String {
    let mut s = String::from("def @f(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {\n");
    for i in 0..n {
        let arg = if i == 0 { "%x".to_string() } else { format!("%v{}", i - 1) };
        s.push_str(&format!("  let %v{i} = relu({arg});\n"));
    }
    s.push_str(&format!("  %v{}\n}}\n", n - 1));
    s
}

/// Runs `passel run ARGS FILE`, then `passel check` on what it printed.
fn run_then_check(dir: &Path, input: &Path, args: &[&str]) -> (String, Output) {
    let out = bin().arg("run").args(args).arg(input).stdin(Stdio::null()).output().expect("run");
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let printed = String::from_utf8(out.stdout).expect("utf-8");
    let path = write(dir, "out.pir", &printed);
    let check = passel(&["check", path.to_str().expect("utf-8")]);
    (printed, check)
}

#[test]
fn whatever_run_prints_check_accepts_even_when_passes_nest_deeply() {
    let dir = temp_dir("nesting");
    let chain = write(&dir, "chain.pir", &binding_chain(1000));
    for args in [
        &["--passes", "ToGraphNormalForm"][..],
        &["--passes", "FuseOps", "--config", "relay.FuseOps.max_depth=2000"],
        &["-O3", "--passes", "ToGraphNormalForm,FuseOps", "--config", "relay.FuseOps.max_depth=2000"],
    ] {
        let (printed, check) = run_then_check(&dir, &chain, args);
        assert!(check.status.success(), "{args:?}: {}", stderr(&check));
        assert!(printed.contains("let %nest"), "{args:?}: deep expressions are bound to variables");
    }
    // 60 nested `if`s around a 450-binding chain, which ToGraphNormalForm turns into a
    // 450-deep expression: hoisting inside blocks counts the blocks' depth.
    let mut inner: String = (0..450)
        .map(|i| format!("let %a{i} = relu({}); ", if i == 0 { "%x".to_string() } else { format!("%a{}", i - 1) }))
        .collect();
    inner.push_str("%a449");
    for _ in 0..60 {
        inner = format!("if (%c) {{ {inner} }} else {{ %x }}");
    }
    let text = format!("def @f(%c: Tensor[(), bool], %x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {{\n  {inner}\n}}\n");
    let deep = write(&dir, "deep.pir", &text);
    let (_, check) = run_then_check(&dir, &deep, &["--passes", "ToGraphNormalForm"]);
    assert!(check.status.success(), "{}", stderr(&check));
}

/// `depth` `if`s nested in @name around `inner`.
fn nested_ifs(name: &str, depth: usize, inner: &str, attrs: &str) -> String {
    let mut body = inner.to_string();
    for i in 0..depth {
        body = format!("if (%c) {{ let %v{i} = negative(%x); {body} }} else {{ %x }}");
    }
    format!("{attrs}def @{name}(%x: Tensor[(4,), f32], %c: Tensor[(), bool]) -> Tensor[(4,), f32] {{ {body} }}\n")
}

/// Bodies cannot be hoisted: Inline of a 200-deep function into a 200-deep caller, and FuseOps
/// at the deepest level of 254 nested `if`s, used to print text `check` rejects.
#[test]
fn whatever_run_prints_check_accepts_when_passes_would_nest_bodies_too_deep() {
    let dir = temp_dir("body-nesting");
    let inline = nested_ifs("g", 200, "%x", "#[Inline]\n") + &nested_ifs("main", 200, "@g(%x, %c)", "");
    let inline = write(&dir, "inline.pir", &inline);
    let (_, check) = run_then_check(&dir, &inline, &[]);
    assert!(check.status.success(), "{}", stderr(&check));
    let mut body = "let %a = negative(%x); let %b = relu(%a); exp(%b)".to_string();
    for _ in 0..254 {
        body = format!("if (%c) {{ {body} }} else {{ %x }}");
    }
    let fuse = format!("def @main(%x: Tensor[(4,), f32], %c: Tensor[(), bool]) -> Tensor[(4,), f32] {{ {body} }}\n");
    let fuse = write(&dir, "fuse.pir", &fuse);
    let (_, check) = run_then_check(&dir, &fuse, &["-O3"]);
    assert!(check.status.success(), "{}", stderr(&check));
}

/// Characters that print as blanks are named and escaped in messages; a byte-order mark at
/// the start is skipped (as rustc does); invalid UTF-8 is reported with its line, column and
/// byte offset, by `check` and by `watch`.
#[test]
fn invisible_characters_and_invalid_utf8_are_shown_where_they_are() {
    let dir = temp_dir("invisible");
    let bom = write(&dir, "bom.pir", "\u{feff}def @f() { 1.0f }\n");
    let out = passel(&["check", bom.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    for (name, text, shown) in [
        ("nbsp.pir", "def @f() {\u{a0}1.0f }\n", "`\\u{a0}` (a no-break space)"),
        ("nul.pir", "def @f() { 1.0f \0}\n", "`\\u{0}` (a NUL byte)"),
        ("bom2.pir", "def @f() { \u{feff}1.0f }\n", "`\\u{feff}` (a byte-order mark)"),
    ] {
        let path = write(&dir, name, text);
        let out = passel(&["check", path.to_str().unwrap()]);
        assert!(!out.status.success());
        assert!(stderr(&out).contains(shown), "{name}: {}", stderr(&out));
    }
    let bad = dir.join("bad.pir");
    std::fs::write(&bad, b"def @f() { 1.0f }\n// caf\xc3\xa9 \xff\n").expect("write");
    let out = passel(&["check", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("bad.pir:2:9: not UTF-8 text: byte 0xff at offset 27 is invalid"),
        "{}",
        stderr(&out)
    );
    let out = passel(&["watch", bad.to_str().unwrap(), "--max-runs", "1"]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(report.contains("bad.pir:2:9: not UTF-8 text"), "{report}{}", stderr(&out));
}

#[test]
fn text_that_parses_prints_unchanged_up_to_the_nesting_limit() {
    let dir = temp_dir("nesting-edge");
    // 510 nested calls under a function body: the deepest text the parser accepts.
    let mut e = "%x".to_string();
    for _ in 0..510 {
        e = format!("relu({e})");
    }
    let text = format!("def @f(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {{\n  {e}\n}}\n");
    let path = write(&dir, "edge.pir", &text);
    let out = passel(&["fmt", path.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(String::from_utf8(out.stdout).expect("utf-8"), text);
    let deeper = write(&dir, "deeper.pir", &text.replace("%x)", "relu(%x))"));
    let out = passel(&["check", deeper.to_str().expect("utf-8")]);
    assert!(stderr(&out).contains("nesting deeper than 512 levels"), "{}", stderr(&out));
}

/// `passel check` on a one-function module whose body is `body`; returns (success, stderr).
fn check_body(dir: &Path, body: &str) -> (bool, String) {
    let text = format!("def @f(%x: Tensor[(4,), f32]) {{\n  {body}\n}}\n");
    let path = write(dir, "lit.pir", &text);
    let out = passel(&["check", path.to_str().expect("utf-8")]);
    (out.status.success(), stderr(&out))
}

#[test]
fn literals_that_overflow_or_cannot_hold_their_value_are_errors() {
    let dir = temp_dir("literals");
    for (body, message) in [
        ("1e39f", "number `1e39f` is out of range for f32"),
        ("tensor<(2,), f32>[1.0, 1e39]", "`1e39` is not a valid f32 value"),
        ("full<(4,), i32>(1.5)", "fill value 1.5 is not a valid i32 value"),
        ("uniform<(4,), f32>(seed=1, low=2.0, high=1.0)", "uniform needs finite bounds with low <= high"),
        ("uniform<(4,), f32>(seed=1, low=nan, high=1.0)", "uniform needs finite bounds with low <= high"),
    ] {
        let (ok, err) = check_body(&dir, body);
        assert!(!ok && err.contains(message), "{body}: {err}");
    }
    // `inf` and `nan` are literals, as `-inf` is; `1e38f` still fits.
    for body in ["add(%x, inf)", "add(%x, nan)", "add(%x, -inf)", "add(%x, 1e38f)", "full<(4,), i32>(3.0)"] {
        let (ok, err) = check_body(&dir, body);
        assert!(ok, "{body}: {err}");
    }
}

#[test]
fn config_values_out_of_range_are_errors_and_booleans_ignore_case() {
    let dir = temp_dir("config");
    let m = write(&dir, "m.pir", SMALL);
    let m = m.to_str().expect("utf-8");
    for (config, message) in [
        ("relay.FuseOps.max_depth=-1", "config key `relay.FuseOps.max_depth` expects an int of at least 0, got -1"),
        ("relay.Inline.max_size=-5", "config key `relay.Inline.max_size` expects an int of at least 0, got -5"),
        // Every size key refuses a negative value and a bool (it read -1 as 0 and `true` as 1).
        ("relay.Inline.max_growth=-1", "config key `relay.Inline.max_growth` expects an int of at least 0, got -1"),
        (
            "relay.FoldConstant.max_bytes=-1",
            "config key `relay.FoldConstant.max_bytes` expects an int of at least 0, got -1",
        ),
        ("relay.FoldConstant.max_bytes=true", "config key `relay.FoldConstant.max_bytes` expects int, got bool"),
        ("relay.FuseOps.max_depth=false", "config key `relay.FuseOps.max_depth` expects int, got bool"),
        ("relay.FuseOps.max_depth=99999999999999999999", "expects a 64-bit int, got 99999999999999999999"),
    ] {
        let out = passel(&["run", "--config", config, m]);
        assert_eq!(out.status.code(), Some(1));
        assert!(stderr(&out).contains(message), "{config}: {}", stderr(&out));
        assert!(!stderr(&out).contains("got float"), "{config}: {}", stderr(&out));
    }
    for value in ["true", "TRUE", "True", "false", "FALSE", "1", "0"] {
        let out =
            passel(&["run", "--passes", "FoldConstant", "--config", &format!("testing.immutable_module={value}"), m]);
        assert!(!stderr(&out).contains("expects"), "{value}: {}", stderr(&out));
    }
}

/// `check` type-checks as `run`'s InferType does: a shape error the verifier cannot see (the
/// binding is unannotated) is reported with its function and line, every one of them, in module
/// order; well-typed functions around them do not matter.
#[test]
fn check_reports_each_type_error_with_its_function_and_line() {
    let dir = temp_dir("check-types");
    let text = "def @ok(%a: Tensor[(4), f32]) -> Tensor[(4), f32] {\n  relu(%a)\n}\n\n\
                def @f(%a: Tensor[(4), f32], %z: Tensor[(3), f32]) -> Tensor[(4), f32] {\n  \
                let %v = relu(%a);\n  let %w = add(%v, %z);\n  %w\n}\n\n\
                def @g(%a: Tensor[(2), f32], %z: Tensor[(5), f32]) -> Tensor[(2), f32] {\n  \
                let %v = relu(%a);\n  let %w = multiply(%v, %z);\n  %w\n}\n";
    let path = write(&dir, "types.pir", text);
    let out = passel(&["check", path.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let err = stderr(&out);
    let (f, g) = (err.find("type error in @f: add"), err.find("type error in @g: multiply"));
    assert!(f.is_some_and(|f| g.is_some_and(|g| f < g)), "{err}");
    assert!(err.contains("types.pir:7:12") && err.contains("types.pir:13:12"), "{err}");
    assert!(!err.contains("@ok"), "{err}");
}
