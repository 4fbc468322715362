//! A map keyed by token text that is cheap for short keys.
//!
//! The parser looks up every variable use, every definition, every operator name and every
//! scalar literal by its text. Such texts are short and never contain a NUL byte, so a text
//! of at most 8 bytes, zero-padded into a `u64`, identifies it exactly: hashing is one
//! multiplication and comparing is one integer comparison instead of a `memcmp` call. Longer
//! texts go to an ordinary string map. The map is never iterated, so its order cannot leak
//! into any output.

use super::FxMap;

/// The zero-padded little-endian packing of `s`, if it has at most 8 bytes and no NUL byte
/// (so that different texts never pack alike).
#[inline]
fn pack(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    if b.len() > 8 {
        return None;
    }
    // A byte loop: a variable-length `copy_from_slice` would be a `memcpy` call.
    let mut w = 0u64;
    for (i, &c) in b.iter().enumerate() {
        if c == 0 {
            return None;
        }
        w |= u64::from(c) << (8 * i);
    }
    Some(w)
}

/// A map from token text to `V`.
pub(super) struct NameMap<'s, V> {
    short: FxMap<u64, V>,
    long: FxMap<&'s str, V>,
}

impl<'s, V> Default for NameMap<'s, V> {
    fn default() -> Self {
        NameMap { short: FxMap::default(), long: FxMap::default() }
    }
}

impl<'s, V> NameMap<'s, V> {
    #[inline]
    pub fn get(&self, key: &str) -> Option<&V> {
        match pack(key) {
            Some(k) => self.short.get(&k),
            None => self.long.get(key),
        }
    }

    /// Inserts `value` unless `key` is present; returns the value present before, if any.
    #[inline]
    pub fn insert_new(&mut self, key: &'s str, value: V) -> Option<&V> {
        use std::collections::hash_map::Entry;
        match pack(key) {
            Some(k) => match self.short.entry(k) {
                Entry::Occupied(e) => Some(e.into_mut()),
                Entry::Vacant(e) => {
                    e.insert(value);
                    None
                }
            },
            None => match self.long.entry(key) {
                Entry::Occupied(e) => Some(e.into_mut()),
                Entry::Vacant(e) => {
                    e.insert(value);
                    None
                }
            },
        }
    }

    /// Inserts or replaces.
    #[inline]
    pub fn insert(&mut self, key: &'s str, value: V) {
        match pack(key) {
            Some(k) => {
                self.short.insert(k, value);
            }
            None => {
                self.long.insert(key, value);
            }
        }
    }

    pub fn clear(&mut self) {
        self.short.clear();
        self.long.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn name_map_tells_short_long_and_prefix_keys_apart() {
        let keys = ["", "a", "a0", "v1", "v10", "multiply", "multiply2", "abcdefgh", "abcdefghi", "0.5f", "0.5"];
        let mut m = NameMap::default();
        for (i, k) in keys.iter().enumerate() {
            assert!(m.insert_new(k, i).is_none(), "{k} is new");
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(m.get(k), Some(&i), "{k}");
            assert_eq!(m.insert_new(k, 99), Some(&i), "{k} is present");
        }
        assert_eq!(m.get("v100"), None);
        assert_eq!(m.get("abcdefghij"), None);
        m.insert("v1", 7);
        assert_eq!(m.get("v1"), Some(&7));
        m.clear();
        assert_eq!(m.get("a"), None);
        assert_eq!(m.get("multiply2"), None);
    }

    #[test]
    fn name_map_keeps_texts_with_nul_bytes_apart() {
        let mut m = NameMap::default();
        m.insert("a", 1);
        m.insert("a\0", 2);
        assert_eq!(m.get("a"), Some(&1));
        assert_eq!(m.get("a\0"), Some(&2));
    }
}
