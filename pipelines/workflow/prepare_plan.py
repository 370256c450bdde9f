"""What `nmtpipe prepare` will do: the user's options, resolved into a plan.

Resolving happens on the driver before any pipeline starts: every input is found (or
reported missing), identified by size and version for the fingerprint, and the shard
layout is fixed from the input size.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import pyarrow as pa

from nmtpipe import __version__
from nmtpipe.transforms.beam.prepare import PrepareSpec
from nmtpipe.transforms.corpus import raw_corpus, registry
from nmtpipe.transforms.corpus.fields import parse_fields
from nmtpipe.transforms.corpus.inputs import CorpusInput, archive_member
from nmtpipe.transforms.corpus.registry import AUTO as AUTO_FORMAT
from nmtpipe.transforms.corpus.resolve import (
    parse_columns,
    resolve_pair,
    resolve_pair_prefix,
    resolve_tsv,
)
from nmtpipe.transforms.corpus.tables import resolve_tables
from nmtpipe.transforms.errors import ConfigError, InputError
from nmtpipe.transforms.formats.prepared import KIND
from nmtpipe.transforms.options import comma_list, count, nested, option
from nmtpipe.transforms.quality.judge import PREFIX
from nmtpipe.transforms.quality.registry import quality_config
from nmtpipe.transforms.storage import archives, encodings, fsio, manifest
from nmtpipe.transforms.storage.encodings import AUTO
from nmtpipe.transforms.text.clean import CleanConfig
from nmtpipe.transforms.text.filters import FilterConfig
from nmtpipe.transforms.text.langid.identifier import KNOWN, LangIdConfig, canonical
from nmtpipe.transforms.text.normalize import FORMS, Form, NormalizeConfig
from nmtpipe.transforms.text.records import PAIRS_SCHEMA
from nmtpipe.transforms.text.split import SPLITS, SplitConfig, SplitKey
from nmtpipe.transforms.text.zh_script import SCRIPTS, Script
from nmtpipe.transforms.vocab.counts import JOINED

# One train shard (and one count bucket) per this many bytes of (uncompressed) input.
AUTO_SHARD_BYTES = 32 << 20
# A compressed file's uncompressed size, estimated from its own (its size is all that
# planning reads of it).
COMPRESSION_FACTOR = 4
_COMPRESSED = re.compile(r"\.(gz|bz2|xz|zst|tgz|zip)$")
# The most an archive member is believed to inflate to, per byte of its archive:
# deflate's limit (a .tgz's and a zip's), so that a forged size in an index cannot plan
# millions of shards.
MAX_INFLATION = 1032
_LANG = re.compile(r"^[A-Za-z0-9_-]+$")
# Languages written with full-width punctuation, which their sides keep (NFKC would
# make "，" a ","), unless --q2b asks for ASCII punctuation.
FULLWIDTH_PUNCT = ("zh", "yue", "ja")
CHINESE = ("zh", "yue")
# The help groups of `nmtpipe prepare`'s options.
INPUT, OUTPUT, SPLITTING, CLEANING, FILTERS, QUALITY, PERFORMANCE = (
    "input",
    "output",
    "splitting",
    "cleaning",
    "filters",
    "pair scores",
    "performance",
)
# The pair scorers' and the readers' options: a field per kind, per reader that has
# some, registered when this module is imported.
QualityConfig = quality_config(__name__)
ReaderOptions = registry.options_config(__name__, group=INPUT)


def _paths(metavar: str, help: str) -> Any:
    """Input files or prefixes: repeatable, each a comma-separated list (as fairseq's)."""
    return option((), parse=comma_list, repeat=True, metavar=metavar, group=INPUT, help=help)


@dataclass(frozen=True)
class FilePair:
    """One pair of line-aligned files (`--train-pair SRC TGT`), with each side's
    encoding where a YAML item names it (None: the section's `src_encoding`/`tgt_encoding`)."""

    src: str
    tgt: str
    src_encoding: str | None = None
    tgt_encoding: str | None = None


_PAIR_KEYS = tuple(f.name for f in dataclasses.fields(FilePair))


def parse_pair(values: list[str] | dict[str, Any]) -> FilePair:
    """`[SRC, TGT]`, or a YAML mapping `{src, tgt, src_encoding, tgt_encoding}`."""
    if isinstance(values, list):
        return FilePair(*values)
    unknown = sorted(set(values) - set(_PAIR_KEYS))
    if unknown or not {"src", "tgt"} <= set(values):
        raise ValueError(
            f"a pair is [SRC, TGT] or a mapping of {', '.join(_PAIR_KEYS)} (src and tgt "
            f"required), not {values!r}"
        )
    if not all(isinstance(v, str) and v for v in values.values()):
        raise ValueError(f"a pair's values are paths and encoding names, not {values!r}")
    for key in ("src_encoding", "tgt_encoding"):
        if key in values:
            encodings.checked(values[key])
    return FilePair(**values)


def _pairs(help: str) -> Any:
    """Explicit file pairs: two values each time, repeatable."""
    return option((), parse=parse_pair, nargs=2, metavar=("SRC", "TGT"), group=INPUT, help=help)


def _encoding(side: str) -> Any:
    help = (
        f"the encoding of the {side} side's text files (UTF-8, GB18030, Big5, UTF-16, any of "
        "Python's codecs); 'auto' finds it from the first megabyte: a byte-order mark, "
        "UTF-8, else charset-normalizer's guess"
    )
    return option(AUTO, parse=encodings.checked, metavar="ENCODING", group=INPUT, help=help)


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
    trustedpref: tuple[str, ...] = _paths(
        "PREFIX",
        help="trusted pairs (PREFIX.SRC and PREFIX.TGT) that the learned pair scorers learn "
        "from besides the corpus, never written to any split: a clean corpus of the "
        "domain sharpens their scores, and lets a small corpus be judged",
    )
    trusted_table: tuple[str, ...] = _paths(
        "URL", help="trusted pairs as tables (as --table reads them), besides --trustedpref"
    )
    trusted_keep: float = option(
        0.99,
        metavar="F",
        group=QUALITY,
        help="with trusted pairs: each learned score's threshold is set where F of the "
        "trusted pairs keep (their scores' quantile), in place of its option (0: the "
        "options' thresholds)",
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
    train_pair: tuple[FilePair, ...] = _pairs(
        "training data: a pair of line-aligned files named each its own way "
        "(casia2015_en.txt casia2015_ch.txt), any URL, tar://MEMBER::ARCHIVE or "
        "zip://MEMBER::ARCHIVE; an .sgm file's <seg> texts are its lines; in YAML a pair "
        "is [SRC, TGT] or {src, tgt, src_encoding, tgt_encoding}"
    )
    valid_pair: tuple[FilePair, ...] = _pairs(
        "validation data as a file pair (WMT's newsdev2017-enzh-src.en.sgm "
        "newsdev2017-enzh-ref.zh.sgm)"
    )
    test_pair: tuple[FilePair, ...] = _pairs("test data as a file pair")
    table: tuple[str, ...] = _paths(
        "URL",
        help="training data as tables: Parquet, JSON Lines, Arrow (a folder "
        "Dataset.save_to_disk wrote), CSV (a header row) or TMX files; any fsspec URL (hf://datasets/OWNER/NAME/"
        "PATH with the hf extra); globs allowed",
    )
    valid_table: tuple[str, ...] = _paths("URL", help="validation data as tables")
    test_table: tuple[str, ...] = _paths("URL", help="test data as tables")
    table_columns: tuple[str, str] | None = option(
        None,
        parse=parse_fields,
        metavar="SRC,TGT",
        group=INPUT,
        help="the tables' source and target fields, dotted paths into structs "
        "(translation.en,translation.zh), or a TMX's two xml:lang codes (default: the "
        "translation struct's fields named as the languages, or columns so named)",
    )
    table_format: str = option(
        AUTO_FORMAT,
        choices=registry.table_formats(),
        group=INPUT,
        help=f"the tables' format ('auto': by each file's suffix: {registry.table_suffixes()})",
    )
    src_encoding: str = _encoding("source")
    tgt_encoding: str = _encoding("target")
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
    quality: QualityConfig = nested(QualityConfig, group=QUALITY)
    readers: ReaderOptions = nested(ReaderOptions, group=INPUT)
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
    # Where cleaned batches meet the shard writers (`PrepareStep`, `formats/batch_transport.py`);
    # not part of the result.
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
        if not (self.trainpref or self.train_pair or self.tsv or self.table):
            raise ConfigError(
                "give the training data with --trainpref, --train-pair, --tsv or --table"
            )
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
        if not 0 <= self.trusted_keep < 1:
            raise ConfigError(f"--trusted-keep {self.trusted_keep}: a share from 0 to below 1")
        if self.trusted_given and not self.quality.learned_scorers():
            raise ConfigError(
                "--trustedpref, --trusted-table: none of the chosen scorers learns "
                f"(--scorers {','.join(self.quality.scorers) or 'none'})"
            )
        sides = [canonical(lang) for lang in (self.src_lang, self.tgt_lang)]
        if self.zh_script != "keep" and not set(sides) & set(CHINESE):
            raise ConfigError(f"--zh-script {self.zh_script}: neither side is Chinese")

    @property
    def trusted_given(self) -> bool:
        return bool(self.trustedpref or self.trusted_table)

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
    # The inputs' estimated uncompressed size (what picks shards, runner mode and the
    # progress bar's total): `estimated_bytes`.
    input_bytes: int
    # Pairs the learned scorers learn from besides the inputs (read as train pairs), and
    # their identities.
    trusted: tuple[CorpusInput, ...] = ()
    trusted_identities: tuple[dict[str, Any], ...] = ()

    @property
    def langs(self) -> tuple[str, str]:
        return self.config.src_lang, self.config.tgt_lang

    @property
    def splits(self) -> tuple[str, ...]:
        return self.clean.split.splits()

    def shard_counts(self) -> dict[str, int]:
        return dict(self.clean.split.shards)

    def pairs_schema(self) -> pa.Schema:
        """The pair shards' columns: PAIRS_SCHEMA's, then each learned score's
        (`quality/judge.py`), in the scorers' order."""
        columns = [c for s in self.config.quality.pair_scorers() if s.PASSES for c in s.COLUMNS]
        return pa.schema([*PAIRS_SCHEMA, *(pa.field(PREFIX + c, pa.float32()) for c in columns)])

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
            "quality": quality_options(self.config.quality),
            # only where given, so that fingerprints without trusted pairs hold
            **({"trusted": self.trusted_options()} if self.trusted else {}),
        }

    def trusted_options(self) -> dict[str, Any]:
        """The trusted pairs and the share of them the learned thresholds keep."""
        return {"pairs": list(self.trusted_identities), "keep": float(self.config.trusted_keep)}

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
            quality=self.config.quality,
            trusted=self.trusted,
            trusted_keep=self.config.trusted_keep,
            key_partitions=self.shard_counts()["train"],
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


def quality_options(config: QualityConfig) -> dict[str, Any]:
    """The pair scorers chosen and the options of each (the others' are no part of the
    output)."""
    return {
        "scorers": list(config.scorers),
        **({"learn_pairs": config.learn_pairs} if config.learned_scorers() else {}),
        **{name: dataclasses.asdict(getattr(config, name)) for name in config.scorers},
    }


def resolve_inputs(config: PrepareConfig) -> list[CorpusInput]:
    """Every input the config names, found (globs expanded) or reported missing."""
    langs = config.src_lang, config.tgt_lang
    wanted = config.src_encoding, config.tgt_encoding
    inputs: list[CorpusInput] = []
    for role, prefixes, pairs, tables in (
        ("train", config.trainpref, config.train_pair, config.table),
        ("valid", config.validpref, config.valid_pair, config.valid_table),
        ("test", config.testpref, config.test_pair, config.test_table),
    ):
        for prefix in prefixes:
            inputs += resolve_pair_prefix(prefix, *langs, role, wanted)
        for pair in pairs:
            sides = pair.src_encoding or wanted[0], pair.tgt_encoding or wanted[1]
            inputs.append(resolve_pair(pair.src, pair.tgt, role, sides))
        for url in tables:
            inputs += resolve_tables(
                url, role, langs, config.table_format, config.table_columns, config.readers
            )
    for pattern in config.tsv:
        inputs += resolve_tsv(pattern, config.tsv_columns, "train", config.src_encoding)
    inputs = [  # each input's reader's options (a table's read its fields with them)
        dataclasses.replace(inp, options=registry.chosen_options(inp.reader, config.readers))
        for inp in inputs
    ]
    seen: set[str] = set()
    for inp in inputs:
        for url in inp.urls():
            if url in seen:
                raise ConfigError(f"{url} is given more than once")
            seen.add(url)
    return inputs


def resolve_trusted(config: PrepareConfig, inputs: Iterable[CorpusInput]) -> list[CorpusInput]:
    """The trusted pairs the config names, to be read and cleaned as train pairs; none
    may also be an input."""
    langs, wanted = (config.src_lang, config.tgt_lang), (config.src_encoding, config.tgt_encoding)
    found = [
        inp
        for prefix in config.trustedpref
        for inp in resolve_pair_prefix(prefix, *langs, "trusted", wanted)
    ]
    for url in config.trusted_table:
        found += resolve_tables(
            url, "trusted", langs, config.table_format, config.table_columns, config.readers
        )
    given = {url for inp in inputs for url in inp.urls()}
    for inp in found:
        for url in inp.urls():
            if url in given:
                raise ConfigError(
                    f"{url} is given both as trusted pairs and as an input (the scorers "
                    "learn from every input's pairs already)"
                )
    return [
        dataclasses.replace(
            inp, role="train", options=registry.chosen_options(inp.reader, config.readers)
        )
        for inp in found
    ]


class Trusted(NamedTuple):
    """The trusted pairs a config names, resolved once, and their identities."""

    inputs: tuple[CorpusInput, ...]
    identities: tuple[dict[str, Any], ...]


def trusted_pairs(
    config: PrepareConfig, inputs: Iterable[CorpusInput], checksum: bool = False
) -> Trusted:
    """The config's trusted pairs, checked against all its `inputs` (a refresh plans
    each input alone, with these)."""
    found = tuple(resolve_trusted(config, inputs))
    return Trusted(found, tuple(identity(i, checksum) for i in found))


def check_named_encodings(inputs: Iterable[CorpusInput]) -> None:
    """Refuse a side of text lines whose first bytes are plainly not in the encoding
    named for it (`encodings.trusted`): read anyway, it would be kept as mojibake or
    mostly rejected, and the run would succeed."""
    for inp in inputs:
        if registry.is_table(inp.reader):
            continue  # a table's encoding is its format's
        flags = ("--src-encoding", "--tgt-encoding")
        for url, named, flag in zip(inp.urls(), inp.encodings, flags, strict=False):
            if named == AUTO:
                continue
            with raw_corpus.open_binary(url) as f:
                head = raw_corpus.read_head(f, url)
            encodings.trusted(url, named, head, len(head) < encodings.SAMPLE_BYTES, flag)


def identity(inp: CorpusInput, checksum: bool = False) -> dict[str, Any]:
    """What identifies an input's content: its role, columns, how it is read (a table's
    format and fields, encodings named) and files' size and version (or, with
    `checksum`, the sha256 of a plain file's bytes: a touched file is the same)."""
    files = []
    for url in inp.urls():
        archived = archive_member(url)
        try:
            if archived:
                _, member, archive = archived
                files.append({**fsio.file_identity(archive), "member": member})
            elif checksum:
                size = fsio.file_identity(url)["size"]
                files.append({"url": url, "size": size, "sha256": fsio.sha256_of(url)})
            else:
                files.append(fsio.file_identity(url))
        except FileNotFoundError:
            where = f"{archived[2]}, the archive of {url}" if archived else url
            raise InputError(f"no such file: {where}") from None
    found: dict[str, Any] = {"role": inp.role, "origin": inp.origin, "columns": list(inp.columns)}
    if registry.is_table(inp.reader):  # keys only where they say more, so that older
        found |= {"layout": inp.reader, "fields": list(inp.fields or ())}  # fingerprints hold
    elif inp.encodings != (AUTO, AUTO):
        found["encodings"] = list(inp.encodings)
    if inp.options is not None:
        found["options"] = dataclasses.asdict(inp.options)
    return {**found, "files": files}


def estimated_bytes(inputs: tuple[CorpusInput, ...], identities: tuple[dict[str, Any], ...]) -> int:
    """The inputs' uncompressed size as far as planning knows it without reading them.

    A file's is its size, times COMPRESSION_FACTOR where its name says it is compressed,
    times its reader's INFLATION (Parquet's pages are compressed). An archive member's
    is its size as its archive's index records it (`archives.member_sizes`: each
    archive read once for all its members named), times
    the factor where the member's own name says it is compressed (its recorded size is
    then the compressed one), believed up to MAX_INFLATION times the archive's size.
    A member the index does not tell (an archive that cannot be read, a member not in
    it: the reader reports either) is estimated as its whole archive, by the archive's
    name.
    """
    named: dict[tuple[str, str], set[str]] = {}  # (protocol, archive): members
    for inp in inputs:
        for protocol, member, archive in filter(None, map(archive_member, inp.urls())):
            named.setdefault((protocol, archive), set()).add(member)
    sizes = {
        (archive, member): size
        for (protocol, archive), members in named.items()
        for member, size in archives.member_sizes(protocol, archive, members).items()
    }
    total = 0
    for inp, ident in zip(inputs, identities, strict=True):
        inflation = registry.reader(inp.reader).INFLATION
        for url, f in zip(inp.urls(), ident["files"], strict=True):
            size, name = f["size"], f["url"]  # a file's, or an archive's as a whole
            archived = archive_member(url)
            if archived is not None and (archived[2], archived[1]) in sizes:
                _, name, archive = archived
                size = min(sizes[archive, name], f["size"] * MAX_INFLATION)
            total += size * inflation * (COMPRESSION_FACTOR if _COMPRESSED.search(name) else 1)
    return total


def make_plan(
    config: PrepareConfig,
    inputs: tuple[CorpusInput, ...] | None = None,
    roles: frozenset[str] | None = None,
    checksum: bool = False,
    trusted: Trusted | None = None,
) -> PreparePlan:
    """Resolve inputs (checking they exist) and decide the layout of the output.

    A refresh prepares each input alone: `inputs` is then that one, and `roles` the
    roles of all the config's inputs, so that valid and test pairs are carved from the
    training data exactly as they would be when everything is prepared at once.
    `checksum`: inputs identified by their bytes (`identity`). `trusted`: the config's
    trusted pairs, where already resolved against all its inputs (`trusted_pairs`).
    """
    inputs = tuple(resolve_inputs(config)) if inputs is None else inputs
    identities = tuple(identity(i, checksum) for i in inputs)
    trusted = trusted_pairs(config, inputs, checksum) if trusted is None else trusted
    explicit = {i.role for i in inputs} if roles is None else set(roles)
    fractions = {"valid": config.valid_fraction, "test": config.test_fraction}
    carve = tuple(s for s in ("valid", "test") if s not in explicit and fractions[s] > 0)
    input_bytes = estimated_bytes(inputs, identities)
    train_shards = config.num_shards or max(1, math.ceil(input_bytes / AUTO_SHARD_BYTES))
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
        input_bytes=input_bytes,
        trusted=trusted.inputs,
        trusted_identities=trusted.identities,
    )
