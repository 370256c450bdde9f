"""`nmtpipe refresh CONFIG`: publish a new dataset version, recomputing only what changed.

A refresh keeps, under the config's root:

    parts/{key}/prepared            one raw input prepared alone; the key covers the
                                    input's identity (size, version or checksum) and
                                    the prepare options, so a part is never rebuilt
    parts/{key}/encoded-{vocab}     that part encoded with one vocabulary
    parts/{key}/overlap-{digest}.npy  its train ids and side-key hashes, for the checks
                                    across inputs (`formats/overlap_index.py`)
    vocabs/{fingerprint}            vocabularies, each built from the summed token
                                    counts of the parts current at the time
    exclusions/{fingerprint}.parquet  what a version leaves out of its parts (a pair in
                                    two inputs, overlap with another input's test pairs)
    versions/NNNNNN/manifest.json   the published versions; versions/LATEST is the newest
    models/{vocab}/                 training continued on each version (`--train`)
    translations/NNNNNN/            its test split translated and scored (`--decode`)

Each refresh compares the inputs with the last published version, prepares the new and
changed inputs (all in one Beam pipeline), keeps the vocabulary unless the new parts'
tokens outside it (coverage drift) pass a threshold, encodes what the vocabulary has
not encoded yet (one pipeline again), and publishes the next version. Everything but
the version is content-addressed, so a killed refresh loses only its unfinished work.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nmtpipe import __version__
from nmtpipe.pipelines.beam.options import describe, pipeline_options, runs_locally
from nmtpipe.pipelines.workflow.encode import EncodeRun, encode_runs, start_encode
from nmtpipe.pipelines.workflow.prepare import prepare_plans
from nmtpipe.pipelines.workflow.prepare_plan import (
    PrepareConfig,
    identity,
    make_plan,
    resolve_inputs,
)
from nmtpipe.pipelines.workflow.report import write_report
from nmtpipe.pipelines.workflow.run import Show
from nmtpipe.pipelines.workflow.run_config import RunConfig
from nmtpipe.pipelines.workflow.version_overlap import summary, version_exclusions
from nmtpipe.pipelines.workflow.vocab import run_vocab
from nmtpipe.trainers.runtime.run_files import BEST, LAST, SCORES, SUMMARY
from nmtpipe.trainers.train.launch import run_job
from nmtpipe.transforms.errors import ConfigError, ManifestError
from nmtpipe.transforms.formats import prepared
from nmtpipe.transforms.formats.exclusions import write_exclusions
from nmtpipe.transforms.formats.overlap_index import VersionPart, index_url
from nmtpipe.transforms.storage import fsio, manifest, versions
from nmtpipe.transforms.storage.inputs import CorpusInput
from nmtpipe.transforms.text.split import SPLITS
from nmtpipe.transforms.vocab import counts, vocabulary
from nmtpipe.transforms.vocab.counts import JOINED

if TYPE_CHECKING:
    from apache_beam.options.pipeline_options import PipelineOptions

UNTIL = ("prepare", "vocab", "encode", "publish")
# Settings of the config's `refresh:` section, with their types.
SETTINGS: dict[str, type] = {
    "drift_threshold": float,  # rebuild the vocabulary past this share of unseen tokens
    "keep_versions": int,  # versions kept by retention (0: all)
    "checksum": bool,  # identify inputs by sha256 of their bytes, not size and version
    "train_updates": int,  # with --train: updates added per new version
    "in_process_bytes": int,  # local runners: inputs up to this size run in this process
}
DEFAULTS: dict[str, Any] = {
    "drift_threshold": 0.05,
    "keep_versions": 10,
    "checksum": False,
    "in_process_bytes": 16 << 20,
}
_OWNED = ("parts", "vocabs", "exclusions")


def check_settings(section: Any, url: str) -> dict[str, Any]:
    """The `refresh:` section of a config, checked; each error names the key."""
    section = section or {}
    if not isinstance(section, dict):
        raise ConfigError(f"{url}: refresh is a mapping of its settings")
    for key, value in section.items():
        kind = SETTINGS.get(key)
        if kind is None:
            raise ConfigError(
                f"{url}: refresh.{key}: not a refresh setting; known: {', '.join(SETTINGS)}"
            )
        numeric = kind is float and isinstance(value, int)
        if isinstance(value, bool) != (kind is bool) or not (isinstance(value, kind) or numeric):
            raise ConfigError(f"{url}: refresh.{key}: wants a {kind.__name__}, not {value!r}")
        if kind is not bool and value < 0:
            raise ConfigError(f"{url}: refresh.{key}: must not be negative")
    return {**DEFAULTS, **section}


@dataclass(frozen=True)
class Part:
    """One raw input and where its outputs go."""

    key: str
    input: CorpusInput
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
        return f"parts/{self.key}/encoded-{vocab.rsplit('/', 1)[-1]}-{options}"


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
    """One refresh of a config's root; run it holding the root's lock."""

    def __init__(self, config: RunConfig, log: Callable[[str], None], quiet: bool) -> None:
        self.config, self.log, self.quiet = config, log, quiet
        self.root = fsio.canonical_url(config.root)
        self.settings = {**DEFAULTS, **config.refresh}
        self.prepare = dataclasses.replace(config.prepare, output=self.root)
        self.options = pipeline_options(list(config.beam))
        self.latest = versions.latest_number(self.root)
        self.previous = (
            None if self.latest is None else versions.read_version(self.root, self.latest)
        )
        self.vocab_config = dataclasses.replace(config.vocab, prepared=self.root, output=self.root)
        self.encode_key = manifest.fingerprint(
            {"code_version": __version__, "encode": config.options["encode"]}
        )[:8]
        self.roles: frozenset[str] = frozenset()

    def run(self, until: str = "publish") -> RefreshResult:
        started = time.perf_counter()
        parts = self._parts()
        result = self._changes(parts)
        changed = result.added or result.changed or result.removed or result.options_changed
        if self.previous is not None and not changed:
            result.status, result.number = "unchanged", self.latest
            return result
        result.prepared = self._prepare(parts)
        result.status = "prepare"
        if until != "prepare":
            self._vocab(parts, result)
            result.status = "vocab"
        if until not in ("prepare", "vocab"):
            encoded = self._encode(parts, result.vocab, result)
            result.status = "encode"
        if until == "publish":
            doc = self._version_doc(parts, encoded, result)
            doc["exclusions"] = self._exclusions(parts, doc["parts"])
            for split, n in doc["exclusions"]["pairs"].items():
                doc["splits"][split] -= n
            result.splits = doc["splits"]
            result.number = versions.publish(self.root, doc)
            result.report = write_report(versions.version_url(self.root, result.number))
            result.retired = versions.retain(self.root, self.settings["keep_versions"], _OWNED)
            result.status = "published"
        result.seconds = time.perf_counter() - started
        return result

    # --- what changed --------------------------------------------------------------

    def _parts(self) -> list[Part]:
        """The config's inputs now, each keyed by its identity and the prepare options."""
        inputs = resolve_inputs(self.prepare)
        self.roles = frozenset(i.role for i in inputs)
        parts = []
        for inp in inputs:
            ident = identity(inp)
            if self.settings["checksum"]:  # bytes, not versions: a touched file is the same
                ident["files"] = [
                    {"url": f["url"], "size": f["size"], "sha256": fsio.sha256_of(f["url"])}
                    if "member" not in f
                    else f
                    for f in ident["files"]
                ]
            key = manifest.fingerprint(
                {
                    "code_version": __version__,
                    "input": ident,
                    "roles": sorted(self.roles),
                    "prepare": self.config.options["prepare"],
                }
            )[:16]
            parts.append(Part(key, inp, ident))
        return sorted(parts, key=lambda p: (p.input.origin, p.key))

    def _changes(self, parts: list[Part]) -> RefreshResult:
        before = {p["key"]: p["origin"] for p in (self.previous or {}).get("parts", [])}
        now = {p.key: p.input.origin for p in parts}
        new = [origin for key, origin in now.items() if key not in before]
        gone = [origin for key, origin in before.items() if key not in now]
        result = RefreshResult("started", self.latest)
        result.changed = sorted(set(new) & set(gone))
        result.added = sorted(set(new) - set(gone))
        result.removed = sorted(set(gone) - set(new))
        result.kept = len(now) - len(new)
        if self.previous is not None:
            result.options_changed = self.previous["options"] != self._options()
        return result

    def _options(self) -> dict[str, str]:
        """Keys of the vocabulary and encode options (prepare's are in the part keys)."""
        return {
            "vocab": manifest.fingerprint(self.vocab_config.options()),
            "encode": self.encode_key,
        }

    # --- the steps -----------------------------------------------------------------

    def _committed_part(self, part: Part) -> dict[str, Any] | None:
        url = fsio.join(self.root, part.prepared)
        try:
            doc = manifest.read_manifest(url, prepared.KIND)
            if doc is not None:
                manifest.verify_files(url, doc)
            return doc
        except ManifestError as e:
            self.log(f"{url} is damaged ({e}); preparing it again")
            fsio.remove(manifest.manifest_url(url))
            return None

    def _prepare(self, parts: list[Part]) -> int:
        """Prepare the parts not yet prepared, in one pipeline."""
        missing = [p for p in parts if self._committed_part(p) is None]
        if missing:
            self.log(
                f"preparing {len(missing)} new input(s) of {len(parts)} on "
                f"{describe(self._options_for(missing))}: "
                + ", ".join(p.input.origin for p in missing)
            )
            plans = [make_plan(self._part_config(p), (p.input,), self.roles) for p in missing]
            prepare_plans(plans, self._options_for(missing), quiet=self.quiet)
        return len(missing)

    def _options_for(self, parts: list[Part]) -> PipelineOptions:
        """Beam options for work on `parts`: on a local runner, inputs of up to
        `in_process_bytes` run in this process, where starting worker processes would
        cost more than the work (the usual refresh: one new file)."""
        size = sum(f["size"] for part in parts for f in part.identity["files"])
        if not runs_locally(self.options) or size > self.settings["in_process_bytes"]:
            return self.options
        in_process = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
        return pipeline_options([*self.config.beam, *in_process])

    def _part_config(self, part: Part) -> PrepareConfig:
        return dataclasses.replace(self.prepare, output=fsio.join(self.root, part.prepared))

    def _prepared(self, rels: list[str]) -> list[tuple[str, dict[str, Any]]]:
        return [prepared.read_prepared(fsio.join(self.root, rel)) for rel in rels]

    def _vocab(self, parts: list[Part], result: RefreshResult) -> None:
        """Keep the last version's vocabulary unless its options changed or the new
        parts' coverage drift passes the threshold; else build one from every part."""
        config = self.vocab_config
        options = self._options()["vocab"]
        last = (self.previous or {}).get("vocab")
        if last is not None and self.previous["options"]["vocab"] == options:
            known = {q["key"] for q in self.previous["parts"]}
            new = [p.prepared for p in parts if p.key not in known]
            result.drift = self._drift(last["path"], new, config.joined)
            worst = max(result.drift.values(), default=0.0)
            if worst <= self.settings["drift_threshold"]:
                self.log(
                    f"vocabulary kept: coverage drift {worst:.2%} <= "
                    f"{self.settings['drift_threshold']:.2%}"
                )
                result.vocab = last["path"]
                return
            self.log(f"coverage drift {worst:.2%} passes the threshold: a new vocabulary")
        rels = [p.prepared for p in parts]
        fingerprint = manifest.fingerprint(
            {"code_version": __version__, "options": options, "parts": [p.key for p in parts]}
        )
        result.vocab = f"vocabs/{fingerprint[:16]}"
        result.vocab_rebuilt = True
        config = dataclasses.replace(
            config, prepared=self.root, output=fsio.join(self.root, result.vocab)
        )
        run_vocab(
            config,
            list(self.config.beam),
            replace=True,
            log=self.log,
            quiet=self.quiet,
            parts=self._prepared(rels),
        )

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

    def _encode(
        self, parts: list[Part], vocab: str, result: RefreshResult
    ) -> dict[str, dict[str, Any]]:
        """Encode with `vocab` the parts it has not encoded yet, in one pipeline; every
        part's encode manifest, by part key."""
        runs, todo, manifests = [], [], {}
        for part in parts:
            config = dataclasses.replace(
                self.config.encode,
                prepared=fsio.join(self.root, part.prepared),
                vocab=fsio.join(self.root, vocab),
                output=fsio.join(self.root, part.encoded(vocab, self.encode_key)),
            )
            run = start_encode(config, force=False, replace=True, log=self.log)
            if isinstance(run, EncodeRun):
                runs.append(run)
                todo.append(part)
            else:
                manifests[part.key] = run[0]
        if runs:
            options = self._options_for(todo)
            self.log(f"encoding {len(runs)} part(s) on {describe(options)}")
            done = encode_runs(runs, options, quiet=self.quiet)
            manifests |= {part.key: doc for part, (doc, _) in zip(todo, done, strict=True)}
        result.encoded = len(runs)
        return manifests

    def _exclusions(self, parts: list[Part], listed: list[dict[str, Any]]) -> dict[str, Any]:
        """What the version leaves out across its parts (`version_overlap.py`), written
        once per set of parts under `exclusions/`; its record in the version. Each
        part's entry in `listed` gets the index the check kept for it."""
        keep = self.prepare.keep_overlap
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
        self, parts: list[Part], encoded: dict[str, dict[str, Any]], result: RefreshResult
    ) -> dict[str, Any]:
        listed, splits = [], {}
        for part in parts:
            doc = encoded[part.key]
            pairs = {split: info["pairs"] for split, info in doc["splits"].items()}
            for split, n in pairs.items():
                splits[split] = splits.get(split, 0) + n
            listed.append(
                {
                    "key": part.key,
                    "origin": part.input.origin,
                    "role": part.input.role,
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
            "vocab": {
                "path": result.vocab,
                "fingerprint": vocab_doc["fingerprint"],
            },
            "options": self._options(),
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


def refresh(
    config: RunConfig,
    until: str = "publish",
    break_lock: bool = False,
    log: Callable[[str], None] = print,
    quiet: bool = True,
) -> RefreshResult:
    """Refresh `config`'s root holding its lock (see `transforms/versions.py`)."""
    root = fsio.canonical_url(config.root)
    with versions.lock(root, break_lock):
        return Refresh(config, log, quiet).run(until)


def _latest(config: RunConfig) -> tuple[str, int, str]:
    """The latest version's URL and number, and where its vocabulary's model trains."""
    root = fsio.canonical_url(config.root)
    number = versions.latest_number(root)
    if number is None:
        raise ConfigError(f"nothing has been published under {root}; run nmtpipe refresh first")
    vocab = versions.read_version(root, number)["vocab"]["path"].rsplit("/", 1)[-1]
    return versions.version_url(root, number), number, fsio.join(root, "models", vocab)


def train_latest(
    config: RunConfig,
    log: Callable[[str], None],
    show: Show,
    verbose: bool = False,
    rank_module: str | None = None,
) -> bool:
    """Continue training on the latest version, unless done already (run it after the
    lock is released: training takes long, and a version is immutable). The model of a
    vocabulary lives in `models/{vocab}/`; `train_updates` adds that many updates
    per new version. Returns whether it trained."""
    data, number, save_dir = _latest(config)
    record = fsio.join(save_dir, "version.json")
    if fsio.exists(record) and json.loads(fsio.read_bytes(record))["version"] >= number:
        log(f"{save_dir} has trained on version {number:06d} already")
        return False
    # Each version is new data for the same model: continue it (fairseq's reset).
    job = dataclasses.replace(config.train, data=data, save_dir=save_dir, reset_data=True)
    updates = config.refresh.get("train_updates")
    if updates:
        summary = fsio.join(save_dir, SUMMARY)
        done = json.loads(fsio.read_bytes(summary))["updates"] if fsio.exists(summary) else 0
        job = dataclasses.replace(job, max_update=done + updates)
    log(f"training on {data} in {save_dir}")
    show("train", run_job(job, config.nproc.get("train", 1), verbose, rank_module=rank_module))
    fsio.write_bytes(record, json.dumps({"version": number}).encode())
    return True


def decode_latest(
    config: RunConfig,
    log: Callable[[str], None],
    show: Show,
    verbose: bool = False,
    rank_module: str | None = None,
) -> bool:
    """Translate the latest version's test split with the model trained on it, into
    `translations/NNNNNN/` (scores.json tracks quality across versions), unless done."""
    data, number, save_dir = _latest(config)
    record = fsio.join(save_dir, "version.json")
    if not fsio.exists(record) or json.loads(fsio.read_bytes(record))["version"] < number:
        raise ConfigError(f"no model has trained on version {number:06d} yet; use --train")
    out = fsio.join(fsio.canonical_url(config.root), "translations", f"{number:06d}")
    if fsio.exists(fsio.join(out, SCORES)):
        log(f"{out} is decoded already")
        return False
    best = fsio.join(save_dir, BEST)
    checkpoint = best if fsio.exists(best) else fsio.join(save_dir, LAST)
    job = dataclasses.replace(config.decode, checkpoint=checkpoint, data=data, output=out)
    show("decode", run_job(job, config.nproc.get("decode", 1), verbose, rank_module=rank_module))
    return True


def report(result: RefreshResult, root: str) -> str:
    """The lines a user reads after a refresh."""
    if result.status == "unchanged":
        return f"unchanged: no input changed since version {result.number:06d} ({root})"
    head = {
        "published": f"published {root}/versions/{result.number or 0:06d} "
        f"in {result.seconds:.1f} s",
    }.get(result.status, f"stopped after {result.status} (nothing published)")
    lines = [head]
    for name in ("added", "changed", "removed"):
        found = getattr(result, name)
        if found:
            lines.append(f"  {name:<8} {len(found)}: {', '.join(found)}")
    lines.append(f"  kept     {result.kept} input(s) as they were")
    if result.options_changed:
        lines.append("  options  the vocab or encode options changed")
    lines.append(f"  prepared {result.prepared} part(s), encoded {result.encoded}")
    if result.vocab:
        drift = ", ".join(f"{side} {share:.2%}" for side, share in result.drift.items())
        state = "new" if result.vocab_rebuilt else "kept"
        lines.append(f"  vocab    {state} {result.vocab}" + (f" (drift {drift})" if drift else ""))
    if result.splits:
        lines.append("  pairs    " + "  ".join(f"{s} {n:,}" for s, n in result.splits.items()))
    if result.retired:
        lines.append(f"  retired  {', '.join(result.retired)}")
    if result.report:
        lines.append(f"  report   {result.report}")
    return "\n".join(lines)
