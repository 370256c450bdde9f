"""What `nmtpipe prepare` will do: the user's options, resolved into a plan.

Resolving happens on the driver before any pipeline starts: every input is found (or
reported missing), identified by size and version for the fingerprint, and the shard
layout is fixed from the input size.
"""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass
from typing import Any

from nmtpipe import __version__
from nmtpipe.transforms.beam.prepare import PrepareSpec
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.formats.prepared import KIND
from nmtpipe.transforms.options import comma_list, count, nested, option
from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.storage.inputs import (
    CorpusInput,
    parse_columns,
    resolve_pair_prefix,
    resolve_tsv,
    split_archive_url,
)
from nmtpipe.transforms.text.clean import CleanConfig
from nmtpipe.transforms.text.filters import FilterConfig
from nmtpipe.transforms.text.langid.identifier import KNOWN, LangIdConfig, canonical
from nmtpipe.transforms.text.normalize import FORMS, Form, NormalizeConfig
from nmtpipe.transforms.text.split import SPLITS, SplitConfig, SplitKey
from nmtpipe.transforms.text.zh_script import SCRIPTS, Script
from nmtpipe.transforms.vocab.counts import JOINED

# One train shard (and one count bucket) per this many bytes of (uncompressed) input.
AUTO_SHARD_BYTES = 32 << 20
COMPRESSION_FACTOR = 4
_LANG = re.compile(r"^[A-Za-z0-9_-]+$")
# Languages written with full-width punctuation, which their sides keep (NFKC would
# make "，" a ","), unless --q2b asks for ASCII punctuation.
FULLWIDTH_PUNCT = ("zh", "yue", "ja")
CHINESE = ("zh", "yue")
# The help groups of `nmtpipe prepare`'s options.
INPUT, OUTPUT, SPLITTING, CLEANING, FILTERS, PERFORMANCE = (
    "input", "output", "splitting", "cleaning", "filters", "performance"
)  # fmt: skip


def _paths(metavar: str, help: str) -> Any:
    """Input files or prefixes: repeatable, each a comma-separated list (as fairseq's)."""
    return option((), parse=comma_list, repeat=True, metavar=metavar, group=INPUT, help=help)


def _side_form(side: str) -> Any:
    """The normalisation form of one side (default: --normalize's)."""
    help = f"the {side} side's normalisation, if not --normalize's"
    return option(None, choices=FORMS, metavar="FORM", group=CLEANING, help=help)


@dataclass(frozen=True)
class PrepareConfig:
    """Everything `nmtpipe prepare` was asked to do, as given (inputs unresolved)."""

    src_lang: str = option(
        aliases=("-s", "--source-lang"),
        metavar="SRC",
        group=INPUT,
        help="source language code, e.g. en",
    )
    tgt_lang: str = option(
        aliases=("-t", "--target-lang"),
        metavar="TGT",
        group=INPUT,
        help="target language code, e.g. zh",
    )
    output: str = option(
        aliases=("--destdir",),
        metavar="URL",
        group=OUTPUT,
        help="where to write (local path, file://, s3://, gs://, memory://)",
    )
    trainpref: tuple[str, ...] = _paths(
        "PREFIX",
        help="training data: PREFIX.SRC and PREFIX.TGT (compression suffix found by itself; "
        "globs and comma-separated lists allowed; repeatable)",
    )
    validpref: tuple[str, ...] = _paths(
        "PREFIX",
        help="validation data (default: carved from the training data by hash)",
    )
    testpref: tuple[str, ...] = _paths(
        "PREFIX",
        help="test data (default: carved from the training data by hash)",
    )
    tsv: tuple[str, ...] = _paths(
        "FILE_OR_GLOB",
        help="training data as TSV files instead of (or besides) --trainpref",
    )
    tsv_columns: tuple[int, int] = option(
        (0, 1),
        parse=parse_columns,
        metavar="S,T",
        group=INPUT,
        help="TSV columns of source and target",
    )
    num_shards: int | None = count(
        None, group=OUTPUT, help="train shards (default: one per ~32 MB of input)"
    )
    valid_shards: int = count(1, group=OUTPUT, help="validation shards")
    test_shards: int = count(1, group=OUTPUT, help="test shards")
    valid_fraction: float = option(
        0.01,
        metavar="F",
        group=SPLITTING,
        help="share of the training data carved out as validation set when no --validpref is given",
    )
    test_fraction: float = option(
        0.01, metavar="F", group=SPLITTING, help="likewise for the test set"
    )
    split_key: SplitKey = option(
        "pair",
        choices=("pair", "src", "tgt"),
        group=SPLITTING,
        help="what the split hash covers; 'src' keeps all translations of a sentence in one split",
    )
    seed: int = option(0, metavar="N", group=SPLITTING, help="salt of the split and shard hash")
    normalize: NormalizeConfig = nested(NormalizeConfig, group=CLEANING)
    src_normalize: Form | None = _side_form("source")
    tgt_normalize: Form | None = _side_form("target")
    filters: FilterConfig = nested(FilterConfig, group=FILTERS)
    # None: on for each side whose language it knows
    langid: bool | None = option(
        None,
        negatable=True,
        group=FILTERS,
        help="wrong-language: check that each side of the training input is in its "
        "language (script evidence, function words, then lingua for the unclear lines); "
        f"on by default for the languages it knows ({', '.join(KNOWN)}); sets given with "
        "--validpref/--testpref are kept whole",
    )
    langid_threshold: float = option(
        0.9,
        metavar="P",
        group=FILTERS,
        help="the model confidence that a line is not in its language needed to reject it",
    )
    langid_min_letters: int = count(
        16,
        group=FILTERS,
        help="Latin-script lines with fewer letters are never rejected by the model alone "
        "(names, numbers, 'OK.', two-word exclamations)",
    )
    zh_script: Script = option(
        "keep",
        choices=SCRIPTS,
        group=CLEANING,
        help="convert the Chinese side to one script with OpenCC (phrase by phrase) before "
        "deduplication and vocabulary building; Tatoeba and crawls mix both",
    )
    keep_overlap: bool = option(
        False,
        group=FILTERS,
        help="keep train and valid pairs that share a source or target with a test pair, "
        "and train pairs sharing one with a valid pair (overlap; exact duplicates across "
        "splits are removed all the same)",
    )
    chunk_lines: int = count(20000, group=PERFORMANCE, help="lines per Beam element when reading")
    count_buckets: int | None = count(
        None,
        group=PERFORMANCE,
        help="token-count files per language (default: as many as train shards)",
    )
    # Where cleaned batches meet the shard writers (`PrepareRun`); not part of the result.
    spill_dir: str | None = option(
        "auto",
        metavar="URL",
        group=PERFORMANCE,
        help="where cleaned batches are handed to the shard writers: a directory every "
        "worker can reach, or 'none' for Beam's shuffle ('auto': the local temp "
        "directory with the local runners, Beam's shuffle otherwise)",
    )

    def __post_init__(self) -> None:
        for flag, lang in (("--src-lang", self.src_lang), ("--tgt-lang", self.tgt_lang)):
            if not _LANG.match(lang) or lang == JOINED:
                raise ConfigError(f"{flag} {lang!r} is not a usable language code")
        if self.src_lang == self.tgt_lang:
            raise ConfigError("--src-lang and --tgt-lang must differ")
        if not self.trainpref and not self.tsv:
            raise ConfigError("give the training data with --trainpref or --tsv")
        for name in ("num_shards", "count_buckets"):
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"--{name.replace('_', '-')} must be at least 1")
        if self.chunk_lines < 1 or self.valid_shards < 1 or self.test_shards < 1:
            raise ConfigError("chunk and shard sizes must be at least 1")
        if self.langid:
            unknown = [lang for lang in (self.src_lang, self.tgt_lang) if canonical(lang) is None]
            if unknown:
                raise ConfigError(
                    f"--langid: language identification does not know {', '.join(unknown)} "
                    "(use --no-langid)"
                )
        sides = [canonical(lang) for lang in (self.src_lang, self.tgt_lang)]
        if self.zh_script != "keep" and not set(sides) & set(CHINESE):
            raise ConfigError(f"--zh-script {self.zh_script}: neither side is Chinese")

    def side_normalize(self, side: str) -> NormalizeConfig:
        """How one side is normalised: its own form if given, full-width punctuation kept
        for the languages that write it (unless --q2b)."""
        lang = canonical(self.src_lang if side == "src" else self.tgt_lang)
        form = (self.src_normalize if side == "src" else self.tgt_normalize) or self.normalize.form
        keep = lang in FULLWIDTH_PUNCT and not self.normalize.q2b
        return dataclasses.replace(self.normalize, form=form, keep_fullwidth_punct=keep)

    def langid_config(self) -> LangIdConfig:
        """The sides language identification checks (none with --no-langid)."""
        on = self.langid is not False
        src, tgt = (canonical(lang) if on else None for lang in (self.src_lang, self.tgt_lang))
        try:
            return LangIdConfig(src, tgt, self.langid_threshold, self.langid_min_letters)
        except ValueError as e:
            raise ConfigError(str(e)) from None

    def conversions(self) -> tuple[str | None, str | None]:
        """The Chinese script each side is converted to (None: not converted)."""
        return tuple(  # type: ignore[return-value]
            self.zh_script if self.zh_script != "keep" and canonical(lang) in CHINESE else None
            for lang in (self.src_lang, self.tgt_lang)
        )


@dataclass(frozen=True)
class PreparePlan:
    """A config with its inputs resolved and its shard layout and fingerprint decided."""

    config: PrepareConfig
    output: str
    inputs: tuple[CorpusInput, ...]
    identities: tuple[dict[str, Any], ...]
    clean: CleanConfig
    count_buckets: int
    reject_shards: int

    @property
    def langs(self) -> tuple[str, str]:
        return self.config.src_lang, self.config.tgt_lang

    @property
    def splits(self) -> tuple[str, ...]:
        return self.clean.split.splits()

    @property
    def input_bytes(self) -> int:
        """The inputs' estimated uncompressed size (what picks shards and runner mode)."""
        return _estimated_bytes(self.identities)

    def shard_counts(self) -> dict[str, int]:
        return dict(self.clean.split.shards)

    def options(self) -> dict[str, Any]:
        """The options that shape the output (recorded in the manifest, fingerprinted)."""
        return {
            "languages": {"src": self.config.src_lang, "tgt": self.config.tgt_lang},
            "normalize": {
                side: dataclasses.asdict(self.clean.side_normalize(side)) for side in ("src", "tgt")
            },
            "filters": dataclasses.asdict(self.clean.filters),
            "langid": dataclasses.asdict(self.clean.langid),
            "zh_script": dict(zip(("src", "tgt"), self.clean.convert, strict=True)),
            "keep_overlap": self.config.keep_overlap,
            "split": dataclasses.asdict(self.clean.split),
            "count_buckets": self.count_buckets,
            "reject_shards": self.reject_shards,
        }

    def spec(self) -> PrepareSpec:
        """What the Beam graph needs of the plan."""
        return PrepareSpec(
            output=self.output,
            inputs=self.inputs,
            clean=self.clean,
            langs=self.langs,
            shard_counts=self.shard_counts(),
            count_buckets=self.count_buckets,
            reject_shards=self.reject_shards,
            chunk_lines=self.config.chunk_lines,
            keep_overlap=self.config.keep_overlap,
        )

    def at(self, output: str) -> PreparePlan:
        """The same plan writing to `output` (its fingerprint does not depend on where)."""
        config = dataclasses.replace(self.config, output=output)
        return dataclasses.replace(self, config=config, output=fsio.canonical_url(output))

    @property
    def fingerprint(self) -> str:
        return manifest.fingerprint(
            {"step": KIND, "code_version": __version__, "inputs": self.identities, **self.options()}
        )


def resolve_inputs(config: PrepareConfig) -> list[CorpusInput]:
    """Every input the config names, found (globs expanded) or reported missing."""
    inputs: list[CorpusInput] = []
    for role, prefixes in (
        ("train", config.trainpref),
        ("valid", config.validpref),
        ("test", config.testpref),
    ):
        for prefix in prefixes:
            inputs += resolve_pair_prefix(prefix, config.src_lang, config.tgt_lang, role)
    for pattern in config.tsv:
        inputs += resolve_tsv(pattern, config.tsv_columns, "train")
    seen: set[str] = set()
    for inp in inputs:
        for url in inp.urls():
            if url in seen:
                raise ConfigError(f"{url} is given more than once")
            seen.add(url)
    return inputs


def identity(inp: CorpusInput, checksum: bool = False) -> dict[str, Any]:
    """What identifies an input's content: its role, columns and files' size and version
    (or, with `checksum`, the sha256 of a plain file's bytes: a touched file is the same)."""
    files = []
    for url in inp.urls():
        archived = split_archive_url(url)
        if archived:
            member, archive = archived
            files.append({**fsio.file_identity(archive), "member": member})
        elif checksum:
            size = fsio.file_identity(url)["size"]
            files.append({"url": url, "size": size, "sha256": fsio.sha256_of(url)})
        else:
            files.append(fsio.file_identity(url))
    return {"role": inp.role, "origin": inp.origin, "columns": list(inp.columns), "files": files}


def _estimated_bytes(identities: tuple[dict[str, Any], ...]) -> int:
    total = 0
    for ident in identities:
        for f in ident["files"]:
            compressed = re.search(r"\.(gz|bz2|xz|zst|tgz)$", f["url"]) is not None
            total += f["size"] * (COMPRESSION_FACTOR if compressed else 1)
    return total


def make_plan(
    config: PrepareConfig,
    inputs: tuple[CorpusInput, ...] | None = None,
    roles: frozenset[str] | None = None,
    checksum: bool = False,
) -> PreparePlan:
    """Resolve inputs (checking they exist) and decide the layout of the output.

    A refresh prepares each input alone: `inputs` is then that one, and `roles` the
    roles of all the config's inputs, so that valid and test pairs are carved from the
    training data exactly as they would be when everything is prepared at once.
    `checksum`: inputs identified by their bytes (`identity`).
    """
    inputs = tuple(resolve_inputs(config)) if inputs is None else inputs
    identities = tuple(identity(i, checksum) for i in inputs)
    explicit = {i.role for i in inputs} if roles is None else set(roles)
    fractions = {"valid": config.valid_fraction, "test": config.test_fraction}
    carve = tuple(s for s in ("valid", "test") if s not in explicit and fractions[s] > 0)
    train_shards = config.num_shards or max(
        1, math.ceil(_estimated_bytes(identities) / AUTO_SHARD_BYTES)
    )
    shards = {"train": train_shards, "valid": config.valid_shards, "test": config.test_shards}
    present = {"train"} | explicit | set(carve)
    split = SplitConfig(
        valid_fraction=config.valid_fraction,
        test_fraction=config.test_fraction,
        carve=carve,
        key=config.split_key,
        seed=config.seed,
        shards=tuple((s, shards[s]) for s in SPLITS if s in present),
    )
    return PreparePlan(
        config=config,
        output=fsio.canonical_url(config.output),
        inputs=inputs,
        identities=identities,
        clean=CleanConfig(
            normalize=config.side_normalize("src"),
            tgt_normalize=config.side_normalize("tgt"),
            filters=config.filters,
            split=split,
            langid=config.langid_config(),
            convert=config.conversions(),
        ),
        count_buckets=config.count_buckets or train_shards,
        # Rejects can be as many as the pairs (a noisy crawl): shard them alike.
        reject_shards=train_shards,
    )
