"""Shared fixtures: small modules written as text, and a recorder for instrument events."""

from __future__ import annotations

from typing import List

import pytest

from passel import ir

SMALL = """
def @f0(%x: Tensor[(4), f32]) -> Tensor[(4), f32] {
  let %a = negative(%x);
  let %b = multiply(2.0f, 0.5f);
  let %c = add(%a, %b);
  %c
}

def @f1(%x: Tensor[(4), f32]) -> Tensor[(4), f32] {
  let %a = relu(%x);
  let %dead = tanh(%a);
  let %b = negative(%a);
  %b
}

#[SkipOptimization]
def @f2(%x: Tensor[(4), f32]) -> Tensor[(4), f32] {
  let %a = negative(%x);
  %a
}
"""


def chain(n: int) -> ir.Module:
    """A module of ``n`` small functions with foldable constants, common subexpressions and
    dead code (what the standard passes have work on)."""
    parts = []
    for i in range(n):
        parts.append(
            f"""def @g{i}(%x: Tensor[(4), f32]) -> Tensor[(4), f32] {{
  let %a = negative(%x);
  let %k = multiply({i % 7}.0f, 0.5f);
  let %b = add(%a, %k);
  let %c = multiply(%b, 1.5f);
  let %d = multiply(%b, 1.5f);
  let %dead = tanh(%c);
  let %e = add(%c, %d);
  %e
}}
"""
        )
    return ir.Module.parse("\n".join(parts))


@pytest.fixture
def small() -> ir.Module:
    return ir.Module.parse(SMALL)


class Events:
    """Collects ``"<who> <event>"`` strings in call order."""

    def __init__(self) -> None:
        self.log: List[str] = []

    def add(self, entry: str) -> None:
        self.log.append(entry)


@pytest.fixture
def events() -> Events:
    return Events()
