//! The prost types of `onnx.proto` (package `onnx`, from the `onnx` PyPI wheel, Apache-2.0),
//! generated with prost-build 0.14 + protox 0.10 (`bytes` fields as [`bytes::Bytes`], so
//! `raw_data` is a zero-copy slice of the decoded buffer) and committed, so building passel
//! needs neither protoc nor protox. Regenerate with `scripts/gen_onnx_proto.sh`.
//!
//! [`shallow`] holds hand-written views over the same wire format that leave parts encoded,
//! so the importer decodes one node or initializer at a time instead of the whole model.

#[allow(missing_docs, clippy::all, clippy::pedantic, dead_code, rustdoc::all)]
pub(crate) mod onnx {
    include!("proto/onnx.rs");
}

/// Partial views of ONNX messages (same field tags as `onnx.proto`; prost skips the fields a
/// view does not declare). Decoding a model through [`shallow::Model`] keeps each node and
/// initializer as a [`Bytes`](bytes::Bytes) slice of the model's buffer: the importer decodes
/// one at a time, converts it and drops it, so the decoded protobuf never exists whole (on a
/// model whose weights are `Constant` nodes it was several times the weights).
pub(crate) mod shallow {
    use bytes::Bytes;

    use super::onnx::{AttributeProto, OperatorSetIdProto, ValueInfoProto};

    /// `ModelProto`: the opsets and the graph.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Model {
        /// `opset_import`.
        #[prost(message, repeated, tag = "8")]
        pub opset_import: Vec<OperatorSetIdProto>,
        /// `graph`.
        #[prost(message, optional, tag = "7")]
        pub graph: Option<Graph>,
    }

    /// `GraphProto` with its nodes and initializers still encoded.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct Graph {
        /// `node`: each an encoded `NodeProto`.
        #[prost(bytes = "bytes", repeated, tag = "1")]
        pub node: Vec<Bytes>,
        /// `initializer`: each an encoded `TensorProto`.
        #[prost(bytes = "bytes", repeated, tag = "5")]
        pub initializer: Vec<Bytes>,
        /// `sparse_initializer`: each an encoded `SparseTensorProto` (only counted).
        #[prost(bytes = "bytes", repeated, tag = "15")]
        pub sparse_initializer: Vec<Bytes>,
        /// `input`.
        #[prost(message, repeated, tag = "11")]
        pub input: Vec<ValueInfoProto>,
        /// `output`.
        #[prost(message, repeated, tag = "12")]
        pub output: Vec<ValueInfoProto>,
    }

    /// The fields of a `NodeProto` that ordering and checking the graph need (not its
    /// attributes). The strings are slices of the model's buffer (no allocation per name),
    /// checked to be UTF-8 by [`NodeHeader::check_utf8`] after decoding; the accessors read
    /// them as `&str`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct NodeHeader {
        /// `input`.
        #[prost(bytes = "bytes", repeated, tag = "1")]
        pub input: Vec<Bytes>,
        /// `output`.
        #[prost(bytes = "bytes", repeated, tag = "2")]
        pub output: Vec<Bytes>,
        /// `name`.
        #[prost(bytes = "bytes", tag = "3")]
        pub name: Bytes,
        /// `op_type`.
        #[prost(bytes = "bytes", tag = "4")]
        pub op_type: Bytes,
        /// `domain`.
        #[prost(bytes = "bytes", tag = "7")]
        pub domain: Bytes,
    }

    /// `b` as text; empty if it is not UTF-8 (never after [`NodeHeader::check_utf8`]).
    fn text(b: &Bytes) -> &str {
        std::str::from_utf8(b).unwrap_or_default()
    }

    impl NodeHeader {
        /// Errors if a string field is not UTF-8 (protobuf strings must be).
        pub(crate) fn check_utf8(&self) -> Result<(), std::str::Utf8Error> {
            for b in self.input.iter().chain(&self.output).chain([&self.name, &self.op_type, &self.domain]) {
                std::str::from_utf8(b)?;
            }
            Ok(())
        }

        /// `input`, in order (`""` for an omitted optional input).
        pub(crate) fn inputs(&self) -> impl Iterator<Item = &str> {
            self.input.iter().map(text)
        }

        /// `output`, in order (`""` for an omitted optional output).
        pub(crate) fn outputs(&self) -> impl Iterator<Item = &str> {
            self.output.iter().map(text)
        }

        /// `name`.
        pub(crate) fn name(&self) -> &str {
            text(&self.name)
        }

        /// `op_type`.
        pub(crate) fn op_type(&self) -> &str {
            text(&self.op_type)
        }

        /// `domain`.
        pub(crate) fn domain(&self) -> &str {
            text(&self.domain)
        }
    }

    /// A `NodeProto`'s attributes (the rest of it is in [`NodeHeader`]).
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct NodeBody {
        /// `attribute`.
        #[prost(message, repeated, tag = "5")]
        pub attribute: Vec<AttributeProto>,
    }

    /// A `NodeProto`'s attributes, seen only for their tensors' packed `float_data`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct NodeTensors {
        /// `attribute`.
        #[prost(message, repeated, tag = "5")]
        pub attribute: Vec<AttributeTensor>,
    }

    /// An `AttributeProto`'s tensor `t`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct AttributeTensor {
        /// `t`.
        #[prost(message, optional, tag = "5")]
        pub t: Option<PackedFloats>,
    }

    /// A `TensorProto`'s `float_data` in its packed encoding: each packed run as a slice of
    /// the buffer (the little-endian `f32`s themselves, as in `raw_data`). A tensor whose
    /// `float_data` is written unpacked does not decode as this view.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(crate) struct PackedFloats {
        /// `float_data`, one slice per packed run.
        #[prost(bytes = "bytes", repeated, tag = "4")]
        pub float_data: Vec<Bytes>,
    }
}
