#!/usr/bin/env python3
"""Writes a chain of N unary ONNX nodes (`x -> Relu -> v1 -> Relu -> … -> y`), the model that
measures the importer's memory and time per node (docs/onnx.md, "Import cost per node").

Usage (needs `pip install onnx`, e.g. the venv of scripts/onnx_data.sh):
    python3 scripts/onnx_chain.py 1000000 target/chain_1m.onnx [--named]

`--named` also gives every node a name (`relu_K`), as exporters do. The graph input is
`x: float[1, 4]`; nothing is random, so the file is the same on every run.
"""

import sys

import onnx
from onnx import TensorProto, helper


def chain(n, named=False):
    nodes = []
    prev = "x"
    for i in range(n):
        out = "y" if i == n - 1 else f"v{i}"
        nodes.append(helper.make_node("Relu", [prev], [out], name=f"relu_{i}" if named else None))
        prev = out
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="passel-chain")
    m.ir_version = 8
    return m


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    n, path = int(sys.argv[1]), sys.argv[2]
    m = chain(n, named="--named" in sys.argv[3:])
    with open(path, "wb") as f:
        f.write(m.SerializeToString())


if __name__ == "__main__":
    main()
