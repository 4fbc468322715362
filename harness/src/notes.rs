//! Notes on what a pipeline and its options will not do although the command line suggests
//! they would: a pass named in `--passes` that the opt level skips, and a `--disable` that a
//! pass's `required` list overrides (a required dependency runs whatever the context says).

use std::sync::Arc;

use passel_engine::transform::{Pass, PassContext, Sequential};

/// One line per surprise (no trailing newline, no `note:` prefix): first each pass the opt
/// level skips, in pipeline order (only when `explicit`, i.e. the user named the passes: the
/// standard pipelines list higher-level passes on purpose), then each disabled pass that
/// runs anyway, with the passes that require it. The walk uses an explicit stack: pipelines
/// may nest deeply.
pub fn pipeline_notes(pipeline: &Sequential, ctx: &PassContext, explicit: bool) -> Vec<String> {
    let mut skipped: Vec<String> = Vec::new();
    // Disabled pass -> the enabled passes that require it, in pipeline order.
    let mut overridden: Vec<(String, Vec<String>)> = Vec::new();
    let mut stack: Vec<Arc<dyn Pass>> = pipeline.passes().iter().rev().cloned().collect();
    while let Some(pass) = stack.pop() {
        let info = pass.info();
        if !ctx.pass_enabled(info) {
            if explicit && !ctx.disabled_pass().contains(&info.name) {
                let note = format!(
                    "pass {name} is skipped: its opt level is {} and this run's is {}; pass -O{} or --require {name} to run it",
                    info.opt_level,
                    ctx.opt_level(),
                    info.opt_level,
                    name = info.name,
                );
                if !skipped.contains(&note) {
                    skipped.push(note);
                }
            }
            continue;
        }
        for dep in info.required.iter().filter(|d| ctx.disabled_pass().contains(d)) {
            let idx = match overridden.iter().position(|(d, _)| d == dep) {
                Some(i) => i,
                None => {
                    overridden.push((dep.clone(), Vec::new()));
                    overridden.len() - 1
                }
            };
            if !overridden[idx].1.contains(&info.name) {
                overridden[idx].1.push(info.name.clone());
            }
        }
        if let Some(seq) = pass.as_sequential() {
            stack.extend(seq.passes().iter().rev().cloned());
        }
    }
    skipped.extend(overridden.into_iter().map(|(dep, by)| {
        format!("--disable {dep} has no effect here: it runs anyway before {}, which require(s) it", by.join(", "))
    }));
    skipped
}
