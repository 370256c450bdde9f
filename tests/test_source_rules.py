"""Rules on the source text that no linter checks: code says why in words, never by an
issue's number; Beam's private names are used only by the runtime that guards them
(`pipelines/beam`, whose internals `internals.py` checks before relying on them) and
its tests."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

from tests.test_layout import lint_imports

REPO = Path(__file__).resolve().parents[1]
CODE = ("pipelines", "transforms", "trainers", "scripts", "benchmarks", "tests", "nmtpipe")
# "issue 41", "issues 3 and 4", "(issue\n19)", "issue #7": a number the reader cannot follow.
ISSUE = re.compile(r"\bissues?[\s#]*\d", re.IGNORECASE)
# The runtime, and its tests: the only modules that may touch Beam's internals.
RUNTIME = (REPO / "pipelines" / "beam", REPO / "tests" / "pipelines" / "beam")


def _python_files() -> list[Path]:
    return sorted(
        path
        for folder in CODE
        for path in (REPO / folder).rglob("*.py")
        if ".work" not in path.parts and "__pycache__" not in path.parts
    )


def test_no_code_cites_an_issue_number():
    cited = []
    for path in _python_files():
        if path == Path(__file__):
            continue
        text = path.read_text(encoding="utf-8")
        for found in ISSUE.finditer(text):
            line = text.count("\n", 0, found.start()) + 1
            cited.append(f"{path.relative_to(REPO)}:{line}: {found.group(0)!r}")
    assert cited == []


def _beam_names(tree: ast.Module) -> set[str]:
    """The local names bound to Beam's modules or objects by the module's imports."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names
                      if a.name.split(".")[0] == "apache_beam"}  # fmt: skip
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("apache_beam"):
            names |= {a.asname or a.name for a in node.names}
    return names


def private_beam_uses(source: str) -> list[str]:
    """Where `source` uses a private name of Beam's: imports one (`from apache_beam...
    import _x`, `import apache_beam._x`) or reads one off a name Beam's imports bound
    (`core._x`, `FnApiRunner._x`, `data_plane._Channel.x`)."""
    tree = ast.parse(source)
    beam = _beam_names(tree)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("apache_beam"):
            parts = node.module.split(".") + [a.name for a in node.names]
            found += [f"{node.lineno}: {node.module}.{p}" for p in parts if p.startswith("_")]
        elif isinstance(node, ast.Import):
            found += [f"{node.lineno}: {a.name}" for a in node.names
                      if a.name.startswith("apache_beam") and "._" in a.name]  # fmt: skip
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_"):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in beam and not node.attr.startswith("__"):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
    return found


def test_the_check_finds_private_names_in_every_form():
    source = (
        "import apache_beam as beam\n"
        "import apache_beam._private\n"
        "from apache_beam.options.pipeline_options import _BeamArgumentParser\n"
        "from apache_beam.runners.worker import data_plane\n"
        "from apache_beam.transforms import core\n"
        "x = core._private_function\n"
        "y = data_plane._GrpcDataChannel.input_elements\n"
        "z = beam.Map.__name__, beam.Map, self._mine\n"
    )
    assert private_beam_uses(source) == [
        "2: apache_beam._private",
        "3: apache_beam.options.pipeline_options._BeamArgumentParser",
        "6: core._private_function",
        "7: data_plane._GrpcDataChannel",
    ]


def test_only_the_runtime_uses_beams_private_names():
    used = []
    for path in _python_files():
        if any(room in path.parents for room in RUNTIME) or path == Path(__file__):
            continue
        used += [f"{path.relative_to(REPO)}:{u}" for u in private_beam_uses(path.read_text())]
    # A benchmark may time Beam's private stages; nothing shipped or tested relies on them.
    allowed = {"benchmarks/data/profile_stages.py"}
    assert [u for u in used if u.split(":")[0] not in allowed] == []


def test_a_runner_import_outside_the_runtime_breaks_the_build(tmp_path):
    checkout = tmp_path / "checkout"
    for name in ("nmtpipe", "pipelines", "transforms", "trainers", ".ci"):
        shutil.copytree(REPO / name, checkout / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", checkout)
    module = checkout / "pipelines" / "workflow" / "steps" / "beam_steps.py"
    with open(module, "a", encoding="utf-8") as f:
        f.write("\nfrom apache_beam.runners.worker import sdk_worker_main  # the runtime's\n")
    result = lint_imports(checkout)
    assert result.returncode != 0
    assert "only the runtime (pipelines.beam) imports Beam's runners BROKEN" in result.stdout
