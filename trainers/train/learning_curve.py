"""Learning curves a person looks at: training and validation loss, the learning rate
and validation BLEU against updates, drawn as one SVG beside the checkpoints.

The points are the run's log records (every `--log-interval` updates, and every
validation); they travel in the checkpoints, so a resumed run draws its whole history.
"""

from __future__ import annotations

import io
from typing import Any

# The values a point keeps, and the panel each is drawn in.
PANELS = {
    "loss": ("loss", "valid_loss"),
    "learning rate": ("lr",),
    "validation BLEU": ("valid_bleu",),
}
KEPT = ("update", *(key for keys in PANELS.values() for key in keys))


def point(record: dict[str, Any]) -> dict[str, float] | None:
    """What a log record adds to the curves (None: nothing)."""
    kept = {k: record[k] for k in KEPT if isinstance(record.get(k), (int, float))}
    return kept if "update" in kept and len(kept) > 1 else None


def plot_svg(points: list[dict[str, float]], title: str) -> bytes:
    """The curves of `points` as a self-contained SVG (panels without data are left out)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    panels = {
        name: keys for name, keys in PANELS.items() if any(k in p for p in points for k in keys)
    }
    figure, axes = plt.subplots(len(panels), 1, figsize=(7, 2.6 * len(panels)), sharex=True,
                                squeeze=False)  # fmt: skip
    for ax, (name, keys) in zip(axes[:, 0], panels.items(), strict=True):
        for key in keys:
            xs = [p["update"] for p in points if key in p]
            ys = [p[key] for p in points if key in p]
            if xs:
                ax.plot(xs, ys, marker="o" if key.startswith("valid") else None, markersize=3,
                        label=key.replace("_", " "))  # fmt: skip
        ax.set_ylabel(name)
        ax.grid(alpha=0.3)
        ax.legend(loc="best", fontsize="small")
    axes[-1, 0].set_xlabel("update")
    axes[0, 0].set_title(title)
    figure.tight_layout()
    out = io.BytesIO()
    figure.savefig(out, format="svg", metadata={"Date": None})
    plt.close(figure)
    return out.getvalue()
