//! Typed pass configuration: keys registered once with a type (statically, via
//! [`register_config!`](crate::register_config)), values checked when a context is built.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::OnceLock;

use super::error::ConfigError;

/// The type a config key accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigType {
    /// `true` / `false` (an int is accepted and means `!= 0`).
    Bool,
    /// A 64-bit integer (TVM's `IntImm`; neither a bool nor a float is accepted). A key may
    /// restrict its range ([`ConfigKey::min`]); the type stays `Int`, as in TVM.
    Int,
    /// A float (an int is accepted).
    Float,
    /// A string.
    Str,
}

impl ConfigType {
    /// The type's name in messages: `bool`, `int`, `float`, `string`.
    pub fn name(self) -> &'static str {
        match self {
            ConfigType::Bool => "bool",
            ConfigType::Int => "int",
            ConfigType::Float => "float",
            ConfigType::Str => "string",
        }
    }
}

impl fmt::Display for ConfigType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A config value.
#[derive(Clone, Debug, PartialEq)]
pub enum ConfigValue {
    /// A bool.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// A string.
    Str(String),
}

impl ConfigValue {
    /// The value's own type.
    pub fn ty(&self) -> ConfigType {
        match self {
            ConfigValue::Bool(_) => ConfigType::Bool,
            ConfigValue::Int(_) => ConfigType::Int,
            ConfigValue::Float(_) => ConfigType::Float,
            ConfigValue::Str(_) => ConfigType::Str,
        }
    }

    /// Reads a value from CLI text: `true`/`false` (in any case: `TRUE`, `False`), an
    /// integer, a float, else a string. The registered type decides later whether it is
    /// accepted (a bool key also takes an integer, nonzero meaning true, as TVM does).
    pub fn parse(text: &str) -> ConfigValue {
        match text {
            t if t.eq_ignore_ascii_case("true") => ConfigValue::Bool(true),
            t if t.eq_ignore_ascii_case("false") => ConfigValue::Bool(false),
            _ => {
                if let Ok(i) = text.parse::<i64>() {
                    ConfigValue::Int(i)
                } else if let Ok(f) = text.parse::<f64>() {
                    ConfigValue::Float(f)
                } else {
                    ConfigValue::Str(text.to_string())
                }
            }
        }
    }

    /// Converts this value to `ty` by the acceptance rules (a bool accepts an int, nonzero
    /// meaning true, as TVM does; a float accepts an int; nothing else converts: an int key
    /// refuses `true`, which would otherwise silently mean 1).
    pub fn coerce(self, ty: ConfigType) -> Option<ConfigValue> {
        match (ty, self) {
            (ConfigType::Bool, ConfigValue::Bool(b)) => Some(ConfigValue::Bool(b)),
            (ConfigType::Bool, ConfigValue::Int(i)) => Some(ConfigValue::Bool(i != 0)),
            (ConfigType::Int, ConfigValue::Int(i)) => Some(ConfigValue::Int(i)),
            (ConfigType::Float, ConfigValue::Float(f)) => Some(ConfigValue::Float(f)),
            (ConfigType::Float, ConfigValue::Int(i)) => Some(ConfigValue::Float(i as f64)),
            (ConfigType::Str, ConfigValue::Str(s)) => Some(ConfigValue::Str(s)),
            _ => None,
        }
    }
}

impl fmt::Display for ConfigValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigValue::Bool(b) => write!(f, "{b}"),
            ConfigValue::Int(i) => write!(f, "{i}"),
            ConfigValue::Float(x) => write!(f, "{x}"),
            ConfigValue::Str(s) => f.write_str(s),
        }
    }
}

impl From<bool> for ConfigValue {
    fn from(v: bool) -> ConfigValue {
        ConfigValue::Bool(v)
    }
}
impl From<i64> for ConfigValue {
    fn from(v: i64) -> ConfigValue {
        ConfigValue::Int(v)
    }
}
impl From<i32> for ConfigValue {
    fn from(v: i32) -> ConfigValue {
        ConfigValue::Int(v.into())
    }
}
impl From<f64> for ConfigValue {
    fn from(v: f64) -> ConfigValue {
        ConfigValue::Float(v)
    }
}
impl From<&str> for ConfigValue {
    fn from(v: &str) -> ConfigValue {
        ConfigValue::Str(v.to_string())
    }
}
impl From<String> for ConfigValue {
    fn from(v: String) -> ConfigValue {
        ConfigValue::Str(v)
    }
}

/// Typed reads for [`PassContext::get_config`](super::PassContext::get_config).
pub trait FromConfigValue: Sized {
    /// The value as `Self`, if it has that type.
    fn from_config(v: &ConfigValue) -> Option<Self>;
}
impl FromConfigValue for bool {
    fn from_config(v: &ConfigValue) -> Option<bool> {
        match v {
            ConfigValue::Bool(b) => Some(*b),
            _ => None,
        }
    }
}
impl FromConfigValue for i64 {
    fn from_config(v: &ConfigValue) -> Option<i64> {
        match v {
            ConfigValue::Int(i) => Some(*i),
            _ => None,
        }
    }
}
impl FromConfigValue for f64 {
    fn from_config(v: &ConfigValue) -> Option<f64> {
        match v {
            ConfigValue::Float(f) => Some(*f),
            _ => None,
        }
    }
}
impl FromConfigValue for String {
    fn from_config(v: &ConfigValue) -> Option<String> {
        match v {
            ConfigValue::Str(s) => Some(s.clone()),
            _ => None,
        }
    }
}
impl FromConfigValue for ConfigValue {
    fn from_config(v: &ConfigValue) -> Option<ConfigValue> {
        Some(v.clone())
    }
}

/// One registered config key; submit with [`register_config!`](crate::register_config).
#[derive(Debug)]
pub struct ConfigKey {
    /// The key, e.g. `testing.immutable_module`.
    pub key: &'static str,
    /// Its type.
    pub ty: ConfigType,
    /// One line of documentation.
    pub doc: &'static str,
    /// The smallest value an `Int` key accepts (a size or a depth: 0), if restricted. Listed
    /// in [`ConfigKey::doc_with_range`], never as a type of its own.
    pub min: Option<i64>,
}

impl ConfigKey {
    /// The doc line with the range restriction, if any, appended: `… (at least 0)`.
    pub fn doc_with_range(&self) -> String {
        match self.min {
            Some(min) => format!("{} (at least {min})", self.doc),
            None => self.doc.to_string(),
        }
    }
}

inventory::collect!(ConfigKey);

/// Registers a config key with its type and doc line:
/// `register_config!("testing.immutable_module", ConfigType::Bool, "doc");`, and for an `Int`
/// key with a smallest accepted value: `register_config!(KEY, ConfigType::Int, "doc", min = 0);`.
#[macro_export]
macro_rules! register_config {
    ($key:expr, $ty:expr, $doc:expr $(,)?) => {
        $crate::inventory::submit! {
            $crate::transform::ConfigKey { key: $key, ty: $ty, doc: $doc, min: None }
        }
    };
    ($key:expr, $ty:expr, $doc:expr, min = $min:expr $(,)?) => {
        $crate::inventory::submit! {
            $crate::transform::ConfigKey { key: $key, ty: $ty, doc: $doc, min: Some($min) }
        }
    };
}

/// TVM's meaning: the structural hash of a pass's *input* module is taken before the pass and
/// again after it; if the input changed (the pass mutated it in place instead of returning a
/// new module) the pass fails with `Immutable module has been modified in pass: <name>`. A pass
/// that returns a changed new module is fine.
///
/// In passel a pass cannot change its input through safe code: the caller keeps a shared copy
/// (O(1)), and `Module` and `Function` are copy-on-write with no interior mutability — their
/// function list, name index and every function's side tables (spans, constants, call
/// attributes, closures) are `Arc`-shared and copied before any change, and the crate has no
/// `unsafe`. The check therefore guards against `unsafe` code and against interior mutability
/// added to those shared tables later; it costs two structural hashes of the input per pass,
/// and runs every function stage pass by pass.
pub const IMMUTABLE_MODULE: &str = "testing.immutable_module";

crate::register_config!(
    IMMUTABLE_MODULE,
    ConfigType::Bool,
    "fail a pass that changed its input module in place (hashes the input before and after, as TVM does)"
);

/// After every pass call (leaf passes: module and function passes, required dependencies
/// included; a `Sequential`'s output is its last pass's, already checked), verify the output
/// module and fail the call with [`PassError::VerifyEach`](super::PassError::VerifyEach) naming
/// the pass, the first function that does not verify and the verifier's first errors. A
/// function is blamed only when its input verified: a pass is not blamed for IR that was
/// already broken when it got it (an ill-typed input is InferType's to report). Function stages
/// run pass by pass under it (no fusion), and a session verifies each pass's output per
/// function. Off (the default), nothing is verified and nothing is paid.
pub const VERIFY_EACH: &str = "testing.verify_each";

crate::register_config!(
    VERIFY_EACH,
    ConfigType::Bool,
    "verify the IR after every pass and fail naming the pass that broke it (MLIR's --verify-each)"
);

struct Registry {
    keys: BTreeMap<&'static str, &'static ConfigKey>,
    duplicates: Vec<&'static str>,
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut keys = BTreeMap::new();
        let mut duplicates = Vec::new();
        for k in inventory::iter::<ConfigKey> {
            if keys.insert(k.key, k).is_some() {
                duplicates.push(k.key);
            }
        }
        Registry { keys, duplicates }
    })
}

/// Every registered key, sorted by key.
pub fn list_configs() -> Vec<&'static ConfigKey> {
    registry().keys.values().copied().collect()
}

/// Checks one entry against the registry and converts its value to the registered type.
pub fn validate_config(key: &str, value: Option<ConfigValue>) -> Result<ConfigValue, ConfigError> {
    let reg = registry();
    let Some(def) = reg.keys.get(key) else {
        return Err(ConfigError::UnknownKey {
            key: key.to_string(),
            valid: reg.keys.keys().map(|k| k.to_string()).collect(),
            suggestions: crate::suggest(key, reg.keys.keys().copied()).into_iter().map(str::to_string).collect(),
        });
    };
    if reg.duplicates.contains(&def.key) {
        return Err(ConfigError::Duplicate { key: key.to_string() });
    }
    let value = value.ok_or_else(|| ConfigError::MissingValue { key: key.to_string() })?;
    let actual = value.ty().name();
    let value =
        value.coerce(def.ty).ok_or(ConfigError::WrongType { key: key.to_string(), expected: def.ty.name(), actual })?;
    if let (Some(min), ConfigValue::Int(i)) = (def.min, &value) {
        if *i < min {
            return Err(ConfigError::OutOfRange {
                key: key.to_string(),
                value: i.to_string(),
                expected: format!("an {} of at least {min}", def.ty.name()),
            });
        }
    }
    Ok(value)
}

/// Parses a CLI assignment `key=value` (an empty value is a missing value).
pub fn parse_config_assignment(text: &str) -> Result<(String, ConfigValue), ConfigError> {
    let (key, value) = text.split_once('=').ok_or_else(|| ConfigError::BadAssignment { text: text.to_string() })?;
    let key = key.trim();
    let value = value.trim();
    let digits = value.strip_prefix(['-', '+']).unwrap_or(value);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) && value.parse::<i64>().is_err() {
        // An integer too large for 64 bits is not a float.
        return Err(ConfigError::OutOfRange {
            key: key.to_string(),
            value: value.to_string(),
            expected: "a 64-bit int".to_string(),
        });
    }
    let value = (!value.is_empty()).then(|| ConfigValue::parse(value));
    let value = validate_config(key, value)?;
    Ok((key.to_string(), value))
}
