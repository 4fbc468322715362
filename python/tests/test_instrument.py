"""Instrument call order and failure semantics through Python (rules 19-26, 31), with Python
instruments in both of TVM's forms (subclass and ``@pass_instrument``)."""

from __future__ import annotations

from typing import List, Optional

import pytest

import passel
from passel import transform
from passel.instrument import PassInstrument, PassTimingInstrument, pass_instrument
from passel.transform import PassContext, Sequential


def make(name: str, log: List[str], fail: Optional[str] = None, veto: bool = False):
    """An instrument logging ``"<name> <hook>"``; raises ValueError in hook ``fail``."""

    class Inst(PassInstrument):
        @property
        def name(self) -> str:
            return name

        def _hit(self, hook: str) -> None:
            log.append(f"{name} {hook}")
            if hook == fail:
                raise ValueError(f"{name} broke in {hook}")

        def enter_pass_ctx(self):
            self._hit("enter")

        def exit_pass_ctx(self):
            self._hit("exit")

        def should_run(self, mod, info):
            self._hit("should_run")
            return not veto

        def run_before_pass(self, mod, info):
            self._hit("before")

        def run_after_pass(self, mod, info):
            self._hit("after")

    return Inst()


def logging_pass(log: List[str], fail: bool = False, name: str = "P"):
    def body(mod, ctx):
        log.append("pass")
        if fail:
            raise RuntimeError("the pass broke")
        return mod

    return transform.module_pass(body, opt_level=0, name=name)


def test_call_order_enter_should_run_before_pass_after_exit(small):
    log: List[str] = []
    with PassContext(instruments=[make("A", log), make("B", log)]):
        logging_pass(log)(small)
    assert log == [
        "A enter", "B enter",
        "A should_run", "B should_run", "A before", "B before",
        "pass",
        "A after", "B after",
        "A exit", "B exit",
    ]


def test_decorator_form_gets_defaults_for_missing_hooks(small):
    log: List[str] = []

    @pass_instrument
    class OnlyAfter:
        def run_after_pass(self, mod, info):
            log.append(f"after {info.name}")

    inst = OnlyAfter()
    assert isinstance(inst, PassInstrument) and inst.should_run(small, None) is True
    with PassContext(instruments=[inst]):
        transform.get_pass("FoldConstant")(small)
    assert log == ["after FoldConstant"]


def test_should_run_asks_everyone_and_a_veto_skips_the_pass_and_its_hooks(small):
    log: List[str] = []
    with PassContext(instruments=[make("A", log, veto=True), make("B", log)]):
        out = logging_pass(log)(small)
    assert out.same_as(small)
    assert log == ["A enter", "B enter", "A should_run", "B should_run", "A exit", "B exit"]


def test_required_pass_skips_should_run(small):
    log: List[str] = []
    with PassContext(required_pass=["P"], instruments=[make("A", log, veto=True)]):
        logging_pass(log)(small)
    assert log == ["A enter", "A before", "pass", "A after", "A exit"]


def test_nested_passes_nest_their_hooks(small):
    log: List[str] = []
    with PassContext(instruments=[make("A", log)]):
        Sequential([logging_pass(log)], name="S")(small)
    assert log == [
        "A enter", "A should_run", "A before",
        "A should_run", "A before", "pass", "A after",
        "A after", "A exit",
    ]


def test_enter_failure_exits_the_entered_ones_in_reverse_and_clears(small):
    log: List[str] = []
    ctx = PassContext(instruments=[make("A", log), make("B", log, fail="enter"), make("C", log)])
    # As in TVM, the instrument's own exception propagates (type, message, traceback).
    with pytest.raises(ValueError, match="B broke in enter") as e:
        with ctx:
            pass
    assert log == ["A enter", "B enter", "A exit"]
    assert ctx.instruments == []
    assert PassContext.current() != ctx
    assert not isinstance(e.value, passel.PassError)
    assert e.value.__notes__ == ["passel: instrument B failed in enter_pass_ctx"]


def test_exit_failure_stops_later_exits_and_clears(small):
    log: List[str] = []
    ctx = PassContext(instruments=[make("A", log, fail="exit"), make("B", log)])
    with pytest.raises(ValueError, match="A broke in exit"):
        with ctx:
            pass
    assert log == ["A enter", "B enter", "A exit"]
    assert ctx.instruments == []
    assert PassContext.current() != ctx


def test_should_run_failure_propagates_at_once_then_everyone_exits(small):
    log: List[str] = []
    with pytest.raises(ValueError) as e:
        with PassContext(instruments=[make("A", log, fail="should_run"), make("B", log)]):
            logging_pass(log)(small)
    assert log == ["A enter", "B enter", "A should_run", "A exit", "B exit"]
    assert str(e.value) == "A broke in should_run"
    assert e.value.__notes__ == ["passel: instrument A failed in should_run"]
    # The traceback reaches the line that raised.
    assert any(tb.tb_frame.f_code.co_name == "should_run" for tb in _frames(e.value.__traceback__))


def test_before_and_after_failures(small):
    log: List[str] = []
    with pytest.raises(ValueError, match="A broke in before") as e:
        with PassContext(instruments=[make("A", log, fail="before"), make("B", log)]):
            logging_pass(log)(small)
    assert log == ["A enter", "B enter", "A should_run", "B should_run", "A before", "A exit", "B exit"]
    log.clear()
    assert e.value.__notes__ == ["passel: instrument A failed in run_before_pass"]
    with pytest.raises(ValueError, match="A broke in after") as e:
        with PassContext(instruments=[make("A", log, fail="after"), make("B", log)]):
            logging_pass(log)(small)
    assert e.value.__notes__ == ["passel: instrument A failed in run_after_pass"]
    assert log[-4:] == ["pass", "A after", "A exit", "B exit"]


def test_pass_failure_gets_no_after_hook(small):
    log: List[str] = []
    with pytest.raises(RuntimeError, match="the pass broke") as e:
        with PassContext(instruments=[make("A", log)]):
            logging_pass(log, fail=True)(small)
    assert log == ["A enter", "A should_run", "A before", "pass", "A exit"]
    assert not isinstance(e.value, passel.PassError)


def test_reentering_runs_callbacks_once_per_entry(small):
    log: List[str] = []
    ctx = PassContext(instruments=[make("A", log)])
    with ctx:
        with ctx:
            pass
    assert log == ["A enter", "A enter", "A exit", "A exit"]


def test_only_the_innermost_contexts_instruments_fire(small):
    log: List[str] = []
    with PassContext(instruments=[make("Outer", log)]):
        with PassContext(instruments=[make("Inner", log)]):
            logging_pass(log)(small)
    assert "Outer should_run" not in log and "Inner should_run" in log


def test_override_instruments_exits_old_and_enters_new(small):
    log: List[str] = []
    ctx = PassContext(instruments=[make("A", log)])
    with ctx:
        ctx.override_instruments([make("B", log)])
        logging_pass(log)(small)
    assert log == ["A enter", "A exit", "B enter", "B should_run", "B before", "pass", "B after", "B exit"]


def test_timing_instrument_renders_a_tree_inside_the_scope(small):
    timing = PassTimingInstrument()
    with PassContext(opt_level=3, instruments=[timing]):
        transform.pipeline("FoldConstant,[EliminateCommonSubexpr,DeadCodeElimination]")(small)
        report = timing.render()
    lines = report.splitlines()
    assert lines[0].startswith("Total: ")
    assert any(line.startswith("sequential:") for line in lines)
    assert any(line.startswith("\tFoldConstant:") for line in lines)
    assert any(line.startswith("\t\tEliminateCommonSubexpr:") for line in lines)
    # Leaving the outermost context clears the data: no passes, an empty report (as in TVM).
    assert timing.render() == ""


def test_two_timing_instruments_do_not_share_state(small):
    a, b = PassTimingInstrument(), PassTimingInstrument()
    with PassContext(instruments=[a]):
        transform.get_pass("FoldConstant")(small)
        with PassContext(instruments=[b]):
            pass
        assert "FoldConstant" in a.render()
        assert "FoldConstant" not in b.render()


def _frames(tb):  # type: ignore[no-untyped-def]
    while tb is not None:
        yield tb
        tb = tb.tb_next
