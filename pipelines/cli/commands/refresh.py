"""`nmtpipe refresh` on the command line: a workflow config → the next dataset version."""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys

from nmtpipe.pipelines.cli import logs
from nmtpipe.pipelines.cli.config_file import add_settings, example_config, load_config
from nmtpipe.pipelines.cli.main import show_step
from nmtpipe.pipelines.cli.rank import RANK_MODULE
from nmtpipe.pipelines.workflow.refresh import latest
from nmtpipe.pipelines.workflow.refresh.refresh import UNTIL, RefreshResult, refresh
from nmtpipe.pipelines.workflow.steps.protocol import How, Step
from nmtpipe.pipelines.workflow.steps.runner import run_stages
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.storage.commit import StepOutcome

TAKES_BEAM = True  # options it does not know go to Beam (main.py)
DESCRIPTION = """\
Compare the raw inputs of a workflow config (the `nmtpipe run` YAML) with the last
published version under its root, prepare only the new and changed inputs, keep the
vocabulary unless the new data's tokens outside it pass refresh.drift_threshold,
encode what is not encoded yet, and publish {root}/versions/NNNNNN (immutable) with
{root}/versions/LATEST written last. Nothing changed: nothing is published. One
refresh runs at a time per root ({root}/versions/.lock); older versions stay readable
until retention (refresh.keep_versions) retires them.

  nmtpipe train --data {root}/versions/LATEST ...   trains on the newest version
"""
EPILOG = """\
config (besides the sections of nmtpipe run):
  refresh:
    drift_threshold: 0.05   a new vocabulary past this share of tokens it cannot spell
    keep_versions: 10       versions kept (0: all); unneeded parts go with them
    checksum: false         identify inputs by sha256 instead of size + version
    train_updates: 1000     with --train: updates added per new version
    in_process_bytes: 50331648  local runners: new inputs up to this size are
                            processed in this process (no worker start-up;
                            unset: 48 MiB, every command's threshold)

examples:
  nmtpipe refresh corpus.yaml
  nmtpipe refresh corpus.yaml --train --decode
  nmtpipe refresh corpus.yaml --runner=DataflowRunner --project=P --region=R ...
  0 3 * * * cd /srv/nmt && .venv/bin/nmtpipe refresh corpus.yaml --train  # cron
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", metavar="CONFIG", help="a workflow config (YAML)")
    parser.add_argument(
        "--config",
        dest="config_option",
        metavar="CONFIG",
        help="the same as CONFIG, for launchers that pass only --key=value options "
        "(Airflow's Beam operator)",
    )
    parser.add_argument("--example", action="store_true", help="the bundled example config")
    add_settings(parser)
    parser.add_argument(
        "--workdir",
        metavar="DIR",
        help="run in DIR, against which the config's relative paths are resolved "
        "(schedulers start commands in directories of their own)",
    )
    parser.add_argument(
        "--until",
        choices=UNTIL,
        default=UNTIL[-1],
        help="stop after this stage without publishing (Airflow runs the stages as tasks)",
    )
    parser.add_argument(
        "--train",
        action="store_true",
        help="then continue training on the latest version (the config's train section)",
    )
    parser.add_argument(
        "--decode",
        action="store_true",
        help="then translate the latest version's test split with its model, into "
        "{root}/translations/NNNNNN (the config's decode section)",
    )
    parser.add_argument(
        "--break-lock",
        action="store_true",
        help="take over the lock of a refresh that died on another machine",
    )


def report(result: RefreshResult, root: str) -> str:
    """The lines a user reads after a refresh."""
    if result.status == "unchanged":
        return f"unchanged: no input changed since version {result.number:06d} ({root})"
    head = {
        "published": f"published {root}/versions/{result.number or 0:06d} "
        f"in {result.seconds:.1f} s",
    }.get(result.status, f"stopped after {result.status} (nothing published)")
    lines = [head]
    for name in ("added", "changed", "removed"):
        found = getattr(result, name)
        if found:
            lines.append(f"  {name:<8} {len(found)}: {', '.join(found)}")
    lines.append(f"  kept     {result.kept} input(s) as they were")
    if result.options_changed:
        lines.append("  options  the vocab or encode options changed")
    lines.append(f"  prepared {result.prepared} part(s), encoded {result.encoded}")
    if result.vocab:
        drift = ", ".join(f"{side} {share:.2%}" for side, share in result.drift.items())
        state = "new" if result.vocab_rebuilt else "kept"
        lines.append(f"  vocab    {state} {result.vocab}" + (f" (drift {drift})" if drift else ""))
    if result.splits:
        lines.append("  pairs    " + "  ".join(f"{s} {n:,}" for s, n in result.splits.items()))
    if result.retired:
        lines.append(f"  retired  {', '.join(result.retired)}")
    if result.report:
        lines.append(f"  report   {result.report}")
    return "\n".join(lines)


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    """Beam options on the command line are added to the config's `beam:` list."""
    given = [c for c in (args.config, args.config_option) if c]
    if len(given) + args.example != 1:
        raise ConfigError("give one CONFIG file or --example")
    if (args.train or args.decode) and args.until != UNTIL[-1]:
        raise ConfigError("--train and --decode need a published version; drop --until")
    path = example_config() if args.example else given[0]
    path = path if "://" in path else os.path.abspath(path)
    if args.workdir:
        os.chdir(args.workdir)
    config = load_config(path, dict(args.set or []))
    config = dataclasses.replace(config, beam=(*config.beam, *beam_args))
    done = refresh(config, args.until, args.break_lock, logs.progress, not args.verbose)
    logs.tell(report(done, config.root))
    result = dataclasses.asdict(done)  # and the results of --train and --decode, as they end

    def show(stage: str, step: Step, outcome: StepOutcome) -> None:
        result[stage] = show_step(step.command, outcome)

    wanted = [(args.train, latest.TRAIN), (args.decode, latest.DECODE)]
    how = How(config.beam, log=logs.progress, quiet=not args.verbose, rank_module=RANK_MODULE)
    try:
        stages = [stage for asked, stage in wanted if asked]
        failed = [r for r in run_stages(stages, config, how, show=show) if r.error is not None]
        if failed:
            raise failed[0].error
    finally:  # what was published is a result even when training on it fails
        logs.result(args, result)
    return 0


if __name__ == "__main__":  # a file Airflow's BeamRunPythonPipelineOperator can run
    from nmtpipe.pipelines.cli.main import entry

    sys.exit(entry(["refresh", *sys.argv[1:]]))
