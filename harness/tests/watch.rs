//! `passel watch` end to end: a real file, edited while the watch runs.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const V1: &str = "\
def @a(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  let %c = multiply(2.0f, 0.5f);
  add(%x, %c)
}

def @b(%x: Tensor[(4,), f32]) -> Tensor[(4,), f32] {
  relu(%x)
}
";

/// Saves as editors do: write a temporary file, then rename it over the original, so the
/// watch never reads a half-written file.
fn save(path: &std::path::Path, text: &str) {
    let tmp = path.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp).expect("write");
    f.write_all(text.as_bytes()).expect("write");
    drop(f);
    std::fs::rename(&tmp, path).expect("rename");
}

fn wait_for(path: &std::path::Path, needle: &str) -> String {
    let start = Instant::now();
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        if text.contains(needle) || start.elapsed() > Duration::from_secs(60) {
            return text;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn watch_reruns_incrementally_on_each_save_and_survives_parse_errors() {
    watch_three_runs(&[]);
}

/// The same with `--lean` (a session keeping no intermediate functions): the same report.
#[test]
fn watch_lean_reruns_incrementally_too() {
    watch_three_runs(&["--lean"]);
}

fn watch_three_runs(extra: &[&str]) {
    let dir = std::env::temp_dir().join(format!("passel-watch-test-{}-{}", std::process::id(), extra.join("")));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("m.pir");
    let log = dir.join("log.txt");
    std::fs::write(&file, V1).expect("write");
    let mut child = Command::new(env!("CARGO_BIN_EXE_passel"))
        .args(["watch", "--max-runs", "3", "-j", "1"])
        .args(extra)
        .arg(&file)
        .stdout(Stdio::from(std::fs::File::create(&log).expect("log")))
        .stderr(Stdio::inherit())
        .spawn()
        .expect("passel runs");

    let first = wait_for(&log, "run 1:");
    assert!(first.contains("run 1: 2 functions, 2 edited, 2 recomputed"), "{first}");
    assert_waited_at_least_session(&first);
    // Save a broken version: the error is shown and the watch goes on.
    save(&file, &V1.replace("relu(%x)", "relu(%x"));
    let text = wait_for(&log, "run 2:");
    assert!(text.contains("run 2: parse errors"), "{text}");
    // Fix it with a body edit of @b only.
    save(&file, &V1.replace("relu(%x)", "negative(%x)"));
    let status = child.wait().expect("watch exits after --max-runs");
    assert!(status.success());
    let text = std::fs::read_to_string(&log).expect("log");
    assert!(text.contains("run 3: 2 functions, 1 edited, 1 recomputed (@b)"), "{text}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The time a run reports is the whole wait (parse, run, statistics, output), so it is never
/// less than the session's own time printed next to it.
fn assert_waited_at_least_session(log: &str) {
    let line = log.lines().find(|l| l.starts_with("run 1:")).expect("run 1 line");
    let number_before = |marker: &str| -> f64 {
        let end = line.find(marker).unwrap_or_else(|| panic!("no `{marker}` in {line}"));
        let start = line[..end].rfind(' ').map_or(0, |i| i + 1);
        line[start..end].parse().unwrap_or_else(|_| panic!("no number before `{marker}` in {line}"))
    };
    let waited = number_before(" ms (session");
    let session = {
        let tail = &line[line.find("(session ").expect("session time") + "(session ".len()..];
        tail.split(' ').next().and_then(|n| n.parse::<f64>().ok()).expect("session ms")
    };
    assert!(waited >= session, "{line}");
}

/// `--lower`: the session carries the PrimFuncs LegalizeOps and FuseTIR make; after a body edit
/// the tir passes (one stage) re-run only on the PrimFunc the edit changed, and the output is
/// what `passel run --lower` prints for the edited file.
#[test]
fn watch_lower_reruns_the_tir_passes_only_on_the_changed_prim_func() {
    let dir = std::env::temp_dir().join(format!("passel-watch-lower-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("m.pir");
    let log = dir.join("log.txt");
    let out = dir.join("out.pir");
    std::fs::write(&file, V1).expect("write");
    let mut child = Command::new(env!("CARGO_BIN_EXE_passel"))
        .args(["watch", "--lower", "-O3", "--max-runs", "2", "-j", "2", "-o"])
        .arg(&out)
        .arg(&file)
        .stdout(Stdio::from(std::fs::File::create(&log).expect("log")))
        .stderr(Stdio::inherit())
        .spawn()
        .expect("passel runs");
    let first = wait_for(&log, "run 1:");
    assert!(first.contains("run 1: 2 functions, 2 edited"), "{first}");
    let edited = V1.replace("relu(%x)", "negative(%x)");
    save(&file, &edited);
    let status = child.wait().expect("watch exits after --max-runs");
    assert!(status.success());
    let text = std::fs::read_to_string(&log).expect("log");
    let run2 = &text[text.find("run 2:").unwrap_or_else(|| panic!("no second run:\n{text}"))..];
    assert!(run2.starts_with("run 2: 2 functions, 1 edited, 1 recomputed (@b)"), "{text}");
    let tir = passel_passes::TIR_PIPELINE.join(",");
    let tir_line = run2.lines().find(|l| l.trim_start().starts_with(&tir)).unwrap_or_else(|| panic!("{text}"));
    let counts: Vec<&str> = tir_line[tir_line.find(&tir).map_or(0, |i| i + tir.len())..].split_whitespace().collect();
    assert_eq!(counts[..4], ["1", "recomputed", "1", "reused"], "{tir_line}");
    // The same as a cold run of the edited file.
    let cold = Command::new(env!("CARGO_BIN_EXE_passel"))
        .args(["run", "--lower", "-O3", "-j", "1"])
        .arg(&file)
        .output()
        .expect("passel run");
    assert!(cold.status.success(), "{}", String::from_utf8_lossy(&cold.stderr));
    assert_eq!(std::fs::read_to_string(&out).expect("watch output"), String::from_utf8_lossy(&cold.stdout));
    let _ = std::fs::remove_dir_all(&dir);
}
