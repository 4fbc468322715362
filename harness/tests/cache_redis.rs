//! The remote tier of the stage cache against a real `redis-server`: two "machines" (separate
//! local directories) sharing one server, several processes writing it at once, and a server
//! that is absent, slow (a proxy that delays every byte past the read timeout) or goes away
//! mid-run (a proxy that cuts every connection after a few replies). Every output is
//! byte-identical to a run without a cache, and a failing server costs bounded time.
//!
//! The server: `PASSEL_TEST_REDIS_URL` (`.ci/run` starts one), else a `redis-server` this test
//! starts on a free port; without either the tests print why and return.

#[path = "support/cli.rs"]
mod cli;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use cli::{stderr, temp_dir, write};
use passel_engine::ir::print_module;
use passel_harness::gen::{chain, ChainOptions};

/// `redis://127.0.0.1:PORT` of the server the tests use, or why there is none.
fn server() -> Result<&'static str, &'static str> {
    static SERVER: OnceLock<Result<String, &'static str>> = OnceLock::new();
    SERVER
        .get_or_init(|| {
            if let Ok(url) = std::env::var("PASSEL_TEST_REDIS_URL") {
                let base = url.trim_end_matches('/');
                // Drop a database number: each test picks its own.
                let base = match base.rfind('/') {
                    Some(i)
                        if base[i + 1..].bytes().all(|b| b.is_ascii_digit())
                            && base[..i].ends_with(|c: char| c.is_ascii_digit()) =>
                    {
                        &base[..i]
                    }
                    _ => base,
                };
                return Ok(base.to_string());
            }
            start_server().ok_or("no PASSEL_TEST_REDIS_URL and no redis-server binary (apt-get install redis-server)")
        })
        .as_ref()
        .map(String::as_str)
        .map_err(|e| *e)
}

/// Starts `redis-server` on a free port for the rest of the test process (it exits with its
/// parent's pipe: `--daemonize no` and the child is left to the OS when tests end).
fn start_server() -> Option<String> {
    let port = TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
    let dir = temp_dir("redis-server");
    if Command::new("redis-server").arg("--version").output().is_err() {
        return None;
    }
    // The server runs under a shell that stops it when its standard input closes, which
    // happens when this test process exits however it exits (statics are never dropped, so a
    // `Child` kept in one would outlive the tests).
    let child = Command::new("sh")
        .args(["-c", "redis-server \"$@\" & pid=$!; read _; kill $pid", "sh"])
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
        .arg("--dir")
        .arg(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    static KEEP: OnceLock<std::sync::Mutex<Child>> = OnceLock::new();
    let _ = KEEP.set(std::sync::Mutex::new(child));
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some(format!("redis://127.0.0.1:{port}"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

macro_rules! need_server {
    () => {
        match server() {
            Ok(url) => url,
            Err(why) => {
                eprintln!("skipped: {why}");
                return;
            }
        }
    };
}

/// Empties database `db` of the server at `base`.
fn flush(base: &str, db: u8) {
    let addr = base.trim_start_matches("redis://");
    let mut s = TcpStream::connect(addr).expect("connects to redis");
    write!(s, "*2\r\n$6\r\nSELECT\r\n${}\r\n{db}\r\n*1\r\n$7\r\nFLUSHDB\r\n", db.to_string().len()).expect("writes");
    let mut buf = [0u8; 64];
    let mut got = Vec::new();
    while got.iter().filter(|&&b| b == b'\n').count() < 2 {
        let n = s.read(&mut buf).expect("reads");
        assert!(n > 0, "redis closed the connection");
        got.extend_from_slice(&buf[..n]);
    }
}

fn module_text(functions: usize, seed: u64) -> String {
    print_module(&chain(&ChainOptions { functions, ops: 12, seed, ..Default::default() }))
}

fn run(file: &Path, cache: Option<(&str, &Path)>) -> Output {
    let mut cmd = cli::bin();
    cmd.args(["run", file.to_str().expect("utf-8"), "-j", "2"]).stdin(Stdio::null()).env_remove("PASSEL_CACHE_DIR");
    if let Some((url, local)) = cache {
        cmd.args(["--cache", url, "--cache-local", local.to_str().expect("utf-8")]);
    }
    let out = cmd.output().expect("passel runs");
    assert!(out.status.success(), "{}", stderr(&out));
    out
}

/// A copy of `file` with a comment above its first function: the same functions, but a text
/// no run entry answers, so a run reads the per-function entries.
fn touched(file: &Path, tag: &str) -> std::path::PathBuf {
    let text = std::fs::read_to_string(file).expect("read");
    let path = file.with_file_name(format!("touched-{tag}.pir"));
    std::fs::write(&path, format!("// {tag}\n{text}")).expect("write");
    path
}

/// What the note says when a run entry (an earlier run of the same text and options) answered.
const RUN_ENTRY_NOTE: &str = "the output of an earlier run of the same text and options reused";

fn note(out: &Output) -> String {
    stderr(out).lines().find(|l| l.starts_with("cache ")).expect("cache note").to_string()
}

#[test]
fn a_second_machine_reuses_what_the_first_computed() {
    let base = need_server!();
    flush(base, 1);
    let url = format!("{base}/1");
    let dir = temp_dir("redis-machines");
    let file = write(&dir, "m.pir", &module_text(30, 3));
    let cold = run(&file, None);
    let first = run(&file, Some((&url, &dir.join("machine-a"))));
    assert_eq!(first.stdout, cold.stdout);
    assert!(note(&first).contains("30 of 30 functions recomputed"), "{}", note(&first));
    // Another machine: its own empty directory, the same server, which has the first run's
    // run entry.
    let second = run(&file, Some((&url, &dir.join("machine-b"))));
    assert_eq!(second.stdout, cold.stdout);
    assert!(note(&second).contains(RUN_ENTRY_NOTE), "{}", note(&second));
    // A third machine with a text no run entry answers: the run record and the entries the
    // changed first function reaches come from the server (passel-cache's `record.rs`).
    let edited = touched(&file, "third");
    let third = run(&edited, Some((&url, &dir.join("machine-c"))));
    assert_eq!(third.stdout, cold.stdout);
    let line = note(&third);
    assert!(line.contains("0 of 30 functions recomputed"), "{line}");
    assert!(line.contains(" 0 rejected"), "{line}");
    assert!(line.contains("; 1 of 30 functions parsed"), "{line}");
    assert!(!line.contains("remote 0 hits"), "{line}");
    // That machine kept what it fetched: a fourth run of another such text asks the server
    // only for the new text's run entry (the changed first function is parsed without asking).
    let fourth = run(&touched(&file, "fourth"), Some((&url, &dir.join("machine-c"))));
    assert_eq!(fourth.stdout, cold.stdout);
    assert!(note(&fourth).contains("remote 0 hits, 1 misses"), "{}", note(&fourth));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn processes_writing_one_server_at_once_leave_only_valid_entries() {
    let base = need_server!();
    flush(base, 2);
    let url = format!("{base}/2");
    let dir = temp_dir("redis-concurrent");
    let files: Vec<_> = (0..4).map(|i| write(&dir, &format!("m{i}.pir"), &module_text(15, 10 + i))).collect();
    let colds: Vec<Vec<u8>> = files.iter().map(|f| run(f, None).stdout).collect();
    let children: Vec<_> = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            cli::bin()
                .args(["run", f.to_str().expect("utf-8"), "-j", "2", "--cache", &url, "--cache-local"])
                .arg(dir.join(format!("local{i}")))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawns")
        })
        .collect();
    for (child, cold) in children.into_iter().zip(&colds) {
        let out = child.wait_with_output().expect("waits");
        assert!(out.status.success(), "{}", stderr(&out));
        assert_eq!(&out.stdout, cold);
    }
    // Fresh local directories: everything comes from the server, and every entry checks.
    for (i, (f, cold)) in files.iter().zip(&colds).enumerate() {
        let out = run(f, Some((&url, &dir.join(format!("fresh{i}")))));
        assert_eq!(&out.stdout, cold);
        assert!(note(&out).contains(RUN_ENTRY_NOTE), "{}", note(&out));
        let out = run(&touched(f, &format!("fresh{i}")), Some((&url, &dir.join(format!("fresh{i}")))));
        assert_eq!(&out.stdout, cold);
        assert!(note(&out).contains("0 of 15 functions recomputed"), "{}", note(&out));
        assert!(note(&out).contains(" 0 rejected"), "{}", note(&out));
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn no_server_means_recomputation_with_a_warning() {
    let dir = temp_dir("redis-absent");
    let file = write(&dir, "m.pir", &module_text(10, 5));
    let cold = run(&file, None);
    let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    let url = format!("redis://127.0.0.1:{port}/0");
    let start = Instant::now();
    let out = run(&file, Some((&url, &dir.join("local"))));
    assert_eq!(out.stdout, cold.stdout);
    assert!(stderr(&out).contains("going on without the remote cache"), "{}", stderr(&out));
    assert!(note(&out).contains("remote cache unavailable"), "{}", note(&out));
    assert!(start.elapsed() < Duration::from_secs(20), "took {:?}", start.elapsed());
    let _ = std::fs::remove_dir_all(&dir);
}

/// A proxy to `target` on a free port: each connection forwards bytes both ways, the replies
/// delayed by `delay` per chunk, and closed after `cut_after` reply chunks when given.
fn proxy(target: &str, delay: Duration, cut_after: Option<usize>) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind proxy");
    let port = listener.local_addr().expect("addr").port();
    let target = target.trim_start_matches("redis://").to_string();
    std::thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let Ok(server) = TcpStream::connect(&target) else { continue };
            let (mut c_in, mut s_out) = (client.try_clone().expect("clone"), server.try_clone().expect("clone"));
            std::thread::spawn(move || {
                let mut buf = [0u8; 16384];
                while let Ok(n) = c_in.read(&mut buf) {
                    if n == 0 || s_out.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
            let (mut s_in, mut c_out) = (server, client);
            std::thread::spawn(move || {
                let mut buf = [0u8; 16384];
                let mut replies = 0;
                while let Ok(n) = s_in.read(&mut buf) {
                    std::thread::sleep(delay);
                    if n == 0 || cut_after.is_some_and(|k| replies >= k) || c_out.write_all(&buf[..n]).is_err() {
                        let _ = c_out.shutdown(std::net::Shutdown::Both);
                        break;
                    }
                    replies += 1;
                }
            });
        }
    });
    port
}

#[test]
fn a_slow_server_costs_bounded_time_and_gives_correct_output() {
    let base = need_server!();
    let dir = temp_dir("redis-slow");
    let file = write(&dir, "m.pir", &module_text(10, 6));
    let cold = run(&file, None);
    // Every reply arrives after the read timeout.
    let port = proxy(base, passel_cache::IO_TIMEOUT + Duration::from_secs(1), None);
    let start = Instant::now();
    let out = run(&file, Some((&format!("redis://127.0.0.1:{port}/3"), &dir.join("local"))));
    assert_eq!(out.stdout, cold.stdout);
    assert!(note(&out).contains("remote cache unavailable"), "{}", note(&out));
    assert!(start.elapsed() < Duration::from_secs(30), "took {:?}", start.elapsed());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_server_that_goes_away_mid_run_degrades_to_recomputation() {
    let base = need_server!();
    flush(base, 4);
    let dir = temp_dir("redis-cut");
    let file = write(&dir, "m.pir", &module_text(20, 8));
    let cold = run(&file, None);
    // Fill the server, then go through a proxy that cuts each connection after a few replies.
    run(&file, Some((&format!("{base}/4"), &dir.join("filler"))));
    let port = proxy(base, Duration::ZERO, Some(5));
    // A text no run entry answers, so the run asks the server for many entries.
    let out = run(&touched(&file, "cut"), Some((&format!("redis://127.0.0.1:{port}/4"), &dir.join("local"))));
    assert_eq!(out.stdout, cold.stdout);
    assert!(stderr(&out).contains("going on without the remote cache"), "{}", stderr(&out));
    let _ = std::fs::remove_dir_all(&dir);
}
