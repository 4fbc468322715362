//! The CLI under hostile or careless use, round 2 (issue #26): `bisect`'s temporary files
//! and its empty check or panicking pipeline, options that contradict or repeat each other,
//! FIFOs and devices given as files, inputs too large to allocate, and `gen` sizes that cannot
//! fit in memory. Each test runs the built binary on a reproducer at small size.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

#[path = "support/cli.rs"]
mod cli;
use cli::{bin, passel, stderr, temp_dir, write};

fn mkfifo(path: &Path) {
    let ok = Command::new("mkfifo").arg(path).status().expect("mkfifo runs").success();
    assert!(ok, "mkfifo {}", path.display());
}

/// Waits for `child` at most `secs` seconds (killing it then), and returns its output.
fn wait_bounded(mut child: std::process::Child, secs: u64, what: &str) -> Output {
    let start = Instant::now();
    while child.try_wait().expect("try_wait").is_none() {
        if start.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} did not finish within {secs} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("output")
}

const MODULE: &str = "def @main(%x: Tensor[(4,), f32]) {\n  add(multiply(%x, 1f), 0f)\n}\n";

fn assert_error(out: &Output, want: &str) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(want), "{want:?} not in {err:?}");
    assert!(!err.contains("panicked at"), "{err}");
}

#[test]
fn bisect_never_writes_through_a_symlink_planted_at_a_predictable_temp_path() {
    let dir = temp_dir("bisect-link");
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).expect("tmp");
    let victim = write(&dir, "victim.txt", "precious\n");
    // The input is a FIFO, so passel waits for it after starting: the symlink is planted at
    // `$TMPDIR/passel-bisect-<pid>.pir`, the name bisect once wrote, before any output exists.
    let input = dir.join("in.pir");
    mkfifo(&input);
    let seen = dir.join("seen.txt");
    let check = format!("echo \"$1\" >> {} && grep -q add", seen.display());
    let child = bin()
        .args(["bisect", input.to_str().unwrap(), "--passes", "SimplifyExpr", "--check", &check])
        .env("TMPDIR", &tmp)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let link = tmp.join(format!("passel-bisect-{}.pir", child.id()));
    std::os::unix::fs::symlink(&victim, &link).expect("plant the symlink");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&input)
        .expect("open fifo")
        .write_all(MODULE.as_bytes())
        .expect("feed");
    let out = wait_bounded(child, 120, "bisect");
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n", "the symlink's target was overwritten");
    // The check saw a file in a private directory under $TMPDIR, removed afterwards.
    let seen = std::fs::read_to_string(&seen).expect("the check ran");
    let first = Path::new(seen.lines().next().expect("a path"));
    let private = first.parent().expect("a parent");
    assert_eq!(private.parent(), Some(tmp.as_path()), "{seen}");
    assert_ne!(private, tmp.as_path());
    assert!(!private.exists(), "{} was not removed", private.display());
    let leftovers: Vec<_> = std::fs::read_dir(&tmp).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(leftovers.len(), 1, "only the planted link stays: {leftovers:?}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn dump_ir_replaces_a_symlink_planted_at_a_dump_name_instead_of_writing_through_it() {
    let dir = temp_dir("dump-link");
    let input = write(&dir, "in.pir", MODULE);
    let victim = write(&dir, "victim.txt", "precious\n");
    let dump = dir.join("dump");
    std::fs::create_dir_all(&dump).unwrap();
    let args = ["run", input.to_str().unwrap(), "--passes", "SimplifyExpr", "--dump-ir", dump.to_str().unwrap()];
    // A first run shows the name of the first dump; a symlink is then planted there.
    assert!(passel(&args).status.success());
    let link = std::fs::read_dir(&dump).unwrap().map(|e| e.unwrap().path()).min().expect("a dump");
    std::fs::remove_file(&link).unwrap();
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let out = passel(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "precious\n", "the symlink's target was overwritten");
    let meta = std::fs::symlink_metadata(&link).expect("the dump exists");
    assert!(meta.is_file(), "the dump replaced the link");
    assert!(std::fs::read_to_string(&link).unwrap().contains("def @main"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bisect_refuses_an_empty_check() {
    let dir = temp_dir("bisect-empty");
    let input = write(&dir, "in.pir", MODULE);
    for check in ["", "  "] {
        let out = passel(&["bisect", input.to_str().unwrap(), "--check", check]);
        assert_error(&out, "error: --check is empty");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn bisect_reports_a_panicking_pipeline_with_its_pass_and_function() {
    let dir = temp_dir("bisect-panic");
    let input = write(&dir, "in.pir", &format!("#[testing.fail=\"panic\"]\n{MODULE}"));
    let out = passel(&["bisect", input.to_str().unwrap(), "--passes", "testing.FailOn", "--check", "true"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("error: the pipeline fails with all"), "{err}");
    assert!(err.contains("in pass testing.FailOn on function @main: panicked"), "{err}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("nothing to bisect"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_input_shape_given_twice_is_an_error() {
    let dir = temp_dir("shape-twice");
    let input = write(&dir, "in.pir", MODULE);
    let out = passel(&["check", input.to_str().unwrap(), "--input-shape", "x=1,2", "--input-shape", "x=3"]);
    assert_error(&out, "error: --input-shape gives input `x` twice");
    let out = passel(&["check", input.to_str().unwrap(), "--input-shape", "x=1,2", "--input-shape", "y=3"]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_print_ir_filter_matching_no_function_is_warned_about() {
    let dir = temp_dir("filter");
    let input = write(&dir, "in.pir", MODULE);
    let run = |filter: &str| {
        passel(&["run", input.to_str().unwrap(), "--print-ir-after", "all", "--print-ir-filter", filter])
    };
    let out = run("@mian");
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("warning: --print-ir-filter @mian matches no function of")
            && err.contains("(did you mean `@main`?)"),
        "{err}"
    );
    let out = run("@main");
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn output_and_trace_naming_the_same_file_is_an_error() {
    let dir = temp_dir("same-file");
    let input = write(&dir, "in.pir", MODULE);
    let out_path = dir.join("out.txt");
    let dotted = dir.join(".").join("out.txt");
    let out = passel(&[
        "run",
        input.to_str().unwrap(),
        "-o",
        out_path.to_str().unwrap(),
        "--trace",
        dotted.to_str().unwrap(),
    ]);
    assert_error(&out, "error: -o and --trace both name");
    assert!(!out_path.exists(), "nothing is written");
    let out = passel(&["run", input.to_str().unwrap(), "--stats-json", "s.json", "-o", "./s.json"]);
    assert_error(&out, "error: -o and --stats-json both name");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn verify_each_contradicting_its_config_key_is_an_error() {
    let dir = temp_dir("verify-each");
    let input = write(&dir, "in.pir", MODULE);
    let path = input.to_str().unwrap();
    let out = passel(&["run", path, "--verify-each", "--config", "testing.verify_each=false"]);
    assert_error(&out, "error: --verify-each contradicts --config testing.verify_each=false");
    let out = passel(&["run", path, "--verify-each", "--config", "testing.verify_each=true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn eval_refuses_a_fifo_or_a_device_as_input_without_blocking() {
    let dir = temp_dir("eval-fifo");
    let input = write(&dir, "in.pir", MODULE);
    let fifo = dir.join("x.npy");
    mkfifo(&fifo);
    let fifo_arg = format!("x={}", fifo.display());
    for (arg, kind) in [(fifo_arg.as_str(), "a fifo"), ("x=/dev/zero", "a character device")] {
        let child = bin()
            .args(["eval", input.to_str().unwrap(), "--input", arg])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
        let out = wait_bounded(child, 60, "eval");
        assert_error(&out, &format!("it is {kind}, not a regular file"));
        assert!(stderr(&out).contains("input `%x`"), "{}", stderr(&out));
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_device_as_the_source_file_is_refused_but_a_pipe_is_read() {
    let out = passel(&["check", "/dev/zero"]);
    assert_error(&out, "cannot read /dev/zero: it is a character device, not a regular file or a pipe");
    let dir = temp_dir("source-pipe");
    let fifo = dir.join("in.pir");
    mkfifo(&fifo);
    let child = bin().args(["check", fifo.to_str().unwrap()]).stderr(Stdio::piped()).spawn().expect("spawn");
    std::fs::OpenOptions::new().write(true).open(&fifo).expect("open fifo").write_all(MODULE.as_bytes()).expect("feed");
    let out = wait_bounded(child, 60, "check");
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The header of a `.npy` file of `n` f32 elements.
fn npy_header(n: u64) -> Vec<u8> {
    let mut h = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({n},), }}");
    while (10 + h.len() + 1) % 64 != 0 {
        h.push(' ');
    }
    h.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(h.len() as u16).to_le_bytes());
    out.extend_from_slice(h.as_bytes());
    out
}

#[test]
fn an_eval_input_too_large_to_allocate_is_an_error_not_an_abort() {
    let dir = temp_dir("eval-alloc");
    let n: u64 = 1 << 28; // 1 GiB of f32: the largest tensor passel holds.
    let input = write(&dir, "in.pir", &format!("def @main(%x: Tensor[({n},), f32]) {{\n  %x\n}}\n"));
    // A sparse file of exactly the announced size: no disk space, and no data is read before
    // the buffer is reserved.
    let big = dir.join("x.npy");
    let mut f = std::fs::File::create(&big).unwrap();
    let header = npy_header(n);
    f.write_all(&header).unwrap();
    f.set_len(header.len() as u64 + 4 * n).unwrap();
    drop(f);
    // Address space capped at 512 MiB: the 1 GiB buffer cannot be reserved.
    let script = format!(
        "ulimit -v 524288 && exec {} eval {} --input x={}",
        env!("CARGO_BIN_EXE_passel"),
        input.display(),
        big.display()
    );
    let out = Command::new("sh").arg("-c").arg(&script).stdin(Stdio::null()).output().expect("sh runs");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("input `%x`")
            && err.contains("cannot allocate 1073741824 bytes for the data of shape [268435456] of f32"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A result too large for the memory left is an error naming the call and its size, not an
/// abort inside the kernel's allocation (issue #26 item 5).
#[test]
fn an_eval_result_too_large_to_allocate_is_an_error_not_an_abort() {
    let dir = temp_dir("eval-result-alloc");
    let input = write(
        &dir,
        "in.pir",
        "def @main(%x: Tensor[(1,), f32]) -> Tensor[(16384, 16384), f32] {\n  broadcast_to(%x, shape=[16384, 16384])\n}\n",
    );
    let script = format!("ulimit -v 524288 && exec {} eval {}", env!("CARGO_BIN_EXE_passel"), input.display());
    let out = Command::new("sh").arg("-c").arg(&script).stdin(Stdio::null()).output().expect("sh runs");
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("cannot allocate 1073741824 bytes for the result of `broadcast_to`"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn gen_refuses_sizes_that_cannot_fit_in_memory() {
    let args = ["gen", "random", "--functions", "1000", "--bindings", "100000", "--max-depth", "8"];
    let start = Instant::now();
    let out = passel(&args);
    assert_error(&out, "error: this workload needs about ");
    assert!(stderr(&out).contains("more than the limit of"), "{}", stderr(&out));
    assert!(start.elapsed() < Duration::from_secs(20), "{args:?} was refused only after building");
    let out = passel(&["gen", "chain", "--functions", "3", "--ops", "5"]);
    assert!(out.status.success(), "{}", stderr(&out));
    // Every kind is estimated: a million MLP layers need gigabytes, more than a 1 GiB limit.
    use passel_harness::gen::cli::{check_size, GenCommand, MlpArgs};
    let mlp = |layers| {
        GenCommand::Mlp(MlpArgs {
            layers,
            batch: 4,
            input: 32,
            width: 64,
            activation: "mixed".into(),
            seed: 0,
            varied_widths: false,
        })
    };
    assert!(check_size(&mlp(1_000_000), 1 << 30).unwrap_err().to_string().contains("more than the limit of 1.0 GiB"));
    assert_eq!(check_size(&mlp(8), 1 << 30), Ok(()));
    // The chain workload is printed one function at a time: its function count costs no
    // memory, one function of ten million ops does.
    use passel_harness::gen::cli::ChainArgs;
    let chain = |functions, ops| GenCommand::Chain(ChainArgs { functions, ops, seed: 0 });
    assert_eq!(check_size(&chain(10_000_000, 50), 1 << 30), Ok(()));
    assert!(check_size(&chain(1, 10_000_000), 1 << 30)
        .unwrap_err()
        .to_string()
        .contains("more than the limit of 1.0 GiB"));
}
