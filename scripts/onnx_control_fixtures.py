#!/usr/bin/env python3
"""Writes the ONNX control-flow test models (If, Loop, Scan) with inputs and expected outputs.

Usage (needs `pip install onnx numpy onnxruntime`, e.g. the venv scripts/onnx_data.sh makes):
    python3 scripts/onnx_control_fixtures.py engine/tests/data/onnx/control

Each model goes to `<dest>/<name>/model.onnx` with `input_K.npy` (seeded) and `output_K.npy`
computed by onnxruntime, checked against onnx's reference evaluator (`onnx.reference`), or against
the model's meaning written in numpy where that evaluator cannot run or misreads the model. harness/tests/onnx_fixture_models.rs imports, evaluates and
optimises each and compares.
"""

import os
import sys

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

F = TensorProto.FLOAT
I64 = TensorProto.INT64
B = TensorProto.BOOL


def vi(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def arr(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def graph(nodes, name, inputs, outputs, inits=()):
    return helper.make_graph(nodes, name, inputs, outputs, initializer=list(inits))


def model(g, opset=17):
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="passel-fixtures")
    m.ir_version = 8
    onnx.checker.check_model(m, full_check=True)
    return m


def fixtures():
    rng = np.random.default_rng(7)
    out = {}

    # If on a runtime condition (the sum of x is positive); both branches read outer values
    # (x, w) and have their own initializers and several nodes.
    then_b = graph(
        [
            helper.make_node("Mul", ["x", "w"], ["t0"]),
            helper.make_node("Relu", ["t0"], ["t1"]),
            helper.make_node("Add", ["t1", "two"], ["y_then"]),
        ],
        "then",
        [],
        [vi("y_then", F, [2, 3])],
        [arr("two", np.full([1], 2.0, np.float32))],
    )
    else_b = graph(
        [helper.make_node("Sub", ["x", "w"], ["e0"]), helper.make_node("Tanh", ["e0"], ["y_else"])],
        "else",
        [],
        [vi("y_else", F, [2, 3])],
    )
    g = graph(
        [
            helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
            helper.make_node("Greater", ["s", "zero"], ["c"]),
            helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_b, else_branch=else_b),
            helper.make_node("Mul", ["y", "w"], ["z"]),
        ],
        "if_runtime",
        [vi("x", F, [2, 3])],
        [vi("z", F, [2, 3])],
        [arr("w", rng.standard_normal([2, 3]).astype(np.float32)), arr("zero", np.zeros([], np.float32))],
    )
    out["if_runtime"] = (model(g), [rng.standard_normal([2, 3]).astype(np.float32)])
    # The same model on the other branch.
    out["if_runtime_else"] = (model(g), [-np.abs(rng.standard_normal([2, 3])).astype(np.float32)])

    # If on a condition known at import (from the input's shape): only the taken branch is
    # imported. Two outputs.
    then2 = graph(
        [helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Neg", ["x"], ["b"])],
        "then2",
        [],
        [vi("a", F, [4]), vi("b", F, [4])],
    )
    else2 = graph(
        [helper.make_node("Exp", ["x"], ["a2"]), helper.make_node("Sigmoid", ["x"], ["b2"])],
        "else2",
        [],
        [vi("a2", F, [4]), vi("b2", F, [4])],
    )
    g = graph(
        [
            helper.make_node("Shape", ["x"], ["sh"]),
            helper.make_node("ReduceSum", ["sh"], ["n"], keepdims=0),
            helper.make_node("Greater", ["n", "three"], ["c"]),
            helper.make_node("If", ["c"], ["p", "q"], then_branch=then2, else_branch=else2),
        ],
        "if_static",
        [vi("x", F, [4])],
        [vi("p", F, [4]), vi("q", F, [4])],
        [arr("three", np.array(3, np.int64))],
    )
    out["if_static"] = (model(g), [rng.standard_normal([4]).astype(np.float32)])

    # A for loop (M known, cond true): carried accumulator and a scan output, body reads an
    # outer value and the iteration number.
    body = graph(
        [
            helper.make_node("Cast", ["i"], ["fi"], to=F),
            helper.make_node("Mul", ["acc_in", "decay"], ["t"]),
            helper.make_node("Add", ["t", "fi"], ["acc_out"]),
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Mul", ["acc_out", "x"], ["scan_out"]),
        ],
        "loop_body",
        [vi("i", I64, []), vi("cond_in", B, []), vi("acc_in", F, [3])],
        [vi("cond_out", B, []), vi("acc_out", F, [3]), vi("scan_out", F, [3])],
    )
    g = graph(
        [helper.make_node("Loop", ["M", "", "acc0"], ["acc", "trace"], name="for", body=body)],
        "loop_for",
        [vi("x", F, [3]), vi("acc0", F, [3])],
        [vi("acc", F, [3]), vi("trace", F, [5, 3])],
        [arr("M", np.array(5, np.int64)), arr("decay", np.full([3], 0.5, np.float32))],
    )

    def loop_for_oracle(x, acc0):
        acc, trace = acc0.copy(), []
        for i in range(5):
            acc = acc * np.float32(0.5) + np.float32(i)
            trace.append(acc * x)
        return [acc, np.stack(trace)]

    out["loop_for"] = (
        model(g),
        [rng.standard_normal([3]).astype(np.float32), rng.standard_normal([3]).astype(np.float32)],
        loop_for_oracle,
    )

    # A while loop on a runtime condition: halve x until its max is below a threshold (at
    # most M = 100 iterations); counts the iterations. Stays a loop (a recursive function).
    body = graph(
        [
            helper.make_node("Mul", ["v_in", "half"], ["v_out"]),
            helper.make_node("Add", ["n_in", "one"], ["n_out"]),
            helper.make_node("ReduceMax", ["v_out"], ["mx"], keepdims=0),
            helper.make_node("Greater", ["mx", "limit"], ["cond_out"]),
        ],
        "while_body",
        [vi("i", I64, []), vi("cond_in", B, []), vi("v_in", F, [4]), vi("n_in", I64, [])],
        [vi("cond_out", B, []), vi("v_out", F, [4]), vi("n_out", I64, [])],
        [arr("one", np.array(1, np.int64)), arr("half", np.array(0.5, np.float32))],
    )
    g = graph(
        [
            helper.make_node("ReduceMax", ["x"], ["mx0"], keepdims=0),
            helper.make_node("Greater", ["mx0", "limit"], ["c0"]),
            helper.make_node("Loop", ["M", "c0", "x", "zero"], ["v", "n"], name="while", body=body),
        ],
        "loop_while",
        [vi("x", F, [4])],
        [vi("v", F, [4]), vi("n", I64, [])],
        [
            arr("M", np.array(100, np.int64)),
            arr("limit", np.array(1.0, np.float32)),
            arr("zero", np.array(0, np.int64)),
        ],
    )
    out["loop_while"] = (model(g), [(np.abs(rng.standard_normal([4])) * 40).astype(np.float32)])

    # Scan: a running sum over the sequence axis of x (axis 1, one input reversed), with a
    # state and two scan outputs, one stacked on axis 1 in reverse.
    body = graph(
        [
            helper.make_node("Add", ["s_in", "xt"], ["s_out"]),
            helper.make_node("Mul", ["s_out", "yt"], ["o1"]),
            helper.make_node("Relu", ["s_out"], ["o2"]),
        ],
        "scan_body",
        [vi("s_in", F, [2]), vi("xt", F, [2]), vi("yt", F, [2])],
        [vi("s_out", F, [2]), vi("o1", F, [2]), vi("o2", F, [2])],
    )
    g = graph(
        [
            helper.make_node(
                "Scan",
                ["s0", "x", "y"],
                ["s", "p", "r"],
                name="scan",
                body=body,
                num_scan_inputs=2,
                scan_input_axes=[1, 0],
                scan_input_directions=[0, 1],
                scan_output_axes=[0, 1],
                scan_output_directions=[0, 1],
            )
        ],
        "scan",
        [vi("s0", F, [2]), vi("x", F, [2, 4]), vi("y", F, [4, 2])],
        [vi("s", F, [2]), vi("p", F, [4, 2]), vi("r", F, [2, 4])],
    )

    def scan_oracle(s0, x, y):
        st, o1, o2 = s0.copy(), [], []
        for t in range(4):
            st = st + x[:, t]
            o1.append(st * y[3 - t])
            o2.append(np.maximum(st, 0))
        return [st, np.stack(o1, 0), np.stack(o2[::-1], 1)]

    out["scan"] = (
        model(g),
        [rng.standard_normal(s).astype(np.float32) for s in ([2], [2, 4], [4, 2])],
        scan_oracle,
    )

    # A Loop inside an If inside a Loop, reading values of every enclosing graph.
    inner_body = graph(
        [
            helper.make_node("Add", ["w_in", "x"], ["w_out"]),
            helper.make_node("Identity", ["ic_in"], ["ic_out"]),
        ],
        "inner_body",
        [vi("j", I64, []), vi("ic_in", B, []), vi("w_in", F, [3])],
        [vi("ic_out", B, []), vi("w_out", F, [3])],
    )
    then_b = graph(
        [helper.make_node("Loop", ["two", "", "a_in"], ["a_then"], body=inner_body)],
        "then",
        [],
        [vi("a_then", F, [3])],
    )
    else_b = graph([helper.make_node("Neg", ["a_in"], ["a_else"])], "else", [], [vi("a_else", F, [3])])
    outer_body = graph(
        [
            helper.make_node("ReduceSum", ["a_in"], ["sum"], keepdims=0),
            helper.make_node("Less", ["sum", "big"], ["small"]),
            helper.make_node("If", ["small"], ["a_out"], then_branch=then_b, else_branch=else_b),
            helper.make_node("Less", ["i", "four"], ["c_out"]),
        ],
        "outer_body",
        [vi("i", I64, []), vi("c_in", B, []), vi("a_in", F, [3])],
        [vi("c_out", B, []), vi("a_out", F, [3])],
        [arr("four", np.array(4, np.int64))],
    )
    g = graph(
        [helper.make_node("Loop", ["M", "t", "x"], ["a"], name="outer", body=outer_body)],
        "nested",
        [vi("x", F, [3])],
        [vi("a", F, [3])],
        [
            arr("M", np.array(10, np.int64)),
            arr("t", np.array(True)),
            arr("two", np.array(2, np.int64)),
            arr("big", np.array(6.0, np.float32)),
        ],
    )

    def nested_oracle(x):
        # onnx 1.23's reference evaluator resolves the inner loop's `x` wrongly; this is the
        # model's meaning written out in numpy.
        a = x.copy()
        for i in range(10):
            a = a + 2 * x if a.sum() < 6 else -a
            if not i < 4:
                break
        return [a]

    out["nested"] = (model(g), [rng.standard_normal([3]).astype(np.float32)], nested_oracle)
    return out


def bad_fixtures():
    """Models the importer must refuse with a clear error (not checked by onnx.checker)."""
    out = {}
    ident = lambda i, o: helper.make_node("Identity", [i], [o])  # noqa: E731
    # A branch reads a value no enclosing graph defines.
    then_b = graph([ident("nowhere", "a")], "then", [], [vi("a", F, [2])])
    else_b = graph([ident("x", "b")], "else", [], [vi("b", F, [2])])
    g = graph(
        [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_b, else_branch=else_b)],
        "g",
        [vi("x", F, [2]), vi("c", B, [])],
        [vi("y", F, [2])],
    )
    out["bad_undefined_outer"] = g
    # Branches of different shapes on a runtime condition.
    then_b = graph([ident("x", "a")], "then", [], [vi("a", F, [2])])
    else_b = graph([helper.make_node("Concat", ["x", "x"], ["b"], axis=0)], "else", [], [vi("b", F, [4])])
    out["bad_branch_types"] = graph(
        [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_b, else_branch=else_b)],
        "g",
        [vi("x", F, [2]), vi("c", B, [])],
        [vi("y", F, [2])],
    )
    # A Loop whose trip count is not a scalar.
    body = graph(
        [ident("c_in", "c_out"), ident("v_in", "v_out")],
        "body",
        [vi("i", I64, []), vi("c_in", B, []), vi("v_in", F, [2])],
        [vi("c_out", B, []), vi("v_out", F, [2])],
    )
    out["bad_loop_trip_count"] = graph(
        [helper.make_node("Loop", ["M", "", "x"], ["y"], name="loop", body=body)],
        "g",
        [vi("x", F, [2])],
        [vi("y", F, [2])],
        [arr("M", np.array([2, 3], np.int64))],
    )
    # A Loop with a scan output and a runtime condition: the output's length is not static.
    body = graph(
        [ident("c_in", "c_out"), ident("v_in", "v_out"), ident("v_in", "s")],
        "body",
        [vi("i", I64, []), vi("c_in", B, []), vi("v_in", F, [2])],
        [vi("c_out", B, []), vi("v_out", F, [2]), vi("s", F, [2])],
    )
    out["bad_loop_dynamic_scan"] = graph(
        [helper.make_node("Loop", ["M", "c", "x"], ["y", "ys"], name="loop", body=body)],
        "g",
        [vi("x", F, [2]), vi("c", B, [])],
        [vi("y", F, [2]), vi("ys", F, [3, 2])],
        [arr("M", np.array(3, np.int64))],
    )
    # A Scan over a sequence too long to unroll.
    body = graph(
        [helper.make_node("Add", ["s_in", "xt"], ["s_out"])],
        "body",
        [vi("s_in", F, [1]), vi("xt", F, [1])],
        [vi("s_out", F, [1])],
    )
    out["bad_scan_too_long"] = graph(
        [helper.make_node("Scan", ["s0", "x"], ["s"], name="scan", body=body, num_scan_inputs=1)],
        "g",
        [vi("s0", F, [1]), vi("x", F, [1 << 17, 1])],
        [vi("s", F, [1])],
    )
    # Unsupported operators inside a subgraph are listed with the others.
    then_b = graph([helper.make_node("Unique", ["x"], ["a"])], "then", [], [vi("a", F, [2])])
    else_b = graph([helper.make_node("Det", ["x"], ["b"])], "else", [], [vi("b", F, [2])])
    out["bad_unsupported_in_branch"] = graph(
        [helper.make_node("If", ["c"], ["y"], name="branch", then_branch=then_b, else_branch=else_b)],
        "g",
        [vi("x", F, [2]), vi("c", B, [])],
        [vi("y", F, [2])],
    )
    # Not bad, but hostile: a Loop of 60,000 iterations around a Loop of 60,000 iterations.
    # Unrolling either past the model's budget would convert billions of nodes, and unrolling
    # the outer one alone would make 60,000 loop functions: both stay loops.
    inner = graph(
        [ident("ic", "ic2"), ident("iv", "iv2")],
        "inner",
        [vi("j", I64, []), vi("ic", B, []), vi("iv", F, [2])],
        [vi("ic2", B, []), vi("iv2", F, [2])],
    )
    outer = graph(
        [helper.make_node("Loop", ["M", "", "ov"], ["ov2"], body=inner), ident("oc", "oc2")],
        "outer",
        [vi("i", I64, []), vi("oc", B, []), vi("ov", F, [2])],
        [vi("oc2", B, []), vi("ov2", F, [2])],
    )
    out["hostile_nested_loops"] = graph(
        [helper.make_node("Loop", ["M", "", "x"], ["y"], name="outer", body=outer)],
        "g",
        [vi("x", F, [2])],
        [vi("y", F, [2])],
        [arr("M", np.array(60000, np.int64))],
    )
    result = {}
    for name, g in out.items():
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="passel-fixtures")
        m.ir_version = 8
        result[name] = m
    return result


def main():
    dest = sys.argv[1] if len(sys.argv) > 1 else "engine/tests/data/onnx/control"
    for name, (m, inputs, *oracle) in fixtures().items():
        d = os.path.join(dest, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "model.onnx"), "wb") as f:
            f.write(m.SerializeToString())
        feeds = {vi.name: x for vi, x in zip(m.graph.input, inputs)}
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        got = sess.run(None, feeds)
        try:
            ref = oracle[0](*inputs) if oracle else ReferenceEvaluator(m).run(None, feeds)
        except (ValueError, RuntimeError) as e:
            sys.exit(f"{name}: onnx.reference cannot run it ({e}); give the fixture a numpy oracle")
        for k, (a, b) in enumerate(zip(got, ref)):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6, err_msg=f"{name} output {k}")
        for k, x in enumerate(inputs):
            np.save(os.path.join(d, f"input_{k}.npy"), x)
        for k, y in enumerate(got):
            np.save(os.path.join(d, f"output_{k}.npy"), np.asarray(y))
        print(f"{d}: {os.path.getsize(os.path.join(d, 'model.onnx'))} bytes, {len(got)} outputs")
    for name, m in bad_fixtures().items():
        path = os.path.join(dest, name + ".onnx")
        with open(path, "wb") as f:
            f.write(m.SerializeToString())
        print(f"{path}: {os.path.getsize(path)} bytes")


if __name__ == "__main__":
    main()
