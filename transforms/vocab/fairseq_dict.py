"""fairseq's `dict.txt`: the symbols of a vocabulary after fairseq's four specials.

fairseq's `Dictionary` numbers `<s>`=0, `<pad>`=1, `</s>`=2, `<unk>`=3 and then the file's
symbols in file order; `fairseq-preprocess` pads the total to a multiple of 8 with
`madeupwordNNNN` entries of count 0 and saves one `SYMBOL COUNT` line per symbol after
the specials. Writing a vocabulary's symbols in id order keeps its ids: fairseq id =
`len(SPECIALS)` + index in the file.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence

import numpy as np

SPECIALS = ("<s>", "<pad>", "</s>", "<unk>")
BOS, PAD, EOS, UNK = range(len(SPECIALS))


def dict_text(symbols: Sequence[str], counts: Sequence[int], padding_factor: int = 8) -> str:
    """The `dict.txt` fairseq would save for these symbols (in this order) and counts."""
    if len(symbols) != len(counts):
        raise ValueError("one count per symbol")
    seen = set(SPECIALS)
    for symbol in symbols:
        # fairseq reads dict.txt in universal-newline mode: "\r" would end a line too.
        if not symbol or "\n" in symbol or "\r" in symbol or symbol in seen:
            raise ValueError(
                f"fairseq cannot store the symbol {symbol!r} (empty, line break or repeated)"
            )
        seen.add(symbol)
    lines = [f"{s} {c}" for s, c in zip(symbols, counts, strict=True)]
    total = len(SPECIALS) + len(lines)
    padding = (-total) % padding_factor if padding_factor > 1 else 0
    lines += [f"madeupword{i:04d} 0" for i in range(padding)]
    return "".join(line + "\n" for line in lines)


def id_counts(batches: Iterable[list[list[int]]], size: int) -> list[int]:
    """How often each of `size` ids occurs in batches of encoded lines (the counts a
    `dict.txt` holds); one batch's ids are Python objects at a time."""
    totals = np.zeros(size, dtype=np.int64)
    for encoded in batches:
        ids = np.fromiter(itertools.chain.from_iterable(encoded), dtype=np.int64)
        totals += np.bincount(ids, minlength=size)[:size]
    return totals.tolist()


def read_dict(text: str) -> list[tuple[str, int]]:
    """(symbol, count) per line of a `dict.txt`, as fairseq's `add_from_file` parses it."""
    out = []
    for line in text.split("\n"):
        if not line.strip():
            continue
        symbol, count = line.rstrip().rsplit(" ", 1)
        out.append((symbol, int(count)))
    return out
