"""Noisy en-zh corpora from the bundled data, for judging pair scores by what they keep.

The noise of mined and crawled corpora (shared/notes/pair-quality.md), each kind made
from real pairs of Tatoeba (shared/data/tatoeba-cmn) and NTREX-128 news
(shared/data/ntrex128-enzh):

- `misaligned`: a source with the target of another pair of about the same length;
- `partial`: the target cut at a clause mark near its middle, one half kept;
- `number`: a number of the target changed (where the target has one);
- `shuffled`: the target's characters in a random order (same script, no meaning);
- `nonlinguistic`: lines of digits, codes and URLs on both sides;
- `neardup`: a clean pair again with its punctuation, spaces or case changed;
- `clean`: correct pairs, untouched.

Two layouts:

    python benchmarks/corpora/make_pair_noise.py mixed --out DIR
        DIR/noisy.{en,zh}: clean pairs and about 1,000 of each kind, shuffled, and
        DIR/noisy.kind naming each line's kind (what nmtpipe should keep: the clean),
        a near-duplicate's followed by the line of the clean pair it repeats.
    python benchmarks/corpora/make_pair_noise.py demo --out DIR
        the demo's corpus (Tatoeba) as DIR/test.{en,zh} (a fixed 2%, by source),
        DIR/clean.{en,zh} (the rest) and DIR/noise.{en,zh} (6,000 misaligned, 3,000
        partial and 3,000 shuffled pairs made from the clean part), for training the
        demo's model on clean, clean + noise, and clean + noise filtered.

Every choice is drawn from a seeded generator: the same command writes the same bytes.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import re
from collections.abc import Callable
from pathlib import Path

DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
KINDS = ("clean", "misaligned", "partial", "number", "shuffled", "nonlinguistic", "neardup")
Pair = tuple[str, str]
CLAUSE = re.compile(r"[，,、；;：:]")
NUMBER = re.compile(r"\d+")


def _lines(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").rstrip("\n").split("\n")


def bundled(data: Path) -> tuple[list[Pair], list[Pair]]:
    """(Tatoeba's pairs, NTREX-128's pairs), without the empty ones."""

    def pairs(folder: str, name: str) -> list[Pair]:
        en, zh = (_lines(data / folder / f"{name}.{x}") for x in ("en", "zh"))
        return [(s, t) for s, t in zip(en, zh, strict=True) if s.strip() and t.strip()]

    return pairs("tatoeba-cmn", "tatoeba-cmn"), pairs("ntrex128-enzh", "ntrex128-enzh")


def misaligned(pairs: list[Pair], rng: random.Random) -> list[Pair]:
    """Each source with the target of a neighbour in target length (another sentence)."""
    order = sorted(range(len(pairs)), key=lambda i: (len(pairs[i][1]), rng.random()))
    out = []
    for k, i in enumerate(order):
        j = order[k + 1] if k + 1 < len(order) else order[k - 1]
        if pairs[j][0] != pairs[i][0] and pairs[j][1] != pairs[i][1]:
            out.append((pairs[i][0], pairs[j][1]))
    return out


def partial(pair: Pair, rng: random.Random) -> Pair | None:
    """The target cut at the clause mark nearest its middle; one half, either, kept."""
    src, tgt = pair
    body = tgt.rstrip("。！？!?.")
    marks = [m.start() for m in CLAUSE.finditer(body) if 2 <= m.start() <= len(body) - 3]
    if not marks:
        return None
    cut = min(marks, key=lambda at: abs(at - len(body) / 2))
    return src, (body[:cut] + "。" if rng.random() < 0.5 else body[cut + 1 :].strip() + "。")


def number(pair: Pair, rng: random.Random) -> Pair | None:
    """One number of the target changed, where the source has the same number."""
    src, tgt = pair
    found = [m for m in NUMBER.finditer(tgt) if m.group() in NUMBER.findall(src)]
    if not found:
        return None
    m = rng.choice(found)
    value = int(m.group())
    new = str(value + rng.choice([1, 2, 3, 7, 10, 100]) if value < 1900 else value - 1)
    return src, tgt[: m.start()] + new + tgt[m.end() :]


def shuffled(pair: Pair, rng: random.Random) -> Pair | None:
    """The target's characters in another order (its final mark kept last)."""
    src, tgt = pair
    body, end = (tgt[:-1], tgt[-1]) if tgt[-1] in "。！？!?." else (tgt, "")
    if len(set(body)) < 4:
        return None
    chars = list(body)
    while "".join(chars) == body:
        rng.shuffle(chars)
    return src, "".join(chars) + end


def nonlinguistic(k: int, rng: random.Random) -> Pair:
    """A line of digits, codes or a URL, the same on both sides or nearly."""
    code = "".join(
        rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(rng.randint(4, 10))
    )
    digits = " ".join(str(rng.randint(0, 99999)) for _ in range(rng.randint(2, 6)))
    shapes = [
        (digits, digits),
        (f"{code}-{rng.randint(100, 999)}", f"{code}-{rng.randint(100, 999)}"),
        (
            f"https://www.example{k}.com/{code.lower()}/",
            f"https://www.example{k}.com/{code.lower()}/",
        ),
        (
            f"Tel. +86 {rng.randint(10, 99)} {rng.randint(1000, 9999)} {rng.randint(1000, 9999)}",
            f"电话 +86 {rng.randint(10, 99)} {rng.randint(1000, 9999)} {rng.randint(1000, 9999)}",
        ),
        (f"{code} / {digits}", f"{code}/{digits}"),
    ]
    return rng.choice(shapes)


def neardup(pair: Pair, rng: random.Random) -> Pair:
    """The same pair with its punctuation, spacing or case changed on one side or both."""

    def touch(text: str) -> str:
        way = rng.randrange(4)
        if way == 0:
            return text.upper() if text.isascii() else text.replace("，", ",").replace("。", ".")
        if way == 1:
            return re.sub(r"[.!?。！？]+$", "", text) or text + "!"
        if way == 2:
            return "  " + re.sub(r" ", "  ", text, count=2) + " "
        return text.lower() + ("..." if text.isascii() else "……")

    src, tgt = pair
    side = rng.randrange(3)
    new = (touch(src) if side != 1 else src, touch(tgt) if side != 0 else tgt)
    return new if new != pair else (src + " ", tgt)


def _made(
    pairs: list[Pair],
    make: Callable[[Pair, random.Random], Pair | None],
    count: int,
    rng: random.Random,
) -> list[Pair]:
    out = []
    for pair in pairs:
        if len(out) == count:
            break
        made = make(pair, rng)
        if made is not None and made != pair:
            out.append(made)
    return out


def mixed(data: Path, clean_count: int, each: int, seed: int) -> list[tuple[str, Pair]]:
    """Clean pairs and `each` of every kind of noise (fewer changed numbers: as many as
    the data has), drawn from disjoint pairs, in a shuffled order; each with its kind
    (a near-duplicate's naming the line of the clean pair it repeats)."""
    rng = random.Random(seed)
    tatoeba, ntrex = bundled(data)
    pool = tatoeba + ntrex
    rng.shuffle(pool)
    with_numbers = [p for p in pool if NUMBER.search(p[1]) and NUMBER.search(p[0])]
    pool = [p for p in pool if p not in set(with_numbers)]
    clean, rest = pool[:clean_count], pool[clean_count:]
    clauses = [p for p in rest if CLAUSE.search(p[1])]  # the pairs that can be cut
    rest = [p for p in rest if not CLAUSE.search(p[1])]
    kinds: list[tuple[str, Pair]] = [("clean", p) for p in clean]
    kinds += [("misaligned", p) for p in misaligned(rest[: 2 * each], rng)[:each]]
    kinds += [("partial", p) for p in _made(clauses, partial, each, rng)]
    kinds += [("number", p) for p in _made(with_numbers, number, each, rng)]
    kinds += [("shuffled", p) for p in _made(rest[2 * each :], shuffled, each, rng)]
    kinds += [("nonlinguistic", nonlinguistic(k, rng)) for k in range(each)]
    copied = rng.sample(range(len(clean)), each)
    kinds += [("neardup", neardup(clean[k], rng)) for k in copied]
    order = list(range(len(kinds)))
    rng.shuffle(order)
    line = {k: i + 1 for i, k in enumerate(order)}  # an entry's line in the file
    source = dict(zip(range(len(kinds) - each, len(kinds)), copied, strict=True))
    return [
        (kinds[k][0] + (f" {line[source[k]]}" if k in source else ""), kinds[k][1]) for k in order
    ]


def demo(data: Path, seed: int, trusted_share: float = 0.0) -> dict[str, list[Pair]]:
    """The demo's corpus split into a fixed test set and the rest, and noise made from
    the rest: 6,000 misaligned, 3,000 partial and 3,000 shuffled pairs. With a
    `trusted_share`, that share of the rest's sources (every translation of each) is
    set apart as trusted pairs first, and neither the clean pairs nor the noise hold
    any of them."""
    rng = random.Random(seed)
    tatoeba, _ = bundled(data)

    def bucket(src: str, salt: bytes) -> int:
        digest = hashlib.blake2b(src.encode(), digest_size=8, salt=salt).digest()
        return int.from_bytes(digest) % 10_000

    def in_test(src: str) -> bool:  # 2% of the sources, every translation of each
        return int.from_bytes(hashlib.blake2b(src.encode(), digest_size=8).digest()) % 50 == 0

    def in_trusted(src: str) -> bool:
        return bucket(src, b"trusted") < trusted_share * 10_000

    test = [p for p in tatoeba if in_test(p[0])]
    trusted = [p for p in tatoeba if not in_test(p[0]) and in_trusted(p[0])]
    clean = [p for p in tatoeba if not in_test(p[0]) and not in_trusted(p[0])]
    drawn = rng.sample(clean, len(clean))
    noise = misaligned(drawn[:6200], rng)[:6000]
    noise += _made(drawn[6200:], partial, 3000, rng)
    noise += _made(drawn[6200 + 12000 :], shuffled, 3000, rng)
    rng.shuffle(noise)
    return {
        "test": test,
        "clean": clean,
        "noise": noise,
        **({"trusted": trusted} if trusted else {}),
    }


def unused_tatoeba(noisy: list[Pair], data: Path) -> list[Pair]:
    """The Tatoeba pairs that share no side with any pair of `noisy`: trusted pairs of
    its domain (seed models' data, `--trustedpref`) that hold none of its text."""
    used = {side.strip() for pair in noisy for side in pair}
    tatoeba, _ = bundled(data)
    return [p for p in tatoeba if p[0].strip() not in used and p[1].strip() not in used]


def write(prefix: Path, pairs: list[Pair]) -> None:
    for k, lang in enumerate(("en", "zh")):
        Path(f"{prefix}.{lang}").write_text("".join(p[k] + "\n" for p in pairs), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("layout", choices=("mixed", "demo"))
    parser.add_argument("--out", required=True, help="the folder to write into")
    parser.add_argument("--data", default=str(DATA), help="shared/data")
    parser.add_argument("--clean", type=int, default=5977, help="clean pairs (mixed)")
    parser.add_argument("--each", type=int, default=1041, help="pairs of each noise (mixed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--trusted-share", type=float, default=0.0, help="(demo) sources set apart as trusted"
    )
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.layout == "mixed":
        kinds = mixed(Path(args.data), args.clean, args.each, args.seed)
        write(out / "noisy", [p for _, p in kinds])
        (out / "noisy.kind").write_text("".join(k + "\n" for k, _ in kinds), encoding="utf-8")
        counts = {k: sum(kind.split()[0] == k for kind, _ in kinds) for k in KINDS}
        print(f"{out}/noisy.{{en,zh,kind}}: {len(kinds):,} pairs, {counts}")
        return
    for name, pairs in demo(Path(args.data), args.seed, args.trusted_share).items():
        write(out / name, pairs)
        print(f"{out / name}.{{en,zh}}: {len(pairs):,} pairs")


if __name__ == "__main__":
    main()
