"""Beam's pipeline building without inspecting the same functions and flags again.

Building and running one pipeline, Beam inspects each DoFn's methods for state and
timer parameters about eight times (`userstate.get_dofn_specs`, `inspect.signature` of
every method each time), and every `PipelineOptions.view_as` builds a new argparse
parser to parse the same flags again. A refresh of one small input did this 458 and
641 times, about a second of its six (benchmarks/RESULTS.md); a local run
pays it whatever its size. Beam's PR #9925 memoized the same two, and was closed
unmerged.

`install()` memoizes them for the `nmtpipe` command, exactly: a function's arguments
and defaults depend only on the function (a bound method's on its function, less
`self`), and a view only on its class and the flags parsed, while every view of one
options object keeps sharing that object's values, as Beam's own views do. Graphs,
results and what runs on workers are unchanged; Beam versions without these functions
are left alone.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import Callable
from typing import Any

from apache_beam.options.pipeline_options import PipelineOptions
from apache_beam.transforms import core

_Args = tuple[list[str], list[Any]]


def _memo_args(inspect: Callable[[Any], _Args]) -> Callable[[Any], _Args]:
    """`core.get_function_args_defaults`, memoized for plain functions and bound methods
    (other callables may change; they are inspected every time)."""
    known: weakref.WeakKeyDictionary[types.FunctionType, dict[bool, _Args]]
    known = weakref.WeakKeyDictionary()  # a function's closure may hold much: not kept

    def get_function_args_defaults(f: Any) -> _Args:
        if isinstance(f, types.MethodType) and isinstance(f.__func__, types.FunctionType):
            function, bound = f.__func__, True
        elif isinstance(f, types.FunctionType):
            function, bound = f, False
        else:
            return inspect(f)
        by_binding = known.setdefault(function, {})
        if bound not in by_binding:
            by_binding[bound] = inspect(f)
        args, defaults = by_binding[bound]
        return list(args), list(defaults)  # callers own their lists, as before

    get_function_args_defaults.memoizes = inspect  # type: ignore[attr-defined]
    return get_function_args_defaults


def _memo_views(view_as: Callable[[PipelineOptions, type], PipelineOptions]) -> Callable:
    """`PipelineOptions.view_as`, one view per options object, class and flags."""
    views: weakref.WeakKeyDictionary[PipelineOptions, dict[tuple, PipelineOptions]]
    views = weakref.WeakKeyDictionary()

    def memo_view_as(self: PipelineOptions, cls: type) -> PipelineOptions:
        if self._flags is None:  # parsed from sys.argv, which may change
            return view_as(self, cls)
        mine = views.setdefault(self, {})
        key = (cls, tuple(self._flags))
        view = mine.get(key)
        if view is None or view._all_options is not self._all_options:
            view = mine[key] = view_as(self, cls)
        return view

    memo_view_as.memoizes = view_as  # type: ignore[attr-defined]
    return memo_view_as


def install() -> bool:
    """Memoize both in this process (idempotent); whether this Beam has them."""
    args = getattr(core, "get_function_args_defaults", None)
    view_as = getattr(PipelineOptions, "view_as", None)
    if args is None or view_as is None:
        return False
    if not hasattr(args, "memoizes"):
        core.get_function_args_defaults = _memo_args(args)
    if not hasattr(view_as, "memoizes"):
        PipelineOptions.view_as = _memo_views(view_as)
    return True
