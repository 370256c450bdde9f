"""Airflow: refresh a corpus on a schedule with `nmtpipe refresh`, stage by stage.

Put this file (or a link to it) in Airflow's dags folder; it is a deployment example of
this checkout, not part of the installed `nmtpipe` package. It reads, from the
environment of the scheduler and workers:

    NMTPIPE_CONFIG    the workflow config, a local file (default: nmtpipe's bundled example)
    NMTPIPE_PYTHON    a Python that has nmtpipe installed (default: python3); Airflow
                      itself need not share its environment
    NMTPIPE_SCHEDULE  a cron expression or preset (default: @daily)
    NMTPIPE_WORKDIR   where relative paths in the config point (default: the current
                      directory when the DAG is parsed); Airflow runs tasks elsewhere

The Beam stages (prepare, vocab, encode) are Apache Beam provider operators
(`BeamRunPythonPipelineOperator`) on the runner the config's `beam:` list names;
publishing, training (torchrun when the config's train section sets nproc) and
decoding are tasks of their own. Each stage is `nmtpipe refresh --until STAGE`: its
outputs are content-addressed, so a retried task or a re-run redoes only what is not
finished, and the lock keeps a manual refresh from publishing at the same time.
Parsing this file imports only Airflow and PyYAML, as a DAG file should.
"""

from __future__ import annotations

import os
import shlex
from datetime import datetime
from typing import Any

import yaml
from airflow.providers.apache.beam.operators.beam import BeamRunPythonPipelineOperator
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG

# realpath: the dags folder usually holds a link to this file (deploy/airflow/ of a checkout).
_CHECKOUT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))
EXAMPLE = os.path.join(_CHECKOUT, "pipelines", "example", "example.yaml")
CONFIG = os.environ.get("NMTPIPE_CONFIG", EXAMPLE)
PYTHON = os.environ.get("NMTPIPE_PYTHON", "python3")
SCHEDULE = os.environ.get("NMTPIPE_SCHEDULE", "@daily")
WORKDIR = os.environ.get("NMTPIPE_WORKDIR", os.getcwd())
# `python -m` it: `nmtpipe refresh` with --key=value options
ENTRY = "nmtpipe.pipelines.cli.commands.refresh"


def beam_options(config_path: str) -> tuple[str, dict[str, Any]]:
    """The runner and the other Beam options of a config's `beam:` list (the
    operator passes them back as --key=value; a bare --flag is a switch)."""
    with open(config_path, encoding="utf-8") as f:
        listed = (yaml.safe_load(f) or {}).get("beam") or []
    runner, options = "DirectRunner", {}
    for item in listed:
        key, sep, value = item.removeprefix("--").partition("=")
        if key == "runner":
            runner = value
        else:
            options[key] = value if sep else True
    return runner, options


def refresh_command(*flags: str) -> str:
    return shlex.join([PYTHON, "-m", ENTRY, f"--config={CONFIG}", f"--workdir={WORKDIR}", *flags])


def build_dag(dag_id: str = "nmtpipe_refresh") -> DAG:
    runner, options = beam_options(CONFIG)
    with DAG(
        dag_id,
        schedule=SCHEDULE,
        start_date=datetime(2026, 1, 1),
        catchup=False,
        max_active_runs=1,
        tags=["nmtpipe"],
        doc_md=__doc__,
    ) as dag:
        beam_stages = [
            BeamRunPythonPipelineOperator(
                task_id=stage,
                py_file=ENTRY,
                py_options=["-m"],
                py_interpreter=PYTHON,
                runner=runner,
                pipeline_options={"config": CONFIG, "workdir": WORKDIR, "until": stage, **options},
            )
            for stage in ("prepare", "vocab", "encode")
        ]
        beam_flags = [f"--runner={runner}"] + [
            f"--{k}" if v is True else f"--{k}={v}" for k, v in options.items()
        ]
        publish = BashOperator(task_id="publish", bash_command=refresh_command(*beam_flags))
        train = BashOperator(task_id="train", bash_command=refresh_command("--train"))
        decode = BashOperator(task_id="decode", bash_command=refresh_command("--decode"))
        prepare, vocab, encode = beam_stages
        prepare >> vocab >> encode >> publish >> train >> decode
    return dag


dag = build_dag()
