"""`nmtpipe vocab` on the driver: the subword vocabulary of a prepared dataset.

Tensor2Tensor's SubwordTextEncoder is built from the token counts `prepare` committed
(or from T2T's byte-budget line sample); SentencePiece unigram/BPE models and Hugging
Face `tokenizers` vocabularies (WordPiece, BPE, Unigram) train on a deterministic sample
of the training split. Samples are drawn in Beam
(`pipelines/beam/sample_graph.py`). Either way the output also has fairseq
`dict.{lang}.txt` files for the same vocabulary, and is committed like every step:
files first, `manifest.json` last, reused when the same inputs and options come again.
"""

from __future__ import annotations

import dataclasses
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from tokenizers import Tokenizer

from nmtpipe import __version__
from nmtpipe.pipelines.beam.options import pipeline_options, run_branches
from nmtpipe.pipelines.beam.sample_graph import SampleTrainText
from nmtpipe.transforms.errors import ConfigError, InputError
from nmtpipe.transforms.formats.prepared import pair_bytes, read_prepared
from nmtpipe.transforms.options import comma_list, nested, option
from nmtpipe.transforms.progress import Progress, heartbeat
from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.storage.commit import STAGING, commit, reuse_committed
from nmtpipe.transforms.storage.manifest import file_entry
from nmtpipe.transforms.text import t2t_tokenizer
from nmtpipe.transforms.vocab import counts as counts_lib
from nmtpipe.transforms.vocab import hf_vocab, id_layout, spm_vocab, tokenizer_json
from nmtpipe.transforms.vocab.counts import JOINED
from nmtpipe.transforms.vocab.fairseq_dict import SPECIALS, dict_text
from nmtpipe.transforms.vocab.hf_vocab import HfConfig
from nmtpipe.transforms.vocab.sample import (
    BudgetSample,
    IdSample,
    TrainShard,
    read_budget_sample,
    sample_lines,
    train_shards,
)
from nmtpipe.transforms.vocab.spm_vocab import MODEL_TYPES, SpmConfig
from nmtpipe.transforms.vocab.subword import RESERVED_TOKENS, SubwordTextEncoder, check_reserved
from nmtpipe.transforms.vocab.subword_build import SubwordBuilder
from nmtpipe.transforms.vocab.vocabulary import KIND

MODELS = ("t2t", "unigram", "bpe", *hf_vocab.KINDS)
T2T = "Tensor2Tensor subwords (--model t2t)"
SPM = "SentencePiece (--model unigram|bpe)"
HF = "Hugging Face tokenizers (--model wordpiece|bpe-hf|unigram-hf)"
_OURS = re.compile(
    r"^(vocab(\.[^/]+)?\.subwords|spm(\.[^/]+)?\.(model|vocab)|tokenizer(\.[^/]+)?\.json"
    r"|dict\.[^/]+\.txt)$"
)


def _pair(text: str) -> tuple[int, int]:
    try:
        lo, hi = (int(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"wants two integers like 1,1000, not {text!r}") from None
    return lo, hi


@dataclass(frozen=True)
class VocabConfig:
    """What `nmtpipe vocab` was asked to build."""

    prepared: str = option(metavar="URL", help="a committed `nmtpipe prepare` output")
    output: str = option(metavar="URL", help="where to write the vocabulary")
    model: str = option("t2t", choices=MODELS, help="vocabulary type")
    vocab_size: int = option(8192, metavar="N", help="target size")
    joined: bool = option(
        False,
        aliases=("--joined-dictionary",),
        help="one vocabulary for both languages (--joined-dictionary: fairseq's name)",
    )
    # Tensor2Tensor's options.
    max_subtoken_length: int | None = option(
        None,
        metavar="L",
        group=T2T,
        help="T2T's max_subtoken_length (subtokens up to L-1 characters); bounds the cost "
        "of long unspaced tokens",
    )
    file_byte_budget: float | None = option(
        None,
        metavar="B",
        group=T2T,
        help="build from T2T's generate_lines_for_vocab sample of B characters per language "
        "instead of all token counts",
    )
    max_tokens_in_memory: int | None = option(
        None,
        metavar="N",
        group=T2T,
        help="build from the N most frequent tokens only (bounds driver memory)",
    )
    reserved_tokens: tuple[str, ...] = option(
        RESERVED_TOKENS,
        parse=comma_list,
        metavar="T,...",
        group=T2T,
        help="reserved tokens, which must start with T2T's <pad>,<EOS>",
    )
    min_count_bounds: tuple[int, int] = option(
        (1, 1000),
        name="min_count_range",
        parse=_pair,
        metavar="LO,HI",
        group=T2T,
        help="bisection bounds for min_count (T2T: 1,1000)",
    )
    # SentencePiece's and `tokenizers`' options (both train on a sample).
    sample_sentences: int = option(
        1_000_000,
        metavar="N",
        group=SPM,
        help="train on about N pairs' sentences, drawn by hash (SentencePiece and tokenizers)",
    )
    # the SentencePiece model type is --model's (unigram for the others)
    spm: SpmConfig = nested(
        SpmConfig,
        group=SPM,
        defaults={"model_type": lambda o: o["model"] if o["model"] in MODEL_TYPES else "unigram"},
    )
    hf: HfConfig = nested(
        HfConfig,
        group=HF,
        defaults={
            "pre_tokenizer": lambda o: "byte-level" if o["model"] == "bpe-hf" else "metaspace",
            "isolate_cjk": lambda o: o["model"] == "wordpiece",
        },
    )

    def __post_init__(self) -> None:
        if self.model not in MODELS:
            raise ConfigError(f"unknown --model {self.model!r}; choose from {', '.join(MODELS)}")
        if self.vocab_size < 1:
            raise ConfigError("--vocab-size must be positive")
        if self.max_subtoken_length is not None and self.max_subtoken_length < 1:
            raise ConfigError("--max-subtoken-length must be at least 1")
        if self.file_byte_budget is not None and self.file_byte_budget <= 0:
            raise ConfigError("--file-byte-budget must be positive")
        if self.max_tokens_in_memory is not None and self.max_tokens_in_memory < 1:
            raise ConfigError("--max-tokens-in-memory must be at least 1")
        if self.sample_sentences < 1:
            raise ConfigError("--sample-sentences must be at least 1")
        try:
            check_reserved(self.reserved_tokens)
        except ValueError as e:
            raise ConfigError(str(e)) from e

    def options(self) -> dict[str, Any]:
        """The options that shape the output (fingerprinted, recorded in the manifest)."""
        keep = {"model", "vocab_size", "joined"}
        if self.model == "t2t":
            keep |= {
                "max_subtoken_length",
                "file_byte_budget",
                "max_tokens_in_memory",
                "reserved_tokens",
                "min_count_bounds",
            }
        elif self.model in hf_vocab.KINDS:
            keep |= {"sample_sentences", "hf"}
        else:
            keep |= {"sample_sentences", "spm"}
        return {k: v for k, v in dataclasses.asdict(self).items() if k in keep}


@dataclass(frozen=True)
class VocabOutcome:
    output: str
    cached: bool
    manifest: dict[str, Any]
    seconds: float


def vocab_files(model: str, side: str) -> list[str]:
    """The file names of one side's vocabulary (`joined` has no language in the name)."""
    infix = "" if side == JOINED else f".{side}"
    if model == "t2t":
        return [f"vocab{infix}.subwords"]
    if model in hf_vocab.KINDS:
        return [f"tokenizer{infix}.json"]
    return [f"spm{infix}.model", f"spm{infix}.vocab"]


def _tokenizer_json(
    out: str, model: bytes, side: str, size: int, log: Callable[[str], None]
) -> list[dict[str, Any]]:
    """A SentencePiece model also as `tokenizer.json` (the same ids, EOS appended), for
    Hugging Face `tokenizers` users; none, with the reason logged, where no
    `tokenizer.json` reproduces the model exactly."""
    try:
        tok = tokenizer_json.spm_tokenizer(model)
    except tokenizer_json.NotExpressible as e:
        log(f"no tokenizer.json for {side}: {e}")
        return []
    name = tokenizer_json.TOKENIZER_FILE
    if side != JOINED:
        name = name.replace(".json", f".{side}.json")
    written = fsio.write_bytes(fsio.join(out, name), tok.to_str(pretty=True).encode("utf-8"))
    return [file_entry(out, written, "tokenizer-json", size, side=side)]


class _Build:
    """One run's context: the prepared parts, the staging folder, how to run Beam."""

    def __init__(
        self,
        config: VocabConfig,
        parts: list[tuple[str, dict[str, Any]]],
        staging: str,
        beam_args: list[str],
        quiet: bool,
    ) -> None:
        self.config, self.parts = config, parts
        self.staging, self.beam_args, self.quiet = staging, beam_args, quiet
        langs = parts[0][1]["options"]["languages"]
        self.columns = {langs["src"]: ["src"], langs["tgt"]: ["tgt"], JOINED: ["src", "tgt"]}
        self.train_shards = _train_shards(parts)
        self.input_bytes = sum(pair_bytes(doc, "train") for _, doc in parts)

    def sample(self, selector: IdSample | BudgetSample, side: str) -> list[str]:
        """Lines of `side`'s training text chosen in Beam, column by column, shard by shard."""
        folder = fsio.join(self.staging, f"sample-{side}")
        columns = self.columns[side]
        graph = SampleTrainText(self.train_shards, selector, columns, folder)
        options = pipeline_options(self.beam_args, self.input_bytes)
        run_branches(options, "SampleTrainText", [graph], self.quiet)
        lines = []
        for column in columns:
            chosen = sample_lines(folder, column, len(self.train_shards))
            if isinstance(selector, BudgetSample):  # T2T's budget applies per file (side)
                chosen = iter(read_budget_sample(chosen, selector.file_byte_budget))
            lines += chosen
        return lines

    def t2t_counts(self, side: str, report: dict[str, Any]) -> dict[str, int]:
        """The token counts T2T builds from: prepare's counts, or a byte-budget sample's."""
        cap = self.config.max_tokens_in_memory
        if self.config.file_byte_budget is None:
            found = [counts_lib.count_files(root, doc, side) for root, doc in self.parts]
            if len(found) == 1:  # bucket files of one dataset hold disjoint tokens
                urls, report["distinct_tokens"] = found[0]
                counts = counts_lib.read_counts(urls, cap)
            else:
                counts = counts_lib.sum_counts([urls for urls, _ in found], cap)
                report["distinct_tokens"] = len(counts)
        else:
            lines = self.sample(BudgetSample(self.config.file_byte_budget), side)
            report["sampled_lines"] = len(lines)
            counts = dict(t2t_tokenizer.count_tokens(lines))
            report["distinct_tokens"] = len(counts)
            if cap is not None:
                counts = dict(sorted(counts.items(), key=lambda tc: (-tc[1], tc[0]))[:cap])
        report["distinct_tokens_used"] = len(counts)
        return counts

    def t2t_encoder(
        self, counts: dict[str, int], side: str, report: dict[str, Any]
    ) -> SubwordTextEncoder:
        """T2T's build_to_target_size; a target the data cannot reach is an error."""
        if not counts:
            raise InputError(f"the training split has no tokens for {side}")
        config = self.config
        builder = SubwordBuilder(counts, config.max_subtoken_length, config.reserved_tokens)
        lo, hi = config.min_count_bounds
        # A bisection over [lo, hi] builds at most this many times.
        with Progress(f"vocab {side}", (hi - lo + 1).bit_length(), "build") as shown:
            vocab, trace = builder.build_to_target_size(
                config.vocab_size, lo, hi, lambda m, n: shown.update(1, min_count=m, size=n)
            )
        report["bisection"] = [{"min_count": m, "vocab_size": n} for m, n in trace.steps]
        report["min_count"] = trace.chosen
        largest = max(n for _, n in trace.steps)
        if largest * 100 < config.vocab_size * 99:
            raise ConfigError(
                f"--vocab-size {config.vocab_size} is more than this data supports for {side}: "
                f"the largest vocabulary it gives is {largest} subtokens (min_count "
                f"{config.min_count_bounds[0]}); choose --vocab-size {largest} or less"
            )
        return SubwordTextEncoder(vocab)

    def sentences(self, side: str, report: dict[str, Any]) -> list[str]:
        """About `sample_sentences` pairs' sentences of `side`, chosen by pair id."""
        pairs = sum(doc["splits"]["train"]["pairs"] for _, doc in self.parts)
        fraction = min(1.0, self.config.sample_sentences / max(pairs, 1))
        sentences = self.sample(IdSample(fraction), side)
        report["sample_sentences"] = len(sentences)
        if not sentences:
            raise InputError(f"the training split has no sentences for {side}")
        return sentences

    def hf_tokenizer(
        self, side: str, report: dict[str, Any], log: Callable[[str], None]
    ) -> tuple[Tokenizer, list[int]]:
        """A `tokenizers` vocabulary of `side` and its piece counts over the sample."""
        config = self.config
        sentences = self.sentences(side, report)
        try:
            with heartbeat(f"{config.model} {side} on {len(sentences):,} sentences"):
                tok = hf_vocab.train(sentences, config.model, config.vocab_size, config.hf)
        except Exception as e:  # `tokenizers` raises bare Exceptions
            raise ConfigError(
                f"tokenizers could not train a {config.model} vocabulary of "
                f"{config.vocab_size} for {side}: {e} (raise --vocab-size, or use "
                "--hf-pre-tokenizer byte-level, whose alphabet is 256 bytes)"
            ) from e
        report["pipeline"] = hf_vocab.pipeline(config.model, config.hf)
        size = tok.get_vocab_size(with_added_tokens=False)
        why = hf_vocab.describe_size(config.model, config.vocab_size, size)
        if why:
            log(f"{side}: {why}")
        return tok, hf_vocab.piece_counts(tok, sentences)

    def spm_model(self, side: str, report: dict[str, Any]) -> tuple[bytes, list[int]]:
        """A SentencePiece model of `side` and its piece counts over the sample."""
        sentences = self.sentences(side, report)
        spm_config = dataclasses.replace(self.config.spm, vocab_size=self.config.vocab_size)
        try:
            with heartbeat(f"SentencePiece {side} on {len(sentences):,} sentences"):
                model = spm_vocab.train(sentences, spm_config)
        except RuntimeError as e:
            raise ConfigError(f"SentencePiece could not train on {side}: {e}") from e
        return model, spm_vocab.piece_counts(model, sentences)


def _train_shards(parts: list[tuple[str, dict[str, Any]]]) -> list[TrainShard]:
    """The train shards of all parts, numbered and offset as one dataset."""
    shards: list[TrainShard] = []
    offset = 0
    for root, doc in parts:
        shards += [
            TrainShard(len(shards) + s.index, s.url, offset + s.first_row)
            for s in train_shards(root, doc)
        ]
        offset += doc["splits"]["train"]["pairs"]
    return shards


def _t2t_dict(encoder: SubwordTextEncoder, counts: dict[str, int]) -> str:
    """fairseq dict: every subtoken after `<pad>` and `<EOS>` (further reserved tokens
    included), counted over the tokens, so that fairseq id = T2T id + 2 throughout."""
    totals = np.zeros(encoder.vocab_size, dtype=np.int64)
    for token, count in counts.items():
        for i in encoder.token_ids(token):
            totals[i] += count
    first = id_layout.T2T.first_symbol
    return dict_text(list(encoder.subtokens[first:]), totals[first:].tolist())


def _special_ids(config: VocabConfig) -> dict[str, Any]:
    """The id layouts of the vocabulary and of its fairseq dictionaries (and the names
    of T2T's reserved tokens)."""
    layouts = {
        "vocabulary": id_layout.layout_of(config.model).as_dict(),
        "fairseq": id_layout.FAIRSEQ.as_dict(),
    }
    if config.model == "t2t":
        layouts["reserved_tokens"] = list(config.reserved_tokens)
    return layouts


def run_vocab(
    config: VocabConfig,
    beam_args: list[str],
    force: bool = False,
    replace: bool = False,
    log: Callable[[str], None] = lambda _: None,
    quiet: bool = False,
    parts: list[tuple[str, dict[str, Any]]] | None = None,
) -> VocabOutcome:
    """Build `config.output` unless it already holds this exact vocabulary: from
    `config.prepared`, or from the training text of several prepared datasets (a
    refresh's `parts`, as (root, manifest): their token counts are summed)."""
    pipeline_options(beam_args)  # fail early on bad Beam options
    parts = parts or [read_prepared(config.prepared)]
    started = time.perf_counter()
    out = fsio.canonical_url(config.output)
    sources = [{"url": root, "fingerprint": doc["fingerprint"]} for root, doc in parts]
    fingerprint = manifest.fingerprint(
        {
            "step": KIND,
            "code_version": __version__,
            "prepared": sources[0]["fingerprint"] if len(parts) == 1 else sources,
            **config.options(),
        }
    )
    committed = reuse_committed(out, KIND, fingerprint, force, log, replace)
    if committed is not None:
        return VocabOutcome(out, True, committed, time.perf_counter() - started)
    prepared = parts[0][1]
    langs = prepared["options"]["languages"]
    sides = [JOINED] if config.joined else [langs["src"], langs["tgt"]]
    log(f"building a {config.model} vocabulary of {config.vocab_size} for {', '.join(sides)}")
    build = _Build(config, parts, fsio.join(out, STAGING, uuid.uuid4().hex), beam_args, quiet)
    files, reports, dicts = [], {}, {}
    for side in sides:
        report: dict[str, Any] = {}
        names = vocab_files(config.model, side)
        if config.model == "t2t":
            counts = build.t2t_counts(side, report)
            encoder = build.t2t_encoder(counts, side, report)
            written = [fsio.write_bytes(fsio.join(out, names[0]), encoder.to_text().encode())]
            dicts[side] = _t2t_dict(encoder, counts)
            report["vocab_size"] = encoder.vocab_size
        elif config.model in hf_vocab.KINDS:
            tok, piece_counts = build.hf_tokenizer(side, report, log)
            pieces = hf_vocab.pieces(tok)
            dicts[side] = dict_text(pieces[len(SPECIALS) :], piece_counts[len(SPECIALS) :])
            # padded to the dictionary's size: tokenizer ids are fairseq ids throughout
            tok = hf_vocab.padded(tok, len(SPECIALS) + dicts[side].count("\n"))
            report["vocab_size"] = len(pieces)
            text = tok.to_str(pretty=True).encode("utf-8")
            written = [fsio.write_bytes(fsio.join(out, names[0]), text)]
        else:
            model, piece_counts = build.spm_model(side, report)
            written = [
                fsio.write_bytes(fsio.join(out, names[0]), model),
                fsio.write_bytes(fsio.join(out, names[1]), spm_vocab.vocab_text(model).encode()),
            ]
            pieces = [p for p, _ in spm_vocab.pieces_and_scores(model)]
            dicts[side] = dict_text(pieces[len(SPECIALS) :], piece_counts[len(SPECIALS) :])
            report["vocab_size"] = len(pieces)
            files += _tokenizer_json(out, model, side, len(pieces), log)
        files += [file_entry(out, w, "vocab", report["vocab_size"], side=side) for w in written]
        reports[side] = report
    for lang in (langs["src"], langs["tgt"]):
        text = dicts[JOINED if config.joined else lang]
        written = fsio.write_bytes(fsio.join(out, f"dict.{lang}.txt"), text.encode())
        files.append(file_entry(out, written, "fairseq-dict", text.count("\n"), side=lang))
    doc = {
        "kind": KIND,
        "code_version": __version__,
        "fingerprint": fingerprint,
        "prepared": sources[0] if len(parts) == 1 else sources,
        "languages": langs,
        "options": config.options(),
        "model": config.model,
        "vocabularies": {
            side: {"files": vocab_files(config.model, side), **reports[side]} for side in sides
        },
        "special_ids": _special_ids(config),
        "files": sorted(files, key=lambda f: f["path"]),
    }
    committed = commit(out, KIND, doc, _OURS)
    return VocabOutcome(out, False, committed, time.perf_counter() - started)
