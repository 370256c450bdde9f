r"""What the rules count in each line's characters, in one pass over its code points:
punctuation and symbols, letters and spaces (as Arrow's RE2 classes `[\p{P}\p{S}]`,
`\pL` and `\s` match them), and which lines repeat a word or a character.

A code point's class is asked once per distinct code point of a batch (RE2 for the
counts, Python's `str` predicates for the runs, so that each means what the regular
expression it stands for means); the counts are then sums over the lines. RE2 scans of
every line for each class, its spaces again for each, and a Python regular expression
per line were 38% of `prepare`'s CPU with the rules alone (benchmarks/RESULTS.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from nmtpipe.transforms.quality.units import code_points, distinct_code_points, of_each

_PATTERNS = {"punctuation": r"[\p{P}\p{S}]", "letters": r"\pL", "spaces": r"\s"}
_WORD, _SPACE = 1, 2  # bits of a code point's class for runs: Python's \w and \s


@dataclass(frozen=True)
class LineChars:
    r"""Per line: characters other than spaces, and how many are punctuation or symbols,
    and letters; whether a word (a run of Python's `\w`) stands more than `words`
    times in a row, or a character other than a space more than 2 x `words` times: what
    `\b(\w+)\b(?:\W+\1\b){words,}|(\S)\2{2 x words,}` finds."""

    chars: np.ndarray
    punctuation: np.ndarray
    letters: np.ndarray
    repeats: np.ndarray


def line_chars(lines: list[str], words: int) -> LineChars:
    codes, bounds = code_points(lines)
    distinct = distinct_code_points(codes)
    texts = pa.array([chr(c) for c in distinct.tolist()], pa.string())
    owner = np.repeat(np.arange(len(lines)), np.diff(bounds))
    counts = {}
    for name, pattern in _PATTERNS.items():
        hit = pc.count_substring_regex(texts, pattern).to_numpy(zero_copy_only=False) > 0
        counts[name] = np.bincount(
            owner, weights=of_each(codes, distinct, hit), minlength=len(lines)
        )
    kinds = np.array(
        [(_WORD if ch.isalnum() or ch == "_" else 0) | (_SPACE if ch.isspace() else 0)
         for ch in map(chr, distinct.tolist())],
        dtype=np.uint8,
    )  # fmt: skip
    return LineChars(
        np.diff(bounds) - counts["spaces"].astype(np.int64),
        counts["punctuation"].astype(np.int64),
        counts["letters"].astype(np.int64),
        _repeats(codes, of_each(codes, distinct, kinds), bounds, words),
    )


@njit(cache=True)
def _repeats(codes: np.ndarray, kinds: np.ndarray, bounds: np.ndarray, words: int) -> np.ndarray:
    out = np.zeros(bounds.size - 1, dtype=np.bool_)
    for line in range(bounds.size - 1):
        first, last = bounds[line], bounds[line + 1]
        run_start, prev_start, prev_end, same, chars = -1, -1, -1, 0, 0
        for k in range(first, last + 1):
            word = k < last and kinds[k] & _WORD
            if k < last and not kinds[k] & _SPACE:
                chars = chars + 1 if k > first and codes[k] == codes[k - 1] else 1
                if chars > 2 * words:
                    out[line] = True
            if word and run_start < 0:
                run_start = k
            elif not word and run_start >= 0:  # a word ends at k
                length = k - run_start
                equal = prev_start >= 0 and prev_end - prev_start == length
                for j in range(length if equal else 0):
                    if codes[run_start + j] != codes[prev_start + j]:
                        equal = False
                        break
                same = same + 1 if equal else 0
                if same >= words:
                    out[line] = True
                prev_start, prev_end, run_start = run_start, k, -1
    return out
