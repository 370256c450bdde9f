"""The rules scorer: what two sides of a translation share, or neither has, checked on
both sides together; each rule its own reject reason.

- numbers: where both sides write numbers in digits, a number of each side missing
  from the other, counted as often as it is written (5 novels in 5 years against 8年
  and 5本), or a number of two significant digits or more above 12 on one side only, is
  a changed number (`numbers`); numbers are compared by their significant digits, so
  that 2.8bn and 28亿, 11 million and 1100万, 2,5 and 2.5 agree, and as the digits of
  all of them, so that 7.55am and 7:55 agree (a small number only on one side is often
  a word on the other: April and 4月, five and 5);
- URLs and e-mail addresses: the same on both sides (`urls`, `emails`);
- codes (a word of letters and digits, three or more, like `A380` or `X-15B`, not a
  number with its unit or suffix like `19th`, `1980s`, `11million`): a code on one
  side found on the other too, where that side writes Latin letters (`codes`);
- punctuation and symbols: at most a share of a side's characters (`punctuation`);
- letters: at least a share of a side's characters (`letters`);
- repetition: no word said more than a few times in a row, no character repeated more
  than twice that (`repetition`);
- terminal punctuation: a question on one side is a question on the other, where both
  end in a mark (`terminal`).

Each check looks at the lines that could fail it only (Arrow's regular expressions find
them over a whole chunk), so its cost is near nothing where there is nothing to find.
The shares and the repeats come from one pass over each line's code points
(`line_chars`), every distinct code point classed once, by RE2 for the counts and by
Python's `str` predicates for the runs, so that each means what the regular expression
it stands for means: RE2 scans of every line for each class, its spaces again for each,
and a Python regular expression per line were 38% of `prepare`'s CPU with the rules
alone (benchmarks/RESULTS.md).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from numba import njit

from nmtpipe.transforms.options import comma_list, option
from nmtpipe.transforms.quality.base import Pairs, PairScorer, Verdicts
from nmtpipe.transforms.quality.units import code_points, distinct_code_points, of_each

# Digits with their thousands groups (1,500 and 1 500) and decimals, a decimal comma too
# (2,5 Millionen; 40,2 beside 40,000 is a changed number, not 40 and 2).
NUMBER = re.compile(r"\d+(?:[,.\u2009 ]\d{3})*(?:[.,]\d+)?")
URL = re.compile(r"(?:https?://|www\.)[^\s<>\"'，。、）)]+", re.I)
EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[\w-]+(?:\.[\w-]+)+")
CODE = re.compile(r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z\d][\w-]{2,}\b", re.A)
MEASURE = re.compile(r"\d+-?[A-Za-z][A-Za-z-]*")  # 19th, 1980s, 8bn, 11million, 281-store
LATIN = re.compile(r"[A-Za-z]")
QUESTION, ENDS = ("?", "？"), (".", "!", "。", "！", "?", "？")
RULES = ("numbers", "urls", "emails", "codes", "punctuation", "letters", "repetition", "terminal")


def _checked_rules(text: str) -> tuple[str, ...]:
    names = comma_list(text)
    unknown = [n for n in names if n not in RULES]
    if unknown:
        raise ValueError(f"unknown rule {', '.join(unknown)}; the rules: {', '.join(RULES)}")
    return names


@dataclass(frozen=True)
class RulesConfig:
    rules_off: tuple[str, ...] = option(
        (),
        parse=_checked_rules,
        metavar="RULE,...",
        help=f"rules: the rules not to apply, of {', '.join(RULES)}",
    )
    rules_max_punctuation: float = option(
        0.5,
        metavar="F",
        help="rules: reject a pair with a side of more than this share of punctuation and "
        "symbols among its characters (spaces aside)",
    )
    rules_min_letters: float = option(
        0.3,
        metavar="F",
        help="rules: reject a pair with a side of fewer letters (any script) than this share "
        "of its characters (spaces aside)",
    )
    rules_max_repeats: int = option(
        4,
        metavar="N",
        help="rules: reject a pair with a word said more than N times in a row, or a "
        "character more than 2N times",
    )


def _share(found: np.ndarray, chars: np.ndarray) -> np.ndarray:
    """Per line, `found` as a share of its characters other than spaces."""
    return np.divide(found, chars, out=np.zeros(found.size), where=chars > 0)


def _candidates(sides: tuple[pa.Array, pa.Array], pattern: str) -> np.ndarray:
    """The rows where either side matches `pattern` (RE2)."""
    hit = [pc.match_substring_regex(side, pattern).to_numpy(zero_copy_only=False) for side in sides]
    return np.flatnonzero(hit[0] | hit[1])


def _numbers(text: str) -> Counter[str]:
    """The significant digits of each number, as often as it is written: 28 of 2.8 and
    2,800 alike."""
    found: Counter[str] = Counter()
    for n in NUMBER.findall(text):
        digits = re.sub(r"\D", "", re.sub(r"[,\u2009 ](?=\d{3})", "", n))
        found[digits.strip("0") or "0"] += 1
    return found


def _digits(numbers: Counter[str]) -> str:
    """All the digits of the distinct `numbers`, sorted: a time 7.55 and 7:55, a height
    6-foot-6 and 6.6 agree."""
    return "".join(sorted("".join(numbers)))


def _unlike_a_word(number: str) -> bool:
    """Whether a number (its significant digits) is seldom a word on the other side: two
    digits or more, above 12 (a month: 11月 beside November)."""
    return len(number) >= 2 and int(number) > 12


def _changed_numbers(src: str, tgt: str) -> str | None:
    """Each side holding a number the other lacks, or one side a number `_unlike_a_word`
    the other lacks while it writes numbers too."""
    a, b = _numbers(src), _numbers(tgt)
    if not (a and b) or _digits(a) == _digits(b):
        return None
    if (a - b and b - a) or any(map(_unlike_a_word, a.keys() ^ b.keys())):
        return f"{_listed(a - b)} | {_listed(b - a)}"
    return None


def _listed(found: Iterable[str]) -> str:
    """What a side holds that a check names, in order (or none)."""
    return ", ".join(sorted(found)) or "none"


def _differ(found: Callable[[str], set[str]]) -> Callable[[str, str], str | None]:
    """A check that two sides hold the same things, as `found` finds them."""

    def check(src: str, tgt: str) -> str | None:
        a, b = found(src), found(tgt)
        if a == b:
            return None
        return f"{_listed(a)} | {_listed(b)}"

    return check


def _codes(src: str, tgt: str) -> str | None:
    """A code on one side missing from the other, where that side writes Latin letters."""
    for here, there in ((src, tgt), (tgt, src)):
        if not LATIN.search(there):
            continue
        theirs = {c.lower() for c in CODE.findall(there)}
        missing = sorted(
            {c for c in CODE.findall(here) if c.lower() not in theirs and not MEASURE.fullmatch(c)}
        )
        if missing:
            return f"{', '.join(missing)} on one side only"
    return None


def _terminal(src: str, tgt: str) -> str | None:
    a, b = src.rstrip()[-1:], tgt.rstrip()[-1:]
    if a in ENDS and b in ENDS and (a in QUESTION) != (b in QUESTION):
        return f"ends '{a}' | ends '{b}'"
    return None


# rule -> (an RE2 pattern finding the rows it may reject, the check of one row)
_PAIRWISE: dict[str, tuple[str, Callable[[str, str], str | None]]] = {
    "numbers": (r"\d", _changed_numbers),
    "urls": (r"(?i)https?://|www\.", _differ(lambda s: set(URL.findall(s)))),
    "emails": (r"@", _differ(lambda s: set(EMAIL.findall(s)))),
    "codes": (r"[0-9][A-Za-z]|[A-Za-z][0-9]", _codes),
    "terminal": (r"[?？]\s*$", _terminal),
}


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
    """Each line's counts and repeats (`LineChars`), its code points read once."""
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


class RulesScorer(PairScorer):
    NAME = "rules"
    Config = RulesConfig
    REASONS = RULES
    CATCHES = (
        "changed or missing numbers, URLs, e-mail addresses and codes; lines of "
        "punctuation and symbols; repeated words and characters; a question answered "
        "by a statement"
    )
    COSTS = "nothing learned: each chunk where it is cleaned, a regular expression per rule"

    def __init__(self, config: RulesConfig) -> None:
        super().__init__(config)
        n = config.rules_max_repeats
        self._repeat = re.compile(rf"\b(\w+)\b(?:\W+\1\b){{{n},}}|(\S)\2{{{2 * n},}}")

    def score(self, learned: list, pairs: Pairs) -> dict[str, np.ndarray]:
        return {}

    def judge(self, scores: dict[str, np.ndarray], pairs: Pairs, learned: list) -> list[Verdicts]:
        """The pairs each rule rejects (a pair may fail several)."""
        on = [rule for rule in RULES if rule not in self.config.rules_off]
        sides = (pa.array(pairs.src, pa.string()), pa.array(pairs.tgt, pa.string()))
        found = []
        for rule in on:
            if rule in _PAIRWISE:
                pattern, check = _PAIRWISE[rule]
                rows, details = [], []
                for i in _candidates(sides, pattern).tolist():
                    said = check(pairs.src[i], pairs.tgt[i])
                    if said is not None:
                        rows.append(i)
                        details.append(f"{rule} differ: {said}" if rule != "codes" else said)
                found.append(Verdicts(rule, np.asarray(rows, dtype=np.int64), details))
        n = self.config.rules_max_repeats
        counted = [line_chars(pairs.src, n), line_chars(pairs.tgt, n)]  # type: ignore[arg-type]
        if "punctuation" in on:
            shares = [_share(c.punctuation, c.chars) for c in counted]
            limit = self.config.rules_max_punctuation
            found.append(_by_share(shares, "punctuation", lambda s: s > limit))
        if "letters" in on:
            shares = [_share(c.letters, c.chars) for c in counted]
            limit = self.config.rules_min_letters
            found.append(_by_share(shares, "letters", lambda s: s < limit))
        if "repetition" in on:
            found.append(self._repetitions(pairs, counted[0].repeats | counted[1].repeats))
        return found

    def _repetitions(self, pairs: Pairs, maybe: np.ndarray) -> Verdicts:
        """The regular expression where the compiled scan says it matches, for the words
        it matched."""
        rows, details = [], []
        for i in np.flatnonzero(maybe).tolist():
            for name, text in (("src", pairs.src[i]), ("tgt", pairs.tgt[i])):
                m = self._repeat.search(text)
                if m:
                    rows.append(i)
                    details.append(f"{name}: {m.group(0)[:40]!r} repeats")
                    break
        return Verdicts("repetition", np.asarray(rows, dtype=np.int64), details)


def _by_share(
    shares: list[np.ndarray], rule: str, fails: Callable[[np.ndarray], np.ndarray]
) -> Verdicts:
    """The rows where either side's share fails, each with the side and its share."""
    bad = [fails(s) for s in shares]
    rows = np.flatnonzero(bad[0] | bad[1])
    details = []
    for i in rows.tolist():
        k = 0 if bad[0][i] else 1
        details.append(f"{('src', 'tgt')[k]}: {shares[k][i]:.0%} {rule}")
    return Verdicts(rule, rows, details)
