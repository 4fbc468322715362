"""A typed use of the passel API, checked by mypy in CI (python/ci.sh) so the stubs stay true."""

from __future__ import annotations

from typing import List

import passel
from passel import ir, transform
from passel.instrument import PassTimingInstrument, pass_instrument
from passel.transform import PassContext, PassInfo


@transform.function_pass(opt_level=1, version=1)
def count_calls(func: ir.Function, mod: ir.Module, ctx: PassContext) -> ir.Function:
    n: int = sum(1 for _var, value in func.bindings if value.kind == "call")
    assert n >= 0
    return func


@pass_instrument
class Names:
    def __init__(self) -> None:
        self.seen: List[str] = []

    def run_before_pass(self, mod: ir.Module, info: PassInfo) -> None:
        self.seen.append(info.name)


def main() -> str:
    mod: ir.Module = ir.Module.parse("def @main(%x: Tensor[(4), f32]) -> Tensor[(4), f32] {\n  negative(%x)\n}")
    seq = transform.Sequential([transform.get_pass("FoldConstant"), count_calls], name="tour")
    timing = PassTimingInstrument()
    names = Names()
    with PassContext(opt_level=3, instruments=[timing, names]):
        out: ir.Module = seq(mod)
        report: str = timing.render()
    session = passel.Session(seq, PassContext(opt_level=3))
    session.load(out)
    recomputed: List[str] = session.run().recomputed()
    func: ir.Function = out["main"]
    ty = func.ret_type
    shape = ty.shape if ty is not None else None
    return f"{report}{recomputed}{shape}{names.seen}"


if __name__ == "__main__":
    print(main())
