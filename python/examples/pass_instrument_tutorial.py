"""TVM's pass-instrument tutorial (``docs/how_to/.../use_pass_instrument.py``) ported to passel.

The tutorial's pieces: the timing instrument; a custom instrument counting the calls of each
operator before and after every pass (its ``RelayCallNodeDiffer``, here an ``ExprVisitor``);
an instrument vetoing a pass with ``should_run`` (its ``SkipPass``); and an instrument that
raises, caught by the caller as the very exception it raised. ``main()`` returns what each step
saw; ``tests/test_examples.py`` checks it.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

from passel import ir, transform
from passel.instrument import PassTimingInstrument, pass_instrument
from passel.transform import PassContext, PassInfo

MODEL = """
def @main(%x: Tensor[(1, 4, 8, 8), f32], %w: Tensor[(4, 4, 1, 1), f32], %s: Tensor[(4, 1, 1), f32]) -> Tensor[(1, 4, 8, 8), f32] {
  let %c = conv2d(%x, %w);
  let %m = multiply(%c, %s);
  let %k = add(1.0f, 2.0f);
  let %r = add(%m, %k);
  relu(%r)
}
"""


class CallCounter(ir.ExprVisitor):
    """Counts the calls of each operator in a function (nested functions included)."""

    def __init__(self) -> None:
        self.counts: Dict[str, int] = {}

    def visit_call_(self, call: ir.Expr) -> None:
        name = call.op or "apply"
        self.counts[name] = self.counts.get(name, 0) + 1


def count_calls(mod: ir.Module) -> Dict[str, int]:
    total: Dict[str, int] = {}
    for func in mod.functions.values():
        counter = CallCounter()
        counter.visit_function(func)
        for name, n in counter.counts.items():
            total[name] = total.get(name, 0) + n
    return total


@pass_instrument
class CallNodeDiffer:
    """The tutorial's ``RelayCallNodeDiffer``: operator call counts that changed per pass."""

    def __init__(self) -> None:
        self._before: List[Dict[str, int]] = []
        self.diffs: List[Tuple[str, Dict[str, int]]] = []

    def run_before_pass(self, mod: ir.Module, info: PassInfo) -> None:
        self._before.append(count_calls(mod))

    def run_after_pass(self, mod: ir.Module, info: PassInfo) -> None:
        before, after = self._before.pop(), count_calls(mod)
        diff = {k: after.get(k, 0) - before.get(k, 0) for k in sorted(set(before) | set(after))}
        diff = {k: v for k, v in diff.items() if v}
        if diff:
            self.diffs.append((info.name, diff))


@pass_instrument
class SkipPass:
    """The tutorial's ``SkipPass``: vetoes one pass by name."""

    def __init__(self, skip_pass_name: str) -> None:
        self.skip_pass_name = skip_pass_name

    def should_run(self, mod: ir.Module, info: PassInfo) -> bool:
        return info.name != self.skip_pass_name


@pass_instrument
class RaiseAfterFoldConstant:
    def run_after_pass(self, mod: ir.Module, info: PassInfo) -> None:
        if info.name == "FoldConstant":
            raise ValueError("stop after FoldConstant")


def main() -> Dict[str, object]:
    mod = ir.Module.parse(MODEL)
    seen: Dict[str, object] = {}
    pipeline = transform.Sequential(
        [
            transform.get_pass("FoldConstant"),
            transform.get_pass("FoldScaleAxis"),
            transform.get_pass("FuseOps"),
        ]
    )

    timing = PassTimingInstrument()
    with PassContext(opt_level=3, instruments=[timing]):
        pipeline(mod)
        report = timing.render()
    seen["timed"] = [line.split(":")[0].strip() for line in report.splitlines()]

    differ = CallNodeDiffer()
    with PassContext(opt_level=3, instruments=[differ]):
        pipeline(mod)
    seen["diffs"] = differ.diffs

    with PassContext(opt_level=3, instruments=[SkipPass("FuseOps")]):
        out = pipeline(mod)
    seen["fused_when_skipped"] = "Primitive" in out.script()

    try:
        with PassContext(opt_level=3, instruments=[RaiseAfterFoldConstant()]):
            pipeline(mod)
    except ValueError as err:  # the instrument's own exception, as in TVM
        seen["caught"] = str(err)
    return seen


if __name__ == "__main__":
    for key, value in main().items():
        print(f"{key}: {value}")
