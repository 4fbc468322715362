"""Incremental sessions with a Python pass: only edited functions are recomputed, a version
bump re-runs the pass everywhere, and a pass without a version is re-run with a warning."""

from __future__ import annotations

from typing import List

import pytest

import passel
from passel import ir, transform
from passel.transform import PassContext, Sequential

from conftest import chain


def counting_pass(calls: List[str], version=1):
    @transform.function_pass(opt_level=0, name="Count", version=version)
    def count(func, mod, ctx):
        calls.append(func.params[0].name)
        return func

    return count


def pipeline(p: transform.Pass) -> Sequential:
    return Sequential([transform.get_pass("FoldConstant"), p, transform.get_pass("EliminateCommonSubexpr")])


def edited(mod: ir.Module, name: str) -> ir.Function:
    """``name`` with its first constant changed."""
    return ir.Module.parse(mod[name].script(name).replace("0.5f", "0.25f"))[name]


def test_session_recomputes_only_the_edited_function():
    mod = chain(6)
    calls: List[str] = []
    s = passel.Session(pipeline(counting_pass(calls)), PassContext(opt_level=3, num_threads=2))
    assert s.load(mod) == mod.names()
    first = s.run()
    assert len(calls) == 6
    assert first.recomputed() == mod.names()
    cold = pipeline(counting_pass([]))
    with PassContext(opt_level=3):
        assert first.module.script() == cold(mod).script()
    calls.clear()
    assert s.set_function("g3", edited(mod, "g3"))
    again = s.run()
    assert again.recomputed() == ["g3"]
    assert len(calls) == 1
    assert any(st.label.startswith("FoldConstant") and st.recomputed == ["g3"] for st in again.stages)
    # An edit that changes nothing recomputes nothing.
    calls.clear()
    assert not s.set_function("g3", edited(mod, "g3"))
    assert s.run().recomputed() == [] and calls == []


def test_a_version_bump_reruns_the_python_pass_everywhere():
    mod = chain(4)
    calls: List[str] = []
    p = counting_pass(calls, version=1)
    s = passel.Session(pipeline(p), PassContext(opt_level=3))
    s.load(mod)
    s.run()
    calls.clear()
    p.version = 2
    run = s.run()
    assert len(calls) == 4
    assert run.recomputed() == mod.names()
    calls.clear()
    assert s.run().recomputed() == [] and calls == []


def test_a_pass_without_a_version_reruns_every_time_with_a_warning():
    mod = chain(3)
    calls: List[str] = []
    s = passel.Session(pipeline(counting_pass(calls, version=None)), PassContext(opt_level=3))
    s.set_source(mod.script())
    with pytest.warns(RuntimeWarning, match="declares no version"):
        s.run()
    for _ in range(2):
        calls.clear()
        run = s.run()
        assert len(calls) == 3 and run.recomputed() == mod.names()


def test_session_pass_errors_and_instruments_are_reported():
    bad = transform.function_pass(lambda f, m, c: 1 / 0, opt_level=0, name="Div", version=1)
    s = passel.Session(Sequential([bad]), PassContext())
    s.load(chain(2))
    with pytest.raises(ZeroDivisionError) as e:
        s.run()
    assert e.value.__notes__ == ["passel: in pass Div on function @g0"]
    with pytest.raises(passel.PassError, match="instruments"):
        passel.Session(Sequential([bad]), PassContext(instruments=[passel.instrument.PassTimingInstrument()]))


def test_session_accepts_pipeline_text():
    s = passel.Session("FoldConstant,DeadCodeElimination", PassContext(opt_level=3))
    s.load(chain(2))
    assert "tanh" not in s.run().module.script()
