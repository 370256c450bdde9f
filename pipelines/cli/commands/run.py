"""`nmtpipe run` on the command line: a workflow config → every step, cached."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from nmtpipe.pipelines.cli import logs
from nmtpipe.pipelines.cli.config_file import (
    EXAMPLES,
    add_settings,
    example_config,
    load_config,
)
from nmtpipe.pipelines.cli.main import show_step
from nmtpipe.pipelines.cli.rank import RANK_MODULE
from nmtpipe.pipelines.workflow import step_outputs
from nmtpipe.pipelines.workflow.run import run_workflow, summary_table, write_run_report
from nmtpipe.pipelines.workflow.run_config import STEPS, RunConfig
from nmtpipe.transforms.errors import ConfigError

DESCRIPTION = """\
Run prepare → vocab → encode → train → decode from one YAML config. Each step's section
holds the options of its command (`nmtpipe STEP --help`, with underscores); the
workflow connects the steps under `root` ({root}/prepared, vocab, encoded, checkpoints,
decoded). A step whose result is already there with the same inputs and options is
reported as cached and not run again; a changed option runs that step and those after
it. Ends with a table of what each step did and the path of the dataset's report,
{root}/encoded/report.html ({root}/prepared/report.html when it stops before encode;
see `nmtpipe report`).
"""
EPILOG = """\
examples:
  nmtpipe run --example
  nmtpipe run --example tatoeba
  nmtpipe run --example t2t-enzh --set data=/tmp/t2t_datagen --until prepare
  nmtpipe run corpus.yaml --until encode
  nmtpipe run corpus.yaml --from train
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", metavar="CONFIG", help="a workflow config (YAML)")
    parser.add_argument("--example", nargs="?", const="example", choices=EXAMPLES, metavar="NAME",
                        help="a bundled config: example (the five-minute demo; the default), "
                        "tatoeba (the 30-minute recipe) or t2t-enzh (T2T's translate_enzh "
                        "inputs, read from the archives in --set data=DIR)")  # fmt: skip
    add_settings(parser)
    parser.add_argument(
        "--from", dest="first", choices=STEPS, default=STEPS[0], help="the first step to run"
    )
    parser.add_argument(
        "--until", dest="last", choices=STEPS, default=STEPS[-1], help="the last step to run"
    )


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    if bool(args.config) == bool(args.example):
        raise ConfigError("give a CONFIG file or --example")
    if STEPS.index(args.first) > STEPS.index(args.last):
        raise ConfigError(f"--from {args.first} comes after --until {args.last}")
    path = example_config(args.example) if args.example else args.config
    config = load_config(path, dict(args.set or []))
    shown: dict[str, list[dict[str, Any]]] = {}  # step → the results it showed

    def show(step: str, outcome: Any) -> None:
        shown.setdefault(step, []).append(show_step(step, outcome))

    results = run_workflow(
        config, args.first, args.last, logs.progress, show, not args.verbose, RANK_MODULE
    )
    steps = [
        {
            "step": r.step,
            "status": r.status,
            "seconds": round(r.seconds, 1),
            "figures": r.figures,
            "results": shown.get(r.step, []),
        }
        for r in results
    ]
    result: dict = {"steps": steps}
    report = summary_table(results)
    if any(r.step == "decode" and r.status in ("ran", "cached") for r in results):
        evaluations = step_outputs.evaluations(config)
        result["scores"] = dict(evaluations)
        report += "\n" + evaluation_report(config, evaluations)
    page = write_run_report(config)
    if page is not None:
        result["report"] = page
        report += f"\nreport: {page}"
    logs.show(args, logs.Shown(result, report))
    failed = results[-1]
    if failed.error is not None:
        line, code = logs.error_line(failed.step, failed.error, args.verbose)
        print(line, file=sys.stderr)
        return code
    return 0


def evaluation_report(
    config: RunConfig, evaluations: list[tuple[str, dict[str, Any]]], count: int = 5
) -> str:
    """Each test set's BLEU as sacreBLEU writes it, with its signature, then `count`
    translations of the test split to read."""
    lines = []
    for name, scores in evaluations:
        if "bleu_line" in scores:
            lines.append(f"{name} ({scores['sentences']:,} sentences): {scores['bleu_line']}")
            lines.append(f"    {scores['bleu_signature']}")
    lines.append(f"{count} translations of the {config.decode.split} split:")
    for record in step_outputs.examples(config, count):
        best = record["hypotheses"][0]["text"] if record["hypotheses"] else ""
        lines += [
            f"  source      {record['source']}",
            f"  reference   {record.get('reference', '')}",
            f"  hypothesis  {best}",
        ]
    return "\n".join(lines)
