//! The persistent stage cache across processes, as a property: random sequences of edits
//! (body edits, signature changes, renames, added and removed functions, opt level and
//! disabled-pass changes, thread counts), each step a fresh `passel run --cache DIR` process.
//! Every step's stdout and stderr are byte-identical to a run of the same file without a cache,
//! and the functions the process recomputed (`--cache-report`) are exactly those whose
//! dependencies no earlier process saw:
//!
//! a function's stage results depend on the settings, its own text, the signatures of the
//! functions it calls and, for a callee marked `Inline` (inlined into it before the later
//! stages), that callee's whole text. So a no-change restart recomputes nothing, a body edit
//! recomputes the edited function and the callers it is inlined into, a signature change also
//! its direct callers, and a settings change everything the cache has not seen under those
//! settings. The model keeps that dependency tuple per function and a set of every tuple an
//! earlier process saw.
//!
//! A body edit of a function that is not inlined and calls nothing inlined is taken by the edit
//! path over the cache (passel-cache's `record.rs`: the process starts from the record of the last run
//! on the same functions and decodes nothing the edit does not reach); the test checks that
//! such a step says so, besides the above.
//!
//! `PASSEL_CACHE_CASES=50 cargo test -p passel-harness --test cache_steps` runs more cases
//! (`PROPTEST_CASES` is honoured too when the specific variable is unset); each case starts
//! two processes per step.

#[path = "support/cli.rs"]
mod cli;

use std::collections::{BTreeSet, HashSet};
use std::path::Path;

use cli::{passel, stderr, temp_dir, write};
use proptest::prelude::*;

/// One function of the model: `@name`, an optional `#[tag=…]` (its signature: callers see
/// it), whether it is marked `Inline` (then it calls nothing), its body's constant and the
/// function it calls, if any.
#[derive(Clone, Debug)]
struct Func {
    name: String,
    tag: Option<u32>,
    inline: bool,
    body: u32,
    callee: Option<String>,
}

impl Func {
    /// Attribute lines and the `def` line: what a caller's results depend on.
    fn signature(&self) -> String {
        let mut attrs = Vec::new();
        if self.inline {
            attrs.push("Inline=1".to_string());
        }
        if let Some(tag) = self.tag {
            attrs.push(format!("tag={tag}"));
        }
        let mut s = if attrs.is_empty() { String::new() } else { format!("#[{}]\n", attrs.join(", ")) };
        s.push_str(&format!("def @{}(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {{\n", self.name));
        s
    }

    fn text(&self) -> String {
        let mut s = self.signature();
        s.push_str(&format!("  let %a = add(%x, {}.5f);\n", self.body));
        s.push_str("  let %unused = multiply(%x, 2.0f);\n");
        match &self.callee {
            Some(c) => s.push_str(&format!("  let %b = @{c}(%a);\n  relu(%b)\n")),
            None => s.push_str("  relu(%a)\n"),
        }
        s.push_str("}\n");
        s
    }
}

/// The settings of a step.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Settings {
    opt: u8,
    disable_fold: bool,
}

impl Settings {
    fn args(&self) -> Vec<String> {
        let mut a = vec!["-O".to_string(), self.opt.to_string()];
        if self.disable_fold {
            a.extend(["--disable".to_string(), "FoldConstant".to_string()]);
        }
        a
    }
}

#[derive(Clone, Debug)]
enum Edit {
    /// Nothing changes: a restart.
    Restart,
    /// A function's body constant changes (same signature).
    Body(u8),
    /// A function's `#[tag]` changes: its signature.
    Signature(u8),
    /// A function's `Inline` mark is toggled (when it calls nothing).
    ToggleInline(u8),
    /// A function gets a new name; its callers follow.
    Rename(u8),
    /// A new function, calling another one (`Some`) or none.
    Add(Option<u8>),
    /// A function nobody calls is removed.
    Remove(u8),
    /// The opt level changes.
    OptLevel(u8),
    /// FoldConstant is disabled or enabled again.
    ToggleFold,
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        2 => Just(Edit::Restart),
        4 => any::<u8>().prop_map(Edit::Body),
        2 => any::<u8>().prop_map(Edit::Signature),
        2 => any::<u8>().prop_map(Edit::ToggleInline),
        1 => any::<u8>().prop_map(Edit::Rename),
        1 => proptest::option::of(any::<u8>()).prop_map(Edit::Add),
        1 => any::<u8>().prop_map(Edit::Remove),
        1 => (2u8..4).prop_map(Edit::OptLevel),
        1 => Just(Edit::ToggleFold),
    ]
}

struct Model {
    funcs: Vec<Func>,
    settings: Settings,
    /// Makes every constant, tag and name fresh, so an edit never repeats earlier text.
    counter: u32,
}

impl Model {
    fn new(n: usize) -> Model {
        let mut m = Model { funcs: Vec::new(), settings: Settings { opt: 2, disable_fold: false }, counter: 100 };
        for i in 0..n {
            // Each function may call one created before it (no cycles), unless it is inlined.
            let inline = i % 4 == 1;
            let callee = (i > 0 && !inline && i % 3 != 0).then(|| m.funcs[(i * 7) % i].name.clone());
            m.funcs.push(Func { name: format!("g{i}"), tag: None, inline, body: i as u32, callee });
        }
        m
    }

    fn fresh(&mut self) -> u32 {
        self.counter += 1;
        self.counter
    }

    fn text(&self) -> String {
        self.funcs.iter().map(Func::text).collect::<Vec<_>>().join("\n")
    }

    fn get(&self, name: &str) -> &Func {
        self.funcs.iter().find(|f| f.name == name).expect("callees exist")
    }

    /// What a function's results depend on (see the file's header).
    fn deps(&self, f: &Func) -> String {
        let mut d = format!("{:?}\n{}", self.settings, f.text());
        if let Some(c) = &f.callee {
            let callee = self.get(c);
            d.push_str(&if callee.inline { callee.text() } else { callee.signature() });
        }
        d
    }

    fn pick(&self, i: u8) -> usize {
        i as usize % self.funcs.len()
    }

    fn callers(&self, name: &str) -> usize {
        self.funcs.iter().filter(|f| f.callee.as_deref() == Some(name)).count()
    }

    /// Applies `e` (an edit the model cannot make here, such as removing a function that has
    /// callers, changes nothing).
    fn apply(&mut self, e: &Edit) {
        if self.funcs.is_empty() && !matches!(e, Edit::Add(_)) {
            return;
        }
        match *e {
            Edit::Restart => {}
            Edit::Body(i) => {
                let k = self.pick(i);
                self.funcs[k].body = self.fresh();
            }
            Edit::Signature(i) => {
                let k = self.pick(i);
                self.funcs[k].tag = Some(self.fresh());
            }
            Edit::ToggleInline(i) => {
                let k = self.pick(i);
                if self.funcs[k].callee.is_none() {
                    self.funcs[k].inline = !self.funcs[k].inline;
                }
            }
            Edit::Rename(i) => {
                let k = self.pick(i);
                let old = self.funcs[k].name.clone();
                let new = format!("r{}", self.fresh());
                for f in &mut self.funcs {
                    if f.callee.as_deref() == Some(&old) {
                        f.callee = Some(new.clone());
                    }
                }
                self.funcs[k].name = new;
            }
            Edit::Add(callee) => {
                let callee = match callee {
                    Some(j) if !self.funcs.is_empty() => Some(self.funcs[self.pick(j)].name.clone()),
                    _ => None,
                };
                let n = self.fresh();
                self.funcs.push(Func { name: format!("n{n}"), tag: None, inline: false, body: n, callee });
            }
            Edit::Remove(i) => {
                let k = self.pick(i);
                if self.callers(&self.funcs[k].name) == 0 {
                    self.funcs.remove(k);
                }
            }
            Edit::OptLevel(o) => self.settings.opt = o,
            Edit::ToggleFold => self.settings.disable_fold = !self.settings.disable_fold,
        }
    }
}

/// Runs `passel run file` with `settings` on `threads` threads, with the cache `cache` (and
/// its report) or without; returns (stdout, stderr without the cache note, recomputed names,
/// the cache note).
fn run(
    file: &Path,
    settings: &Settings,
    threads: u8,
    cache: Option<&Path>,
) -> (Vec<u8>, String, BTreeSet<String>, String) {
    let f = file.to_str().expect("utf-8 path");
    let mut args = vec!["run".to_string(), f.to_string(), "-j".to_string(), threads.to_string()];
    args.extend(settings.args());
    let report = file.with_extension("report");
    if let Some(dir) = cache {
        args.extend(["--cache".to_string(), dir.to_str().expect("utf-8 path").to_string()]);
        args.extend(["--cache-report".to_string(), report.to_str().expect("utf-8 path").to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = passel(&args);
    assert!(out.status.success(), "passel {args:?} failed: {}", stderr(&out));
    let err = stderr(&out);
    let note: String = err.lines().filter(|l| l.starts_with("cache ")).collect();
    let err: String = err.lines().filter(|l| !l.starts_with("cache ")).map(|l| format!("{l}\n")).collect();
    let mut recomputed = BTreeSet::new();
    if cache.is_some() {
        let text = std::fs::read_to_string(&report).expect("the cache report is written");
        for line in text.lines() {
            let (_, names) = line.split_once('\t').expect("`stage<TAB>names` lines");
            recomputed.extend(names.split_whitespace().map(|n| n.trim_start_matches('@').to_string()));
        }
    }
    (out.stdout, err, recomputed, note)
}

fn cases() -> u32 {
    ["PASSEL_CACHE_CASES", "PROPTEST_CASES"]
        .iter()
        .find_map(|key| std::env::var(key).ok().and_then(|v| v.parse().ok()))
        .unwrap_or(4)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), max_shrink_iters: 16, ..ProptestConfig::default() })]

    #[test]
    fn every_process_matches_a_cold_run_and_recomputes_only_what_no_earlier_one_saw(
        n in 3usize..7,
        steps in proptest::collection::vec((edit(), 1u8..3), 1..7),
    ) {
        let dir = temp_dir("cache-steps-prop");
        let cache = dir.join("cache");
        let mut model = Model::new(n);
        let mut seen: HashSet<String> = HashSet::new();
        // The first process fills the empty cache; the steps follow.
        for (step, (e, threads)) in std::iter::once((Edit::Restart, 2)).chain(steps).enumerate() {
            model.apply(&e);
            let file = write(&dir, &format!("m{step}.pir"), &model.text());
            let (cold_out, cold_err, _, _) = run(&file, &model.settings, 1, None);
            let (out, err, recomputed, note) = run(&file, &model.settings, threads, Some(&cache));
            prop_assert_eq!(&out, &cold_out, "step {} ({:?}): output differs from a cold run", step, e);
            prop_assert_eq!(&err, &cold_err, "step {} ({:?}): diagnostics differ", step, e);
            let expected: BTreeSet<String> =
                model.funcs.iter().filter(|f| !seen.contains(&model.deps(f))).map(|f| f.name.clone()).collect();
            prop_assert_eq!(&recomputed, &expected, "step {} ({:?}) of\n{}", step, e, model.text());
            if let (Edit::Body(i), false) = (&e, model.funcs.is_empty()) {
                let f = &model.funcs[model.pick(*i)];
                let inlined = f.inline || f.callee.as_deref().is_some_and(|c| model.get(c).inline);
                if !inlined {
                    prop_assert!(note.contains("from the record"), "step {} ({:?}): not from the record: {}", step, e, note);
                }
            }
            seen.extend(model.funcs.iter().map(|f| model.deps(f)));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
