//! Attribute values of operator calls and functions.

use std::fmt;
use std::sync::Arc;

use super::ty::DType;

/// One attribute value. Equality and hashing compare floats by their bits, so a NaN
/// attribute equals itself (as constants do) and `-0.0` differs from `0.0`.
#[derive(Clone, Debug)]
pub enum AttrValue {
    /// Boolean (`true` / `false`).
    Bool(bool),
    /// Integer.
    Int(i64),
    /// Float.
    Float(f64),
    /// String (`"…"`).
    Str(Arc<str>),
    /// List of integers (`[1, 2]`), e.g. axes, shapes, strides.
    Ints(Arc<[i64]>),
    /// Element type, e.g. a cast target.
    DType(DType),
}

impl AttrValue {
    /// Name of the value's kind, for error messages.
    pub fn kind_name(&self) -> &'static str {
        match self {
            AttrValue::Bool(_) => "bool",
            AttrValue::Int(_) => "int",
            AttrValue::Float(_) => "float",
            AttrValue::Str(_) => "str",
            AttrValue::Ints(_) => "ints",
            AttrValue::DType(_) => "dtype",
        }
    }

    /// The integer, if this is one (a bool counts as 0/1).
    pub fn as_int(&self) -> Option<i64> {
        match *self {
            AttrValue::Int(v) => Some(v),
            AttrValue::Bool(b) => Some(b as i64),
            _ => None,
        }
    }

    /// The float, if this is a number.
    pub fn as_float(&self) -> Option<f64> {
        match *self {
            AttrValue::Float(v) => Some(v),
            AttrValue::Int(v) => Some(v as f64),
            _ => None,
        }
    }

    /// The integers, if this is an integer list.
    pub fn as_ints(&self) -> Option<&[i64]> {
        match self {
            AttrValue::Ints(v) => Some(v),
            _ => None,
        }
    }

    fn key(&self) -> (u8, u64, Option<&str>, Option<&[i64]>) {
        match self {
            AttrValue::Bool(b) => (0, *b as u64, None, None),
            AttrValue::Int(v) => (1, *v as u64, None, None),
            AttrValue::Float(v) => (2, v.to_bits(), None, None),
            AttrValue::Str(s) => (3, 0, Some(s), None),
            AttrValue::Ints(v) => (4, 0, None, Some(v)),
            AttrValue::DType(d) => (5, *d as u64, None, None),
        }
    }
}

impl PartialEq for AttrValue {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for AttrValue {}

impl std::hash::Hash for AttrValue {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.key().hash(state)
    }
}

impl fmt::Display for AttrValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AttrValue::Bool(b) => write!(f, "{b}"),
            AttrValue::Int(v) => write!(f, "{v}"),
            AttrValue::Float(v) => write!(f, "{}", FloatLit(*v)),
            AttrValue::Str(s) => write!(f, "{s:?}"),
            AttrValue::Ints(v) => {
                f.write_str("[")?;
                for (i, x) in v.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{x}")?;
                }
                f.write_str("]")
            }
            AttrValue::DType(d) => write!(f, "{d}"),
        }
    }
}

/// Formats an f64 so that it always reads back as a float and round-trips bit for bit:
/// `1.0`, `-0.5`, `1e-8`, `inf`, `-inf`, `nan` (the canonical quiet NaN), and any other NaN
/// as its 16-digit bit pattern `0x7ff8000000000001` (as MLIR prints floats that have no
/// decimal form).
pub struct FloatLit(pub f64);

impl fmt::Display for FloatLit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        if v.is_nan() {
            if v.to_bits() == f64::NAN.to_bits() {
                f.write_str("nan")
            } else {
                write!(f, "0x{:016x}", v.to_bits())
            }
        } else if v.is_infinite() {
            f.write_str(if v > 0.0 { "inf" } else { "-inf" })
        } else {
            // `{:?}` is Rust's shortest round-trip representation and always has a `.` or `e`.
            write!(f, "{v:?}")
        }
    }
}

/// A sorted list of named attributes. Keys are unique and sorted, so equal attribute sets
/// compare and print equal.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Attrs(Vec<(Arc<str>, AttrValue)>);

impl Attrs {
    /// No attributes.
    pub fn new() -> Attrs {
        Attrs(Vec::new())
    }

    /// Sets `key` to `value`, replacing any previous value.
    pub fn set(&mut self, key: &str, value: AttrValue) {
        match self.0.binary_search_by(|(k, _)| (**k).cmp(key)) {
            Ok(i) => self.0[i].1 = value,
            Err(i) => self.0.insert(i, (key.into(), value)),
        }
    }

    /// The attribute list of `entries`, given in any order, built with one sort (O(n log n);
    /// setting keys one by one is a sorted insert each, quadratic in the number of keys).
    /// A key given more than once keeps its last value, as repeated [`Attrs::set`] calls
    /// would; the second value returned lists the indices into `entries` of those later
    /// occurrences, ascending, so that a parser can report them in source order.
    pub fn from_entries(entries: Vec<(Arc<str>, AttrValue)>) -> (Attrs, Vec<usize>) {
        // Printed attributes are sorted: take them as they are.
        if entries.windows(2).all(|w| w[0].0 < w[1].0) {
            return (Attrs(entries), Vec::new());
        }
        sorted_unique(entries, |a, b| a.cmp(b))
    }

    /// Builder form of [`Attrs::set`].
    pub fn with(mut self, key: &str, value: AttrValue) -> Attrs {
        self.set(key, value);
        self
    }

    /// The value of `key`.
    pub fn get(&self, key: &str) -> Option<&AttrValue> {
        self.0.binary_search_by(|(k, _)| (**k).cmp(key)).ok().map(|i| &self.0[i].1)
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<AttrValue> {
        match self.0.binary_search_by(|(k, _)| (**k).cmp(key)) {
            Ok(i) => Some(self.0.remove(i).1),
            Err(_) => None,
        }
    }

    /// Whether `key` is present.
    pub fn contains(&self, key: &str) -> bool {
        self.get(key).is_some()
    }

    /// Whether `key` is present and true (a flag such as `SkipOptimization`).
    pub fn flag(&self, key: &str) -> bool {
        matches!(self.get(key), Some(AttrValue::Bool(true)) | Some(AttrValue::Int(1..)))
    }

    /// Entries in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &AttrValue)> {
        self.0.iter().map(|(k, v)| (&**k, v))
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// [`Attrs::from_entries`] with the key comparison given, so that a test can count the
/// comparisons.
fn sorted_unique(
    entries: Vec<(Arc<str>, AttrValue)>,
    mut cmp: impl FnMut(&str, &str) -> std::cmp::Ordering,
) -> (Attrs, Vec<usize>) {
    let mut indexed: Vec<(usize, (Arc<str>, AttrValue))> = entries.into_iter().enumerate().collect();
    // Stable, so equal keys stay in the order given and the last of each run is the last given.
    indexed.sort_by(|(_, (a, _)), (_, (b, _))| cmp(a, b));
    let mut out: Vec<(Arc<str>, AttrValue)> = Vec::with_capacity(indexed.len());
    let mut repeats = Vec::new();
    for (i, (key, value)) in indexed {
        match out.last_mut() {
            Some(last) if cmp(&last.0, &key).is_eq() => {
                repeats.push(i);
                last.1 = value;
            }
            _ => out.push((key, value)),
        }
    }
    repeats.sort_unstable();
    (Attrs(out), repeats)
}

/// Well-known function attribute keys.
pub mod fn_attr {
    /// Function passes leave this function alone.
    pub const SKIP_OPTIMIZATION: &str = "SkipOptimization";
    /// A fused kernel produced by FuseOps.
    pub const PRIMITIVE: &str = "Primitive";
    /// Inline passes inline calls to this function.
    pub const INLINE: &str = "Inline";
    /// An entry point kept by dead-code elimination (besides `@main`).
    pub const EXPORTED: &str = "Exported";
    /// Every well-known function attribute name (the parser flags near-misses of these).
    pub const ALL: [&str; 4] = [SKIP_OPTIMIZATION, PRIMITIVE, INLINE, EXPORTED];
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hash_of(v: &AttrValue) -> u64 {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        BuildHasherDefault::<DefaultHasher>::default().hash_one(v)
    }

    #[test]
    fn nan_float_attribute_equals_itself() {
        let nan = AttrValue::Float(f64::NAN);
        assert_eq!(nan, nan.clone());
        assert_eq!(hash_of(&nan), hash_of(&nan.clone()));
        let attrs = Attrs::new().with("alpha", nan);
        assert_eq!(attrs, attrs.clone());
    }

    #[test]
    fn attrs_from_entries_sorts_once_keeps_last_value_and_reports_repeats() {
        let entries: Vec<(Arc<str>, AttrValue)> = [("b", 1), ("a", 2), ("b", 3), ("c", 4), ("b", 5)]
            .into_iter()
            .map(|(k, v)| (k.into(), AttrValue::Int(v)))
            .collect();
        let (attrs, repeats) = Attrs::from_entries(entries.clone());
        let mut by_set = Attrs::new();
        for (k, v) in entries {
            by_set.set(&k, v);
        }
        assert_eq!(attrs, by_set);
        assert_eq!(attrs.get("b"), Some(&AttrValue::Int(5)));
        assert_eq!(repeats, vec![2, 4]);
    }

    /// 200,000 keys given in reverse order (the worst case for sorted inserts, each of which
    /// moved every entry after it: 2·10^10 moves) build with n·log n comparisons.
    #[test]
    fn attrs_from_entries_is_n_log_n_on_a_large_list() {
        let n = 200_000usize;
        let entries: Vec<(Arc<str>, AttrValue)> =
            (0..n).rev().map(|i| (format!("k{i:06}").into(), AttrValue::Int(i as i64))).collect();
        let mut comparisons = 0u64;
        let (attrs, repeats) = sorted_unique(entries, |a, b| {
            comparisons += 1;
            a.cmp(b)
        });
        assert!(repeats.is_empty());
        assert_eq!(attrs.len(), n);
        assert!(attrs.iter().map(|(k, _)| k).collect::<Vec<_>>().windows(2).all(|w| w[0] < w[1]));
        assert_eq!(attrs.get("k123456"), Some(&AttrValue::Int(123_456)));
        let bound = 2 * n as u64 * (n as f64).log2().ceil() as u64;
        assert!(comparisons <= bound, "{comparisons} comparisons for {n} keys (bound {bound})");
    }

    #[test]
    fn float_attribute_equality_is_bitwise() {
        assert_ne!(AttrValue::Float(0.0), AttrValue::Float(-0.0));
        assert_eq!(AttrValue::Float(0.5), AttrValue::Float(0.5));
        assert_ne!(AttrValue::Float(1.0), AttrValue::Int(1));
        assert_ne!(AttrValue::Int(1), AttrValue::Bool(true));
        assert_eq!(AttrValue::Ints(vec![1, 2].into()), AttrValue::Ints(vec![1, 2].into()));
        assert_ne!(AttrValue::Str("a".into()), AttrValue::Str("b".into()));
    }
}
