//! Text-in, text-out tests of the standard passes (cranelift's `precise-output`, MLIR's
//! `-split-input-file`).
//!
//! Each file `filetests/<PassName>/<feature>.pir` holds cases separated by `// -----`. A case
//! is a `/// Check that …` line, `.pir` input, then `// CHECK:` followed by the expected output,
//! every line prefixed with `// `. The input runs through the pass named by the directory (or
//! by a `// pipeline: A,B` line in the case), called directly as TVM does: opt level and
//! disabled lists do not apply. The output is the printed module, or `error: …` lines. Every
//! case runs under `testing.verify_each` (`run_pipeline_text`), so a pass whose output does
//! not verify fails the case with an error naming it.
//!
//! Every file is one test named `<pass>::<file>` in snake case (`FoldConstant/tuples-and-if.pir`
//! is `fold_constant::tuples_and_if`), so a failure names its file and
//! `cargo test -p passel-passes --test filetests fold_constant::tuples_and_if` runs it alone.
//! `UPDATE_EXPECT=1 cargo test -p passel-passes --test filetests` rewrites the expectations in
//! place; review the diff before committing.
//!
//! The tests are the directory listing at run time, so this target has its own `main`
//! (`harness = false`) that takes libtest's command line (filters, `--exact`, `--skip`,
//! `--list`) and prints libtest's report. Generating `#[test]` functions instead would need a
//! build script watching `tests/filetests/`, and a build script that reruns recompiles the whole
//! crate on every edit of an expectation.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const SEPARATOR: &str = "// -----";
const CHECK: &str = "// CHECK:";

struct Case {
    /// Input text (everything before `// CHECK:`), including the `///` line.
    input: String,
    /// Expected output, without the `// ` prefixes.
    expected: String,
    /// 1-based line of the case in its file.
    line: usize,
}

fn split_cases(text: &str) -> Vec<Case> {
    let mut cases = Vec::new();
    let mut line = 1;
    for chunk in text.split(&format!("\n{SEPARATOR}\n")) {
        // The separator takes the newline of the line before it, so give it back: a case whose
        // expectation is empty ends in a bare `// CHECK:`. (The file's last case keeps its own.)
        let chunk = if chunk.ends_with('\n') { chunk.to_string() } else { format!("{chunk}\n") };
        let (input, expected) = match chunk.split_once(&format!("{CHECK}\n")) {
            Some((i, e)) => (i, e),
            None => (chunk.as_str(), ""),
        };
        let expected: String = expected
            .lines()
            .map(|l| l.strip_prefix("// ").or_else(|| l.strip_prefix("//")).unwrap_or(l))
            .fold(String::new(), |mut s, l| {
                s.push_str(l);
                s.push('\n');
                s
            });
        cases.push(Case { input: input.trim_end().to_string() + "\n", expected, line });
        line += chunk.lines().count() + 1;
    }
    cases
}

fn render(cases: &[(String, String)]) -> String {
    let mut out = String::new();
    for (i, (input, output)) in cases.iter().enumerate() {
        if i > 0 {
            writeln!(out, "{SEPARATOR}").unwrap();
        }
        out.push_str(input);
        writeln!(out, "{CHECK}").unwrap();
        for l in output.lines() {
            if l.is_empty() {
                out.push_str("//\n");
            } else {
                writeln!(out, "// {l}").unwrap();
            }
        }
    }
    out
}

fn pipeline_of(case: &str, dir_pass: &str) -> String {
    case.lines()
        .find_map(|l| l.strip_prefix("// pipeline:"))
        .map(|p| p.trim().to_string())
        .unwrap_or_else(|| dir_pass.to_string())
}

fn run_case(input: &str, pipeline: &str) -> String {
    let module = match passel_engine::ir::parse_module(input) {
        Ok(m) => m,
        Err(e) => return format!("error: input does not parse: {e}\n"),
    };
    match passel_passes::run_pipeline_text(pipeline, module) {
        Ok(m) => passel_engine::ir::print_module(&m),
        Err(e) => e.lines().map(|l| format!("error: {l}\n")).collect(),
    }
}

fn filetests_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests")
}

/// The pass directories, sorted.
fn filetest_dirs() -> Vec<PathBuf> {
    let root = filetests_root();
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|e| e.expect("directory entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn file_name(path: &Path) -> String {
    path.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default()
}

/// `FoldConstant` -> `fold_constant`, `tuples-and-if` -> `tuples_and_if`.
fn snake_case(name: &str) -> String {
    let mut out = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c.is_ascii_uppercase() {
            if prev_lower {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
            prev_lower = false;
        } else if c.is_ascii_alphanumeric() {
            out.push(c);
            prev_lower = true;
        } else {
            out.push('_');
            prev_lower = false;
        }
    }
    out
}

/// One test: its name and what it checks.
struct Test {
    name: String,
    run: Box<dyn Fn() -> Result<(), String>>,
}

/// Every `.pir` file under a pass directory, then the registry check.
fn tests() -> Vec<Test> {
    let mut tests = Vec::new();
    for dir in filetest_dirs() {
        let pass = file_name(&dir);
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| e.expect("directory entry").path())
            .filter(|f| f.extension().is_some_and(|e| e == "pir"))
            .collect();
        files.sort();
        for file in files {
            let stem = file.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_default();
            let name = format!("{}::{}", snake_case(&pass), snake_case(&stem));
            let pass = pass.clone();
            tests.push(Test { name, run: Box::new(move || check_file(&file, &pass)) });
        }
    }
    tests.push(Test {
        name: "every_registered_pass_has_filetests".to_string(),
        run: Box::new(every_registered_pass_has_filetests),
    });
    tests
}

/// Runs every case of `file` through `pass` (or its `// pipeline:`); with `UPDATE_EXPECT` set,
/// rewrites the file with the actual outputs instead of comparing.
fn check_file(file: &Path, pass: &str) -> Result<(), String> {
    let update = std::env::var_os("UPDATE_EXPECT").is_some();
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let cases = split_cases(&text);
    let mut failures = Vec::new();
    let mut rendered = Vec::new();
    for case in &cases {
        if !case.input.lines().any(|l| l.starts_with("/// Check that")) {
            return Err(format!("{}:{}: case has no `/// Check that …` line", file.display(), case.line));
        }
        let actual = run_case(&case.input, &pipeline_of(&case.input, pass));
        if actual != case.expected {
            failures.push(format!(
                "{}:{}: output differs\n--- expected\n{}--- actual\n{}",
                file.display(),
                case.line,
                case.expected,
                actual
            ));
        }
        rendered.push((case.input.clone(), actual));
    }
    if update {
        return std::fs::write(file, render(&rendered)).map_err(|e| format!("{}: {e}", file.display()));
    }
    if failures.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} of {} case(s) failed (UPDATE_EXPECT=1 rewrites):\n{}",
            failures.len(),
            cases.len(),
            failures.join("\n")
        ))
    }
}

fn every_registered_pass_has_filetests() -> Result<(), String> {
    let dirs: Vec<String> = filetest_dirs().iter().map(|d| file_name(d)).collect();
    let missing: Vec<_> =
        passel_passes::standard_pass_names().into_iter().filter(|p| !dirs.iter().any(|d| d == p)).collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("passes without filetests: {missing:?}"))
    }
}

/// The part of libtest's command line that selects and lists tests; the rest (`--nocapture`,
/// `--test-threads`, `--color`, …) does not change what these tests do and is accepted as is.
#[derive(Default)]
struct Args {
    filters: Vec<String>,
    skip: Vec<String>,
    exact: bool,
    list: bool,
    ignored: bool,
}

impl Args {
    fn parse(mut args: impl Iterator<Item = String>) -> Args {
        const WITH_VALUE: [&str; 6] = ["--test-threads", "--color", "--format", "--logfile", "-Z", "--shuffle-seed"];
        let mut parsed = Args::default();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--exact" => parsed.exact = true,
                "--list" => parsed.list = true,
                "--ignored" => parsed.ignored = true,
                "--skip" => parsed.skip.extend(args.next()),
                a if WITH_VALUE.contains(&a) => {
                    args.next();
                }
                a if a.starts_with('-') => {}
                _ => parsed.filters.push(arg),
            }
        }
        parsed
    }

    fn selects(&self, name: &str) -> bool {
        let matches = |f: &String| if self.exact { name == f } else { name.contains(f.as_str()) };
        (self.filters.is_empty() || self.filters.iter().any(matches)) && !self.skip.iter().any(matches)
    }
}

fn main() -> ExitCode {
    let args = Args::parse(std::env::args().skip(1));
    let all = tests();
    let n_all = all.len();
    // No test here is `#[ignore]`d, so `--ignored` selects none.
    let selected: Vec<_> = all.into_iter().filter(|t| !args.ignored && args.selects(&t.name)).collect();
    if args.list {
        for test in &selected {
            println!("{}: test", test.name);
        }
        return ExitCode::SUCCESS;
    }
    println!("\nrunning {} tests", selected.len());
    let mut failed = Vec::new();
    for test in &selected {
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (test.run)()))
            .unwrap_or_else(|panic| Err(format!("panicked: {}", panic_message(&*panic))));
        match res {
            Ok(()) => println!("test {} ... ok", test.name),
            Err(msg) => {
                println!("test {} ... FAILED", test.name);
                failed.push((&test.name, msg));
            }
        }
    }
    if !failed.is_empty() {
        println!("\nfailures:\n");
        for (name, msg) in &failed {
            println!("---- {name} ----\n{msg}\n");
        }
        println!("failures:");
        for (name, _) in &failed {
            println!("    {name}");
        }
    }
    println!(
        "\ntest result: {}. {} passed; {} failed; 0 ignored; 0 measured; {} filtered out\n",
        if failed.is_empty() { "ok" } else { "FAILED" },
        selected.len() - failed.len(),
        failed.len(),
        n_all - selected.len()
    );
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(101)
    }
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a non-string payload".to_string())
}
