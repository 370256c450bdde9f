"""The life of a step's output folder: reuse a committed result, or rebuild and commit.

Every step writes its files into its output folder and commits them by writing
`manifest.json` last. A result is reused when the committed manifest has the same
fingerprint (inputs + options + code version) and its files are intact; a different
fingerprint is refused unless forced, so that nothing is overwritten by accident.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from nmtpipe.transforms.errors import ManifestError, NoSpaceError, OutputError, find_user_error
from nmtpipe.transforms.storage import fsio, manifest

# Staging files of a run (summaries, spills); gone once the run commits.
STAGING = ".nmtpipe"


@dataclass(frozen=True)
class StepOutcome:
    """What a step reports of its output: where, whether cached, the manifest and
    statistics, how long it took and on what runner."""

    output: str
    cached: bool
    manifest: dict[str, Any]
    stats: dict[str, Any]
    seconds: float
    runner: str


def reuse_committed(
    out: str,
    kind: str,
    fingerprint: str,
    force: bool,
    log: Callable[[str], None],
    replace: bool = False,
    goes_on: Callable[[dict[str, Any]], str | None] = lambda committed: None,
) -> dict[str, Any] | None:
    """The committed manifest at `out` if it holds exactly this result, else None.

    A result from other inputs or options is an error unless `replace` (or `force`,
    which rebuilds even an identical result), or unless the step goes on from it
    (`goes_on` says so in the line it returns: a model trained further). Before
    returning None for a rebuild the old manifest is removed, so that a reader can never
    take the half-rewritten folder for the old result.
    """
    fsio.require_output_folder(out)
    existing = None if force else manifest.read_manifest(out, kind)
    if existing is not None:
        going_on = goes_on(existing) if existing["fingerprint"] != fingerprint else None
        if going_on is not None:
            log(going_on)
        elif existing["fingerprint"] != fingerprint and replace:
            log(f"{out} holds a result from other inputs or options; replacing it")
        elif existing["fingerprint"] != fingerprint:
            raise OutputError(
                f"{out} already holds a {kind} result from other inputs or options "
                f"(fingerprint {existing['fingerprint'][:12]}); use --replace to replace it "
                "or choose another --output"
            )
        else:
            try:
                manifest.verify_files(out, existing)
                return existing
            except ManifestError as e:
                log(f"the committed output is damaged ({e}); rebuilding it")
    fsio.remove(manifest.manifest_url(out))
    return None


def commit(out: str, kind: str, doc: dict[str, Any], ours: re.Pattern[str]) -> dict[str, Any]:
    """Write the manifest, then delete what earlier or killed runs left behind that it
    does not list (file names matching `ours`, the staging folder, temporary files of
    interrupted writes), and return the manifest as readers will see it."""
    manifest.write_manifest(out, doc)
    _remove_uncommitted(out, ours, {f["path"] for f in doc["files"]})
    committed = manifest.read_manifest(out, kind)
    assert committed is not None
    return committed


def _remove_uncommitted(out: str, ours: re.Pattern[str], keep: set[str] | None) -> None:
    """Delete the staging folder, temporary files of interrupted writes and, unless
    `keep` is None (a committed output whose list is not at hand), the files matching
    `ours` it does not hold."""
    fsio.remove_tree(fsio.join(out, STAGING))
    for url in fsio.find(out):
        rel = fsio.relative_to(out, url)
        if ".tmp-" in rel.rsplit("/", 1)[-1] or (
            keep is not None and ours.match(rel) and rel not in keep
        ):
            fsio.remove(url)


@contextlib.contextmanager
def building(out: str, ours: re.Pattern[str]) -> Iterator[None]:
    """Around the work that rebuilds `out` (from finding whether it holds the result
    to its commit): if it fails, however (an error, a full disk, Ctrl-C), nothing it
    wrote stays — the staging folder, temporary files and, while no manifest commits
    them, the files matching `ours` — and nor does the output folder, if this made it
    and nothing else is in it. A process killed outright leaves its files to the next
    run's commit."""
    with fsio.output_folder(out):
        try:
            yield
        except BaseException as failure:
            with contextlib.suppress(Exception):  # the failure is the one to tell
                committed = fsio.exists(manifest.manifest_url(out))
                _remove_uncommitted(out, ours, None if committed else set())
            full = find_user_error(failure)
            if isinstance(full, NoSpaceError):  # (from a Beam worker: as its text)
                raise NoSpaceError(
                    f"{full}; nothing was committed and what was written is removed: free "
                    "space on that disk, or write elsewhere, and run again"
                ) from failure
            raise
