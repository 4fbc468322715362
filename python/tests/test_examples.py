"""The examples in python/examples run, and do what they say."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import numpy as np

import passel
from passel import ir

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def test_pass_infra_tutorial_port(capsys):
    steps = load("pass_infra_tutorial").main()
    assert "add(1.0f, 1.0f)" not in steps["fold"] and "add(%x, 2.0f)" in steps["fold"]
    assert steps["cse"].count("add(%x, 2.0f)") == 1 and "add(%y, %y)" in steps["cse"]
    assert steps["fuse"].count("#[Primitive]") == 2
    assert "add(1.0f, 1.0f)" in steps["seq_O0"]  # FoldConstant and EliminateCommonSubexpr skipped at 0
    assert "add(%p0, %p0)" in steps["seq_O2"]  # both run at the default level 2
    assert steps["seq_O2_no_cse"].count("add(%p0, 2.0f)") == 2  # folded, not merged
    assert "add(%x, 6.0f)" in steps["custom"] and "multiply(%z1, 6.0f)" in steps["custom"]
    assert steps["custom_matches_scaled_constants"] == "True"
    assert steps["instrumented"] == "sequential,FoldConstant,PrintIR"
    assert "PrintIR(after fold):" in capsys.readouterr().err


def test_pass_instrument_tutorial_port():
    seen = load("pass_instrument_tutorial").main()
    assert seen["timed"][:3] == ["Total", "sequential", "FoldConstant"] and "FuseOps" in seen["timed"]
    assert seen["diffs"] == [
        ("FoldConstant", {"add": -1}),
        ("FuseOps", {"apply": 1}),
        ("sequential", {"add": -1, "apply": 1}),
    ]
    assert seen["fused_when_skipped"] is False
    assert seen["caught"] == "stop after FoldConstant"


def test_rewrite_and_rename_example():
    example = load("rewrite_and_rename")
    out = example.main()
    assert out.names() == ["twice", "uses_main", "relu_helper", "entry"]
    text = out.script()
    assert "multiply(%x, add(%a, %b))" in text and "multiply(%z, add(2.0f, 3.0f))" in text
    assert "@relu_helper(%t)" in text and "@entry(true, %x, %x, %x)" in text and "@main" not in text
    out.verify()
    before = ir.Module.parse(example.SOURCE)
    rng = np.random.default_rng(0)
    args = [rng.standard_normal(4).astype(np.float32) for _ in range(3)]
    for c in (True, False):
        np.testing.assert_allclose(
            passel.eval(out, np.array(c), *args, entry="entry"),
            passel.eval(before, np.array(c), *args, entry="main"),
            rtol=1e-6,
        )


def test_tir_custom_pass_port(capsys):
    out = load("tir_custom_pass").main()
    text = out["add"].script("add")
    assert "for %i0_outer in serial(0, 16) {\n    for %i0_inner in vectorized(0, 8) {" in text
    assert "%out[add(mul(%i0_outer, 8), %i0_inner)]" in text
    assert "prim @add(" in capsys.readouterr().out
