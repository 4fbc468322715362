//! Fuzz-target bodies. They live here, not in `fuzz/`, so that `cargo test` replays the
//! committed corpus (`fuzz/corpus/<target>/*`) on every CI run without cargo-fuzz, and
//! `cargo fuzz run <target>` explores further on demand.
//!
//! Each function returns `Err` with a description when it finds a bug; the fuzz targets turn
//! that into a panic, which is how libFuzzer recognises a failure.

use passel_engine::ir::{module_structural_eq, parse_module, print_module, verify_module, Module};
use passel_engine::transform::{parse_pipeline, Pass, PassContext, Severity};
use passel_engine::{MemoryMode, SessionError, SessionOutput};

use passel_passes::standard_session;

pub mod tir;

/// `parse`: arbitrary bytes never panic the parser; when they parse, the module prints.
pub fn parse(data: &[u8]) -> Result<(), String> {
    let Ok(src) = std::str::from_utf8(data) else { return Ok(()) };
    if let Ok(m) = parse_module(src) {
        let _ = print_module(&m);
    }
    Ok(())
}

/// `onnx_import`: arbitrary bytes never panic the ONNX importer; a model that imports
/// verifies, and its printed text parses back to a structurally equal module (raw weights
/// print as the dense tensors they equal).
pub fn onnx_import(data: &[u8]) -> Result<(), String> {
    use passel_engine::frontend::onnx::{import_onnx_bytes, ImportOptions};
    let Ok(m) = import_onnx_bytes(bytes::Bytes::copy_from_slice(data), &ImportOptions::default()) else {
        return Ok(());
    };
    if let Err(errs) = verify_module(&m) {
        let first = errs.first().map(|e| e.to_string()).unwrap_or_default();
        return Err(format!("imported module does not verify: {first}\n--- text:\n{}", print_module(&m)));
    }
    let text = print_module(&m);
    let back = parse_module(&text).map_err(|e| format!("printed import does not parse: {e}\n--- text:\n{text}"))?;
    if !module_structural_eq(&m, &back) {
        return Err(format!("parse(print(import)) differs from the import\n--- text:\n{text}"));
    }
    Ok(())
}

/// `pirb`: arbitrary bytes never panic the binary module reader (damaged input is an
/// error); a module that reads writes back, and the written bytes read to a module that
/// prints the same text and writes the same bytes.
pub fn pirb(data: &[u8]) -> Result<(), String> {
    use passel_engine::ir::{read_module_binary, write_module_binary};
    let Ok(m) = read_module_binary(&bytes::Bytes::copy_from_slice(data)) else { return Ok(()) };
    let text = print_module(&m);
    let bytes = write_module_binary(&m)
        .map_err(|e| format!("a module that was read does not write: {e}\n--- text:\n{text}"))?;
    let back = read_module_binary(&bytes::Bytes::from(bytes.clone()))
        .map_err(|e| format!("written bytes do not read back: {e}\n--- text:\n{text}"))?;
    let again = print_module(&back);
    if again != text {
        return Err(format!("read(write(m)) prints differently\n--- first:\n{text}\n--- second:\n{again}"));
    }
    let bytes2 = write_module_binary(&back).map_err(|e| format!("a module that was read does not write: {e}"))?;
    if bytes2 != bytes {
        return Err(format!("writing is not stable\n--- text:\n{text}"));
    }
    Ok(())
}

/// `roundtrip`: whenever text parses, printing it and parsing again gives a structurally
/// equal module, and printing that gives the same bytes.
pub fn roundtrip(data: &[u8]) -> Result<(), String> {
    let Ok(src) = std::str::from_utf8(data) else { return Ok(()) };
    let Ok(m1) = parse_module(src) else { return Ok(()) };
    let t1 = print_module(&m1);
    let m2 = parse_module(&t1).map_err(|e| format!("printed text does not parse: {e}\n--- text:\n{t1}"))?;
    if !module_structural_eq(&m1, &m2) {
        return Err(format!("parse(print(m)) differs from m\n--- text:\n{t1}"));
    }
    let t2 = print_module(&m2);
    if t1 != t2 {
        return Err(format!("printing is not stable\n--- first:\n{t1}\n--- second:\n{t2}"));
    }
    Ok(())
}

/// `pipeline_parity`: a module decoded from the bytes ([`shaped_module`]) run through a
/// pipeline decoded from the bytes ([`shaped_pipeline`]): the parallel executor with 2 and 3
/// threads and an incremental session, cold and after an edit decoded from the rest of the
/// bytes (`session_parity`), print the same module (or the same error) and the same
/// diagnostics as the serial run; and when the input passes the verifier, so does a
/// successful output (one that comes with no error diagnostic: a type error the verifier cannot
/// see in the input, such as one on an unannotated binding, is reported by InferType and may
/// stay in the output); and the printed output parses again (and then verifies and
/// type-checks, when the run succeeded on valid input): what `run` prints, `check` accepts.
pub fn pipeline_parity(data: &[u8]) -> Result<(), String> {
    let mut bytes = Bytes::new(data);
    let pipeline = shaped_pipeline(&mut bytes);
    let text = shaped_module(&mut bytes);
    let module = parse_module(&text).map_err(|e| format!("generated module does not parse: {e}\n--- text:\n{text}"))?;
    let serial = run_pipeline(&module, &pipeline, 1)?;
    // Ill-typed input (a decoded type error) may stay ill-typed; well-formed input must stay so.
    let input_verifies = verify_module(&module).is_ok();
    if let (true, false, Some(out)) = (input_verifies, serial.errors, &serial.module) {
        if let Err(errs) = verify_module(out) {
            let first = errs.first().map(|e| e.to_string()).unwrap_or_default();
            return Err(format!("output of {pipeline} does not verify: {first}\n--- input:\n{text}"));
        }
    }
    // Whatever `passel run` prints, `passel check` accepts: the printed output parses again
    // (nesting included), and a successful run of valid input prints valid, well-typed text.
    if let Some(out) = &serial.module {
        let printed = print_module(out);
        let reparsed = parse_module(&printed).map_err(|e| {
            format!("output of {pipeline} does not parse again: {e}\n--- input:\n{text}\n--- output:\n{printed}")
        })?;
        if input_verifies && !serial.errors {
            if let Err(errs) = verify_module(&reparsed) {
                let first = errs.first().map(|e| e.to_string()).unwrap_or_default();
                return Err(format!("printed output of {pipeline} does not verify: {first}\n--- input:\n{text}"));
            }
            // A pipeline without InferType keeps an ill-typed input ill-typed (a decoded type
            // error the verifier does not see), so only well-typed input must print well-typed
            // output.
            let (_, type_errors) = passel_passes::infer_module(&reparsed);
            if let Some(e) = type_errors.first().filter(|_| passel_passes::infer_module(&module).1.is_empty()) {
                return Err(format!("printed output of {pipeline} does not type-check: {e}\n--- input:\n{text}"));
            }
        }
    }
    for threads in [2, 3] {
        let parallel = run_pipeline(&module, &pipeline, threads)?;
        if parallel.text != serial.text || parallel.diagnostics != serial.diagnostics {
            return Err(format!(
                "{pipeline} with {threads} threads differs from serial\n--- input:\n{text}\n--- serial:\n{}\n{:?}\n--- parallel:\n{}\n{:?}",
                serial.text, serial.diagnostics, parallel.text, parallel.diagnostics
            ));
        }
    }
    session_parity(&mut bytes, &module, &text, &pipeline, &serial)
}

/// The incremental part of `pipeline_parity`, in each [`MemoryMode`]: a session
/// ([`standard_session`], 2 threads) run cold on `module` equals the serial run `serial`;
/// then one function is replaced by the same-position function of a second module decoded
/// from the rest of the bytes (a body or signature edit, or a new function when the names
/// differ), and the session's re-run equals a serial run of the edited module.
fn session_parity(
    bytes: &mut Bytes<'_>,
    module: &Module,
    text: &str,
    pipeline: &str,
    serial: &Outcome,
) -> Result<(), String> {
    let seq = parse_pipeline(pipeline).map_err(|e| format!("pipeline {pipeline} does not parse: {e}"))?;
    let ctx = PassContext::builder().opt_level(3).num_threads(2).build().map_err(|e| e.to_string())?;
    let which = bytes.below(module.len());
    let other_text = shaped_module(bytes);
    let other = parse_module(&other_text)
        .map_err(|e| format!("generated module does not parse: {e}\n--- text:\n{other_text}"))?;
    let edit = module.entries().get(which).zip(other.entries().get(which)).map(|((name, _), (_, func))| {
        let mut edited = module.clone();
        edited.insert(name, func.clone()).expect("replacing a function the module holds cannot fail");
        (name.clone(), func.clone(), edited)
    });
    let expected = match &edit {
        Some((_, _, edited)) => Some(run_pipeline(edited, pipeline, 1)?),
        None => None,
    };
    for mode in [MemoryMode::Full, MemoryMode::Lean] {
        let mut session = standard_session(seq.clone(), &ctx).map_err(|e| format!("session for {pipeline}: {e}"))?;
        session.set_memory_mode(mode);
        session.load(module);
        let cold = session_outcome(session.run());
        if !same_outcome(&cold, serial) {
            return Err(format!(
                "{pipeline} in a cold session ({mode:?} mode) differs from serial\n--- input:\n{text}\n--- serial:\n{}\n{:?}\n--- session:\n{}\n{:?}",
                serial.text, serial.diagnostics, cold.text, cold.diagnostics
            ));
        }
        let (Some((name, func, _)), Some(expected)) = (&edit, &expected) else { continue };
        session.set_function(name, func.clone());
        let rerun = session_outcome(session.run());
        if !same_outcome(&rerun, expected) {
            return Err(format!(
                "{pipeline} in a session ({mode:?} mode) after replacing @{name} differs from a serial run of the edited module\n--- input:\n{text}\n--- new @{name} (from):\n{other_text}\n--- serial:\n{}\n{:?}\n--- session:\n{}\n{:?}",
                expected.text, expected.diagnostics, rerun.text, rerun.diagnostics
            ));
        }
    }
    Ok(())
}

/// A session run as an [`Outcome`] (a failed run has no diagnostics: the session reports only
/// the error).
fn session_outcome(res: Result<SessionOutput, SessionError>) -> Outcome {
    match res {
        Ok(out) => {
            let errors = out.diagnostics.iter().any(|d| d.severity == Severity::Error);
            let diagnostics = out.diagnostics.iter().map(|d| format!("{d:?}")).collect();
            Outcome { text: print_module(&out.module), module: Some(out.module), diagnostics, errors }
        }
        Err(SessionError::Pass(e)) => {
            Outcome { module: None, text: format!("error: {e}"), diagnostics: Vec::new(), errors: true }
        }
        Err(e) => Outcome { module: None, text: format!("session error: {e}"), diagnostics: Vec::new(), errors: true },
    }
}

/// Same printed module (or error) and, for a successful run, the same diagnostics.
fn same_outcome(session: &Outcome, serial: &Outcome) -> bool {
    session.text == serial.text && (serial.module.is_none() || session.diagnostics == serial.diagnostics)
}

struct Outcome {
    module: Option<Module>,
    text: String,
    diagnostics: Vec<String>,
    /// Whether a diagnostic is an error (the run failed even if it returned a module).
    errors: bool,
}

fn run_pipeline(module: &Module, pipeline: &str, threads: usize) -> Result<Outcome, String> {
    run_pipeline_with(module, pipeline, &[], threads)
}

/// Runs `pipeline` over `module` at -O3 on `threads` threads under `configs`.
fn run_pipeline_with(
    module: &Module,
    pipeline: &str,
    configs: &[(&str, passel_engine::transform::ConfigValue)],
    threads: usize,
) -> Result<Outcome, String> {
    passel_passes::link();
    let seq = parse_pipeline(pipeline).map_err(|e| format!("pipeline {pipeline} does not parse: {e}"))?;
    let mut builder = PassContext::builder().opt_level(3).num_threads(threads);
    for (key, value) in configs {
        builder = builder.config(key, value.clone());
    }
    let ctx = builder.build().map_err(|e| e.to_string())?;
    let res = ctx.scope(|| seq.run(module.clone(), &ctx)).map_err(|e| e.to_string())?;
    let taken = ctx.diagnostics().take();
    let errors = taken.iter().any(|d| d.severity == Severity::Error);
    let diagnostics = taken.iter().map(|d| format!("{d:?}")).collect();
    Ok(match res {
        Ok(m) => Outcome { text: print_module(&m), module: Some(m), diagnostics, errors },
        Err(e) => Outcome { module: None, text: format!("error: {e}"), diagnostics, errors },
    })
}

/// Reads choices from fuzz bytes; past the end every read is 0, so any input decodes.
pub struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bytes<'a> {
    /// A reader over `data`.
    pub fn new(data: &'a [u8]) -> Bytes<'a> {
        Bytes { data, pos: 0 }
    }

    /// The next byte, or 0 past the end.
    pub fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        self.byte() as usize % n.max(1)
    }

    /// Whether any bytes are left.
    pub fn is_empty(&self) -> bool {
        self.pos >= self.data.len()
    }
}

/// A pipeline of 1–6 registered passes, sometimes with a nested `[...]` group.
pub fn shaped_pipeline(bytes: &mut Bytes<'_>) -> String {
    passel_passes::link();
    // Graph-level passes only (the loop-level passes come last in the list, so the corpus
    // picks the same passes as before they existed).
    let names: Vec<&str> = passel_passes::standard_pass_names()
        .into_iter()
        .filter(|n| !passel_passes::tir::PASS_NAMES.contains(n) && *n != passel_passes::legalize_ops::NAME)
        .collect();
    let n = 1 + bytes.below(6);
    let picks: Vec<&str> = (0..n).map(|_| names[bytes.below(names.len())]).collect();
    let group = bytes.below(4);
    if group == 0 && n >= 2 {
        let split = 1 + bytes.below(n - 1);
        format!("{},[{}]", picks[..split].join(","), picks[split..].join(","))
    } else {
        picks.join(",")
    }
}

const UNARY: &[&str] = &["relu", "negative", "sigmoid", "tanh", "exp"];
const BINARY: &[&str] = &["add", "multiply", "subtract", "maximum"];
const T: &str = "Tensor[(4,), f32]";

/// A module of 1–6 functions shaped by the bytes: elementwise chains, constant subexpressions,
/// duplicated expressions, dead bindings, identities, calls between functions, nested
/// functions, `if`, type errors (a mismatched shape), and `SkipOptimization` / `Exported`
/// attributes. Printed as text (every decoded module parses).
pub fn shaped_module(bytes: &mut Bytes<'_>) -> String {
    let n_funcs = 1 + bytes.below(6);
    let has_main = bytes.below(2) == 0;
    let names: Vec<String> =
        (0..n_funcs).map(|f| if f == 0 && has_main { "main".to_string() } else { format!("f{f}") }).collect();
    let mut out = String::new();
    for name in &names {
        match bytes.below(8) {
            0 => out.push_str("#[SkipOptimization]\n"),
            1 => out.push_str("#[Exported]\n"),
            _ => {}
        }
        let bad_param = bytes.below(8) == 0;
        let params = if bad_param { format!("%x: {T}, %z: Tensor[(3,), f32]") } else { format!("%x: {T}") };
        out.push_str(&format!("def @{name}({params}) -> {T} {{\n"));
        // Variables of type T; scalars are only used as the second operand of binary ops.
        let mut vars = vec!["%x".to_string()];
        let mut scalars: Vec<String> = Vec::new();
        let mut exprs: Vec<String> = Vec::new();
        let n_bindings = bytes.below(12);
        for b in 0..n_bindings {
            let v = format!("%v{b}");
            let pick = |bytes: &mut Bytes<'_>, vars: &[String]| vars[bytes.below(vars.len())].clone();
            let expr = match bytes.below(10) {
                0 | 1 => format!("{}({})", UNARY[bytes.below(UNARY.len())], pick(bytes, &vars)),
                2 | 3 => {
                    let op = BINARY[bytes.below(BINARY.len())];
                    let lhs = pick(bytes, &vars);
                    let rhs = if !scalars.is_empty() && bytes.below(2) == 0 {
                        scalars[bytes.below(scalars.len())].clone()
                    } else {
                        pick(bytes, &vars)
                    };
                    format!("{op}({lhs}, {rhs})")
                }
                4 => {
                    let c = format!("%c{b}");
                    let k = bytes.below(4);
                    out.push_str(&format!("  let {c} = multiply({}.0f, 0.5f);\n", k + 1));
                    scalars.push(c);
                    continue;
                }
                5 if !exprs.is_empty() => exprs[bytes.below(exprs.len())].clone(),
                // A callee with two parameters makes this a type error, on purpose.
                6 => format!("@{}({})", names[bytes.below(n_funcs)], pick(bytes, &vars)),
                7 => {
                    let g = format!("%g{b}");
                    let op = UNARY[bytes.below(UNARY.len())];
                    out.push_str(&format!("  let {g} = fn (%y{b}: {T}) -> {T} {{ {op}(%y{b}) }};\n"));
                    format!("{g}({})", pick(bytes, &vars))
                }
                8 => {
                    let a = pick(bytes, &vars);
                    let cond = if bytes.below(2) == 0 { "true" } else { "false" };
                    format!("if ({cond}) {{ relu({a}) }} else {{ {a} }}")
                }
                _ if bad_param && bytes.below(2) == 0 => format!("add({}, %z)", pick(bytes, &vars)),
                _ => {
                    let a = pick(bytes, &vars);
                    if bytes.below(2) == 0 {
                        format!("add({a}, 0.0f)")
                    } else {
                        format!("multiply({a}, 1.0f)")
                    }
                }
            };
            out.push_str(&format!("  let {v} = {expr};\n"));
            exprs.push(expr);
            vars.push(v);
        }
        let result = vars[vars.len() - 1 - bytes.below(vars.len().min(3))].clone();
        out.push_str(&format!("  {result}\n}}\n\n"));
    }
    out
}
