//! `passel run -j N --trace FILE` writes Chrome trace JSON with one track per worker thread, and
//! the output does not depend on the thread count.

use std::process::Command;

fn passel(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_passel")).args(args).output().expect("passel runs")
}

#[test]
fn run_with_trace_writes_json_with_a_track_per_worker_and_same_output_as_serial() {
    let dir = std::env::temp_dir().join(format!("passel-trace-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let input = dir.join("in.pir");
    let gen = passel(&["gen", "chain", "--functions", "64", "--ops", "10"]);
    assert!(gen.status.success());
    std::fs::write(&input, &gen.stdout).expect("write input");
    let trace = dir.join("trace.json");
    let pipeline = "FoldConstant,EliminateCommonSubexpr,DeadCodeElimination,SimplifyExpr";
    let input_s = input.to_str().expect("utf-8 path");
    let trace_s = trace.to_str().expect("utf-8 path");
    let parallel = passel(&["run", "-O", "3", "-j", "3", "--passes", pipeline, "--trace", trace_s, input_s]);
    let serial = passel(&["run", "-O", "3", "-j", "1", "--passes", pipeline, input_s]);
    assert!(parallel.status.success(), "{}", String::from_utf8_lossy(&parallel.stderr));
    assert_eq!(parallel.stdout, serial.stdout);
    let text = std::fs::read_to_string(&trace).expect("trace written");
    let json: serde_json::Value = serde_json::from_str(&text).expect("trace is JSON");
    let events = json["traceEvents"].as_array().expect("traceEvents");
    let mut task_tids: Vec<u64> =
        events.iter().filter(|e| e["ph"] == "X").map(|e| e["tid"].as_u64().expect("tid")).collect();
    // Stages [FoldConstant, InferType, EliminateCommonSubexpr, InferType], DeadCodeElimination,
    // [InferType, SimplifyExpr]: InferType runs in its per-function form inside the function
    // stages (every function of `gen chain` declares its signature), one task per function each
    // time; DeadCodeElimination is a barrier with one task per function.
    assert_eq!(task_tids.len(), 7 * 64);
    task_tids.sort();
    task_tids.dedup();
    let mut tracks: Vec<u64> =
        events.iter().filter(|e| e["ph"] == "M").map(|e| e["tid"].as_u64().expect("tid")).collect();
    tracks.sort();
    assert_eq!(tracks, task_tids);
    assert!(task_tids.iter().all(|t| (1..=3).contains(t)), "{task_tids:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
