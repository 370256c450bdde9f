"""One side of a chunk, looked at once: each line's length, letters per script and
T2T tokens from a single pass over its code points.

The filters need each line's length and script counts, language identification the
script counts and the words, the vocabulary the T2T tokens of the training lines. The
lines are joined and decoded to code points once per side (ASCII lines one byte per
character, the others four), and every measure comes from the same arrays.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from nmtpipe.transforms.text import t2t_tokenizer
from nmtpipe.transforms.text.langid import scripts


@dataclass(frozen=True)
class SideText:
    """The lines of one side and what was measured of them, row for row.

    `tokens` holds every line's T2T tokens, grouped by kind of line (ASCII first), not
    in line order; `owner` is the line of each."""

    lines: list[str]
    lengths: np.ndarray  # characters per line
    scripts: np.ndarray  # letters per script per line, as `scripts.count`
    tokens: pa.StringArray
    owner: np.ndarray

    @functools.cached_property
    def weighted(self) -> np.ndarray:
        """Lengths in Latin-letter equivalents (`scripts.weighted_lengths`): the filters
        and the length-ratio histogram both need them."""
        return scripts.weighted_lengths(self.lengths, self.scripts)

    def tokens_of(self, rows: np.ndarray) -> pa.StringArray:
        """The tokens of the lines where the boolean mask `rows` is True."""
        if rows.all():
            return self.tokens
        return self.tokens.filter(pa.array(rows[self.owner]))


def look(lines: list[str]) -> SideText:
    """Measure `lines` (which must not contain `\\n`)."""
    n = len(lines)
    lengths = np.zeros(n, dtype=np.int64)
    counts = np.zeros((n, len(scripts.NAMES)), dtype=np.int32)
    tokens, owners = [pa.array([], pa.string())], [np.zeros(0, dtype=np.int64)]
    if n:
        for rows, text, ascii_only in t2t_tokenizer.ascii_groups(lines):
            cps = t2t_tokenizer.code_points(text, ascii_only)
            breaks = np.flatnonzero(cps == 0x0A)
            lengths[rows] = np.diff(np.concatenate([[-1], breaks, [cps.size]])) - 1
            counts[rows] = scripts.count_codes(cps, rows.size)
            found, line = t2t_tokenizer.joined_tokens(text, cps)
            tokens.append(found)
            owners.append(rows[line])
    return SideText(lines, lengths, counts, pa.concat_arrays(tokens), np.concatenate(owners))
