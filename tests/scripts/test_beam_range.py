"""pyproject.toml states one apache-beam range, the one CI tests (scripts/beam_range.py
reads its lowest version for .ci/run)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))
beam_range = importlib.import_module("beam_range")


def test_one_range_for_beam_and_its_extras():
    (found,) = beam_range.ranges()
    assert beam_range.lowest() == found[0]


def test_a_requirement_without_both_bounds_is_refused(tmp_path):
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        '[project]\ndependencies = ["apache-beam>=2.70"]\n[project.optional-dependencies]\n'
    )
    with pytest.raises(SystemExit, match="not apache-beam>=LOW,<HIGH"):
        beam_range.ranges(pyproject)


def test_the_installed_beam_is_in_the_range():
    import apache_beam
    from packaging.version import Version

    (low, bound) = beam_range.ranges().pop()
    assert Version(low) <= Version(apache_beam.__version__) < Version(bound)
