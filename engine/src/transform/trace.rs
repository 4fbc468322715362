//! Execution traces: one event per (pass, function) task, streamed from the workers over a
//! crossbeam channel, rendered as Chrome trace JSON (viewable in Perfetto or
//! `chrome://tracing`) with one track per worker thread.
//!
//! A [`Tracer`] is put into a context with [`PassContextBuilder::trace`]; worker copies share
//! it. Events carry the thread's index in the executor's pool (track 0 is the coordinating
//! thread, which runs tasks itself on the serial path), so tracks do not depend on OS thread
//! ids. Tracing does not change what passes compute.
//!
//! [`PassContextBuilder::trace`]: super::PassContextBuilder::trace

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, Sender};

/// One finished task: `pass` ran on `function` on track `thread`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEvent {
    /// The pass.
    pub pass: String,
    /// The function.
    pub function: String,
    /// 0 for the coordinating thread, `1 + index` for pool worker `index`.
    pub thread: usize,
    /// Start, relative to the tracer's creation.
    pub start: Duration,
    /// Duration.
    pub duration: Duration,
}

/// The sending end of a trace; cheap to clone, shared by worker copies of a context.
#[derive(Clone, Debug)]
pub struct Tracer {
    origin: Instant,
    tx: Sender<TraceEvent>,
}

/// A tracer and the receiver its events stream to.
pub fn trace_channel() -> (Tracer, Receiver<TraceEvent>) {
    let (tx, rx) = crossbeam_channel::unbounded();
    (Tracer { origin: Instant::now(), tx }, rx)
}

impl Tracer {
    /// Records that `pass` ran on `function` from `start` for `duration`, on this thread's track.
    /// A dropped receiver is not an error: tracing is best effort.
    pub(crate) fn record(&self, pass: &str, function: &str, start: Instant, duration: Duration) {
        let thread = rayon::current_thread_index().map_or(0, |i| i + 1);
        let _ = self.tx.send(TraceEvent {
            pass: pass.to_string(),
            function: function.to_string(),
            thread,
            start: start.saturating_duration_since(self.origin),
            duration,
        });
    }
}

/// Chrome trace JSON for `events`: a thread-name record per track, then one complete ("X")
/// event per task, sorted by track and start time so the bytes do not depend on arrival order.
pub fn chrome_trace_json(events: &[TraceEvent]) -> String {
    let mut sorted: Vec<&TraceEvent> = events.iter().collect();
    sorted.sort_by(|a, b| (a.thread, a.start, &a.pass, &a.function).cmp(&(b.thread, b.start, &b.pass, &b.function)));
    let mut tracks: Vec<usize> = sorted.iter().map(|e| e.thread).collect();
    tracks.dedup();
    let mut out = String::from("{\"traceEvents\":[\n");
    let mut first = true;
    let mut sep = |out: &mut String| {
        if !std::mem::take(&mut first) {
            out.push_str(",\n");
        }
    };
    for t in &tracks {
        sep(&mut out);
        let name = if *t == 0 { "coordinator".to_string() } else { format!("worker {}", t - 1) };
        let _ = write!(
            out,
            "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{t},\"args\":{{\"name\":{}}}}}",
            json_str(&name)
        );
    }
    for e in sorted {
        sep(&mut out);
        let _ = write!(
            out,
            "{{\"name\":{},\"cat\":\"pass\",\"ph\":\"X\",\"pid\":1,\"tid\":{},\"ts\":{},\"dur\":{},\"args\":{{\"function\":{}}}}}",
            json_str(&e.pass),
            e.thread,
            e.start.as_micros(),
            e.duration.as_micros(),
            json_str(&e.function)
        );
    }
    out.push_str("\n]}\n");
    out
}

/// A JSON string literal, quotes included: serde_json's escaping, which the harness's JSON
/// writers (`bench --json`, `--stats-json`) use too.
fn json_str(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}
