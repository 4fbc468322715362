//! `passel conformance DIR`: checks passel against ONNX data nobody here wrote (written by
//! `scripts/onnx_data.sh`): every node case whose ops the importer supports goes through
//! import and the interpreter and is compared with onnx's expected outputs; every real model
//! is imported, evaluated, optimised with `-O3`, evaluated again, and printed and parsed back.
//!
//! A case is *supported* when every op type of its graph is in the importer's
//! `SUPPORTED_OPS` and every input and output is a tensor of a dtype passel has (f16, f32,
//! f64, signed and unsigned 8- to 64-bit integers, bool). A supported case that fails counts as a failure unless the out-of-scope
//! list (`docs/onnx-out-of-scope.txt`: `case reason…` per line) names it.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::bench::model::count_ops;
use passel_engine::frontend::onnx::{ImportOptions, SUPPORTED_OPS};
use passel_engine::interp::{EvalError, Value};
use passel_engine::ir::{parse_module, print_module, verify_module, Module, ParseErrors, Tensor, VerifyError};
use passel_engine::transform::{Pass, PassContext, PassError};

use crate::eval::{compare, run, values};
use crate::files::FileError;
use crate::npy::{self, NpyError};
use crate::onnx::{self, OnnxError};

/// Why a case (or one step of a model case) failed.
#[derive(Debug, thiserror::Error)]
pub enum CaseError {
    /// An input or expected output cannot be read.
    #[error(transparent)]
    Data(#[from] NpyError),
    /// The model does not import.
    #[error("import: {0}")]
    Import(#[from] OnnxError),
    /// The interpreter failed.
    #[error("eval: {0}")]
    Eval(#[from] EvalError),
    /// The module returns a different number of outputs.
    #[error("{found} outputs, expected {expected}")]
    OutputCount {
        /// Outputs the module returned.
        found: usize,
        /// Expected outputs.
        expected: usize,
    },
    /// An output is not close to its expected value.
    #[error("output {index}: {first} (max abs error {max_abs_err:.3e}, {mismatches} mismatches)")]
    Mismatch {
        /// The output's position.
        index: usize,
        /// The first mismatch, described.
        first: String,
        /// The largest absolute error.
        max_abs_err: f64,
        /// Elements outside the tolerance.
        mismatches: usize,
    },
    /// The module does not verify (`after_parse`: after printing and parsing it back).
    #[error("verify{}: {}", if *after_parse { " after parse" } else { "" }, first_error(.errors))]
    Verify {
        /// Whether this is the parsed-back module.
        after_parse: bool,
        /// The verifier's errors.
        errors: Vec<VerifyError>,
    },
    /// The printed module does not parse.
    #[error("parse: {0}")]
    Parse(ParseErrors),
    /// Printing the parsed-back module gives different text.
    #[error("fmt is not a fixed point")]
    NotFixedPoint,
    /// `-O3` failed (or its context could not be built).
    #[error("-O3: {0}")]
    Pipeline(PassError),
    /// A step after `-O3`, which failed.
    #[error("-O3 failed")]
    AfterFailedPipeline,
    /// Lowering was not asked for.
    #[error("not lowered (run with --lower)")]
    NotLowered,
    /// Lowering failed.
    #[error("lowering: {0}")]
    Lowering(String),
}

fn first_error(errors: &[VerifyError]) -> String {
    errors.first().map(|e| e.to_string()).unwrap_or_default()
}

/// The per-case data of one folder.
struct Case {
    name: String,
    dir: PathBuf,
    meta: serde_json::Value,
}

/// How one case ended.
enum Outcome {
    Pass(f64),
    Fail(CaseError),
    Unsupported(String),
}

/// One row of the real-model table.
pub struct ModelRow {
    name: String,
    import_ms: f64,
    pipeline_ms: f64,
    ops_before: usize,
    ops_after: usize,
    err_before: Result<Errors, CaseError>,
    err_after: Result<Errors, CaseError>,
    round_trip: Result<(), CaseError>,
    /// PrimFuncs after lowering the `-O3` module (lower_pass_names), and how long lowering took.
    prims: usize,
    lower_ms: f64,
    /// Error of the lowered module (graph calls left unlowered still run as graph calls).
    err_lowered: Result<Errors, CaseError>,
}

fn read_cases(dir: &Path) -> Vec<Case> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut cases: Vec<Case> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let dir = e.path();
            let text = std::fs::read_to_string(dir.join("meta.json")).ok()?;
            let meta = serde_json::from_str(&text).ok()?;
            Some(Case { name: e.file_name().to_string_lossy().into_owned(), dir, meta })
        })
        .collect();
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    cases
}

fn strs(v: &serde_json::Value) -> Vec<String> {
    v.as_array().map(|a| a.iter().filter_map(|s| s.as_str().map(String::from)).collect()).unwrap_or_default()
}

fn npys(dir: &Path, prefix: &str) -> Result<Vec<Tensor>, NpyError> {
    let mut out = Vec::new();
    for k in 0.. {
        let p = dir.join(format!("{prefix}_{k}.npy"));
        if !p.exists() {
            break;
        }
        out.push(npy::read(&p)?);
    }
    Ok(out)
}

fn options(case: &Case) -> ImportOptions {
    let mut o = ImportOptions::default();
    if let Some(shapes) = case.meta.get("input_shapes").and_then(|s| s.as_object()) {
        for (name, dims) in shapes {
            let dims = dims.as_array().map(|d| d.iter().filter_map(|x| x.as_u64()).collect()).unwrap_or_default();
            o.input_shapes.push((name.clone(), dims));
        }
    }
    o
}

fn tol(case: &Case) -> (f64, f64) {
    let get = |k: &str, d: f64| case.meta.get(k).and_then(|v| v.as_f64()).unwrap_or(d);
    (get("rtol", 1e-3), get("atol", 1e-7))
}

/// The largest errors of a run's outputs: absolute, and relative to each output's largest
/// finite |expected| value (the measure issue #27's table asks for).
#[derive(Clone, Copy, Debug)]
struct Errors {
    abs: f64,
    rel: f64,
}

/// Compares every output; the largest errors, or the first failure.
fn check_outputs(got: &[Tensor], want: &[Tensor], rtol: f64, atol: f64) -> Result<Errors, CaseError> {
    if got.len() != want.len() {
        return Err(CaseError::OutputCount { found: got.len(), expected: want.len() });
    }
    let mut max = Errors { abs: 0.0, rel: 0.0 };
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        let c = compare(g, w, rtol, atol);
        if !c.ok() {
            let first = c.first.unwrap_or_default();
            return Err(CaseError::Mismatch { index: k, first, max_abs_err: c.max_abs_err, mismatches: c.mismatches });
        }
        let scale = values(w).filter(|v| v.is_finite()).fold(0.0f64, |m, v| m.max(v.abs()));
        let rel = if scale > 0.0 { c.max_abs_err / scale } else { c.max_abs_err };
        max = Errors { abs: max.abs.max(c.max_abs_err), rel: max.rel.max(rel) };
    }
    Ok(max)
}

fn tensors(ts: Vec<Tensor>) -> Vec<Value> {
    ts.into_iter().map(Value::Tensor).collect()
}

fn node_case(case: &Case) -> Outcome {
    if let Some(reason) = case.meta.get("skip").and_then(|s| s.as_str()) {
        return Outcome::Unsupported(reason.to_string());
    }
    let unsupported: Vec<String> =
        strs(&case.meta["ops"]).into_iter().filter(|op| !SUPPORTED_OPS.contains(&op.as_str())).collect();
    if !unsupported.is_empty() {
        return Outcome::Unsupported(format!("op {}", unsupported.join(", ")));
    }
    let (inputs, outputs) = match (npys(&case.dir, "input"), npys(&case.dir, "output")) {
        (Ok(i), Ok(o)) => (i, o),
        // A dtype passel does not have, say: the reason without the file's path, so cases
        // with the same reason count together.
        (Err(NpyError::Format { problem, .. }), _) | (_, Err(NpyError::Format { problem, .. })) => {
            return Outcome::Unsupported(problem.to_string())
        }
        (Err(e), _) | (_, Err(e)) => return Outcome::Fail(e.into()),
    };
    let module = match onnx::import_onnx(&case.dir.join("model.onnx"), &options(case)) {
        Ok(m) => m,
        Err(e) => return Outcome::Fail(e.into()),
    };
    let got = match run(&module, "main", &tensors(inputs), 0) {
        Ok(g) => g,
        Err(e) => return Outcome::Fail(e.into()),
    };
    let (rtol, atol) = tol(case);
    match check_outputs(&got, &outputs, rtol, atol) {
        Ok(e) => Outcome::Pass(e.abs),
        Err(e) => Outcome::Fail(e),
    }
}

fn model_case(case: &Case, lower: bool) -> Result<ModelRow, CaseError> {
    let (rtol, atol) = tol(case);
    let inputs = npys(&case.dir, "input")?;
    let want = npys(&case.dir, "output")?;
    let t = Instant::now();
    let module = onnx::import_onnx(&case.dir.join("model.onnx"), &options(case))?;
    let import_ms = t.elapsed().as_secs_f64() * 1e3;
    let ops_before = count_ops(&module);
    let check = |m: &Module, inputs: Vec<Tensor>| {
        run(m, "main", &tensors(inputs), 0).map_err(CaseError::from).and_then(|g| check_outputs(&g, &want, rtol, atol))
    };
    let err_before = check(&module, inputs.clone());
    let ctx = PassContext::builder().opt_level(3).build().map_err(CaseError::Pipeline)?;
    let pipeline = passel_passes::default_pipeline(3);
    let t = Instant::now();
    let optimised = ctx.scope(|| pipeline.run(module.clone(), &ctx)).map_err(CaseError::Pipeline)?;
    let pipeline_ms = t.elapsed().as_secs_f64() * 1e3;
    let (ops_after, err_after, round_trip, lowered) = match optimised {
        Ok(opt) => {
            let err = check(&opt, inputs.clone());
            let t = Instant::now();
            let lowered = lower
                .then(|| passel_passes::run_pipeline_text(&passel_passes::lower_pass_names().join(","), opt.clone()));
            let lower_ms = t.elapsed().as_secs_f64() * 1e3;
            let lowered = match lowered {
                None => (0, 0.0, Err(CaseError::NotLowered)),
                Some(Ok(low)) => {
                    let err = check(&low, inputs);
                    let rt = round_trip(&low);
                    (low.num_prims(), lower_ms, err.and_then(|e| rt.map(|()| e)))
                }
                Some(Err(e)) => (0, lower_ms, Err(CaseError::Lowering(e))),
            };
            (count_ops(&opt), err, round_trip(&module).and_then(|_| round_trip(&opt)), lowered)
        }
        Err(e) => (
            0,
            Err(CaseError::Pipeline(e)),
            Err(CaseError::AfterFailedPipeline),
            (0, 0.0, Err(CaseError::AfterFailedPipeline)),
        ),
    };
    let (prims, lower_ms, err_lowered) = lowered;
    Ok(ModelRow {
        name: case.name.clone(),
        import_ms,
        pipeline_ms,
        ops_before,
        ops_after,
        err_before,
        err_after,
        round_trip,
        prims,
        lower_ms,
        err_lowered,
    })
}

/// `check` and `fmt`: the module verifies, and its text parses back and prints the same.
fn round_trip(m: &Module) -> Result<(), CaseError> {
    verify_module(m).map_err(|errors| CaseError::Verify { after_parse: false, errors })?;
    let text = print_module(m);
    let back = parse_module(&text).map_err(CaseError::Parse)?;
    verify_module(&back).map_err(|errors| CaseError::Verify { after_parse: true, errors })?;
    if print_module(&back) != text {
        return Err(CaseError::NotFixedPoint);
    }
    Ok(())
}

/// Reads the out-of-scope list: case name to reason.
pub fn read_out_of_scope(path: &Path) -> Result<BTreeMap<String, String>, FileError> {
    crate::files::regular_file(path)?;
    let text = std::fs::read_to_string(path).map_err(|source| FileError::Read { path: path.to_path_buf(), source })?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once(char::is_whitespace) {
            Some((case, reason)) => (case.to_string(), reason.trim().to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect())
}

/// Runs every case under `dir` (`node/`, `light/`, `models/`, and model cases directly in
/// `dir`, as in `engine/tests/data/real_models/`); returns the report and
/// whether it passed (no failure of a supported case outside the out-of-scope list).
pub fn run_all(
    dir: &Path,
    out_of_scope: &BTreeMap<String, String>,
    filter: Option<&str>,
    lower: bool,
) -> (String, bool) {
    let mut report = String::new();
    let keep = |c: &Case| filter.is_none_or(|f| c.name.contains(f));
    // group -> [pass, fail, out of scope, unsupported]
    let mut groups: BTreeMap<String, [usize; 4]> = BTreeMap::new();
    let mut failures = Vec::new();
    let mut excused = Vec::new();
    let mut max_err = 0.0f64;
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    let node = read_cases(&dir.join("node"));
    for case in node.iter().filter(|c| keep(c)) {
        let group = case.meta["group"].as_str().unwrap_or("?").to_string();
        let row = groups.entry(group).or_default();
        match node_case(case) {
            Outcome::Pass(e) => {
                row[0] += 1;
                max_err = max_err.max(e);
            }
            Outcome::Fail(why) => match out_of_scope.get(&case.name) {
                Some(reason) => {
                    row[2] += 1;
                    excused.push(format!("{}: {why} [out of scope: {reason}]", case.name));
                }
                None => {
                    row[1] += 1;
                    failures.push(format!("{}: {why}", case.name));
                }
            },
            Outcome::Unsupported(why) => {
                row[3] += 1;
                *reasons.entry(why).or_default() += 1;
            }
        }
    }
    let totals = groups.values().fold([0usize; 4], |a, r| [a[0] + r[0], a[1] + r[1], a[2] + r[2], a[3] + r[3]]);
    if !node.is_empty() {
        report.push_str("ONNX node cases, per op (supported ops only)\n\n");
        report.push_str("| op | cases | pass | fail | out of scope |\n|---|---:|---:|---:|---:|\n");
        for (op, r) in &groups {
            if r[0] + r[1] + r[2] > 0 {
                let _ = writeln!(report, "| {op} | {} | {} | {} | {} |", r[0] + r[1] + r[2], r[0], r[1], r[2]);
            }
        }
        let supported_groups = groups.values().filter(|r| r[0] + r[1] + r[2] > 0).count();
        let _ = writeln!(
            report,
            "\nnode cases: {} total, {} supported ({} ops): {} pass, {} fail, {} out of scope; {} not supported \
             (op or dtype); max abs error of passing cases {:.3e}",
            node.iter().filter(|c| keep(c)).count(),
            totals[0] + totals[1] + totals[2],
            supported_groups,
            totals[0],
            totals[1],
            totals[2],
            totals[3],
            max_err
        );
        let mut top: Vec<(&String, &usize)> = reasons.iter().collect();
        top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let top: Vec<String> = top.iter().take(12).map(|(r, n)| format!("{r} ({n})")).collect();
        let _ = writeln!(report, "most common reasons a case is not supported: {}", top.join(", "));
        for f in &failures {
            let _ = writeln!(report, "FAIL {f}");
        }
        for f in &excused {
            let _ = writeln!(report, "out of scope {f}");
        }
    }
    let mut model_failed = false;
    // Model cases directly under `dir` (meta.json `"kind": "model"`) too: the committed real
    // exports, `passel conformance engine/tests/data/real_models`.
    let top = read_cases(dir).into_iter().filter(|c| c.meta["kind"] == "model");
    let models: Vec<Case> = read_cases(&dir.join("light"))
        .into_iter()
        .chain(read_cases(&dir.join("models")))
        .chain(top)
        .filter(|c| keep(c))
        .collect();
    if !models.is_empty() {
        report.push_str(
            "\nReal models: import, eval vs expected, -O3, eval again, check + fmt round trip, \
             lowering (LegalizeOps, FuseTIR, tir passes: PrimFuncs) and eval of the lowered module\n\n",
        );
        report.push_str(
            "| model | import ms | -O3 ms | ops before | ops after | max abs err (rel) | after -O3 (rel) | round trip | PrimFuncs | lower ms | lowered (rel) |\n\
             |---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|\n",
        );
        let fmt_err = |e: &Result<Errors, CaseError>| match e {
            Ok(v) => format!("{:.2e} ({:.1e})", v.abs, v.rel),
            Err(_) => "FAIL".into(),
        };
        for case in &models {
            match model_case(case, lower) {
                Ok(r) => {
                    let _ = writeln!(
                        report,
                        "| {} | {:.1} | {:.1} | {} | {} | {} | {} | {} | {} | {:.1} | {} |",
                        r.name,
                        r.import_ms,
                        r.pipeline_ms,
                        r.ops_before,
                        r.ops_after,
                        fmt_err(&r.err_before),
                        fmt_err(&r.err_after),
                        if r.round_trip.is_ok() { "ok" } else { "FAIL" },
                        r.prims,
                        r.lower_ms,
                        if lower { fmt_err(&r.err_lowered) } else { "-".into() },
                    );
                    let lowered = r.err_lowered.err().filter(|_| lower).map(|e| format!("lowered: {e}"));
                    let problems =
                        [r.err_before.err(), r.err_after.err(), r.round_trip.err()].map(|e| e.map(|e| e.to_string()));
                    let problems = problems.into_iter().chain([lowered]);
                    for p in problems.flatten() {
                        if out_of_scope.contains_key(&r.name) {
                            excused.push(format!("{}: {p}", r.name));
                        } else {
                            model_failed = true;
                            failures.push(format!("{}: {p}", r.name));
                            let _ = writeln!(report, "FAIL {}: {p}", r.name);
                        }
                    }
                }
                Err(e) => {
                    let _ = writeln!(report, "| {} | import failed | | | | | | |", case.name);
                    if let Some(reason) = out_of_scope.get(&case.name) {
                        let _ = writeln!(report, "out of scope {}: {e} [{reason}]", case.name);
                    } else {
                        model_failed = true;
                        let _ = writeln!(report, "FAIL {}: {e}", case.name);
                    }
                }
            }
        }
    }
    let ok = totals[1] == 0 && !model_failed;
    let _ = writeln!(report, "\nconformance: {}", if ok { "ok" } else { "FAILED" });
    (report, ok)
}
