"""The range of apache-beam versions nmtpipe supports, as pyproject.toml states it (the
range CI tests: the whole suite on the newest, the Beam tests on the lowest; see
docs/development.md, "The Beam range").

    python scripts/beam_range.py lowest          # the lowest version, e.g. 2.70.0
    python scripts/beam_range.py check 2.70.0    # this Python's Beam is that version
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import tomllib

PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"
# "apache-beam>=2.70.0,<2.78" and "apache-beam[gcp]>=2.70.0,<2.78": lowest, and the bound.
REQUIREMENT = re.compile(r"^apache-beam(?:\[[\w,]+\])?>=([\d.]+),<([\d.]+)$")


def ranges(pyproject: Path = PYPROJECT) -> set[tuple[str, str]]:
    """Every (lowest, bound) pyproject.toml states for Beam, its extras' included."""
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    extras = project.get("optional-dependencies", {}).values()
    requirements = [*project["dependencies"], *(r for extra in extras for r in extra)]
    found = set()
    for requirement in requirements:
        if requirement.startswith("apache-beam"):
            match = REQUIREMENT.match(requirement.replace(" ", ""))
            if match is None:
                raise SystemExit(f"pyproject.toml: {requirement!r} is not apache-beam>=LOW,<HIGH")
            found.add(match.groups())
    return found


def lowest(pyproject: Path = PYPROJECT) -> str:
    (found,) = ranges(pyproject)  # (one range: a test checks the extras agree)
    return found[0]


def main(argv: list[str]) -> None:
    if argv == ["lowest"]:
        print(lowest())
    elif len(argv) == 2 and argv[0] == "check":
        import apache_beam

        if apache_beam.__version__ != argv[1]:
            raise SystemExit(f"apache-beam {apache_beam.__version__} here, not {argv[1]}")
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
