//! The workload generators: every generated module verifies, type-checks (InferType reports
//! nothing), prints and parses back to the same text, and the same options give the same text.
//! `PASSEL_GEN_CASES=500 cargo test -p passel-harness --test gen` runs more cases.

use passel_engine::ir::{parse_module, print_module, verify_module, Module};
use passel_harness::gen::{
    chain, cnn, mlp, random, transformer, workload, Activation, ChainOptions, CnnOptions, GenError, MlpOptions,
    RandomOptions, TransformerOptions, KINDS,
};
use proptest::prelude::*;

/// Asserts `module` verifies, type-checks without diagnostics and round-trips through text.
fn assert_well_formed(module: &Module) -> Result<(), TestCaseError> {
    let text = print_module(module);
    if let Err(errors) = verify_module(module) {
        return Err(TestCaseError::fail(format!("verify failed: {errors:?}\n{text}")));
    }
    let (typed, diags) = passel_passes::infer_module(module);
    prop_assert!(
        diags.is_empty(),
        "InferType diagnostics: {:?}\n{}",
        diags.iter().map(|d| &d.message).collect::<Vec<_>>(),
        text
    );
    prop_assert!(verify_module(&typed).is_ok(), "typed module does not verify");
    let reparsed = parse_module(&text).map_err(|e| TestCaseError::fail(format!("reparse failed: {e:?}\n{text}")))?;
    prop_assert_eq!(print_module(&reparsed), text);
    Ok(())
}

fn cases() -> u32 {
    std::env::var("PASSEL_GEN_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(16)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn chain_modules_are_well_typed(functions in 0usize..6, ops in 0usize..40, seed in any::<u64>()) {
        assert_well_formed(&chain(&ChainOptions { functions, ops, seed, ..Default::default() }))?;
    }

    #[test]
    fn mlp_modules_are_well_typed(
        layers in 0usize..6, batch in 1u64..4, input in 1u64..9, width in 1u64..9,
        act in 0usize..3, seed in any::<u64>(),
    ) {
        let activation = [Activation::Relu, Activation::Gelu, Activation::Mixed][act];
        assert_well_formed(&mlp(&MlpOptions { layers, batch, input, width, activation, seed, varied_widths: seed % 2 == 0 }))?;
    }

    #[test]
    fn cnn_modules_are_well_typed(
        blocks in 0usize..4, batch in 1u64..3, channels in 1u64..5, image in 1u64..6, classes in 1u64..5,
        seed in any::<u64>(),
    ) {
        assert_well_formed(&cnn(&CnnOptions { blocks, batch, channels, image, classes, seed }))?;
    }

    #[test]
    fn transformer_modules_are_well_typed(
        layers in 0usize..4, seq in 1u64..6, hidden in 1u64..6, ffn in 1u64..8, per_block: bool,
        seed in any::<u64>(),
    ) {
        assert_well_formed(&transformer(&TransformerOptions { layers, seq, hidden, ffn, per_block, seed }))?;
    }

    #[test]
    fn random_modules_are_well_typed(
        functions in 0usize..12, bindings in 0usize..40, size in 1u64..5, max_depth in 0usize..4,
        seed in any::<u64>(),
    ) {
        assert_well_formed(&random(&RandomOptions { functions, bindings, size, max_depth, seed }))?;
    }

    #[test]
    fn same_seed_gives_same_text(kind in 0usize..KINDS.len(), functions in 1usize..12, seed in any::<u64>()) {
        let a = workload(KINDS[kind], functions, seed).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let b = workload(KINDS[kind], functions, seed).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(print_module(&a), print_module(&b));
    }
}

#[test]
fn default_workloads_are_well_typed() {
    for kind in KINDS {
        let module = workload(kind, 20, 7).expect("known kind");
        assert!(module.len() >= 2, "{kind} made {} functions", module.len());
        assert_well_formed(&module).unwrap_or_else(|e| panic!("{kind}: {e}"));
    }
}

#[test]
fn different_seeds_give_different_random_modules() {
    let a = print_module(&random(&RandomOptions { seed: 1, ..Default::default() }));
    let b = print_module(&random(&RandomOptions { seed: 2, ..Default::default() }));
    assert_ne!(a, b);
}

#[test]
fn random_modules_use_every_construct() {
    let text = print_module(&random(&RandomOptions { functions: 30, bindings: 30, ..Default::default() }));
    for needle in ["if (", "fn (", "@f", ".1", "uniform<", "dense(", "bias_add(", "softmax("] {
        assert!(text.contains(needle), "no `{needle}` in a 30-function random module");
    }
}

#[test]
fn workload_function_counts_follow_the_request() {
    assert_eq!(workload("chain", 50, 0).map(|m| m.len()), Ok(50));
    assert_eq!(workload("random", 50, 0).map(|m| m.len()), Ok(50));
    assert_eq!(workload("mlp", 50, 0).map(|m| m.len()), Ok(50));
    assert_eq!(workload("cnn", 50, 0).map(|m| m.len()), Ok(50));
    assert_eq!(workload("transformer", 49, 0).map(|m| m.len()), Ok(49));
}

#[test]
fn unknown_workload_is_an_error_with_a_suggestion() {
    let err = workload("mpl", 10, 0).map(|_| ()).unwrap_err();
    assert!(matches!(&err, GenError::UnknownWorkload { name, .. } if name == "mpl"), "{err:?}");
    let err = err.to_string();
    assert!(err.contains("unknown workload `mpl`") && err.contains("did you mean `mlp`"), "{err}");
}

#[test]
fn transformer_per_block_calls_blocks_from_layers() {
    let text = print_module(&transformer(&TransformerOptions { layers: 2, per_block: true, ..Default::default() }));
    assert!(text.contains("@attention1(") && text.contains("@ffn1("), "{text}");
}

#[test]
fn random_nested_functions_use_their_parameter() {
    let text = print_module(&random(&RandomOptions { functions: 30, bindings: 30, ..Default::default() }));
    let mut seen = 0;
    for (i, _) in text.match_indices("fn (%") {
        let name: String = text[i + 4..].chars().take_while(|&c| c != ':').collect();
        let rest = &text[i + 4 + name.len()..];
        assert!(rest.contains(&format!("({name})")), "nested function {name} does not use its parameter");
        seen += 1;
    }
    assert!(seen > 0, "no nested functions generated");
}
