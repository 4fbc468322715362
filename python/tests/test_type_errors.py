"""A module with a type error raises ``passel.DiagnosticError`` where TVM raises: at the first
pass that needs types (InferType, run itself or as the required pass of one that needs types), with the diagnostic's
text and ``line:col``, each distinct error once; the passes after it do not run."""

from __future__ import annotations

from typing import List

import pytest

import passel
from passel import instrument, ir, transform
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
        # InferType failed the run: nothing after it ran, and the error is reported once.
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


def test_the_run_stops_at_the_pass_that_found_the_error():
    mod = ir.Module.parse(BAD)
    ran: List[str] = []
    called: List[str] = []

    @instrument.pass_instrument
    class Names:
        def run_before_pass(self, mod: ir.Module, info: transform.PassInfo) -> None:
            ran.append(info.name)

    @transform.function_pass(opt_level=0)
    def after(func: ir.Function, mod: ir.Module, ctx: PassContext) -> ir.Function:
        called.append("after")
        return func

    seq = transform.Sequential(
        [transform.get_pass("CanonicalizeBindings"), transform.get_pass("EliminateCommonSubexpr"), after]
    )
    for threads in (1, 2):
        ran.clear()
        for instruments in ([Names()], []):
            with PassContext(opt_level=3, num_threads=threads, instruments=instruments):
                with pytest.raises(passel.DiagnosticError, match=r"^3:12: error in pass InferType on @main: add"):
                    seq(mod)
        # EliminateCommonSubexpr requires InferType, which fails: it and `after` never run.
        assert ran == ["sequential", "CanonicalizeBindings", "InferType"]
        assert called == []


def test_without_an_entered_context_the_error_is_raised_when_the_run_returns():
    mod = ir.Module.parse(BAD)
    called: List[str] = []

    @transform.function_pass(opt_level=0)
    def after(func: ir.Function, mod: ir.Module, ctx: PassContext) -> ir.Function:
        called.append("after")
        return func

    with pytest.raises(passel.DiagnosticError, match="do not broadcast"):
        transform.Sequential([transform.get_pass("InferType"), after])(mod)
    assert called == ["after"]
