//! The pass registry: name → constructor, filled statically with
//! [`register_pass!`](crate::register_pass) (`inventory`). Lookups accept the TVM spelling
//! `FoldConstant` and the CLI spelling `fold-constant`.

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

use super::error::PassError;
use super::pass::{Pass, PassKind};

/// One registered pass; submit with [`register_pass!`](crate::register_pass).
pub struct PassRegistration {
    /// The TVM-style name.
    pub name: &'static str,
    /// Makes a fresh instance.
    pub make: fn() -> Box<dyn Pass>,
}

inventory::collect!(PassRegistration);

/// Registers a pass constructor under a TVM-style name:
/// `register_pass!("FoldConstant", || Box::new(fold_constant_pass()));`
#[macro_export]
macro_rules! register_pass {
    ($name:expr, $make:expr $(,)?) => {
        $crate::inventory::submit! {
            $crate::transform::PassRegistration { name: $name, make: $make }
        }
    };
}

/// A registry entry as listed by [`list_passes`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassListing {
    /// The TVM-style name.
    pub name: String,
    /// Its kind.
    pub kind: PassKind,
    /// Its opt level.
    pub opt_level: u32,
    /// Its required passes.
    pub required: Vec<String>,
    /// How the executor runs it (see docs/parallel.md).
    pub runs_as: RunsAs,
}

/// How the executor runs a pass: what `passel passes` shows in its `runs as` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunsAs {
    /// A function pass: fused with its neighbours, one task per function.
    Fused,
    /// A module pass with a per-function form (`ModulePass::with_function_form`): fused like a
    /// function pass while every signature is declared.
    FunctionLocal,
    /// A split module pass (`ModulePass::with_prelude_and_function_form`): a module-wide
    /// prelude as a barrier, then its per-function part fused with the passes after it.
    Split,
    /// A module pass without a per-function form: a barrier.
    Barrier,
    /// A `Sequential`: called as one pass, planning its own list.
    Nested,
}

impl std::fmt::Display for RunsAs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            RunsAs::Fused => "fused",
            RunsAs::FunctionLocal => "fused (function-local)",
            RunsAs::Split => "prelude + fused (split)",
            RunsAs::Barrier => "barrier",
            RunsAs::Nested => "nested",
        })
    }
}

impl RunsAs {
    /// How the executor runs `pass`.
    pub fn of(pass: &dyn Pass) -> RunsAs {
        if pass.as_function().is_some() {
            RunsAs::Fused
        } else if pass.function_form().is_some() {
            RunsAs::FunctionLocal
        } else if pass.split_form().is_some() {
            RunsAs::Split
        } else if pass.as_sequential().is_some() {
            RunsAs::Nested
        } else {
            RunsAs::Barrier
        }
    }
}

struct Registry {
    by_key: BTreeMap<String, &'static PassRegistration>,
    by_name: BTreeMap<&'static str, &'static PassRegistration>,
    duplicates: Vec<String>,
}

/// `FoldConstant`, `fold-constant`, `fold_constant` all become `foldconstant`.
fn normalize(name: &str) -> String {
    name.chars().filter(|c| *c != '-' && *c != '_').flat_map(char::to_lowercase).collect()
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut reg = Registry { by_key: BTreeMap::new(), by_name: BTreeMap::new(), duplicates: Vec::new() };
        for r in inventory::iter::<PassRegistration> {
            let key = normalize(r.name);
            if reg.by_key.insert(key.clone(), r).is_some() {
                reg.duplicates.push(key);
            }
            reg.by_name.insert(r.name, r);
        }
        reg
    })
}

/// The registered pass `name` (TVM or CLI spelling), freshly constructed.
pub fn get_pass(name: &str) -> Result<Arc<dyn Pass>, PassError> {
    let reg = registry();
    let key = normalize(name);
    match reg.by_key.get(&key) {
        Some(_) if reg.duplicates.contains(&key) => Err(PassError::DuplicatePass { name: name.to_string() }),
        Some(r) => Ok(Arc::from((r.make)())),
        None => Err(PassError::UnknownPass {
            name: name.to_string(),
            suggestions: crate::suggest(name, reg.by_name.keys().copied()).into_iter().map(str::to_string).collect(),
        }),
    }
}

/// The canonical (registered) spelling of `name`, if registered.
pub fn canonical_pass_name(name: &str) -> Option<&'static str> {
    registry().by_key.get(&normalize(name)).map(|r| r.name)
}

/// Every registered pass, sorted by name.
pub fn list_passes() -> Vec<PassListing> {
    registry()
        .by_name
        .values()
        .map(|r| {
            let pass = (r.make)();
            let info = pass.info();
            PassListing {
                name: r.name.to_string(),
                kind: pass.kind(),
                opt_level: info.opt_level,
                required: info.required.clone(),
                runs_as: RunsAs::of(&*pass),
            }
        })
        .collect()
}
