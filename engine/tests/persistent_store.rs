//! The session's persistent tier (`session/store.rs`): sessions that share a store (as
//! processes sharing a cache directory do) reuse each other's function-stage results; every
//! output equals a cold serial run; damaged or foreign entries are detected and recomputed.
//! The harness's `cache_cli.rs` checks the same across real processes.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use passel_engine::ir::{parse_module, print_module, AttrValue, ExprKind, Module};
use passel_engine::transform::{get_pass, module_pass, Diagnostic, Pass, PassContext, Sequential};
use passel_engine::{sequential, MemoryMode, MemoryStore, RunRecord, Session, SessionOutput, StageKey, StageStore};

passel_engine::register_pass!("StoreTouch", || Box::new(passel_engine::transform::function_pass(
    "StoreTouch",
    0,
    |f, _, _| {
        // Changes every function (so outputs are stored as text), keeping node spans.
        let n = f.attrs().get("touched").and_then(|v| if let AttrValue::Int(n) = v { Some(*n) } else { None });
        Ok(Arc::new(f.with_attrs(f.attrs().clone().with("touched", AttrValue::Int(n.unwrap_or(0) + 1)))))
    }
)));

passel_engine::register_pass!("StoreReport", || Box::new(passel_engine::transform::function_pass(
    "StoreReport",
    0,
    |f, module, ctx| {
        // A diagnostic with a span and a node, and one per callee signature seen.
        let body = f.body();
        let mut d = Diagnostic::warning("StoreReport", format!("{} nodes", f.num_nodes())).at_node(body);
        if let Some(span) = f.span(body) {
            d = d.at_span(span);
        }
        ctx.emit(d);
        let mut callees: Vec<&str> = f
            .nodes()
            .iter()
            .filter_map(|n| match n.kind {
                ExprKind::Global { name } => Some(f.sym(name)),
                _ => None,
            })
            .collect();
        callees.sort_unstable();
        callees.dedup();
        for name in callees {
            let sig = module.get(name).and_then(|g| g.signature()).map_or("unknown".to_string(), |t| t.to_string());
            let attrs = module.get(name).map(|g| format!("{:?}", g.attrs())).unwrap_or_default();
            ctx.emit(Diagnostic::warning("StoreReport", format!("calls @{name}: {sig} {attrs}")));
        }
        Ok(f)
    }
)));

fn pipeline() -> Sequential {
    let pass = |name: &str| get_pass(name).expect("registered test pass");
    sequential("store", vec![pass("StoreTouch"), pass("StoreReport")])
}

fn ctx() -> PassContext {
    PassContext::builder().opt_level(2).num_threads(2).build().expect("valid context")
}

fn parse(text: &str) -> Module {
    parse_module(text).expect("test module parses")
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
";

/// A store that counts what it is asked and rejects, in front of a shared memory store.
#[derive(Default)]
struct Counting {
    inner: Arc<MemoryStore>,
    rejected: AtomicUsize,
    gets: AtomicUsize,
    batches: AtomicUsize,
}

impl StageStore for Counting {
    fn get(&self, key: &StageKey) -> Option<Vec<u8>> {
        self.gets.fetch_add(1, Ordering::Relaxed);
        self.inner.get(key)
    }
    fn get_many(&self, keys: &[StageKey]) -> Vec<Option<Vec<u8>>> {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.inner.get_many(keys)
    }
    fn put(&self, key: &StageKey, entry: &[u8]) {
        self.inner.put(key, entry)
    }
    fn rejected(&self, key: &StageKey, reason: &str) {
        self.rejected.fetch_add(1, Ordering::Relaxed);
        self.inner.rejected(key, reason)
    }
}

/// A fresh session (a "process") over `store`, run on `text`.
fn run_process(store: &Arc<MemoryStore>, text: &str) -> (SessionOutput, usize) {
    let (out, counting) = run_with(store, text, pipeline(), MemoryMode::Full);
    (out, counting.rejected.load(Ordering::Relaxed))
}

/// A fresh session in memory mode `mode` running `pipeline` over `store`, run on `text`; its
/// output is checked against a cold serial run.
fn run_with(
    store: &Arc<MemoryStore>,
    text: &str,
    pipeline: Sequential,
    mode: MemoryMode,
) -> (SessionOutput, Arc<Counting>) {
    let counting = Arc::new(Counting { inner: store.clone(), ..Counting::default() });
    let mut s = Session::new(pipeline.clone(), &ctx()).expect("session");
    s.set_memory_mode(mode);
    s.set_store(Some((counting.clone(), "test-build".to_string()))).expect("store set");
    s.load(&parse(text));
    let out = s.run().expect("run succeeds");
    let (cold_text, cold_diags) = cold(text, &pipeline);
    assert_eq!(print_module(&out.module), cold_text);
    assert_eq!(out.diagnostics, cold_diags);
    (out, counting)
}

fn cold(text: &str, pipeline: &Sequential) -> (String, Vec<Diagnostic>) {
    let ctx = PassContext::builder().opt_level(2).num_threads(1).build().expect("valid context");
    let out = ctx.scope(|| pipeline.run(parse(text), &ctx)).expect("scope").expect("cold run");
    (print_module(&out), ctx.diagnostics().take())
}

/// Two function stages with a module pass between them that changes nothing: the second
/// stage's keys are chained from the first's.
fn two_stage_pipeline() -> Sequential {
    let pass = |name: &str| get_pass(name).expect("registered test pass");
    let barrier = module_pass("StoreBarrier", 0, |m, _| Ok(m)).shared();
    sequential("store2", vec![pass("StoreTouch"), barrier, pass("StoreReport")])
}

#[test]
fn default_and_lean_sessions_share_chained_keys_and_recompute_the_same_functions() {
    for (first, second) in [(MemoryMode::Full, MemoryMode::Lean), (MemoryMode::Lean, MemoryMode::Full)] {
        let store = Arc::new(MemoryStore::new());
        let (out, _) = run_with(&store, MODULE, two_stage_pipeline(), first);
        assert_eq!(recomputed(&out), ["leaf", "mid", "top"]);
        assert_eq!(store.len(), 6, "two function stages of three functions");
        let (out, counting) = run_with(&store, MODULE, two_stage_pipeline(), second);
        assert_eq!(recomputed(&out), Vec::<String>::new(), "{second:?} after {first:?}");
        assert_eq!(counting.rejected.load(Ordering::Relaxed), 0);
        let body = MODULE.replace("add(%x, %x)", "multiply(%x, %x)");
        let (out, _) = run_with(&store, &body, two_stage_pipeline(), first);
        assert_eq!(recomputed(&out), ["leaf"]);
        for stage in out.stats.stages.iter().filter(|s| !s.is_module_pass) {
            assert_eq!(stage.recomputed.iter().map(|n| n.to_string()).collect::<Vec<_>>(), ["leaf"]);
        }
        let (out, _) = run_with(&store, &body, two_stage_pipeline(), second);
        assert_eq!(recomputed(&out), Vec::<String>::new());
    }
}

#[test]
fn a_lean_cold_run_asks_the_store_for_a_stage_in_batches() {
    let store = Arc::new(MemoryStore::new());
    run_with(&store, MODULE, two_stage_pipeline(), MemoryMode::Lean);
    let (out, counting) = run_with(&store, MODULE, two_stage_pipeline(), MemoryMode::Lean);
    assert_eq!(recomputed(&out), Vec::<String>::new());
    // One batch per function stage (three keys fit one), no single lookups.
    assert_eq!(counting.batches.load(Ordering::Relaxed), 2);
    assert_eq!(counting.gets.load(Ordering::Relaxed), 0);
}

fn recomputed(out: &SessionOutput) -> Vec<String> {
    out.stats.recomputed_functions().iter().map(|n| n.to_string()).collect()
}

#[test]
fn a_new_session_over_a_warm_store_recomputes_nothing() {
    let store = Arc::new(MemoryStore::new());
    let (first, _) = run_process(&store, MODULE);
    assert_eq!(recomputed(&first), ["leaf", "mid", "top"]);
    assert_eq!(store.len(), 3);
    let (second, rejected) = run_process(&store, MODULE);
    assert_eq!(recomputed(&second), Vec::<String>::new());
    assert_eq!(rejected, 0);
}

#[test]
fn a_moved_function_is_reused_with_its_diagnostics_moved() {
    let store = Arc::new(MemoryStore::new());
    run_process(&store, MODULE);
    // Blank lines move every span; the results and their diagnostics move with them.
    let (out, _) = run_process(&store, &format!("\n\n\n{MODULE}"));
    assert_eq!(recomputed(&out), Vec::<String>::new());
}

#[test]
fn a_body_edit_recomputes_that_function_and_a_signature_edit_its_callers() {
    let store = Arc::new(MemoryStore::new());
    run_process(&store, MODULE);
    let body = MODULE.replace("add(%x, %x)", "multiply(%x, %x)");
    let (out, _) = run_process(&store, &body);
    assert_eq!(recomputed(&out), ["leaf"]);
    // An attribute is part of the signature callers see.
    let sig = MODULE.replace("def @leaf", "#[Level=2]\ndef @leaf");
    let (out, _) = run_process(&store, &sig);
    assert_eq!(recomputed(&out), ["leaf", "mid"]);
}

#[test]
fn another_build_or_pipeline_does_not_reuse_results() {
    let store = Arc::new(MemoryStore::new());
    run_process(&store, MODULE);
    let mut s = Session::new(pipeline(), &ctx()).expect("session");
    s.set_store(Some((store.clone(), "another-build".to_string()))).expect("store set");
    s.load(&parse(MODULE));
    assert_eq!(recomputed(&s.run().expect("run")), ["leaf", "mid", "top"]);
    let other = sequential("store", vec![get_pass("StoreReport").expect("registered")]);
    let mut s = Session::new(other, &ctx()).expect("session");
    s.set_store(Some((store.clone(), "test-build".to_string()))).expect("store set");
    s.load(&parse(MODULE));
    assert_eq!(recomputed(&s.run().expect("run")), ["leaf", "mid", "top"]);
}

/// Damages every entry with `damage`, then checks that a new session detects each one,
/// recomputes everything and still matches the cold run.
fn check_damage(damage: impl Fn(&StageKey, Vec<u8>, &[(StageKey, Vec<u8>)]) -> Vec<u8>) {
    let store = Arc::new(MemoryStore::new());
    run_process(&store, MODULE);
    let entries: Vec<(StageKey, Vec<u8>)> =
        store.keys().into_iter().map(|k| (k, store.get(&k).expect("entry present"))).collect();
    assert_eq!(entries.len(), 3);
    for (key, entry) in &entries {
        store.overwrite(key, damage(key, entry.clone(), &entries));
    }
    let (out, rejected) = run_process(&store, MODULE);
    assert_eq!(recomputed(&out), ["leaf", "mid", "top"]);
    assert_eq!(rejected, 3);
    // The recomputed results replaced the bad entries.
    let (out, rejected) = run_process(&store, MODULE);
    assert_eq!(recomputed(&out), Vec::<String>::new());
    assert_eq!(rejected, 0);
}

#[test]
fn flipped_bytes_are_detected() {
    for at in [0usize, 5, 30, 45, 60] {
        check_damage(|_, mut e, _| {
            let i = at.min(e.len() - 1);
            e[i] ^= 0x41;
            e
        });
    }
    // A flip in the middle of the payload (the checksum catches it).
    check_damage(|_, mut e, _| {
        let i = e.len() / 2;
        e[i] ^= 1;
        e
    });
}

#[test]
fn truncated_and_empty_entries_are_detected() {
    check_damage(|_, e, _| e[..e.len() / 2].to_vec());
    check_damage(|_, e, _| e[..e.len() - 1].to_vec());
    check_damage(|_, _, _| Vec::new());
}

#[test]
fn an_entry_for_another_key_is_detected() {
    // Each key gets the next key's entry.
    check_damage(|key, _, all| {
        let i = all.iter().position(|(k, _)| k == key).expect("key listed");
        all[(i + 1) % all.len()].1.clone()
    });
}

#[test]
fn an_entry_of_another_format_version_is_detected() {
    check_damage(|_, mut e, _| {
        e[4] = e[4].wrapping_add(1);
        e
    });
}

/// A lean run over a store of a pipeline whose barrier drops `@top` and changes `@mid`: its
/// record has function stages, a module stage with a dropped and a changed function, and an
/// output order without `@top`.
fn record_of_a_run() -> RunRecord {
    let pass = |name: &str| get_pass(name).expect("registered test pass");
    let barrier = module_pass("StoreDropTop", 0, |mut m, _| {
        m.remove("top").map_err(|e| passel_engine::transform::PassError::msg(e.to_string()))?;
        let mid = m.get("mid").expect("mid is in the module").clone();
        let changed = mid.with_attrs(mid.attrs().clone().with("dropped_top", AttrValue::Int(1)));
        m.insert("mid", changed).map_err(|e| passel_engine::transform::PassError::msg(e.to_string()))?;
        Ok(m)
    })
    .shared();
    let pipeline = sequential("record", vec![pass("StoreTouch"), barrier, pass("StoreTouch")]);
    let store = Arc::new(MemoryStore::new());
    let mut s = Session::new(pipeline, &ctx()).expect("session");
    s.set_memory_mode(MemoryMode::Lean);
    s.set_store(Some((store, "test-build".to_string()))).expect("store set");
    s.load(&parse(MODULE));
    let out = s.run().expect("run succeeds");
    assert_eq!(out.module.len(), 2, "the barrier dropped @top");
    let sources = (0..3u8).map(|i| (StageKey([i + 1; 16]), 100 * u32::from(i))).collect();
    s.run_record(sources).expect("a clean lean run over a store leaves a record")
}

#[test]
fn a_run_record_round_trips_through_its_encoding() {
    let record = record_of_a_run();
    assert_eq!(record.names().iter().map(|n| &**n).collect::<Vec<_>>(), ["leaf", "mid", "top"]);
    assert_eq!(record.outputs().collect::<Vec<_>>(), [0, 1]);
    let bytes = record.encode();
    assert_eq!(RunRecord::decode(&bytes), Ok(record.clone()));
    assert_eq!(RunRecord::decode(&bytes).map(|r| r.encode()), Ok(bytes));
}

#[test]
fn a_damaged_or_truncated_run_record_is_an_error_not_a_panic() {
    let bytes = record_of_a_run().encode();
    for n in 0..bytes.len() {
        assert!(RunRecord::decode(&bytes[..n]).is_err(), "a record cut to {n} of {} bytes decoded", bytes.len());
    }
    let mut longer = bytes.clone();
    longer.push(0);
    assert!(RunRecord::decode(&longer).is_err(), "a trailing byte is an error");
    // Every single-bit flip either is an error or decodes to the record that encodes to exactly
    // the damaged bytes (a flipped key byte is another key: the entry's checksum, outside the
    // record, is what catches it), never a panic.
    let (mut errors, mut others) = (0, 0);
    for i in 0..bytes.len() {
        for bit in 0..8 {
            let mut damaged = bytes.clone();
            damaged[i] ^= 1 << bit;
            match RunRecord::decode(&damaged) {
                Ok(other) => {
                    assert_eq!(other.encode(), damaged, "byte {i} bit {bit}");
                    others += 1;
                }
                Err(_) => errors += 1,
            }
        }
    }
    assert!(errors > 0 && others > 0, "{errors} errors, {others} other records");
}
