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
import re
import shutil
from pathlib import Path
from typing import Callable, Collection, Optional, TypeVar, Union, overload

from ._passel import PassTimingInstrument
from .ir import Module
from .transform import PassInfo

__all__ = [
    "PassInstrument",
    "pass_instrument",
    "PassTimingInstrument",
    "PassPrintingInstrument",
    "PrintBeforeAll",
    "PrintAfterAll",
    "DumpIR",
]


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



class PassPrintingInstrument(PassInstrument):
    """Prints the IR before the passes named in ``print_before_pass_names`` and after those in
    ``print_after_pass_names`` (TVM's ``PassPrintingInstrument``), to stdout:
    ``Print IR before: <name>``, the module, and two blank lines."""

    def __init__(self, print_before_pass_names: Collection[str], print_after_pass_names: Collection[str]) -> None:
        self.print_before_pass_names = print_before_pass_names
        self.print_after_pass_names = print_after_pass_names

    def run_before_pass(self, mod: Module, info: PassInfo) -> None:
        if info.name in self.print_before_pass_names:
            print(f"Print IR before: {info.name}\n{mod}\n\n")

    def run_after_pass(self, mod: Module, info: PassInfo) -> None:
        if info.name in self.print_after_pass_names:
            print(f"Print IR after: {info.name}\n{mod}\n\n")


class PrintAfterAll(PassInstrument):
    """Prints ``After Running Pass: <info>`` and the module after every pass (TVM's
    ``PrintAfterAll``)."""

    def run_after_pass(self, mod: Module, info: PassInfo) -> None:
        print(f"After Running Pass: {info}")
        print(mod)


class PrintBeforeAll(PassInstrument):
    """Prints ``Before Running Pass: <info>`` and the module before every pass (TVM's
    ``PrintBeforeAll``)."""

    def run_before_pass(self, mod: Module, info: PassInfo) -> None:
        print(f"Before Running Pass: {info}")
        print(mod)


_DUMPED = re.compile(r"^\d{3}_.*\.pir$")


class DumpIR(PassInstrument):
    """Writes the module after every pass to ``dump_dir/NNN_<pass name>.pir`` (TVM's
    ``DumpIR``; TVM writes TVMScript as ``.py``, passel its text format as ``.pir``). ``NNN``
    counts the passes from 000; characters not allowed in file names become ``_``. With
    ``refresh=True`` an existing ``dump_dir`` is removed first, but only when it holds nothing
    but such dumps (otherwise a warning is printed and it is kept). A dump that cannot be
    written prints a warning and the run goes on, as in TVM."""

    def __init__(self, dump_dir: Union[Path, str], refresh: bool = False) -> None:
        self.dump_dir = dump_dir if isinstance(dump_dir, Path) else Path(dump_dir)
        self.counter = 0
        if refresh and self.dump_dir.is_dir():
            self._safe_remove_dump_dir()

    def _safe_remove_dump_dir(self) -> None:
        for item in self.dump_dir.iterdir():
            if item.is_dir() or not _DUMPED.match(item.name):
                print(
                    f"WARNING: Skipping removal of {self.dump_dir} as it contains "
                    f"non-dumped files or directories. Please clean it manually."
                )
                return
        try:
            shutil.rmtree(self.dump_dir)
        except OSError as e:
            print(f"WARNING: Failed to remove directory {self.dump_dir}: {e}")

    def run_after_pass(self, mod: Module, info: PassInfo) -> None:
        self.dump_dir.mkdir(parents=True, exist_ok=True)
        try:
            sanitized = re.sub(r'[<>:"/\\|?*]', "_", info.name)
            with open(self.dump_dir / f"{self.counter:03d}_{sanitized}.pir", "w") as f:
                f.write(mod.script())
        except OSError:
            print(f"WARNING: Failed to dump IR for pass {info.name}")
        finally:
            self.counter += 1
