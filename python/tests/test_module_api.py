"""TVM's IRModule mutation API, ``testing.immutable_module`` catching a pass that mutates its
input in place, and the PassContext / decorator / from_onnx argument checks of issue 29."""

from __future__ import annotations

from pathlib import Path

import pytest

import passel
from passel import ir, transform
from passel.transform import PassContext

CORPUS = Path(__file__).resolve().parents[2] / "fuzz" / "corpus" / "onnx_import"


def test_module_mutates_in_place_like_tvm_irmodule(small):
    mod = ir.Module.parse(small.script())
    f1 = mod["f1"]
    mod["g"] = f1
    assert mod.names() == ["f0", "f1", "f2", "g"] and mod["g"].same_as(f1)
    mod.update_func("f0", f1)
    assert mod.names() == ["f0", "f1", "f2", "g"] and mod["f0"].same_as(f1)
    mod.remove("g")
    del mod["@f2"]
    assert mod.names() == ["f0", "f1"]
    with pytest.raises(KeyError, match="g"):
        mod.remove("g")
    with pytest.raises(ValueError):
        mod["bad name"] = f1
    other = ir.Module({"h": f1})
    mod.update(other)
    assert mod.names() == ["f0", "f1", "h"]
    # The module given to the constructor and the parsed one are unaffected: values, not views.
    assert small.names() == ["f0", "f1", "f2"]


def in_place_module_pass() -> transform.Pass:
    @transform.module_pass(opt_level=0, name="AddInPlace")
    def add_in_place(mod: ir.Module, ctx: PassContext) -> ir.Module:
        mod["extra"] = mod["f1"]
        return mod

    return add_in_place


def in_place_function_pass() -> transform.Pass:
    @transform.function_pass(opt_level=0, name="RemoveInPlace")
    def remove_in_place(func: ir.Function, mod: ir.Module, ctx: PassContext) -> ir.Function:
        if "f2" in mod:
            mod.remove("f2")
        return func

    return remove_in_place


@pytest.mark.parametrize("make", [in_place_module_pass, in_place_function_pass])
def test_immutable_module_catches_a_pass_that_mutates_its_input_in_place(small, make):
    p = make()
    name = p.info.name
    with PassContext(config={"testing.immutable_module": True}):
        with pytest.raises(passel.PassError, match=f"^Immutable module has been modified in pass: {name}$"):
            p(small)
    # Without the check the in-place change is the pass's output, as in TVM.
    out = p(small)
    assert ("extra" in out) if name == "AddInPlace" else True


def test_immutable_module_accepts_a_pass_that_returns_a_changed_copy(small):
    @transform.module_pass(opt_level=0)
    def copy_then_add(mod: ir.Module, ctx: PassContext) -> ir.Module:
        return mod.with_function("extra", mod["f1"])

    with PassContext(config={"testing.immutable_module": True}):
        assert "extra" in copy_then_add(small)


def test_pass_context_arguments_are_checked_clearly(small):
    with pytest.raises(TypeError, match="at least one of TVM's instrument methods.*object has none") as e:
        PassContext(instruments=[object()])
    assert isinstance(e.value, passel.PassError)
    with pytest.raises(ValueError, match="opt_level must be between 0 and 4294967295, got -1") as e2:
        PassContext(opt_level=-1)
    assert isinstance(e2.value, passel.PassError)
    with pytest.raises(TypeError, match="opt_level must be an int, got str"):
        PassContext(opt_level="3")  # type: ignore[arg-type]
    ctx = PassContext(opt_level=3, disabled_pass="FoldConstant", required_pass="FuseOps")
    assert ctx.disabled_pass == ["FoldConstant"] and ctx.required_pass == ["FuseOps"]
    with pytest.raises(TypeError, match="disabled_pass must be a pass name or a list of pass names, got int"):
        PassContext(disabled_pass=3)  # type: ignore[arg-type]
    with ctx:
        out = transform.Sequential([transform.get_pass("FoldConstant")])(small)
    assert out.same_as(small)


def test_module_pass_accepts_traceable(small):
    @transform.module_pass(opt_level=0, traceable=True)
    def traced(mod: ir.Module, ctx: PassContext) -> ir.Module:
        return mod

    assert traced(small).same_as(small)
    with pytest.raises(TypeError, match="traceable must be a bool"):
        transform.module_pass(lambda m, c: m, opt_level=0, traceable="yes")  # type: ignore[call-overload]


def test_from_onnx_errors_speak_of_shapes_not_of_cli_flags():
    cases = [
        (None, 'give the shape with shapes={"x": [d0, d1, …]}'),
        ({"x": [5]}, "shapes gives 1 dimensions but the model declares 2"),
        ({"y": [5, 3]}, "shapes names no graph input (inputs: x)"),
    ]
    for shapes, expected in cases:
        with pytest.raises(passel.OnnxError) as e:
            ir.Module.from_onnx(CORPUS / "symbolic_batch.onnx", shapes=shapes)
        assert expected in str(e.value)
        assert "--" not in str(e.value)


def test_get_pipeline_is_the_cli_default_pipeline_per_opt_level():
    levels = {p["name"]: p["opt_level"] for p in transform.list_passes()}
    expected = {
        0: ["SimplifyInference", "FoldScaleAxis", "SimplifyExpr", "FuseOps"],
        1: ["Inline", "SimplifyInference", "FoldScaleAxis", "SimplifyExpr", "EliminateCommonSubexpr",
            "CanonicalizeBindings", "DeadCodeElimination", "FuseOps"],
        2: ["Inline", "SimplifyInference", "FoldConstant", "FoldScaleAxis", "SimplifyExpr", "EliminateCommonSubexpr",
            "CanonicalizeBindings", "DeadCodeElimination", "FuseOps"],
        3: ["Inline", "SimplifyInference", "FoldConstant", "FoldScaleAxis", "SimplifyExpr", "EliminateCommonSubexpr",
            "CanonicalizeBindings", "DeadCodeElimination", "FuseOps"],
    }
    for level, names in expected.items():
        seq = transform.get_pipeline(level)
        assert seq.info.name == f"default-O{level}"
        assert [p.info.name for p in seq.passes] == names
        assert all(levels[n] <= level for n in names)
    text = """
def @main(%x: Tensor[(4), f32]) -> Tensor[(4), f32] {
  let %k = multiply(2.0f, 0.5f);
  let %a = add(%x, %k);
  let %b = add(%x, %k);
  let %c = multiply(%a, %b);
  %c
}
"""
    mod = ir.Module.parse(text)
    with PassContext(opt_level=3):
        o3 = transform.get_pipeline(3)(mod)
        o1 = transform.get_pipeline(1)(mod)
        o0 = transform.get_pipeline(0)(mod)
    assert "multiply(%a, %a)" in o3.script()  # CSE at -O3
    assert "multiply(%a, %a)" in o1.script()  # and at -O1 (Relax's level 1)
    assert o0.script().count("add(") == 2  # no CSE at -O0
    with pytest.raises(ValueError, match="between 0 and 3, got 4"):
        transform.get_pipeline(4)


def test_setting_a_function_to_itself_is_no_change_in_place(small):
    @transform.module_pass(opt_level=0)
    def same_again(mod: ir.Module, ctx: PassContext) -> ir.Module:
        mod["f1"] = mod["f1"]
        return mod

    with PassContext(config={"testing.immutable_module": True}):
        assert same_again(small).same_as(small)
