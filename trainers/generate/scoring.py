"""Corpus BLEU and chrF with sacrebleu, from statistics summed window by window.

sacrebleu's corpus scores are functions of per-sentence statistics (n-gram matches and
counts; character and word n-gram counts) summed over the corpus, so they are computed
here in one pass without keeping every hypothesis. Chinese targets get sacrebleu's
`zh` tokenizer (characters of CJK text are split), others its default `13a`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from sacrebleu.metrics import BLEU, CHRF


def default_tokenize(lang: str) -> str:
    return "zh" if lang.lower().split("-")[0].split("_")[0] in ("zh", "cmn") else "13a"


class CorpusScores:
    """BLEU and chrF over hypotheses and references added in any number of parts."""

    def __init__(self, tokenize: str) -> None:
        self._metrics = {"bleu": BLEU(tokenize=tokenize), "chrf": CHRF()}
        self._stats: dict[str, np.ndarray] = {}
        self.sentences = 0

    def add(self, hypotheses: list[str], references: list[str]) -> None:
        for name, metric in self._metrics.items():
            # sacrebleu's own per-sentence statistics, as its corpus_score sums them.
            stats = np.asarray(metric._extract_corpus_statistics(hypotheses, [references]))
            if stats.size:
                total = stats.sum(axis=0)
                self._stats[name] = self._stats[name] + total if name in self._stats else total
        self.sentences += len(hypotheses)

    def summed(self, total: Callable[..., list[float]]) -> CorpusScores:
        """These scores with every statistic summed by `total` (an all-reduce over ranks:
        `Ranks.sum`); a rank with nothing to score adds zeros."""
        sizes = {name: self._zeros(name).size for name in self._metrics}
        flat = [float(self.sentences)]
        for name in self._metrics:
            flat += self._stats.get(name, self._zeros(name)).tolist()
        summed, start = total(*flat), 1
        self.sentences = int(summed[0])
        for name, size in sizes.items():
            self._stats[name] = np.asarray(summed[start : start + size])
            start += size
        return self

    def _zeros(self, name: str) -> np.ndarray:
        row = np.asarray(self._metrics[name]._extract_corpus_statistics([""], [[""]]))
        return np.zeros(row.shape[-1])

    def result(self) -> dict[str, Any]:
        """Scores, their sacrebleu signatures and the usual one-line forms."""
        out: dict[str, Any] = {"scored_sentences": self.sentences}
        for name, metric in self._metrics.items():
            if name not in self._stats:
                continue
            score = metric._compute_score_from_stats(self._stats[name].tolist())
            out[name] = round(score.score, 2)
            out[f"{name}_signature"] = str(metric.get_signature())
            out[f"{name}_line"] = str(score)
        return out
