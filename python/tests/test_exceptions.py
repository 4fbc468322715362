"""Exceptions as TVM has them: a Python exception raised in a pass or an instrument hook
propagates as itself, for every hook and every pass kind; passel's own errors are Python's
ValueError / TypeError / KeyError where one fits and stay ``passel.PassError``."""

from __future__ import annotations

from typing import Any, Callable, List

import pytest

import passel
from passel import ir, transform
from passel.transform import PassContext, Sequential


class Custom(Exception):
    pass


HOOKS = ["enter_pass_ctx", "exit_pass_ctx", "should_run", "run_before_pass", "run_after_pass"]


def raising_instrument(hook: str) -> Any:
    class Inst:
        pass

    def fail(*args: Any) -> Any:
        raise Custom(f"{hook} failed")

    setattr(Inst, hook, fail)
    return Inst()


@pytest.mark.parametrize("hook", HOOKS)
def test_an_instrument_exception_propagates_as_itself_from_every_hook(small, hook):
    noop = transform.function_pass(lambda f, m, c: f, opt_level=0, name="Noop")
    with pytest.raises(Custom) as e:
        with PassContext(instruments=[raising_instrument(hook)]):
            noop(small)
    assert str(e.value) == f"{hook} failed"
    assert not isinstance(e.value, passel.PassError)
    assert any(entry.name == "fail" for entry in e.traceback)
    assert len(e.value.__notes__) == 1 and hook in e.value.__notes__[0]


def function_kind(body: Callable[[], None]) -> transform.Pass:
    def f(func: ir.Function, mod: ir.Module, ctx: PassContext) -> ir.Function:
        body()
        return func

    return transform.function_pass(f, opt_level=0, name="Fails")


def module_kind(body: Callable[[], None]) -> transform.Pass:
    def f(mod: ir.Module, ctx: PassContext) -> ir.Module:
        body()
        return mod

    return transform.module_pass(f, opt_level=0, name="Fails")


def sequential_kind(body: Callable[[], None]) -> transform.Pass:
    return Sequential([transform.get_pass("FoldConstant"), function_kind(body)])


@pytest.mark.parametrize("kind", [function_kind, module_kind, sequential_kind])
@pytest.mark.parametrize("exc", [ValueError("bad value"), KeyError("k"), TypeError("t"), Custom("mine")])
def test_a_pass_exception_propagates_as_itself_for_every_pass_kind(small, kind, exc):
    def body() -> None:
        raise exc

    p = kind(body)
    for threads in (1, 2):
        with PassContext(num_threads=threads):
            with pytest.raises(type(exc)) as e:
                p(small)
        assert e.value is exc
        assert any(entry.name == "body" for entry in e.traceback)
        assert "in pass Fails" in e.value.__notes__[-1]


def test_passel_errors_are_python_native_and_passel_errors(small):
    with pytest.raises(KeyError) as e1:
        transform.get_pass("FoldConstnt")
    assert isinstance(e1.value, passel.PassError) and "did you mean `FoldConstant`" in str(e1.value)
    with pytest.raises(KeyError) as e2:
        PassContext(config={"relay.FoldConstant.max_bytez": 1})
    assert isinstance(e2.value, passel.PassError)
    with pytest.raises(TypeError) as e3:
        PassContext(config={"relay.FoldConstant.max_bytes": "many"})
    assert isinstance(e3.value, passel.PassError)
    with pytest.raises(ValueError) as e4:
        transform.pipeline("FoldConstant,(")
    assert isinstance(e4.value, passel.PassError)
    bad = transform.module_pass(lambda m, c: 3, opt_level=0, name="Bad")
    with pytest.raises(TypeError, match="must return a passel.ir.Module, got int") as e5:
        bad(small)
    assert isinstance(e5.value, passel.PassError)
    assert issubclass(passel.PassValueError, ValueError) and issubclass(passel.PassValueError, passel.PassError)
