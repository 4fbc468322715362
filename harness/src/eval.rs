//! `passel eval`: runs the reference interpreter on a module's entry function with inputs
//! from `.npy` files or seeded random inputs, writes the outputs as `.npy`, summarises them,
//! and compares them with expected outputs. The comparison ([`compare`]) is the one the
//! ONNX conformance runner uses.

use std::path::{Path, PathBuf};

use passel_engine::interp::{random_args, EvalError, Interpreter, Value};
use passel_engine::ir::{Module, Tensor, TensorData, TypeKind};

use crate::npy::{self, NpyError};

/// Why `passel eval` could not evaluate a module (a mismatch with expected outputs is a
/// result, not an error).
#[derive(Debug, thiserror::Error)]
pub enum EvalCmdError {
    /// The entry function does not exist.
    #[error("no function `@{0}` in the module")]
    NoFunction(String),
    /// `--input NAME=…` names no parameter.
    #[error("--input {input}=…: `@{function}` has no parameter `{input}` (it has {params})")]
    UnknownInput {
        /// The name given.
        input: String,
        /// The entry function.
        function: String,
        /// Its parameters, listed.
        params: String,
    },
    /// More positional inputs than parameters.
    #[error("--input {}: `@{function}` has only {params} parameters", path.display())]
    TooManyInputs {
        /// The file beyond the last parameter.
        path: PathBuf,
        /// The entry function.
        function: String,
        /// How many parameters it has.
        params: usize,
    },
    /// Two inputs for one parameter.
    #[error("--input {}: parameter `%{param}` is given twice", path.display())]
    InputTwice {
        /// The second file.
        path: PathBuf,
        /// The parameter.
        param: String,
    },
    /// An input file cannot be read.
    #[error("input `%{param}`: {source}")]
    Input {
        /// The parameter.
        param: String,
        /// Why.
        source: NpyError,
    },
    /// An input's type is not its parameter's.
    #[error("{}: {found} does not fit parameter `%{param}: {expected}`", path.display())]
    InputType {
        /// The file.
        path: PathBuf,
        /// The file's tensor type.
        found: String,
        /// The parameter.
        param: String,
        /// The parameter's type.
        expected: String,
    },
    /// The interpreter failed (or random inputs could not be made).
    #[error(transparent)]
    Interp(#[from] EvalError),
    /// The output folder cannot be created.
    #[error("cannot create {}: {source}", dir.display())]
    OutputDir {
        /// The folder.
        dir: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// An expected output cannot be read.
    #[error("expected output_{index}: {source}")]
    Expected {
        /// The output's position.
        index: usize,
        /// Why.
        source: NpyError,
    },
    /// An output cannot be written.
    #[error(transparent)]
    Write(NpyError),
}

/// What to evaluate and where results go.
#[derive(Clone, Debug, Default)]
pub struct EvalOptions {
    /// The entry function (without `@`).
    pub function: String,
    /// Inputs: `(Some(name), file)` for a named parameter, `(None, file)` for the next
    /// parameter in order.
    pub inputs: Vec<(Option<String>, PathBuf)>,
    /// Seed of the random inputs for parameters no file gives.
    pub seed: u64,
    /// Where `output_K.npy` files go.
    pub output_dir: Option<PathBuf>,
    /// A folder of expected `output_K.npy` files to compare with.
    pub compare: Option<PathBuf>,
    /// Relative tolerance of the comparison.
    pub rtol: f64,
    /// Absolute tolerance of the comparison.
    pub atol: f64,
}

/// How an output compares with its expected value.
#[derive(Clone, Debug, PartialEq)]
pub struct Comparison {
    /// Largest `|actual - expected|` over elements where both are finite (0 when none).
    pub max_abs_err: f64,
    /// Elements outside `atol + rtol * |expected|` (NaN matches NaN, infinities match exactly).
    pub mismatches: usize,
    /// The first mismatch, described, or a shape/dtype difference.
    pub first: Option<String>,
}

impl Comparison {
    /// Whether the output matched.
    pub fn ok(&self) -> bool {
        self.mismatches == 0 && self.first.is_none()
    }
}

/// Compares `actual` with `expected` elementwise: `|a - e| <= atol + rtol * |e|`, as
/// `numpy.testing.assert_allclose` (which ONNX's backend tests use) does.
pub fn compare(actual: &Tensor, expected: &Tensor, rtol: f64, atol: f64) -> Comparison {
    if actual.dtype() != expected.dtype() || actual.shape() != expected.shape() {
        return Comparison {
            max_abs_err: f64::INFINITY,
            mismatches: 0,
            first: Some(format!("got {}, expected {}", actual.ty(), expected.ty())),
        };
    }
    let (mut max_abs_err, mut mismatches, mut first) = (0.0f64, 0usize, None);
    for (i, (a, e)) in values(actual).zip(values(expected)).enumerate() {
        let close = if a.is_nan() || e.is_nan() {
            a.is_nan() && e.is_nan()
        } else if a.is_infinite() || e.is_infinite() {
            a == e
        } else {
            let d = (a - e).abs();
            max_abs_err = max_abs_err.max(d);
            d <= atol + rtol * e.abs()
        };
        if !close {
            mismatches += 1;
            if first.is_none() {
                first = Some(format!("element {i}: got {a}, expected {e}"));
            }
        }
    }
    Comparison { max_abs_err, mismatches, first: first.filter(|_| mismatches > 0) }
}

/// The tensors of a value, depth first (a tuple's fields in order); functions are skipped.
pub fn flatten(v: &Value) -> Vec<Tensor> {
    let mut out = Vec::new();
    let mut stack = vec![v];
    while let Some(v) = stack.pop() {
        match v {
            Value::Tensor(t) => out.push(t.clone()),
            Value::Tuple(fields) => stack.extend(fields.iter().rev()),
            Value::Func(_) => {}
        }
    }
    out
}

/// The arguments for `function`: files where given, seeded random values elsewhere. A file
/// must be a regular `.npy` file matching its parameter's annotated type, and each parameter
/// takes at most one file.
pub fn arguments(module: &Module, opts: &EvalOptions) -> Result<Vec<Value>, EvalCmdError> {
    let func = module.get(&opts.function).ok_or_else(|| EvalCmdError::NoFunction(opts.function.clone()))?;
    let params = func.params();
    // Files first, so that a file that cannot be read fails before any random tensor is made.
    let mut files: Vec<Option<Tensor>> = vec![None; params.len()];
    let name_of = |i: usize| func.name_of(params[i]).unwrap_or("").to_string();
    let mut next = 0;
    for (name, path) in &opts.inputs {
        let i = match name {
            // A parameter answers to its own name (an ONNX graph input's, e.g. `gpu_0/data_0`)
            // and to its text spelling (`gpu_0_data_0`, as `passel import` prints it).
            Some(n) => (0..params.len())
                .find(|&i| name_of(i) == *n)
                .or_else(|| (0..params.len()).find(|&i| passel_engine::ir::text_name(&name_of(i)) == n.as_str()))
                .ok_or_else(|| {
                    let names: Vec<String> = (0..params.len()).map(|i| format!("`{}`", name_of(i))).collect();
                    let (input, function, params) = (n.clone(), opts.function.clone(), names.join(", "));
                    EvalCmdError::UnknownInput { input, function, params }
                })?,
            None => {
                next += 1;
                next - 1
            }
        };
        if i >= params.len() {
            let (path, function, params) = (path.clone(), opts.function.clone(), params.len());
            return Err(EvalCmdError::TooManyInputs { path, function, params });
        }
        if files[i].is_some() {
            return Err(EvalCmdError::InputTwice { path: path.clone(), param: name_of(i) });
        }
        let t = npy::read(path).map_err(|source| EvalCmdError::Input { param: name_of(i), source })?;
        if let Some(ty) = func.ty(params[i]) {
            let fits = match ty.kind() {
                TypeKind::Tensor(tt) => {
                    tt.dtype == t.dtype() && tt.shape.iter().map(|&d| d as usize).eq(t.shape().iter().copied())
                }
                _ => false,
            };
            if !fits {
                let (found, expected) = (t.ty().to_string(), ty.to_string());
                return Err(EvalCmdError::InputType { path: path.clone(), found, param: name_of(i), expected });
            }
        }
        files[i] = Some(t);
    }
    // Random values only when some parameter has no file: they are drawn for every parameter in
    // order (so a seed gives the same values whichever files are given), and each is as large
    // as its parameter.
    if files.iter().all(Option::is_some) {
        return Ok(files.into_iter().flatten().map(Value::Tensor).collect());
    }
    let mut args = random_args(func, opts.seed)?;
    for (arg, file) in args.iter_mut().zip(files) {
        if let Some(t) = file {
            *arg = Value::Tensor(t);
        }
    }
    Ok(args)
}

/// Runs `function` of `module` on `args`.
pub fn run(module: &Module, function: &str, args: &[Value], seed: u64) -> Result<Vec<Tensor>, EvalError> {
    let v = Interpreter::new(module).with_seed(seed).call(function, args)?;
    Ok(flatten(&v))
}

/// The elements of `t` as f64, row-major (bool is 0/1), one at a time: summaries and
/// comparisons stream them instead of copying the tensor (`Tensor::to_f64s` would allocate
/// twice the size of an f32 tensor).
pub fn values(t: &Tensor) -> Box<dyn Iterator<Item = f64> + '_> {
    match &t.0 {
        TensorData::F32(a) => Box::new(a.iter().map(|&v| v as f64)),
        TensorData::F16(a) => Box::new(a.iter().map(|&v| v.to_f64())),
        TensorData::I64(a) => Box::new(a.iter().map(|&v| v as f64)),
        TensorData::I32(a) => Box::new(a.iter().map(|&v| v as f64)),
        TensorData::Bool(a) => Box::new(a.iter().map(|&v| v as u8 as f64)),
        TensorData::F64(a) => Box::new(a.iter().copied()),
        TensorData::I8(a) => Box::new(a.iter().map(|&v| v as f64)),
        TensorData::I16(a) => Box::new(a.iter().map(|&v| v as f64)),
        TensorData::U8(a) => Box::new(a.iter().map(|&v| v as f64)),
        TensorData::U16(a) => Box::new(a.iter().map(|&v| v as f64)),
        TensorData::U32(a) => Box::new(a.iter().map(|&v| v as f64)),
        TensorData::U64(a) => Box::new(a.iter().map(|&v| v as f64)),
    }
}

/// A one-line summary of a tensor: type, min, max, mean, and counts of NaN and infinities.
/// One pass over the elements, allocating nothing sized by the tensor.
pub fn summary(t: &Tensor) -> String {
    let (mut nan, mut inf, mut finite) = (0usize, 0usize, 0usize);
    let (mut min, mut max, mut sum) = (f64::INFINITY, f64::NEG_INFINITY, 0.0f64);
    for v in values(t) {
        if v.is_nan() {
            nan += 1;
        } else if v.is_infinite() {
            inf += 1;
        } else {
            finite += 1;
            min = min.min(v);
            max = max.max(v);
            sum += v;
        }
    }
    let mut s = t.ty().to_string();
    if finite > 0 {
        let mean = sum / finite as f64;
        s.push_str(&format!("  min {min:.6}  max {max:.6}  mean {mean:.6}"));
    }
    if nan > 0 || inf > 0 {
        s.push_str(&format!("  nan {nan}  inf {inf}"));
    }
    s
}

/// Runs `passel eval` on a loaded module: the report text, and whether every compared output
/// matched.
pub fn eval(module: &Module, opts: &EvalOptions) -> Result<(String, bool), EvalCmdError> {
    let args = arguments(module, opts)?;
    let outputs = run(module, &opts.function, &args, opts.seed)?;
    let mut report = String::new();
    let mut all_ok = true;
    if let Some(dir) = &opts.output_dir {
        std::fs::create_dir_all(dir).map_err(|source| EvalCmdError::OutputDir { dir: dir.clone(), source })?;
    }
    for (k, t) in outputs.iter().enumerate() {
        report.push_str(&format!("output_{k}: {}\n", summary(t)));
        // Compare before writing: `--compare` and `--output-dir` may name the same folder,
        // and the expected file must be read before this run's output replaces it.
        if let Some(dir) = &opts.compare {
            let expected = npy::read(&dir.join(format!("output_{k}.npy")))
                .map_err(|source| EvalCmdError::Expected { index: k, source })?;
            let c = compare(t, &expected, opts.rtol, opts.atol);
            let verdict = if c.ok() {
                "ok".to_string()
            } else {
                format!("MISMATCH ({} elements; {})", c.mismatches, c.first.as_deref().unwrap_or(""))
            };
            report.push_str(&format!("  vs expected: max abs error {:.3e}, {verdict}\n", c.max_abs_err));
            all_ok &= c.ok();
        }
        if let Some(dir) = &opts.output_dir {
            npy::write(&dir.join(format!("output_{k}.npy")), t).map_err(EvalCmdError::Write)?;
        }
    }
    if let Some(dir) = &opts.compare {
        if Path::new(&dir.join(format!("output_{}.npy", outputs.len()))).exists() {
            report.push_str(&format!(
                "expected output_{} has no counterpart: the module has {} outputs\n",
                outputs.len(),
                outputs.len()
            ));
            all_ok = false;
        }
    }
    Ok((report, all_ok))
}

#[cfg(test)]
mod tests {
    use super::*;
    use passel_engine::ir::{parse_module, DType};

    #[test]
    fn compare_uses_allclose_rules() {
        let t = |v: &[f64]| Tensor::from_f64s(&[v.len() as u64], DType::F32, v).unwrap();
        let c = compare(&t(&[1.0, f64::NAN, f64::INFINITY]), &t(&[1.0005, f64::NAN, f64::INFINITY]), 1e-3, 0.0);
        assert!(c.ok(), "{c:?}");
        assert!((c.max_abs_err - 0.0005).abs() < 1e-6);
        let c = compare(&t(&[1.0, 2.0]), &t(&[1.1, 2.0]), 1e-3, 1e-7);
        assert_eq!((c.mismatches, c.ok()), (1, false));
        assert!(c.first.unwrap().starts_with("element 0"));
        assert!(!compare(&t(&[1.0]), &t(&[1.0, 2.0]), 1.0, 1.0).ok());
    }

    #[test]
    fn eval_reads_inputs_writes_outputs_and_compares() {
        let m =
            parse_module("def @main(%x: Tensor[(2,), f32], %y: Tensor[(2,), f32]) { (add(%x, %y), multiply(%x, %y)) }")
                .unwrap();
        // A private directory (tempfile), never a predictable path another user could plant.
        let tmp = tempfile::Builder::new().prefix("passel-eval").tempdir().unwrap();
        let dir = tmp.path().to_path_buf();
        let x = Tensor::from_f64s(&[2], DType::F32, &[1.0, 2.0]).unwrap();
        npy::write(&dir.join("x.npy"), &x).unwrap();
        npy::write(&dir.join("y.npy"), &x).unwrap();
        let opts = EvalOptions {
            function: "main".into(),
            inputs: vec![(Some("y".into()), dir.join("y.npy")), (None, dir.join("x.npy"))],
            output_dir: Some(dir.join("out")),
            rtol: 1e-3,
            atol: 1e-7,
            ..EvalOptions::default()
        };
        let (report, ok) = eval(&m, &opts).unwrap();
        assert!(ok);
        assert!(report.starts_with("output_0: Tensor[(2,), f32]  min 2.000000  max 4.000000"), "{report}");
        let out1 = npy::read(&dir.join("out/output_1.npy")).unwrap();
        assert_eq!(out1.to_f64s(), [1.0, 4.0]);
        // Comparing with its own outputs passes; with other values it reports the mismatch.
        let same = EvalOptions { compare: Some(dir.join("out")), ..opts.clone() };
        assert!(eval(&m, &same).unwrap().1);
        npy::write(&dir.join("out/output_1.npy"), &x).unwrap();
        let (report, ok) = eval(&m, &same).unwrap();
        assert!(!ok && report.contains("MISMATCH (1 elements; element 1: got 4, expected 2)"), "{report}");
        // Wrong names and wrong shapes are errors.
        let bad = EvalOptions { inputs: vec![(Some("z".into()), dir.join("x.npy"))], ..opts.clone() };
        let err = eval(&m, &bad).unwrap_err();
        assert!(matches!(&err, EvalCmdError::UnknownInput { input, .. } if input == "z"), "{err:?}");
        assert!(err.to_string().contains("has no parameter `z` (it has `x`, `y`)"), "{err}");
        npy::write(&dir.join("s.npy"), &Tensor::scalar_f32(1.0)).unwrap();
        let bad = EvalOptions { inputs: vec![(None, dir.join("s.npy"))], ..opts };
        let err = eval(&m, &bad).unwrap_err();
        assert!(matches!(&err, EvalCmdError::InputType { param, .. } if param == "x"), "{err:?}");
        assert!(err.to_string().contains("does not fit parameter `%x: Tensor[(2,), f32]`"), "{err}");
        drop(tmp);
    }
}
