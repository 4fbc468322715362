"""Passes written in Python: both decorator forms, the function-pass contract, Python passes
mixed with Rust passes under 1 and 2 threads, errors with tracebacks, Ctrl-C, and IR
access (walking bindings, ExprMutator, FunctionBuilder, the interpreter)."""

from __future__ import annotations

import threading
from typing import List

import numpy as np
import pytest

import passel
from passel import ir, transform
from passel.instrument import PassInstrument, PassTimingInstrument
from passel.transform import PassContext, Sequential

from conftest import chain


# Both forms of both decorators


def test_function_pass_function_form(small):
    seen: List[str] = []

    @transform.function_pass(opt_level=1)
    def count(func, mod, ctx):
        seen.append(str(len(func.bindings)))
        assert isinstance(mod, ir.Module) and isinstance(ctx, PassContext)
        return func

    assert isinstance(count, transform.FunctionPass)
    assert (count.info.name, count.info.opt_level, count.info.required) == ("count", 1, [])
    out = count(small)
    # f2 is marked SkipOptimization: a function pass leaves it alone.
    assert seen == ["3", "3"]
    assert out.same_as(small)


def test_function_pass_class_form_with_constructor_arguments(small):
    @transform.function_pass(opt_level=2, name="Renamer")
    class Replace:
        """Replaces every function by ``new``."""

        def __init__(self, new: ir.Function):
            self.new = new

        def transform_function(self, func, mod, ctx):
            return self.new

    new = small["f2"]
    p = Replace(new)
    assert isinstance(p, transform.FunctionPass) and p.info.name == "Renamer"
    assert p.new is new and type(p).__doc__.startswith("Replaces")
    out = p(small)
    assert out["f0"].same_as(new) and out["f1"].same_as(new)


def test_module_pass_both_forms_may_add_and_remove_functions(small):
    @transform.module_pass(opt_level=0)
    def drop_f0(mod, ctx):
        return mod.without_function("f0")

    @transform.module_pass(opt_level=0, required=["InferType"])
    class Copier:
        def __init__(self, name: str):
            self.target = name

        def transform_module(self, mod, ctx):
            return mod.with_function(self.target, mod["f1"])

    assert drop_f0(small).names() == ["f1", "f2"]
    c = Copier("extra")
    assert isinstance(c, transform.ModulePass) and c.info.required == ["InferType"]
    assert c(small).names() == ["f0", "f1", "f2", "extra"]


def test_decorators_require_an_opt_level_and_a_transform_method():
    with pytest.raises(ValueError, match="opt_level"):
        transform.function_pass(lambda f, m, c: f)
    with pytest.raises(TypeError, match="transform_function"):

        @transform.function_pass(opt_level=0)
        class NoMethod:
            pass


def test_a_function_pass_must_return_a_function(small):
    bad = transform.function_pass(lambda f, m, c: 42, opt_level=0, name="Bad")
    with pytest.raises(passel.PassError, match="must return a passel.ir.Function, got int") as e:
        bad(small)
    assert isinstance(e.value, TypeError)


# Errors carry the Python traceback


def test_exception_in_a_pass_body_names_pass_and_function_with_traceback(small):
    @transform.function_pass(opt_level=0)
    def explode(func, mod, ctx):
        if len(func.bindings) == 3 and func.bindings[1][1].op == "tanh":
            raise KeyError("no such thing")
        return func

    # As in TVM, the exception itself propagates: type, message and traceback.
    with pytest.raises(KeyError) as e:
        explode(small)
    assert e.value.args == ("no such thing",)
    assert not isinstance(e.value, passel.PassError)
    assert e.value.__notes__ == ["passel: in pass explode on function @f1"]
    assert any(entry.name == "explode" for entry in e.traceback)
    # The engine stays usable.
    assert transform.get_pass("FoldConstant")(small) is not None


def test_keyboard_interrupt_cancels_the_run_cleanly(small):
    calls: List[str] = []
    log: List[str] = []

    class Exits(PassInstrument):
        def exit_pass_ctx(self):
            log.append("exit")

    @transform.function_pass(opt_level=0)
    def interrupted(func, mod, ctx):
        calls.append("call")
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        with PassContext(num_threads=1, instruments=[Exits()]):
            interrupted(small)
    # Cancelled after the first call; the context was left, and the next run works.
    assert calls == ["call"] and log == ["exit"]
    ok = transform.function_pass(lambda f, m, c: f, opt_level=0, name="ok")
    assert ok(small).same_as(small)


# Mixed with Rust passes, serial and parallel


def rewrite_negative(func, mod, ctx):
    """negative(x) -> multiply(x, -1.0)."""

    class M(ir.ExprMutator):
        def visit_call_(self, call):
            if call.op == "negative":
                x = self.visit_expr(call.args[0])
                return self.builder.call("multiply", [x, self.builder.const(np.float32(-1.0))], {}, call.type)
            return super().visit_call_(call)

    return M().visit_function(func)


def mixed_pipeline(calls: List[str]) -> Sequential:
    @transform.function_pass(opt_level=0, name="RewriteNegative")
    def rewrite(func, mod, ctx):
        calls.append(threading.current_thread().name)
        return rewrite_negative(func, mod, ctx)

    return Sequential(
        [
            transform.get_pass("FoldConstant"),
            rewrite,
            transform.get_pass("EliminateCommonSubexpr"),
            transform.get_pass("DeadCodeElimination"),
        ]
    )


@pytest.mark.parametrize("instrumented", [False, True])
def test_python_pass_mixed_with_rust_passes_gives_the_same_output_with_1_and_2_threads(instrumented):
    mod = chain(40)
    outs = []
    for threads in (1, 2):
        calls: List[str] = []
        insts = [PassTimingInstrument()] if instrumented else []
        with PassContext(opt_level=3, num_threads=threads, instruments=insts):
            outs.append(mixed_pipeline(calls)(mod).script())
        # The body ran exactly once per function, every time on the calling thread (a Python
        # function pass is a stage of its own there, whatever num_threads is).
        assert calls == [threading.current_thread().name] * 40
    assert outs[0] == outs[1]
    assert "negative" not in outs[0] and "multiply(%x, -1.0f)" in outs[0]


def test_python_pass_keeps_the_meaning_of_the_function():
    mod = chain(3)
    with PassContext(opt_level=3):
        out = mixed_pipeline([])(mod)
    x = np.array([1.0, -2.0, 0.5, 3.0], dtype=np.float32)
    for name in mod.names():
        np.testing.assert_allclose(passel.eval(out, x, entry=name), passel.eval(mod, x, entry=name), rtol=1e-6)


def test_a_vetoed_python_pass_body_never_runs(small):
    """Under 1 and 2 threads, in a stage of function passes, a pass vetoed by should_run
    never has its body called (no speculative run)."""
    for threads in (1, 2):
        calls: List[str] = []

        @transform.function_pass(opt_level=0, name="Vetoed")
        def vetoed(func, mod, ctx):
            calls.append("ran")
            return func

        class Veto(PassInstrument):
            def should_run(self, mod, info):
                return info.name != "Vetoed"

        seq = Sequential([transform.get_pass("FoldConstant"), vetoed, transform.get_pass("EliminateCommonSubexpr")])
        with PassContext(opt_level=3, num_threads=threads, instruments=[Veto()]):
            out = seq(chain(8))
        assert calls == []
        assert "multiply(3.0f, 0.5f)" not in out.script()


# IR access


def test_walk_bindings_operators_arguments_attributes_and_types():
    mod = ir.Module.parse(
        """
def @main(%x: Tensor[(2, 3), f32]) -> Tensor[(3), f32] {
  let %s = sum(%x, axis=[0]);
  let %c = cast(%s, dtype=f32);
  %c
}
"""
    )
    func = mod["main"]
    assert [p.name for p in func.params] == ["x"]
    assert func.params[0].type == ir.TensorType([2, 3], "float32")
    assert str(func.ret_type) == "Tensor[(3,), f32]"
    (v1, e1), (v2, e2) = func.bindings
    assert (v1.name, e1.kind, e1.op, e1.attrs) == ("s", "call", "sum", {"axis": [0]})
    assert e1.args == [func.params[0]]
    assert e2.attrs == {"dtype": "float32"}
    assert func.body.result == v2
    typed = transform.get_pass("InferType")(mod)["main"]
    assert typed.bindings[0][1].type.shape == [3]


def test_function_builder_builds_a_verified_function():
    b = ir.FunctionBuilder()
    x = b.param("x", ir.TensorType([4], "float32"))
    y = b.let("y", b.call("add", [x, b.const(np.ones(4, dtype=np.float32))]))
    z = b.let("z", b.call("multiply", [y, y]))
    func = b.finish(z, ret_type=ir.TensorType([4], "float32"))
    mod = ir.Module({"main": func})
    out = passel.eval(mod, np.arange(4, dtype=np.float32))
    np.testing.assert_allclose(out, (np.arange(4) + 1.0) ** 2)
    assert "add(%x, tensor" in mod.script()
    with pytest.raises(ValueError, match="unknown operator"):
        ir.FunctionBuilder().call("ad", [])
    with pytest.raises(ValueError, match="finished"):
        b.finish(z)


def test_expr_mutator_returns_the_same_function_when_nothing_changes(small):
    f = small["f1"]
    assert ir.ExprMutator().visit_function(f).same_as(f)


def test_structural_equal_and_hash(small):
    again = ir.Module.parse(small.script())
    assert ir.structural_equal(small, again) and ir.structural_hash(small) == ir.structural_hash(again)
    assert not ir.structural_equal(small, small.without_function("f0"))


def test_eval_errors_are_pass_errors(small):
    with pytest.raises(passel.PassError):
        passel.eval(small, np.zeros(3, dtype=np.float32), entry="f0")
    with pytest.raises(KeyError):
        passel.eval(small, entry="nope")


def test_parse_errors_give_line_and_column():
    with pytest.raises(passel.ParseError, match=r"2:\d+"):
        ir.Module.parse("def @f(%x: Tensor[(4), f32]) {\n  let %a = ;\n  %a\n}")


def test_python_passes_may_call_rust_passes_inside_without_deadlock():
    """A Python module pass (calling thread) and a Python function pass (a worker under 2
    threads) each run a Rust pass on their own; the GIL is released around the inner runs."""
    fold = transform.get_pass("FoldConstant")

    @transform.module_pass(opt_level=0)
    def fold_inside(mod, ctx):
        return fold(mod)

    @transform.function_pass(opt_level=0)
    def fold_one(func, mod, ctx):
        return fold(ir.Module({"f": func}))["f"]

    mod = chain(16)
    outs = []
    for threads in (1, 2):
        with PassContext(num_threads=threads):
            outs.append((fold_inside(mod).script(), fold_one(mod).script()))
    assert outs[0] == outs[1]
    assert outs[0][0] == outs[0][1] and "multiply(3.0f, 0.5f)" not in outs[0][0]
