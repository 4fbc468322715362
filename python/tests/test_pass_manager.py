"""The pass manager's rules (PassContext scope, config, which passes a Sequential runs,
required passes, the registry, pipelines) through the Python API. Rule numbers refer to
docs/pass-semantics.md."""

from __future__ import annotations

import threading
from typing import List

import pytest

import passel
from passel import ir, transform
from passel.instrument import pass_instrument
from passel.transform import PassContext, Sequential


def recorder(log: List[str]):
    @pass_instrument
    class Rec:
        def run_before_pass(self, mod, info):
            log.append(info.name)

    return Rec()


@transform.module_pass(opt_level=0, name="Ident0")
def ident0(mod, ctx):
    return mod


def level_pass(name: str, level: int, required=None):
    return transform.module_pass(lambda mod, ctx: mod, opt_level=level, name=name, required=required)


# Rules 1, 2: fields, per-thread stacks and defaults


def test_context_defaults_and_fields():
    ctx = PassContext()
    assert ctx.opt_level == 2
    assert ctx.required_pass == [] and ctx.disabled_pass == [] and ctx.instruments == []
    ctx = PassContext(opt_level=3, required_pass=["A"], disabled_pass=["B"], num_threads=1)
    assert (ctx.opt_level, ctx.required_pass, ctx.disabled_pass, ctx.num_threads) == (3, ["A"], ["B"], 1)


def test_current_is_innermost_entered_context_and_default_outside():
    outer, inner = PassContext(opt_level=1), PassContext(opt_level=3)
    default = PassContext.current()
    with outer:
        assert PassContext.current() is outer
        with inner as entered:
            assert entered is inner
            assert PassContext.current() is inner
        assert PassContext.current() is outer
    assert PassContext.current() == default
    assert PassContext.current().opt_level == 2


def test_another_thread_sees_its_default_while_this_thread_is_in_a_scope():
    seen = []
    with PassContext(opt_level=3):
        t = threading.Thread(target=lambda: seen.append(PassContext.current().opt_level))
        t.start()
        t.join()
    assert seen == [2]


def test_exiting_a_context_that_is_not_innermost_is_an_error():
    a, b = PassContext(), PassContext()
    a.__enter__()
    b.__enter__()
    with pytest.raises(passel.PassError):
        a.__exit__(None, None, None)
    b.__exit__(None, None, None)
    a.__exit__(None, None, None)
    assert PassContext.current() != a


# Rules 7-10: config


def test_list_configs_has_typed_keys():
    configs = PassContext.list_configs()
    assert configs["testing.immutable_module"]["type"] == "bool"
    assert configs["testing.verify_each"]["type"] == "bool"
    assert list(configs) == sorted(configs)


def test_unknown_config_key_names_it_and_the_valid_keys():
    with pytest.raises(passel.PassError) as e:
        PassContext(config={"testing.imutable_module": True})
    assert "testing.imutable_module" in str(e.value)
    assert "testing.immutable_module" in str(e.value)


def test_config_value_checks():
    with pytest.raises(passel.PassError, match="testing.immutable_module"):
        PassContext(config={"testing.immutable_module": None})
    with pytest.raises(passel.PassError):
        PassContext(config={"testing.immutable_module": "yes"})
    # bool and int accept each other.
    assert PassContext(config={"testing.immutable_module": 1}).get_config("testing.immutable_module") is True
    with pytest.raises(TypeError):
        PassContext(config={"testing.immutable_module": [1]})


def test_get_config_returns_the_default_when_absent():
    ctx = PassContext()
    assert ctx.get_config("testing.immutable_module", "absent") == "absent"
    assert ctx.get_config("testing.immutable_module") is None


# Rule 11: testing.immutable_module


def test_immutable_module_allows_a_pass_that_returns_a_new_module(small):
    """TVM's check (``Pass::AssertImmutableModule``) hashes the pass's *input* before and after
    the call: a pass that returns a changed new module is fine, only one that changed its input
    in place fails. Modules are copy-on-write values, so a Python pass cannot change its input;
    the input is unchanged and the result is the pass's new module."""
    drops = transform.module_pass(lambda mod, ctx: mod.without_function("f0"), opt_level=0, name="Drop")
    with PassContext(config={"testing.immutable_module": True}):
        out = drops(small)
        assert ident0(small).same_as(small)
    assert out.names() == ["f1", "f2"]
    assert small.names() == ["f0", "f1", "f2"]


# Rules 12-18: which passes run


def test_sequential_filters_by_opt_level_disabled_beats_required():
    log: List[str] = []
    seq = Sequential([level_pass("L1", 1), level_pass("L3", 3), level_pass("L0", 0)])
    mod = ir.Module.parse(passel_small())
    with PassContext(opt_level=2, instruments=[recorder(log)]):
        seq(mod)
    assert log == ["sequential", "L1", "L0"]
    log.clear()
    with PassContext(opt_level=0, required_pass=["L3", "L1"], disabled_pass=["L1"], instruments=[recorder(log)]):
        seq(mod)
    assert log == ["sequential", "L3", "L0"]


def passel_small() -> str:
    from conftest import SMALL

    return SMALL


def test_calling_a_pass_directly_always_runs_it(small):
    log: List[str] = []
    with PassContext(opt_level=0, disabled_pass=["L3"], instruments=[recorder(log)]):
        level_pass("L3", 3)(small)
    assert log == ["L3"]


def test_required_passes_run_first_not_deduplicated_and_not_filtered(small):
    log: List[str] = []
    a = level_pass("A", 0, required=["InferType"])
    b = level_pass("B", 0, required=["InferType"])
    skipped = level_pass("C", 3, required=["FoldConstant"])
    with PassContext(opt_level=0, disabled_pass=["InferType"], instruments=[recorder(log)]):
        Sequential([a, b, skipped])(small)
    assert log == ["sequential", "InferType", "A", "InferType", "B"]


def test_a_sequentials_own_required_list_is_ignored_when_called_directly(small):
    log: List[str] = []
    seq = Sequential([ident0], required=["FoldConstant"], name="S")
    with PassContext(instruments=[recorder(log)]):
        seq(small)
    assert log == ["S", "Ident0"]


def test_unknown_required_pass_is_an_error_naming_it(small):
    with pytest.raises(passel.PassError, match="FoldConstnt"):
        Sequential([level_pass("A", 0, required=["FoldConstnt"])])(small)


def test_sequential_defaults_and_nesting(small):
    seq = Sequential([])
    assert (seq.info.name, seq.info.opt_level) == ("sequential", 0)
    log: List[str] = []
    inner = Sequential([level_pass("X", 3), level_pass("Y", 1)], opt_level=1, name="inner")
    outer = Sequential([inner, level_pass("Z", 2)], name="outer")
    with PassContext(opt_level=1, instruments=[recorder(log)]):
        outer(small)
    assert log == ["outer", "inner", "Y"]
    log.clear()
    with PassContext(opt_level=0, instruments=[recorder(log)]):
        outer(small)
    assert log == ["outer"]


# Registry, pipelines, PrintIR


def test_get_pass_and_registry_listing(small):
    fold = transform.get_pass("FoldConstant")
    assert isinstance(fold, transform.FunctionPass)
    assert fold.info.name == "FoldConstant"
    assert transform.get_pass("fold-constant").info.name == "FoldConstant"
    names = [p["name"] for p in transform.list_passes()]
    assert "DeadCodeElimination" in names and names == sorted(names)
    with pytest.raises(passel.PassError, match="did you mean `FoldConstant`"):
        transform.get_pass("FoldConstnt")
    out = fold(small)
    assert "multiply(2.0f, 0.5f)" not in out.script()


def test_textual_pipelines_parse_print_and_run(small):
    seq = transform.pipeline("FoldConstant,[EliminateCommonSubexpr,DeadCodeElimination]")
    assert seq.pipeline_text() == "FoldConstant,[EliminateCommonSubexpr,DeadCodeElimination]"
    assert [p.info.name for p in seq.passes][0] == "FoldConstant"
    with PassContext(opt_level=3):
        out = seq(small)
    assert "tanh" not in out["f1"].script()
    with pytest.raises(passel.PassError, match="pipeline error"):
        transform.pipeline("FoldConstant,[")


def test_print_ir_prints_header_and_module_and_returns_it(small, capsys):
    p = transform.PrintIR("after parse")
    assert p.info.opt_level == 0 and p.info.name == "PrintIR"
    out = p(small)
    assert out.same_as(small)
    err = capsys.readouterr().err
    assert err.startswith("PrintIR(after parse):\n")
    assert "def @f0" in err


def test_help_shows_docstrings():
    for obj in [transform.PassContext, transform.Sequential, transform.function_pass, passel.Session,
                passel.instrument.PassTimingInstrument, ir.Module, ir.ExprMutator, passel.eval]:
        assert obj.__doc__ and len(obj.__doc__) > 40, obj
    assert "GIL" in transform.__doc__


# Issue #26 items 15, 20, 21, as a TVM user meets them


def test_integer_config_keys_list_as_int_with_their_range_in_the_doc():
    configs = PassContext.list_configs()
    for key in ["relay.FuseOps.max_depth", "relay.FoldConstant.max_bytes", "relay.Inline.max_growth"]:
        assert configs[key]["type"] == "int", key
        assert configs[key]["doc"].endswith("(at least 0)"), key
    with pytest.raises(passel.PassError, match="expects an int of at least 0, got -1"):
        PassContext(config={"relay.FoldConstant.max_bytes": -1})
    with pytest.raises(passel.PassError, match="expects int, got bool"):
        PassContext(config={"relay.FuseOps.max_depth": True})
    ctx = PassContext(config={"relay.FuseOps.max_depth": 3})
    assert ctx.get_config("relay.FuseOps.max_depth") == 3


def test_python_pass_bodies_run_between_their_own_hooks_under_any_instrument():
    from conftest import chain

    log: List[str] = []

    def body(name):
        def f(func, mod, ctx):
            log.append(f"body {name}")
            return func

        return transform.function_pass(f, opt_level=0, name=name)

    @pass_instrument
    class Hooks:
        def should_run(self, mod, info):
            log.append(f"should_run {info.name}")
            return True

        def run_before_pass(self, mod, info):
            log.append(f"before {info.name}")

        def run_after_pass(self, mod, info):
            log.append(f"after {info.name}")

    functions = 3
    with PassContext(opt_level=0, instruments=[Hooks(), passel.instrument.PassTimingInstrument()]):
        Sequential([body("T1"), body("T2")], name="S")(chain(functions))
    expected = ["should_run S", "before S"]
    for p in ["T1", "T2"]:
        expected += [f"should_run {p}", f"before {p}"] + [f"body {p}"] * functions + [f"after {p}"]
    expected += ["after S"]
    assert log == expected
