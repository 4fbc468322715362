//! `PassTimingInstrument`: a tree of pass timings in call order (rule 31).

use std::fmt::Write as _;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use crate::ir::Module;
use crate::transform::error::InstrumentError;
use crate::transform::info::PassInfo;
use crate::transform::instrument::Instrument;

#[derive(Debug)]
struct Node {
    name: String,
    total: Duration,
    /// Wall time minus fan-out wall time plus summed worker time.
    cpu: Duration,
    children: Vec<Node>,
}

#[derive(Debug)]
struct Open {
    name: String,
    start: Instant,
    fan_out_wall: Duration,
    fan_out_busy: Duration,
    children: Vec<Node>,
}

#[derive(Debug, Default)]
struct State {
    roots: Vec<Node>,
    open: Vec<Open>,
    /// How many entered contexts hold this instrument; data is cleared when the last exits.
    depth: usize,
}

/// Records how long each pass took, as a tree in call order. Render it with
/// [`PassTimingInstrument::render`] before leaving the context: exiting the outermost context
/// that holds the instrument clears the data. Each instance has its own state.
#[derive(Debug, Default)]
pub struct PassTimingInstrument {
    state: Mutex<State>,
}

impl PassTimingInstrument {
    /// A fresh instrument.
    pub fn new() -> PassTimingInstrument {
        PassTimingInstrument::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The report: a `Total` line, then one line per pass, tab-indented by depth:
    /// `name: total [self] (% of total; % of parent) cpu time`. With nothing profiled the
    /// report is empty, as TVM's `RenderPassProfiles` returns `""`. Rendering while a pass runs
    /// is an error.
    pub fn render(&self) -> Result<String, InstrumentError> {
        let state = self.lock();
        if !state.open.is_empty() {
            return Err(InstrumentError::new("cannot render pass timings while a pass is running"));
        }
        if state.roots.is_empty() {
            return Ok(String::new());
        }
        let total: Duration = state.roots.iter().map(|n| n.total).sum();
        let mut out = String::new();
        let _ = writeln!(out, "Total: {}us", total.as_micros());
        // An explicit stack instead of recursion: pass trees are shallow, but cheap to keep so.
        let mut work: Vec<(&Node, usize, Duration)> = state.roots.iter().rev().map(|n| (n, 0, total)).collect();
        while let Some((node, depth, parent)) = work.pop() {
            let child_sum: Duration = node.children.iter().map(|c| c.total).sum();
            let self_time = node.total.saturating_sub(child_sum);
            let _ = writeln!(
                out,
                "{}{}: {}us [{}us] ({:.2}%; {:.2}%) cpu {}us",
                "\t".repeat(depth),
                node.name,
                node.total.as_micros(),
                self_time.as_micros(),
                percent(node.total, total),
                percent(node.total, parent),
                node.cpu.as_micros(),
            );
            work.extend(node.children.iter().rev().map(|c| (c, depth + 1, node.total)));
        }
        Ok(out)
    }
}

fn percent(part: Duration, whole: Duration) -> f64 {
    if whole.is_zero() {
        0.0
    } else {
        part.as_secs_f64() / whole.as_secs_f64() * 100.0
    }
}

impl Instrument for PassTimingInstrument {
    fn name(&self) -> &str {
        "PassTimingInstrument"
    }

    fn enter_pass_ctx(&self) -> Result<(), InstrumentError> {
        self.lock().depth += 1;
        Ok(())
    }

    fn exit_pass_ctx(&self) -> Result<(), InstrumentError> {
        let mut state = self.lock();
        state.depth = state.depth.saturating_sub(1);
        if state.depth == 0 {
            *state = State::default();
        }
        Ok(())
    }

    fn run_before_pass(&self, _module: &Module, info: &PassInfo) -> Result<(), InstrumentError> {
        self.lock().open.push(Open {
            name: info.name.clone(),
            start: Instant::now(),
            fan_out_wall: Duration::ZERO,
            fan_out_busy: Duration::ZERO,
            children: Vec::new(),
        });
        Ok(())
    }

    fn run_after_pass(&self, _module: &Module, info: &PassInfo) -> Result<(), InstrumentError> {
        let mut state = self.lock();
        let open = state.open.pop().ok_or_else(|| InstrumentError::new("pass ended that never started"))?;
        if open.name != info.name {
            return Err(InstrumentError::new(format!("pass {} ended while {} was running", info.name, open.name)));
        }
        let total = open.start.elapsed();
        let children_total: Duration = open.children.iter().map(|c| c.total).sum();
        let children_cpu: Duration = open.children.iter().map(|c| c.cpu).sum();
        let own_wall = total.saturating_sub(children_total);
        let cpu = own_wall.saturating_sub(open.fan_out_wall) + open.fan_out_busy + children_cpu;
        let node = Node { name: open.name, total, cpu, children: open.children };
        match state.open.last_mut() {
            Some(parent) => parent.children.push(node),
            None => state.roots.push(node),
        }
        Ok(())
    }

    fn on_pass_failed(&self, info: &PassInfo) {
        // Drop the failed pass and anything left open inside it, so no entry dangles.
        let mut state = self.lock();
        if let Some(i) = state.open.iter().rposition(|o| o.name == info.name) {
            state.open.truncate(i);
        }
    }

    fn record_worker_time(&self, _info: &PassInfo, wall: Duration, busy: Duration) {
        if let Some(open) = self.lock().open.last_mut() {
            open.fan_out_wall += wall;
            open.fan_out_busy += busy;
        }
    }
}
