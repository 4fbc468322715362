"""The README's Python tour runs as written: its ```python blocks are extracted from
README.md (so the two cannot drift) and executed."""

from __future__ import annotations

import pathlib
import re

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def tour_code() -> str:
    text = README.read_text()
    start = text.index("## Python tour")
    end = text.index("\n## ", start + 1)
    blocks = re.findall(r"```python\n(.*?)```", text[start:end], flags=re.S)
    assert blocks, "the README's Python tour has no python block"
    return "\n".join(blocks)


def test_readme_python_tour_runs_as_written(capsys):
    exec(compile(tour_code(), str(README), "exec"), {"__name__": "readme_tour"})
    out = capsys.readouterr().out
    assert "running cancel_double_negation" in out
    assert "Total: " in out
    assert "multiply(%x, 2.0f)" in out
