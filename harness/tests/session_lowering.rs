//! An incremental session over the lowering pipeline (`passel watch --lower`): the standard
//! `-O3` pipeline, LegalizeOps, FuseTIR and the tir passes, on a generated residual network
//! whose blocks are functions of their own. After a one-block edit the tir passes (one stage)
//! re-run exactly on the PrimFuncs that FuseTIR now gives differently from last time, and the
//! output is byte-identical to a cold run, in both memory modes and at 1 and 2 threads.

use std::sync::Arc;

use passel_engine::ir::{parse_module, print_module, Module};
use passel_engine::transform::{Pass, PassContext};
use passel_engine::{MemoryMode, Sequential};
use passel_harness::gen::{cnn, CnnOptions};

fn ctx(threads: usize) -> PassContext {
    passel_passes::link();
    PassContext::builder().opt_level(3).num_threads(threads).build().expect("valid context")
}

fn cold(module: &Module, pipeline: &Sequential) -> Module {
    let ctx = ctx(1);
    ctx.scope(|| pipeline.run(module.clone(), &ctx)).expect("context enters").expect("pipeline runs")
}

/// The module up to the tir passes (FuseTIR's output): what the tir stage's PrimFuncs are.
fn before_tir(module: &Module) -> Module {
    let names: Vec<Arc<dyn Pass>> = vec![
        Arc::new(passel_passes::default_pipeline(3)),
        passel_engine::transform::get_pass(passel_passes::legalize_ops::NAME).expect("registered"),
        passel_engine::transform::get_pass(passel_passes::fuse_tir::NAME).expect("registered"),
    ];
    cold(module, &Sequential::new("up-to-tir", names))
}

/// `module` with the last `relu` of `@block1` made a `sigmoid`: one layer edited.
fn edit_one_block(module: &Module) -> Module {
    let text = print_module(module);
    let start = text.find("def @block1(").expect("@block1");
    let end = start + text[start..].find("\n}\n").expect("end of @block1");
    let at = start + text[start..end].rfind("relu(").expect("a relu in @block1");
    let edited = format!("{}sigmoid({}", &text[..at], &text[at + "relu(".len()..]);
    parse_module(&edited).expect("edited module parses")
}

/// The PrimFuncs of `new` that `old` does not have with the same name and text.
fn changed_prims(old: &Module, new: &Module) -> Vec<String> {
    let text = |f| passel_engine::tir::print_prim_func("f", f);
    new.prim_funcs()
        .filter(|(name, f)| old.get_prim(name).is_none_or(|g| text(g) != text(f)))
        .map(|(name, _)| name.to_string())
        .collect()
}

#[test]
fn a_one_block_edit_reruns_the_tir_passes_only_on_the_prim_funcs_it_changed() {
    let pipeline = passel_passes::build_pipeline(3);
    // As a file holds it (spans and all), so that the edited version differs only in @block1.
    let generated = cnn(&CnnOptions { blocks: 3, batch: 1, channels: 4, image: 6, classes: 3, seed: 7 });
    let module = parse_module(&print_module(&generated)).expect("printed module parses");
    let edited = edit_one_block(&module);
    let expected = changed_prims(&before_tir(&module), &before_tir(&edited));
    let n_prims = before_tir(&edited).num_prims();
    assert!(!expected.is_empty() && expected.len() < n_prims, "{expected:?} of {n_prims}");
    let want = print_module(&cold(&edited, &pipeline));
    let tir_label = passel_passes::TIR_PIPELINE.join(",");
    for mode in [MemoryMode::Full, MemoryMode::Lean] {
        for threads in [1, 2] {
            let mut session = passel_passes::standard_session(pipeline.clone(), &ctx(threads)).expect("session");
            session.set_memory_mode(mode);
            session.load(&module);
            let first = session.run().expect("cold session run");
            assert_eq!(print_module(&first.module), print_module(&cold(&module, &pipeline)), "{mode:?} -j{threads}");
            // The tir passes plan as one stage (one fan-out over the PrimFuncs).
            let tir: Vec<_> = first.stats.stages.iter().filter(|s| s.label == tir_label).collect();
            assert_eq!(tir.len(), 1, "{:?}", first.stats.stages.iter().map(|s| &s.label).collect::<Vec<_>>());
            assert_eq!(tir[0].recomputed.len(), before_tir(&module).num_prims(), "{mode:?} -j{threads}");

            let edits = session.load(&edited);
            assert_eq!(edits, [Arc::<str>::from("block1")], "{mode:?} -j{threads}");
            let out = session.run().expect("session run after the edit");
            assert_eq!(print_module(&out.module), want, "{mode:?} -j{threads}");
            let tir = out.stats.stages.iter().find(|s| s.label == tir_label).expect("the tir stage");
            let rerun: Vec<String> = tir.recomputed.iter().map(|n| n.to_string()).collect();
            assert_eq!(rerun, expected, "{mode:?} -j{threads}");
            assert_eq!(tir.reused, n_prims - expected.len(), "{mode:?} -j{threads}");
            // The graph function stages before lowering recompute the edited block only.
            for stage in out.stats.stages.iter().filter(|s| !s.is_module_pass) {
                assert!(
                    stage.recomputed.iter().all(|n| &**n == "block1"),
                    "{mode:?} -j{threads}: {} recomputed {:?}",
                    stage.label,
                    stage.recomputed
                );
            }
        }
    }
}
