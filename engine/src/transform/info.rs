//! `PassInfo`: the static description of a pass (name, opt level, required passes).

/// The name, minimum opt level and required passes of a pass.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassInfo {
    /// The TVM-style name, e.g. `FoldConstant`.
    pub name: String,
    /// The lowest context opt level at which a `Sequential` runs the pass.
    pub opt_level: u32,
    /// Registry names of passes a `Sequential` runs right before this one.
    pub required: Vec<String>,
}

impl PassInfo {
    /// Info with no required passes.
    pub fn new(name: impl Into<String>, opt_level: u32) -> PassInfo {
        PassInfo { name: name.into(), opt_level, required: Vec::new() }
    }

    /// Builder form: sets the required passes.
    pub fn with_required(mut self, required: &[&str]) -> PassInfo {
        self.required = required.iter().map(|s| s.to_string()).collect();
        self
    }
}
