//! The persistent stage cache across real processes: each step runs the `passel` binary anew
//! with `--cache DIR`; every output is byte-identical to a run without a cache, and the
//! stderr note says which functions the process recomputed. A run with the same text and
//! options as an earlier one is answered by its run entry; the tests that read per-function
//! entries add a comment above the first function so that no run entry answers. Several
//! processes share one directory at once; damaged entries are detected and recomputed.

#[path = "support/cli.rs"]
mod cli;

use std::path::Path;
use std::process::Output;

use cli::{passel, stderr, temp_dir, write};
use passel_engine::ir::print_module;
use passel_harness::gen::{chain, ChainOptions};

/// A pipeline of function stages only, so that the recomputed counts below are exact (a module
/// pass runs again in every process); `standard_pipeline_outputs_are_identical_with_a_cache`
/// covers the standard pipeline, whose function-stage results are all reused.
const PIPELINE_ARGS: [&str; 4] = ["-j", "2", "--passes", "InferType"];

fn module_text(functions: usize) -> String {
    print_module(&chain(&ChainOptions { functions, ops: 12, seed: 7, ..Default::default() }))
}

/// `passel run FILE` with the cache in `cache` (or none), returning (stdout, stderr, output).
fn run(file: &Path, cache: Option<&Path>) -> (String, String, Output) {
    let mut args = vec!["run", file.to_str().expect("utf-8 path")];
    args.extend(PIPELINE_ARGS);
    if let Some(dir) = cache {
        args.extend(["--cache", dir.to_str().expect("utf-8 path")]);
    }
    let out = passel(&args);
    assert!(out.status.success(), "passel run failed: {}", stderr(&out));
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr(&out), out)
}

/// The number of functions the note says were recomputed, and the named ones.
fn recomputed(err: &str) -> (usize, String) {
    let line = err.lines().find(|l| l.starts_with("cache ")).expect("cache note on stderr");
    let after = line.split(": ").nth(1).expect("note text");
    let n: usize = after.split(' ').next().and_then(|n| n.parse().ok()).expect("count");
    (n, line.to_string())
}

fn non_note(err: &str) -> String {
    err.lines().filter(|l| !l.starts_with("cache ")).collect::<Vec<_>>().join("\n")
}

#[test]
fn a_new_process_recomputes_only_what_changed_since_any_earlier_run() {
    let dir = temp_dir("cache-steps");
    let cache = dir.join("cache");
    let text = module_text(40);
    let file = write(&dir, "m.pir", &text);
    let (cold_out, cold_err, _) = run(&file, None);

    let (out, err, _) = run(&file, Some(&cache));
    assert_eq!(out, cold_out);
    assert_eq!(non_note(&err), non_note(&cold_err));
    assert_eq!(recomputed(&err).0, 40, "{err}");

    // A new process, nothing changed: nothing recomputed.
    let (out, err, _) = run(&file, Some(&cache));
    assert_eq!(out, cold_out);
    assert_eq!(recomputed(&err).0, 0, "{err}");

    // A body edit of one function (same signature): only that one.
    let edited = text.replacen("add(", "subtract(", 1);
    assert_ne!(edited, text);
    let file2 = write(&dir, "m2.pir", &edited);
    let (cold2, _, _) = run(&file2, None);
    let (out, err, _) = run(&file2, Some(&cache));
    assert_eq!(out, cold2);
    let (n, line) = recomputed(&err);
    assert_eq!(n, 1, "{line}");
    // And only its text was parsed.
    assert!(line.contains("; 1 of 40 functions parsed"), "{line}");

    // Back to the original: every result is still in the cache.
    let (out, err, _) = run(&file, Some(&cache));
    assert_eq!(out, cold_out);
    assert_eq!(recomputed(&err).0, 0, "{err}");

    // Another opt level is another pipeline: recomputed, and correct.
    let f = file.to_str().expect("utf-8 path");
    let c = cache.to_str().expect("utf-8 path");
    let cold_o3 = passel(&["run", f, "-O", "3", "--passes", "InferType"]);
    let cached_o3 = passel(&["run", f, "-O", "3", "--passes", "InferType", "--cache", c]);
    assert_eq!(cached_o3.stdout, cold_o3.stdout);
    assert_eq!(recomputed(&stderr(&cached_o3)).0, 40);

    // `passel cache stats | gc | clear`.
    let stats = passel(&["cache", "stats", "--cache", c]);
    assert!(String::from_utf8_lossy(&stats.stdout).contains(" entries, "), "{}", stderr(&stats));
    let gc = passel(&["cache", "gc", "--cache", c, "--max-size", "0"]);
    assert!(String::from_utf8_lossy(&gc.stdout).contains("0 entries, 0 bytes left"), "{:?}", gc);
    let (out, err, _) = run(&file, Some(&cache));
    assert_eq!(out, cold_out);
    assert_eq!(recomputed(&err).0, 40);
    let clear = passel(&["cache", "clear", "--cache", c]);
    assert!(clear.status.success());
    let stats = passel(&["cache", "stats", "--cache", c]);
    assert!(String::from_utf8_lossy(&stats.stdout).contains(": 0 entries"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// What the note says when a run entry (an earlier run of the same text and options) answered.
const RUN_ENTRY_NOTE: &str = "the output of an earlier run of the same text and options reused";

/// The number of stage results the note says were reused.
fn reused(err: &str) -> usize {
    let line = err.lines().find(|l| l.starts_with("cache ")).expect("cache note on stderr");
    let at = line.find(" results reused").expect("reuse count");
    line[..at].rsplit(' ').next().and_then(|n| n.parse().ok()).expect("a number")
}

#[test]
fn standard_pipeline_outputs_are_identical_with_a_cache() {
    let dir = temp_dir("cache-standard");
    let cache = dir.join("cache");
    let text = module_text(30);
    let file = write(&dir, "m.pir", &text);
    let f = file.to_str().expect("utf-8 path");
    let c = cache.to_str().expect("utf-8 path");
    for opt in ["1", "2", "3"] {
        let cold = passel(&["run", f, "-O", opt, "-j", "2"]);
        let first = passel(&["run", f, "-O", opt, "-j", "2", "--cache", c]);
        let warm = passel(&["run", f, "-O", opt, "-j", "2", "--cache", c]);
        for run in [&first, &warm] {
            assert!(run.status.success(), "{}", stderr(run));
            assert_eq!(run.stdout, cold.stdout, "-O {opt}");
            assert_eq!(non_note(&stderr(run)), non_note(&stderr(&cold)), "-O {opt}");
        }
        // The warm run's output is the first one's run entry.
        assert!(stderr(&warm).contains(RUN_ENTRY_NOTE), "{}", stderr(&warm));
        // With a comment above the first function no run entry answers: the run goes from
        // the record of the first run (passel-cache's `record.rs`), parses only the first function's
        // text and recomputes nothing (that function is the same).
        let touched = write(&dir, "touched.pir", &format!("// touched at -O{opt}\n{text}"));
        let t = touched.to_str().expect("utf-8 path");
        let run = passel(&["run", t, "-O", opt, "-j", "2", "--cache", c]);
        assert!(run.status.success(), "{}", stderr(&run));
        assert_eq!(run.stdout, cold.stdout, "-O {opt}");
        let err = stderr(&run);
        assert!(reused(&err) > 0, "-O {opt}: {err}");
        assert_eq!(recomputed(&err).0, 0, "{err}");
        assert!(err.contains("from the record of the last run"), "-O {opt}: {err}");
        // The one miss: the new text's run entry.
        assert!(err.contains(" 1 computed, 0 rejected"), "{err}");
        assert!(err.contains("; 1 of 30 functions parsed"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_environment_variable_names_the_cache() {
    let dir = temp_dir("cache-env");
    let cache = dir.join("cache");
    let file = write(&dir, "m.pir", &module_text(5));
    let f = file.to_str().expect("utf-8 path");
    let first =
        cli::bin().args(["run", f, "--passes", "InferType"]).env("PASSEL_CACHE_DIR", &cache).output().expect("runs");
    assert!(first.status.success());
    assert_eq!(recomputed(&stderr(&first)).0, 5);
    let second =
        cli::bin().args(["run", f, "--passes", "InferType"]).env("PASSEL_CACHE_DIR", &cache).output().expect("runs");
    assert_eq!(second.stdout, first.stdout);
    assert_eq!(recomputed(&stderr(&second)).0, 0);
    // With a debugging instrument the variable is ignored, and --cache is an error.
    let timed = cli::bin().args(["run", f, "--timing"]).env("PASSEL_CACHE_DIR", &cache).output().expect("runs");
    assert!(timed.status.success());
    assert!(!stderr(&timed).contains("cache "));
    let refused = passel(&["run", f, "--timing", "--cache", cache.to_str().expect("utf-8 path")]);
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("--cache cannot be combined"), "{}", stderr(&refused));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn processes_sharing_a_cache_at_once_leave_only_valid_entries() {
    let dir = temp_dir("cache-concurrent");
    let cache = dir.join("cache");
    let files: Vec<_> = (0..4).map(|i| write(&dir, &format!("m{i}.pir"), &module_text(20 + i))).collect();
    let colds: Vec<String> = files.iter().map(|f| run(f, None).0).collect();
    let children: Vec<_> = files
        .iter()
        .map(|f| {
            cli::bin()
                .args(["run", f.to_str().expect("utf-8"), "--cache", cache.to_str().expect("utf-8")])
                .args(PIPELINE_ARGS)
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawns")
        })
        .collect();
    for (child, cold) in children.into_iter().zip(&colds) {
        let out = child.wait_with_output().expect("waits");
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(&String::from_utf8_lossy(&out.stdout), cold);
    }
    // Every entry is valid: a second round reads each file's run entry, and a third one (a
    // comment above the first function, so no run entry answers) every stage entry, without a
    // rejection.
    for (f, cold) in files.iter().zip(&colds) {
        let (out, err, _) = run(f, Some(&cache));
        assert_eq!(&out, cold);
        assert!(err.contains(RUN_ENTRY_NOTE), "{err}");
        assert!(!err.contains("warning"), "{err}");
        let touched = write(&dir, "touched.pir", &format!("// touched\n{}", std::fs::read_to_string(f).expect("read")));
        let (out, err, _) = run(&touched, Some(&cache));
        assert_eq!(&out, cold);
        assert_eq!(recomputed(&err).0, 0, "{err}");
        assert!(err.contains(" 0 rejected"), "{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn damaged_cache_files_are_detected_and_recomputed() {
    let dir = temp_dir("cache-damage");
    let cache = dir.join("cache");
    let file = write(&dir, "m.pir", &module_text(10));
    let (cold, _, _) = run(&file, None);
    run(&file, Some(&cache));
    // Truncate or flip bytes in every content file, and damage the index too.
    let files: Vec<_> = walk(&cache).into_iter().filter(|p| !p.to_string_lossy().contains("builds")).collect();
    assert!(!files.is_empty());
    damage(&files);
    let (out, err, _) = run(&file, Some(&cache));
    assert_eq!(out, cold);
    assert!(recomputed(&err).0 > 0, "{err}");
    // And the cache heals: the next process reuses everything.
    let (out, err, _) = run(&file, Some(&cache));
    assert_eq!(out, cold);
    assert_eq!(recomputed(&err).0, 0, "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Damages each of `files` in turn: truncated to half, a byte flipped, garbage appended.
fn damage(files: &[std::path::PathBuf]) {
    for (i, path) in files.iter().enumerate() {
        let mut bytes = std::fs::read(path).expect("read cache file");
        match i % 3 {
            0 => bytes.truncate(bytes.len() / 2),
            1 => {
                let mid = bytes.len() / 2;
                bytes[mid] ^= 0x20;
            }
            _ => bytes.extend_from_slice(b"garbage"),
        }
        std::fs::write(path, bytes).expect("write cache file");
    }
}

fn walk(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(&d).into_iter().flatten().flatten().map(|e| e.path()).collect();
        entries.sort();
        for p in entries {
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out
}

#[test]
fn a_run_with_diagnostics_keeps_no_run_entry_and_reports_them_every_time() {
    let dir = temp_dir("cache-diagnostics");
    let cache = dir.join("cache");
    let file = write(&dir, "bad.pir", "def @f(%x: Tensor[(2,), f32]) -> Tensor[(3,), f32] {\n  relu(%x)\n}\n");
    let (f, c) = (file.to_str().expect("utf-8 path"), cache.to_str().expect("utf-8 path"));
    let cold = passel(&["run", f]);
    assert!(!cold.status.success());
    assert!(stderr(&cold).contains("declared result is"), "{}", stderr(&cold));
    for _ in 0..2 {
        let cached = passel(&["run", f, "--cache", c]);
        assert_eq!(cached.status.code(), cold.status.code());
        assert_eq!(cached.stdout, cold.stdout);
        assert_eq!(non_note(&stderr(&cached)), non_note(&stderr(&cold)));
        assert!(!stderr(&cached).contains(RUN_ENTRY_NOTE), "{}", stderr(&cached));
    }
    // A clean file gets its run entry, and the `--cache-report` of that run is empty.
    let good = write(&dir, "good.pir", &module_text(3));
    let g = good.to_str().expect("utf-8 path");
    let report = dir.join("report.txt");
    let r = report.to_str().expect("utf-8 path");
    let first = passel(&["run", g, "--cache", c, "--cache-report", r]);
    assert!(std::fs::read_to_string(&report).expect("report").lines().count() > 0);
    let second = passel(&["run", g, "--cache", c, "--cache-report", r]);
    assert_eq!(second.stdout, first.stdout);
    assert!(stderr(&second).contains(RUN_ENTRY_NOTE), "{}", stderr(&second));
    assert_eq!(std::fs::read_to_string(&report).expect("report"), "");
    // Statistics count the work a run does, so a run that reports them takes no run entry.
    let stats = dir.join("stats.json");
    let counted = passel(&["run", g, "--cache", c, "--stats-json", stats.to_str().expect("utf-8 path")]);
    assert!(counted.status.success(), "{}", stderr(&counted));
    assert_eq!(counted.stdout, first.stdout);
    assert!(stats.exists());
    assert!(!stderr(&counted).contains(RUN_ENTRY_NOTE), "{}", stderr(&counted));
    // And a report needs a cache.
    let refused = passel(&["run", g, "--cache-report", r]);
    assert!(!refused.status.success());
    assert!(stderr(&refused).contains("--cache-report needs a cache"), "{}", stderr(&refused));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each cache option error a user can reach, and each report file that cannot be written,
/// says what is wrong and where; the run fails without printing a module.
#[test]
fn cache_option_errors_say_what_is_wrong() {
    let dir = temp_dir("cache-option-errors");
    let cache = dir.join("cache");
    let file = write(&dir, "m.pir", &module_text(2));
    let (f, c) = (file.to_str().expect("utf-8 path"), cache.to_str().expect("utf-8 path"));
    let refused = |args: &[&str], expected: &str| {
        let out = cli::bin().args(args).env_remove("PASSEL_CACHE_DIR").output().expect("the passel binary runs");
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(out.stdout.is_empty(), "{args:?} printed output");
        let err = stderr(&out);
        assert!(err.contains(expected), "{args:?}: expected `{expected}` in: {err}");
    };
    refused(&["cache", "stats"], "no cache directory: give --cache DIR or set PASSEL_CACHE_DIR");
    refused(&["run", f, "--cache", c, "--cache-max-size", "lots"], "invalid size `lots` (expected e.g. 512M or 2G)");
    refused(&["cache", "gc", "--cache", c, "--max-size", "99999999999T"], "size `99999999999T` is too large");
    refused(&["run", f, "--cache", "redis://user:secret@127.0.0.1:notaport/0"], "invalid cache URL `redis://***@");
    refused(&["run", f, "--cache", c, "--timing"], "--cache cannot be combined with instruments");
    // An empty location is refused, not taken as the current directory.
    refused(&["run", f, "--cache", ""], "empty cache location: name a directory or a redis:// URL");
    refused(&["cache", "stats", "--cache", ""], "a value is required for '--cache <DIR>'");
    // Report files that cannot be written name the report and the file.
    let missing = dir.join("no-such-dir").join("out");
    let m = missing.to_str().expect("utf-8 path");
    refused(&["run", f, "--cache", c, "--cache-report", m], &format!("cannot write cache report {m}"));
    refused(&["run", f, "--trace", m], &format!("cannot write trace {m}"));
    refused(&["run", f, "--stats-json", m], &format!("cannot write statistics {m}"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The PrimFunc results the note says were recomputed, and how many there were.
fn prims_recomputed(err: &str) -> (usize, usize) {
    let line = err.lines().find(|l| l.starts_with("cache ")).expect("cache note on stderr");
    let at = line.find(" PrimFunc results recomputed").unwrap_or_else(|| panic!("no PrimFunc count: {line}"));
    let words: Vec<&str> = line[..at].rsplit(' ').take(3).collect();
    // "… R of N PrimFunc results recomputed": `words` is [N, "of", R].
    let n = words[0].parse().expect("a number");
    let r = words[2].parse().expect("a number");
    (r, n)
}

/// A lowered real model (ONNX import, `-O3 --lower`: the graph pipeline, LegalizeOps, FuseTIR
/// and the tir passes) across processes: the PrimFunc stage's results are stored like the
/// function stages', so a new process with nothing changed recomputes neither; damaged
/// entries are refused and recomputed; every output and diagnostic is byte-identical to a run
/// without a cache. An ONNX model has no run entry (only a `.pir` text has), so every process
/// runs the stages. Also a regression test: function stages after LegalizeOps (InferType)
/// saw no PrimFuncs in a session's module view and reported every `call_tir` target as an
/// unknown global (error diagnostics and exit status 1 with `--cache`, none without).
#[test]
fn a_lowered_model_reuses_its_prim_func_results_in_a_new_process() {
    let dir = temp_dir("cache-lowered");
    let cache = dir.join("cache");
    let c = cache.to_str().expect("utf-8 path");
    let model: std::path::PathBuf =
        [env!("CARGO_MANIFEST_DIR"), "..", "engine", "tests", "data", "real_models", "convnext_legacy", "model.onnx"]
            .iter()
            .collect();
    let m = model.to_str().expect("utf-8 path");
    let args = |cache: Option<&str>| {
        let mut args = vec!["run", m, "-O3", "--lower", "-j", "2"];
        if let Some(c) = cache {
            args.extend(["--cache", c]);
        }
        passel(&args)
    };
    let cold = args(None);
    assert!(cold.status.success(), "{}", stderr(&cold));
    assert!(String::from_utf8_lossy(&cold.stdout).contains("prim @"), "the model lowers to PrimFuncs");
    // Diagnostics as the cold run's; the cache's own warnings (a refused entry) aside.
    let diagnostics = |run: &Output| {
        let err = non_note(&stderr(run));
        err.lines().filter(|l| !l.starts_with("warning: cache ")).collect::<Vec<_>>().join("\n")
    };
    let check = |run: &Output| {
        assert!(run.status.success(), "{}", stderr(run));
        assert_eq!(run.stdout, cold.stdout);
        assert_eq!(diagnostics(run), diagnostics(&cold));
    };
    let first = args(Some(c));
    check(&first);
    let (r, n) = prims_recomputed(&stderr(&first));
    assert!(n > 0 && r == n, "{}", stderr(&first));

    // A new process, nothing changed: no function and no PrimFunc recomputed, every lookup a hit.
    let warm = args(Some(c));
    check(&warm);
    let err = stderr(&warm);
    assert_eq!(recomputed(&err).0, 0, "{err}");
    assert_eq!(prims_recomputed(&err), (0, n), "{err}");
    assert!(err.contains(" 0 computed, 0 rejected"), "{err}");

    // Every entry damaged: each refused and recomputed, the output unchanged.
    damage(&walk(&cache.join("v1").join("entries")));
    let damaged = args(Some(c));
    check(&damaged);
    let err = stderr(&damaged);
    assert_eq!(prims_recomputed(&err), (n, n), "{err}");
    assert!(!err.contains(" 0 rejected"), "{err}");
    // And the cache heals.
    let healed = args(Some(c));
    check(&healed);
    assert_eq!(prims_recomputed(&stderr(&healed)), (0, n), "{}", stderr(&healed));
    let _ = std::fs::remove_dir_all(&dir);
}
