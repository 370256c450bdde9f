"""`nmtpipe encode` on the driver: prepared Parquet shards → Arrow and fairseq shards of ids.

One Beam task per part of a prepared split writes its Arrow file and fairseq
`.bin/.idx` pairs (`transforms/beam/encode.py`, `transforms/formats/encode_part.py`).
The driver then copies the fairseq dictionaries next to the `.bin` files, so that
`{output}/fairseq` is a data-bin `fairseq-train` reads, and commits the output
(`steps/protocol.py`).
"""

from __future__ import annotations

import functools
import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nmtpipe import __version__
from nmtpipe.pipelines.beam.options import worker_cores
from nmtpipe.pipelines.workflow.steps.beam_steps import BeamStep
from nmtpipe.pipelines.workflow.steps.protocol import Log, Written
from nmtpipe.pipelines.workflow.steps.runner import run_step
from nmtpipe.transforms.beam.encode import EncodeShards
from nmtpipe.transforms.errors import ConfigError, InputError, OutputError
from nmtpipe.transforms.formats.dataset_card import dataset_card, split_shards
from nmtpipe.transforms.formats.encode_part import EncodeSpec, EncodeTask
from nmtpipe.transforms.formats.encoded_dataset import ARROW, FAIRSEQ, FORMATS, KIND
from nmtpipe.transforms.formats.prepared import pair_bytes, read_prepared
from nmtpipe.transforms.formats.shard_names import fairseq_prefix
from nmtpipe.transforms.options import option
from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.storage.commit import StepOutcome
from nmtpipe.transforms.storage.manifest import STATS_FILE, file_entry
from nmtpipe.transforms.storage.read_meter import Meter
from nmtpipe.transforms.text.stats import summarize_lengths
from nmtpipe.transforms.vocab import id_layout
from nmtpipe.transforms.vocab.vocabulary import (
    Vocabulary,
    arrow_dtype,
    fairseq_dtype,
    open_vocabulary,
)

if TYPE_CHECKING:
    from apache_beam.options.pipeline_options import PipelineOptions

# Encoding threads per worker where the vocabulary encodes outside the GIL: a worker's
# own Python (reading, writing) keeps two busy (benchmarks/RESULTS.md).
_THREADS = 2
_OURS = re.compile(r"^(arrow/[^/]+\.arrow|fairseq/[^/]+\.(bin|idx)|fairseq/dict\.[^/]+\.txt)$")


@dataclass(frozen=True)
class EncodeConfig:
    """What `nmtpipe encode` was asked to do."""

    prepared: str = option(metavar="URL", help="a committed `nmtpipe prepare` output")
    vocab: str = option(metavar="URL", help="a committed `nmtpipe vocab` output")
    output: str = option(metavar="URL", help="where to write the encoded shards")
    formats: tuple[str, ...] = option(
        FORMATS, metavar="LIST", help="comma-separated: arrow, fairseq or both"
    )
    batch_size: int = option(
        2048, metavar="N", help="pairs per encode batch and Arrow record batch"
    )
    rows_per_task: int = option(
        50_000,
        metavar="N",
        help="pairs per Beam task and output file, in whole Parquet row groups ",
    )

    def __post_init__(self) -> None:
        unknown = [f for f in self.formats if f not in FORMATS]
        if unknown or not self.formats:
            raise ConfigError(
                f"--formats takes one or more of {','.join(FORMATS)}, not {','.join(self.formats)}"
            )
        if self.batch_size < 1 or self.rows_per_task < 1:
            raise ConfigError("--batch-size and --rows-per-task must be at least 1")

    def options(self) -> dict[str, Any]:
        """The options that shape the output (fingerprinted): the formats, the record
        batches' boundaries in the Arrow files, and how the output is cut into files."""
        return {
            "formats": list(self.formats),
            "batch_size": self.batch_size,
            "rows_per_task": self.rows_per_task,
        }


def plan_tasks(
    root: str, prepared: dict[str, Any], langs: dict[str, str], rows_per_task: int
) -> list[EncodeTask]:
    """Runs of row groups of about `rows_per_task` rows, in shard order, per split.

    Only Parquet footers are read (in parallel: on object storage each is a request).
    Empty shards give no task: fairseq cannot map an empty `.bin`.
    """
    entries = {f["path"]: f for f in prepared["files"]}
    paths = [path for info in prepared["splits"].values() for path in info["files"]]
    with ThreadPoolExecutor(max_workers=16) as pool:
        found = pool.map(lambda path: manifest.parquet_row_groups(root, entries[path]), paths)
        groups = dict(zip(paths, found, strict=True))
    tasks = []
    for split, info in prepared["splits"].items():
        runs = [(path, run) for path in info["files"] for run in _runs(groups[path], rows_per_task)]
        for k, (path, run) in enumerate(runs):
            whole = len(run) == len(groups[path])
            prefix = fairseq_prefix(split, k, langs)
            entry, rows = entries[path], groups[path]
            size = entry["size"] * sum(rows[g] for g in run) // max(sum(rows), 1)
            tasks.append(EncodeTask(split, k, len(runs), root, entry, run, whole, prefix, size))
    return tasks


def _runs(rows: list[int], target: int) -> list[tuple[int, ...]]:
    """Consecutive non-empty row groups, cut once a run holds `target` rows or more."""
    runs: list[tuple[int, ...]] = []
    current: list[int] = []
    size = 0
    for index, n in enumerate(rows):
        if n:
            current.append(index)
            size += n
        if size >= target:
            runs.append(tuple(current))
            current, size = [], 0
    if current:
        runs.append(tuple(current))
    return runs


def _id_spaces(vocab: Vocabulary, langs: dict[str, str]) -> dict[str, dict[str, Any]]:
    """Per format: the number of ids of each language and one dtype wide enough for both."""
    encoders = {lang: vocab.encoder(lang) for lang in langs.values()}
    arrow = {lang: e.vocab_size for lang, e in encoders.items()}
    fairseq = {lang: e.dictionary_size for lang, e in encoders.items()}
    return {
        ARROW: {"sizes": arrow, "dtype": arrow_dtype(max(arrow.values())).name},
        FAIRSEQ: {"sizes": fairseq, "dtype": fairseq_dtype(max(fairseq.values())).name},
    }


def _check_languages(prepared: dict[str, Any], vocab: Vocabulary) -> dict[str, str]:
    langs = prepared["options"]["languages"]
    if vocab.doc["languages"] != langs:
        raise InputError(
            f"the vocabulary at {vocab.root} is for {vocab.doc['languages']}, "
            f"the prepared data is {langs}"
        )
    return langs


def finalize_stats(partial: dict[str, Any], splits: list[str], langs: dict[str, str]) -> dict:
    """`stats.json`: per split and language, tokens (EOS included), unknowns, lengths."""
    out: dict[str, Any] = {}
    for split in splits:
        raw = partial.get("splits", {}).get(split, {})
        out[split] = {"pairs": int(raw.get("pairs", 0))}
        for role, lang in langs.items():
            side = raw.get(role, {})
            tokens, unk = int(side.get("tokens", 0)), int(side.get("unk", 0))
            out[split][lang] = {
                "tokens": tokens,
                "unk": unk,
                "unk_percent": round(100 * unk / tokens, 3) if tokens else 0.0,
                "length_tokens": summarize_lengths(side.get("length_hist", {})),
            }
    return {"splits": out}


def _copy_dicts(vocab: Vocabulary, out: str, langs: dict[str, str]) -> list[dict[str, Any]]:
    entries = []
    for lang in langs.values():
        text = vocab.read(vocab.dict_url(lang))
        written = fsio.write_bytes(fsio.join(out, FAIRSEQ, f"dict.{lang}.txt"), text)
        entries.append(file_entry(out, written, "fairseq-dict", text.count(b"\n"), lang=lang))
    return entries


def _check_complete(
    config: EncodeConfig, tasks: list[EncodeTask], files: list[dict], stats: dict, prepared: dict
) -> None:
    """Refuse to commit unless every part was written and every pair encoded."""
    for split, info in prepared["splits"].items():
        if stats["splits"][split]["pairs"] != info["pairs"]:
            raise OutputError(
                f"encoded {stats['splits'][split]['pairs']} {split} pairs of {info['pairs']}; "
                "nothing committed"
            )
    per_task = (ARROW in config.formats) + 4 * (FAIRSEQ in config.formats)  # + .bin/.idx x2
    if len(files) != per_task * len(tasks):
        raise OutputError(
            f"wrote {len(files)} files for {len(tasks)} parts, expected {per_task * len(tasks)}; "
            "nothing committed"
        )


def _card(langs: dict[str, str], vocab: Vocabulary, files: list[dict[str, Any]]) -> str:
    src, tgt = langs["src"], langs["tgt"]
    about = [
        f"{src}–{tgt} sentence pairs as token ids of a {vocab.model} vocabulary (encoded "
        "by `nmtpipe encode`; the vocabulary, id layouts and sources are in manifest.json; "
        "no paths here, so the same data gives the same card anywhere). The splits are the "
        "Arrow shards; `fairseq/` holds the same pairs "
        "as a fairseq data-bin, for fairseq, not for `datasets`."
    ]
    columns = "`id` (the prepared pair's), `src` and `tgt` (token ids, EOS last)"
    return dataset_card(f"{src}–{tgt} encoded", about, split_shards(files, "arrow"), columns)


def _manifest_doc(
    config: EncodeConfig,
    inputs: dict[str, Any],
    vocab: Vocabulary,
    spaces: dict[str, dict[str, Any]],
    files: list[dict[str, Any]],
    stats: dict[str, Any],
) -> dict[str, Any]:
    langs = inputs["languages"]

    def split_info(split: str) -> dict[str, Any]:
        info: dict[str, Any] = {
            "pairs": stats["splits"][split]["pairs"],
            "tokens": {lang: stats["splits"][split][lang]["tokens"] for lang in langs.values()},
        }
        if ARROW in config.formats:
            info[ARROW] = sorted(
                f["path"] for f in files if f["kind"] == "arrow" and f["split"] == split
            )
        if FAIRSEQ in config.formats:
            # In part order (train, train1, ..., train10): the order of the pairs.
            prefixes = {
                f["part"]: f["path"].rsplit(".", 2)[0]
                for f in files
                if f["kind"] == "fairseq-bin" and f["split"] == split
            }
            info[FAIRSEQ] = [prefixes[part] for part in sorted(prefixes)]
        return info

    layouts = {
        ARROW: vocab.kind.layout.as_dict(),
        FAIRSEQ: id_layout.FAIRSEQ.as_dict(),
    }
    return {
        **inputs,
        "formats": list(config.formats),
        "dtypes": {f: spaces[f]["dtype"] for f in config.formats},
        "vocab_sizes": {f: spaces[f]["sizes"] for f in config.formats},
        "joined": vocab.doc["options"]["joined"],
        "id_layouts": {f: layouts[f] for f in config.formats},
        "vocab_model": vocab.model,
        "splits": {split: split_info(split) for split in stats["splits"]},
        "stats": STATS_FILE,
        "files": sorted(files, key=lambda f: f["path"]),
    }


def encode_fingerprint(prepared: str, vocab: str, config: EncodeConfig) -> str:
    """The fingerprint of encoding the prepared output and vocabulary of these
    fingerprints with `config`'s options."""
    return manifest.fingerprint(
        {
            "step": KIND,
            "code_version": __version__,
            "prepared": prepared,
            "vocab": vocab,
            **config.options(),
        }
    )


class EncodeStep(BeamStep):
    """`nmtpipe encode` as a step: its inputs and fingerprint (read first, to see whether
    the output holds this result already), its parts, its graph, then its commit."""

    kind = KIND
    label = "Encode"
    ours = _OURS
    command = "encode"
    dataset_report = True

    def __init__(self, config: EncodeConfig) -> None:
        root, prepared = read_prepared(config.prepared, "--prepared")
        vocab = open_vocabulary(config.vocab, "--vocab")
        langs = _check_languages(prepared, vocab)
        self.config, self.root, self.prepared = config, root, prepared
        self.vocab, self.langs = vocab, langs
        self.output = fsio.canonical_url(config.output)
        self.fingerprint = encode_fingerprint(prepared["fingerprint"], vocab.fingerprint, config)
        self.inputs = {
            "prepared": {"url": root, "fingerprint": prepared["fingerprint"]},
            "vocab": {"url": vocab.root, "fingerprint": vocab.fingerprint},
            "languages": langs,
        }
        self.input_bytes = pair_bytes(prepared)  # the pair shards it reads
        # `_THREADS` where the vocabulary encodes outside the GIL, else 1.
        self.cores_per_worker = _THREADS if vocab.kind.encodes_outside_gil else 1

    @functools.cached_property
    def tasks(self) -> list[EncodeTask]:
        """The parts: one Beam task and one output file (or fairseq pair) each."""
        return plan_tasks(self.root, self.prepared, self.langs, self.config.rows_per_task)

    @functools.cached_property
    def spaces(self) -> dict[str, dict[str, Any]]:
        return _id_spaces(self.vocab, self.langs)

    def threads(self, options: PipelineOptions) -> int:
        """Encoding threads per worker under `options`."""
        return min(worker_cores(options), self.cores_per_worker)

    def announce(self, runner: str, options: PipelineOptions) -> str:
        shards = sum(len(info["files"]) for info in self.prepared["splits"].values())
        return (
            f"encoding {shards} prepared shard(s) as {len(self.tasks)} part(s) into "
            f"{self.output} ({', '.join(self.config.formats)}) on {runner}, "
            f"{self.threads(options)} thread(s) per worker"
        )

    def graph(self, options: PipelineOptions, meter: Meter | None = None) -> EncodeShards:
        spec = EncodeSpec(
            self.output,
            self.vocab.root,
            self.vocab.doc,
            self.langs,
            self.config.formats,
            self.spaces[ARROW]["dtype"],
            self.spaces[FAIRSEQ]["dtype"],
            self.config.batch_size,
            self.threads(options),
        )
        return EncodeShards(spec, self.tasks, self.summary_url, meter)

    def write(self, summary: dict[str, Any] | None, log: Log) -> Written:
        assert summary is not None
        stats = finalize_stats(summary["stats"], list(self.prepared["splits"]), self.langs)
        files = summary["files"]
        _check_complete(self.config, self.tasks, files, stats, self.prepared)
        if FAIRSEQ in self.config.formats:
            files += _copy_dicts(self.vocab, self.output, self.langs)
        return Written(files, stats)

    def card(self, files: list[dict[str, Any]]) -> str:
        return _card(self.langs, self.vocab, files)

    def manifest(self, files: list[dict[str, Any]], stats: dict[str, Any] | None) -> dict:
        assert stats is not None
        return _manifest_doc(self.config, self.inputs, self.vocab, self.spaces, files, stats)

    def figures(self, outcome: StepOutcome) -> str:
        splits = outcome.manifest["splits"]
        return ", ".join(f"{split} {info['pairs']:,}" for split, info in splits.items())


def run_encode(config: EncodeConfig, beam_args: list[str], **how: Any) -> StepOutcome:
    """Encode into `config.output` unless it already holds this exact result; `how`:
    `run_steps`' force, replace, log and quiet."""
    return run_step(lambda: EncodeStep(config), beam_args, **how)
