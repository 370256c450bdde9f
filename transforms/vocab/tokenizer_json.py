"""Vocabularies as Hugging Face `tokenizer.json` files that encode exactly as nmtpipe does.

A SentencePiece model becomes a `tokenizers` pipeline that gives its ids for every
text: its own normaliser (the precompiled character map, SentencePiece's whitespace
rules), the `▁` pre-tokeniser, the Unigram model with its scores (or BPE with merges
ranked by score), EOS appended, and a decoder that undoes it. Control symbols (`<s>`,
`</s>`, `<pad>`) stay in the vocabulary for decoding but can never be produced from
text, as in SentencePiece: their scores are pushed below any real segmentation, and
the tokenizer is told not to split them out of raw text (`split_special_tokens`).
One difference remains: where a special's spelling (`<s>`, `<unk>`) is typed in raw
text and a character of it is outside the vocabulary, `tokenizers` prefers the
special's piece to unknown characters (its unknown score is always the lowest), while
SentencePiece writes unknowns.

`with_normalization` puts the `prepare` step's normalisation in front (NUL and C1
controls, full-width to half-width, the Unicode form, whitespace), so that raw text
gives the ids `nmtpipe decode --input` gives it. Models with options that `tokenizers`
cannot reproduce (whitespace as suffix, digit splitting, ...) are refused.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import sentencepiece as spm
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, processors
from tokenizers import pre_tokenizers as pre

from nmtpipe.transforms.text import normalize
from nmtpipe.transforms.text.normalize import NormalizeConfig
from nmtpipe.transforms.vocab.fairseq_dict import SPECIALS

TOKENIZER_FILE = "tokenizer.json"
_SPACE = "▁"
_UNK_SURFACE = " \u2047 "  # SentencePiece's default unk_surface
_UNREACHABLE = -1e9  # the score of pieces text must never produce (f64: exact sums remain)
# SentencePiece's ModelProto, TrainerSpec and NormalizerSpec field numbers.
_TRAINER, _NORMALIZER = 2, 3
_MODEL_TYPE, _SPLIT_DIGITS, _SUFFIX, _BYTE_FALLBACK = 3, 25, 24, 35
_SPLIT_BY_WHITESPACE = 22
_RULE_NAME, _CHARSMAP, _DUMMY_PREFIX, _EXTRA_WHITESPACE, _ESCAPE = 1, 2, 3, 4, 5
_UNIGRAM, _BPE = 1, 2


class NotExpressible(ValueError):
    """A vocabulary that no `tokenizer.json` reproduces exactly."""


def _varint(buf: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = buf[i]
        i += 1
        value |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            return value, i


def proto_fields(buf: bytes) -> dict[int, list[Any]]:
    """The fields of a protobuf message, by number (ints and bytes, undecoded further):
    enough to read a SentencePiece model's specs without its generated module, which
    needs a newer protobuf than Beam allows."""
    out: dict[int, list[Any]] = {}
    i = 0
    while i < len(buf):
        key, i = _varint(buf, i)
        wire = key & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            size, i = _varint(buf, i)
            value, i = buf[i : i + size], i + size
        else:  # fixed 64 or 32 bits
            size = 8 if wire == 1 else 4
            value, i = buf[i : i + size], i + size
        out.setdefault(key >> 3, []).append(value)
    return out


def _flag(fields: dict[int, list[Any]], number: int, default: bool) -> bool:
    return bool(fields[number][-1]) if number in fields else default


def _spm_pipeline(spec: dict[int, list[Any]]) -> list[Any]:
    """The normalisers of a SentencePiece model's NormalizerSpec, in its order."""
    name = spec[_RULE_NAME][-1].decode() if _RULE_NAME in spec else "identity"
    steps: list[Any] = []
    if spec.get(_CHARSMAP, [b""])[-1]:
        steps += _charsmap(name, spec[_CHARSMAP][-1])
    if _flag(spec, _EXTRA_WHITESPACE, True):
        steps += _collapse_spaces()
    return steps


def _named_rule(name: str) -> spm.SentencePieceNormalizer:
    """SentencePiece's built-in rule `name`, without its whitespace handling."""
    return spm.SentencePieceNormalizer(
        rule_name=name, add_dummy_prefix=False, escape_whitespaces=False,
        remove_extra_whitespaces=False,
    )  # fmt: skip


def _charsmap_of(normalizer: spm.SentencePieceNormalizer) -> bytes:
    return proto_fields(normalizer.serialized_normalizer_spec())[_CHARSMAP][-1]


def _every_char() -> list[str]:
    return [chr(cp) for cp in range(1, 0x110000) if not 0xD800 <= cp < 0xE000]


@functools.lru_cache(maxsize=8)
def _charsmap(name: str, charsmap: bytes) -> list[Any]:
    """A SentencePiece character map as `tokenizers` normalisers that give what
    SentencePiece gives. `normalizers.Precompiled` would read the map itself, but it
    drops the rest of a grapheme cluster after a mapped prefix (`X` + U+0301 loses the
    accent), which real text has. So NFKC rules are Unicode NFKC (plus the NMT rules,
    plus lower-casing for `_cf`), corrected character by character where the map
    differs from that (found by asking SentencePiece about every code point); any other
    map falls back to `Precompiled`."""
    reference = _named_rule(name) if name.startswith(("nmt_nfkc", "nfkc")) else None
    if reference is None or _charsmap_of(reference) != charsmap:
        return [normalizers.Precompiled(charsmap)]
    base = [normalizers.NFKC()]
    if name.startswith("nmt_"):
        rules = normalize._NMT_RULES
        base += [
            normalizers.Replace(Regex(_char_class(c for c, v in rules.items() if v is None)), ""),
            normalizers.Replace(Regex(_char_class(c for c, v in rules.items() if v)), " "),
        ]
    if name.endswith("_cf"):
        base.append(normalizers.Lowercase())
    chars = _every_char()
    want = reference.normalize(chars)
    plain = normalizers.Sequence(base)
    before, after = {}, {}
    for char, wanted in zip(chars, want, strict=True):
        got = plain.normalize_str(char)
        if got == wanted:
            continue
        if plain.normalize_str(wanted) == wanted:
            before[char] = wanted  # replaced first, then left alone by the rest
        elif got and got not in after:
            after[got] = wanted
    return [
        *(normalizers.Replace(c, w) for c, w in before.items()),
        *base,
        *(normalizers.Replace(g, w) for g, w in after.items()),
    ]


def _collapse_spaces() -> list[Any]:
    """SentencePiece's `remove_extra_whitespaces`: ASCII spaces only, after normalising."""
    return [normalizers.Replace(Regex("^ +| +$"), ""), normalizers.Replace(Regex(" {2,}"), " ")]


def spm_tokenizer(model: bytes, size: int | None = None) -> Tokenizer:
    """The `tokenizers` pipeline of a SentencePiece model trained with fairseq's ids (as
    `nmtpipe vocab` trains them); `size` > the model's pieces pads the vocabulary with
    fairseq's `madeupwordNNNN` entries, which text never produces."""
    top = proto_fields(model)
    trainer = proto_fields(top[_TRAINER][-1]) if _TRAINER in top else {}
    spec = proto_fields(top[_NORMALIZER][-1]) if _NORMALIZER in top else {}
    if _flag(trainer, _SUFFIX, False) or _flag(trainer, _SPLIT_DIGITS, False):
        raise NotExpressible("SentencePiece models with whitespace as suffix or split digits")
    if not _flag(spec, _ESCAPE, True) or not _flag(trainer, _SPLIT_BY_WHITESPACE, True):
        raise NotExpressible("SentencePiece models that do not split at escaped whitespace")
    kind = trainer.get(_MODEL_TYPE, [_UNIGRAM])[-1]
    byte_fallback = _flag(trainer, _BYTE_FALLBACK, False)
    sp = spm.SentencePieceProcessor(model_proto=model)
    pieces = [sp.id_to_piece(i) for i in range(sp.get_piece_size())]
    if pieces[: len(SPECIALS)] != list(SPECIALS):
        raise NotExpressible(f"SentencePiece models whose first pieces are not {SPECIALS}")
    control = [i for i in range(len(pieces)) if sp.is_control(i)]
    unk = sp.unk_id()
    unreachable = {*control, unk}
    scores = [_UNREACHABLE if i in unreachable else sp.get_score(i) for i in range(len(pieces))]
    extra = [f"madeupword{k:04d}" for k in range((size or len(pieces)) - len(pieces))]
    if kind == _UNIGRAM:
        vocab = list(zip(pieces, scores, strict=True)) + [(w, _UNREACHABLE) for w in extra]
        model_ = models.Unigram(vocab, unk_id=unk, byte_fallback=byte_fallback)
    elif kind == _BPE:
        model_ = _bpe(sp, pieces, control, extra, byte_fallback)
    else:
        raise NotExpressible(f"SentencePiece model type {kind} (only unigram and BPE)")
    tok = Tokenizer(model_)
    tok.normalizer = normalizers.Sequence(_spm_pipeline(spec))
    prepend = "always" if _flag(spec, _DUMMY_PREFIX, True) else "never"
    tok.pre_tokenizer = pre.Metaspace(replacement=_SPACE, prepend_scheme=prepend, split=True)
    # SentencePiece writes an unknown piece as " ⁇ " (kept when decoding specials too)
    steps = [decoders.Replace(pieces[unk], _UNK_SURFACE)]
    if byte_fallback:
        steps += [decoders.ByteFallback(), decoders.Fuse()]
    tok.decoder = decoders.Sequence(
        [*steps, decoders.Metaspace(replacement=_SPACE, prepend_scheme=prepend)]
    )
    finish(tok, pieces, control, unk, sp.eos_id())
    return tok


def _bpe(
    sp: spm.SentencePieceProcessor,
    pieces: list[str],
    control: list[int],
    extra: list[str],
    byte_fallback: bool,
) -> Any:
    """SentencePiece BPE as ranked merges: a piece is merged from two pieces, ranked by
    its score (SentencePiece merges the best-scoring adjacent pair first)."""
    ids = {p: i for i, p in enumerate(pieces)}
    merges = []
    for i, piece in enumerate(pieces):
        if i in control or sp.is_unknown(i) or sp.is_byte(i):
            continue
        found = [(piece[:k], piece[k:]) for k in range(1, len(piece))
                 if piece[:k] in ids and piece[k:] in ids]  # fmt: skip
        found.sort(key=lambda lr: (ids[lr[0]], ids[lr[1]]))
        merges += [(-sp.get_score(i), i, pair) for pair in found]
    ranked = [pair for _, _, pair in sorted(merges)]
    vocab = {**ids, **{w: len(pieces) + k for k, w in enumerate(extra)}}
    return models.BPE(vocab, ranked, unk_token=sp.id_to_piece(sp.unk_id()),
                      byte_fallback=byte_fallback, fuse_unk=True)  # fmt: skip


def finish(tok: Tokenizer, pieces: list[str], control: list[int], unk: int, eos: int) -> None:
    """Specials registered (for decoding with `skip_special_tokens`), EOS appended: the
    last stage of every nmtpipe `tokenizer.json`, trained here or by `hf_vocab`."""
    specials = sorted({*control, unk})
    tok.add_special_tokens([AddedToken(pieces[i], special=True, normalized=False)
                            for i in specials])  # fmt: skip
    tok.post_processor = processors.TemplateProcessing(
        single=f"$A {pieces[eos]}", pair=f"$A $B {pieces[eos]}", special_tokens=[(pieces[eos], eos)]
    )


def with_normalization(tok: Tokenizer, config: NormalizeConfig) -> Tokenizer:
    """A copy of `tok` that first normalises text as `nmtpipe prepare` did (`config`)."""
    steps = list(_prepare_steps(config))
    out = Tokenizer.from_str(tok.to_str())
    if tok.normalizer is not None:
        steps.append(tok.normalizer)
    out.normalizer = normalizers.Sequence(steps)
    return out


def _char_class(codepoints: Iterator[int]) -> str:
    return "[" + "".join(f"\\x{{{cp:x}}}" for cp in codepoints) + "]"


def _prepare_steps(config: NormalizeConfig) -> Iterator[Any]:
    """`transforms/text/normalize.py`'s Normalizer as `tokenizers` normalisers. With
    full-width punctuation kept, Unicode noncharacters (U+FDD0..U+FDEF) are removed from
    every line, where the Normalizer removes them only from lines that hold full-width
    punctuation: no text should hold them at all."""
    if config.keep_fullwidth_punct:
        yield normalizers.Replace(Regex(_char_class(iter(normalize._NONCHARACTERS))), "")
        for cp, hidden in normalize._HIDE.items():
            yield normalizers.Replace(chr(cp), hidden)
    yield from _form_steps(config)
    if config.keep_fullwidth_punct:
        for cp, shown in normalize._SHOW.items():
            yield normalizers.Replace(chr(cp), shown)


def _form_steps(config: NormalizeConfig) -> Iterator[Any]:
    pre_map = normalize._PRE
    yield normalizers.Replace(Regex(_char_class(cp for cp, v in pre_map.items() if v is None)), "")
    for cp, value in pre_map.items():
        if value is not None:
            yield normalizers.Replace(chr(cp), value)
    if config.q2b:
        for cp, half in normalize._Q2B.items():
            yield normalizers.Replace(chr(cp), half)
    if config.form.startswith("nmt_"):
        yield from _charsmap(config.form, _charsmap_of(_named_rule(config.form)))
    else:
        if config.form in ("nfkc", "nfc"):
            yield normalizers.NFKC() if config.form == "nfkc" else normalizers.NFC()
        rules = normalize._NMT_RULES
        yield normalizers.Replace(
            Regex(_char_class(cp for cp, v in rules.items() if v is None)), ""
        )
        yield normalizers.Replace(Regex(_char_class(cp for cp, v in rules.items() if v)), " ")
    if config.collapse_whitespace:
        yield from _collapse_spaces()


def tokenizer_config(tok: Tokenizer, eos: str, max_length: int) -> dict[str, Any]:
    """`tokenizer_config.json` for `AutoTokenizer`: the specials by name, and special
    symbols in raw text read as text (SentencePiece never produces them from text)."""
    names = {tok.id_to_token(i) for i in range(len(SPECIALS))}
    config: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "model_max_length": max_length,
        "split_special_tokens": True,
        "clean_up_tokenization_spaces": False,
        "eos_token": eos,
    }
    for key, name in (("bos_token", "<s>"), ("pad_token", "<pad>"), ("unk_token", "<unk>")):
        if name in names:
            config[key] = name
    return config


def write_files(tok: Tokenizer, eos: str, max_length: int) -> dict[str, bytes]:
    """The files `AutoTokenizer.from_pretrained` reads, by name."""
    return {
        TOKENIZER_FILE: tok.to_str(pretty=True).encode("utf-8"),
        "tokenizer_config.json": (
            json.dumps(tokenizer_config(tok, eos, max_length), indent=2) + "\n"
        ).encode("utf-8"),
    }
