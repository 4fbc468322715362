"""``Session(cache=...)``: a Session in a new process reuses the results an earlier process
left in the persistent cache, recomputes only what changed, and gives the output of a run
without a cache."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict

import pytest

import passel
from passel import transform
from passel.transform import PassContext

from conftest import chain

# Runs a Session with the cache given on the command line over the module text on stdin and
# prints, as JSON, what the function stages recomputed (a name per stage that recomputed it),
# the cache's counts and the output.
SCRIPT = """
import json, sys
import passel
from passel.transform import PassContext
s = passel.Session("FoldConstant,EliminateCommonSubexpr,DeadCodeElimination", PassContext(opt_level=3, num_threads=2),
                   cache=sys.argv[1])
s.set_source(sys.stdin.read())
run = s.run()
print(json.dumps({
    "recomputed": [n for st in run.stages if not st.is_module_pass for n in st.recomputed],
    "counts": s.cache_counts(),
    "output": run.module.script(),
}))
"""


def run_in_new_process(cache: Path, text: str) -> Dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(cache)], input=text, capture_output=True, text=True, check=True
    )
    result: Dict[str, Any] = json.loads(out.stdout)
    return result


def cold_output(text: str) -> str:
    s = passel.Session("FoldConstant,EliminateCommonSubexpr,DeadCodeElimination", PassContext(opt_level=3))
    s.set_source(text)
    return s.run().module.script()


def test_a_session_in_a_new_process_reuses_the_cache(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    text = chain(8).script()
    first = run_in_new_process(cache, text)
    assert set(first["recomputed"]) == {f"g{i}" for i in range(8)}
    assert first["output"] == cold_output(text)
    assert first["counts"][3] > 0  # bytes written

    second = run_in_new_process(cache, text)
    assert second["recomputed"] == []
    assert second["output"] == first["output"]
    hits, misses, rejected, _ = second["counts"]
    assert hits > 0 and misses == 0 and rejected == 0

    # A body edit of one function: a new process recomputes that one only.
    edited = text.replace("multiply(3.0f, 0.5f)", "multiply(3.0f, 0.25f)", 1)
    assert edited != text
    third = run_in_new_process(cache, edited)
    assert set(third["recomputed"]) == {"g3"}
    assert third["output"] == cold_output(edited)


def test_a_path_object_names_the_cache_and_a_python_pass_is_not_stored(tmp_path: Path) -> None:
    calls = []

    @transform.function_pass(opt_level=0, name="CountCalls", version=1)
    def count(func, mod, ctx):  # type: ignore[no-untyped-def]
        calls.append(1)
        return func

    mod = chain(3)
    pipeline = transform.Sequential([transform.get_pass("FoldConstant"), count])
    for _ in range(2):
        s = passel.Session(pipeline, PassContext(opt_level=3), cache=tmp_path / "c")
        s.load(mod)
        s.run()
    # The Python pass ran in both sessions: its results never come from the cache.
    assert len(calls) == 6
    assert os.path.isdir(tmp_path / "c")


def test_a_python_pass_named_like_a_registered_pass_is_refused_with_a_cache(tmp_path: Path) -> None:
    @transform.function_pass(opt_level=0, name="FoldConstant", version=1)
    def fake(func, mod, ctx):  # type: ignore[no-untyped-def]
        return func

    with pytest.raises(ValueError, match="registered pass"):
        passel.Session(transform.Sequential([fake]), PassContext(opt_level=3), cache=tmp_path / "c")


def test_an_empty_cache_location_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Not taken as the current directory: nothing may be written there.
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="empty cache location"):
        passel.Session("FoldConstant", PassContext(opt_level=3), cache="")
    assert os.listdir(tmp_path) == []
