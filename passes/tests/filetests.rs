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
//! `UPDATE_EXPECT=1 cargo test -p passel-passes --test filetests` rewrites the expectations in
//! place; review the diff before committing.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

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
        let (input, expected) = match chunk.split_once(&format!("{CHECK}\n")) {
            Some((i, e)) => (i, e),
            None => (chunk, ""),
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

fn filetest_dirs() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .expect("filetests dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

#[test]
fn filetests_match_expected_output() {
    let update = std::env::var_os("UPDATE_EXPECT").is_some();
    let mut failures = Vec::new();
    let mut n_cases = 0;
    for dir in filetest_dirs() {
        let pass = dir.file_name().unwrap().to_string_lossy().to_string();
        let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        files.sort();
        for file in files.into_iter().filter(|f| f.extension().is_some_and(|e| e == "pir")) {
            let text = std::fs::read_to_string(&file).unwrap();
            let cases = split_cases(&text);
            let mut rendered = Vec::new();
            for case in &cases {
                n_cases += 1;
                assert!(
                    case.input.lines().any(|l| l.starts_with("/// Check that")),
                    "{}:{}: case has no `/// Check that …` line",
                    file.display(),
                    case.line
                );
                let actual = run_case(&case.input, &pipeline_of(&case.input, &pass));
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
                std::fs::write(&file, render(&rendered)).unwrap();
            }
        }
    }
    assert!(n_cases > 0, "no filetests found");
    if !update {
        assert!(
            failures.is_empty(),
            "{} filetest case(s) failed (UPDATE_EXPECT=1 rewrites):\n{}",
            failures.len(),
            failures.join("\n")
        );
    }
}

#[test]
fn every_registered_pass_has_filetests() {
    let dirs: Vec<String> =
        filetest_dirs().iter().map(|d| d.file_name().unwrap().to_string_lossy().to_string()).collect();
    let missing: Vec<_> =
        passel_passes::standard_pass_names().into_iter().filter(|p| !dirs.iter().any(|d| d == p)).collect();
    assert!(missing.is_empty(), "passes without filetests: {missing:?}");
}
