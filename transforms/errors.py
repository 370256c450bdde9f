"""Errors a user can act on.

Each message names the file, the line where there is one, and the reason. The CLI prints
`str(error)` on one line; when an error is raised inside a Beam worker it reaches the
driver only as text, so `find_user_error` recovers it from a runner's failure message
(`pipelines/cli/logs.py:error_line` is the line the command line prints).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable


class NmtpipeError(Exception):
    """Base of every error whose message is meant for the user as it is."""


class ConfigError(NmtpipeError):
    """A usage mistake: an option or a combination of options that cannot work, or a
    path given to an option that names the wrong kind of thing (a file for a folder,
    one step's output for another's, a split the data does not have)."""


class InputError(NmtpipeError):
    """An input that is missing, unreadable or not what its name says."""


class CorpusAlignmentError(InputError):
    """The two sides of a parallel corpus have different line counts."""


class OutputError(NmtpipeError):
    """An output location that holds something else, or a commit that failed."""


class NoSpaceError(OutputError):
    """A write that found its disk full (or its quota used up): names the file."""


class StorageError(NmtpipeError):
    """A storage operation that kept failing with transient errors until retries ran out."""


class RunnerError(NmtpipeError):
    """A Beam job that its runner (Flink, Spark, Dataflow...) failed for a reason of its
    own: a lost worker, too little memory, a version mismatch."""


class Interrupted(NmtpipeError):
    """The user stopped the command (Ctrl-C); the message says what was kept."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, taken as Ctrl-C is (the work stopped, what it began removed), where the
    command installs it (`pipelines/cli/main.py`)."""


def comes_of(exc: BaseException | None, kind: type[BaseException]) -> bool:
    """Whether `exc` is, or comes of (its causes and contexts), a `kind` (Beam reports a
    KeyboardInterrupt raised in a DoFn as `RuntimeError: KeyboardInterrupt [...]`)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, kind):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


class RankLost(NmtpipeError):
    """A rank of a torch job stopped because another one did: never the cause."""


class ManifestError(NmtpipeError):
    """A manifest that is missing, malformed, or disagrees with the files it lists."""


class IntegrityError(ManifestError):
    """A committed file whose bytes are not those its manifest recorded (corrupted)."""


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """` (did you mean X?)` for the known word nearest `word`, or "" when none is near."""
    near = difflib.get_close_matches(word, list(known), n=1)
    return f" (did you mean {near[0]}?)" if near else ""


def error_class(name: str) -> type[NmtpipeError] | None:
    """The NmtpipeError class of that name (errors cross processes as their names)."""
    return _error_classes().get(name)


def _error_classes() -> dict[str, type[NmtpipeError]]:
    found: dict[str, type[NmtpipeError]] = {}
    todo: list[type[NmtpipeError]] = [NmtpipeError]
    while todo:
        cls = todo.pop()
        found[cls.__name__] = cls
        todo.extend(cls.__subclasses__())
    return found


_BEAM_CONTEXT = r"(?: \[while running '[^']*'\])*"
_RAISED_IN_WORKER = re.compile(r"\b(\w+Error): (.+?)" + _BEAM_CONTEXT + "$", re.MULTILINE)


def find_user_error(exc: BaseException) -> NmtpipeError | None:
    """The NmtpipeError behind `exc`, following causes and, failing that, its text.

    Runners that execute DoFns in other processes (multi_processing, the portable runner,
    Dataflow) re-raise worker failures as a RuntimeError whose text holds the traceback.
    """
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, NmtpipeError):
            # Beam re-raises with "[while running 'Step']" appended to the message.
            return type(current)(re.sub(_BEAM_CONTEXT + "$", "", str(current)))
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    classes = _error_classes()
    for match in _RAISED_IN_WORKER.finditer(str(exc)):
        cls = classes.get(match.group(1))
        if cls is not None:
            return cls(match.group(2).strip())
    return None
