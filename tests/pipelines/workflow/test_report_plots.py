"""The report's SVG plots: well-formed, scaled to their data, labels escaped."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest

from nmtpipe.pipelines.workflow import report_plots as plots

NS = "{http://www.w3.org/2000/svg}"


def parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{NS}svg" and root.get("viewBox") == f"0 0 {plots.WIDTH} {plots.HEIGHT}"
    return root


def texts(root: ET.Element) -> list[str]:
    return [t.text or "" for t in root.iter(f"{NS}text")]


def inside(root: ET.Element) -> bool:
    """Every coordinate within the picture."""
    for element in root.iter():
        for name in ("x", "y", "x1", "x2", "y1", "y2"):
            if element.get(name) is not None:
                value = float(element.get(name))
                limit = plots.WIDTH if name.startswith("x") else plots.HEIGHT
                if not 0 <= value <= limit:
                    return False
    return True


def test_bars_are_as_tall_as_their_values_and_labels_are_escaped():
    root = parse(plots.bars(["a<b", "c&d"], {"read": [100, 50], "kept": [80, 0]}, "pairs"))
    rects = [r for r in root.iter(f"{NS}rect") if r.get("fill") in plots.COLOURS]
    heights = [float(r.get("height")) for r in rects]
    assert len(rects) == 4 and heights[1] == pytest.approx(heights[0] / 2, abs=0.1)
    assert heights[2] == pytest.approx(0.8 * heights[0], abs=0.1) and heights[3] == 0
    words = texts(root)
    assert {"a<b", "c&d", "pairs", "read", "kept", "0", "100"} <= set(words)
    assert inside(root)


def test_every_bar_has_its_count_and_a_bar_of_one_is_seen():
    """Splits of 1% beside train: the small bars are slivers, their counts readable."""
    root = parse(plots.bars(["train", "valid", "test"], {"pairs": [30658, 338, 1]}, "pairs"))
    rects = [r for r in root.iter(f"{NS}rect") if r.get("fill") in plots.COLOURS]
    assert [float(r.get("height")) >= 2 for r in rects] == [True, True, True]
    counts = {t.text: float(t.get("y")) for t in root.iter(f"{NS}text") if t.get("font-size")}
    assert set(counts) == {"30,658", "338", "1"}
    for rect, count in zip(rects, ("30,658", "338", "1"), strict=True):
        assert counts[count] < float(rect.get("y"))  # above its bar
    assert inside(root)


def test_many_long_labels_are_slanted_and_stay_in_the_picture():
    labels = [f"a-rather-long-input-name-{k}.{{en,zh}}" for k in range(8)]
    root = parse(plots.bars(labels, {"pairs": list(range(8))}, "pairs"))
    slanted = [t for t in root.iter(f"{NS}text") if (t.text or "") in labels]
    assert len(slanted) == 8 and all("rotate(-20" in t.get("transform") for t in slanted)
    assert inside(root)


def test_histograms_draw_a_step_per_bin_and_the_limit():
    hist = {10: 5, 11: 0, 13: 7}  # bin 12 empty: drawn as zero
    root = parse(plots.histograms({"pairs": hist}, "ratio", 0.1, 2.0, "limit 2"))
    (path,) = root.iter(f"{NS}path")
    steps = path.get("d").count("H")
    assert steps == 4  # bins 10 to 13
    dashed = [ln for ln in root.iter(f"{NS}line") if ln.get("stroke-dasharray")]
    assert len(dashed) == 2  # the limit and its key in the legend
    assert {"ratio", "pairs", "limit 2", "1", "1.5", "2"} <= set(texts(root))
    assert inside(root)


def test_nothing_to_draw_still_draws_axes():
    root = parse(plots.histograms({"en": {}, "zh": {}}, "tokens"))
    assert "tokens" in texts(root) and not list(root.iter(f"{NS}path"))
    root = parse(plots.bars([], {"pairs": []}, "pairs"))
    assert "pairs" in texts(root)


@pytest.mark.parametrize(
    ("lo", "hi", "expected"),
    [
        (0, 10, [0, 2, 4, 6, 8, 10]),
        (0, 37_000, [0, 10_000, 20_000, 30_000, 40_000]),
        (0, 0, [0, 0.2, 0.4, 0.6, 0.8, 1]),
        (0.95, 5.05, [0, 1, 2, 3, 4, 5, 6]),
    ],
)
def test_ticks_are_round_and_cover_the_range(lo, hi, expected):
    assert plots.nice_ticks(lo, hi) == expected


def test_ticks_inside_a_range_stay_inside_it():
    assert plots.nice_ticks(0.95, 5.05, inside=True) == [1, 2, 3, 4, 5]
