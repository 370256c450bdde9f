"""Beam's processes freeze the garbage collector at exit: the `nmtpipe` command's for the
commands that run Beam, every worker's through its plugins; importing nmtpipe's Beam
functions alone freezes nothing."""

from __future__ import annotations

import subprocess
import sys

import pytest

from nmtpipe.pipelines.beam import exit_freeze
from nmtpipe.pipelines.beam.options import WORKER_PLUGINS, pipeline_options

# Registered first, so it runs last: after any handler registered later.
_PROBE = """
import atexit, gc, os
atexit.register(lambda: os.write(1, f"frozen {{gc.get_freeze_count() > 0}}".encode()))
{body}
print("frozen while working", gc.get_freeze_count() > 0, flush=True)
"""


def frozen_at_exit(body: str) -> str:
    """What a process running `body` says of its heap while working and at its exit."""
    done = subprocess.run(
        [sys.executable, "-c", _PROBE.format(body=body)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-2] + " / " + done.stdout.splitlines()[-1]


def test_a_worker_freezes_its_heap_only_when_it_exits():
    """A Beam worker imports the plugins its pipeline options name at its start, as
    Beam's own `sdk_worker_main` does here."""
    assert (exit_freeze.__name__,) == WORKER_PLUGINS
    body = (
        "from apache_beam.options.pipeline_options import SetupOptions\n"
        "from apache_beam.runners.worker.sdk_worker_main import _import_beam_plugins\n"
        "from nmtpipe.pipelines.beam.options import pipeline_options\n"
        "options = pipeline_options(['--beam_plugins=json'])\n"
        "_import_beam_plugins(options.view_as(SetupOptions).beam_plugins)\n"
    )
    assert frozen_at_exit(body) == "frozen while working False / frozen True"


def test_the_plugins_go_with_every_runner_and_keep_the_users_own():
    from apache_beam.options.pipeline_options import SetupOptions

    for args in ([], ["--runner=PortableRunner", "--job_endpoint=localhost:1"]):
        assert pipeline_options(args).view_as(SetupOptions).beam_plugins == list(WORKER_PLUGINS)
    mine = pipeline_options(["--beam_plugins=json"]).view_as(SetupOptions).beam_plugins
    assert mine == ["json", *WORKER_PLUGINS]


def test_importing_the_beam_functions_freezes_nothing():
    body = "import nmtpipe.transforms.beam.encode, nmtpipe.transforms.beam.prepare\n"
    assert frozen_at_exit(body) == "frozen while working False / frozen False"


@pytest.mark.parametrize(("command", "frozen"), [("prepare", True), ("average", False)])
def test_the_command_line_freezes_at_exit_for_the_commands_that_run_beam(command, frozen):
    body = f"from nmtpipe.pipelines.cli.main import main\nmain([{command!r}, '--no-such-option'])\n"
    assert frozen_at_exit(body) == f"frozen while working False / frozen {frozen}"
