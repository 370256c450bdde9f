"""The report's plots, written as inline SVG text directly.

SVG keeps the page one self-contained file (no network, no image files) and sharp at
any zoom; text stays text, so the browser draws CJK labels with its own fonts. The
plots are two simple kinds (bars, step histograms), so they are drawn here rather than
by a plotting library: importing and laying out matplotlib cost about 2 s of every
report, and a refresh writes one per version. Every function takes plain numbers and
returns an `<svg>` element.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from html import escape

WIDTH, HEIGHT = 640, 270
FONT = 12  # px, as matplotlib's 9 points at 96 dpi
COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b")
_CHAR = 0.6 * FONT  # a label's width per character, roughly (no font metrics here)
_DASH = "5,3"
_SLANT = math.radians(20)  # x labels turned when there are many
_COUNT_FONT = 10  # px, the counts above bars
_SLIVER = 2.0  # px, the least height of a bar that is not zero


def bars(labels: Sequence[str], series: Mapping[str, Sequence[float]], ylabel: str) -> str:
    """Grouped (or single) bars: one group per label, one bar per series, each with its
    count written above it: beside a bar of 30,000 a bar of 300 is a sliver and one of 1
    nothing, so a bar that is not zero is at least `_SLIVER` tall and every count is
    readable."""
    top = max([v for values in series.values() for v in values], default=0)
    slant = len(labels) > 4
    longest = _CHAR * max(map(len, labels), default=0)
    bottom = 24 + (longest * math.sin(_SLANT) + FONT if slant else FONT)
    frame = _Frame.around((0, top), bottom).lower(_COUNT_FONT + 4)  # room for the counts
    if slant and labels:  # the first label, slanted, reaches left of its bar
        frame = frame.wider_left(_CHAR * len(labels[0]) * math.cos(_SLANT), len(labels))
    width = frame.w / max(len(labels), 1)
    bar = 0.8 * width / max(len(series), 1)
    out = []
    for k, values in enumerate(series.values()):
        for i, value in enumerate(values):
            x = frame.x + i * width + 0.1 * width + k * bar
            height = frame.y_of(0) - frame.y_of(value)
            height = max(height, _SLIVER) if value > 0 else height
            y = frame.y_of(0) - height
            out.append(_rect(x, y, bar, height, _colour(k)))
            count = f' font-size="{_COUNT_FONT}"'
            out.append(_text(x + bar / 2, y - 3, _number(value), "middle", count))
    for i, label in enumerate(labels):
        x, y = frame.x + (i + 0.5) * width, frame.bottom + FONT + 4
        if slant:
            turn = f' transform="rotate({-math.degrees(_SLANT):g} {x:.1f} {y:.1f})"'
            out.append(_text(x, y, label, "end", turn))
        else:
            out.append(_text(x, y, label, "middle"))
    out += frame.y_axis(ylabel)
    if len(series) > 1:
        out += _legend(frame, [(name, _colour(k), "") for k, name in enumerate(series)])
    return _svg(out)


def histograms(
    hists: Mapping[str, Mapping[int, int]],
    xlabel: str,
    step: float = 1.0,
    limit: float | Sequence[float] | None = None,
    limit_label: str = "",
) -> str:
    """Step histograms (one per name) from {bin: count}, bins `step` wide and empty
    bins drawn as zero; `limit` (or each of several) drawn as a dashed line."""
    limits = [] if limit is None else [limit] if isinstance(limit, int | float) else list(limit)
    shown = {name: hist for name, hist in hists.items() if hist}
    bins = [b for hist in shown.values() for b in hist]
    lo = min(bins, default=0) - 0.5
    hi = max(bins, default=0) + 0.5
    xs = [lo * step, hi * step, *limits]
    top = max([n for hist in shown.values() for n in hist.values()], default=0)
    frame = _Frame.around((0, top), 38, (min(xs), max(xs)))
    out = []
    for k, hist in enumerate(shown.values()):
        first, last = min(hist), max(hist)
        points = [f"M{frame.x_of((first - 0.5) * step):.1f},{frame.y_of(0):.1f}"]
        for b in range(first, last + 1):
            y = frame.y_of(hist.get(b, 0))
            points.append(f"V{y:.1f}H{frame.x_of((b + 0.5) * step):.1f}")
        points.append(f"V{frame.y_of(0):.1f}")
        out.append(
            f'<path d="{"".join(points)}" fill="none" stroke="{_colour(k)}" stroke-width="1.5"/>'
        )
    keys = [(name, _colour(k), "") for k, name in enumerate(shown)]
    for x in map(frame.x_of, limits):
        out.append(_line(x, frame.y, x, frame.bottom, "crimson", 1.5, _DASH))
    if limits:
        keys.append((limit_label, "crimson", _DASH))
    out += frame.x_axis(xlabel) + frame.y_axis("pairs")
    return _svg(out + _legend(frame, keys))


@dataclass(frozen=True)
class _Frame:
    """The plotting area in pixels, and the data ranges it maps."""

    x: float
    y: float
    w: float
    h: float
    xs: tuple[float, float]
    ys: tuple[float, float]
    yticks: list[float]

    @classmethod
    def around(
        cls, ys: tuple[float, float], bottom: float, xs: tuple[float, float] = (0.0, 1.0)
    ) -> _Frame:
        """A frame for `ys` (widened to round ticks), leaving room for the y tick labels
        on the left and `bottom` pixels below."""
        ticks = nice_ticks(*ys)
        left = 22 + _CHAR * max(len(_number(t)) for t in ticks)
        return cls(
            left, 10, WIDTH - left - 12, HEIGHT - 10 - bottom, xs, (ticks[0], ticks[-1]), ticks
        )

    def lower(self, room: float) -> _Frame:
        """The frame with its top `room` pixels lower (for text above the data)."""
        return dataclasses.replace(self, y=self.y + room, h=self.h - room)

    def wider_left(self, reach: float, groups: int) -> _Frame:
        """The frame, moved right if text reaching `reach` pixels left of the first of
        `groups` columns' centre would leave the picture."""
        shift = max(0.0, reach - self.x - self.w / groups / 2 + 4)
        return dataclasses.replace(self, x=self.x + shift, w=self.w - shift)

    @property
    def bottom(self) -> float:
        return self.y + self.h

    def x_of(self, value: float) -> float:
        lo, hi = self.xs
        return self.x + (value - lo) / ((hi - lo) or 1) * self.w

    def y_of(self, value: float) -> float:
        lo, hi = self.ys
        return self.bottom - (value - lo) / ((hi - lo) or 1) * self.h

    def y_axis(self, label: str) -> list[str]:
        out = [
            _line(self.x, self.y, self.x, self.bottom),
            _line(self.x, self.bottom, self.x + self.w, self.bottom),
        ]
        for tick in self.yticks:
            y = self.y_of(tick)
            out.append(_line(self.x - 4, y, self.x, y))
            out.append(_text(self.x - 6, y + FONT / 3, _number(tick), "end"))
        mid = self.y + self.h / 2
        out.append(_text(12, mid, label, "middle", f' transform="rotate(-90 12 {mid:.1f})"'))
        return out

    def x_axis(self, label: str) -> list[str]:
        out = []
        for tick in nice_ticks(*self.xs, inside=True):
            x = self.x_of(tick)
            out.append(_line(x, self.bottom, x, self.bottom + 4))
            out.append(_text(x, self.bottom + FONT + 5, _number(tick), "middle"))
        out.append(_text(self.x + self.w / 2, HEIGHT - 6, label, "middle"))
        return out


def nice_ticks(lo: float, hi: float, count: int = 5, inside: bool = False) -> list[float]:
    """About `count` round values (steps of 1, 2 or 5 times a power of ten) covering
    [lo, hi], or, with `inside`, within it."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(lo / step) if inside else math.floor(lo / step)
    last = math.floor(hi / step) if inside else math.ceil(hi / step)
    return [round(k * step, 10) for k in range(first, last + 1)]


def _number(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:g}"


def _legend(frame: _Frame, keys: list[tuple[str, str, str]]) -> list[str]:
    """Keys (name, colour, dash pattern) at the top right, a line each."""
    if not keys:
        return []
    width = 30 + _CHAR * max(len(name) for name, _, _ in keys)
    x = frame.x + frame.w - width
    out = [
        f'<rect x="{x - 4:.1f}" y="{frame.y + 2:.1f}" width="{width:.1f}" '
        f'height="{len(keys) * (FONT + 5) + 6}" fill="white" fill-opacity="0.8" stroke="#ccc"/>'
    ]
    for k, (name, colour, dash) in enumerate(keys):
        y = frame.y + 12 + k * (FONT + 5)
        out.append(_line(x, y - FONT / 3, x + 18, y - FONT / 3, colour, 2.5, dash))
        out.append(_text(x + 24, y, name, "start"))
    return out


def _colour(k: int) -> str:
    return COLOURS[k % len(COLOURS)]


def _svg(elements: list[str]) -> str:
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" font-family="sans-serif" font-size="{FONT}">'
        + "".join(elements)
        + "</svg>"
    )


def _rect(x: float, y: float, w: float, h: float, colour: str) -> str:
    return f'<rect x="{x:.1f}" y="{y:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{colour}"/>'


def _line(
    x1: float,
    y1: float,
    x2: float,
    y2: float,
    colour: str = "#333",
    width: float = 1.0,
    dash: str = "",
) -> str:
    dashed = f' stroke-dasharray="{dash}"' if dash else ""
    return (
        f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" '
        f'stroke="{colour}" stroke-width="{width:g}"{dashed}/>'
    )


def _text(x: float, y: float, text: str, anchor: str, extra: str = "") -> str:
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{extra}>{escape(text)}</text>'
