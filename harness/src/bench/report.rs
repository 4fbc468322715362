//! A bench report and its three renderings: a text table, JSON (written field by field,
//! strings escaped by serde_json) and a self-contained SVG bar chart of the time per row.
//!
//! Times print with three significant digits in the unit that fits (`ns`, `µs`, `ms`, `s`), so a
//! 0.23 µs no-change re-run and a 216 ms cold run are both readable. A `…-nochange` row does no
//! work (the session hands back its previous result), so throughput and speedup over serial are
//! meaningless there and print as `—` (`null` in JSON); instead, every `PREFIX-nochange` and
//! `PREFIX-edit` row shows its time as a fraction of its `PREFIX-cold` row (`vs cold`, e.g.
//! `1/740k`: the re-run takes 1/740,000 of the cold run's time). An edit row redoes only part
//! of the work, so it has no speedup over the serial row (that would be the speedup of a whole
//! recompilation it did not do); a session's edit row counts the functions and bindings the
//! edit run recomputed, so its rates are what was actually done.
//!
//! A model bench (`--model`) adds `import` and `print` rows, which are not pipeline runs (no
//! speedup), and a summary of the model: file and weight bytes, ops before and after the
//! pipeline, and peak heap and peak RSS of import + the serial pipeline run as a multiple of
//! the weight bytes (`model` in JSON).

use std::fmt::Write as _;

use super::{BenchRow, CacheSize, ModelInfo};

/// The machine the bench ran on.
#[derive(Clone, Debug, PartialEq)]
pub struct Machine {
    /// Logical cores available to the process.
    pub cores: usize,
    /// `std::env::consts::OS`.
    pub os: String,
    /// `std::env::consts::ARCH`.
    pub arch: String,
    /// The 1-minute load average when the bench started (Linux only): a hint of how much else
    /// was running.
    pub load_average: Option<f64>,
}

impl Machine {
    /// Describes this machine.
    pub fn current() -> Machine {
        let load_average = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()));
        Machine {
            cores: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            os: std::env::consts::OS.to_string(),
            arch: std::env::consts::ARCH.to_string(),
            load_average,
        }
    }
}

/// Everything one `passel bench` measured.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchReport {
    /// The workload, e.g. `chain` with its size.
    pub workload: String,
    /// Functions of the workload.
    pub functions: usize,
    /// Bindings of the workload.
    pub bindings: usize,
    /// The pipeline text.
    pub pipeline: String,
    /// Where it ran.
    pub machine: Machine,
    /// The measured rows, serial first (a model bench: `import` first, `print` last).
    pub rows: Vec<BenchRow>,
    /// What a model bench measured besides the rows.
    pub model: Option<ModelInfo>,
    /// The cache's size after the `cache-fill` row (`--cache`).
    pub cache: Option<CacheSize>,
}

impl BenchReport {
    /// Time of the first serial row: the base of the speedup column.
    fn serial_secs(&self) -> Option<f64> {
        self.rows.iter().find(|r| r.mode == "serial").map(|r| r.time.as_secs_f64())
    }

    /// Speedup over the serial row; none for rows that do no work or only part of it (edits).
    fn speedup(&self, row: &BenchRow) -> Option<f64> {
        let t = row.time.as_secs_f64();
        let pipeline_run = !matches!(row.mode.as_str(), "import" | "print");
        let whole = !row.mode.ends_with("-edit");
        self.serial_secs().filter(|_| t > 0.0 && !does_no_work(row) && pipeline_run && whole).map(|s| s / t)
    }

    /// The row's time divided by its session's cold row's (`session-edit` → `session-cold`).
    fn vs_cold(&self, row: &BenchRow) -> Option<f64> {
        let prefix = row
            .mode
            .strip_suffix("-nochange")
            .or_else(|| row.mode.strip_suffix("-edit"))
            .or_else(|| row.mode.strip_suffix("-fill"))?;
        let cold = format!("{prefix}-cold");
        let cold = self.rows.iter().find(|r| r.mode == cold)?.time.as_secs_f64();
        (cold > 0.0).then(|| row.time.as_secs_f64() / cold)
    }

    /// The rows as an aligned text table.
    pub fn table(&self) -> String {
        let mut out = format!(
            "{:<18} {:>7} {:>9} {:>12} {:>14} {:>8} {:>8} {:>10}\n",
            "mode", "threads", "time", "functions/s", "bindings/s", "speedup", "vs cold", "peak heap"
        );
        for r in &self.rows {
            let t = r.time.as_secs_f64().max(1e-9);
            let rate = |n: usize| if does_no_work(r) { DASH.to_string() } else { format!("{:.0}", n as f64 / t) };
            let speedup = self.speedup(r).map(|s| format!("{s:.2}x")).unwrap_or_else(|| DASH.into());
            let vs_cold = self.vs_cold(r).map(fraction).unwrap_or_else(|| DASH.into());
            let peak = r.peak_heap.map(mib).unwrap_or_else(|| DASH.into());
            let _ = writeln!(
                out,
                "{:<18} {:>7} {:>9} {:>12} {:>14} {:>8} {:>8} {:>10}",
                r.mode,
                r.threads,
                duration(r.time.as_secs_f64()),
                rate(r.functions),
                rate(r.bindings),
                speedup,
                vs_cold,
                peak
            );
        }
        if let Some(m) = &self.model {
            out.push_str(&model_summary(m));
        }
        if let Some(c) = &self.cache {
            let _ = writeln!(
                out,
                "cache: {} entries, {} ({} bytes per function)",
                c.entries,
                size(c.bytes),
                c.per_function()
            );
        }
        out
    }

    /// The report as a JSON object.
    pub fn to_json(&self) -> String {
        let m = &self.machine;
        let mut out = String::from("{\n");
        let _ = writeln!(out, "  \"workload\": {},", json_str(&self.workload));
        let _ = writeln!(out, "  \"functions\": {},", self.functions);
        let _ = writeln!(out, "  \"bindings\": {},", self.bindings);
        let _ = writeln!(out, "  \"pipeline\": {},", json_str(&self.pipeline));
        let _ = writeln!(
            out,
            "  \"machine\": {{\"cores\": {}, \"os\": {}, \"arch\": {}, \"load_average\": {}}},",
            m.cores,
            json_str(&m.os),
            json_str(&m.arch),
            json_num(m.load_average)
        );
        out.push_str("  \"rows\": [");
        for (i, r) in self.rows.iter().enumerate() {
            let t = r.time.as_secs_f64();
            let per_sec = |n: usize| if t > 0.0 && !does_no_work(r) { Some(n as f64 / t) } else { None };
            let _ = write!(
                out,
                "{}\n    {{\"mode\": {}, \"threads\": {}, \"time_ms\": {}, \"repeats\": {}, \"functions\": {}, \
                 \"bindings\": {}, \"functions_per_sec\": {}, \"bindings_per_sec\": {}, \"speedup\": {}, \
                 \"vs_cold\": {}, \"peak_heap_bytes\": {}, \"base_heap_bytes\": {}}}",
                if i == 0 { "" } else { "," },
                json_str(&r.mode),
                r.threads,
                json_num(Some((t * 1e6).round() / 1e3)),
                r.repeats,
                r.functions,
                r.bindings,
                json_num(per_sec(r.functions).map(f64::round)),
                json_num(per_sec(r.bindings).map(f64::round)),
                json_num(self.speedup(r).map(|x| (x * 1e3).round() / 1e3)),
                json_num(self.vs_cold(r)),
                r.peak_heap.map(|b| b.to_string()).unwrap_or_else(|| "null".into()),
                r.base_heap.map(|b| b.to_string()).unwrap_or_else(|| "null".into()),
            );
        }
        out.push_str(if self.rows.is_empty() { "],\n" } else { "\n  ],\n" });
        match &self.cache {
            None => out.push_str("  \"cache\": null,\n"),
            Some(c) => {
                let _ = writeln!(
                    out,
                    "  \"cache\": {{\"entries\": {}, \"bytes\": {}, \"bytes_per_function\": {}}},",
                    c.entries,
                    c.bytes,
                    c.per_function()
                );
            }
        }
        match &self.model {
            None => out.push_str("  \"model\": null\n}\n"),
            Some(m) => {
                let opt = |v: Option<u64>| v.map(|b| b.to_string()).unwrap_or_else(|| "null".into());
                let ratio = |v: Option<u64>| {
                    json_num(v.and_then(|b| per_weight(b, m.weight_bytes)).map(|r| (r * 1e3).round() / 1e3))
                };
                let _ = write!(
                    out,
                    "  \"model\": {{\"path\": {}, \"file_bytes\": {}, \"weight_bytes\": {}, \"ops_before\": {}, \
                     \"ops_after\": {}, \"peak_heap_bytes\": {}, \"peak_heap_per_weight_byte\": {}, \
                     \"peak_rss_bytes\": {}, \"peak_rss_per_weight_byte\": {}}}\n}}\n",
                    json_str(&m.path),
                    m.file_bytes,
                    m.weight_bytes,
                    m.ops_before,
                    m.ops_after,
                    opt(m.peak_heap),
                    ratio(m.peak_heap),
                    opt(m.peak_rss),
                    ratio(m.peak_rss),
                );
            }
        }
        out
    }

    /// A horizontal bar chart of the time per row, labelled with time, speedup and peak heap.
    pub fn to_svg(&self) -> String {
        const LEFT: f64 = 230.0;
        const BAR_W: f64 = 420.0;
        const RIGHT: f64 = 230.0;
        const ROW_H: f64 = 34.0;
        const TOP: f64 = 84.0;
        let pipeline = format!("pipeline: {}", self.pipeline);
        // About 7 px per character at 13 px; a long pipeline widens the chart instead of spilling.
        let width = (LEFT + BAR_W + RIGHT).max(32.0 + 7.0 * pipeline.chars().count() as f64);
        let height = TOP + ROW_H * self.rows.len().max(1) as f64 + 40.0;
        let max_t = self.rows.iter().map(|r| r.time.as_secs_f64()).fold(0.0, f64::max);
        let mut s = String::new();
        let _ = writeln!(
            s,
            r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width:.0}" height="{height:.0}" viewBox="0 0 {width:.0} {height:.0}" font-family="sans-serif" font-size="13">"#
        );
        let _ = writeln!(s, r#"  <rect width="100%" height="100%" fill="white"/>"#);
        let title =
            format!("passel bench: {} ({} functions, {} bindings)", self.workload, self.functions, self.bindings);
        let _ = writeln!(s, r#"  <text x="16" y="24" font-size="16" font-weight="bold">{}</text>"#, xml(&title));
        let sub = format!(
            "{} cores{} · best time of each row, lower is better",
            self.machine.cores,
            self.machine.load_average.map(|l| format!(", load average {l:.1}")).unwrap_or_default()
        );
        let _ = writeln!(s, r##"  <text x="16" y="44" fill="#555">{}</text>"##, xml(&pipeline));
        let _ = writeln!(s, r##"  <text x="16" y="62" fill="#555">{}</text>"##, xml(&sub));
        for (i, r) in self.rows.iter().enumerate() {
            let y = TOP + ROW_H * i as f64;
            let t = r.time.as_secs_f64();
            let w = if max_t > 0.0 { (t / max_t * BAR_W).max(1.0) } else { 1.0 };
            let color = match r.mode.as_str() {
                "serial" => "#8c8c8c",
                "parallel" => "#3b75af",
                _ => "#e07b39",
            };
            let label = format!("{} · {} thread{}", r.mode, r.threads, if r.threads == 1 { "" } else { "s" });
            let _ = writeln!(
                s,
                r#"  <text x="{:.0}" y="{:.1}" text-anchor="end">{}</text>"#,
                LEFT - 8.0,
                y + 17.0,
                xml(&label)
            );
            let _ = writeln!(
                s,
                r#"  <rect x="{LEFT:.0}" y="{:.1}" width="{w:.1}" height="{:.1}" fill="{color}"/>"#,
                y + 4.0,
                ROW_H - 10.0
            );
            let mut note = duration(t);
            if let Some(sp) = self.speedup(r) {
                let _ = write!(note, " · {sp:.2}x");
            }
            if let Some(p) = r.peak_heap {
                let _ = write!(note, " · {}", mib(p));
            }
            let _ = writeln!(s, r#"  <text x="{:.1}" y="{:.1}">{}</text>"#, LEFT + w + 6.0, y + 17.0, xml(&note));
        }
        let axis_y = TOP + ROW_H * self.rows.len().max(1) as f64;
        let _ =
            writeln!(s, r##"  <line x1="{LEFT:.0}" y1="{:.0}" x2="{LEFT:.0}" y2="{axis_y:.0}" stroke="#333"/>"##, TOP);
        let _ = writeln!(
            s,
            r##"  <text x="{LEFT:.0}" y="{:.0}" fill="#555">0 ms</text><text x="{:.0}" y="{:.0}" fill="#555" text-anchor="end">{:.1} ms</text>"##,
            axis_y + 18.0,
            LEFT + BAR_W,
            axis_y + 18.0,
            max_t * 1e3
        );
        s.push_str("</svg>\n");
        s
    }
}

/// `bytes` as a multiple of the weight bytes (none for a model without weights).
fn per_weight(bytes: u64, weight_bytes: u64) -> Option<f64> {
    (weight_bytes > 0).then(|| bytes as f64 / weight_bytes as f64)
}

/// The lines under a model bench's table.
fn model_summary(m: &ModelInfo) -> String {
    let mem = |label: &str, v: Option<u64>| match v {
        Some(b) => {
            let ratio = per_weight(b, m.weight_bytes).map(|r| format!(" = {r:.2}x weights")).unwrap_or_default();
            format!("{label} {}{ratio}", mib(b))
        }
        None => format!("{label} {DASH}"),
    };
    format!(
        "model: {}, file {}, weights {}, ops {} -> {}\n\
         import + serial pipeline: {}; {}\n",
        m.path,
        size(m.file_bytes),
        size(m.weight_bytes),
        m.ops_before,
        m.ops_after,
        mem("peak heap", m.peak_heap),
        mem("peak RSS", m.peak_rss),
    )
}

/// What the table prints for a value that does not apply to a row.
const DASH: &str = "—";

/// Whether a row does no work: a session re-run with nothing changed hands back its last
/// result, so per-second rates and speedups of it measure the timer, not passel.
fn does_no_work(row: &BenchRow) -> bool {
    row.mode.ends_with("-nochange")
}

/// Seconds with three significant digits in the unit that fits: `231ns`, `14.2µs`, `2.16ms`,
/// `216ms`, `1.23s`.
fn duration(secs: f64) -> String {
    let (v, unit) = if secs >= 1.0 {
        (secs, "s")
    } else if secs >= 1e-3 {
        (secs * 1e3, "ms")
    } else if secs >= 1e-6 {
        (secs * 1e6, "µs")
    } else {
        (secs * 1e9, "ns")
    };
    let decimals = if v >= 100.0 || unit == "ns" {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    format!("{v:.decimals$}{unit}")
}

/// A ratio below one as `1/N` with two significant digits and a k/M suffix (`1/12`, `1/1.6k`,
/// `1/740k`); a ratio of at least one as `N.NNx`.
fn fraction(ratio: f64) -> String {
    // NaN and non-positive ratios (a zero-time row) print as 0.
    if ratio.is_nan() || ratio <= 0.0 {
        return "0".to_string();
    }
    if ratio >= 1.0 {
        return format!("{ratio:.2}x");
    }
    let n = 1.0 / ratio;
    let (v, suffix) = if n >= 1e6 {
        (n / 1e6, "M")
    } else if n >= 1e3 {
        (n / 1e3, "k")
    } else {
        (n, "")
    };
    // Two significant digits.
    let digits = v.log10().floor() as i32;
    let scale = 10f64.powi(1 - digits);
    let v = (v * scale).round() / scale;
    if v >= 10.0 {
        format!("1/{v:.0}{suffix}")
    } else {
        format!("1/{v:.1}{suffix}")
    }
}

/// Bytes as mebibytes with one decimal.
fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// Bytes in KiB below one MiB, else in MiB.
fn size(bytes: u64) -> String {
    if bytes < 1 << 20 {
        format!("{:.1} KiB", bytes as f64 / 1024.0)
    } else {
        mib(bytes)
    }
}

/// A JSON number, or `null` for none or a non-finite value (which JSON cannot spell).
fn json_num(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => format!("{v}"),
        _ => "null".to_string(),
    }
}

/// Text escaped for XML content and attribute values.
fn xml(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// A JSON string literal, quotes included: serde_json's escaping, as the engine's Chrome trace
/// uses (every JSON passel writes escapes strings one way).
pub(crate) fn json_str(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn report() -> BenchReport {
        let row = |mode: &str, threads, ms| BenchRow {
            mode: mode.into(),
            threads,
            time: Duration::from_millis(ms),
            repeats: 1,
            functions: 10,
            bindings: 100,
            peak_heap: Some(3 << 20),
            base_heap: Some(1 << 20),
        };
        BenchReport {
            workload: "chain \"x\" <10>".into(),
            functions: 10,
            bindings: 100,
            pipeline: "A,B".into(),
            machine: Machine { cores: 2, os: "linux".into(), arch: "x86_64".into(), load_average: None },
            model: None,
            cache: None,
            rows: vec![
                row("serial", 1, 200),
                row("parallel", 2, 100),
                row("incremental-edit", 2, 0),
                row("session-cold", 2, 150),
                row("session-nochange", 2, 0),
                row("session-edit", 2, 3),
            ],
        }
    }

    #[test]
    fn table_shows_speedup_over_serial_and_peak_heap() {
        let t = report().table();
        assert!(t.lines().nth(2).is_some_and(|l| l.contains("2.00x") && l.contains("3.0 MiB")), "{t}");
    }

    #[test]
    fn table_prints_small_times_in_their_unit_and_dashes_for_no_change_rows() {
        let mut r = report();
        r.rows[4].time = Duration::from_nanos(231);
        r.rows[5].time = Duration::from_micros(14_230);
        let t = r.table();
        let line = |mode: &str| t.lines().find(|l| l.starts_with(&format!("{mode} "))).unwrap_or_default().to_string();
        let nochange = line("session-nochange");
        assert!(nochange.contains("231ns") && nochange.matches('—').count() == 3, "{t}");
        assert!(nochange.contains("1/650k"), "{t}");
        let edit = line("session-edit");
        // An edit redoes part of the work: no speedup over a whole serial run.
        assert!(edit.contains("14.2ms") && edit.contains("1/11") && !edit.contains("14.05x"), "{t}");
        assert!(edit.contains("    —"), "{t}");
        assert!(line("serial").contains("200ms") && line("serial").ends_with("3.0 MiB"), "{t}");
    }

    #[test]
    fn durations_and_fractions_keep_three_and_two_significant_digits() {
        let cases = [(1.234, "1.23s"), (0.2162, "216ms"), (0.00216, "2.16ms"), (14.2e-6, "14.2µs"), (231e-9, "231ns")];
        for (secs, text) in cases {
            assert_eq!(duration(secs), text);
        }
        assert_eq!(fraction(1.0 / 12.0), "1/12");
        assert_eq!(fraction(1.0 / 1570.0), "1/1.6k");
        assert_eq!(fraction(1.0 / 744_000.0), "1/740k");
        assert_eq!(fraction(1.0 / 2_500_000.0), "1/2.5M");
        assert_eq!(fraction(2.0), "2.00x");
    }

    #[test]
    fn json_escapes_strings_and_writes_null_for_infinite_speedup() {
        let j = report().to_json();
        assert!(j.contains(r#""workload": "chain \"x\" <10>""#), "{j}");
        assert!(j.contains(r#""mode": "incremental-edit""#) && j.contains(r#""speedup": null"#), "{j}");
        let nochange = j.lines().find(|l| l.contains("session-nochange")).unwrap_or_default();
        assert!(nochange.contains(r#""functions_per_sec": null"#) && nochange.contains(r#""vs_cold": 0,"#), "{j}");
        assert!(j.contains(r#""load_average": null"#), "{j}");
    }

    #[test]
    fn svg_escapes_text_and_has_one_bar_per_row() {
        let s = report().to_svg();
        assert!(s.contains("chain &quot;x&quot; &lt;10&gt;"), "{s}");
        assert_eq!(s.matches("<rect").count(), 1 + 6);
        assert!(s.trim_end().ends_with("</svg>"));
    }
}
