"""Where the wall time of `nmtpipe prepare` goes, stage by stage, in one process.

The stages are those `nmtpipe prepare` runs (`pipelines/cli/main.py`,
`pipelines/workflow/prepare.py`), timed one by one: importing Beam, building the
command's parser (which imports its module), planning (resolving and
fingerprinting the inputs), building the Beam graph, translating it to Beam's runner
protobuf, running it (the runner translates it again, then fuses and runs the stages),
committing. Add runner flags to time another mode, as `nmtpipe prepare` takes them.
`--floor` times, after the same start, the smallest pipeline instead (Create, Map,
GroupByKey, Map over ten elements): what any Beam run costs in this process.
`--beam-stages` also times each fused stage the FnApiRunner runs, by the composites it
holds: where the run's time goes (the stages run one after another).

    python benchmarks/data/profile_stages.py --example
    python benchmarks/data/profile_stages.py --example --floor
    python benchmarks/data/profile_stages.py --trainpref benchmarks/.work/longtail-1000000 \\
        --beam-stages --direct_running_mode=multi_processing --direct_num_workers=2
"""

from __future__ import annotations

import argparse
import itertools
import re
import sys
import tempfile
import time


def _smallest(beam):
    """Create, Map, GroupByKey, Map: the fewest stages a pipeline with a shuffle has."""

    @beam.ptransform_fn
    def smallest(pbegin):
        return (
            pbegin
            | beam.Create(range(10))
            | beam.Map(lambda x: (x % 2, x))
            | beam.GroupByKey()
            | beam.MapTuple(lambda key, values: (key, sum(values)))
        )

    return smallest()


def _time_beam_stages(timed: list[tuple[str, float]]) -> None:
    """Append (stage, seconds) to `timed` for each fused stage the FnApiRunner (and
    nmtpipe's LocalRunner, its subclass) runs: its private `_execute_bundle`, wrapped,
    as only a benchmark may."""
    from apache_beam.runners.portability.fn_api_runner import fn_runner

    execute = fn_runner.FnApiRunner._execute_bundle

    def timed_execute(self, context, bundle, data):
        start = time.perf_counter()
        try:
            return execute(self, context, bundle, data)
        finally:
            timed.append((_composites(bundle.stage.name), time.perf_counter() - start))

    fn_runner.FnApiRunner._execute_bundle = timed_execute


def _composites(stage: str) -> str:
    """A fused stage's name (its transforms' full labels joined) as the composites
    under `Prepare` it holds, in order: "CleanChunks", "CountTokens/WriteCounts"."""
    parts = re.findall(r"Prepare[/-]([A-Za-z]+)(?:[/-]([A-Za-z]+))?", stage)
    names = [a if a in ("ListInputs", "Gather") or not b else f"{a}/{b}" for a, b in parts]
    return ", ".join(dict.fromkeys(names)) or stage[:60]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--example", action="store_true", help="the bundled Tatoeba corpus")
    parser.add_argument("--trainpref", help="a generated corpus (PREFIX.en, PREFIX.zh)")
    parser.add_argument("--floor", action="store_true", help="the smallest pipeline instead")
    parser.add_argument("--beam-stages", action="store_true", help="time each fused stage")
    args, beam_flags = parser.parse_known_args()
    marks = [("start", time.perf_counter())]

    def mark(stage: str) -> None:
        marks.append((stage, time.perf_counter()))

    from nmtpipe.pipelines.cli import logs

    logs.configure(verbose=False)
    from nmtpipe.pipelines.beam.lean_import import import_beam

    beam = import_beam()
    mark("import Beam")
    stages: list[tuple[str, float]] = []
    if args.beam_stages:
        _time_beam_stages(stages)
    from nmtpipe.pipelines.cli import main as cli

    command = cli.build_parser("prepare")
    mark("the command's module and parser")
    from nmtpipe.pipelines.beam.options import describe, new_pipeline, pipeline_options
    from nmtpipe.pipelines.cli.commands.prepare import config_from_args
    from nmtpipe.pipelines.workflow.prepare import PrepareStep
    from nmtpipe.pipelines.workflow.prepare_plan import make_plan
    from nmtpipe.pipelines.workflow.steps.protocol import commit_step
    from nmtpipe.transforms.formats.step_summary import read_summary

    data = (
        ["--example"] if args.example else ["-s", "en", "-t", "zh", "--trainpref", args.trainpref]
    )
    with tempfile.TemporaryDirectory() as out:
        parsed, beam_args = command.parse_known_args(
            ["prepare", *data, "--output", out, *beam_flags]
        )
        plan = make_plan(config_from_args(parsed))
        options = pipeline_options(beam_args, plan.input_bytes)
        step = PrepareStep(plan)
        mark("plan")
        pipeline = new_pipeline(options)  # on the runner `nmtpipe prepare` uses
        _ = pipeline | "Prepare" >> (_smallest(beam) if args.floor else step.graph(options))
        mark("build the graph")
        pipeline.to_runner_api()
        mark("graph to runner protobuf")
        pipeline.run().wait_until_finish()
        mark("run (protobuf again, fuse, stages)")
        step.release()
        if not args.floor:
            commit_step(step, step.write(read_summary(step.summary_url), lambda _: None))
            mark("commit")
    what = "the smallest pipeline" if args.floor else "prepare"
    print(f"{what} on {describe(options, plan.input_bytes)}", file=sys.stderr)
    print("| stage | seconds |\n| --- | --- |")
    for (_, before), (stage, after) in itertools.pairwise(marks):
        print(f"| {stage} | {after - before:.2f} |")
    print(f"| all (after the interpreter started) | {marks[-1][1] - marks[0][1]:.2f} |")
    if stages:
        print("\n| Beam stage (its composites) | seconds |\n| --- | --- |")
        for name, seconds in stages:
            if seconds >= 0.05:
                print(f"| {name} | {seconds:.2f} |")


if __name__ == "__main__":
    main()
