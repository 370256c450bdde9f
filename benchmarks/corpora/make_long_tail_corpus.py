"""Generate a large en-zh corpus for benchmarks whose vocabulary grows as real text's does.

`make_corpus.py` recombines 16k Tatoeba pairs, so its distinct tokens stop growing after
a few hundred thousand pairs: a vocabulary or a count table built from it is the size
of Tatoeba's whatever the corpus size. Here each pair copies the shape of a real pair
(NTREX-128 news or Tatoeba, half and half): its punctuation verbatim, and every run of
letters or digits replaced by generated content of the same kind. An English word is a
real one (drawn from the bundled English by frequency, so function words keep their
rates) or, with probability TAIL_SHARE, one of a power-law tail of made-up words, names
and numbers, tuned so that the distinct tokens follow NTREX-128's Heaps' law
(V = 2.77 N^0.745 Tensor2Tensor tokens) from a thousand to ten million tokens: 15% above
it up to 10^4 tokens (independent draws repeat less than running text), within 5% from
10^5 to 10^7 (`heaps.py` measures it). Each run of Han characters of the Chinese line is
drawn, character by character, from a bigram chain trained on the bundled Chinese, at
the run's length. The pairs are not translations, but their lengths and scripts come
from real pairs, so length and language filters behave as on real data (`nmtpipe
prepare` rejects 0.03% of them). Deterministic for a given seed.

    python benchmarks/corpora/make_long_tail_corpus.py --pairs 1000000 \\
        --out benchmarks/.work/longtail-1000000
"""

from __future__ import annotations

import gzip
import math
import re
from collections import Counter
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np

from nmtpipe.transforms.text.langid.function_words import WORDS

CHUNK = 100_000  # pairs generated and written at a time: memory does not grow with --pairs
NTREX_SHARE = 0.5  # templates from NTREX-128 (1,997 news pairs), the rest from Tatoeba
# The English tail: its share of the words and its rank law P(k) ∝ (k + OFFSET)^-EXPONENT.
# A grid search (exponents 1.2-1.6) for the least RMS distance, on log-log, from
# NTREX-128's law at 10^3 to 10^7 tokens: 8%, where shares of 5%, 10% or 20% miss by
# 12-17%. The head's 12.6k words are mostly seen by 10^6 tokens, so by 10^7 the tail
# gives 95% of the types, growing as N^0.83: the large offset spreads its mass over
# enough ranks that most of its draws are still new words there.
TAIL_SHARE, TAIL_EXPONENT, TAIL_OFFSET = 0.075, 1.34, 25_000.0
NUMBER_EVERY = 5  # every fifth tail rank is a number, the others words
NAME_RESIDUES = (2, 4)  # word ranks ≡ these (mod NUMBER_EVERY) are capitalised, as names
PIECES, CODAS = 400, 40  # syllables and word ends the made-up words are built from
BIGRAM_SMOOTHING = 0.02  # share of Chinese characters drawn from the unigram distribution

RUNS = re.compile(r"[^\W_]+|[\W_]+")  # T2T's tokens, with the spaces between them kept
ALNUM = re.compile(r"[^\W_]")
SYLLABLE = re.compile(r"[^aeiou]*[aeiou]+")  # onset and vowels; what is left is the coda
WORD = re.compile(r"[a-z]+")
# Runs of Han characters (the ranges of nmtpipe's script table): what the bigram chain
# learns and writes. Letters and digits of other scripts in a Chinese line are kept, so
# that each line has its template's script mix (the evidence of language identification,
# the weights of the length-ratio filter): a chain over all of T2T's alphanumerics
# wandered from a Latin start into Latin runs as long as Chinese clauses.
HAN = re.compile("[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3005-\u3007\U00020000-\U000323af]+")
# Characters that some readers take for a line end, or a column separator.
BREAKS = re.compile(r"[\t\r\n\v\f\x1c-\x1e\x85\u2028\u2029]")


@dataclass(frozen=True)
class Templates:
    """The real pairs whose shapes are copied: each English line as its runs (letters
    and digits, or the rest), each Chinese line as code points with its Han runs."""

    ntrex: int  # the first `ntrex` templates are NTREX-128's
    runs: np.ndarray  # object: every English run of every template, in order
    alnum: np.ndarray  # bool: the run is letters or digits (replaced)
    upper: np.ndarray  # bool: the run starts with a capital (kept capitalised)
    run_start: np.ndarray  # each template's first run
    run_count: np.ndarray
    code_points: np.ndarray  # uint32: every Chinese line followed by "\n"
    line_start: np.ndarray  # each template's first code point
    line_length: np.ndarray  # with its "\n"
    han_at: np.ndarray  # each Han run's offset in its line
    han_length: np.ndarray
    han_start: np.ndarray  # each template's first Han run
    han_count: np.ndarray


@dataclass(frozen=True)
class Head:
    """The real English words by frequency: the bulk of every generated line."""

    words: np.ndarray  # object
    capitalised: np.ndarray  # object
    cdf: np.ndarray


@dataclass(frozen=True)
class Tail:
    """Made-up words (first syllable, more syllables, a coda) and numbers by rank.

    The word space is a mixed radix of syllable choices, one block per number of
    syllables, each scrambled by a multiplier; `forbidden` skips the words that are real
    (a head word or another language's function word) so that the tail only adds types.
    Syllables end in vowels and begin (after the first) with consonants, so a word
    splits into them one way only, and distinct ranks give distinct words.
    """

    first: np.ndarray  # StringDType: syllables that may start a word
    first_capitalised: np.ndarray
    later: np.ndarray  # StringDType: syllables after the first, then "" (no syllable)
    codas: np.ndarray
    block_start: np.ndarray  # the first word index of 2, 3 and 4 syllables
    block_size: np.ndarray
    multiplier: np.ndarray  # per block, coprime to its size
    size: int  # words in the space, forbidden ones excluded
    forbidden: np.ndarray  # word indices skipped, sorted, minus their position
    taken_numbers: np.ndarray  # numbers the head has, sorted, minus their position


@dataclass(frozen=True)
class Chain:
    """A Chinese character bigram chain: start, transition and unigram distributions as
    inverse CDFs (transition rows side by side, row r's values in (r, r + 1])."""

    alphabet: np.ndarray  # uint32 code points
    start_cdf: np.ndarray
    unigram_cdf: np.ndarray
    row_cdf: np.ndarray
    successor: np.ndarray  # the character of each `row_cdf` entry
    dead_end: np.ndarray  # bool: characters seen only at the end of a run


def read_lines(name: str, lang: str) -> list[str]:
    """A bundled corpus side (pipelines/example), as `make_corpus.py` reads it."""
    folder = resources.files("nmtpipe.pipelines") / "example"
    with gzip.open(str(folder / f"{name}.{lang}.gz"), "rt", encoding="utf-8") as f:
        return f.read().split("\n")[:-1]  # universal newlines: NTREX's CRLF is gone


def usable(en: str, zh: str) -> bool:
    """Whether a pair can be a template: letters on both sides, no line-breaking
    character, so that every generated line is one non-empty line."""
    return all(ALNUM.search(side) and not BREAKS.search(side) for side in (en, zh))


def load_pool() -> tuple[list[tuple[str, str]], int]:
    """The usable pairs of NTREX-128 then of Tatoeba, and how many are NTREX-128's."""
    pool = []
    for name in ("ntrex128-enzh", "tatoeba-cmn"):
        pairs = zip(read_lines(name, "en"), read_lines(name, "zh"), strict=True)
        pool.append([pair for pair in pairs if usable(*pair)])
    return pool[0] + pool[1], len(pool[0])


def offsets(counts: np.ndarray) -> np.ndarray:
    """Where each of consecutive groups of `counts` items starts."""
    return np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)


def templates(pool: list[tuple[str, str]], ntrex: int) -> Templates:
    """The pool as flat arrays, so that a chunk's lines are gathered by index."""
    en_runs = [RUNS.findall(en) for en, _ in pool]
    runs = np.array([run for line in en_runs for run in line], dtype=object)
    run_count = np.array([len(line) for line in en_runs], dtype=np.int64)
    text = "".join(zh + "\n" for _, zh in pool)
    code_points = np.frombuffer(text.encode("utf-32-le"), dtype="<u4")
    han = [[(m.start(), m.end() - m.start()) for m in HAN.finditer(zh)] for _, zh in pool]
    flat = np.array([run for line in han for run in line], dtype=np.int64)
    han_count = np.array([len(line) for line in han], dtype=np.int64)
    line_length = np.array([len(zh) + 1 for _, zh in pool], dtype=np.int64)
    return Templates(
        ntrex=ntrex,
        runs=runs,
        alnum=np.array([ALNUM.match(run) is not None for run in runs]),
        upper=np.array([run[0].isupper() for run in runs]),
        run_start=offsets(run_count),
        run_count=run_count,
        code_points=code_points,
        line_start=offsets(line_length),
        line_length=line_length,
        han_at=flat[:, 0],
        han_length=flat[:, 1],
        han_start=offsets(han_count),
        han_count=han_count,
    )


def english_counts(pool: list[tuple[str, str]]) -> Counter[str]:
    """Every English word of the pool (T2T's alphanumeric tokens), case kept."""
    return Counter(run for en, _ in pool for run in RUNS.findall(en) if ALNUM.match(run))


def head(counts: Counter[str]) -> Head:
    """The head distribution, with each word's capitalised form for capitalised slots."""
    words, freq = zip(*counts.most_common(), strict=True)
    cdf = np.cumsum(freq, dtype=np.float64)
    return Head(
        words=np.array(words, dtype=object),
        capitalised=np.array([w[:1].upper() + w[1:] for w in words], dtype=object),
        cdf=cdf / cdf[-1],
    )


def syllables(counts: Counter[str]) -> tuple[list[str], list[str], list[str]]:
    """The commonest first syllables, later syllables and codas of the English words,
    by token frequency: the made-up words sound like English."""
    first: Counter[str] = Counter()
    later: Counter[str] = Counter()
    codas: Counter[str] = Counter()
    for word, n in counts.items():
        lowered = word.lower()
        if not WORD.fullmatch(lowered):
            continue
        parts = SYLLABLE.findall(lowered)
        if not parts:
            continue
        first[parts[0]] += n
        for part in parts[1:]:
            later[part] += n
        codas[lowered[sum(map(len, parts)) :]] += n
    top = [[s for s, _ in c.most_common(limit)] for c, limit in
           ((first, PIECES), (later, PIECES), (codas, CODAS))]  # fmt: skip
    return top[0], top[1], top[2]


def coprime_multiplier(size: int) -> int:
    """A multiplier near a million coprime to `size`: scrambles a block's order so that
    the frequent ranks do not all share their last syllables (and small enough that an
    index of the largest block, about 10^12, times it fits in int64)."""
    m = 1_000_003
    while math.gcd(m, size) != 1:
        m += 2
    return m


def gaps(taken: list[int]) -> np.ndarray:
    """Sorted taken values minus their position: `skip` counts them with a search."""
    values = np.unique(np.array(taken, dtype=np.int64))
    return values - np.arange(values.size, dtype=np.int64)


def skip(index: np.ndarray, gapped: np.ndarray) -> np.ndarray:
    """The `index`-th value (0-based) that is not taken, for each index."""
    return index + np.searchsorted(gapped, index, side="right")


def tail(counts: Counter[str]) -> Tail:
    """The tail's word space, built from the syllables of the English `counts`, less
    the real words it would make."""
    first, later, codas = syllables(counts)
    f, p, c = len(first), len(later), len(codas)
    sizes = [f * p ** (n - 1) * c for n in (2, 3, 4)]
    starts = [0, sizes[0], sizes[0] + sizes[1]]
    multipliers = [coprime_multiplier(s) for s in sizes]
    tables = tuple({s: i for i, s in enumerate(x)} for x in (first, later, codas))
    foreign = {w for lang, text in WORDS.items() if lang != "en" for w in text.split()}
    taken = []
    for word in sorted({w.lower() for w in counts} | foreign):
        place = word_place(word, tables)
        if place is not None:
            block, value = place
            local = value * pow(multipliers[block], -1, sizes[block]) % sizes[block]
            taken.append(starts[block] + local)
    numbers = [int(w) for w in counts if w.isascii() and w.isdecimal() and str(int(w)) == w]
    strings = np.dtypes.StringDType()
    return Tail(
        first=np.array(first, dtype=strings),
        first_capitalised=np.array([s.capitalize() for s in first], dtype=strings),
        later=np.array([*later, ""], dtype=strings),
        codas=np.array(codas, dtype=strings),
        block_start=np.array(starts, dtype=np.int64),
        block_size=np.array(sizes, dtype=np.int64),
        multiplier=np.array(multipliers, dtype=np.int64),
        size=sum(sizes) - len(taken),
        forbidden=gaps(taken),
        taken_numbers=gaps(numbers),
    )


def word_place(word: str, tables: tuple[dict[str, int], ...]) -> tuple[int, int] | None:
    """The block and the unscrambled mixed-radix value at which the tail's space holds
    `word` (the inverse of `tail_words`' digits), None if the space cannot make it."""
    first, later, codas = tables
    parts = SYLLABLE.findall(word) if WORD.fullmatch(word) else []
    coda = word[sum(map(len, parts)) :]
    if not 2 <= len(parts) <= 4 or parts[0] not in first or coda not in codas:
        return None
    if any(part not in later for part in parts[1:]):
        return None
    rest = 0
    for part in reversed(parts[1:]):
        rest = rest * len(later) + later[part]
    return len(parts) - 2, first[parts[0]] + len(first) * (codas[coda] + len(codas) * rest)


def tail_ranks(rng: np.random.Generator, n: int) -> np.ndarray:
    """Ranks k ≥ 1 with P(k) ∝ (k + OFFSET)^-EXPONENT: the continuous Pareto (Lomax)
    law by inverse CDF, floored. One draw in 400 lies past the word space (10^12 words)
    and wraps around in `tail_words`: a new word all the same, almost surely."""
    u = 1.0 - rng.random(n)  # (0, 1]
    x = (1 + TAIL_OFFSET) * u ** (-1 / (TAIL_EXPONENT - 1)) - TAIL_OFFSET
    return np.minimum(x, 2.0**62).astype(np.int64)


def tail_words(ranks: np.ndarray, capital: np.ndarray, t: Tail) -> np.ndarray:
    """The tail's string for each rank (object array): a number, or a made-up word,
    capitalised where `capital` (the template's word was) or where the rank is a name's."""
    out = np.empty(ranks.size, dtype=object)
    number = ranks % NUMBER_EVERY == 0
    values = skip(ranks[number] // NUMBER_EVERY - 1, t.taken_numbers)
    out[number] = values.astype(str).astype(object)
    k = ranks[~number]
    name = np.isin(k % NUMBER_EVERY, NAME_RESIDUES) | capital[~number]
    index = skip((k - k // NUMBER_EVERY - 1) % t.size, t.forbidden)
    block = np.searchsorted(t.block_start, index, side="right") - 1
    value = (index - t.block_start[block]) * t.multiplier[block] % t.block_size[block]
    f, c, p = t.first.size, t.codas.size, t.later.size - 1
    word = np.where(name, t.first_capitalised[value % f], t.first[value % f])
    value //= f
    coda = t.codas[value % c]
    value //= c
    for piece in range(3):  # the later syllables of 2, 3 or 4; "" past the word's own
        word = np.strings.add(word, t.later[np.where(piece <= block, value % p, p)])
        value //= p
    out[~number] = np.strings.add(word, coda).astype(object)
    return out


def english(rng: np.random.Generator, ids: np.ndarray, t: Templates, h: Head, tl: Tail) -> str:
    """The English lines of templates `ids`, each ending in a line break, as one string:
    the runs of every line in one object array, joined once."""
    counts = t.run_count[ids]
    total = int(counts.sum())
    line = np.repeat(np.arange(ids.size), counts)
    runs = np.repeat(t.run_start[ids] - offsets(counts), counts) + np.arange(total)
    out = np.empty(total + ids.size, dtype=object)
    segments = t.runs[runs]
    words = np.flatnonzero(t.alnum[runs])
    capital = t.upper[runs[words]]
    in_tail = rng.random(words.size) < TAIL_SHARE
    drawn = np.searchsorted(h.cdf, rng.random(words.size), side="right")
    segments[words] = np.where(capital, h.capitalised[drawn], h.words[drawn])
    tailed = words[in_tail]
    segments[tailed] = tail_words(tail_ranks(rng, tailed.size), capital[in_tail], tl)
    out[np.arange(total) + line] = segments
    out[offsets(counts) + counts + np.arange(ids.size)] = "\n"
    return "".join(out.tolist())


def chain(pool: list[tuple[str, str]]) -> Chain:
    """The chain of the pool's Han runs: their first characters, the pairs of
    consecutive characters within a run, and every character."""
    runs = [m.group() for _, zh in pool for m in HAN.finditer(zh)]
    points = np.frombuffer("".join(runs).encode("utf-32-le"), dtype="<u4")
    alphabet, ids = np.unique(points, return_inverse=True)
    size = alphabet.size
    lengths = np.array([len(run) for run in runs], dtype=np.int64)
    starts = offsets(lengths)
    goes_on = np.ones(points.size, dtype=bool)  # the next character is in the same run
    goes_on[starts + lengths - 1] = False
    before, after = ids[:-1][goes_on[:-1]], ids[1:][goes_on[:-1]]
    pair, count = np.unique(before.astype(np.int64) * size + after, return_counts=True)
    row, successor = np.divmod(pair, size)
    row_total = np.bincount(row, weights=count, minlength=size)
    return Chain(
        alphabet=alphabet.astype(np.uint32),
        start_cdf=cdf(np.bincount(ids[starts], minlength=size)),
        unigram_cdf=cdf(np.bincount(ids, minlength=size)),
        row_cdf=row + running_within(row, count) / row_total[row],
        successor=successor,
        dead_end=row_total == 0,
    )


def cdf(counts: np.ndarray) -> np.ndarray:
    """The inverse-CDF table of `counts`, for `np.searchsorted(cdf, u, side="right")`."""
    c = np.cumsum(counts, dtype=np.float64)
    return c / c[-1]


def running_within(row: np.ndarray, count: np.ndarray) -> np.ndarray:
    """The running sum of `count`, restarting at each new `row` (rows sorted)."""
    total = np.cumsum(count, dtype=np.float64)
    first = np.concatenate([[True], row[1:] != row[:-1]])
    return total - np.maximum.accumulate(np.where(first, total - count, 0))


def successors(rng: np.random.Generator, char: np.ndarray, c: Chain) -> np.ndarray:
    """The next character after each of `char`: from its row of the chain (one search
    over all rows at once, row r's values lying in (r, r + 1]), or, with probability
    BIGRAM_SMOOTHING and after a dead end, from the unigram distribution."""
    u = rng.random(char.size)
    smooth = (rng.random(char.size) < BIGRAM_SMOOTHING) | c.dead_end[char]
    entry = np.searchsorted(c.row_cdf, char + u, side="right")
    bigram = c.successor[np.minimum(entry, c.successor.size - 1)]
    return np.where(smooth, np.searchsorted(c.unigram_cdf, u, side="right"), bigram)


def chinese(rng: np.random.Generator, ids: np.ndarray, t: Templates, c: Chain) -> str:
    """The Chinese lines of templates `ids`, each ending in a line break, as one string:
    the template lines' code points with every Han run overwritten by the chain's, drawn
    for all runs of the chunk at once, one position at a time, and decoded once."""
    lengths = t.line_length[ids]
    line_out = offsets(lengths)
    total = int(lengths.sum())
    points = t.code_points[np.repeat(t.line_start[ids] - line_out, lengths) + np.arange(total)]
    counts = t.han_count[ids]
    runs = np.repeat(t.han_start[ids] - offsets(counts), counts) + np.arange(counts.sum())
    at = np.repeat(line_out, counts) + t.han_at[runs]
    left = t.han_length[runs]
    char = np.searchsorted(c.start_cdf, rng.random(at.size), side="right")
    points[at] = c.alphabet[char]
    for step in range(1, int(left.max(initial=0))):
        alive = left > step
        at, left, char = at[alive], left[alive], char[alive]
        char = successors(rng, char, c)
        points[at + step] = c.alphabet[char]
    return points.tobytes().decode("utf-32-le")


def draw_templates(rng: np.random.Generator, n: int, t: Templates) -> np.ndarray:
    """`n` template ids: NTREX-128's with probability NTREX_SHARE, else Tatoeba's."""
    news = rng.random(n) < NTREX_SHARE
    return np.where(news, rng.integers(0, t.ntrex, n), rng.integers(t.ntrex, t.run_count.size, n))


def generate(pairs: int, out: str, seed: int = 0) -> None:
    """Write `pairs` pairs to OUT.en and OUT.zh, CHUNK pairs at a time."""
    rng = np.random.default_rng(seed)
    pool, ntrex = load_pool()
    counts = english_counts(pool)
    t, h, tl, c = templates(pool, ntrex), head(counts), tail(counts), chain(pool)
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    with (
        open(f"{out}.en", "w", encoding="utf-8") as en,
        open(f"{out}.zh", "w", encoding="utf-8") as zh,
    ):
        for begin in range(0, pairs, CHUNK):
            ids = draw_templates(rng, min(CHUNK, pairs - begin), t)
            en.write(english(rng, ids, t, h, tl))
            zh.write(chinese(rng, ids, t, c))


if __name__ == "__main__":
    from generator_cli import command_line

    command_line(generate, __doc__)
