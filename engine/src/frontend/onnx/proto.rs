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

    /// A string field of a node: `len` bytes at `start` of the node's encoding.
    #[derive(Clone, Copy, Debug, Default)]
    struct Field {
        start: u32,
        len: u32,
    }

    /// The fields of a `NodeProto` that ordering and checking the graph need (not its
    /// attributes): 24 bytes of positions, plus one [`Field`] per input and output in
    /// [`Nodes::io`].
    #[derive(Clone, Copy, Debug)]
    struct Header {
        name: Field,
        op_type: Field,
        domain: Field,
        /// Where the inputs, then the outputs, start in [`Nodes::io`].
        io: u32,
        n_inputs: u32,
        n_outputs: u32,
    }

    /// A graph's nodes: each node's encoding (a slice of the model's buffer) and its header,
    /// decoded by hand into positions within that encoding, so a node costs one [`Bytes`],
    /// a 36-byte header and 8 bytes per input and output, with no allocation of its own (a
    /// prost-decoded header was 144 bytes plus two vectors of 32-byte slices). The strings are
    /// checked to be UTF-8 once, when decoded.
    #[derive(Debug, Default)]
    pub(crate) struct Nodes {
        encoded: Vec<Bytes>,
        headers: Vec<Header>,
        io: Vec<Field>,
    }

    /// Why a node's header does not decode.
    #[derive(Debug)]
    pub(crate) struct HeaderError(String);

    impl std::fmt::Display for HeaderError {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(&self.0)
        }
    }

    impl From<prost::DecodeError> for HeaderError {
        fn from(e: prost::DecodeError) -> Self {
            HeaderError(e.to_string())
        }
    }

    impl Nodes {
        /// Decodes the header of every node of `encoded`; an error names the node's index.
        pub(crate) fn decode(encoded: Vec<Bytes>) -> Result<Nodes, (usize, HeaderError)> {
            let mut headers = Vec::with_capacity(encoded.len());
            let mut io = Vec::with_capacity(2 * encoded.len());
            let mut outputs = Vec::new();
            for (idx, node) in encoded.iter().enumerate() {
                headers.push(decode_header(node, &mut io, &mut outputs).map_err(|e| (idx, e))?);
            }
            Ok(Nodes { encoded, headers, io })
        }

        /// The number of nodes.
        pub(crate) fn len(&self) -> usize {
            self.headers.len()
        }

        /// Node `idx`.
        pub(crate) fn get(&self, idx: usize) -> NodeHeader<'_> {
            let h = &self.headers[idx];
            NodeHeader { bytes: &self.encoded[idx], h, io: &self.io }
        }

        /// Node `idx`'s encoding (for its attributes).
        pub(crate) fn encoded(&self, idx: usize) -> &Bytes {
            &self.encoded[idx]
        }

        /// The number of input and output slots of all nodes ([`NodeHeader::output_slots`]
        /// indexes a table of this length).
        pub(crate) fn slots(&self) -> usize {
            self.io.len()
        }
    }

    /// Decodes the header of `node`, appending its inputs then its outputs to `io` (`outputs`
    /// is scratch space, as the two may interleave in the encoding).
    fn decode_header(node: &[u8], io: &mut Vec<Field>, outputs: &mut Vec<Field>) -> Result<Header, HeaderError> {
        use prost::encoding::{decode_key, decode_varint, skip_field, DecodeContext, WireType};
        let too_big = || HeaderError("the node is larger than 4 GiB".into());
        if u32::try_from(node.len()).is_err() || u32::try_from(io.len()).is_err() {
            return Err(too_big());
        }
        let first = io.len() as u32;
        let mut h = Header {
            name: Field::default(),
            op_type: Field::default(),
            domain: Field::default(),
            io: first,
            n_inputs: 0,
            n_outputs: 0,
        };
        outputs.clear();
        let mut buf = node;
        while !buf.is_empty() {
            let (tag, wire) = decode_key(&mut buf)?;
            if !matches!(tag, 1 | 2 | 3 | 4 | 7) {
                skip_field(wire, tag, &mut buf, DecodeContext::default())?;
                continue;
            }
            if wire != WireType::LengthDelimited {
                return Err(HeaderError(format!("field {tag} has wire type {wire:?}, expected a string")));
            }
            let len = decode_varint(&mut buf)?;
            let len = usize::try_from(len)
                .ok()
                .filter(|&l| l <= buf.len())
                .ok_or_else(|| HeaderError("buffer underflow".into()))?;
            std::str::from_utf8(&buf[..len]).map_err(|e| HeaderError(format!("invalid string: {e}")))?;
            let field = Field { start: (node.len() - buf.len()) as u32, len: len as u32 };
            buf = &buf[len..];
            match tag {
                1 => io.push(field),
                2 => outputs.push(field),
                3 => h.name = field,
                4 => h.op_type = field,
                _ => h.domain = field,
            }
        }
        h.n_inputs = io.len() as u32 - first;
        h.n_outputs = outputs.len() as u32;
        io.extend_from_slice(outputs);
        u32::try_from(io.len()).map_err(|_| too_big())?;
        Ok(h)
    }

    /// One node's header: `input`, `output`, `name`, `op_type` and `domain` read as `&str`
    /// from the node's encoding.
    #[derive(Clone, Copy, Debug)]
    pub(crate) struct NodeHeader<'a> {
        bytes: &'a [u8],
        h: &'a Header,
        io: &'a [Field],
    }

    impl<'a> NodeHeader<'a> {
        /// Field `f` as text (UTF-8, checked when decoded).
        fn text(&self, f: Field) -> &'a str {
            let (start, end) = (f.start as usize, f.start as usize + f.len as usize);
            std::str::from_utf8(&self.bytes[start..end]).unwrap_or_default()
        }

        /// `input`, in order (`""` for an omitted optional input).
        pub(crate) fn inputs(&self) -> impl Iterator<Item = &'a str> + 'a {
            let me = *self;
            let first = self.h.io as usize;
            self.io[first..first + self.h.n_inputs as usize].iter().map(move |&f| me.text(f))
        }

        /// `output`, in order (`""` for an omitted optional output).
        pub(crate) fn outputs(&self) -> impl Iterator<Item = &'a str> + 'a {
            self.output_slots().map(|(_, o)| o)
        }

        /// `output` with each output's slot: an index, unique over all nodes, of a table of
        /// [`Nodes::slots`] entries.
        pub(crate) fn output_slots(&self) -> impl Iterator<Item = (usize, &'a str)> + 'a {
            let me = *self;
            let first = self.h.io as usize + self.h.n_inputs as usize;
            (first..first + self.h.n_outputs as usize).map(move |slot| (slot, me.text(me.io[slot])))
        }

        /// The number of inputs (omitted ones included).
        pub(crate) fn n_inputs(&self) -> usize {
            self.h.n_inputs as usize
        }

        /// The number of outputs (omitted ones included).
        pub(crate) fn n_outputs(&self) -> usize {
            self.h.n_outputs as usize
        }

        /// `name`.
        pub(crate) fn name(&self) -> &'a str {
            self.text(self.h.name)
        }

        /// `op_type`.
        pub(crate) fn op_type(&self) -> &'a str {
            self.text(self.h.op_type)
        }

        /// `domain`.
        pub(crate) fn domain(&self) -> &'a str {
            self.text(self.h.domain)
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
