"""README's results table is RESULTS.md's "Latest figures" with GitHub's anchors: the
two slug rules against anchors known to work on each, and the table's rewriting."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

# Python-Markdown (MkDocs' parser; tensorboard brings it too): the manual's own anchors.
slugify = pytest.importorskip("markdown.extensions.toc").slugify

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
figures = importlib.import_module("figures")

HEADINGS = [
    "`vocab --model t2t` vs Tensor2Tensor's own `build_to_target_size` (part 3)",
    "The recipe (`nmtpipe run --example tatoeba`)",
    "Prepare → vocab → encode at 10M pairs",
    "Each engine in processes of its own, taking turns (2026-11-25, 15:49-16:02 UTC)",
]


@pytest.mark.parametrize("heading", HEADINGS)
def test_the_manuals_anchor_is_python_markdowns(heading):
    text = heading.replace("`", "")
    assert figures.mkdocs_slug(text) == slugify(text, "-")


def test_githubs_anchors_keep_double_hyphens_and_underscores():
    slugs = [figures.github_slug(h.replace("`", "")) for h in HEADINGS]
    assert slugs[:2] == [
        "vocab---model-t2t-vs-tensor2tensors-own-build_to_target_size-part-3",
        "the-recipe-nmtpipe-run---example-tatoeba",
    ]
    assert slugs[2] == "prepare--vocab--encode-at-10m-pairs"


def test_the_readme_table_links_into_results_on_github():
    results = "\n".join(
        [
            "# Results",
            "## Latest figures",
            "",
            "| work | record |",
            "| --- | --- |",
            "| vocab | [v](#vocab-model-t2t-vs-x) |",
            "",
            "## `vocab --model t2t` vs x",
        ]
    )
    assert figures.readme_table(results)[-1] == (
        "| vocab | [v](benchmarks/RESULTS.md#vocab---model-t2t-vs-x) |"
    )
    with pytest.raises(SystemExit, match="no such heading"):
        figures.readme_table(results.replace("#vocab-model-t2t-vs-x", "#gone"))
