"""Pass instruments, with TVM's names and semantics (``tvm.ir.instrument``).

An instrument is called around pass contexts and pass calls: ``enter_pass_ctx()`` /
``exit_pass_ctx()`` when a ``PassContext`` holding it is entered / left, and for every pass
call (sequentials and required passes included) ``should_run(mod, info)`` (every instrument
is asked; the pass runs only if all say yes), ``run_before_pass(mod, info)`` and
``run_after_pass(mod, info)``. Only the innermost context's instruments are called, always
on the thread that entered it.

Failures follow TVM exactly (the Rust engine implements them; its conformance suite pins
them): an exception in ``enter_pass_ctx`` exits the instruments already entered, in reverse
order, clears the context's instruments and propagates; in ``exit_pass_ctx`` the later exits
do not run and the list is cleared; in ``should_run`` / ``run_before_pass`` /
``run_after_pass`` / the pass, the error propagates at once and leaving the ``with`` block
then exits every instrument. The instrument's own exception reaches Python as itself (type,
message, traceback), with a note naming the instrument and hook.
"""

from __future__ import annotations

import inspect
from typing import Callable, Optional, TypeVar, Union, overload

from ._passel import PassTimingInstrument
from .ir import Module
from .transform import PassInfo

__all__ = ["PassInstrument", "pass_instrument", "PassTimingInstrument"]


class PassInstrument:
    """Base class of Python instruments: every hook is a no-op and ``should_run`` says yes.
    Override the hooks you need (or decorate any class with ``pass_instrument``)."""

    @property
    def name(self) -> str:
        """The instrument's name in error messages (its class name)."""
        return type(self).__name__

    def enter_pass_ctx(self) -> None:
        """Called when a context holding the instrument is entered."""

    def exit_pass_ctx(self) -> None:
        """Called when a context holding the instrument is left."""

    def should_run(self, mod: Module, info: PassInfo) -> bool:
        """Whether the pass ``info`` should run on ``mod``."""
        return True

    def run_before_pass(self, mod: Module, info: PassInfo) -> None:
        """Called before a pass runs, with its input."""

    def run_after_pass(self, mod: Module, info: PassInfo) -> None:
        """Called after a pass ran, with its output."""


_C = TypeVar("_C", bound=type)


@overload
def pass_instrument(pi_cls: _C) -> _C: ...


@overload
def pass_instrument(pi_cls: None = None) -> Callable[[_C], _C]: ...


def pass_instrument(pi_cls: Optional[_C] = None) -> Union[_C, Callable[[_C], _C]]:
    """Decorates a class into a pass instrument (TVM's ``@pass_instrument``): the class
    keeps its methods and gets ``PassInstrument``'s defaults for the hooks it lacks::

        @pass_instrument
        class Log:
            def run_before_pass(self, mod, info):
                print("running", info.name)
    """

    def create(cls: _C) -> _C:
        if not inspect.isclass(cls):
            raise TypeError("pass_instrument must decorate a class")
        if issubclass(cls, PassInstrument):
            return cls
        new = type(cls.__name__, (cls, PassInstrument), {"__doc__": cls.__doc__, "__module__": cls.__module__})
        new.__qualname__ = cls.__qualname__
        return new  # type: ignore[return-value]

    if pi_cls is not None:
        return create(pi_cls)
    return create

