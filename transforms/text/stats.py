"""Corpus statistics as mergeable partials, and their final form for `stats.json`.

A partial is a nested dict of counts and length histograms. Partials from any number of
chunks and shards merge by adding numbers key by key, in any order and grouping, which
is what a Beam CombineFn needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from nmtpipe.transforms.text.filters import REASONS

Partial = dict[str, Any]
PERCENTILES = (50, 90, 95, 99)


def merge_into(acc: Partial, part: Mapping[str, Any]) -> Partial:
    """Add `part` into `acc` (numbers add, dicts merge recursively, a text is kept: the
    final statistics of several outputs name each input's encodings) and return `acc`."""
    for key, value in part.items():
        if isinstance(value, Mapping):
            merge_into(acc.setdefault(key, {}), value)
        elif isinstance(value, str):
            acc[key] = value
        else:
            acc[key] = acc.get(key, 0) + value
    return acc


def histogram(lengths: np.ndarray) -> dict[int, int]:
    """{length: how many} for the non-zero bins of `lengths`."""
    if lengths.size == 0:
        return {}
    counts = np.bincount(lengths)
    nonzero = np.flatnonzero(counts)
    return dict(zip(nonzero.tolist(), counts[nonzero].tolist(), strict=True))


def side_partial(chars: np.ndarray) -> Partial:
    """Character total and length histogram of one side of a batch of pairs."""
    return {"chars": int(chars.sum()), "char_hist": histogram(chars)}


def summarize_lengths(hist: Mapping[int | str, int]) -> dict[str, float]:
    """Mean, percentiles and max of a length histogram."""
    if not hist:
        return {"mean": 0.0, **{f"p{q}": 0 for q in PERCENTILES}, "max": 0}
    # Keys come back as strings from JSON.
    items = sorted((int(n), int(c)) for n, c in hist.items())
    lengths = np.array([n for n, _ in items], dtype=np.int64)
    counts = np.array([c for _, c in items], dtype=np.int64)
    cumulative = np.cumsum(counts)
    total = int(cumulative[-1])
    out: dict[str, float] = {"mean": round(float((lengths * counts).sum()) / total, 2)}
    for q in PERCENTILES:
        out[f"p{q}"] = int(lengths[np.searchsorted(cumulative, q / 100 * total)])
    out["max"] = int(lengths[-1])
    return out


def _sorted_hist(hist: Mapping[int | str, int]) -> dict[str, int]:
    """A histogram with JSON's string keys, in numeric order."""
    return {str(k): int(v) for k, v in sorted((int(k), v) for k, v in hist.items())}


def _inputs(partial: Partial) -> dict[str, Any]:
    """Per input: pairs read, kept and rejected by reason, and the encoding each side was
    read in (partials count chunks per encoding, so that they add up)."""
    out = {}
    for origin, info in sorted(partial.get("inputs", {}).items()):
        rejects = {r: int(n) for r, n in sorted(info.get("rejects", {}).items())}
        read = int(info.get("read", 0))
        out[origin] = {"read": read, "kept": read - sum(rejects.values()), "rejects": rejects}
        if info.get("encoding"):
            out[origin]["encoding"] = {
                side: "/".join(sorted(found)) for side, found in sorted(info["encoding"].items())
            }
    return out


def finalize(partial: Partial, splits: Iterable[str]) -> dict[str, Any]:
    """The `stats.json` document: every reason and split present (the filters' reasons
    always, the pair scorers' where they rejected any), lengths summarised (and kept as
    histograms, in characters, for the report), per input what was read and kept, lines
    converted to one Chinese script, the histogram of length ratios (key: ratio x 10,
    see `clean.py`) and the pair scores' histograms."""
    found = partial.get("rejects", {})
    rejects = {reason: int(found.get(reason, 0)) for reason in REASONS}
    rejects |= {reason: int(n) for reason, n in sorted(found.items()) if reason not in REASONS}
    split_stats: dict[str, Any] = {}
    kept = 0
    for split in splits:
        raw = partial.get("splits", {}).get(split, {})
        pairs = int(raw.get("pairs", 0))
        kept += pairs
        split_stats[split] = {"pairs": pairs}
        for side in ("src", "tgt"):
            s = raw.get(side, {})
            split_stats[split][side] = {
                "chars": int(s.get("chars", 0)),
                "length_chars": summarize_lengths(s.get("char_hist", {})),
                "length_hist": _sorted_hist(s.get("char_hist", {})),
            }
            if "tokens" in s:  # T2T tokens are counted for the train split
                split_stats[split][side]["tokens"] = int(s["tokens"])
    return {
        "pairs_read": int(partial.get("pairs_read", 0)),
        "pairs_kept": kept,
        "pairs_rejected": sum(rejects.values()),
        "rejects": rejects,
        "splits": {split: s["pairs"] for split, s in split_stats.items()},
        "split_details": split_stats,
        "inputs": _inputs(partial),
        "converted": {side: int(n) for side, n in sorted(partial.get("converted", {}).items())},
        "length_ratio_hist": _sorted_hist(partial.get("ratio_hist", {})),
        **_scores(partial),
        **_learned(partial),
    }


def _learned(partial: Partial) -> dict[str, Any]:
    """How many train pairs each learned scorer learned from, where any did, whether a
    sample of them (and of how many pairs outside it each score was matched to the
    sample's: `quality/matching.py`), and the thresholds its trusted pairs set, where
    they did."""
    found: dict[str, Any] = {}
    if partial.get("learned"):
        found["learned"] = {name: int(n) for name, n in sorted(partial["learned"].items())}
    if partial.get("learned_sample"):
        found["learned_sample"] = True
    if partial.get("matched"):
        found["matched"] = {column: int(n) for column, n in sorted(partial["matched"].items())}
    if partial.get("calibrated"):
        found["calibrated"] = {
            name: dict(sorted(values.items()))
            for name, values in sorted(partial["calibrated"].items())
        }
    return found


def _scores(partial: Partial) -> dict[str, Any]:
    """The pair scores' histograms of kept and rejected pairs (`quality/judge.py`: key:
    the score / its bin), where pair scorers judged the pairs."""
    found = partial.get("scores")
    if not found:
        return {}
    return {
        "scores": {
            column: {k: _sorted_hist(hists.get(k, {})) for k in ("kept", "rejected")}
            for column, hists in sorted(found.items())
        }
    }
