//! The prost types of `onnx.proto` (package `onnx`, from the `onnx` PyPI wheel, Apache-2.0),
//! generated with prost-build 0.14 + protox 0.10 (`bytes` fields as [`bytes::Bytes`], so
//! `raw_data` is a zero-copy slice of the decoded buffer) and committed, so building passel
//! needs neither protoc nor protox. Regenerate with `scripts/gen_onnx_proto.sh`.

#[allow(missing_docs, clippy::all, clippy::pedantic, dead_code, rustdoc::all)]
pub(crate) mod onnx {
    include!("proto/onnx.rs");
}
