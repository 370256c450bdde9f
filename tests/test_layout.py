"""The layout's rules hold: imports run one way (import-linter), torch jobs load no Beam,
a folder of code holds at most twelve modules, the benchmarks import no circle."""

from __future__ import annotations

import ast
import graphlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def lint_imports(checkout: Path) -> subprocess.CompletedProcess:
    """`.ci/lint-imports` of `checkout`, with this interpreter's import-linter."""
    return subprocess.run(
        [str(checkout / ".ci" / "lint-imports")],
        env={"PYTHON": sys.executable, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_tree_keeps_every_import_contract():
    result = lint_imports(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_an_upward_import_breaks_the_build(tmp_path):
    checkout = tmp_path / "checkout"
    for name in ("nmtpipe", "pipelines", "transforms", "trainers", ".ci"):
        shutil.copytree(REPO / name, checkout / name, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(REPO / "pyproject.toml", checkout)
    with open(checkout / "transforms" / "text" / "normalize.py", "a", encoding="utf-8") as f:
        f.write("\nimport nmtpipe.pipelines.workflow.run  # what transforms may never do\n")
    result = lint_imports(checkout)
    assert result.returncode != 0
    assert "pipelines above trainers above transforms BROKEN" in result.stdout
    assert "nmtpipe.transforms.text.normalize -> nmtpipe.pipelines.workflow.run" in result.stdout


def test_the_torch_jobs_load_no_beam():
    """Nor does the torch side of the step protocol: a torch job's step is planned and
    committed where Beam is never loaded."""
    script = (
        "import sys\n"
        "import nmtpipe.trainers.generate.decode, nmtpipe.trainers.train.train\n"
        "import nmtpipe.trainers.generate.translate, nmtpipe.trainers.train.launch\n"
        "import nmtpipe.pipelines.cli.rank\n"
        "import nmtpipe.pipelines.workflow.steps.protocol\n"
        "import nmtpipe.pipelines.workflow.steps.torch_steps\n"
        "import nmtpipe.pipelines.workflow.train, nmtpipe.pipelines.workflow.decode\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'apache_beam')\n"
        "assert not loaded, loaded[:5]\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr


def test_the_job_configs_and_the_launcher_load_no_torch():
    """A workflow config is read and checked before any job starts: a job's torch code
    is imported by its `run`."""
    script = (
        "import sys\n"
        "import nmtpipe.trainers.train.train_config, nmtpipe.trainers.generate.decode_config\n"
        "import nmtpipe.trainers.train.launch\n"
        "assert 'torch' not in sys.modules\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert result.returncode == 0, result.stderr


def test_every_room_but_export_is_kept_from_the_export_extra():
    """The contract that keeps transformers and ctranslate2 in nmtpipe.trainers.export
    names rooms, not modules: every room of the package but that one, a new room too."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    (contract,) = [
        c for c in contracts if c.get("forbidden_modules") == ["transformers", "ctranslate2"]
    ]
    trainers = {f"nmtpipe.trainers.{p.parent.name}" for p in REPO.glob("trainers/*/__init__.py")}
    rooms = {"nmtpipe.pipelines", "nmtpipe.transforms"} | trainers
    assert set(contract["source_modules"]) == rooms - {"nmtpipe.trainers.export"}
    assert "ignore_imports" not in contract


# The code's folders: beyond twelve modules, a folder holds rooms that want names.
FOLDERS = ("nmtpipe", "pipelines", "transforms", "trainers", "scripts", "benchmarks")
MOST_MODULES = 12


def test_no_folder_of_code_holds_more_than_twelve_modules():
    crowded = {}
    for top in FOLDERS:
        for folder in [REPO / top, *(REPO / top).rglob("*")]:
            if folder.is_dir() and "__pycache__" not in folder.parts:
                modules = [p for p in folder.glob("*.py") if p.name != "__init__.py"]
                if len(modules) > MOST_MODULES:
                    crowded[str(folder.relative_to(REPO))] = len(modules)
    assert crowded == {}


def _script_imports(path: Path, names: set[str]) -> set[str]:
    """The scripts of `names` that the script at `path` imports, at any depth."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found & names - {path.stem}


def test_the_benchmarks_import_each_other_in_no_circle():
    """The benchmark scripts import each other by name (they run as `python
    benchmarks/ROOM/NAME.py`, not as a package, so import-linter cannot see them)."""
    scripts = {path.stem: path for path in (REPO / "benchmarks").glob("*/*.py")}
    graph = {name: _script_imports(path, set(scripts)) for name, path in scripts.items()}
    assert any(graph.values())  # the check sees their imports
    list(graphlib.TopologicalSorter(graph).static_order())  # CycleError names a circle
