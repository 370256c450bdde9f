"""The Airflow DAG, loaded from a dags folder and run once with `dag.test()`.

Runs where Airflow is installed: CI's own `.venv-airflow` (see `.ci/run`), with
NMTPIPE_PYTHON naming the Python that has nmtpipe. Elsewhere it is skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

pytest.importorskip("airflow.providers.apache.beam")

CHECKOUT = Path(__file__).parents[2]
PIPELINES = CHECKOUT / "pipelines"
DAG_FILE = CHECKOUT / "deploy" / "airflow" / "nmtpipe_refresh_dag.py"
RUN_ONCE = """
import json
from airflow.dag_processing.dagbag import DagBag
bag = DagBag(dag_folder={folder!r})
assert not bag.import_errors, bag.import_errors
dag = bag.get_dag("nmtpipe_refresh")
run = dag.test()
print(json.dumps({{ti.task_id: str(ti.state) for ti in run.get_task_instances()}}))
"""


def run_dag(env: dict[str, str], folder: Path) -> tuple[dict[str, str], str]:
    """Run the DAG once in a fresh interpreter: each task's final state, and the log."""
    done = subprocess.run(
        [sys.executable, "-c", RUN_ONCE.format(folder=str(folder))],
        env=env, capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stdout + done.stderr


def quick_example(root: Path, path: Path) -> Path:
    """The bundled example's data steps, with a training of a few updates (the DAG is
    under test here, not the model)."""
    doc = yaml.safe_load((PIPELINES / "example" / "example.yaml").read_text(encoding="utf-8"))
    doc["root"] = str(root)
    doc["train"] |= {"nproc": 1, "max_update": 10, "validate_interval_updates": 10,
                     "save_interval_updates": 10}  # fmt: skip
    doc["decode"] |= {"nproc": 1, "max_len_a": 0, "max_len_b": 6}
    del doc["evaluate"]
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return path


def test_the_dag_refreshes_the_bundled_example_once_then_finds_nothing_new(tmp_path):
    assert os.environ.get("NMTPIPE_PYTHON"), "set NMTPIPE_PYTHON to a Python with nmtpipe"
    dags = tmp_path / "dags"
    dags.mkdir()
    (dags / "nmtpipe_refresh.py").symlink_to(DAG_FILE)
    root = tmp_path / "runs" / "example"
    env = {
        **os.environ,
        "AIRFLOW_HOME": str(tmp_path / "airflow"),
        "AIRFLOW__CORE__DAGS_FOLDER": str(dags),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "NMTPIPE_CONFIG": str(quick_example(root, tmp_path / "example.yaml")),
    }
    migrate = [sys.executable, "-m", "airflow", "db", "migrate"]
    subprocess.run(migrate, env=env, check=True, capture_output=True, timeout=300)
    states, log = run_dag(env, dags)
    stages = ["prepare", "vocab", "encode", "publish", "train", "decode"]
    assert states == dict.fromkeys(stages, "success"), log[-3000:]
    assert "BeamHook" in log and "--until=prepare" in log  # the Beam provider ran the stage
    version = json.loads((root / "versions" / "000001" / "manifest.json").read_text())
    scores = json.loads((root / "translations" / "000001" / "scores.json").read_text())
    assert scores["sentences"] == version["splits"]["test"] > 600  # Tatoeba's test split
    assert (root / "versions" / "LATEST").read_text().strip() == "000001"
    # The next scheduled run finds nothing new: nothing is published, trained or decoded.
    states, log = run_dag(env, dags)
    assert set(states.values()) == {"success"}, log[-3000:]
    assert "unchanged: no input changed since version 000001" in log
    assert "already holds this model" in log and "already holds this translation" in log
    assert sorted(p.name for p in (root / "versions").iterdir()) == ["000001", "LATEST"]
