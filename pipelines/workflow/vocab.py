"""`nmtpipe vocab` on the driver: the subword vocabulary of a prepared dataset.

Tensor2Tensor's SubwordTextEncoder is built from the token counts `prepare` committed
(or from T2T's byte-budget line sample); SentencePiece unigram/BPE models and Hugging
Face `tokenizers` vocabularies (WordPiece, BPE, Unigram) train on a deterministic sample
of the training split. Each kind is a class (`transforms/vocab/kinds/`) that builds a
side from what `_Build` gives it. The sample a kind reads is the step's graph
(`transforms/beam/sample.py`: both columns of each train shard read once), drawn in Beam
before any side is built; the builds are the driver's. Either way the output also has fairseq
`dict.{lang}.txt` files for the same vocabulary, and is committed like every step:
files first, `manifest.json` last, reused when the same inputs and options come again.
"""

from __future__ import annotations

import functools
import re
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nmtpipe import __version__
from nmtpipe.pipelines.workflow.steps.beam_steps import BeamStep
from nmtpipe.pipelines.workflow.steps.protocol import Log, Written
from nmtpipe.pipelines.workflow.steps.runner import run_step
from nmtpipe.transforms.beam.sample import SampleTrainText
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.formats.prepared import pair_bytes, read_prepared
from nmtpipe.transforms.options import option
from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.storage.commit import STAGING, StepOutcome
from nmtpipe.transforms.storage.manifest import file_entry
from nmtpipe.transforms.storage.read_meter import Meter
from nmtpipe.transforms.vocab.counts import JOINED
from nmtpipe.transforms.vocab.kinds.registry import (
    FILE_PATTERNS,
    MODELS,
    kind_of,
    with_kind_configs,
)
from nmtpipe.transforms.vocab.sample import (
    BudgetSample,
    IdSample,
    TrainShard,
    read_budget_sample,
    sample_lines,
    train_shards,
)
from nmtpipe.transforms.vocab.vocabulary import KIND

if TYPE_CHECKING:
    import apache_beam as beam
    from apache_beam.options.pipeline_options import PipelineOptions

_COLUMNS = ["src", "tgt"]  # what a sample holds of each pair, whatever the sides

# every kind's files and the fairseq dictionaries
_OURS = re.compile("^(" + "|".join([*FILE_PATTERNS, r"dict\.[^/]+\.txt"]) + ")$")


@with_kind_configs
@dataclass(frozen=True)
class VocabConfig:
    """What `nmtpipe vocab` was asked to build: the options every kind builds with and,
    from the registry, each kind's config in the field named as the kind (`t2t`, `spm`,
    `hf`)."""

    prepared: str = option(metavar="URL", help="a committed `nmtpipe prepare` output")
    output: str = option(metavar="URL", help="where to write the vocabulary")
    model: str = option("t2t", choices=MODELS, help="vocabulary type")
    vocab_size: int = option(8192, metavar="N", help="target size")
    joined: bool = option(
        False,
        aliases=("--joined-dictionary",),
        help="one vocabulary for both languages (--joined-dictionary: fairseq's name)",
    )

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ConfigError(f"unknown --model {self.model!r}; choose from {', '.join(MODELS)}")
        if self.vocab_size < 1:
            raise ConfigError("--vocab-size must be positive")

    def options(self) -> dict[str, Any]:
        """The options that shape the output (fingerprinted, recorded in the manifest):
        the shared ones and the model's kind's."""
        kind = kind_of(self.model)
        shared = {"model": self.model, "vocab_size": self.vocab_size, "joined": self.joined}
        return {**shared, **kind.options(kind.config(self))}


class _Build:
    """One build's context, the `Source` a kind builds from: the options, the prepared
    parts, the staging folder, and the sample the step's graph drew (`selector`'s lines
    of the `shards` of the training split, under `sampled`)."""

    def __init__(
        self,
        config: VocabConfig,
        parts: list[tuple[str, dict[str, Any]]],
        staging: str,
        sampled: str,
        shards: int,
        selector: IdSample | BudgetSample | None,
        log: Log,
    ) -> None:
        self.options, self.parts, self.staging, self.log = config, parts, staging, log
        self.sampled, self.shards, self.selector = sampled, shards, selector
        # What a build spills goes with the staging folder, where that is on local disk.
        self.spill = fsio.url_to_fs(staging)[1] if fsio.is_local(staging) else None
        langs = parts[0][1]["options"]["languages"]
        self.columns = {langs["src"]: ["src"], langs["tgt"]: ["tgt"], JOINED: _COLUMNS}

    def sample(self, side: str) -> list[str]:
        """`side`'s lines of the sample, column by column, shard by shard."""
        selector = self.selector
        assert selector is not None, "the kind draws no sample"
        lines = []
        for column in self.columns[side]:
            chosen = sample_lines(self.sampled, column, self.shards)
            if isinstance(selector, BudgetSample):  # T2T's budget applies per file (side)
                chosen = iter(read_budget_sample(chosen, selector.file_byte_budget))
            lines += chosen
        return lines


def _train_shards(parts: list[tuple[str, dict[str, Any]]]) -> list[TrainShard]:
    """The train shards of all parts, numbered and offset as one dataset."""
    shards: list[TrainShard] = []
    offset = 0
    for root, doc in parts:
        shards += [
            TrainShard(len(shards) + s.index, s.url, offset + s.first_row, s.size)
            for s in train_shards(root, doc)
        ]
        offset += doc["splits"]["train"]["pairs"]
    return shards


class VocabStep(BeamStep):
    """`nmtpipe vocab` as a step: the prepared parts read and fingerprinted with the
    options; its graph draws the sample its kind reads, if any, and its write builds
    each side's vocabulary on the driver, committed with the fairseq dictionaries."""

    kind = KIND
    label = "SampleTrainText"
    ours = _OURS
    command = "vocab"
    summarised = False  # its graph leaves the sample, for `write`, and no summary

    def __init__(self, config: VocabConfig, parts: list[tuple[str, dict[str, Any]]]) -> None:
        self.config, self.parts = config, parts
        self.output = fsio.canonical_url(config.output)
        sources = [{"url": root, "fingerprint": doc["fingerprint"]} for root, doc in parts]
        self.sources = sources[0] if len(parts) == 1 else sources
        self.fingerprint = manifest.fingerprint(
            {
                "step": KIND,
                "code_version": __version__,
                "prepared": sources[0]["fingerprint"] if len(parts) == 1 else sources,
                **config.options(),
            }
        )
        self.langs = parts[0][1]["options"]["languages"]
        self.sides = [JOINED] if config.joined else [self.langs["src"], self.langs["tgt"]]
        self.input_bytes = sum(pair_bytes(doc, "train") for _, doc in parts)
        self.shards = _train_shards(parts)
        pairs = sum(doc["splits"]["train"]["pairs"] for _, doc in parts)
        self.selector = kind_of(config.model).sample(config, pairs)
        self.reports: dict[str, dict[str, Any]] = {}

    @functools.cached_property
    def sampled(self) -> str:
        """Where its graph leaves the sample (one folder per run)."""
        return fsio.join(self.output, STAGING, f"sample-{uuid.uuid4().hex}")

    def announce(self, runner: str, options: PipelineOptions) -> str:
        config = self.config
        return (
            f"building a {config.model} vocabulary of {config.vocab_size} for "
            f"{', '.join(self.sides)}"
        )

    def graph(self, options: PipelineOptions, meter: Meter | None = None) -> beam.PTransform | None:
        """The sample its kind reads, of both columns of every train shard; None: the
        kind reads none (T2T from prepare's token counts)."""
        if self.selector is None:
            return None
        return SampleTrainText(self.shards, self.selector, _COLUMNS, self.sampled, meter)

    def write(self, summary: dict[str, Any] | None, log: Log) -> Written:
        out, kind = self.output, kind_of(self.config.model)
        staging = fsio.join(out, STAGING, uuid.uuid4().hex)
        build = _Build(
            self.config, self.parts, staging, self.sampled, len(self.shards), self.selector, log
        )
        files, dicts = [], {}
        for side in self.sides:
            report: dict[str, Any] = {}
            built = kind.build(build, side, report)
            report["vocab_size"] = built.vocab_size
            named = [*zip(kind.files(side), built.files, ["vocab"] * len(built.files), strict=True)]
            for name, data, entry in [*named, *built.extras]:
                written = fsio.write_bytes(fsio.join(out, name), data)
                files.append(file_entry(out, written, entry, built.vocab_size, side=side))
            dicts[side] = built.dict_text
            self.reports[side] = report
        for lang in (self.langs["src"], self.langs["tgt"]):
            text = dicts[JOINED if self.config.joined else lang]
            written = fsio.write_bytes(fsio.join(out, f"dict.{lang}.txt"), text.encode())
            files.append(file_entry(out, written, "fairseq-dict", text.count("\n"), side=lang))
        return Written(files, None)

    def manifest(self, files: list[dict[str, Any]], stats: dict[str, Any] | None) -> dict:
        config, kind = self.config, kind_of(self.config.model)
        return {
            "prepared": self.sources,
            "languages": self.langs,
            "options": config.options(),
            "model": config.model,
            "vocabularies": {
                side: {"files": kind.files(side), **self.reports[side]} for side in self.sides
            },
            "special_ids": kind.special_ids(config),
            "files": sorted(files, key=lambda f: f["path"]),
        }

    def figures(self, outcome: StepOutcome) -> str:
        doc = outcome.manifest
        sizes = {side: v.get("vocab_size") for side, v in doc["vocabularies"].items()}
        return f"{doc['model']} " + ", ".join(f"{s} {n:,}" for s, n in sizes.items() if n)


def run_vocab(
    config: VocabConfig,
    beam_args: list[str],
    parts: list[tuple[str, dict[str, Any]]] | None = None,
    **how: Any,
) -> StepOutcome:
    """Build `config.output` unless it already holds this exact vocabulary: from
    `config.prepared`, or from the training text of several prepared datasets (a
    refresh's `parts`, as (root, manifest): their token counts are summed); `how`:
    `run_steps`' force, replace, log and quiet."""
    return run_step(
        lambda: VocabStep(config, parts or [read_prepared(config.prepared, "--prepared")]),
        beam_args,
        **how,
    )
