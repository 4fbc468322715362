//! Incremental session tests, rust-analyzer style: after each edit, assert exactly which
//! functions' stages were recomputed, and that the output equals a cold serial run.
//!
//! The engine has no standard passes (they live in passel-passes), so the pipeline here is
//! made of small test passes: an identity pass, a pass that reads its callees' signatures
//! through the module view and reports them, a module pass that marks a few functions, and
//! a final identity pass.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use passel_engine::ir::{parse_module, print_module, AttrValue, ExprKind, Function, Module, Type};
use passel_engine::transform::{Diagnostic, Pass, PassContext, PassError, Sequential};
use passel_engine::{
    function_pass, module_pass, sequential, FirewallCheck, MemoryMode, ModuleFirewall, RunStats, Session, SessionError,
    SessionOutput, StageStats,
};
use proptest::prelude::*;

fn parse(text: &str) -> Module {
    parse_module(text).expect("test module parses")
}

fn func(text: &str) -> Arc<Function> {
    parse(text).entries()[0].1.clone()
}

/// The globals `func` references, sorted, each once.
fn callees(func: &Function) -> Vec<String> {
    let mut callees: Vec<String> = func
        .nodes()
        .iter()
        .filter_map(|n| match n.kind {
            ExprKind::Global { name } => Some(func.sym(name).to_string()),
            _ => None,
        })
        .collect();
    callees.sort();
    callees.dedup();
    callees
}

/// Reports, for every global the function references, the callee's signature as seen in
/// the module view.
fn callee_report() -> Arc<dyn Pass> {
    function_pass("CalleeReport", 1, |func, module, ctx| {
        for callee in callees(&func) {
            let sig = module.get(&callee).and_then(|f| f.signature()).map_or("unknown".to_string(), |t| t.to_string());
            ctx.emit(Diagnostic::warning("CalleeReport", format!("calls @{callee}: {sig}")));
        }
        Ok(func)
    })
    .shared()
}

/// Marks the functions whose name starts with `hot` with `Inline = 1`; the rest are returned
/// as they are.
fn mark_hot() -> Arc<dyn Pass> {
    module_pass("MarkHot", 0, |module, _ctx| {
        let mut out = Module::new();
        for (name, f) in module.iter() {
            let f = if name.starts_with("hot") && !f.attrs().contains("Inline") {
                Arc::new(f.with_attrs(f.attrs().clone().with("Inline", AttrValue::Int(1))))
            } else {
                f.clone()
            };
            out.add(name, f).map_err(|e| PassError::msg(e.to_string()))?;
        }
        Ok(out)
    })
    .shared()
}

fn identity(name: &str, opt_level: u32) -> Arc<dyn Pass> {
    function_pass(name, opt_level, |func, _module, _ctx| Ok(func)).shared()
}

/// Stages: [First, CalleeReport] | MarkHot | [Last (opt level 2)].
fn pipeline() -> Sequential {
    sequential("test", vec![identity("First", 0), callee_report(), mark_hot(), identity("Last", 2)])
}

fn ctx(opt_level: u32, threads: usize) -> PassContext {
    PassContext::builder().opt_level(opt_level).num_threads(threads).build().expect("valid context")
}

fn cold(pipeline: &Sequential, module: &Module, opt_level: u32) -> Result<(String, Vec<Diagnostic>), PassError> {
    let ctx = ctx(opt_level, 1);
    let out = ctx.scope(|| pipeline.run(module.clone(), &ctx))??;
    Ok((print_module(&out), ctx.diagnostics().take()))
}

/// Checks that `out` equals a cold serial run on the session's module.
fn assert_matches_cold(session: &Session, pipeline: &Sequential, out: &SessionOutput, opt_level: u32) {
    let (text, diags) = cold(pipeline, &session.module(), opt_level).expect("cold run succeeds");
    assert_eq!(print_module(&out.module), text);
    assert_eq!(out.diagnostics, diags);
}

/// The functions each stage recomputed, one line per stage.
fn recomputed(out: &SessionOutput) -> Vec<String> {
    out.stats
        .stages
        .iter()
        .map(|s| format!("{}: {}", s.label, s.recomputed.iter().map(|n| n.as_ref()).collect::<Vec<_>>().join(" ")))
        .collect()
}

const MODULE: &str = "\
def @leaf(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  add(%x, %x)
}

def @mid(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  @leaf(%x)
}

def @top(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  @mid(%x)
}

def @hot(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {
  negative(%x)
}
";

fn session(threads: usize) -> (Session, Sequential) {
    let p = pipeline();
    let mut s = Session::new(p.clone(), &ctx(2, threads)).expect("session");
    s.load(&parse(MODULE));
    (s, p)
}

fn run(s: &mut Session, p: &Sequential, opt_level: u32) -> SessionOutput {
    let out = s.run().expect("run succeeds");
    assert_matches_cold(s, p, &out, opt_level);
    out
}

fn run_uncached(s: &mut Session, p: &Sequential, opt_level: u32) -> SessionOutput {
    let out = s.start_run().run().expect("run succeeds");
    assert_matches_cold(s, p, &out, opt_level);
    out
}

#[test]
fn first_run_computes_every_stage_of_every_function() {
    let (mut s, p) = session(1);
    let out = run(&mut s, &p, 2);
    assert_eq!(
        recomputed(&out),
        ["First,CalleeReport: leaf mid top hot", "MarkHot: leaf mid top hot", "Last: leaf mid top hot"]
    );
}

#[test]
fn run_without_change_recomputes_nothing() {
    let (mut s, p) = session(1);
    run(&mut s, &p, 2);
    let out = run(&mut s, &p, 2);
    assert_eq!(recomputed(&out), ["First,CalleeReport: ", "MarkHot: ", "Last: "]);
    // The same through salsa, without the session's shortcut.
    let out = run_uncached(&mut s, &p, 2);
    assert_eq!(recomputed(&out), ["First,CalleeReport: ", "MarkHot: ", "Last: "]);
    assert_eq!(out.stats.stages[0].reused, 4);
}

#[test]
fn reloading_an_identical_module_recomputes_nothing() {
    let (mut s, p) = session(1);
    run(&mut s, &p, 2);
    // Blank lines move every function: spans shift, nothing else changes.
    let moved = format!("\n\n{MODULE}");
    assert!(s.load(&parse(&moved)).is_empty());
    let out = run_uncached(&mut s, &p, 2);
    assert_eq!(recomputed(&out), ["First,CalleeReport: ", "MarkHot: ", "Last: "]);
}

#[test]
fn body_edit_with_same_signature_recomputes_only_that_function() {
    let (mut s, p) = session(1);
    run(&mut s, &p, 2);
    let changed = s
        .set_function("leaf", func("def @leaf(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  multiply(%x, %x)\n}\n"));
    assert!(changed);
    let out = run(&mut s, &p, 2);
    assert_eq!(recomputed(&out), ["First,CalleeReport: leaf", "MarkHot: leaf mid top hot", "Last: leaf"]);
}

/// MarkHot's firewall: it only ever changes functions named `hot…`, whatever the others hold.
fn mark_hot_firewall() -> ModuleFirewall {
    ModuleFirewall { unaffected: Arc::new(|c: &FirewallCheck<'_>| !c.name.starts_with("hot")) }
}

#[test]
fn a_module_pass_firewall_skips_the_pass_for_edits_it_vouches_for() {
    let (mut s, p) = session(1);
    s.set_firewall("MarkHot", mark_hot_firewall()).expect("firewall");
    run(&mut s, &p, 2);
    s.set_function("leaf", func("def @leaf(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  multiply(%x, %x)\n}\n"));
    let out = run(&mut s, &p, 2);
    assert_eq!(recomputed(&out), ["First,CalleeReport: leaf", "MarkHot: ", "Last: leaf"]);
    // The firewall does not vouch for `hot`: the pass runs again.
    s.set_function("hot", func("def @hot(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  relu(%x)\n}\n"));
    let out = run(&mut s, &p, 2);
    assert_eq!(recomputed(&out), ["First,CalleeReport: hot", "MarkHot: leaf mid top hot", "Last: hot"]);
}

#[test]
fn a_firewall_is_not_trusted_for_a_function_the_pass_had_rewritten() {
    // A firewall that vouches for every edit: the session still runs the pass again for a
    // function the pass had changed, since it cannot know what the pass would make of it.
    for mode in [MemoryMode::Full, MemoryMode::Lean] {
        let (mut s, p) = session(1);
        s.set_memory_mode(mode);
        s.set_firewall("MarkHot", ModuleFirewall { unaffected: Arc::new(|_: &FirewallCheck<'_>| true) })
            .expect("firewall");
        run(&mut s, &p, 2);
        s.set_function("hot", func("def @hot(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  relu(%x)\n}\n"));
        let out = run(&mut s, &p, 2);
        assert_eq!(recomputed(&out), ["First,CalleeReport: hot", "MarkHot: leaf mid top hot", "Last: hot"]);
    }
}

#[test]
fn signature_change_recomputes_the_function_and_its_direct_callers() {
    let (mut s, p) = session(2);
    run(&mut s, &p, 2);
    s.set_function("leaf", func("def @leaf(%x: Tensor[(3,), f32]) -> Tensor[(3,), f32] {\n  add(%x, %x)\n}\n"));
    let out = run(&mut s, &p, 2);
    // mid's later stages see leaf's new signature too.
    assert_eq!(recomputed(&out), ["First,CalleeReport: leaf mid", "MarkHot: leaf mid top hot", "Last: leaf mid"]);
}

#[test]
fn adding_a_function_recomputes_only_it() {
    let (mut s, p) = session(1);
    run(&mut s, &p, 2);
    s.add_function("hot2", func("def @hot2(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  @top(%x)\n}\n"))
        .expect("new name");
    let out = run(&mut s, &p, 2);
    assert_eq!(recomputed(&out), ["First,CalleeReport: hot2", "MarkHot: leaf mid top hot hot2", "Last: hot2"]);
    assert!(matches!(
        s.add_function("hot2", func("def @hot2() -> Tensor[(), f32] {\n  1.0f\n}\n")),
        Err(SessionError::Module(_))
    ));
}

#[test]
fn adding_a_missing_callee_recomputes_its_callers() {
    let (mut s, p) = session(1);
    s.set_function("user", func("def @user(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  @later(%x)\n}\n"));
    run(&mut s, &p, 2);
    s.add_function("later", func("def @later(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  %x\n}\n"))
        .expect("new name");
    let out = run(&mut s, &p, 2);
    assert_eq!(out.stats.stages[0].recomputed.iter().map(|n| &**n).collect::<Vec<_>>(), ["user", "later"]);
}

#[test]
fn removing_a_function_recomputes_only_its_callers() {
    let (mut s, p) = session(1);
    run(&mut s, &p, 2);
    s.remove_function("hot").expect("exists");
    let out = run(&mut s, &p, 2);
    assert_eq!(recomputed(&out), ["First,CalleeReport: ", "MarkHot: leaf mid top", "Last: "]);
    s.remove_function("leaf").expect("exists");
    let out = run(&mut s, &p, 2);
    assert_eq!(recomputed(&out), ["First,CalleeReport: mid", "MarkHot: mid top", "Last: mid"]);
    assert!(matches!(s.remove_function("leaf"), Err(SessionError::Module(_))));
}

#[test]
fn removing_a_function_after_an_edit_does_not_recompute_the_edited_function_again() {
    // The edit runs on the edit path; the removal's run goes through salsa, whose memos for
    // the edited function predate the edit: the edit path's results must serve them.
    let (mut s, p) = session(1);
    run(&mut s, &p, 2);
    s.set_function("leaf", func("def @leaf(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  multiply(%x, %x)\n}\n"));
    let out = run(&mut s, &p, 2);
    assert_eq!(recomputed(&out), ["First,CalleeReport: leaf", "MarkHot: leaf mid top hot", "Last: leaf"]);
    s.remove_function("hot").expect("exists");
    let out = run(&mut s, &p, 2);
    assert_eq!(recomputed(&out), ["First,CalleeReport: ", "MarkHot: leaf mid top", "Last: "]);
    // Twice over, and with a signature edit whose callers the edit path recomputed too.
    s.set_function("leaf", func("def @leaf(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  subtract(%x, %x)\n}\n"));
    s.set_function("mid", func("def @mid(%x: Tensor[(2,), f32]) {\n  @leaf(%x)\n}\n"));
    let out = run(&mut s, &p, 2);
    assert_eq!(recomputed(&out), ["First,CalleeReport: leaf mid top", "MarkHot: leaf mid top", "Last: leaf mid top"]);
    s.remove_function("leaf").expect("exists");
    let out = run(&mut s, &p, 2);
    // Removing @leaf recomputes its caller @mid, and nothing the edit path already computed.
    assert_eq!(recomputed(&out), ["First,CalleeReport: mid", "MarkHot: mid top", "Last: mid"]);
}

#[test]
fn renaming_a_function_recomputes_it_and_the_callers_of_both_names() {
    let (mut s, p) = session(1);
    run(&mut s, &p, 2);
    s.rename_function("mid", "hotmid").expect("rename");
    let out = run(&mut s, &p, 2);
    // top calls @mid, which is now unknown; hotmid is marked by MarkHot.
    assert_eq!(
        recomputed(&out),
        ["First,CalleeReport: hotmid top", "MarkHot: leaf hotmid top hot", "Last: hotmid top"]
    );
}

#[test]
fn opt_level_change_recomputes_everything() {
    let (mut s, p) = session(1);
    run(&mut s, &p, 2);
    s.set_context(&ctx(1, 1)).expect("context");
    let out = run(&mut s, &p, 1);
    // At opt level 1, Last (level 2) does not run.
    assert_eq!(recomputed(&out), ["First,CalleeReport: leaf mid top hot", "MarkHot: leaf mid top hot"]);
    // A thread count change alone recomputes nothing.
    s.set_context(&ctx(1, 2)).expect("context");
    let out = run_uncached(&mut s, &p, 1);
    assert_eq!(recomputed(&out), ["First,CalleeReport: ", "MarkHot: "]);
}

#[test]
fn module_pass_output_unchanged_for_most_functions_lets_only_changed_ones_go_on() {
    let (mut s, p) = session(1);
    run(&mut s, &p, 2);
    // hot's body changes; MarkHot runs over everything again but only hot's output differs.
    s.set_function("hot", func("def @hot(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  relu(%x)\n}\n"));
    let out = run(&mut s, &p, 2);
    assert_eq!(recomputed(&out), ["First,CalleeReport: hot", "MarkHot: leaf mid top hot", "Last: hot"]);
}

#[test]
fn changing_the_pipeline_keeps_the_stages_that_did_not_change() {
    let (mut s, p) = session(1);
    run(&mut s, &p, 2);
    let mut passes = p.passes().to_vec();
    passes[3] = identity("Other", 0);
    let p2 = sequential("test", passes);
    s.set_pipeline(p2.clone()).expect("pipeline");
    let out = run(&mut s, &p2, 2);
    assert_eq!(recomputed(&out), ["First,CalleeReport: ", "MarkHot: ", "Other: leaf mid top hot"]);
}

#[test]
fn sessions_reject_instruments() {
    let ctx = PassContext::builder()
        .instrument(Arc::new(passel_engine::transform::PassTimingInstrument::new()))
        .build()
        .expect("context");
    assert!(matches!(Session::new(pipeline(), &ctx), Err(SessionError::Instruments(_))));
}

#[test]
fn a_pass_panic_is_reported_and_the_session_stays_usable() {
    let boom = function_pass("Boom", 0, |func, _module, _ctx| {
        if func.nodes().iter().any(|n| matches!(n.kind, ExprKind::Call { .. }) && n.ty.is_none())
            && func.attrs().contains("Boom")
        {
            panic!("boom");
        }
        Ok(func)
    })
    .shared();
    let p = sequential("boom", vec![boom, mark_hot()]);
    let mut s = Session::new(p.clone(), &ctx(2, 2)).expect("session");
    s.load(&parse(MODULE));
    s.set_function("bad", func("#[Boom]\ndef @bad(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  negative(%x)\n}\n"));
    match s.run() {
        Err(SessionError::Pass(PassError::InPass { pass, function, panicked, .. })) => {
            assert_eq!((pass.as_str(), function.as_deref(), panicked), ("Boom", Some("bad"), true));
        }
        other => panic!("expected a panic report, got {other:?}"),
    }
    let cold_err = cold(&p, &s.module(), 2).expect_err("cold run fails too");
    assert!(cold_err.to_string().contains("boom"));
    s.set_function("bad", func("def @bad(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  negative(%x)\n}\n"));
    let out = run(&mut s, &p, 2);
    assert_eq!(out.stats.stages[0].recomputed.iter().map(|n| &**n).collect::<Vec<_>>(), ["bad"]);
}

/// A function pass that marks every function it runs on with `Seen = 1`.
fn mark_seen() -> Arc<dyn Pass> {
    function_pass("MarkSeen", 0, |func, _module, _ctx| {
        Ok(Arc::new(func.with_attrs(func.attrs().clone().with("Seen", AttrValue::Int(1)))))
    })
    .shared()
}

#[test]
fn a_split_module_pass_shares_a_stage_with_the_function_passes_after_it() {
    let p = sequential("test", vec![identity("First", 0), mark_hot(), mark_seen(), callee_report()]);
    let mut s = Session::new(p.clone(), &ctx(2, 2)).expect("session");
    // MarkHot's per-function form: the module pass touches each function alone (the
    // function finds its name in its module view, where it is itself).
    let hot_per_function = function_pass("MarkHotPerFunction", 0, |func, module, _ctx| {
        let name = module.iter().find(|(_, f)| Arc::ptr_eq(f, &func)).map(|(n, _)| n.to_string());
        match name {
            Some(n) if n.starts_with("hot") && !func.attrs().contains("Inline") => {
                Ok(Arc::new(func.with_attrs(func.attrs().clone().with("Inline", AttrValue::Int(1)))))
            }
            _ => Ok(func),
        }
    })
    .shared();
    s.set_split("MarkHot", passel_engine::ModuleSplit { prelude: None, per_function: hot_per_function })
        .expect("split");
    let text = format!("{MODULE}\n#[SkipOptimization]\ndef @hot_skipped(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {{\n  @leaf(%x)\n}}\n");
    s.load(&parse(&text));
    let out = run(&mut s, &p, 2);
    // One query per function runs the split pass and the function passes after it.
    assert_eq!(
        recomputed(&out),
        [
            "First: leaf mid top hot hot_skipped",
            "MarkHotPerFunction,MarkSeen,CalleeReport: leaf mid top hot hot_skipped"
        ]
    );
    // The split pass runs on the skipped function (as the module pass would); the function
    // passes after it do not.
    let printed = print_module(&out.module);
    assert!(
        printed.contains("#[Inline=1, SkipOptimization]") || printed.contains("#[SkipOptimization, Inline=1]"),
        "{printed}"
    );
    s.set_function("mid", func("def @mid(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  @leaf(@leaf(%x))\n}\n"));
    let out = run(&mut s, &p, 2);
    assert_eq!(recomputed(&out), ["First: mid", "MarkHotPerFunction,MarkSeen,CalleeReport: mid"]);
}

/// A module pass declaring its own split (`ModulePass::with_prelude_and_function_form`): the
/// prelude drops the functions whose name starts with `dead`, the per-function part marks the
/// rest with `Kept = 1`. Its module body counts its calls.
fn prune_and_mark(body_runs: Arc<AtomicUsize>) -> Arc<dyn Pass> {
    fn prune(module: &Module) -> Module {
        let mut out = Module::new();
        for (name, f) in module.iter().filter(|(n, _)| !n.starts_with("dead")) {
            out.add(name, f.clone()).expect("unique names");
        }
        out
    }
    fn mark(f: &Arc<Function>) -> Arc<Function> {
        Arc::new(f.with_attrs(f.attrs().clone().with("Kept", AttrValue::Int(1))))
    }
    module_pass("PruneAndMark", 0, move |module, _ctx| {
        body_runs.fetch_add(1, Ordering::SeqCst);
        let mut out = prune(&module);
        let new = out.iter().map(|(_, f)| mark(f)).collect();
        out.replace_all(new);
        Ok(out)
    })
    .with_prelude_and_function_form(|module, _ctx| prune(module), |func, _module, _ctx| Ok(mark(&func)))
    .shared()
}

#[test]
fn a_pass_declaring_its_own_split_runs_split_in_a_session_without_set_split() {
    let body_runs = Arc::new(AtomicUsize::new(0));
    let p = sequential("test", vec![identity("First", 0), prune_and_mark(body_runs.clone()), mark_seen()]);
    let mut s = Session::new(p.clone(), &ctx(2, 2)).expect("session");
    s.load(&parse(&format!(
        "{MODULE}
def @dead_end(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {{
  %x
}}
"
    )));
    let out = run(&mut s, &p, 2);
    // The prelude is a module stage of the pass's name; its per-function part shares a stage
    // with the function pass after it.
    assert_eq!(
        recomputed(&out),
        [
            "First: leaf mid top hot dead_end",
            "PruneAndMark: leaf mid top hot dead_end",
            "PruneAndMark,MarkSeen: leaf mid top hot"
        ]
    );
    assert!(!print_module(&out.module).contains("dead_end"));
    // Neither the session nor the cold check (the executor runs the split too) needed the body.
    assert_eq!(body_runs.load(Ordering::SeqCst), 0);
    s.set_function("mid", func("def @mid(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  @leaf(@leaf(%x))\n}\n"));
    let out = run(&mut s, &p, 2);
    // Without a firewall the prelude sees the whole module again; per function only the
    // edited one is recomputed.
    assert_eq!(
        recomputed(&out),
        ["First: mid", "PruneAndMark: leaf mid top hot dead_end", "PruneAndMark,MarkSeen: mid"]
    );
}

/// A firewall set on the session by the name of a pass split with `set_split` covers the
/// split's prelude (a module stage under the prelude's own name).
#[test]
fn a_firewall_set_for_a_split_pass_covers_its_prelude() {
    let p = sequential("test", vec![identity("First", 0), prune_and_mark(Arc::default()), mark_seen()]);
    for mode in [MemoryMode::Full, MemoryMode::Lean] {
        let mut s = Session::new(p.clone(), &ctx(2, 1)).expect("session");
        s.set_memory_mode(mode);
        let prelude = module_pass("DropDead", 0, |module, _ctx| {
            let mut out = Module::new();
            for (name, f) in module.iter().filter(|(n, _)| !n.starts_with("dead")) {
                out.add(name, f.clone()).map_err(|e| PassError::msg(e.to_string()))?;
            }
            Ok(out)
        })
        .shared();
        let per_function = function_pass("MarkKept", 0, |func, _module, _ctx| {
            Ok(Arc::new(func.with_attrs(func.attrs().clone().with("Kept", AttrValue::Int(1)))))
        })
        .shared();
        s.set_split("PruneAndMark", passel_engine::ModuleSplit { prelude: Some(prelude), per_function })
            .expect("split");
        // The prelude only drops `dead…` functions: an edit of any other leaves the rest alone.
        let firewall = ModuleFirewall { unaffected: Arc::new(|c: &FirewallCheck<'_>| !c.name.starts_with("dead")) };
        s.set_firewall("PruneAndMark", firewall).expect("firewall");
        s.load(&parse(&format!("{MODULE}\ndef @dead_end(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {{\n  %x\n}}\n")));
        let out = run(&mut s, &p, 2);
        assert_eq!(recomputed(&out)[1], "DropDead: leaf mid top hot dead_end", "{mode:?}");
        s.set_function("mid", func("def @mid(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  @leaf(@leaf(%x))\n}\n"));
        let out = run(&mut s, &p, 2);
        assert_eq!(recomputed(&out), ["First: mid", "DropDead: ", "MarkKept,MarkSeen: mid"], "{mode:?}");
        assert_matches_cold(&s, &p, &out, 2);
    }
}

/// A change of the thread count alone recomputes nothing, but the passes that run afterwards
/// see the new count in their context (a module pass fans out with it).
#[test]
fn a_thread_count_change_reaches_module_passes_without_recomputing() {
    for mode in [MemoryMode::Full, MemoryMode::Lean] {
        let seen = Arc::new(AtomicUsize::new(0));
        let recorder = {
            let seen = seen.clone();
            module_pass("Threads", 0, move |module, ctx| {
                seen.store(ctx.num_threads(), Ordering::SeqCst);
                Ok(module)
            })
            .shared()
        };
        let p = sequential("test", vec![identity("First", 0), recorder, identity("Last", 0)]);
        let mut s = Session::new(p.clone(), &ctx(2, 1)).expect("session");
        s.set_memory_mode(mode);
        s.load(&parse(MODULE));
        s.run().expect("run");
        assert_eq!(seen.load(Ordering::SeqCst), 1);
        s.set_context(&ctx(2, 2)).expect("context");
        let out = s.run().expect("run");
        assert!(out.stats.stages.iter().all(|st| st.recomputed.is_empty()), "{mode:?}: {:?}", recomputed(&out));
        s.set_function("mid", func("def @mid(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  @leaf(@leaf(%x))\n}\n"));
        let out = s.run().expect("run");
        assert_eq!(seen.load(Ordering::SeqCst), 2, "{mode:?}");
        assert_eq!(recomputed(&out), ["First: mid", "Threads: leaf mid top hot", "Last: mid"], "{mode:?}");
        assert_matches_cold(&s, &p, &out, 2);
    }
}

#[test]
fn a_body_edit_that_makes_a_module_pass_drop_a_function_matches_a_cold_run() {
    // Drops the functions marked `Drop`: a body edit changes the function list after it.
    let drop_marked = module_pass("DropMarked", 0, |module, _ctx| {
        let mut out = Module::new();
        for (name, f) in module.iter().filter(|(_, f)| !f.attrs().contains("Drop")) {
            out.add(name, f.clone()).map_err(|e| PassError::msg(e.to_string()))?;
        }
        Ok(out)
    })
    .shared();
    let p = sequential("test", vec![callee_report(), drop_marked, identity("Last", 0)]);
    let mut s = Session::new(p.clone(), &ctx(2, 2)).expect("session");
    s.load(&parse(MODULE));
    run(&mut s, &p, 2);
    s.set_function(
        "leaf",
        func("#[Drop]\ndef @leaf(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  add(%x, %x)\n}\n"),
    );
    let out = run(&mut s, &p, 2);
    assert!(out.module.get("leaf").is_none());
    s.set_function("leaf", func("def @leaf(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  add(%x, %x)\n}\n"));
    let out = run(&mut s, &p, 2);
    assert!(out.module.get("leaf").is_some());
    // A body edit after that goes back to recomputing only the edited function.
    s.set_function("hot", func("def @hot(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  relu(%x)\n}\n"));
    let out = run(&mut s, &p, 2);
    assert_eq!(recomputed(&out), ["CalleeReport: hot", "DropMarked: leaf mid top hot", "Last: hot"]);
}

#[test]
fn an_edit_during_a_run_cancels_it_and_the_next_run_is_correct() {
    let started = Arc::new(AtomicUsize::new(0));
    let seen = started.clone();
    let slow = function_pass("Slow", 0, move |func, _module, _ctx| {
        seen.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(std::time::Duration::from_millis(3));
        Ok(func)
    })
    .shared();
    let p = sequential("slow", vec![slow]);
    let mut s = Session::new(p.clone(), &ctx(0, 1)).expect("session");
    let mut text = String::new();
    for i in 0..300 {
        text.push_str(&format!("def @f{i}(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {{\n  negative(%x)\n}}\n\n"));
    }
    s.load(&parse(&text));
    let pending = s.start_run();
    let handle = std::thread::spawn(move || pending.run());
    while started.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    // Blocks until the run has noticed the cancellation and let go of the database.
    s.set_function("f0", func("def @f0(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  relu(%x)\n}\n"));
    let res = handle.join().expect("run thread does not panic");
    assert!(matches!(res, Err(SessionError::Cancelled)), "expected a cancelled run, got {:?}", res.map(|_| ()));
    let before = started.load(Ordering::SeqCst);
    assert!(before < 300, "the cancelled run stopped early");
    let out = s.run().expect("run succeeds");
    assert_eq!(started.load(Ordering::SeqCst) - before, out.stats.stages[0].recomputed.len());
    assert_eq!(out.module.len(), 300);
    assert_matches_cold(&s, &p, &out, 0);
}

// ---- property: random edit sequences match a cold serial run ----

#[derive(Clone, Debug)]
enum Edit {
    Add(u8),
    Remove(u8),
    Body(u8, u8),
    Signature(u8, u8),
    OptLevel(u8),
    DropLast,
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        any::<u8>().prop_map(Edit::Add),
        any::<u8>().prop_map(Edit::Remove),
        (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Edit::Body(a, b)),
        (any::<u8>(), any::<u8>()).prop_map(|(a, b)| Edit::Signature(a, b)),
        (0u8..4).prop_map(Edit::OptLevel),
        Just(Edit::DropLast),
    ]
}

fn gen_func(name: &str, size: u8, body: u8, callee: Option<&str>) -> Arc<Function> {
    let ops = ["negative", "relu", "sigmoid", "tanh"];
    let mut text = format!("def @{name}(%x: Tensor[({size},), f32]) -> Tensor[({size},), f32] {{\n");
    text.push_str(&format!("  let %a = {}(%x);\n", ops[body as usize % 4]));
    if let Some(c) = callee {
        text.push_str(&format!("  let %b = @{c}(%a);\n  %b\n}}\n"));
    } else {
        text.push_str("  %a\n}\n");
    }
    func(&text)
}

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn random_edit_sequences_match_a_cold_serial_run(
        edits in proptest::collection::vec(edit(), 1..12),
        threads in 1usize..3,
        lean in any::<bool>(),
    ) {
        let mut p = pipeline();
        let mut opt = 2u32;
        let mut s = Session::new(p.clone(), &ctx(opt, threads)).expect("session");
        if lean {
            s.set_memory_mode(MemoryMode::Lean);
        }
        let mut names: Vec<String> = Vec::new();
        for i in 0..4u8 {
            let name = format!("f{i}");
            let callee = names.last().cloned();
            s.set_function(&name, gen_func(&name, 2, i, callee.as_deref()));
            names.push(name);
        }
        let mut next = 4u32;
        for e in edits {
            match e {
                Edit::Add(x) => {
                    let name = if x % 3 == 0 { format!("hot{next}") } else { format!("f{next}") };
                    next += 1;
                    let callee = (!names.is_empty()).then(|| names[x as usize % names.len()].clone());
                    s.add_function(&name, gen_func(&name, 2, x, callee.as_deref())).expect("fresh name");
                    names.push(name);
                }
                Edit::Remove(x) if !names.is_empty() => {
                    let name = names.remove(x as usize % names.len());
                    s.remove_function(&name).expect("exists");
                }
                Edit::Body(x, b) if !names.is_empty() => {
                    let name = names[x as usize % names.len()].clone();
                    let callee = names.get(b as usize % names.len()).filter(|c| **c != name).cloned();
                    s.set_function(&name, gen_func(&name, 2, b, callee.as_deref()));
                }
                Edit::Signature(x, size) if !names.is_empty() => {
                    let name = names[x as usize % names.len()].clone();
                    s.set_function(&name, gen_func(&name, 1 + size % 3, size, None));
                }
                Edit::OptLevel(level) => {
                    opt = u32::from(level);
                    s.set_context(&ctx(opt, threads)).expect("context");
                }
                Edit::DropLast => {
                    let mut passes = p.passes().to_vec();
                    if passes.len() > 1 {
                        passes.pop();
                        p = sequential("test", passes);
                        s.set_pipeline(p.clone()).expect("pipeline");
                    }
                }
                _ => {}
            }
            let out = s.run().expect("run succeeds");
            let (text, diags) = cold(&p, &s.module(), opt).expect("cold run succeeds");
            prop_assert_eq!(print_module(&out.module), text);
            prop_assert_eq!(out.diagnostics, diags);
        }
    }
}

/// The type other functions see for `f`, as InferType reads it: its declared signature, or
/// its parameter and body types when it declares none.
fn seen_type(f: &Function) -> String {
    f.signature()
        .or_else(|| {
            let params: Option<Vec<Type>> = f.params().iter().map(|&p| f.ty(p).cloned()).collect();
            Some(Type::func(params?, f.ty(f.body())?.clone()))
        })
        .map_or_else(|| "unknown".to_string(), |t| t.to_string())
}

/// Reports the type each callee of `func` has in `module`.
fn report_callee_types(func: &Function, module: &Module, ctx: &PassContext, name: Option<&str>) {
    for callee in callees(func) {
        let ty = module.get(&callee).map_or_else(|| "missing".to_string(), |f| seen_type(f));
        let mut d = Diagnostic::warning("CalleeTypes", format!("calls @{callee}: {ty}"));
        if let Some(name) = name {
            d = d.in_function(name);
        }
        ctx.emit(d);
    }
}

/// A function-local module pass (like InferType) with its per-function form: reports the
/// type every callee has in the module it is given, for every function (also those marked
/// `SkipOptimization`), in module order.
fn callee_types() -> Arc<dyn Pass> {
    module_pass("CalleeTypes", 0, |module, ctx| {
        for (name, f) in module.iter() {
            report_callee_types(f, &module, ctx, Some(name));
        }
        Ok(module)
    })
    .with_function_form(|func, module, ctx| {
        report_callee_types(&func, module, ctx, None);
        Ok(func)
    })
    .shared()
}

/// `func` with node `id`'s type set to `ty`.
fn with_type(func: &Function, id: passel_engine::ir::NodeId, ty: Option<Type>) -> Function {
    let mut types: Vec<Option<Type>> = func.node_ids().map(|n| func.ty(n).cloned()).collect();
    types[id.0 as usize] = ty;
    func.with_types(types)
}

/// Changes the declared type of the first parameter of functions with the attribute `Retype`
/// (which breaks the precondition of a per-function form run after it in the same stage).
fn retype() -> Arc<dyn Pass> {
    function_pass("Retype", 0, |func, _module, _ctx| {
        let Some(&p) = func.params().first() else { return Ok(func) };
        match (func.attrs().contains("Retype"), func.ty(p).cloned()) {
            (true, Some(t)) => Ok(Arc::new(with_type(&func, p, Some(Type::func(vec![], t))))),
            _ => Ok(func),
        }
    })
    .shared()
}

/// Gives the body of a function without a declared result type its first parameter's type
/// (so the type callers see for it changes).
fn type_body() -> Arc<dyn Pass> {
    function_pass("TypeBody", 0, |func, _module, _ctx| {
        let Some(&p) = func.params().first() else { return Ok(func) };
        if func.ret_ty().is_some() || func.ty(func.body()).is_some() {
            return Ok(func);
        }
        Ok(Arc::new(with_type(&func, func.body(), func.ty(p).cloned())))
    })
    .shared()
}

/// Fused: [First, Retype, TypeBody, CalleeTypes, Last]; unfused: [First, Retype, TypeBody] |
/// [CalleeTypes, Last].
fn local_pipeline() -> Sequential {
    sequential("local", vec![identity("First", 0), retype(), type_body(), callee_types(), identity("Last", 0)])
}

fn labels(out: &SessionOutput) -> Vec<&str> {
    out.stats.stages.iter().map(|s| s.label.as_str()).collect()
}

const FUSED: &str = "First,Retype,TypeBody,CalleeTypes,Last";

#[test]
fn a_function_local_module_pass_joins_the_function_stage() {
    let p = local_pipeline();
    let mut s = Session::new(p.clone(), &ctx(2, 2)).expect("session");
    let text = format!(
        "{MODULE}\n#[SkipOptimization]\ndef @skipped(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {{\n  @leaf(%x)\n}}\n"
    );
    s.load(&parse(&text));
    let out = run(&mut s, &p, 2);
    assert_eq!(labels(&out), [FUSED]);
    // The form ran on the skipped function, as the module pass does.
    assert!(out.diagnostics.iter().any(|d| d.function.as_deref() == Some("skipped")), "{:?}", out.diagnostics);
    s.set_function("mid", func("def @mid(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  @leaf(@leaf(%x))\n}\n"));
    let out = run(&mut s, &p, 2);
    assert_eq!(recomputed(&out), [format!("{FUSED}: mid")]);
}

#[test]
fn a_pass_changing_a_declared_signature_before_a_fused_form_makes_the_session_run_unfused() {
    let p = local_pipeline();
    let mut s = Session::new(p.clone(), &ctx(2, 2)).expect("session");
    s.load(&parse(MODULE));
    assert_eq!(labels(&run(&mut s, &p, 2)), [FUSED]);
    // A body edit (the edit path) that makes Retype change @leaf's signature, which @mid's
    // CalleeTypes must see.
    s.set_function(
        "leaf",
        func("#[Retype=1]\ndef @leaf(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  add(%x, %x)\n}\n"),
    );
    let out = run(&mut s, &p, 2);
    assert_eq!(labels(&out), ["First,Retype,TypeBody", "CalleeTypes,Last"]);
    assert!(out.diagnostics.iter().any(|d| d.message.contains("fn(")), "{:?}", out.diagnostics);
    // Later edits stay correct, through the edit path and salsa, serial and parallel.
    s.set_function("top", func("def @top(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  @mid(@mid(%x))\n}\n"));
    run(&mut s, &p, 2);
    s.set_function("leaf", func("def @leaf(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  add(%x, %x)\n}\n"));
    run(&mut s, &p, 2);
    run_uncached(&mut s, &p, 2);
    s.remove_function("hot").expect("remove");
    run(&mut s, &p, 2);
    // A fresh session on a module that breaks the precondition from the start.
    let mut s = Session::new(p.clone(), &ctx(2, 1)).expect("session");
    let text =
        format!("{MODULE}\n#[Retype=1]\ndef @re(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {{\n  @top(%x)\n}}\n");
    s.load(&parse(&text));
    s.set_function("user", func("def @user(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  @re(%x)\n}\n"));
    run_uncached(&mut s, &p, 2);
    let out = run(&mut s, &p, 2);
    assert_eq!(labels(&out), ["First,Retype,TypeBody", "CalleeTypes,Last"]);
}

#[test]
fn an_undeclared_signature_makes_the_session_run_unfused() {
    let p = local_pipeline();
    let mut s = Session::new(p.clone(), &ctx(2, 2)).expect("session");
    let text = format!(
        "{MODULE}\ndef @open(%x: Tensor[(2,), f32]) {{\n  add(%x, %x)\n}}\n\ndef @user(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {{\n  @open(%x)\n}}\n"
    );
    s.load(&parse(&text));
    let out = run(&mut s, &p, 2);
    assert_eq!(labels(&out), ["First,Retype,TypeBody", "CalleeTypes,Last"]);
    // TypeBody typed @open's body before CalleeTypes read it, as in the serial run.
    assert!(out.diagnostics.iter().any(|d| d.message.starts_with("calls @open: fn(")), "{:?}", out.diagnostics);
}

/// Fails on functions with the attribute `attr`.
fn fail_on(attr: &'static str) -> Arc<dyn Pass> {
    function_pass(&format!("FailOn{attr}"), 0, move |func, _module, _ctx| {
        if func.attrs().contains(attr) {
            return Err(PassError::msg(format!("{attr} found")));
        }
        Ok(func)
    })
    .shared()
}

#[test]
fn a_failing_stage_reports_the_first_failing_pass_before_earlier_functions_failing_later() {
    // @a fails in the second pass, @b (after it) in the first: a serial run reports @b.
    let p = sequential("fail", vec![fail_on("A"), fail_on("B")]);
    for (threads, mode) in [(1, MemoryMode::Full), (2, MemoryMode::Full), (1, MemoryMode::Lean), (2, MemoryMode::Lean)]
    {
        let mut s = Session::new(p.clone(), &ctx(2, threads)).expect("session");
        s.set_memory_mode(mode);
        s.load(&parse(MODULE));
        run(&mut s, &p, 2);
        s.set_function("a", func("#[B=1]\ndef @a(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  negative(%x)\n}\n"));
        s.set_function("b", func("#[A=1]\ndef @b(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  negative(%x)\n}\n"));
        let cold_err = cold(&p, &s.module(), 2).expect_err("cold run fails");
        assert!(cold_err.to_string().contains("A found"), "{cold_err}");
        match s.run() {
            Err(SessionError::Pass(e)) => assert_eq!(e.to_string(), cold_err.to_string()),
            other => panic!("expected a pass error, got {:?}", other.map(|o| recomputed(&o))),
        }
        // Fixing @b leaves @a's failure.
        s.set_function("b", func("def @b(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  negative(%x)\n}\n"));
        let cold_err = cold(&p, &s.module(), 2).expect_err("cold run fails");
        match s.run() {
            Err(SessionError::Pass(e)) => assert_eq!(e.to_string(), cold_err.to_string()),
            other => panic!("expected a pass error, got {:?}", other.map(|o| recomputed(&o))),
        }
    }
}

/// A function for the function-local pipeline: `kind % 4` picks a plain function, one that
/// `Retype` changes the declared signature of, one without a declared result type, or one
/// marked `SkipOptimization`.
fn gen_local_func(name: &str, kind: u8, callee: Option<&str>) -> Arc<Function> {
    let attrs = match kind % 4 {
        1 => "#[Retype=1]\n",
        3 => "#[SkipOptimization]\n",
        _ => "",
    };
    let ret = if kind % 4 == 2 { "" } else { " -> Tensor[(2,), f32]" };
    let body = match callee {
        Some(c) => format!("  @{c}(%x)\n"),
        None => format!("  {}(%x)\n", ["negative", "relu", "tanh"][(kind / 4) as usize % 3]),
    };
    func(&format!("{attrs}def @{name}(%x: Tensor[(2,), f32]){ret} {{\n{body}}}\n"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Random edits that make the fused form's precondition fail and hold again: the output
    /// always equals a cold serial run's, through the edit path, salsa and `start_run`.
    #[test]
    fn random_edits_around_a_fused_form_match_a_cold_serial_run(
        start in proptest::collection::vec(any::<u8>(), 1..6),
        edits in proptest::collection::vec((any::<u8>(), any::<u8>(), any::<u8>()), 1..10),
        threads in 1usize..3,
        lean in any::<bool>(),
    ) {
        let p = local_pipeline();
        let mut s = Session::new(p.clone(), &ctx(2, threads)).expect("session");
        if lean {
            s.set_memory_mode(MemoryMode::Lean);
        }
        let mut names: Vec<String> = Vec::new();
        for (i, kind) in start.iter().enumerate() {
            let name = format!("f{i}");
            let callee = names.last().cloned();
            s.set_function(&name, gen_local_func(&name, *kind, callee.as_deref()));
            names.push(name);
        }
        let mut next = names.len();
        for (op, x, kind) in edits {
            let name = names[x as usize % names.len()].clone();
            let callee = names.get(kind as usize % names.len()).filter(|c| **c != name).cloned();
            match op % 4 {
                0 => {
                    let fresh = format!("f{next}");
                    next += 1;
                    s.add_function(&fresh, gen_local_func(&fresh, kind, Some(&name))).expect("fresh name");
                    names.push(fresh);
                }
                1 if names.len() > 1 => {
                    s.remove_function(&name).expect("exists");
                    names.retain(|n| *n != name);
                }
                _ => {
                    s.set_function(&name, gen_local_func(&name, kind, callee.as_deref()));
                }
            }
            let out = if op % 8 == 7 { s.start_run().run() } else { s.run() }.expect("run succeeds");
            let (text, diags) = cold(&p, &s.module(), 2).expect("cold run succeeds");
            prop_assert_eq!(print_module(&out.module), text);
            prop_assert_eq!(out.diagnostics, diags);
        }
    }
}

/// Lean mode ([`MemoryMode::Lean`]) keeps no intermediate functions, yet recomputes exactly
/// what the default mode does for body and signature edits (its edit path mirrors the
/// default one), including a module pass's firewall; changes of the function list run cold.
#[test]
fn lean_mode_recomputes_what_the_default_mode_does_and_matches_cold_runs() {
    let p = pipeline();
    let leaf_body = "def @leaf(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  multiply(%x, %x)\n}\n";
    let leaf_sig = "def @leaf(%x: Tensor[(3,), f32]) -> Tensor[(3,), f32] {\n  add(%x, %x)\n}\n";
    let hot = "def @hot(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  relu(%x)\n}\n";
    let mut seen: Vec<Vec<Vec<String>>> = Vec::new();
    for mode in [MemoryMode::Full, MemoryMode::Lean] {
        let mut s = Session::new(p.clone(), &ctx(2, 2)).expect("session");
        s.set_memory_mode(mode);
        assert_eq!(s.memory_mode(), mode);
        s.set_firewall("MarkHot", mark_hot_firewall()).expect("firewall");
        s.load(&parse(MODULE));
        let mut lists = vec![recomputed(&run(&mut s, &p, 2))];
        for (name, text) in [("leaf", leaf_body), ("leaf", leaf_sig), ("hot", hot), ("leaf", leaf_body)] {
            s.set_function(name, func(text));
            lists.push(recomputed(&run(&mut s, &p, 2)));
        }
        lists.push(recomputed(&run(&mut s, &p, 2)));
        seen.push(lists);
    }
    assert_eq!(seen[0], seen[1]);
    assert_eq!(
        seen[1][2],
        ["First,CalleeReport: leaf mid", "MarkHot: ", "Last: leaf mid"],
        "a signature change: the function and its caller, MarkHot skipped by its firewall"
    );
    assert_eq!(seen[1][5], ["First,CalleeReport: ", "MarkHot: ", "Last: "]);

    let mut s = Session::new(p.clone(), &ctx(2, 1)).expect("session");
    s.set_memory_mode(MemoryMode::Lean);
    s.load(&parse(MODULE));
    run(&mut s, &p, 2);
    s.add_function("hot2", func("def @hot2(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  @top(%x)\n}\n"))
        .expect("new name");
    let out = run(&mut s, &p, 2);
    assert_eq!(out.stats.stages[0].recomputed.len(), 5, "a list change runs cold in lean mode");
    s.rename_function("mid", "mid2").expect("rename");
    run(&mut s, &p, 2);
    s.remove_function("hot").expect("remove");
    run(&mut s, &p, 2);
    // Back on the edit path: a signature change recomputes leaf and its renamed caller.
    s.set_function("leaf", func(leaf_sig));
    let out = run(&mut s, &p, 2);
    assert_eq!(out.stats.stages[0].recomputed.iter().map(|n| &**n).collect::<Vec<_>>(), ["leaf", "mid2"]);
}

/// Switching modes drops what the other mode kept; runs stay correct either way.
#[test]
fn switching_memory_modes_keeps_runs_correct() {
    let (mut s, p) = session(2);
    run(&mut s, &p, 2);
    s.set_memory_mode(MemoryMode::Lean);
    let out = run(&mut s, &p, 2);
    assert_eq!(out.stats.stages[0].recomputed.len(), 4, "the first lean run is cold");
    s.set_function("leaf", func("def @leaf(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  relu(%x)\n}\n"));
    run(&mut s, &p, 2);
    run_uncached(&mut s, &p, 2);
    s.set_memory_mode(MemoryMode::Full);
    s.set_function("mid", func("def @mid(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  @leaf(@leaf(%x))\n}\n"));
    run(&mut s, &p, 2);
    s.set_function("leaf", func("def @leaf(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  tanh(%x)\n}\n"));
    let out = run(&mut s, &p, 2);
    assert_eq!(out.stats.stages[0].recomputed.iter().map(|n| &**n).collect::<Vec<_>>(), ["leaf"]);
}

/// A pass panic in lean mode is reported as in the default mode and the session stays usable.
#[test]
fn a_pass_panic_in_lean_mode_is_reported_and_the_session_stays_usable() {
    let boom = function_pass("Boom", 0, |func, _module, _ctx| {
        if func.attrs().contains("Boom") {
            panic!("boom");
        }
        Ok(func)
    })
    .shared();
    let p = sequential("boom", vec![boom, mark_hot()]);
    let mut s = Session::new(p.clone(), &ctx(2, 2)).expect("session");
    s.set_memory_mode(MemoryMode::Lean);
    s.load(&parse(MODULE));
    run(&mut s, &p, 2);
    // Through the edit path, then through a cold run.
    for _ in 0..2 {
        s.set_function(
            "leaf",
            func("#[Boom]\ndef @leaf(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  negative(%x)\n}\n"),
        );
        match s.run() {
            Err(SessionError::Pass(PassError::InPass { pass, function, panicked, .. })) => {
                assert_eq!((pass.as_str(), function.as_deref(), panicked), ("Boom", Some("leaf"), true));
            }
            other => panic!("expected a panic report, got {:?}", other.map(|o| recomputed(&o))),
        }
        s.set_function("leaf", func("def @leaf(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  negative(%x)\n}\n"));
        run(&mut s, &p, 2);
    }
}

/// A function pass that records, as the attribute `name`, the type and attributes each
/// callee has in its module view: its output changes when a callee's signature does (and,
/// being an attribute, so does its own signature).
fn record_callees(name: &'static str) -> Arc<dyn Pass> {
    function_pass(name, 0, move |func, module, _ctx| {
        let seen: Vec<String> = callees(&func)
            .iter()
            .map(|c| match module.get(c) {
                Some(f) => format!("{c}:{} {:?}", seen_type(f), f.attrs()),
                None => format!("{c}:none"),
            })
            .collect();
        Ok(Arc::new(func.with_attrs(func.attrs().clone().with(name, AttrValue::Str(seen.join(";").into())))))
    })
    .shared()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Body and signature edits on a chain where function passes copy callee signatures into
    /// the output (before and after a module pass): a callee's signature change changes its
    /// callers' outputs, which must reach the result, in both memory modes.
    #[test]
    fn random_edits_with_passes_recording_callee_signatures_match_a_cold_serial_run(
        edits in proptest::collection::vec((any::<u8>(), any::<u8>(), any::<u8>()), 1..10),
        threads in 1usize..3,
        lean in any::<bool>(),
    ) {
        let p = sequential(
            "record",
            vec![record_callees("RecordEarly"), mark_hot(), record_callees("RecordLate"), identity("Last", 0)],
        );
        let mut s = Session::new(p.clone(), &ctx(2, threads)).expect("session");
        if lean {
            s.set_memory_mode(MemoryMode::Lean);
        }
        let names: Vec<String> = ["f0", "f1", "hot2", "f3", "f4"].iter().map(|n| n.to_string()).collect();
        for (i, name) in names.iter().enumerate() {
            let callee = i.checked_sub(1).map(|j| names[j].clone());
            s.set_function(name, gen_func(name, 2, i as u8, callee.as_deref()));
        }
        run(&mut s, &p, 2);
        for (op, x, b) in edits {
            let name = names[x as usize % names.len()].clone();
            let callee = names.get(b as usize % names.len()).filter(|c| **c != name).cloned();
            let size = if op % 2 == 0 { 2 } else { 1 + b % 3 };
            s.set_function(&name, gen_func(&name, size, b, callee.as_deref()));
            let out = s.run().expect("run succeeds");
            let (text, diags) = cold(&p, &s.module(), 2).expect("cold run succeeds");
            prop_assert_eq!(print_module(&out.module), text);
            prop_assert_eq!(out.diagnostics, diags);
        }
    }
}

/// A module pass that replaces every function marked `Calls` by one calling `@c`: its output
/// references a global its source does not.
fn rewire() -> Arc<dyn Pass> {
    module_pass("Rewire", 0, |module, _ctx| {
        let mut out = Module::new();
        for (name, f) in module.iter() {
            let f = if f.attrs().contains("Calls") {
                let text = format!("def @{name}(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {{\n  @c(%x)\n}}\n");
                parse_module(&text).map_err(|e| PassError::msg(e.to_string()))?.entries()[0].1.clone()
            } else {
                f.clone()
            };
            out.add(name, f).map_err(|e| PassError::msg(e.to_string()))?;
        }
        Ok(out)
    })
    .shared()
}

/// A function that references a global only after a module pass (not in its source) is still
/// a caller: when that global's signature changes, it is recomputed after the pass, in both
/// memory modes (lean mode keeps no intermediates to find it in, so it records such
/// references as it goes).
#[test]
fn a_reference_added_by_a_module_pass_follows_signature_changes() {
    let p = sequential(
        "rewire",
        vec![record_callees("RecordEarly"), rewire(), record_callees("RecordLate"), identity("Last", 0)],
    );
    let text = "def @c(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  relu(%x)\n}\n\n\
                #[Calls=1]\ndef @a(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  negative(%x)\n}\n";
    for mode in [MemoryMode::Full, MemoryMode::Lean] {
        let mut s = Session::new(p.clone(), &ctx(2, 1)).expect("session");
        s.set_memory_mode(mode);
        // Rewire only touches functions marked `Calls`: an edit of another skips it, so
        // nothing but the recorded reference tells the session that @a calls @c.
        let unmarked = |c: &FirewallCheck<'_>| !c.old.attrs().contains("Calls") && !c.new.attrs().contains("Calls");
        s.set_firewall("Rewire", ModuleFirewall { unaffected: Arc::new(unmarked) }).expect("firewall");
        s.load(&parse(text));
        run(&mut s, &p, 2);
        s.set_function("c", func("def @c(%x: Tensor[(3,), f32]) -> Tensor[(3,), f32] {\n  relu(%x)\n}\n"));
        let out = run(&mut s, &p, 2);
        assert_eq!(
            recomputed(&out),
            ["RecordEarly: c", "Rewire: ", "RecordLate,Last: c a"],
            "{mode:?} mode: @a calls @c only after Rewire"
        );
    }
}

/// `RunStats::recomputed_functions` de-duplicates with a set, keeping first-seen order across
/// function stages and ignoring module passes (it was a `Vec::contains` scan, quadratic in
/// functions: `passel watch`'s first run on 100k functions took minutes).
#[test]
fn recomputed_functions_keeps_first_seen_order_without_repeats() {
    let stage = |label: &str, is_module_pass: bool, names: &[&str]| StageStats {
        label: label.into(),
        is_module_pass,
        is_prim_stage: false,
        recomputed: names.iter().map(|n| Arc::from(*n)).collect(),
        reused: 0,
        time: std::time::Duration::ZERO,
    };
    let n = 10_000;
    let many: Vec<String> = (0..n).map(|i| format!("f{i}")).collect();
    let many_refs: Vec<&str> = many.iter().map(|s| s.as_str()).collect();
    let reversed: Vec<&str> = many_refs.iter().rev().copied().collect();
    let stats = RunStats {
        stages: vec![
            stage("A", false, &["b", "a"]),
            stage("M", true, &["m"]),
            stage("B", false, &many_refs),
            stage("C", false, &reversed),
            stage("D", false, &["a", "z"]),
        ],
        total: std::time::Duration::ZERO,
    };
    let got = stats.recomputed_functions();
    assert_eq!(got.len(), n + 3);
    assert_eq!(&*got[0], "b");
    assert_eq!(&*got[1], "a");
    assert_eq!(&*got[2], "f0");
    assert_eq!(&*got[n + 1], &format!("f{}", n - 1));
    assert_eq!(&*got[n + 2], "z");
    assert!(!got.iter().any(|g| &**g == "m"), "module-pass stages are not counted");
}

#[test]
fn a_calling_thread_pass_runs_only_on_the_calling_thread_in_every_mode_cold_and_after_edits() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let record = {
        let seen = seen.clone();
        passel_engine::transform::function_pass("OnCaller", 1, move |func, _module, _ctx| {
            seen.lock().unwrap().push(std::thread::current().id());
            Ok(func)
        })
        .on_calling_thread()
        .shared()
    };
    // [First] | [OnCaller] | MarkHot (no firewall: a lean edit replays every function up to
    // it) | [OnCaller, Last] split in two stages.
    let p = sequential("caller", vec![identity("First", 0), record.clone(), mark_hot(), record, identity("Last", 2)]);
    for (threads, mode) in [(1, MemoryMode::Full), (2, MemoryMode::Full), (1, MemoryMode::Lean), (2, MemoryMode::Lean)]
    {
        let mut s = Session::new(p.clone(), &ctx(2, threads)).expect("session");
        s.set_memory_mode(mode);
        s.load(&parse(MODULE));
        let out = run(&mut s, &p, 2);
        let labels: Vec<String> = out.stats.stages.iter().map(|st| st.label.clone()).collect();
        assert_eq!(labels, ["First", "OnCaller", "MarkHot", "OnCaller", "Last"], "{mode:?}");
        s.set_function("hot", func("def @hot(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  relu(%x)\n}\n"));
        run(&mut s, &p, 2);
        s.set_function("leaf", func("def @leaf(%x: Tensor[(2,), f32]) -> Tensor[(2,), f32] {\n  tanh(%x)\n}\n"));
        run(&mut s, &p, 2);
        let seen = seen.lock().unwrap();
        assert!(!seen.is_empty());
        assert!(
            seen.iter().all(|&t| t == std::thread::current().id()),
            "{threads} threads, {mode:?}: ran off the calling thread"
        );
    }
}

passel_engine::register_pass!("AgreeDep", || Box::new(passel_engine::transform::function_pass(
    "AgreeDep",
    0,
    |f, _, _| Ok(f)
)));

#[test]
fn a_session_stages_its_pipeline_exactly_as_the_executor_plans_it() {
    use passel_engine::transform::{plan, Stage};
    let on_caller =
        passel_engine::transform::function_pass("OnCaller", 0, |f, _, _| Ok(f)).on_calling_thread().shared();
    let needs =
        passel_engine::transform::function_pass("Needs", 0, |f, _, _| Ok(f)).with_required(&["AgreeDep"]).shared();
    let p = sequential(
        "agree",
        vec![
            identity("A", 0),
            identity("B", 0),
            on_caller.clone(),
            on_caller,
            needs,
            mark_hot(),
            identity("Off", 3),
            identity("C", 0),
            prune_and_mark(Arc::new(AtomicUsize::new(0))),
            identity("D", 0),
        ],
    );
    let ctx = ctx(2, 2);
    let executor: Vec<String> = plan(&p, &ctx).expect("plannable").iter().map(Stage::label).collect();
    // The required function pass joins the stage before its dependent; "Off" is not enabled;
    // a split pass is its prelude, then a function stage starting with its per-function part.
    assert_eq!(
        executor,
        ["A,B", "OnCaller", "OnCaller", "AgreeDep,Needs", "MarkHot", "C", "PruneAndMark", "PruneAndMark,D"]
            .map(String::from)
    );
    let mut s = Session::new(p.clone(), &ctx).expect("session");
    s.load(&parse(MODULE));
    let out = s.run().expect("runs");
    let session: Vec<String> = out.stats.stages.iter().map(|st| st.label.clone()).collect();
    assert_eq!(session, executor);
}
