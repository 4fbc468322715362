"""Incremental sessions: run a pipeline again and again on a module that changes a little,
recomputing only what an edit can affect (the engine's salsa-backed ``Session``).

Rule for Python passes: the engine knows a Rust pass's code cannot change within a process,
but it cannot know whether a Python pass's code did. A Python pass therefore declares a
``version``; before each run the session compares every Python pass's version with the one
it last ran: when it changed, the pass gets a new engine identity and runs again on every
function (and the stages after it recompute what its new output changed); otherwise only
functions whose inputs changed are recomputed. A Python pass whose version is None cannot be
judged, so it is treated as changed on every run, with a ``RuntimeWarning`` once per pass.

Persistent cache: ``Session(pipeline, ctx, cache=DIR)`` (or ``cache="redis://host:port/db"``,
with a local directory in front: ``cache_local=DIR``, default ``PASSEL_CACHE_DIR``, else
``~/.cache/passel``) keeps the results of the registered (Rust) passes' function stages in the
same cache as ``passel run --cache``, keyed by content, so a Session in another process (or on
another machine sharing the Redis server) recomputes only what no earlier one computed.
Results are keyed by the build of the extension module too, so a rebuilt package starts afresh.
A stage with a Python pass in it is never stored (its code has no identity outside the process).
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from typing import Any, Dict, Iterator, List, Optional, Set, Tuple, Union

from . import _passel
from ._passel import StageStats
from .ir import Function, Module
from .transform import PassContext, Pass, Sequential, _PythonPass, pipeline

__all__ = ["Session", "SessionRun"]


@dataclass
class SessionRun:
    """One run's result: the optimised ``module``, its ``diagnostics`` and, per stage, what
    was recomputed (``stages``)."""

    module: Module
    diagnostics: List[str]
    stages: List[StageStats] = field(default_factory=list)

    def recomputed(self) -> List[str]:
        """Functions recomputed by any stage, in first-seen order, without repeats."""
        seen: List[str] = []
        for st in self.stages:
            for name in st.recomputed:
                if name not in seen:
                    seen.append(name)
        return seen


_NOTHING = object()


class Session:
    """An incremental session running ``pipeline`` (a ``Pass``/``Sequential`` or pipeline
    text) under ``ctx`` (default: the current context; it must have no instruments).

    ``load(mod)`` / ``set_source(text)`` set the whole module, ``set_function(name, func)``
    one function, ``run()`` returns a ``SessionRun`` saying what each stage recomputed.
    """

    def __init__(
        self,
        pipeline_: Union[Pass, str],
        ctx: Optional[PassContext] = None,
        cache: Optional[Union[str, os.PathLike[str]]] = None,
        cache_local: Optional[Union[str, os.PathLike[str]]] = None,
    ) -> None:
        self.pipeline: Pass = pipeline(pipeline_) if isinstance(pipeline_, str) else pipeline_
        self._versions: Dict[int, Any] = {}
        self._warned: Set[int] = set()
        for p in self._python_passes():
            self._versions[id(p)] = p.version
        spec = None if cache is None else os.fspath(cache)
        if spec is not None:
            # A stage is stored under its passes' registry names, so a Python pass named like a
            # registered pass would have its results taken for that pass's.
            registered = {name for name, _, _, _ in _passel.registered_passes()}
            for p in self._python_passes():
                if p.info.name in registered:
                    raise ValueError(
                        f"Python pass {p.info.name!r} has the name of a registered pass: rename it to use a cache"
                    )
        local = None if cache_local is None else os.fspath(cache_local)
        self._handle = _passel.SessionHandle(self.pipeline._handle, ctx, spec, local)

    def cache_counts(self) -> Optional[Tuple[int, int, int, int]]:
        """What the persistent cache did since the session was made: ``(hits, misses, rejected
        entries, bytes written)``, or ``None`` without a cache."""
        return self._handle.cache_counts()

    def _python_passes(self) -> Iterator[_PythonPass]:
        stack: List[Pass] = [self.pipeline]
        while stack:
            p = stack.pop()
            if isinstance(p, Sequential):
                stack.extend(reversed(p.passes))
            elif isinstance(p, _PythonPass):
                yield p

    def _refresh_stale(self) -> None:
        stale = []
        for p in self._python_passes():
            if p.version is None:
                if id(p) not in self._warned:
                    self._warned.add(id(p))
                    warnings.warn(
                        f"Python pass {p.info.name} declares no version: the session cannot know whether "
                        "its code changed, so it runs it again on every run (give it version=...)",
                        RuntimeWarning,
                        stacklevel=3,
                    )
                stale.append(p)
            elif self._versions.get(id(p), _NOTHING) != p.version:
                stale.append(p)
            self._versions[id(p)] = p.version
        if not stale:
            return
        for p in stale:
            p._refresh()
        self._rebuild(self.pipeline)
        self._handle.set_pipeline(self.pipeline._handle)

    def _rebuild(self, p: Pass) -> None:
        if isinstance(p, Sequential):
            for child in p.passes:
                self._rebuild(child)
            p._refresh()

    def load(self, mod: Module) -> List[str]:
        """Makes ``mod`` the session's module; returns the functions that changed or were
        added (functions equal to what the session holds are left alone)."""
        return self._handle.load(mod)

    def set_source(self, text: str) -> List[str]:
        """Parses ``text`` and loads it (see ``load``)."""
        return self._handle.set_source(text)

    def set_function(self, name: str, func: Function) -> bool:
        """Sets (or adds) function ``name``; returns whether anything changed."""
        return self._handle.set_function(name, func)

    def remove_function(self, name: str) -> None:
        """Removes function ``name``."""
        self._handle.remove_function(name)

    @property
    def module(self) -> Module:
        """The session's current (unoptimised) module."""
        return self._handle.module()

    def run(self) -> SessionRun:
        """Runs the pipeline, recomputing only what changed since the last run (see the
        module docs for how Python passes' versions count)."""
        self._refresh_stale()
        module, diagnostics, stages = self._handle.run()
        return SessionRun(module, diagnostics, stages)
