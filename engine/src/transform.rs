//! The pass infrastructure: pass descriptions ([`PassInfo`]), the context passes run under
//! ([`PassContext`]), the pass kinds (module, function, [`Sequential`]), the static pass and
//! config registries, instruments and textual pipelines.
//!
//! Semantics follow `docs/pass-semantics.md`; rule numbers in comments refer to it.
//!
//! Invariant: every pass call, including required dependencies and nested sequentials, goes
//! through [`call_pass`], which applies the instrument hooks, the `testing.immutable_module`
//! and `testing.verify_each` checks and error location.

mod bisect;
mod config;
mod context;
mod diagnostics;
mod error;
pub(crate) mod executor;
pub(crate) mod fanout;
mod firewall;
mod info;
mod instrument;
mod instruments;
pub(crate) mod pass;
mod pipeline;
pub(crate) mod plan;
mod prim_func_pass;
mod registry;
mod sequential;
mod statistics;
mod trace;
pub(crate) mod verify_each;

pub use bisect::OptBisect;
pub use config::{
    list_configs, parse_config_assignment, validate_config, ConfigKey, ConfigType, ConfigValue, FromConfigValue,
    IMMUTABLE_MODULE, VERIFY_EACH,
};
pub use context::{ContextGuard, PassContext, PassContextBuilder, DEFAULT_OPT_LEVEL, MAX_THREADS};
pub use diagnostics::{Diagnostic, DiagnosticSink, Severity};
pub use error::{ConfigError, ContextError, Hook, InstrumentError, PassError, PipelineError};
pub use executor::{
    run_function_stage, run_plan, run_prim_stage, run_prim_stage_on, run_stage_on_function, FunctionRun, PrimRun,
};
pub use firewall::{FirewallCheck, ModuleFirewall};
pub use info::PassInfo;
pub use instrument::{stderr_sink, Instrument, Sink};
pub use instruments::{
    reproducer_pipeline, unified_diff, DumpIrInstrument, PassFailure, PassTimingInstrument, PrintIr, PrintIrInstrument,
    ReproducerError, ReproducerInstrument,
};
pub use pass::{
    call_pass, function_pass, module_pass, run_function_pass_over_module, sequential, FunctionBody, FunctionPass,
    ModuleBody, ModulePass, Pass, PassKind, PassTarget, PreludeBody, Sequential, TargetBody, MAX_PIPELINE_DEPTH,
};
pub use pipeline::{parse_pipeline, print_pipeline};
pub use plan::{plan, planned_calls, PlannedCall, Prelude, Stage};
pub use prim_func_pass::{prim_func_pass, PrimFuncBody, PrimFuncPass};
pub use registry::{canonical_pass_name, get_pass, list_passes, PassListing, PassRegistration, RunsAs};
pub use sequential::{run_plain, run_sequential};
pub use statistics::{Statistic, Statistics};
pub use trace::{chrome_trace_json, trace_channel, TraceEvent, Tracer};
