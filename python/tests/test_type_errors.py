"""A module with a type error raises ``passel.DiagnosticError`` from the run whose InferType
found it, with the diagnostic's text and ``line:col``, each distinct error once."""

from __future__ import annotations

import pytest

import passel
from passel import ir, transform
from passel.transform import PassContext

BAD = """
def @main(%x: Tensor[(4), f32], %y: Tensor[(3), f32]) -> Tensor[(4), f32] {
  let %a = add(%x, %y);
  let %b = multiply(%a, 2.0f);
  %b
}
"""


def test_a_type_error_raises_with_its_text_and_location_once():
    mod = ir.Module.parse(BAD)
    pipeline = transform.Sequential(
        [transform.get_pass(n) for n in ["InferType", "FoldConstant", "EliminateCommonSubexpr", "FuseOps"]]
    )
    with PassContext(opt_level=3) as ctx:
        with pytest.raises(passel.DiagnosticError) as e:
            pipeline(mod)
        # InferType ran three times (once itself, once for each pass requiring it); the error
        # is reported once.
        assert ctx.diagnostics() == ["error in pass InferType on @main: add: shapes (4,) and (3,) do not broadcast"]
    assert str(e.value) == "3:12: error in pass InferType on @main: add: shapes (4,) and (3,) do not broadcast"
    assert isinstance(e.value, passel.PassError)
    # A pipeline whose pass needs types (it runs InferType first) raises too; one that needs
    # none does not.
    with PassContext(opt_level=3):
        with pytest.raises(passel.DiagnosticError, match="do not broadcast"):
            transform.Sequential([transform.get_pass("EliminateCommonSubexpr")])(mod)
        assert transform.Sequential([transform.get_pass("CanonicalizeBindings")])(mod).same_as(mod)


def test_a_module_built_in_python_has_no_location_but_the_text():
    mod = ir.Module.parse(BAD)
    built = ir.Module()
    built["main"] = mod["main"]
    with pytest.raises(passel.DiagnosticError) as e:
        transform.get_pass("InferType")(built)
    assert str(e.value) == "error in pass InferType on @main: add: shapes (4,) and (3,) do not broadcast"
