//! The option sets several commands share, and the checks of options against each other that
//! clap's attributes cannot express (the same input given twice, two outputs naming one file).
//!
//! [`PipelineArgs`] is the one set of pipeline options: `run`, `watch`, `bisect` and `bench`
//! flatten it, and a crash reproducer's header is its words, parsed back by clap
//! ([`PipelineArgs::from_words`]).

use std::path::PathBuf;

use clap::{Args, Parser};
use passel_engine::transform::{
    get_pass, parse_config_assignment, parse_pipeline, ConfigError, PassContext, PassContextBuilder, PassError,
    Sequential, DEFAULT_OPT_LEVEL, MAX_THREADS,
};

use crate::onnx::{InputShapeArgs, OnnxError};

/// Why command-line options (or a reproducer header's words) do not make a pipeline and
/// context.
#[derive(Debug, thiserror::Error)]
pub enum OptionsError {
    /// `--passes` does not parse, or a pass name is unknown (with suggestions).
    #[error(transparent)]
    Pass(#[from] PassError),
    /// A `--config KEY=VALUE` that does not parse or names an unknown key.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A word that is no pipeline option, in a reproducer header (`what`).
    #[error("unknown option `{word}` in {what} (expected --passes=, -O, --require=, --disable=, --config=, --lower)")]
    UnknownWord {
        /// The word.
        word: String,
        /// Where the words come from.
        what: String,
    },
    /// A pipeline option with a bad value, in a reproducer header (`what`).
    #[error("{msg} in {what}")]
    BadWord {
        /// clap's one-line reason.
        msg: String,
        /// Where the words come from.
        what: String,
    },
    /// Two output options name one file.
    #[error("{first} and {second} both name {}: each output needs its own file", path.display())]
    SameOutput {
        /// The first option.
        first: String,
        /// The second option.
        second: String,
        /// The file both name.
        path: PathBuf,
    },
    /// A malformed `--input-shape`.
    #[error(transparent)]
    InputShape(#[from] OnnxError),
    /// `--input-shape` gives one input twice.
    #[error("--input-shape gives input `{0}` twice")]
    InputShapeTwice(String),
}

impl From<OptionsError> for String {
    fn from(e: OptionsError) -> String {
        e.to_string()
    }
}

/// The pipeline and the options of its pass context: what a crash reproducer's header records
/// (every option that changes what a run does; the thread count does not).
#[derive(Args, Clone, Debug, Default, PartialEq, Eq)]
pub struct PipelineArgs {
    /// Pipeline, e.g. `FoldConstant,EliminateCommonSubexpr,[SimplifyExpr,DeadCodeElimination]`
    /// (brackets nest a group); default: the standard pipeline for the opt level.
    #[arg(long)]
    pub passes: Option<String>,
    /// Optimization level: passes with a higher opt level are skipped by pipelines [default: 2].
    #[arg(short = 'O', long = "opt-level", value_parser = clap::value_parser!(u32).range(0..=3))]
    pub opt_level: Option<u32>,
    /// Never run this pass (beats --require). Repeatable.
    #[arg(long = "disable", value_name = "NAME")]
    pub disable: Vec<String>,
    /// Run this pass whatever the opt level. Repeatable.
    #[arg(long = "require", value_name = "NAME")]
    pub require: Vec<String>,
    /// Set a config key (`passel configs` lists them), e.g. `--config testing.immutable_module=true`.
    #[arg(long = "config", value_name = "KEY=VALUE")]
    pub config: Vec<String>,
    /// After the pipeline, lower the module to the loop level: LegalizeOps, FuseTIR and the tir
    /// passes (docs/tir.md), so each fused group becomes one PrimFunc.
    #[arg(long)]
    pub lower: bool,
}

/// A reproducer header's words, parsed as the command line parses them.
#[derive(Parser)]
#[command(no_binary_name = true, disable_help_flag = true, disable_version_flag = true)]
struct HeaderWords {
    #[command(flatten)]
    pipeline: PipelineArgs,
}

impl PipelineArgs {
    /// `-O`, or the default opt level.
    pub fn opt_level(&self) -> u32 {
        self.opt_level.unwrap_or(DEFAULT_OPT_LEVEL)
    }

    /// The pipeline: `--passes`, or the standard pipeline of the opt level; with `--lower`,
    /// followed by the lowering pipeline.
    pub fn pipeline(&self) -> Result<Sequential, OptionsError> {
        match (&self.passes, self.lower) {
            (Some(text), false) => Ok(parse_pipeline(text)?),
            (Some(text), true) => {
                let given = parse_pipeline(text)?;
                Ok(Sequential::new(
                    "build",
                    vec![std::sync::Arc::new(given), std::sync::Arc::new(passel_passes::lower_pipeline())],
                ))
            }
            (None, false) => Ok(passel_passes::default_pipeline(self.opt_level())),
            (None, true) => Ok(passel_passes::build_pipeline(self.opt_level())),
        }
    }

    /// A context builder with every option applied (no instruments, the default thread count).
    pub fn context(&self) -> Result<PassContextBuilder, OptionsError> {
        let mut builder = PassContext::builder().opt_level(self.opt_level());
        for name in &self.disable {
            builder = builder.disable(&resolve_pass_name(name)?);
        }
        for name in &self.require {
            builder = builder.require(&resolve_pass_name(name)?);
        }
        for entry in &self.config {
            let (key, value) = parse_config_assignment(entry)?;
            builder = builder.config(&key, value);
        }
        Ok(builder)
    }

    /// The pipeline and its context builder.
    pub fn pipeline_and_context(&self) -> Result<(Sequential, PassContextBuilder), OptionsError> {
        Ok((self.pipeline()?, self.context()?))
    }

    /// Whether the user named passes (`--passes` or `--disable`), so that notes on what the
    /// pipeline will not do are worth printing.
    pub fn names_passes(&self) -> bool {
        self.passes.is_some() || !self.disable.is_empty()
    }

    /// The same options with pass names in their registry spelling and config entries trimmed,
    /// as a reproducer header records them.
    pub fn canonical(&self) -> Result<PipelineArgs, OptionsError> {
        let resolve = |names: &[String]| names.iter().map(|n| resolve_pass_name(n)).collect::<Result<Vec<_>, _>>();
        Ok(PipelineArgs {
            passes: self.passes.clone(),
            opt_level: Some(self.opt_level()),
            require: resolve(&self.require)?,
            disable: resolve(&self.disable)?,
            config: self.config.iter().map(|c| c.trim().to_string()).collect(),
            lower: self.lower,
        })
    }

    /// The options as command-line words in one spelling each: `--passes=P`, `-ON`,
    /// `--require=NAME`, `--disable=NAME`, `--config=KEY=VALUE`.
    pub fn to_words(&self) -> Vec<String> {
        let mut words: Vec<String> = self.passes.iter().map(|p| format!("--passes={p}")).collect();
        words.push(format!("-O{}", self.opt_level()));
        words.extend(self.require.iter().map(|n| format!("--require={n}")));
        words.extend(self.disable.iter().map(|n| format!("--disable={n}")));
        words.extend(self.config.iter().map(|c| format!("--config={c}")));
        if self.lower {
            words.push("--lower".into());
        }
        words
    }

    /// Parses words as the command line does ([`PipelineArgs::to_words`] writes them); `what`
    /// names their source in errors.
    pub fn from_words(words: &[String], what: &str) -> Result<PipelineArgs, OptionsError> {
        HeaderWords::try_parse_from(words).map(|h| h.pipeline).map_err(|e| {
            use clap::error::{ContextKind, ContextValue, ErrorKind};
            let what = what.to_string();
            match (e.kind(), e.get(ContextKind::InvalidArg)) {
                (ErrorKind::UnknownArgument, Some(ContextValue::String(arg))) => {
                    OptionsError::UnknownWord { word: arg.clone(), what }
                }
                _ => {
                    let rendered = e.render().to_string();
                    let line = rendered.lines().next().unwrap_or_default();
                    OptionsError::BadWord { msg: line.trim_start_matches("error: ").to_string(), what }
                }
            }
        })
    }

    /// Fills every option not given here from `other` (options given here win).
    pub fn fill_from(&mut self, other: PipelineArgs) {
        self.passes = self.passes.take().or(other.passes);
        self.opt_level = self.opt_level.or(other.opt_level);
        for (mine, theirs) in
            [(&mut self.require, other.require), (&mut self.disable, other.disable), (&mut self.config, other.config)]
        {
            if mine.is_empty() {
                *mine = theirs;
            }
        }
        self.lower |= other.lower;
    }
}

/// `-j`: worker threads of function passes, for the commands that run one pipeline
/// (`bench` takes a list of thread counts instead).
#[derive(Args, Clone, Debug, Default)]
pub struct ThreadArgs {
    /// Worker threads for function passes (1 = serial; default: all cores).
    #[arg(short = 'j', long = "threads", value_parser = clap::value_parser!(u64).range(1..=MAX_THREADS as u64))]
    pub threads: Option<u64>,
}

impl ThreadArgs {
    /// `builder` with the thread count applied.
    pub fn apply(&self, builder: PassContextBuilder) -> PassContextBuilder {
        match self.threads {
            Some(n) => builder.num_threads(n as usize),
            None => builder,
        }
    }
}

/// Resolves a pass name in either spelling to its registry name, with suggestions on error.
pub fn resolve_pass_name(name: &str) -> Result<String, OptionsError> {
    Ok(get_pass(name)?.info().name.clone())
}

/// Fails when two of the output options name the same file (one write would destroy the
/// other's output).
pub fn check_distinct_outputs(outputs: &[(&str, &Option<PathBuf>)]) -> Result<(), OptionsError> {
    let given: Vec<(&str, &PathBuf)> = outputs.iter().filter_map(|(flag, p)| p.as_ref().map(|p| (*flag, p))).collect();
    for (i, (a, pa)) in given.iter().enumerate() {
        for (b, pb) in &given[i + 1..] {
            if crate::files::same_file(pa, pb) {
                let (first, second, path) = (a.to_string(), b.to_string(), pb.to_path_buf());
                return Err(OptionsError::SameOutput { first, second, path });
            }
        }
    }
    Ok(())
}

/// Fails when `--input-shape` gives one input twice (the import would silently use one).
pub fn check_input_shapes(shapes: &InputShapeArgs) -> Result<(), OptionsError> {
    let opts = shapes.options()?;
    for (i, (name, _)) in opts.input_shapes.iter().enumerate() {
        if opts.input_shapes[..i].iter().any(|(n, _)| n == name) {
            return Err(OptionsError::InputShapeTwice(name.clone()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pipeline_args_round_trip_through_words() {
        let args = PipelineArgs {
            passes: Some("InferType,FoldConstant".into()),
            opt_level: Some(3),
            require: vec!["FoldConstant".into()],
            disable: vec![],
            config: vec!["a.b=two words".into(), "q=-x".into()],
            lower: true,
        };
        assert_eq!(PipelineArgs::from_words(&args.to_words(), "the header").unwrap(), args);
    }

    #[test]
    fn bad_words_say_which_and_where() {
        let words = |w: &[&str]| w.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let e = PipelineArgs::from_words(&words(&["--frobnicate"]), "the header").unwrap_err();
        assert!(matches!(&e, OptionsError::UnknownWord { word, .. } if word == "--frobnicate"), "{e:?}");
        assert!(e.to_string().starts_with("unknown option `--frobnicate` in the header"), "{e}");
        let e = PipelineArgs::from_words(&words(&["-O7"]), "the header").unwrap_err();
        assert!(matches!(&e, OptionsError::BadWord { what, .. } if what == "the header"), "{e:?}");
        assert!(e.to_string().contains('7') && e.to_string().ends_with("in the header"), "{e}");
        assert_eq!(PipelineArgs::from_words(&[], "the header").unwrap(), PipelineArgs::default());
    }
}
