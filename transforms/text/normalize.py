"""Unicode clean-up of one line of text.

The default, `nmt_nfkc`, *is* SentencePiece's normaliser of that name (NFKC plus its
NMT rules: most control characters removed, Unicode spaces and several zero-width
characters turned into ASCII spaces), so text cleaned here is text SentencePiece will
not change again. The `nfkc`, `nfc` and `none` forms use Python's `unicodedata` with
the same NMT rules. Every form also removes NUL and the C1 controls (U+0080..U+009F,
mojibake in practice), which SentencePiece keeps, and maps NEL (U+0085) to a space.

NFKC turns Chinese and Japanese full-width punctuation ("，", "！", "（") into ASCII.
`keep_fullwidth_punct` (the default for those languages, see `prepare_plan.py`) keeps
it: a model trained on such text writes Chinese the way Chinese is written and is
scored against raw references. Full-width letters, digits and symbols are still
normalised.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

import sentencepiece as spm

from nmtpipe.transforms.options import option

Form = Literal["nmt_nfkc", "nmt_nfkc_cf", "nfkc", "nfc", "none"]
FORMS: tuple[str, ...] = ("nmt_nfkc", "nmt_nfkc_cf", "nfkc", "nfc", "none")

# Removed before any other step, in every form.
_PRE = {0x00: None, 0x85: " ", **{cp: None for cp in range(0x80, 0xA0) if cp != 0x85}}

# SentencePiece's NMT rules (what `nmt_nfkc` does on top of NFKC), for the Python forms.
_NMT_REMOVED = [*range(0x01, 0x09), 0x0B, *range(0x0E, 0x20), 0x7F]
_NMT_SPACE = [
    0x09, 0x0A, 0x0C, 0x0D, 0xA0, 0x1680, *range(0x2000, 0x200D), 0x200E, 0x200F,
    0x2028, 0x2029, 0x202F, 0x205F, 0x2581, 0x3000, 0xFEFF, 0xFFFD,
]  # fmt: skip
_NMT_RULES = {**{cp: None for cp in _NMT_REMOVED}, **{cp: " " for cp in _NMT_SPACE}}
# Applied to `\n`-joined lines, so the separator itself is left alone.
_NMT_RULES_BATCH = {cp: v for cp, v in _NMT_RULES.items() if cp != 0x0A}
# The same rules for ASCII text, NUL included, as one `bytes.translate`: a single pass
# where `_translate` scans the text once per character of the table.
_ASCII_SPACED = bytes(cp for cp, v in _NMT_RULES_BATCH.items() if v == " " and cp < 0x80)
_ASCII_SPACES = bytes.maketrans(_ASCII_SPACED, b" " * len(_ASCII_SPACED))
_ASCII_REMOVED = bytes([0x00, *(cp for cp, v in _NMT_RULES_BATCH.items() if v is None)])
_SPACE_RUNS = re.compile(" {2,}")


def _contains_any(text: str, codepoints: Iterable[int]) -> bool:
    """Whether `text` has any of the characters; `in` scans in C, far faster than a regex."""
    return any(chr(cp) in text for cp in codepoints)


def _translate(text: str, table: dict[int, str | None]) -> str:
    """`text.translate(table)`, by one `in` scan per character and a `replace` per one
    found: 15-20 times faster on Chinese text, where `translate` looks every character
    up in the dict. The same result because no table maps to another of its own keys
    (the tests check). Returns `text` itself when nothing is found."""
    for cp, new in table.items():
        old = chr(cp)
        if old in text:
            text = text.replace(old, new or "")
    return text


# Full-width ASCII variants (U+FF01..U+FF5E) and the ideographic space, mapped to their
# half-width forms: the classic `_str_q2b` of Chinese NLP scripts. NFKC does this too;
# the option matters for `nfc` and `none`.
_Q2B = {0x3000: " ", **{cp: chr(cp - 0xFEE0) for cp in range(0xFF01, 0xFF5F)}}
# Full-width punctuation (Unicode category P, 23 characters) hides from NFKC as Unicode
# noncharacters (U+FDD0...), which no text should hold and every form leaves alone; any
# found in the input are removed first.
_PUNCT = [cp for cp in range(0xFF01, 0xFF5F) if unicodedata.category(chr(cp)).startswith("P")]
_HIDE = {cp: chr(0xFDD0 + i) for i, cp in enumerate(_PUNCT)}
_SHOW = {0xFDD0 + i: chr(cp) for i, cp in enumerate(_PUNCT)}
_NONCHARACTERS = dict.fromkeys(range(0xFDD0, 0xFDF0))
# Joins the lines SentencePiece sees in one call: a noncharacter _HIDE does not use.
_SEPARATOR = "\ufdef"


@dataclass(frozen=True)
class NormalizeConfig:
    """How lines are normalised; the defaults are SentencePiece's `nmt_nfkc`. The form
    is flagged `--normalize FORM` (what it does), and whitespace is kept by a switch,
    `--keep-whitespace`, since collapsing it is the default."""

    form: Form = option(
        "nmt_nfkc",
        name="normalize",
        choices=FORMS,
        help="Unicode normalisation of both sides; nmt_nfkc is SentencePiece's. Chinese and "
        "Japanese sides keep their full-width punctuation (，！（）) in every form",
    )
    q2b: bool = option(
        False,
        help="map full-width ASCII and U+3000 to half-width, punctuation of Chinese and "
        "Japanese sides included",
    )
    collapse_whitespace: bool = option(
        True,
        name="keep_whitespace",
        invert=True,
        help="do not collapse runs of whitespace or strip the ends",
    )
    keep_fullwidth_punct: bool = False

    def __post_init__(self) -> None:
        if self.form not in FORMS:
            raise ValueError(f"unknown normalisation {self.form!r}; choose from {', '.join(FORMS)}")
        if self.q2b and self.keep_fullwidth_punct:
            raise ValueError("q2b maps full-width punctuation to ASCII: it cannot also keep it")


class Normalizer:
    """Normalises lines for one `NormalizeConfig`; build once per worker.

    `batch` works on a whole chunk at a time: the Python steps run once over the
    `\n`-joined chunk, and SentencePiece sees the chunk's non-ASCII lines in one call.
    Lines must not contain `\n` (they never do: they come from splitting on it).
    """

    def __init__(self, config: NormalizeConfig) -> None:
        self.config = config
        self._spm: spm.SentencePieceNormalizer | None = None
        if config.form.startswith("nmt_"):
            self._spm = spm.SentencePieceNormalizer(
                rule_name=config.form,
                add_dummy_prefix=False,
                escape_whitespaces=False,
                remove_extra_whitespaces=config.collapse_whitespace,
            )

    def __call__(self, text: str) -> str:
        return self.batch([text])[0]

    def batch(self, lines: list[str]) -> list[str]:
        if not lines:
            return []
        if self.config.keep_fullwidth_punct:
            joined = "\n".join(lines)
            if _contains_any(joined, _HIDE):
                joined = _translate(joined, _NONCHARACTERS)
                hidden = self._batch(_translate(joined, _HIDE).split("\n"))
                return _translate("\n".join(hidden), _SHOW).split("\n")
        return self._batch(lines)

    def _batch(self, lines: list[str]) -> list[str]:
        if self._spm is None:
            return self._python(lines, ascii_only=False)
        # For ASCII text NFKC changes nothing and SentencePiece's rules are exactly
        # _NMT_RULES (the tests check every ASCII character), so ASCII lines skip the
        # per-line call into SentencePiece.
        is_ascii = [line.isascii() for line in lines]
        if all(is_ascii):
            return self._python(lines, ascii_only=True)
        if not any(is_ascii):
            return self._spm_batch(lines)
        ascii_out = iter(self._python([x for x, a in zip(lines, is_ascii, strict=True) if a], True))
        other_out = iter(
            self._spm_batch([x for x, a in zip(lines, is_ascii, strict=True) if not a])
        )
        return [next(ascii_out) if a else next(other_out) for a in is_ascii]

    def _spm_batch(self, lines: list[str]) -> list[str]:
        """SentencePiece over all `lines` in one call: joined by a noncharacter, which
        it leaves alone and which ends any whitespace run, so the only difference from
        a call per line is the one space its whitespace rule may leave on either side of
        a separator, where a line's own ends are stripped (the tests check)."""
        assert self._spm is not None
        cleaned = _translate("\n".join(lines), _PRE)
        if self.config.q2b:
            cleaned = _translate(cleaned, _Q2B)
        if _SEPARATOR in cleaned:
            return self._spm.normalize(cleaned.split("\n"))
        out = self._spm.normalize(cleaned.replace("\n", _SEPARATOR))
        if self.config.collapse_whitespace and " " in out:
            out = out.replace(" " + _SEPARATOR, _SEPARATOR).replace(_SEPARATOR + " ", _SEPARATOR)
        return out.split(_SEPARATOR)

    def _python(self, lines: list[str], ascii_only: bool) -> list[str]:
        joined = "\n".join(lines)
        if ascii_only:
            raw = joined.encode("ascii").translate(_ASCII_SPACES, _ASCII_REMOVED)
            joined = raw.decode("ascii")
        else:
            joined = _translate(joined, _PRE)
            if self.config.q2b:
                joined = _translate(joined, _Q2B)
            if self.config.form in ("nfkc", "nfc"):
                joined = unicodedata.normalize(self.config.form.upper(), joined)
            joined = _translate(joined, _NMT_RULES_BATCH)
        if self.config.form == "nmt_nfkc_cf":
            joined = joined.lower()  # case folding, ASCII only on this path
        if self.config.collapse_whitespace:
            # After the rules above, " " is the only whitespace left besides the separators.
            if "  " in joined:
                joined = _SPACE_RUNS.sub(" ", joined)
            joined = joined.replace(" \n", "\n").replace("\n ", "\n").strip(" ")
        return joined.split("\n")
