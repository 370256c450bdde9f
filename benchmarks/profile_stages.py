"""Where the wall time of `nmtpipe prepare` goes, stage by stage, in one process.

The stages are those `nmtpipe prepare` runs (`pipelines/cli/main.py`,
`pipelines/workflow/prepare.py`), timed one by one: importing Beam, building the
command's parser (which imports its module), planning (resolving and
fingerprinting the inputs), building the Beam graph, translating it to Beam's runner
protobuf, running it (the runner translates it again, then fuses and runs the stages),
committing. Add runner flags to time another mode, as `nmtpipe prepare` takes them.
`--floor` times, after the same start, the smallest pipeline instead (Create, Map,
GroupByKey, Map over ten elements): what any Beam run costs in this process.

    python benchmarks/profile_stages.py --example
    python benchmarks/profile_stages.py --example --floor
    python benchmarks/profile_stages.py --trainpref benchmarks/.work/corpus-1000000 \\
        --direct_running_mode=multi_processing --direct_num_workers=2
"""

from __future__ import annotations

import argparse
import itertools
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--example", action="store_true", help="the bundled Tatoeba corpus")
    parser.add_argument("--trainpref", help="a generated corpus (PREFIX.en, PREFIX.zh)")
    parser.add_argument("--floor", action="store_true", help="the smallest pipeline instead")
    args, beam_flags = parser.parse_known_args()
    marks = [("start", time.perf_counter())]

    def mark(stage: str) -> None:
        marks.append((stage, time.perf_counter()))

    from nmtpipe.pipelines.cli import logs

    logs.configure(verbose=False)
    from nmtpipe.pipelines.beam.lean_import import import_beam

    beam = import_beam()
    mark("import Beam")
    from nmtpipe.pipelines.cli import main as cli

    command = cli.build_parser("prepare")
    mark("the command's module and parser")
    from nmtpipe.pipelines.beam.options import describe, pipeline_options
    from nmtpipe.pipelines.cli.commands.prepare import config_from_args
    from nmtpipe.pipelines.workflow.prepare import PrepareRun
    from nmtpipe.pipelines.workflow.prepare_plan import make_plan

    data = (
        ["--example"] if args.example else ["-s", "en", "-t", "zh", "--trainpref", args.trainpref]
    )
    with tempfile.TemporaryDirectory() as out:
        parsed, beam_args = command.parse_known_args(
            ["prepare", *data, "--output", out, *beam_flags]
        )
        plan = make_plan(config_from_args(parsed))
        options = pipeline_options(beam_args, plan.input_bytes)
        run = PrepareRun(plan, options)
        mark("plan")
        pipeline = beam.Pipeline(options=options)
        _ = pipeline | "Prepare" >> (_smallest(beam) if args.floor else run.graph())
        mark("build the graph")
        pipeline.to_runner_api()
        mark("graph to runner protobuf")
        pipeline.run().wait_until_finish()
        mark("run (protobuf again, fuse, stages)")
        if not args.floor:
            run.commit()
            mark("commit")
    what = "the smallest pipeline" if args.floor else "prepare"
    print(f"{what} on {describe(options, plan.input_bytes)}", file=sys.stderr)
    print("| stage | seconds |\n| --- | --- |")
    for (_, before), (stage, after) in itertools.pairwise(marks):
        print(f"| {stage} | {after - before:.2f} |")
    print(f"| all (after the interpreter started) | {marks[-1][1] - marks[0][1]:.2f} |")


if __name__ == "__main__":
    main()
