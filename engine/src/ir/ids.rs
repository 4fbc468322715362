//! Entity ids of the IR: `u32` newtypes addressing per-function tables, as in cranelift.

use std::fmt;

/// A node of a function's arena. `Display` is its text syntax, `%12`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The arena index of this node.
    #[inline]
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for NodeId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "%{}", self.0)
    }
}

/// A run of ids in a function's `extra` table (call arguments, tuple fields, bindings).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug, Default)]
pub struct IdRange {
    /// First index into the extra table.
    pub start: u32,
    /// Number of entries.
    pub len: u32,
}

impl IdRange {
    /// The range as `usize` bounds.
    #[inline]
    pub fn as_range(self) -> std::ops::Range<usize> {
        self.start as usize..(self.start + self.len) as usize
    }
}

/// An interned string of one function (variable and global names).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct Sym(pub u32);

/// An index into a function's constant table.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ConstIdx(pub u32);

/// An index into a function's call-attribute table.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct AttrsIdx(pub u32);

/// An index into a function's table of nested functions.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub struct ClosureIdx(pub u32);

/// An operator: an index into the global operator registry (`crate::op::registry`).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
pub struct OpId(pub u16);
