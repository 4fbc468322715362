//! Every standard pass keeps the meaning of well-typed modules.
//!
//! For every registered standard pass (`passel_passes::standard_pass_names()`, so passes added
//! later are covered without editing this file), generated modules run through the pass (in a
//! `Sequential`, so its required passes run first) and through the reference interpreter on
//! random inputs, before and after. The results must agree — integer tensors exactly, float
//! tensors within `rtol = 1e-5, atol = 1e-6` (passes may reassociate or fold float arithmetic)
//! — and the output must pass the verifier. Two generators feed it: `gen::chain` (the
//! benchmark workload) and [`program`], a seeded generator of modules with nested functions
//! (captured variables, escaping closures), calls between globals (some marked `Inline`),
//! tuples and projections, `if`, nested blocks, integer tensors and stateful calls
//! (`random_uniform`, whose results depend on evaluation order).
//!
//! Idempotence is checked where it must hold: FoldConstant, ToANormalForm, ToGraphNormalForm,
//! LambdaLift and Inline run twice change nothing the second time.
//!
//! `PASSEL_SEMANTICS_CASES=500 cargo test -p passel-harness --test semantics` runs more cases.

use std::sync::Arc;

use passel_engine::interp::{assert_values_close, eval_function, random_args, Value};
use passel_engine::ir::{parse_module, print_module, verify_module, Module};
use passel_engine::transform::{get_pass, Pass, PassContext, Sequential, Severity};
use passel_harness::gen::{chain, ChainOptions};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

const RTOL: f64 = 1e-5;
const ATOL: f64 = 1e-6;

fn cases() -> u32 {
    std::env::var("PASSEL_SEMANTICS_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(12)
}

/// Pipelines checked besides each single pass: the A-normal-form round trip and the default
/// pipelines.
fn pipelines() -> Vec<String> {
    passel_passes::link();
    let mut out: Vec<String> = passel_passes::standard_pass_names().into_iter().map(String::from).collect();
    out.push("ToANormalForm,ToGraphNormalForm".into());
    out.push("InferType,LambdaLift,Inline,ToANormalForm".into());
    out.push(passel_passes::STANDARD_PIPELINE.join(","));
    out
}

/// Runs `pipeline` (comma-separated pass names) on `module` at opt level 3, with the Inline
/// size limit `inline_max_size`. Error diagnostics count as failure.
fn run(module: Module, pipeline: &str, inline_max_size: i64) -> Result<Module, String> {
    let passes: Vec<Arc<dyn Pass>> =
        pipeline.split(',').map(|name| get_pass(name).map_err(|e| e.to_string())).collect::<Result<_, _>>()?;
    let seq = Sequential::new("semantics", passes);
    let ctx = PassContext::builder()
        .opt_level(3)
        .num_threads(1)
        .config("relay.Inline.max_size", inline_max_size)
        .build()
        .map_err(|e| e.to_string())?;
    let out = ctx.scope(|| seq.run(module, &ctx)).map_err(|e| e.to_string())?.map_err(|e| e.to_string())?;
    let errors: Vec<String> = ctx
        .diagnostics()
        .take()
        .into_iter()
        .filter(|d| d.severity == Severity::Error)
        .map(|d| d.message.to_string())
        .collect();
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors.join("; "))
    }
}

/// Compares two results: integer fields exactly, float fields within the tolerance.
fn compare(before: &Value, after: &Value) -> Result<(), String> {
    let mut stack = vec![(before, after)];
    while let Some((a, b)) = stack.pop() {
        match (a, b) {
            (Value::Tuple(x), Value::Tuple(y)) if x.len() == y.len() => stack.extend(x.iter().zip(y.iter())),
            (Value::Tensor(t), _) if !t.dtype().is_float() => assert_values_close(a, b, 0.0, 0.0)?,
            _ => assert_values_close(a, b, RTOL, ATOL)?,
        }
    }
    Ok(())
}

/// Checks every pipeline on `module`, evaluating the functions `entries`.
fn check_all(module: &Module, entries: &[String], seed: u64, inline_max_size: i64) -> Result<(), String> {
    verify_module(module).map_err(|e| format!("generated module does not verify: {e:?}\n{module}"))?;
    let mut expected = Vec::new();
    for name in entries {
        let func = module.get(name).ok_or_else(|| format!("no @{name}"))?;
        let args = random_args(func, seed).map_err(|e| e.to_string())?;
        let value =
            eval_function(module, name, &args).map_err(|e| format!("generated @{name} fails: {e}\n{module}"))?;
        expected.push((name, args, value));
    }
    for pipeline in pipelines() {
        let out = run(module.clone(), &pipeline, inline_max_size)
            .map_err(|e| format!("{pipeline} failed: {e}\ninput:\n{module}"))?;
        verify_module(&out)
            .map_err(|e| format!("{pipeline} output does not verify: {e:?}\n{out}\ninput:\n{module}"))?;
        for (name, args, value) in &expected {
            let got = eval_function(&out, name, args)
                .map_err(|e| format!("{pipeline}: @{name} fails after the pass: {e}\n{out}\ninput:\n{module}"))?;
            compare(value, &got)
                .map_err(|e| format!("{pipeline} changed @{name}: {e}\noutput:\n{out}\ninput:\n{module}"))?;
        }
    }
    Ok(())
}

/// Checks that running `pipeline` a second time prints the same module.
fn check_idempotent(module: &Module, pipeline: &str) -> Result<(), String> {
    let once = run(module.clone(), pipeline, 0)?;
    let twice = run(once.clone(), pipeline, 0)?;
    let (a, b) = (print_module(&once), print_module(&twice));
    if a == b {
        Ok(())
    } else {
        Err(format!("{pipeline} is not idempotent:\nonce:\n{a}\ntwice:\n{b}"))
    }
}

// ---------------------------------------------------------------------------------------------
// The program generator.

const F32: &str = "Tensor[(4,), f32]";
const I64: &str = "Tensor[(4,), i64]";

/// Variables in scope, by type.
#[derive(Clone, Default)]
struct Scope {
    floats: Vec<String>,
    ints: Vec<String>,
}

struct Gen {
    rng: ChaCha8Rng,
    n_vars: usize,
    /// Helpers `@h0 … @h{n-1}` callable from the function being generated.
    callable: usize,
}

impl Gen {
    fn fresh(&mut self, prefix: &str) -> String {
        self.n_vars += 1;
        format!("%{prefix}{}", self.n_vars)
    }

    fn pick(&mut self, vars: &[String]) -> String {
        vars[self.rng.gen_range(0..vars.len())].clone()
    }

    /// A float expression of type `Tensor[(4,), f32]`. Depth is bounded by the caller.
    fn float(&mut self, scope: &Scope, depth: u32) -> String {
        if depth == 0 {
            return self.pick(&scope.floats);
        }
        let d = depth - 1;
        match self.rng.gen_range(0..13) {
            0 => self.pick(&scope.floats),
            1 | 2 => {
                let op = ["relu", "tanh", "sigmoid", "negative"][self.rng.gen_range(0..4)];
                format!("{op}({})", self.float(scope, d))
            }
            3 | 4 => {
                let op = ["add", "multiply", "subtract", "maximum"][self.rng.gen_range(0..4)];
                let rhs = if self.rng.gen_bool(0.5) {
                    self.float(scope, d)
                } else {
                    ["0.0f", "1.0f", "0.5f", "2.0f"][self.rng.gen_range(0..4)].to_string()
                };
                format!("{op}({}, {rhs})", self.float(scope, d))
            }
            5 if self.callable > 0 => {
                let k = self.rng.gen_range(0..self.callable);
                format!("@h{k}({}, %c)", self.float(scope, d))
            }
            6 => format!("if (%c) {{ {} }} else {{ {} }}", self.float_block(scope, d), self.float_block(scope, d)),
            7 => {
                let (a, b) = (self.float(scope, d), self.int(scope, d));
                format!("({a}, {b}).0")
            }
            8 => self.float_block(scope, d),
            9 | 10 => self.closure(scope, d),
            // Stateful: draws from the evaluator's random stream, so moving, duplicating or
            // dropping it changes later results.
            11 if self.rng.gen_bool(0.3) => format!("add({}, random_uniform(shape=[4]))", self.float(scope, d)),
            _ => {
                let op = ["add", "multiply"][self.rng.gen_range(0..2)];
                format!("{op}({}, {})", self.float(scope, d), self.float(scope, d))
            }
        }
    }

    /// An integer expression of type `Tensor[(4,), i64]`.
    fn int(&mut self, scope: &Scope, depth: u32) -> String {
        if depth == 0 {
            return self.pick(&scope.ints);
        }
        let d = depth - 1;
        match self.rng.gen_range(0..8) {
            0 => self.pick(&scope.ints),
            1 => format!("negative({})", self.int(scope, d)),
            2 | 3 => {
                let op = ["add", "subtract", "maximum", "multiply"][self.rng.gen_range(0..4)];
                let rhs = if self.rng.gen_bool(0.5) { self.int(scope, d) } else { "2i64".to_string() };
                format!("{op}({}, {rhs})", self.int(scope, d))
            }
            4 => format!("if (%c) {{ {} }} else {{ {} }}", self.int(scope, d), self.int(scope, d)),
            5 => {
                let (a, b) = (self.float(scope, d), self.int(scope, d));
                format!("({a}, {b}).1")
            }
            6 => {
                let v = self.fresh("i");
                let value = self.int(scope, d);
                let mut inner = scope.clone();
                inner.ints.push(v.clone());
                format!("{{ let {v}: {I64} = {value}; add({v}, {}) }}", self.int(&inner, d))
            }
            _ => format!("add({}, {})", self.int(scope, d), self.int(scope, d)),
        }
    }

    /// A block with one or two bindings ending in a float.
    fn float_block(&mut self, scope: &Scope, depth: u32) -> String {
        let mut inner = scope.clone();
        let mut text = String::from("{ ");
        for _ in 0..self.rng.gen_range(1..3) {
            let v = self.fresh("v");
            let value = self.float(&inner, depth);
            text.push_str(&format!("let {v} = {value}; "));
            inner.floats.push(v);
        }
        text.push_str(&self.float(&inner, depth));
        text.push_str(" }");
        text
    }

    /// A nested function capturing the scope, then called directly, twice, or after escaping
    /// through a tuple.
    fn closure(&mut self, scope: &Scope, depth: u32) -> String {
        let (f, y) = (self.fresh("f"), self.fresh("y"));
        let mut inner = scope.clone();
        inner.floats.push(y.clone());
        let body = self.float_block(&inner, depth);
        let def = format!("let {f} = fn ({y}: {F32}) -> {F32} {body};");
        let arg = self.float(scope, depth);
        match self.rng.gen_range(0..3) {
            0 => format!("{{ {def} {f}({arg}) }}"),
            1 => {
                let arg2 = self.float(scope, depth);
                format!("{{ {def} add({f}({arg}), {f}({arg2})) }}")
            }
            _ => {
                let t = self.fresh("t");
                format!("{{ {def} let {t} = ({f}, {arg}); {t}.0({t}.1) }}")
            }
        }
    }
}

/// A module `@h0 … @h{n-1}` (each may call earlier ones; some are marked `Inline`) and
/// `@main(%x, %n, %c) -> (f32 tensor, i64 tensor)`.
fn program(seed: u64, n_helpers: usize, n_lets: usize, depth: u32) -> String {
    let mut g = Gen { rng: ChaCha8Rng::seed_from_u64(seed), n_vars: 0, callable: 0 };
    let mut text = String::new();
    for k in 0..n_helpers {
        g.callable = k;
        // Helpers have no integer parameter; `%q` gives the integer generator a value to use.
        let scope = Scope { floats: vec!["%p".into()], ints: vec!["%q".into()] };
        let value = g.float(&scope, depth);
        let attrs = if g.rng.gen_bool(0.5) { "#[Inline]\n" } else { "" };
        let body = g.float(&scope, depth);
        text.push_str(&format!(
            "{attrs}def @h{k}(%p: {F32}, %c: Tensor[(), bool]) -> {F32} {{\n  let %q: {I64} = tensor<(4,), i64>[1, 2, 3, 4];\n  let %r = {value};\n  add(%r, {body})\n}}\n\n"
        ));
    }
    g.callable = n_helpers;
    let mut scope = Scope { floats: vec!["%x".into()], ints: vec!["%n".into()] };
    text.push_str(&format!("def @main(%x: {F32}, %n: {I64}, %c: Tensor[(), bool]) -> ({F32}, {I64}) {{\n"));
    for _ in 0..n_lets {
        if g.rng.gen_bool(0.7) {
            let v = g.fresh("a");
            let value = g.float(&scope, depth);
            text.push_str(&format!("  let {v} = {value};\n"));
            scope.floats.push(v);
        } else {
            let v = g.fresh("b");
            let value = g.int(&scope, depth);
            text.push_str(&format!("  let {v} = {value};\n"));
            scope.ints.push(v);
        }
    }
    let (f, i) = (g.float(&scope, depth), g.int(&scope, depth));
    text.push_str(&format!("  ({f}, {i})\n}}\n"));
    text
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn every_standard_pass_keeps_the_meaning_of_generated_programs(
        seed in any::<u64>(),
        n_helpers in 0usize..4,
        n_lets in 1usize..6,
        depth in 1u32..4,
        inline_max_size in prop_oneof![Just(0i64), Just(12i64), Just(1000i64)],
    ) {
        let text = program(seed, n_helpers, n_lets, depth);
        let module = parse_module(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        let res = check_all(&module, &["main".to_string()], seed, inline_max_size);
        prop_assert!(res.is_ok(), "{}", res.unwrap_err());
    }

    #[test]
    fn every_standard_pass_keeps_the_meaning_of_chain_modules(
        seed in any::<u64>(),
        functions in 1usize..4,
        ops in 0usize..20,
    ) {
        let module = chain(&ChainOptions { functions, ops, shape: vec![3, 2], seed });
        let entries: Vec<String> = module.iter().map(|(n, _)| n.to_string()).collect();
        let res = check_all(&module, &entries, seed, 0);
        prop_assert!(res.is_ok(), "{}", res.unwrap_err());
    }

    #[test]
    fn rewriting_passes_are_idempotent(seed in any::<u64>(), n_helpers in 0usize..3, depth in 1u32..4) {
        let text = program(seed, n_helpers, 3, depth);
        let module = parse_module(&text).map_err(|e| TestCaseError::fail(format!("{e}\n{text}")))?;
        for pipeline in ["FoldConstant", "ToANormalForm", "ToGraphNormalForm", "LambdaLift", "Inline"] {
            let res = check_idempotent(&module, pipeline);
            prop_assert!(res.is_ok(), "{}", res.unwrap_err());
        }
    }
}

#[test]
fn to_a_normal_form_twice_returns_the_same_functions() {
    let text = program(7, 2, 4, 3);
    let module = parse_module(&text).expect("generated text parses");
    let once = passel_passes::to_a_normal_form_module(&module);
    let twice = passel_passes::to_a_normal_form_module(&once);
    assert!(twice.ptr_eq(&once));
    assert!(once.iter().all(|(_, f)| passel_passes::is_a_normal_form(f)));
}

#[test]
fn generator_makes_nested_functions_calls_tuples_and_ifs() {
    let text: String = (0..20).map(|s| program(s, 3, 4, 3)).collect();
    for needle in ["fn (", "@h", ".0", ".1", "if (%c)", "i64", "#[Inline]", "(%t", "random_uniform"] {
        assert!(text.contains(needle), "generator never produced `{needle}`");
    }
}
