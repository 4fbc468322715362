//! Checked writes to stdout and stderr for the CLI. `print!` and `eprint!` panic when a write
//! fails (exit 101); every CLI write goes through a [`Console`] instead, which remembers the
//! first failure so the command can end the conventional way:
//!
//! - a closed pipe (`passel gen | head -1`, `passel run … 2>&1 | head -1`) ends quietly with
//!   exit code 141, what a shell reports for cargo and rustc, which die of SIGPIPE there;
//! - any other write error (`2>/dev/full`, a full disk behind a redirect) is reported once on
//!   stderr when stderr still works, and the command exits 1.
//!
//! After a failure the console drops further writes: output stops at the first broken write.

use std::io::Write;
use std::process::ExitCode;
use std::sync::{Arc, Mutex, PoisonError};

use passel_engine::transform::Sink;

/// The exit code of a command whose output pipe was closed by the reader (128 + SIGPIPE).
pub const CLOSED_PIPE_EXIT: u8 = 141;

/// Which stream a write went to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

/// The first write failure, if any.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Failure {
    ClosedPipe,
    Error,
}

/// A write failed; the failure is recorded in the console (and reported if it can be).
/// The command should stop and return [`Console::exit_code`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stopped;

/// Checked stdout and stderr (cheap to clone; clones share the failure state).
#[derive(Clone, Default)]
pub struct Console {
    failure: Arc<Mutex<Option<Failure>>>,
}

impl Console {
    /// A console on the process's stdout and stderr with no failure yet.
    pub fn new() -> Console {
        Console::default()
    }

    /// Writes `text` to stdout.
    pub fn out(&self, text: &str) -> Result<(), Stopped> {
        self.write(Stream::Stdout, text.as_bytes()).map_err(|_| Stopped)
    }

    /// Writes `text` to stderr.
    pub fn err(&self, text: &str) -> Result<(), Stopped> {
        self.write(Stream::Stderr, text.as_bytes()).map_err(|_| Stopped)
    }

    /// Reports `error: {message}` on stderr (unless output has already failed, in which case
    /// the failure has been dealt with) and returns the exit code to end with.
    pub fn error(&self, message: &str) -> ExitCode {
        if self.failed() {
            return self.exit_code(ExitCode::FAILURE);
        }
        let _ = self.err(&format!("error: {message}\n"));
        self.exit_code(ExitCode::FAILURE)
    }

    /// `code`, unless a write failed: then 141 for a closed pipe, 1 for any other failure.
    pub fn exit_code(&self, code: ExitCode) -> ExitCode {
        match *self.state() {
            None => code,
            Some(Failure::ClosedPipe) => ExitCode::from(CLOSED_PIPE_EXIT),
            Some(Failure::Error) => ExitCode::FAILURE,
        }
    }

    /// Whether a write has failed.
    pub fn failed(&self) -> bool {
        self.state().is_some()
    }

    /// Records a failure reported elsewhere (e.g. by a writer handed to a library) in the
    /// same way a failed console write is recorded; `stream` says where it happened.
    pub fn record(&self, stream: Stream, e: &std::io::Error) {
        let failure = if e.kind() == std::io::ErrorKind::BrokenPipe { Failure::ClosedPipe } else { Failure::Error };
        let first = {
            let mut state = self.state();
            let first = state.is_none();
            if first {
                *state = Some(failure);
            }
            first
        };
        if first && failure == Failure::Error && stream == Stream::Stdout {
            // Said once; if stderr fails too there is nowhere left to say it.
            let _ = std::io::stderr().lock().write_all(format!("error: cannot write to stdout: {e}\n").as_bytes());
        }
    }

    /// A sink for the engine's printing instruments that writes to stderr through this console.
    pub fn stderr_sink(&self) -> Sink {
        Arc::new(Mutex::new(ConsoleWriter { console: self.clone(), stream: Stream::Stderr }))
    }

    /// A writer to `stream` through this console (for code that takes `dyn Write`).
    pub fn writer(&self, stream: Stream) -> ConsoleWriter {
        ConsoleWriter { console: self.clone(), stream }
    }

    fn write(&self, stream: Stream, bytes: &[u8]) -> std::io::Result<()> {
        if self.failed() {
            return Err(std::io::Error::other("output has already failed"));
        }
        let res = match stream {
            Stream::Stdout => {
                let mut w = std::io::stdout().lock();
                w.write_all(bytes).and_then(|()| w.flush())
            }
            Stream::Stderr => {
                let mut w = std::io::stderr().lock();
                w.write_all(bytes).and_then(|()| w.flush())
            }
        };
        if let Err(e) = &res {
            self.record(stream, e);
        }
        res
    }

    fn state(&self) -> std::sync::MutexGuard<'_, Option<Failure>> {
        self.failure.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `std::io::Write` onto a console stream; failures are recorded in the console.
pub struct ConsoleWriter {
    console: Console,
    stream: Stream,
}

impl Write for ConsoleWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.console.write(self.stream, buf).map(|()| buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
