"""Running a training or decoding job: in this process, or on N processes of this
machine under `torchrun --standalone` (`--nproc N`).

Ranks receive the job's checked config, pickled to a local file each of them reads
(`python -m nmtpipe.trainers.loop.launch FILE`), not a command line to parse again. A
rank's failure is one line, as on the command line; the job's result is read back from
where the first rank committed it (`train_summary.json`, `scores.json`).
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import tempfile
from typing import Any

from nmtpipe.trainers.loop.decode_config import DecodeConfig
from nmtpipe.trainers.loop.run_files import SCORES, SUMMARY
from nmtpipe.trainers.loop.train_config import TrainConfig
from nmtpipe.transforms.errors import NmtpipeError, error_line
from nmtpipe.transforms.storage import fsio

JobConfig = TrainConfig | DecodeConfig


def job_name(config: JobConfig) -> str:
    return "train" if isinstance(config, TrainConfig) else "decode"


def run_job(config: JobConfig, nproc: int = 1, verbose: bool = False) -> dict[str, Any]:
    """Run the job `config` describes on `nproc` local processes; its summary.

    In this process when `nproc` is 1 or when this process is already a torchrun rank
    (the job then spans the ranks torchrun started)."""
    if nproc <= 1 or "LOCAL_RANK" in os.environ:
        return _run_here(config, verbose)
    with tempfile.TemporaryDirectory(prefix="nmtpipe-job-") as folder:
        payload = os.path.join(folder, "job.pickle")
        with open(payload, "wb") as f:
            pickle.dump({"config": config, "verbose": verbose}, f)
        command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
                   f"--nproc_per_node={nproc}", "-m", __name__, payload]  # fmt: skip
        code = subprocess.run(command, check=False).returncode
    if code != 0:
        raise NmtpipeError(
            f"{job_name(config)} failed on {nproc} processes (torchrun exit {code}); "
            "the ranks' errors are above"
        )
    return result_of(config)


def _run_here(config: JobConfig, verbose: bool) -> dict[str, Any]:
    if isinstance(config, TrainConfig):
        from nmtpipe.trainers.loop.train import train

        return train(config)
    from nmtpipe.trainers.loop.decode import decode

    return decode(config, log=_progress if verbose else lambda _: None)


def _progress(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def result_of(config: JobConfig) -> dict[str, Any]:
    """The summary a finished job committed: training's `train_summary.json`, or
    decoding's `scores.json`."""
    if isinstance(config, TrainConfig):
        url = fsio.join(config.save_dir, SUMMARY)
    else:
        url = fsio.join(config.output, SCORES)
    return json.loads(fsio.read_bytes(url))


def is_main_rank() -> bool:
    return int(os.environ.get("RANK", "0")) == 0


def finish() -> int:
    """End a rank whose work is written and whose process group is gone. Under torchrun,
    skip the interpreter's teardown, where gloo's threads sometimes abort the process
    ("terminate called without an active exception"), which torchrun would report as a
    failed job."""
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)
    return 0


def _rank_main(payload: str) -> int:
    with open(payload, "rb") as f:
        job = pickle.load(f)
    config, verbose = job["config"], job["verbose"]
    try:
        _run_here(config, verbose)
    except Exception as exc:
        line, code = error_line(job_name(config), exc, verbose)
        print(line, file=sys.stderr, flush=True)
        return code
    return finish()


if __name__ == "__main__":
    sys.exit(_rank_main(sys.argv[1]))
