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
from nmtpipe.pipelines.workflow.decode import examples
from nmtpipe.pipelines.workflow.run import (
    evaluations,
    places,
    run_workflow,
    stage_names,
    summary_table,
    write_run_report,
)
from nmtpipe.pipelines.workflow.steps.protocol import Evaluation, Step
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.storage.commit import StepOutcome

DESCRIPTION = """\
Run prepare → vocab → encode → train → decode from one YAML config. Each step's section
holds the options of its command (`nmtpipe STEP --help`, with underscores); the
workflow connects the steps under `root` ({root}/prepared, vocab, encoded, checkpoints,
decoded). A step whose result is already there with the same inputs and options is
reported as cached and not run again; a changed option runs that step and those after
it. Ends with a table of what each step did, the test sets' scores, and where to find
the model, its learning curves, the translations and the dataset's report
({root}/encoded/report.html; {root}/prepared/report.html when it stops before encode;
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
                        help="a bundled config: example (the demo, about 3 minutes on two CPU "
                        "cores; the default), tatoeba (the recipe, about 18 minutes), "
                        "tatoeba-gpu (the recipe on GPUs) or t2t-enzh (T2T's translate_enzh "
                        "inputs, read from the archives in --set data=DIR)")  # fmt: skip
    add_settings(parser)
    names = stage_names()
    parser.add_argument(
        "--from", dest="first", choices=names, default=names[0], help="the first step to run"
    )
    parser.add_argument(
        "--until", dest="last", choices=names, default=names[-1], help="the last step to run"
    )


def run(args: argparse.Namespace, beam_args: list[str]) -> int:
    if bool(args.config) == bool(args.example):
        raise ConfigError("give a CONFIG file or --example")
    names = stage_names()
    if names.index(args.first) > names.index(args.last):
        raise ConfigError(f"--from {args.first} comes after --until {args.last}")
    path = example_config(args.example) if args.example else args.config
    config = load_config(path, dict(args.set or []))
    shown: dict[str, list[dict[str, Any]]] = {}  # stage → the results its steps showed

    def show(stage: str, step: Step, outcome: StepOutcome) -> None:
        shown.setdefault(stage, []).append(show_step(step.command, outcome))

    results = run_workflow(
        config, args.first, args.last, logs.progress, show, not args.verbose, RANK_MODULE
    )
    steps = [
        {
            "step": r.name,
            "status": r.status,
            "seconds": round(r.seconds, 1),
            "figures": r.figures,
            "results": shown.get(r.name, []),
        }
        for r in results
    ]
    result: dict = {"steps": steps}
    report = summary_table(results)
    scored = evaluations(results)
    if scored:
        result["scores"] = {evaluation.name: evaluation.scores for evaluation in scored}
        report += "\n" + evaluation_report(scored)
    page = write_run_report(results)
    if page is not None:
        result["report"] = page
    where = places(results, page)
    if where:
        result["places"] = where
        report += "\n" + places_block(where)
    logs.show(args, logs.Shown(result, report))
    failed = results[-1]
    if failed.error is not None:
        line, code = logs.error_line(failed.name, failed.error, args.verbose)
        print(line, file=sys.stderr)
        return code
    return 0


def places_block(where: dict[str, str]) -> str:
    """The block `run` ends with: where the model, its curves, the translations and the
    dataset report are, one line each."""
    width = max(map(len, where))
    return "\n".join(
        ["where things are:", *(f"  {what:<{width}}  {url}" for what, url in where.items())]
    )


def evaluation_report(scored: list[Evaluation], count: int = 5) -> str:
    """Each test set's BLEU as sacreBLEU writes it, with its signature, then `count`
    translations of the first set (the test split) to read."""
    lines = []
    for evaluation in scored:
        scores = evaluation.scores
        if "bleu_line" in scores:
            name = evaluation.name
            lines.append(f"{name} ({scores['sentences']:,} sentences): {scores['bleu_line']}")
            lines.append(f"    {scores['bleu_signature']}")
    lines.append(f"{count} translations of the {scored[0].name} split:")
    for record in examples(scored[0], count):
        best = record["hypotheses"][0]["text"] if record["hypotheses"] else ""
        lines += [
            f"  source      {record['source']}",
            f"  reference   {record.get('reference', '')}",
            f"  hypothesis  {best}",
        ]
    return "\n".join(lines)
