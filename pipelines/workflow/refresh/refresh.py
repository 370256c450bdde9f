"""`nmtpipe refresh CONFIG`: publish a new dataset version, recomputing only what changed.

A refresh keeps, under the config's root:

    parts/{key}/prepared            one raw input prepared alone; the key is its
                                    fingerprint (the input's identity: size, version or
                                    checksum; the typed prepare options), so a part is
                                    never rebuilt
    parts/{key}/encoded-{vocab}-{options}  that part encoded with one vocabulary
    parts/{key}/overlap-{digest}.npy  its train ids and side-key hashes, for the checks
                                    across inputs (`formats/overlap_index.py`)
    vocabs/{fingerprint}            vocabularies, each built from the summed token
                                    counts of the parts current at the time
    exclusions/{fingerprint}.parquet  what a version leaves out of its parts (a pair in
                                    two inputs, overlap with another input's test pairs)
    versions/NNNNNN/manifest.json   the published versions; versions/LATEST is the newest
    models/{vocab}/                 training continued on each version (`--train`,
                                    `latest.py`), committed by its manifest
    translations/NNNNNN/            its test split translated and scored (`--decode`)

Each refresh compares the inputs with the last published version, prepares the new and
changed inputs (all in one Beam pipeline), keeps the vocabulary unless the new parts'
tokens outside it (coverage drift) pass a threshold, encodes what the vocabulary has
not encoded yet (one pipeline again), and publishes the next version: its stages
(`STAGES`), in order. Everything but the version is content-addressed, so a killed
refresh loses only its unfinished work.
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from nmtpipe import __version__
from nmtpipe.pipelines.beam.options import IN_PROCESS_BYTES
from nmtpipe.pipelines.workflow.encode import EncodeStep, encode_fingerprint
from nmtpipe.pipelines.workflow.prepare import PrepareStep
from nmtpipe.pipelines.workflow.prepare_plan import make_plan, resolve_inputs, trusted_pairs
from nmtpipe.pipelines.workflow.refresh.version_overlap import summary, version_exclusions
from nmtpipe.pipelines.workflow.report import write_report
from nmtpipe.pipelines.workflow.run_config import RunConfig
from nmtpipe.pipelines.workflow.steps.beam_steps import BeamStep
from nmtpipe.pipelines.workflow.steps.runner import run_steps
from nmtpipe.pipelines.workflow.vocab import run_vocab
from nmtpipe.transforms.formats import encoded_dataset, prepared
from nmtpipe.transforms.formats.exclusions import write_exclusions
from nmtpipe.transforms.formats.overlap_index import VersionPart, index_url
from nmtpipe.transforms.storage import fsio, manifest, versions
from nmtpipe.transforms.storage.commit import StepOutcome
from nmtpipe.transforms.text.split import SPLITS
from nmtpipe.transforms.vocab import counts, vocabulary
from nmtpipe.transforms.vocab.counts import JOINED

_OWNED = ("parts", "vocabs", "exclusions")


@dataclass(frozen=True)
class Part:
    """One raw input prepared alone, keyed by its prepared output's fingerprint."""

    key: str
    step: PrepareStep
    origin: str
    role: str
    identity: dict[str, Any]

    @property
    def folder(self) -> str:
        return f"parts/{self.key}"

    @property
    def prepared(self) -> str:
        return f"{self.folder}/prepared"

    def encoded(self, vocab: str, options: str) -> str:
        """Where this part goes encoded with `vocab` and encode options `options` (a
        key): every result has a folder of its own, so no version's files change."""
        return f"{self.folder}/encoded-{vocab.rsplit('/', 1)[-1]}-{options}"


@dataclass
class RefreshResult:
    """What a refresh did, for the report."""

    status: str  # published, unchanged, or the last stage run (with --until)
    number: int | None = None  # the version published, or the latest one
    added: list[str] = field(default_factory=list)
    changed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept: int = 0
    prepared: int = 0  # parts prepared by this refresh
    encoded: int = 0
    vocab: str = ""
    vocab_rebuilt: bool = False
    drift: dict[str, float] = field(default_factory=dict)
    options_changed: bool = False  # the vocab or encode options differ from the last version's
    splits: dict[str, int] = field(default_factory=dict)
    retired: list[str] = field(default_factory=list)
    report: str = ""  # the published version's report.html
    seconds: float = 0.0


class Refresh:
    """One refresh of a config's root; run it holding the root's lock.

    Every output is identified as the steps identify theirs, by the fingerprint of its
    typed config and inputs: a part's folder is keyed by its prepared output's
    fingerprint, an encoding's by the encode options' (a written-out default is the
    same config as one left out)."""

    def __init__(self, config: RunConfig, log: Callable[[str], None], quiet: bool) -> None:
        self.config, self.log, self.quiet = config, log, quiet
        self.root = fsio.canonical_url(config.root)
        self.settings = config.refresh
        self.latest = versions.latest_number(self.root)
        self.previous = (
            None if self.latest is None else versions.read_version(self.root, self.latest)
        )
        self.vocab_config = dataclasses.replace(config.vocab, prepared=self.root, output=self.root)
        self.encode_key = manifest.fingerprint(config.encode.options())[:8]
        self.listed = {p["key"]: p for p in (self.previous or {}).get("parts", [])}
        self.encoded: list[StepOutcome] = []  # each part's encoding, once encoded

    def run(self, until: str = "publish") -> RefreshResult:
        started = time.perf_counter()
        parts = self._parts()
        result = self._changes(parts)
        changed = result.added or result.changed or result.removed or result.options_changed
        if self.previous is not None and not changed:
            result.status, result.number = "unchanged", self.latest
            return result
        for name, stage in STAGES:  # in order, up to `until`
            result.status = name
            stage(self, parts, result)
            if name == until:
                break
        result.seconds = time.perf_counter() - started
        return result

    def _prepare(self, parts: list[Part], result: RefreshResult) -> None:
        if parts and self._trusted_changed(parts[0]):
            self.log(
                f"the trusted pairs or --trusted-keep differ from version "
                f"{self.latest}'s: every part is prepared again, its scores learned anew"
            )
        result.prepared = self._ran(self._run([part.step for part in parts]), "prepare")
        learned = [s.NAME for s in self.config.prepare.quality.pair_scorers() if s.PASSES]
        trusted = " and the trusted pairs" if self.config.prepare.trusted_given else ""
        if result.prepared and learned:
            self.log(
                f"pair scores ({', '.join(learned)}) learned from each new part's own pairs"
                f"{trusted}: a part is prepared alone, so that the parts before it stay as "
                "they are"
            )

    def _trusted_changed(self, part: Part) -> bool:
        """Whether the trusted pairs the parts learn from now are not those the last
        version's parts learned from (the reason all of them change, inputs unchanged)."""
        if not self.listed:
            return False
        listed = next(iter(self.listed.values()))
        doc = manifest.read_manifest(fsio.join(self.root, listed["prepared"]), prepared.KIND)
        before = None if doc is None else doc["options"].get("trusted")
        return doc is not None and before != part.step.plan.options().get("trusted")

    def _encode(self, parts: list[Part], result: RefreshResult) -> None:
        self.encoded = self._run([self._encode_step(part, result.vocab) for part in parts])
        result.encoded = self._ran(self.encoded, "encode")

    def _publish(self, parts: list[Part], result: RefreshResult) -> None:
        doc = self._version_doc(parts, self.encoded, result)
        doc["exclusions"] = self._exclusions(parts, doc["parts"])
        for split, n in doc["exclusions"]["pairs"].items():
            doc["splits"][split] -= n
        result.splits = doc["splits"]
        result.number = versions.publish(self.root, doc)
        result.report = write_report(versions.version_url(self.root, result.number))
        result.retired = versions.retain(self.root, self.settings.keep_versions, _OWNED)
        result.status = "published"

    def _run(self, steps: list[BeamStep]) -> list[StepOutcome]:
        """Run `steps` (their graphs in one pipeline; a committed one is kept). On a
        local runner, work of up to `in_process_bytes` (unset: `IN_PROCESS_BYTES`) runs
        in this process whatever mode the Beam options name, where starting worker
        processes would cost more than the work (the usual refresh: one new file)."""
        limit = self.settings.in_process_bytes
        return run_steps(
            [lambda step=step: step for step in steps],
            list(self.config.beam),
            replace=True,
            log=self.log,
            quiet=self.quiet,
            in_process_bytes=IN_PROCESS_BYTES if limit is None else limit,
        )

    def _ran(self, outcomes: list[StepOutcome], what: str) -> int:
        """How many of `outcomes` ran rather than being kept; said when some did."""
        ran = sum(not outcome.cached for outcome in outcomes)
        if ran:
            self.log(f"{what}: {ran} of {len(outcomes)} part(s) done, the rest kept")
        return ran

    # --- what changed --------------------------------------------------------------

    def _parts(self) -> list[Part]:
        """The config's inputs now, each planned alone with every role."""
        prepare = dataclasses.replace(self.config.prepare, output=self.root)
        inputs = resolve_inputs(prepare)
        roles = frozenset(i.role for i in inputs)
        trusted = trusted_pairs(prepare, inputs, self.settings.checksum)  # once, for all
        parts = []
        for inp in inputs:
            plan = make_plan(prepare, (inp,), roles, self.settings.checksum, trusted)
            key = plan.fingerprint[:16]
            plan = plan.at(fsio.join(self.root, f"parts/{key}/prepared"))
            parts.append(Part(key, PrepareStep(plan), inp.origin, inp.role, plan.identities[0]))
        return sorted(parts, key=lambda p: (p.origin, p.key))

    def _changes(self, parts: list[Part]) -> RefreshResult:
        before = {key: listed["origin"] for key, listed in self.listed.items()}
        now = {p.key: p.origin for p in parts}
        new = [origin for key, origin in now.items() if key not in before]
        gone = [origin for key, origin in before.items() if key not in now]
        result = RefreshResult("started", self.latest)
        result.changed = sorted(set(new) & set(gone))
        result.added = sorted(set(new) - set(gone))
        result.removed = sorted(set(gone) - set(new))
        result.kept = len(now) - len(new)
        if self.previous is not None:
            result.options_changed = not self._vocab_current or not all(
                self._encoded_current(listed) for listed in self.listed.values()
            )
        return result

    @functools.cached_property
    def _vocab_current(self) -> bool:
        """Whether the last version's vocabulary was built with the vocabulary options
        asked for now."""
        if self.previous is None:
            return False
        url = fsio.join(self.root, self.previous["vocab"]["path"])
        doc = manifest.read_manifest(url, vocabulary.KIND)
        wanted = manifest.fingerprint(self.vocab_config.options())
        return doc is not None and manifest.fingerprint(doc["options"]) == wanted

    def _encoded_current(self, listed: dict[str, Any]) -> bool:
        """Whether a part's encoding in the last version was made with the encode
        options asked for now (its committed fingerprint, recomputed from the
        fingerprints of its inputs; a part since deleted is not an option's change)."""
        doc = manifest.read_manifest(fsio.join(self.root, listed["encoded"]), encoded_dataset.KIND)
        if doc is None:
            return True
        inputs = doc["prepared"]["fingerprint"], doc["vocab"]["fingerprint"]
        return doc["fingerprint"] == encode_fingerprint(*inputs, self.config.encode)

    # --- the steps -----------------------------------------------------------------

    def _vocab(self, parts: list[Part], result: RefreshResult) -> None:
        """Keep the last version's vocabulary unless its options changed or the new
        parts' coverage drift passes the threshold; else build one from every part."""
        last = (self.previous or {}).get("vocab")
        if last is not None and self._vocab_current:
            new = [p.prepared for p in parts if p.key not in self.listed]
            result.drift = self._drift(last["path"], new, self.vocab_config.joined)
            worst = max(result.drift.values(), default=0.0)
            if worst <= self.settings.drift_threshold:
                self.log(
                    f"vocabulary kept: coverage drift {worst:.2%} <= "
                    f"{self.settings.drift_threshold:.2%}"
                )
                result.vocab = last["path"]
                return
            self.log(f"coverage drift {worst:.2%} passes the threshold: a new vocabulary")
        fingerprint = manifest.fingerprint(
            {
                "code_version": __version__,
                "options": self.vocab_config.options(),
                "parts": [p.key for p in parts],
            }
        )
        result.vocab = f"vocabs/{fingerprint[:16]}"
        result.vocab_rebuilt = True
        config = dataclasses.replace(self.vocab_config, output=fsio.join(self.root, result.vocab))
        run_vocab(
            config,
            list(self.config.beam),
            replace=True,
            log=self.log,
            quiet=self.quiet,
            parts=self._prepared([p.prepared for p in parts]),
        )

    def _prepared(self, rels: list[str]) -> list[tuple[str, dict[str, Any]]]:
        return [prepared.read_prepared(fsio.join(self.root, rel)) for rel in rels]

    def _drift(self, vocab: str, new: list[str], joined: bool) -> dict[str, float]:
        """Per side, the share of the new parts' train tokens (occurrences, T2T's
        tokens as prepare counts them) that `vocab` cannot spell with its own pieces."""
        parts = self._prepared(new)
        if not parts:
            return {}
        opened = vocabulary.open_vocabulary(fsio.join(self.root, vocab))
        langs = parts[0][1]["options"]["languages"]
        drift = {}
        for side in [JOINED] if joined else [langs["src"], langs["tgt"]]:
            encoder = opened.encoder(langs["src"] if side == JOINED else side)
            total = outside = 0
            # a token in several parts counts in each: the shares add up the same
            for root, doc in parts:
                for batch in counts.count_batches(counts.count_files(root, doc, side)[0]):
                    tally = batch["count"].to_numpy()
                    total += int(tally.sum())
                    outside += int(tally[encoder.outside(batch["token"].to_pylist())].sum())
            drift[side] = round(outside / total, 6) if total else 0.0
        return drift

    def _encode_step(self, part: Part, vocab: str) -> EncodeStep:
        """`part` encoded with `vocab`, in a folder of its own."""
        config = dataclasses.replace(
            self.config.encode,
            prepared=fsio.join(self.root, part.prepared),
            vocab=fsio.join(self.root, vocab),
            output=fsio.join(self.root, part.encoded(vocab, self.encode_key)),
        )
        return EncodeStep(config)

    def _exclusions(self, parts: list[Part], listed: list[dict[str, Any]]) -> dict[str, Any]:
        """What the version leaves out across its parts (`version_overlap.py`), written
        once per set of parts under `exclusions/`; its record in the version. Each
        part's entry in `listed` gets the index the check kept for it."""
        keep = self.config.prepare.keep_overlap
        key = manifest.fingerprint(
            {"code_version": __version__, "parts": [p.key for p in parts], "keep_overlap": keep}
        )[:16]
        rel = f"exclusions/{key}.parquet"
        url = fsio.join(self.root, rel)
        checked = [
            VersionPart(p.key, fsio.join(self.root, p.prepared), fsio.join(self.root, p.folder))
            for p in parts
        ]
        rows = version_exclusions(checked, keep)
        for entry, part in zip(listed, checked, strict=True):
            entry["overlap_index"] = fsio.relative_to(self.root, index_url(part))
        written = write_exclusions(url, rows)
        if rows:
            self.log(f"left out across inputs: {len(rows)} pair(s)")
        return {"path": rel, "size": written.size, "sha256": written.sha256, **summary(rows)}

    def _version_doc(
        self, parts: list[Part], encoded: list[StepOutcome], result: RefreshResult
    ) -> dict[str, Any]:
        listed, splits = [], {}
        for part, outcome in zip(parts, encoded, strict=True):
            doc = outcome.manifest
            pairs = {split: info["pairs"] for split, info in doc["splits"].items()}
            for split, n in pairs.items():
                splits[split] = splits.get(split, 0) + n
            listed.append(
                {
                    "key": part.key,
                    "origin": part.origin,
                    "role": part.role,
                    "input": part.identity,
                    "prepared": part.prepared,
                    "encoded": part.encoded(result.vocab, self.encode_key),
                    "pairs": pairs,
                }
            )
        result.splits = {s: splits[s] for s in SPLITS if s in splits}
        vocab_doc = manifest.read_manifest(fsio.join(self.root, result.vocab), vocabulary.KIND)
        assert vocab_doc is not None
        return {
            "code_version": __version__,
            "created": manifest.created_stamp(),
            "parts": listed,
            "splits": result.splits,
            "vocab": {"path": result.vocab, "fingerprint": vocab_doc["fingerprint"]},
            "changes": {
                "since": self.latest,
                "added": result.added,
                "changed": result.changed,
                "removed": result.removed,
                "options_changed": result.options_changed,
                "drift": result.drift,
                "vocab_rebuilt": result.vocab_rebuilt,
            },
            "files": [],
        }


# A refresh's stages, in order: `--until` stops after one (Airflow runs them as tasks).
STAGES: tuple[tuple[str, Callable[[Refresh, list[Part], RefreshResult], None]], ...] = (
    ("prepare", Refresh._prepare),
    ("vocab", Refresh._vocab),
    ("encode", Refresh._encode),
    ("publish", Refresh._publish),
)
UNTIL = tuple(name for name, _ in STAGES)


def refresh(
    config: RunConfig,
    until: str = "publish",
    break_lock: bool = False,
    log: Callable[[str], None] = print,
    quiet: bool = True,
) -> RefreshResult:
    """Refresh `config`'s root holding its lock (see `transforms/storage/versions.py`)."""
    root = fsio.canonical_url(config.root)
    with versions.lock(root, break_lock):
        return Refresh(config, log, quiet).run(until)
