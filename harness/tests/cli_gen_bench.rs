//! `passel gen KIND` and `passel bench` end to end: generated text checks, bench writes JSON
//! and SVG with every row, and bad arguments are clear errors with a non-zero exit code.

use std::process::{Command, Output, Stdio};

use passel_engine::ir::{parse_module, verify_module};

fn passel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_passel")).args(args).stdin(Stdio::null()).output().expect("the passel binary runs")
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn gen_every_kind_prints_a_module_that_parses_and_verifies() {
    for args in [
        &["gen", "chain", "--functions", "3", "--ops", "5"][..],
        &["gen", "mlp", "--layers", "3", "--width", "8", "--activation", "gelu"],
        &["gen", "cnn", "--blocks", "2", "--channels", "4", "--image", "6"],
        &["gen", "transformer", "--layers", "2", "--per-block", "--hidden", "8"],
        &["gen", "random", "--functions", "6", "--bindings", "12", "--max-depth", "3", "--seed", "9"],
    ] {
        let out = passel(args);
        assert!(out.status.success(), "{args:?}: {}", stderr(&out));
        let text = String::from_utf8(out.stdout).expect("utf-8 output");
        let module = parse_module(&text).unwrap_or_else(|e| panic!("{args:?}: {e:?}"));
        assert!(verify_module(&module).is_ok(), "{args:?} does not verify");
        assert!(!module.is_empty(), "{args:?} printed no functions");
    }
}

#[test]
fn gen_is_deterministic_and_the_seed_matters() {
    let a = passel(&["gen", "random", "--seed", "5"]).stdout;
    let b = passel(&["gen", "random", "--seed", "5"]).stdout;
    let c = passel(&["gen", "random", "--seed", "6"]).stdout;
    assert_eq!(a, b);
    assert_ne!(a, c);
}

#[test]
fn gen_help_documents_each_kinds_options() {
    for (kind, option) in [
        ("chain", "--ops"),
        ("mlp", "--width"),
        ("cnn", "--channels"),
        ("transformer", "--per-block"),
        ("random", "--max-depth"),
    ] {
        let out = passel(&["gen", kind, "--help"]);
        let help = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && help.contains(option), "{kind}: {help}");
    }
}

#[test]
fn gen_rejects_absurd_sizes_and_unknown_kinds() {
    let out = passel(&["gen", "mlp", "--width", "0"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("--width"), "{}", stderr(&out));
    let out = passel(&["gen", "cnn", "--image", "99999999999"]);
    assert!(!out.status.success());
    let out = passel(&["gen", "resnet"]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("resnet"), "{}", stderr(&out));
}

/// Checks tags open and close in order; enough to catch a broken writer.
fn assert_well_formed_xml(svg: &str) {
    let mut stack: Vec<&str> = Vec::new();
    let mut rest = svg;
    while let Some(start) = rest.find('<') {
        let end = rest[start..].find('>').expect("every `<` is closed by `>`") + start;
        let tag = &rest[start + 1..end];
        assert!(!tag.contains('<'), "`<` inside a tag: {tag}");
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop(), Some(name.trim()), "mismatched close tag");
        } else if !tag.ends_with('/') && !tag.starts_with('?') && !tag.starts_with('!') {
            stack.push(tag.split_whitespace().next().expect("tag name"));
        }
        let text = &rest[end + 1..rest[end + 1..].find('<').map_or(rest.len(), |i| i + end + 1)];
        assert!(!text.contains('>'), "unescaped `>` in text: {text}");
        for (i, _) in text.match_indices('&') {
            let entity = ["&amp;", "&lt;", "&gt;", "&quot;"].iter().any(|e| text[i..].starts_with(e));
            assert!(entity, "unescaped `&` in text: {text}");
        }
        rest = &rest[end + 1..];
    }
    assert!(stack.is_empty(), "unclosed tags: {stack:?}");
}

#[test]
fn bench_writes_json_and_svg_with_a_row_per_configuration() {
    let dir = std::env::temp_dir().join(format!("passel-bench-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let (json, svg) = (dir.join("out.json"), dir.join("out.svg"));
    let out = passel(&[
        "bench",
        "--workload",
        "random",
        "--functions",
        "12",
        "--threads",
        "1,2,3",
        "--repeats",
        "2",
        "--json",
        json.to_str().expect("utf-8 path"),
        "--svg",
        svg.to_str().expect("utf-8 path"),
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(table.lines().count(), 1 + 4 + 6, "{table}");

    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).expect("json written")).expect("the JSON parses");
    assert_eq!(v["workload"], "random");
    assert_eq!(v["functions"], 12);
    assert!(v["machine"]["cores"].as_u64().is_some_and(|c| c >= 1));
    let rows = v["rows"].as_array().expect("rows");
    let modes: Vec<(&str, u64)> =
        rows.iter().map(|r| (r["mode"].as_str().expect("mode"), r["threads"].as_u64().expect("threads"))).collect();
    assert_eq!(
        modes,
        [
            ("serial", 1),
            ("parallel", 1),
            ("parallel", 2),
            ("parallel", 3),
            ("session-cold", 3),
            ("session-nochange", 3),
            ("session-edit", 3),
            ("lean-cold", 3),
            ("lean-nochange", 3),
            ("lean-edit", 3)
        ]
    );
    for r in rows {
        // A no-change session re-run may take less than the timer's resolution.
        assert!(
            r["time_ms"]
                .as_f64()
                .is_some_and(|t| t > 0.0 || r["mode"].as_str().is_some_and(|m| m.ends_with("-nochange"))),
            "{r}"
        );
        assert_eq!(r["repeats"], 2);
        // The passel binary installs the counting allocator, so peak heap is measured and at
        // least what was live when the row started. (On a workload this small a reading can
        // be 0: the counters are exact only to `FLUSH` bytes per thread.)
        let (peak, base) = (r["peak_heap_bytes"].as_u64().expect("peak"), r["base_heap_bytes"].as_u64().expect("base"));
        assert!(peak >= base, "{r}");
    }
    assert!(rows.iter().any(|r| r["peak_heap_bytes"].as_u64().is_some_and(|p| p > 0)), "no heap measured");
    assert_eq!(rows[0]["speedup"], 1.0);
    // An edit row counts what its run recomputed (at least the edited function), and has no
    // speedup over serial: it did not redo the whole module.
    for r in rows.iter().filter(|r| r["mode"].as_str().is_some_and(|m| m.ends_with("-edit"))) {
        assert!(r["speedup"].is_null(), "{r}");
        assert!(r["functions"].as_u64().is_some_and(|f| (1..=12).contains(&f)), "{r}");
    }

    let svg = std::fs::read_to_string(&svg).expect("svg written");
    assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
    assert_well_formed_xml(&svg);
    assert_eq!(svg.matches("<rect").count(), 1 + 10, "background plus one bar per row");
    std::fs::remove_dir_all(&dir).expect("clean up");
}

/// `bench` takes `run`'s pipeline options, with `run`'s default opt level (2, where the whole
/// bench pipeline runs): at -O1 its FoldConstant (opt level 2) is skipped with a note, and
/// `--require` runs it.
#[test]
fn bench_shares_runs_pipeline_options_and_default_opt_level() {
    let small = ["bench", "--functions", "3", "--ops", "4", "--threads", "1", "--repeats", "1", "--no-incremental"];
    let out = passel(&[&small[..], &["-O1"]].concat());
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("note: pass FoldConstant is skipped: its opt level is 2 and this run's is 1"),
        "{}",
        stderr(&out)
    );
    for extra in [&[][..], &["-O1", "--require", "fold-constant"][..]] {
        let out = passel(&[&small[..], extra].concat());
        assert!(out.status.success(), "{extra:?}: {}", stderr(&out));
        assert!(!stderr(&out).contains("is skipped"), "{extra:?}: {}", stderr(&out));
    }
}

#[test]
fn bench_errors_are_clear_and_exit_non_zero() {
    let cases: &[(&[&str], &str)] = &[
        (&["bench", "--workload", "mpl"], "mpl"),
        (&["bench", "--threads", "2,x"], "`x` in thread list"),
        (&["bench", "--threads", "0"], "out of range"),
        (&["bench", "--functions", "0"], "--functions"),
        (&["bench", "--functions", "3", "--passes", "FoldConstnt"], "FoldConstnt"),
        (&["bench", "--functions", "3", "--json", "/nonexistent-dir/x.json"], "cannot write /nonexistent-dir/x.json"),
        (&["bench", "--functions", "3", "--svg", "/nonexistent-dir/x.svg"], "cannot write /nonexistent-dir/x.svg"),
        (&["bench", "--workload", "cnn", "--ops", "3"], "--ops applies only to --workload chain"),
        (&["bench", "--functions", "3", "--disable", "FoldConstnt"], "FoldConstnt"),
        (&["bench", "--functions", "3", "--config", "no.such_key=1"], "no.such_key"),
    ];
    for (args, needle) in cases {
        let out = passel(args);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr(&out).contains(needle), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn passes_lists_how_the_executor_runs_each_pass() {
    let out = passel(&["passes"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout).expect("utf-8 output");
    let row = |name: &str| {
        text.lines().find(|l| l.split_whitespace().next() == Some(name)).unwrap_or_else(|| panic!("{name}: {text}"))
    };
    assert!(row("InferType").contains("fused (function-local)"), "{text}");
    assert!(row("DeadCodeElimination").contains("prelude + fused (split)"), "{text}");
    assert!(row("Inline").contains("barrier"), "{text}");
    assert!(row("FoldConstant").contains("fused"), "{text}");
    assert!(row("FoldScaleAxis").contains("nested"), "{text}");
}

/// `--passes` with groups nested 7,000 deep used to overflow the stack (exit 134); `run` and
/// `bench` now refuse it with the pipeline error.
#[test]
fn deeply_nested_pass_groups_are_an_error_not_a_crash() {
    let deep = format!("{}FoldConstant{}", "[".repeat(7000), "]".repeat(7000));
    let dir = std::env::temp_dir().join(format!("passel-deep-passes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("m.pir");
    std::fs::write(&file, "def @main(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  relu(%x)\n}\n").expect("write");
    let file = file.display().to_string();
    for args in [vec!["run", "--passes", &deep, &file], vec!["bench", "--functions", "3", "--passes", &deep]] {
        let out = passel(&args);
        assert_eq!(out.status.code(), Some(1), "{}: {}", args[0], stderr(&out));
        assert!(stderr(&out).contains("pipeline groups nest deeper than 128 levels"), "{}: {}", args[0], stderr(&out));
    }
    std::fs::remove_dir_all(&dir).expect("clean up");
}
