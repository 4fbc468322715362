"""``Module.from_onnx``: TVM's ``relax.frontend.onnx.from_onnx`` over passel's importer.

The models are the importer's fuzz seeds committed in ``fuzz/corpus/onnx_import`` (small
graphs written with ``onnx.helper``), so the suite needs no ``onnx`` package.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import passel
from passel import ir, transform

CORPUS = Path(__file__).resolve().parents[2] / "fuzz" / "corpus" / "onnx_import"


def test_from_onnx_imports_a_model_that_evaluates_like_its_optimised_form():
    mod = ir.Module.from_onnx(CORPUS / "conv_relu.onnx")
    assert mod.names() == ["main"]
    assert "conv2d(" in mod.script()
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype(np.float32)
    before = passel.eval(mod, x)
    assert before.shape == (1, 5)
    np.testing.assert_allclose(before.sum(axis=1), np.ones(1), rtol=1e-5)  # softmax output
    with transform.PassContext(opt_level=3):
        opt = transform.Sequential([transform.get_pass("FoldConstant"), transform.get_pass("FuseOps")])(mod)
    np.testing.assert_allclose(passel.eval(opt, x), before, rtol=1e-5, atol=1e-6)


def test_from_onnx_takes_static_shapes_for_symbolic_dimensions():
    with pytest.raises(passel.OnnxError, match=r"dimension 0 is symbolic \(`batch`\)"):
        ir.Module.from_onnx(CORPUS / "symbolic_batch.onnx")
    mod = ir.Module.from_onnx(str(CORPUS / "symbolic_batch.onnx"), shapes={"x": [5, 3]})
    ty = mod["main"].params[0].type
    assert ty is not None and ty.shape == [5, 3]


def test_from_onnx_errors_name_the_file_and_every_unsupported_operator():
    with pytest.raises(passel.OnnxError) as err:
        ir.Module.from_onnx(CORPUS / "bad_unsupported.onnx")
    message = str(err.value)
    assert "bad_unsupported.onnx" in message
    assert "Unique (3 nodes" in message
    with pytest.raises(passel.OnnxError, match="node `add_a` \\(Add\\).*cycle"):
        ir.Module.from_onnx(CORPUS / "bad_cycle.onnx")
    with pytest.raises(OSError, match="cannot read"):
        ir.Module.from_onnx(CORPUS / "no_such_model.onnx")


DATA = Path(__file__).resolve().parents[2] / "engine" / "tests" / "data" / "onnx"


def test_from_onnx_reads_external_data_from_the_models_folder_and_only_there():
    # The weights live in `constant_external_value.bin` beside the model (ONNX external data),
    # read by the engine's loader, the same code as `passel import`.
    mod = ir.Module.from_onnx(DATA / "constant_external_value.onnx")
    x = np.zeros(8, dtype=np.float32)
    np.testing.assert_array_equal(passel.eval(mod, x), np.arange(8, dtype=np.float32) * 0.25)
    with pytest.raises(passel.OnnxError, match=r"`\.\./outside\.bin`.*inside the model's folder"):
        ir.Module.from_onnx(DATA / "bad_external_outside.onnx")
    with pytest.raises(passel.OnnxError, match=r"tensor `w`: external data `missing_weights\.bin`: cannot open"):
        ir.Module.from_onnx(DATA / "bad_external_missing.onnx")


def test_from_onnx_module_survives_its_file_truncated_and_rewritten(tmp_path):
    # A model of 1 MiB or more is mapped under a read lease (engine/src/frontend/onnx/mapped.rs):
    # rewriting the file in place waits until passel has copied the mapping, so the module keeps
    # the original weights instead of dying with SIGBUS. `conv_relu` behind an unknown 1 MiB
    # field (field 1000, length-delimited; decoders skip it) puts its weights past the first MiB.
    import signal

    pad = 1 << 20
    model = tmp_path / "m.onnx"
    model.write_bytes(bytes([0xC2, 0x3E, 0x80, 0x80, 0x40]) + bytes(pad) + (CORPUS / "conv_relu.onnx").read_bytes())
    mod = ir.Module.from_onnx(model)
    x = np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype(np.float32)
    text, before = mod.script(), passel.eval(mod, x)
    with open(model, "wb") as f:  # truncates, then writes another model into the same inode
        f.write((CORPUS / "symbolic_batch.onnx").read_bytes())
    assert mod.script() == text
    np.testing.assert_array_equal(passel.eval(mod, x), before)
    # Python's own signal handling is untouched by the loader's lease signal.
    got = []
    old = signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
    try:
        signal.raise_signal(signal.SIGUSR1)
    finally:
        signal.signal(signal.SIGUSR1, old)
    assert got == [1]
