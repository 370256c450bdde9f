"""Beam imported for the command line, without the integrations nmtpipe never uses."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.helpers import MULTI_PROCESS, write_pair

# In a fresh interpreter: Beam works, the unused libraries were not loaded with it, nor
# by pyarrow's conversions later, and they import normally afterwards; pyarrow's pandas
# conversions still work.
CHECK = """
import importlib.util, sys
import pyarrow as pa
from nmtpipe.pipelines.beam.lean_import import UNUSED, import_beam
beam = import_beam()
assert pa.array(["x"]).to_pylist() == ["x"] and pa.table({"a": [1]}).num_rows == 1
loaded = [name for name in UNUSED if name in sys.modules]
assert not loaded, loaded
assert beam.Create([1]).label == "Create" and import_beam() is beam
for name in UNUSED:
    if importlib.util.find_spec(name) is not None:
        __import__(name)
if importlib.util.find_spec("pandas") is not None:
    frame = pa.table({"a": [1, 2], "s": ["x", "y"]}).to_pandas()
    assert frame["s"].tolist() == ["x", "y"]
    assert pa.Table.from_pandas(frame).column("a").to_pylist() == [1, 2]
print("ok")
"""


def test_beam_without_unused_integrations():
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


def test_a_small_prepare_does_not_import_torch_and_memoizes_beams_introspection(tmp_path):
    corpus = tmp_path / "c"
    corpus.with_suffix(".en").write_text("Hello there.\nGood night.\n" * 20)
    corpus.with_suffix(".zh").write_text("你好。\n晚安。\n" * 20)
    code = (
        "import sys\n"
        "from nmtpipe.pipelines.cli.main import main\n"
        f"assert main(['prepare', '-s', 'en', '-t', 'zh', '--trainpref', {str(corpus)!r},"
        f" '--output', {str(tmp_path / 'out')!r}]) == 0\n"
        "assert 'torch' not in sys.modules\n"
        "from apache_beam.transforms import core\n"
        "assert hasattr(core.get_function_args_defaults, 'memoizes')  # graph_memo installed\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "on FnApiRunner (in-process, 0.0 MB input)" in done.stderr


# Beam without its GCP extras, as `pip install nmtpipe` gives it: importing Beam then
# warns on the root logger that apitools is missing, in every process that imports it.
_NO_APITOOLS = """
import importlib.abc, sys
class _NoApitools(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] == "apitools":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _NoApitools())
"""


@pytest.mark.parametrize(
    ("args", "first"),
    [
        (["--help"], "usage: nmtpipe prepare"),
        (["--bogus"], "nmtpipe prepare: error: unknown option --bogus"),
        ([*MULTI_PROCESS], "preparing 1 input(s) into"),
    ],
    ids=["help", "error", "forked workers"],
)
def test_beams_import_warnings_are_not_shown(tmp_path, args, first):
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_NO_APITOOLS)
    corpus = write_pair(tmp_path / "c", ["Hello there.", "Good night."], ["你好。", "晚安。"])
    path = os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "nmtpipe", "prepare", "-s", "en", "-t", "zh", "--trainpref",
         str(corpus), "--output", str(tmp_path / "out"), *args],
        env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True, timeout=300,
        check=False,
    )  # fmt: skip
    shown = done.stdout if args == ["--help"] else done.stderr
    first_line = re.sub(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", "", shown.splitlines()[0])
    assert first_line.startswith(first), done.stderr  # (after the time, in a log)
    assert "apitools" not in done.stderr
