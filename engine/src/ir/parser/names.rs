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
    let n = b.len();
    // Two overlapping loads instead of a byte loop (a variable-length `copy_from_slice`
    // would be a `memcpy` call): bytes 0..4 and n-4..n, or 0, n/2 and n-1 for short texts.
    let w = match n {
        0 => 0,
        1..=3 => u64::from(b[0]) | u64::from(b[n / 2]) << (8 * (n / 2)) | u64::from(b[n - 1]) << (8 * (n - 1)),
        4..=8 => {
            let lo = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
            let hi = u32::from_le_bytes([b[n - 4], b[n - 3], b[n - 2], b[n - 1]]);
            u64::from(lo) | u64::from(hi) << (8 * (n - 4))
        }
        _ => return None,
    };
    // A NUL byte among the first `n`: the padding is set to 0xff so that only a NUL in the
    // text has a zero byte (the classic "has a zero byte" test).
    let padded = if n == 8 { w } else { w | (u64::MAX << (8 * n)) };
    let has_nul = padded.wrapping_sub(0x0101_0101_0101_0101) & !padded & 0x8080_8080_8080_8080 != 0;
    (!has_nul).then_some(w)
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
        let keys = [
            "",
            "a",
            "a0",
            "v1",
            "v10",
            "v100",
            "v1000",
            "multiply",
            "multiply2",
            "abcdefgh",
            "abcdefghi",
            "abcdefg",
            "0.5f",
            "0.5",
            "ab",
            "ba",
            "abc",
            "acb",
        ];
        let mut m = NameMap::default();
        for (i, k) in keys.iter().enumerate() {
            assert!(m.insert_new(k, i).is_none(), "{k} is new");
        }
        for (i, k) in keys.iter().enumerate() {
            assert_eq!(m.get(k), Some(&i), "{k}");
            assert_eq!(m.insert_new(k, 99), Some(&i), "{k} is present");
        }
        assert_eq!(m.get("v10000"), None);
        assert_eq!(m.get("bc"), None);
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
        m.insert("\0a", 3);
        m.insert("abcd\0fg", 4);
        m.insert("abcd", 5);
        assert_eq!(m.get("a"), Some(&1));
        assert_eq!(m.get("a\0"), Some(&2));
        assert_eq!(m.get("\0a"), Some(&3));
        assert_eq!(m.get("abcd\0fg"), Some(&4));
        assert_eq!(m.get("abcd"), Some(&5));
    }
}
