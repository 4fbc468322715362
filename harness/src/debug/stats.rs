//! `passel run --stats` / `--stats-json FILE`: the pass statistic totals of a run as a text
//! table and as JSON, sorted by pass, then counter (the order of [`Statistics::iter`]), so the
//! output is the same at any thread count.

use std::fmt::Write as _;

use passel_engine::transform::Statistics;

use crate::bench::report::json_str;

/// The totals as an aligned table (`pass  counter  value`), or a line saying there are none.
pub fn table(stats: &Statistics) -> String {
    if stats.is_empty() {
        return "statistics: no pass counted anything\n".to_string();
    }
    let pass_w = stats.iter().map(|(p, _, _)| p.len()).max().unwrap_or(0).max(4);
    let name_w = stats.iter().map(|(_, c, _)| c.len()).max().unwrap_or(0).max(7);
    let mut out = format!("{:<pass_w$}  {:<name_w$}  {:>10}\n", "pass", "counter", "value");
    for (pass, name, n) in stats.iter() {
        let _ = writeln!(out, "{pass:<pass_w$}  {name:<name_w$}  {n:>10}");
    }
    out
}

/// The totals as JSON: `{"PASS": {"counter": value, …}, …}`.
pub fn json(stats: &Statistics) -> String {
    let mut out = String::from("{");
    let mut last_pass = None;
    for (pass, name, n) in stats.iter() {
        if last_pass != Some(pass) {
            if last_pass.is_some() {
                out.push_str("},");
            }
            let _ = write!(out, "\n  {}: {{", json_str(pass));
            last_pass = Some(pass);
        } else {
            out.push(',');
        }
        let _ = write!(out, "{}: {n}", json_str(name));
    }
    out.push_str(if last_pass.is_some() { "}\n}\n" } else { "}\n" });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use passel_engine::transform::Statistic;

    static FOLDED: Statistic = Statistic::new("FoldConstant", "calls folded", "");
    static BYTES: Statistic = Statistic::new("FoldConstant", "bytes materialized", "");
    static REMOVED: Statistic = Statistic::new("DeadCodeElimination", "bindings removed", "");

    fn stats() -> Statistics {
        let mut s = Statistics::new();
        s.add(&FOLDED, 12);
        s.add(&REMOVED, 3);
        s.add(&BYTES, 4096);
        s
    }

    #[test]
    fn table_is_sorted_by_pass_then_counter() {
        let t = table(&stats());
        let rows: Vec<Vec<&str>> =
            t.lines().skip(1).map(|l| l.split("  ").filter(|c| !c.is_empty()).collect()).collect();
        assert_eq!(rows.len(), 3, "{t}");
        assert_eq!(rows[0][0].trim(), "DeadCodeElimination", "{t}");
        assert!(rows[1][1].contains("bytes materialized") && rows[1][2].trim() == "4096", "{t}");
        assert_eq!(table(&Statistics::new()), "statistics: no pass counted anything\n");
    }

    #[test]
    fn json_groups_counters_by_pass() {
        let j = json(&stats());
        assert_eq!(
            j,
            "{\n  \"DeadCodeElimination\": {\"bindings removed\": 3},\n  \"FoldConstant\": {\"bytes materialized\": 4096,\"calls folded\": 12}\n}\n"
        );
        assert_eq!(json(&Statistics::new()), "{}\n");
    }
}
