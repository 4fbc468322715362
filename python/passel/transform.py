"""Passes and the pass context, with TVM's names and semantics (``tvm.ir.transform``).

- ``PassContext(opt_level=2, required_pass=None, disabled_pass=None, instruments=None,
  config=None, num_threads=None)``: a context manager; ``PassContext.current()``,
  ``PassContext.list_configs()``.
- ``Pass``: ``.info`` and ``pass_(mod)`` (runs it under the current context; calling a pass
  directly always runs it, only a ``Sequential`` consults opt levels).
- ``Sequential(passes, opt_level=0, name="sequential", required=None)``.
- ``module_pass`` / ``function_pass``: decorators for a function or a class with
  ``transform_module(mod, ctx)`` / ``transform_function(func, mod, ctx)``.
- ``get_pass(name)``, ``list_passes()``, ``PrintIR(header)``, ``pipeline(text)``,
  ``get_pipeline(opt_level)`` (the default pipeline of ``passel run -O<N>``),
  ``LegalizeOps()`` (lowers graph operators to PrimFuncs called with ``call_tir``).
- ``PrimFuncPass`` and ``prim_func_pass``: the loop-level kind and its decorator, also
  exported as ``passel.tir.transform.prim_func_pass`` (TVM's name).

How Python passes run: a Python function pass is called once per function with the GIL held
for that call, on the thread that called the pipeline, one function after the other, whatever
``num_threads`` is; the Rust passes around it keep running in parallel with the GIL released.
Results are merged in module order, so the output is the same as with one thread. An exception raised in a pass body or
an instrument propagates as itself, as in TVM (type, message and traceback), with a note
naming the pass and function or the instrument hook; passel's own errors are
``passel.PassError``, as ``PassValueError`` / ``PassTypeError`` / ``PassKeyError`` (also
``ValueError`` / ``TypeError`` / ``KeyError``) where one fits. ``KeyboardInterrupt`` cancels
the run and is re-raised.

Incremental sessions: give a Python pass a ``version`` (any comparable value); a
``passel.Session`` re-runs it only on functions whose inputs changed, or everywhere when its
version changed. A pass without a version is re-run on every session run (with a warning).
"""

from __future__ import annotations

import functools
import inspect
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Sequence, TypeVar, Union, overload

from . import _passel
from ._passel import PassContext, PassError, PassInfo
from .ir import Function, Module

__all__ = [
    "PassInfo",
    "PassContext",
    "PassError",
    "Pass",
    "ModulePass",
    "FunctionPass",
    "Sequential",
    "module_pass",
    "function_pass",
    "get_pass",
    "list_passes",
    "PrintIR",
    "pipeline",
    "get_pipeline",
    "PrimFuncPass",
    "prim_func_pass",
    "LegalizeOps",
]


class Pass:
    """A module-to-module transformation with a ``PassInfo`` (TVM's ``Pass``).

    ``pass_(mod)`` runs it under ``PassContext.current()`` with its instruments; ``info``
    gives its name, opt level and required passes. ``version`` (None unless declared) is
    what ``passel.Session`` compares to decide whether a Python pass's code changed.
    """

    version: Any

    def __init__(self, handle: _passel.PassHandle, version: Any = None) -> None:
        self._handle = handle
        self.version = version

    @property
    def info(self) -> PassInfo:
        """The pass's ``PassInfo`` (``name``, ``opt_level``, ``required``)."""
        return self._handle.info

    def __call__(self, mod: Module, ctx: Optional[PassContext] = None) -> Module:
        """Runs the pass on ``mod`` (under ``ctx``, default the current context)."""
        return self._handle.run(mod, ctx)

    def _refresh(self) -> None:
        """Gives the pass a new engine identity (sessions then treat it as changed)."""

    def __repr__(self) -> str:
        i = self.info
        return f"<{type(self).__name__} {i.name} opt_level={i.opt_level} required={i.required}>"


class ModulePass(Pass):
    """A pass over the whole module; it may add and remove functions."""


class FunctionPass(Pass):
    """A pass run on each function on its own (functions marked ``SkipOptimization`` are
    left alone); it cannot add or remove functions."""


class PrimFuncPass(Pass):
    """A pass run on each PrimFunc on its own (TVM's ``tir.transform.PrimFuncPass``); graph
    functions and PrimFuncs marked ``SkipOptimization`` are left alone. It cannot add or
    remove functions."""


class _PythonPass(Pass):
    """A pass whose body is Python code."""

    def __init__(self, make: Callable[[], _passel.PassHandle], version: Any) -> None:
        super().__init__(make(), version)
        self._make = make

    def _refresh(self) -> None:
        self._handle = self._make()


class _PythonModulePass(_PythonPass, ModulePass):
    pass


class _PythonFunctionPass(_PythonPass, FunctionPass):
    pass


class _PythonPrimFuncPass(_PythonPass, PrimFuncPass):
    pass


class Sequential(Pass):
    """Runs ``passes`` in order (TVM's ``Sequential``): each pass runs if the context enables
    it (not disabled; required, or ``ctx.opt_level >= pass.opt_level``), right after the
    passes its ``required`` list names. Default opt level 0, name ``"sequential"``.

    Function passes that follow each other run as one parallel stage (each function goes
    through all of them in one task).
    """

    def __init__(
        self,
        passes: Optional[Sequence[Pass]] = None,
        opt_level: int = 0,
        name: str = "sequential",
        required: Optional[Sequence[str]] = None,
    ) -> None:
        self.passes: List[Pass] = list(passes or [])
        for p in self.passes:
            if not isinstance(p, Pass):
                raise TypeError(f"Sequential takes passes, got {type(p).__name__}")
        self._opt_level = opt_level
        self._name = name
        self._required = list(required or [])
        super().__init__(self._build())

    def _build(self) -> _passel.PassHandle:
        return _passel.sequential([p._handle for p in self.passes], self._opt_level, self._name, self._required)

    def _refresh(self) -> None:
        self._handle = self._build()

    def pipeline_text(self) -> str:
        """The pipeline as text, e.g. ``FoldConstant,[EliminateCommonSubexpr]``."""
        return self._handle.pipeline_text()


def _wrap_handle(handle: _passel.PassHandle) -> Pass:
    if handle.kind == "sequential":
        children = [_wrap_handle(h) for h in handle.children()]
        info = handle.info
        return Sequential(children, info.opt_level, info.name, info.required)
    if handle.kind == "function":
        return FunctionPass(handle)
    if handle.kind == "prim_func":
        return PrimFuncPass(handle)
    return ModulePass(handle)


def get_pass(name: str) -> Pass:
    """The registered (Rust) pass ``name``, e.g. ``get_pass("FoldConstant")``; the CLI spelling
    ``fold-constant`` works too. Raises ``PassError`` suggesting close names."""
    return _wrap_handle(_passel.registered_pass(name))


def list_passes() -> List[Dict[str, Any]]:
    """The pass registry: one dict per registered pass (``name``, ``kind``, ``opt_level``,
    ``required``), sorted by name."""
    return [
        {"name": n, "kind": k, "opt_level": o, "required": r} for n, k, o, r in _passel.registered_passes()
    ]


def pipeline(text: str) -> Sequential:
    """A ``Sequential`` from a textual pipeline such as
    ``"FoldConstant,[EliminateCommonSubexpr,DeadCodeElimination]"`` (brackets nest)."""
    seq = _wrap_handle(_passel.pipeline(text))
    assert isinstance(seq, Sequential)
    return seq


def get_pipeline(opt_level: int = 2) -> Sequential:
    """The default pipeline at ``opt_level`` (0–3): the passes ``passel run -O<opt_level>``
    runs, in the standard order (Inline, SimplifyInference, FoldConstant, FoldScaleAxis,
    SimplifyExpr, EliminateCommonSubexpr, CanonicalizeBindings, DeadCodeElimination, FuseOps),
    keeping those whose opt level is at most ``opt_level``, as a ``Sequential`` named
    ``default-O<opt_level>``. As in TVM, the context's opt level also selects: run it under
    ``PassContext(opt_level=opt_level)`` (what ``-O`` sets) so no pass in it is skipped.
    ``docs/python.md`` lists each pass's level next to TVM's."""
    if isinstance(opt_level, bool) or not isinstance(opt_level, int):
        raise TypeError(f"opt_level must be an int, got {type(opt_level).__name__}")
    if not 0 <= opt_level <= 3:
        raise ValueError(f"opt_level must be between 0 and 3, got {opt_level}")
    passes = [get_pass(name) for name in _passel.standard_pipeline()]
    return Sequential([p for p in passes if p.info.opt_level <= opt_level], name=f"default-O{opt_level}")


def LegalizeOps() -> Pass:
    """The registered ``LegalizeOps`` (Relax's ``relax.transform.LegalizeOps``): every call of
    an operator with a loop-level definition becomes ``call_tir`` of a PrimFunc (calls with the
    same operator, attributes and types share one). Requires ``InferType``."""
    return get_pass("LegalizeOps")


def PrintIR(header: str = "") -> Pass:
    """A module pass (opt level 0) that prints ``PrintIR(<header>):`` and the module to
    ``sys.stderr`` and returns the module unchanged."""
    return ModulePass(_passel.print_ir(header))


ModuleBody = Callable[[Module, PassContext], Module]
FunctionBody = Callable[[Function, Module, PassContext], Function]
PrimFuncBody = Callable[["_TirPrimFunc", Module, PassContext], "_TirPrimFunc"]
_T = TypeVar("_T")


def _check_level(kind: str, opt_level: Optional[int]) -> int:
    if opt_level is None:
        raise ValueError(f"Please provide opt_level for the {kind} pass.")
    return opt_level


def _class_pass(
    pass_cls: type,
    kind: str,
    name: str,
    opt_level: int,
    required: List[str],
    version: Any,
) -> type:
    method = "transform_module" if kind == "module" else "transform_function"
    if not hasattr(pass_cls, method):
        raise TypeError(f"{pass_cls.__name__} must define {method}")
    base, make = _KINDS[kind]

    class PyPass(base):  # type: ignore[valid-type, misc]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            inst = pass_cls(*args, **kwargs)
            self._inst = inst
            body = _body(kind, getattr(inst, method))
            super().__init__(lambda: make(name, opt_level, required, body), getattr(inst, "version", version))

        def __getattr__(self, attr: str) -> Any:
            # Attributes of the decorated class's instance, as TVM's wrapper gives them.
            if attr == "_inst":
                raise AttributeError(attr)
            return getattr(self._inst, attr)

    functools.update_wrapper(PyPass.__init__, pass_cls.__init__)  # type: ignore[misc]
    PyPass.__name__ = pass_cls.__name__
    PyPass.__qualname__ = pass_cls.__qualname__
    PyPass.__doc__ = pass_cls.__doc__
    PyPass.__module__ = pass_cls.__module__
    return PyPass


_KINDS: Dict[str, Any] = {
    "module": (_PythonModulePass, _passel.py_module_pass),
    "function": (_PythonFunctionPass, _passel.py_function_pass),
    "prim_func": (_PythonPrimFuncPass, _passel.py_prim_func_pass),
}


def _body(kind: str, f: Callable[..., Any]) -> Callable[..., Any]:
    """The callable the engine calls: a PrimFunc pass body gets a ``passel.tir.PrimFunc``
    made from the engine's handle."""
    if kind != "prim_func":
        return f
    from .tir import PrimFunc

    def body(native: Any, mod: Module, ctx: PassContext) -> Any:
        return f(PrimFunc._wrap(native), mod, ctx)

    return body


def _decorator(
    kind: str,
    pass_func: Any,
    opt_level: Optional[int],
    name: Optional[str],
    required: Optional[Sequence[str]],
    version: Any,
) -> Any:
    level = _check_level(kind, opt_level)
    req = list(required or [])

    def create(arg: Any) -> Any:
        pname = name if name else arg.__name__
        if inspect.isclass(arg):
            return _class_pass(arg, kind, pname, level, req, version)
        if not callable(arg):
            raise TypeError(f"{kind}_pass must decorate a function or a class")
        cls, make = _KINDS[kind]
        body = _body(kind, arg)
        return cls(lambda: make(pname, level, req, body), version)

    if pass_func is not None:
        return create(pass_func)
    return create


if TYPE_CHECKING:
    from typing_extensions import ParamSpec, Protocol

    from .tir import PrimFunc as _TirPrimFunc

    _P = ParamSpec("_P")

    class _ModulePassDecorator(Protocol):
        """What ``module_pass(opt_level=…)`` returns: a function becomes a ``ModulePass``; a
        class becomes a class whose instances are ``ModulePass``es (built with the class's
        arguments)."""

        @overload
        def __call__(self, arg: ModuleBody) -> ModulePass: ...

        @overload
        def __call__(self, arg: Callable[_P, Any]) -> Callable[_P, ModulePass]: ...

    class _FunctionPassDecorator(Protocol):
        """``module_pass``'s decorator for function passes."""

        @overload
        def __call__(self, arg: FunctionBody) -> FunctionPass: ...

        @overload
        def __call__(self, arg: Callable[_P, Any]) -> Callable[_P, FunctionPass]: ...

    class _PrimFuncPassDecorator(Protocol):
        """``prim_func_pass``'s decorator."""

        @overload
        def __call__(self, arg: PrimFuncBody) -> PrimFuncPass: ...

        @overload
        def __call__(self, arg: Callable[_P, Any]) -> Callable[_P, PrimFuncPass]: ...


@overload
def module_pass(
    pass_func: None = None,
    opt_level: Optional[int] = None,
    name: Optional[str] = None,
    required: Optional[Sequence[str]] = None,
    traceable: bool = False,
    version: Any = None,
) -> _ModulePassDecorator: ...


@overload
def module_pass(
    pass_func: ModuleBody,
    opt_level: Optional[int] = None,
    name: Optional[str] = None,
    required: Optional[Sequence[str]] = None,
    traceable: bool = False,
    version: Any = None,
) -> ModulePass: ...


def module_pass(
    pass_func: Optional[ModuleBody] = None,
    opt_level: Optional[int] = None,
    name: Optional[str] = None,
    required: Optional[Sequence[str]] = None,
    traceable: bool = False,
    version: Any = None,
) -> Any:
    """Makes a module pass from ``f(mod, ctx) -> Module``, or from a class with
    ``transform_module(self, mod, ctx)`` (then the decorated class's instances are passes).

    ``opt_level`` is required; ``name`` defaults to the function's or class's name;
    ``required`` lists registry names run before it in a ``Sequential``; ``traceable`` is
    TVM's flag for Relax's tuning trace, accepted for compatibility (passel has no tuning
    trace, so it changes nothing); ``version`` is compared by ``passel.Session`` (a class
    attribute ``version`` works too)::

        @module_pass(opt_level=1)
        def drop_tests(mod, ctx):
            return mod.without_function("test")
    """
    if not isinstance(traceable, bool):
        raise TypeError(f"traceable must be a bool, got {type(traceable).__name__}")
    return _decorator("module", pass_func, opt_level, name, required, version)


@overload
def function_pass(
    pass_func: None = None,
    opt_level: Optional[int] = None,
    name: Optional[str] = None,
    required: Optional[Sequence[str]] = None,
    version: Any = None,
) -> _FunctionPassDecorator: ...


@overload
def function_pass(
    pass_func: FunctionBody,
    opt_level: Optional[int] = None,
    name: Optional[str] = None,
    required: Optional[Sequence[str]] = None,
    version: Any = None,
) -> FunctionPass: ...


def function_pass(
    pass_func: Optional[FunctionBody] = None,
    opt_level: Optional[int] = None,
    name: Optional[str] = None,
    required: Optional[Sequence[str]] = None,
    version: Any = None,
) -> Any:
    """Makes a function pass from ``f(func, mod, ctx) -> Function``, or from a class with
    ``transform_function(self, func, mod, ctx)``. The body is called once per function
    (not on functions marked ``SkipOptimization``) and must return a ``Function``: the same
    object when it changes nothing. Arguments as for ``module_pass``::

        @function_pass(opt_level=1, version=1)
        def count(func, mod, ctx):
            return func
    """
    return _decorator("function", pass_func, opt_level, name, required, version)


@overload
def prim_func_pass(
    pass_func: None = None,
    opt_level: Optional[int] = None,
    name: Optional[str] = None,
    required: Optional[Sequence[str]] = None,
    traceable: bool = False,
) -> _PrimFuncPassDecorator: ...


@overload
def prim_func_pass(
    pass_func: PrimFuncBody,
    opt_level: Optional[int] = None,
    name: Optional[str] = None,
    required: Optional[Sequence[str]] = None,
    traceable: bool = False,
) -> PrimFuncPass: ...


def prim_func_pass(
    pass_func: Optional[PrimFuncBody] = None,
    opt_level: Optional[int] = None,
    name: Optional[str] = None,
    required: Optional[Sequence[str]] = None,
    traceable: bool = False,
) -> Any:
    """Makes a PrimFunc pass (TVM's ``tvm.tir.transform.prim_func_pass``) from
    ``f(func, mod, ctx) -> PrimFunc``, or from a class with
    ``transform_function(self, func, mod, ctx)``. ``func`` is a ``passel.tir.PrimFunc``; the
    body is called once per PrimFunc (not on those marked ``SkipOptimization``, never on graph
    functions), on the calling thread, and must return a ``PrimFunc``: the same object when it
    changes nothing. ``traceable`` is accepted for compatibility, as for ``module_pass``.
    Instruments, opt levels, ``required``, timing and printing treat it as any pass::

        @prim_func_pass(opt_level=0)
        def parallelize(func, mod, ctx):
            def make_parallel(op):
                return tir.For(op.loop_var, op.min, op.extent, tir.ForKind.PARALLEL, op.body)
            return func.with_body(tir.stmt_functor.ir_transform(func.body, None, make_parallel, ["tir.For"]))
    """
    if not isinstance(traceable, bool):
        raise TypeError(f"traceable must be a bool, got {type(traceable).__name__}")
    return _decorator("prim_func", pass_func, opt_level, name, required, None)
