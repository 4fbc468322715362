//! Frontends: decoders that turn models written for other frameworks into passel
//! [`Module`](crate::ir::Module)s. Decoding bytes is not IO: the caller (the harness) reads or
//! maps files and hands the bytes over.

pub mod onnx;
