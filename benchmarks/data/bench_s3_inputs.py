"""`nmtpipe prepare` of a plain-text pair on S3 (a moto server on 127.0.0.1, as the tests
run one): wall time, CPU and the largest processes, the runner's (the main process)
apart from the workers', and the bytes its plan sends through the shuffles (what the
spans' measures and the pieces weigh pickled, as Beam's coder of last resort sends them;
computed in this process by the same code).

    python benchmarks/data/bench_s3_inputs.py --pairs 1000000 --workers 2

Run it once with the code before a change and once after (the same corpus, cached in
benchmarks/.work) to compare; the figures go to RESULTS.md.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "corpora"), str(HERE.parent / "data")]
import corpora  # noqa: E402
from bench_prepare import watch  # noqa: E402

BUCKET = "s3://nmtpipe-bench"


def _serve() -> str:
    """A moto S3 server on a free port of 127.0.0.1; its endpoint, in the environment
    that the command's processes inherit."""
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False).start()
    endpoint = f"http://127.0.0.1:{port}"
    keys = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}
    os.environ.update({**keys, "AWS_DEFAULT_REGION": "us-east-1", "AWS_ENDPOINT_URL": endpoint})
    return endpoint


def shuffled(prefix: str, chunk_lines: int = 20000) -> dict:
    """The pickled bytes of the measures and of the pieces of the pair at `prefix`,
    and how long planning it in one process takes."""
    import pickle
    import time

    from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig, resolve_inputs
    from nmtpipe.transforms.corpus import registry

    (inp,) = resolve_inputs(PrepareConfig("en", "zh", "unused", trainpref=(prefix,)))
    start = time.perf_counter()
    spans = registry.survey(inp)
    measured = [(span, registry.measure(inp, span)) for span in spans]
    pieces = list(registry.plan(inp, chunk_lines, measured))
    return {
        "spans": len(spans),
        "measures_bytes": sum(len(pickle.dumps(m)) for m in measured),
        "pieces": len(pieces),
        "pieces_bytes": sum(len(pickle.dumps(p)) for p in pieces),
        "plan_seconds": round(time.perf_counter() - start, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pairs", type=int, default=1_000_000)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--scorers", default="none", help="prepare's --scorers")
    parser.add_argument("--chunk-lines", type=int, default=20000, help="prepare's --chunk-lines")
    args = parser.parse_args()
    prefix = corpora.corpus(args.pairs)
    _serve()
    import s3fs

    fs = s3fs.S3FileSystem()
    fs.mkdir(BUCKET)
    for lang in ("en", "zh"):
        fs.put_file(f"{prefix}.{lang}", f"{BUCKET}/corpus.{lang}")
    cmd = [sys.executable, "-m", "nmtpipe", "prepare", "-s", "en", "-t", "zh",
           "--trainpref", f"{BUCKET}/corpus", "--output", f"{BUCKET}/prepared", "--force",
           "--scorers", args.scorers, "--chunk-lines", str(args.chunk_lines),
           "--runner=FnApiRunner", f"--direct_num_workers={args.workers}",
           "--direct_running_mode=multi_processing"]  # fmt: skip
    result = watch(cmd)
    result.pop("stdout", None)
    result.pop("stderr", None)
    found = {"pairs": args.pairs, "input_mb": round(_size(prefix) / 2**20), **result}
    print(json.dumps(found, indent=1), flush=True)
    # Run with code from before the plan's stages (no `registry.survey`), this part fails.
    print(json.dumps(shuffled(f"{BUCKET}/corpus", args.chunk_lines), indent=1))


def _size(prefix: Path) -> int:
    return sum(Path(f"{prefix}.{lang}").stat().st_size for lang in ("en", "zh"))


if __name__ == "__main__":
    main()
