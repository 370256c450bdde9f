"""The report's plots: matplotlib on its Agg backend, each figure as inline SVG text.

SVG keeps the page one self-contained file (no network, no image files) and sharp at
any zoom. Every function takes plain numbers and returns an `<svg>` element as text.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt

matplotlib.rcParams.update({"svg.fonttype": "none", "font.size": 9, "figure.dpi": 96})
# Text stays text in the SVG: the browser draws CJK labels with its own fonts.
_SIZE = (6.4, 2.8)


def _svg(fig: plt.Figure) -> str:
    out = io.StringIO()
    fig.tight_layout()
    fig.savefig(out, format="svg")
    plt.close(fig)
    text = out.getvalue()
    return text[text.index("<svg") :]  # without the XML prolog and doctype


def bars(labels: Sequence[str], series: Mapping[str, Sequence[float]], ylabel: str) -> str:
    """Grouped (or single) bars: one group per label, one bar per series."""
    fig, ax = plt.subplots(figsize=_SIZE)
    width = 0.8 / max(len(series), 1)
    for k, (name, values) in enumerate(series.items()):
        xs = [i + (k - (len(series) - 1) / 2) * width for i in range(len(labels))]
        ax.bar(xs, values, width, label=name)
    ax.set_xticks(range(len(labels)), labels, rotation=20 if len(labels) > 4 else 0, ha="right")
    ax.set_ylabel(ylabel)
    if len(series) > 1:
        ax.legend()
    return _svg(fig)


def histograms(
    hists: Mapping[str, Mapping[int, int]],
    xlabel: str,
    step: float = 1.0,
    limit: float | None = None,
    limit_label: str = "",
) -> str:
    """Step histograms (one per name) from {bin: count}, bins `step` wide and empty
    bins drawn as zero; `limit` drawn as a line."""
    fig, ax = plt.subplots(figsize=_SIZE)
    for name, hist in hists.items():
        if hist:
            bins = np.arange(min(hist), max(hist) + 1)
            ax.step(bins * step, [hist.get(int(b), 0) for b in bins], where="mid", label=name)
    if limit is not None:
        ax.axvline(limit, color="crimson", linestyle="--", label=limit_label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("pairs")
    ax.legend()
    return _svg(fig)
