#!/bin/sh
# Regenerates engine/src/frontend/onnx/proto/onnx.rs from onnx.proto (next to it) with
# prost-build 0.14 and protox 0.10 (pure Rust, no protoc), in a throwaway crate.
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/src"
cp "$root/engine/src/frontend/onnx/proto/onnx.proto" "$dir/"
cat > "$dir/Cargo.toml" <<'TOML'
[package]
name = "onnxgen"
version = "0.1.0"
edition = "2021"
[dependencies]
prost-build = "0.14"
protox = "0.10"
TOML
cat > "$dir/src/main.rs" <<'RS'
fn main() {
    let fds = protox::compile(["onnx.proto"], ["."]).expect("onnx.proto compiles");
    let mut cfg = prost_build::Config::new();
    cfg.bytes(["."]);
    cfg.out_dir("out");
    std::fs::create_dir_all("out").expect("out dir");
    cfg.compile_fds(fds).expect("code generation");
}
RS
(cd "$dir" && cargo run --release -q)
cp "$dir/out/onnx.rs" "$root/engine/src/frontend/onnx/proto/onnx.rs"
echo "wrote engine/src/frontend/onnx/proto/onnx.rs"
