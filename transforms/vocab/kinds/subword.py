"""Tensor2Tensor's SubwordTextEncoder: escaping, vocab files, greedy encoding, decoding.

Byte-for-byte compatible with `tensor2tensor.data_generators.text_encoder`: a vocab file
written here loads in T2T and gives the same ids, and the other way round.

Encoding has four steps, as in T2T: cut the text into T2T tokens; escape each token
(`\\` → `\\\\`, `_` → `\\u`, characters outside the alphabet → `\\NNN;`, and a closing
`_`); split each escaped token greedily into the longest subtokens of the vocabulary,
left to right; concatenate. The closing `_` makes the concatenation invertible, so
`decode(encode(s)) == s` for every string. Building a vocabulary is in
`subword_build.py`.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Collection, Iterable, Sequence

import numpy as np
import pyarrow.compute as pc

from nmtpipe.transforms.storage import fsio
from nmtpipe.transforms.text import t2t_tokenizer

PAD = "<pad>"
EOS = "<EOS>"
RESERVED_TOKENS = (PAD, EOS)
ESCAPE_CHARS = frozenset("\\_u;0123456789")
_UNESCAPE = re.compile(r"\\u|\\\\|\\([0-9]+);")
# Tokens whose ids are remembered: enough for the frequent ones, which are what repeats
# (on real text most distinct tokens occur once, and a cache of all would grow with the
# corpus).
_CACHE_LIMIT = 1 << 16


def escape_token(token: str, alphabet: Collection[str]) -> str:
    """T2T's `_escape_token`: a token as a string of alphabet characters ending in `_`."""
    token = token.replace("\\", "\\\\").replace("_", "\\u")
    return "".join(c if c in alphabet and c != "\n" else f"\\{ord(c)};" for c in token) + "_"


def _unescape_match(m: re.Match[str]) -> str:
    if m.group(1) is None:
        return "_" if m.group(0) == "\\u" else "\\"
    try:
        return chr(int(m.group(1)))
    except (ValueError, OverflowError):
        return "\u3013"  # T2T's stand-in for a code point that does not exist


def unescape_token(escaped: str) -> str:
    """T2T's `_unescape_token`: the inverse of `escape_token`."""
    trimmed = escaped[:-1] if escaped.endswith("_") else escaped
    return _UNESCAPE.sub(_unescape_match, trimmed)


def check_reserved(reserved: Sequence[str]) -> None:
    """T2T allows more reserved tokens, but `<pad>`, `<EOS>` must come first."""
    if tuple(reserved[: len(RESERVED_TOKENS)]) != RESERVED_TOKENS:
        raise ValueError(f"reserved tokens must start with {', '.join(RESERVED_TOKENS)}")


def alphabet_of(strings: Iterable[str]) -> frozenset[str]:
    """The characters of `strings` plus the escape characters (T2T's alphabet)."""
    return frozenset(c for s in strings for c in s) | ESCAPE_CHARS


class SubwordTextEncoder:
    """A T2T subword vocabulary: `subtokens[i]` is the string of id i.

    The first ids are the escaped reserved tokens (`<pad>_` = 0, `<EOS>_` = 1). The
    alphabet is every character of the subtokens plus the escape characters, which is
    what T2T derives when it loads a vocab file.
    """

    def __init__(self, subtokens: Sequence[str]) -> None:
        if not subtokens:
            raise ValueError("a subword vocabulary needs at least one subtoken")
        self.subtokens: tuple[str, ...] = tuple(subtokens)
        self._ids = {s: i for i, s in enumerate(self.subtokens) if s}
        self._max_len = max(len(s) for s in self.subtokens)
        self.alphabet = alphabet_of(self.subtokens)
        self._cache: dict[str, list[int]] = {}

    @property
    def vocab_size(self) -> int:
        return len(self.subtokens)

    # --- the vocab file -----------------------------------------------------------

    @classmethod
    def from_text(cls, text: str) -> SubwordTextEncoder:
        """Parse a vocab file: one subtoken a line, in single or double quotes or bare."""
        subtokens = []
        for line in text.split("\n")[:-1] if text.endswith("\n") else text.split("\n"):
            s = line.rstrip()
            if (s.startswith("'") and s.endswith("'")) or (s.startswith('"') and s.endswith('"')):
                s = s[1:-1]
            subtokens.append(s)
        return cls(subtokens)

    @classmethod
    def from_file(cls, url: str) -> SubwordTextEncoder:
        return cls.from_text(fsio.read_bytes(url).decode("utf-8"))

    def to_text(self) -> str:
        """The vocab file exactly as T2T's `store_to_file` writes it."""
        return "".join(f"'{s}'\n" for s in self.subtokens)

    # --- encoding and decoding ----------------------------------------------------

    def segment(self, escaped: str) -> list[str]:
        """Greedy longest-match split of an escaped token into subtokens."""
        out = []
        start, n = 0, len(escaped)
        while start < n:
            for end in range(min(n, start + self._max_len), start, -1):
                piece = escaped[start:end]
                if piece in self._ids:
                    out.append(piece)
                    start = end
                    break
            else:
                raise ValueError(f"token substring {escaped!r} not found in subtoken vocabulary")
        return out

    def token_ids(self, token: str) -> list[int]:
        """The ids of one T2T token (cached: tokens repeat)."""
        ids = self._cache.get(token)
        if ids is None:
            if len(self._cache) >= _CACHE_LIMIT:
                self._cache.clear()
            ids = [self._ids[p] for p in self.segment(escape_token(token, self.alphabet))]
            self._cache[token] = ids
        return ids

    def encode(self, text: str) -> list[int]:
        """T2T's `encode`: text → subtoken ids."""
        return [i for token in t2t_tokenizer.encode(text) for i in self.token_ids(token)]

    def encode_lines(self, lines: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """`encode` of every line, concatenated (int32), and each line's number of ids.

        The same ids as `encode` line by line, at a fraction of its cost: the lines are
        tokenised with numpy (`t2t_tokenizer.line_tokens`), each distinct token of the
        batch is looked up once, and the ids are gathered with numpy.
        """
        tokens, per_line = t2t_tokenizer.line_tokens(lines)
        encoded = pc.dictionary_encode(tokens)
        distinct = [self.token_ids(token) for token in encoded.dictionary.to_pylist()]
        sizes = np.fromiter(map(len, distinct), np.int64, len(distinct))
        ids = np.fromiter(itertools.chain.from_iterable(distinct), np.int32, int(sizes.sum()))
        which = encoded.indices.to_numpy()
        widths = sizes[which]
        # Output id k of token occurrence j is ids[first id of its token + (k - first k of j)].
        shift = (np.cumsum(sizes) - sizes)[which] - (np.cumsum(widths) - widths)
        flat = ids[np.arange(int(widths.sum())) + np.repeat(shift, widths)]
        owner = np.repeat(np.arange(len(lines)), per_line)
        lengths = np.bincount(owner, weights=widths, minlength=len(lines)).astype(np.int64)
        return flat, lengths

    def tokens_from_ids(self, ids: Iterable[int]) -> list[str]:
        """The T2T tokens `ids` stand for; out-of-range ids count as empty."""
        n = len(self.subtokens)
        joined = "".join(self.subtokens[i] if 0 <= i < n else "" for i in ids)
        tokens = []
        for piece in joined.split("_"):
            if piece:
                token = unescape_token(piece + "_")
                if token:
                    tokens.append(token)
        return tokens

    def decode(self, ids: Iterable[int], strip_extraneous: bool = False) -> str:
        """T2T's `decode`: subtoken ids → text; `strip_extraneous` drops trailing
        reserved ids (padding and EOS), as T2T's `strip_ids` does."""
        ids = list(ids)
        if strip_extraneous:
            while ids and 0 <= ids[-1] < len(RESERVED_TOKENS):
                ids.pop()
        return t2t_tokenizer.decode(self.tokens_from_ids(ids))
