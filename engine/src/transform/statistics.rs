//! Pass statistics (LLVM's `-stats`, MLIR's `--mlir-pass-statistics`): named counters that a
//! pass declares in its own file and bumps while it runs.
//!
//! A pass declares each counter once as a `static` [`Statistic`] (pass name, counter name, a
//! one-line description) and adds to it with [`Statistic::add`]. Counting is off unless the
//! context was built with [`PassContextBuilder::statistics`](super::PassContextBuilder::statistics),
//! so passes may call `add` unconditionally; a pass that computes a counter at some cost checks
//! [`PassContext::collects_statistics`](super::PassContext::collects_statistics) first.
//!
//! Determinism: a parallel worker counts into its own context copy (the same buffer as its
//! diagnostics) and the coordinator merges the copy's counts exactly where it merges the
//! copy's diagnostics: only for pass executions that the serial run also makes (work a fused
//! stage drops after a veto is not counted). Counts only add, so the totals are the same at any
//! thread count and do not depend on the merge order. An incremental `Session` counts the
//! work it actually does in a run: functions it reuses from the last run count nothing.

use std::collections::BTreeMap;

/// A named counter of one pass, declared as a `static` in the pass's file.
#[derive(Debug)]
pub struct Statistic {
    /// The pass's registry name (`FoldConstant`).
    pub pass: &'static str,
    /// The counter's name, lowercase (`calls folded`).
    pub name: &'static str,
    /// What it counts, one line.
    pub desc: &'static str,
}

impl Statistic {
    /// Declares a counter: `static CALLS_FOLDED: Statistic = Statistic::new("FoldConstant",
    /// "calls folded", "operator calls replaced by a constant");`.
    pub const fn new(pass: &'static str, name: &'static str, desc: &'static str) -> Statistic {
        Statistic { pass, name, desc }
    }
}

/// Counter totals keyed by (pass, counter), iterated in that sorted order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Statistics {
    counts: BTreeMap<(&'static str, &'static str), u64>,
}

impl Statistics {
    /// No counts.
    pub fn new() -> Statistics {
        Statistics::default()
    }

    /// Adds `n` to `stat` (0 records nothing).
    pub fn add(&mut self, stat: &'static Statistic, n: u64) {
        if n == 0 {
            return;
        }
        let v = self.counts.entry((stat.pass, stat.name)).or_insert(0);
        *v = v.saturating_add(n);
    }

    /// Adds every count of `other`.
    pub fn merge(&mut self, other: &Statistics) {
        for (&key, &n) in &other.counts {
            let v = self.counts.entry(key).or_insert(0);
            *v = v.saturating_add(n);
        }
    }

    /// The total of `pass`'s counter `name`, if it was recorded.
    pub fn get(&self, pass: &str, name: &str) -> Option<u64> {
        self.counts.iter().find(|((p, c), _)| *p == pass && *c == name).map(|(_, &n)| n)
    }

    /// `(pass, counter, total)` sorted by pass, then counter.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, &'static str, u64)> + '_ {
        self.counts.iter().map(|(&(p, c), &n)| (p, c, n))
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transform::PassContext;

    static A: Statistic = Statistic::new("P", "a", "");
    static B: Statistic = Statistic::new("O", "b", "");

    #[test]
    fn merge_adds_and_iterates_sorted_by_pass_then_counter() {
        let mut x = Statistics::new();
        x.add(&A, 2);
        let mut y = Statistics::new();
        y.add(&A, 3);
        y.add(&B, 1);
        y.add(&B, 0);
        x.merge(&y);
        assert_eq!(x.iter().collect::<Vec<_>>(), [("O", "b", 1), ("P", "a", 5)]);
        assert_eq!(x.get("P", "a"), Some(5));
        assert_eq!(x.get("P", "b"), None);
    }

    #[test]
    fn add_is_a_no_op_unless_the_context_collects() {
        let off = PassContext::default();
        A.add(&off, 1);
        assert!(off.statistics().is_empty());
        let on = PassContext::builder().statistics(true).build().expect("context");
        A.add(&on, 1);
        A.add(&on.worker_copy(), 5);
        assert_eq!(on.statistics().get("P", "a"), Some(1), "a worker copy counts into its own buffer");
    }
}
