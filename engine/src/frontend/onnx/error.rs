//! The importer's errors, one enum per layer: [`ImportError`] for a model (what and where:
//! the node, graph input or tensor), [`NodeError`] for what is wrong with one node,
//! [`EmitError`] for an operator call the emitter refuses, [`TensorProtoError`] for a
//! `TensorProto`, [`ExternalDataError`] for an external-data file.
//!
//! Every name or message that comes from the model reaches the text through `shown_name` /
//! `shown_message` (invisible characters escaped, long text cut), at the layer that prints it.

use std::io;
use std::path::PathBuf;

use crate::ir::{TensorError, MAX_MATERIALIZED_ELEMENTS, MAX_RANK};
use crate::op::OpError;
use crate::util::{shown_message, shown_name};

/// One unsupported operator type of a model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsupportedOp {
    /// `Op` for the default domain, `domain::Op` otherwise.
    pub op_type: String,
    /// How many nodes use it.
    pub count: usize,
    /// The first node using it (name, or `Op #index` when unnamed).
    pub first_node: String,
}

/// Why a model cannot be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    /// The bytes are not a ModelProto.
    #[error("not a valid ONNX model: {}", shown_message(.0))]
    Decode(String),
    /// A model-level problem: no graph, no or unsupported default-domain opset.
    #[error("{}", shown_message(.0))]
    Model(String),
    /// Every operator type the importer does not support, in order of first use.
    #[error("unsupported ONNX operators: {}", list_unsupported(.0))]
    Unsupported(Vec<UnsupportedOp>),
    /// A problem with one node.
    #[error("node {}: {}", shown_name(node), shown_message(&error.to_string()))]
    Node {
        /// The node (name, or `Op #index` when unnamed).
        node: String,
        /// What is wrong.
        error: NodeError,
    },
    /// A problem with a graph input.
    #[error("graph input `{}`: {}", shown_name(input), shown_message(msg))]
    Input {
        /// The input's name.
        input: String,
        /// What is wrong.
        msg: String,
    },
    /// A problem with an initializer or constant tensor.
    #[error("tensor `{}`: {}", shown_name(name), shown_message(&error.to_string()))]
    Tensor {
        /// The tensor's name.
        name: String,
        /// What is wrong.
        error: TensorProtoError,
    },
    /// A problem with the graph's structure (names, cycles, outputs).
    #[error("graph: {}", shown_message(.0))]
    Graph(String),
}

fn list_unsupported(ops: &[UnsupportedOp]) -> String {
    ops.iter()
        .map(|u| {
            format!(
                "{} ({} node{}, first `{}`)",
                shown_name(&u.op_type),
                u.count,
                if u.count == 1 { "" } else { "s" },
                shown_name(&u.first_node)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What is wrong with one node (the node itself is named by [`ImportError::Node`]).
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// More inputs than the operator's ONNX schema takes at the model's opset.
    #[error("has {found} inputs, but `{op}` (opset {opset}) takes at most {max}")]
    TooManyInputs {
        /// The node's input count.
        found: usize,
        /// The operator.
        op: String,
        /// The model's default-domain opset.
        opset: i64,
        /// The schema's most inputs.
        max: usize,
    },
    /// A required input is absent (empty name or too few inputs).
    #[error("input {0} is missing")]
    MissingInput(usize),
    /// An input that fixes a shape or a constant table is not known at import.
    #[error("input {index} ({what}) must be known at import (a constant or foldable {kind})")]
    NotConstant {
        /// The input's position.
        index: usize,
        /// What the input is (`shape`, `axes`, …).
        what: String,
        /// `shape expression` for integer inputs, `expression` for float ones.
        kind: &'static str,
    },
    /// An attribute of the wrong kind (`want` is "an int", "a list of floats", …).
    #[error("attribute `{attr}` must be {want}")]
    AttributeKind {
        /// The attribute.
        attr: String,
        /// The kind it must have.
        want: &'static str,
    },
    /// A string attribute that is not UTF-8.
    #[error("attribute `{0}` is not UTF-8")]
    AttributeNotUtf8(String),
    /// An attribute the converter does not read (it would be silently ignored).
    #[error("attribute `{0}` is not handled by the importer")]
    UnhandledAttribute(String),
    /// An attribute value the importer does not support.
    #[error("attribute `{attr}` = {value} is not supported ({why})")]
    UnsupportedValue {
        /// The attribute.
        attr: String,
        /// Its value, as written in the message.
        value: String,
        /// Why, or what is supported.
        why: String,
    },
    /// A tensor attribute that does not convert.
    #[error("attribute `{attr}`: {error}")]
    AttributeTensor {
        /// The attribute.
        attr: String,
        /// What is wrong with its tensor.
        error: TensorProtoError,
    },
    /// An output of a type the text format cannot hold.
    #[error("output `{output}` {error}")]
    Output {
        /// The output's name.
        output: String,
        /// What the text format cannot hold.
        error: Unrepresentable,
    },
    /// An output that is used but that passel does not compute (a training statistic).
    #[error("output `{output}` ({}) is not computed by the importer", match user { Some(u) => format!("used by node {u}"), None => "a graph output".to_string() })]
    NotComputed {
        /// The output's name.
        output: String,
        /// The first node using it, or `None` when it is a graph output.
        user: Option<String>,
    },
    /// The graph structure around the node: a name defined twice, an undefined input, a cycle,
    /// subgraphs nested too deep.
    #[error("{0}")]
    Structure(String),
    /// An error inside one of the node's graph attributes.
    #[error("in its `{attr}`: {error}")]
    Subgraph {
        /// The graph attribute (`then_branch`, `body`, …).
        attr: String,
        /// The error inside it.
        error: Box<ImportError>,
    },
    /// The emitter refused one of the operator calls the node converts to.
    #[error(transparent)]
    Emit(#[from] EmitError),
    /// An input constant could not be read.
    #[error(transparent)]
    Constant(#[from] TensorError),
    /// A dtype attribute that names no passel dtype.
    #[error(transparent)]
    Dtype(#[from] TensorProtoError),
    /// A value the node's operator does not accept (a converter's own check: shapes, attribute
    /// ranges, dtypes), described in the converter's words.
    #[error("{0}")]
    Invalid(String),
}

impl From<String> for NodeError {
    fn from(msg: String) -> Self {
        NodeError::Invalid(msg)
    }
}

impl From<&str> for NodeError {
    fn from(msg: &str) -> Self {
        NodeError::Invalid(msg.to_string())
    }
}

/// An operator call the importer's emitter cannot make.
#[derive(Debug, thiserror::Error)]
pub enum EmitError {
    /// No passel operator of that name (an importer bug, reported rather than hidden).
    #[error("passel has no operator `{0}`")]
    NoOperator(String),
    /// The operator's attribute schema refuses the attributes.
    #[error("{0}")]
    Attrs(String),
    /// The operator's type relation or its kernel (folding at import) refuses the arguments.
    #[error(transparent)]
    Op(#[from] OpError),
    /// A constant argument could not be read.
    #[error(transparent)]
    Constant(#[from] TensorError),
    /// Evaluating the call at import ([`crate::op::evaluate`]) found it wrong: its results are
    /// not what the type relation promised, or they do not fit in memory.
    #[error(transparent)]
    Fold(crate::op::CallError),
    /// The result is not what a converter can bind: no value, several where one was wanted, or
    /// a nested tuple.
    #[error("`{op}` {what}")]
    Result {
        /// The operator.
        op: String,
        /// What is wrong with its result.
        what: String,
    },
}

/// A type passel's text format cannot hold.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Unrepresentable {
    /// Rank above [`MAX_RANK`].
    #[error("has rank {0}, more than passel's limit of {MAX_RANK}")]
    Rank(usize),
    /// More elements than fit `u64`.
    #[error("shape {0:?} has more elements than fit in 64 bits")]
    Elements(Vec<u64>),
}

/// What is wrong with a `TensorProto` (an initializer, a Constant's value, a tensor attribute).
#[derive(Debug, thiserror::Error)]
pub enum TensorProtoError {
    /// An element type passel has no dtype for.
    #[error(
        "element type {0} is not supported (passel has float32, float16, float64, int8 to int64, uint8 to uint64 and bool)"
    )]
    Dtype(String),
    /// Rank above [`MAX_RANK`].
    #[error("has rank {0}, more than passel's limit of {MAX_RANK}")]
    Rank(usize),
    /// A negative dimension.
    #[error("has negative dimension {0}")]
    NegativeDim(i64),
    /// Dimensions whose product overflows.
    #[error("dimensions {0:?} overflow")]
    Overflow(Vec<i64>),
    /// More elements than passel materializes.
    #[error("has {0} elements, more than passel's limit of {MAX_MATERIALIZED_ELEMENTS}")]
    TooLarge(u64),
    /// A second initializer of the same name.
    #[error("is defined twice")]
    Duplicate,
    /// `segment` is set.
    #[error("segmented tensors are not supported")]
    Segmented,
    /// A typed repeated field with the wrong number of values.
    #[error("shape {shape:?} needs {needed} values, `{field}` has {found}")]
    Count {
        /// The tensor's shape.
        shape: Vec<u64>,
        /// Its element count.
        needed: u64,
        /// The field (`float_data`, `int64_data`, …).
        field: &'static str,
        /// The values it has.
        found: usize,
    },
    /// Bytes that do not decode to the tensor's type.
    #[error(transparent)]
    Bytes(#[from] TensorError),
    /// An `external_data` entry that does not parse.
    #[error("bad external {key} `{value}`")]
    ExternalField {
        /// `offset` or `length`.
        key: &'static str,
        /// The value written.
        value: String,
    },
    /// An `external_data` key ONNX does not define.
    #[error("unknown external-data key `{0}`")]
    ExternalKey(String),
    /// External data without a `location`.
    #[error("external data has no location")]
    NoLocation,
    /// External data, but the caller gave no reader.
    #[error("is stored in external file `{0}` but no external-data reader was given")]
    NoReader(String),
    /// The reader could not provide the file.
    #[error("external data `{location}`: {error}")]
    External {
        /// The `location` entry.
        location: String,
        /// Why the file could not be read.
        error: ExternalDataError,
    },
    /// `offset` / `length` outside the file.
    #[error("external data `{location}`: range {offset}+{length:?} is outside the file ({len} bytes)")]
    Range {
        /// The `location` entry.
        location: String,
        /// The `offset` entry (0 when absent).
        offset: u64,
        /// The `length` entry.
        length: Option<u64>,
        /// The file's size.
        len: u64,
    },
}

/// Why an external-data file cannot be read ([`ExternalData::load`](super::ExternalData::load)).
#[derive(Debug, thiserror::Error)]
pub enum ExternalDataError {
    /// An absolute location, one with `..`, or an empty one.
    #[error("the location must be a relative path inside the model's folder (no `..`, no absolute path)")]
    NotRelative,
    /// The location resolves (through symlinks) outside the model's folder.
    #[error("resolves to {}, outside the model's folder", .0.display())]
    Outside(PathBuf),
    /// The model's folder cannot be resolved.
    #[error("cannot resolve the model's folder: {0}")]
    Folder(io::Error),
    /// The file does not exist or cannot be resolved.
    #[error("cannot open {}: {source}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The file cannot be read (or is not a regular file).
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// A reader of the caller's own refused the location.
    #[error("{}", shown_message(.0))]
    Other(String),
}
