//! The `tir_pipeline_parity` fuzz target's body: [`pipeline_parity`](super::pipeline_parity)
//! for the loop level. A generated model ([`crate::gen`]: CNN, MLP, transformer or random
//! functions, shaped by the bytes), optimised to fused graph functions, goes through a
//! pipeline decoded from the bytes: LegalizeOps, usually FuseTIR, then 1–8 tir passes in any
//! order, under decoded `tir.*` configs. Checked: the output (or error) and the diagnostics
//! are the same with 2 and 3 threads as serially; a successful output verifies and prints
//! text that parses back to the same text; and the lowered module computes, bit for bit, what
//! it computed before the tir passes (the loop-level interpreter on the entry function).
//!
//! The incremental session is not compared: it does not carry PrimFuncs yet (docs/tir.md).

use passel_engine::interp::{eval_function, random_args};
use passel_engine::ir::{parse_module, print_module, verify_module, Module};
use passel_engine::transform::{ConfigValue, Pass, PassContext};
use passel_passes::tir::{common_subexpr_elim, loop_partition, unroll_loop, vectorize_loop};

use super::Bytes;
use super::Outcome;
use crate::gen::{cnn, mlp, random, transformer, CnnOptions, MlpOptions, RandomOptions, TransformerOptions};

/// `tir_pipeline_parity`: see the module docs.
pub fn tir_pipeline_parity(data: &[u8]) -> Result<(), String> {
    passel_passes::link();
    let mut bytes = Bytes::new(data);
    let (what, module) = graph_module(&mut bytes)?;
    let fuse = bytes.below(4) != 0;
    let lowering = if fuse { "LegalizeOps,FuseTIR" } else { "LegalizeOps" };
    let pipeline = format!("{lowering},{}", tir_passes(&mut bytes));
    let configs = tir_configs(&mut bytes);
    let context = || format!("{what}, pipeline {pipeline}, configs {configs:?}");
    let serial = run(&module, &pipeline, &configs, 1)?;
    for threads in [2, 3] {
        let parallel = run(&module, &pipeline, &configs, threads)?;
        if parallel.text != serial.text || parallel.diagnostics != serial.diagnostics {
            return Err(format!(
                "{} with {threads} threads differs from serial\n--- serial:\n{}\n{:?}\n--- parallel:\n{}\n{:?}",
                context(),
                serial.text,
                serial.diagnostics,
                parallel.text,
                parallel.diagnostics
            ));
        }
    }
    let (Some(out), false) = (&serial.module, serial.errors) else { return Ok(()) };
    if let Err(errs) = verify_module(out) {
        let first = errs.first().map(|e| e.to_string()).unwrap_or_default();
        return Err(format!("{}: the output does not verify: {first}\n{}", context(), serial.text));
    }
    let reparsed = parse_module(&serial.text)
        .map_err(|e| format!("{}: the output does not parse again: {e}\n{}", context(), serial.text))?;
    if print_module(&reparsed) != serial.text {
        return Err(format!("{}: the output does not print the same after parsing\n{}", context(), serial.text));
    }
    // What the tir passes started from: the same lowering alone.
    let lowered = run(&module, lowering, &configs, 1)?;
    let Some(lowered) = lowered.module.filter(|_| !lowered.errors) else {
        return Err(format!("{}: {lowering} fails alone but not under the pipeline", context()));
    };
    let (entry, func) = match module.get("main") {
        Some(f) => ("main".to_string(), f),
        None => module.iter().next().map(|(n, f)| (n.to_string(), f)).ok_or("a module without functions")?,
    };
    let seed = u64::from(bytes.byte());
    let args = random_args(func, seed).map_err(|e| format!("{}: arguments of @{entry}: {e}", context()))?;
    let want = eval_function(&lowered, &entry, &args).map(|v| format!("{v:?}")).map_err(|e| e.to_string());
    let got = eval_function(out, &entry, &args).map(|v| format!("{v:?}")).map_err(|e| e.to_string());
    if got != want {
        return Err(format!(
            "{}: the tir passes changed what @{entry} computes\n--- before:\n{want:?}\n--- after:\n{got:?}\n--- lowered:\n{}\n--- output:\n{}",
            context(),
            print_module(&lowered),
            serial.text
        ));
    }
    Ok(())
}

/// A small generated model (the interpreter runs it element by element), optimised and fused
/// by the standard `-O3` pipeline, with a description for messages.
fn graph_module(bytes: &mut Bytes<'_>) -> Result<(String, Module), String> {
    let kind = bytes.below(4);
    let size = 1 + bytes.below(2);
    let seed = (0..8).fold(0u64, |acc, _| acc << 8 | u64::from(bytes.byte()));
    let module = match kind {
        0 => cnn(&CnnOptions {
            blocks: size,
            batch: 1,
            channels: 2 + bytes.below(3) as u64,
            image: 4 + bytes.below(4) as u64,
            classes: 3,
            seed,
        }),
        1 => mlp(&MlpOptions {
            layers: size,
            batch: 1 + bytes.below(2) as u64,
            input: 3 + bytes.below(4) as u64,
            width: 4 + bytes.below(4) as u64,
            seed,
            varied_widths: bytes.below(2) == 0,
            ..Default::default()
        }),
        2 => transformer(&TransformerOptions {
            layers: size,
            seq: 2 + bytes.below(2) as u64,
            hidden: 8,
            ffn: 12,
            per_block: true,
            seed,
        }),
        _ => random(&RandomOptions {
            functions: size + 1,
            bindings: 4 + bytes.below(8),
            size: 2 + bytes.below(3) as u64,
            seed,
            ..Default::default()
        }),
    };
    let what = format!("model kind {kind}, size {size}, seed {seed}");
    let ctx = PassContext::builder().opt_level(3).num_threads(1).build().map_err(|e| e.to_string())?;
    let optimised = ctx
        .scope(|| passel_passes::default_pipeline(3).run(module, &ctx))
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("{what}: -O3 fails: {e}"))?;
    Ok((what, optimised))
}

/// 1–8 loop-level passes, in any order, repeats allowed.
fn tir_passes(bytes: &mut Bytes<'_>) -> String {
    let names = passel_passes::tir::PASS_NAMES;
    let n = 1 + bytes.below(8);
    (0..n).map(|_| names[bytes.below(names.len())]).collect::<Vec<_>>().join(",")
}

/// Values for the tir passes' configs (each key set or left at its default).
fn tir_configs(bytes: &mut Bytes<'_>) -> Vec<(&'static str, ConfigValue)> {
    let mut out = Vec::new();
    let mut flag = |bytes: &mut Bytes<'_>, key: &'static str| {
        if bytes.below(3) == 0 {
            out.push((key, ConfigValue::Bool(bytes.below(2) == 0)));
        }
    };
    flag(bytes, unroll_loop::EXPLICIT_UNROLL_KEY);
    flag(bytes, unroll_loop::UNROLL_LOCAL_ACCESS_KEY);
    flag(bytes, loop_partition::PARTITION_CONST_LOOP_KEY);
    flag(bytes, loop_partition::NO_UNROLL_LOOP_WITH_EXTENT_ONE_KEY);
    flag(bytes, vectorize_loop::DISABLE_VECTORIZE_KEY);
    flag(bytes, common_subexpr_elim::DISABLE_CSE_TIR_KEY);
    flag(bytes, common_subexpr_elim::ENABLE_EQUIV_TERMS_KEY);
    for (key, values) in [
        (unroll_loop::AUTO_MAX_STEP_KEY, [0, 4, 16, 64]),
        (unroll_loop::AUTO_MAX_EXTENT_KEY, [0, 2, 4, 8]),
        (unroll_loop::AUTO_MAX_DEPTH_KEY, [1, 2, 4, 8]),
    ] {
        if bytes.below(3) == 0 {
            out.push((key, ConfigValue::Int(values[bytes.below(values.len())])));
        }
    }
    out
}

/// A run's printed module (or error), diagnostics, and whether any is an error.
fn run(module: &Module, pipeline: &str, configs: &[(&str, ConfigValue)], threads: usize) -> Result<Outcome, String> {
    super::run_pipeline_with(module, pipeline, configs, threads)
}
