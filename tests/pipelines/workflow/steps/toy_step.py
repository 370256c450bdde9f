"""A toy torch step, as a new step is added: this one module (its job, its step, its
stage) and one `register` line. It counts the source lengths of a prepared dataset's
training pairs with torch, shard by shard, keeping each shard's count as it goes, so
that a re-run after a failure counts only the shards left."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from nmtpipe.pipelines.workflow.steps.runner import Stage
from nmtpipe.pipelines.workflow.steps.torch_steps import TorchStep
from nmtpipe.transforms.formats.prepared import read_prepared
from nmtpipe.transforms.storage import fsio, manifest

FAIL_AFTER = [0]  # a test's: the jobs planned fail after counting this many shards (0: never)


@dataclass(frozen=True)
class LengthsJob:
    """A `launch.Job`: the histogram of the training sources' lengths in characters."""

    name: ClassVar[str] = "lengths"
    summary_file: ClassVar[str] = "lengths.json"
    rerun: ClassVar[str] = "counts the shards left"

    prepared: str
    output: str
    bins: int = 4
    fail_after: int = 0

    def run(self) -> dict[str, Any]:
        import torch

        from nmtpipe.trainers.train.launch import is_main_rank

        root, doc = read_prepared(self.prepared)
        key = doc["fingerprint"][:8]  # what a part was counted from
        for url in fsio.find(self.output) if is_main_rank() else []:
            if re.match(r"part-\d+-", url.rsplit("/", 1)[-1]) and f"-{key}." not in url:
                fsio.remove(url)  # counted from other data
        # What the ranks see of a commit while they work: none (the last one is gone).
        committed = fsio.exists(manifest.manifest_url(self.output))
        histogram, counted = torch.zeros(self.bins, dtype=torch.int64), 0
        for k, path in enumerate(doc["splits"]["train"]["files"]):
            part = fsio.join(self.output, f"part-{k}-{key}.json")
            if fsio.exists(part):
                counted += 1
                histogram += torch.tensor(json.loads(fsio.read_bytes(part)))
                continue
            sources = fsio.read_parquet(fsio.join(root, path), ["src"])["src"].to_pylist()
            lengths = torch.tensor([len(s) for s in sources], dtype=torch.int64)
            bins = torch.clamp(lengths // 16, max=self.bins - 1).bincount(minlength=self.bins)
            if is_main_rank():
                fsio.write_bytes(part, json.dumps(bins.tolist()).encode())
            if self.fail_after and k + 1 >= self.fail_after and is_main_rank():
                raise RuntimeError("the toy job was told to fail")
            histogram += bins
        summary = {"pairs": int(histogram.sum()), "histogram": histogram.tolist(),
                   "resumed_shards": counted, "committed_while_running": committed}  # fmt: skip
        if is_main_rank():
            url = fsio.join(self.output, self.summary_file)
            fsio.write_bytes(url, json.dumps(summary).encode())
        return summary


class LengthsStep(TorchStep):
    """The toy job as a step: named by the prepared dataset's fingerprint and its bins."""

    kind = "nmtpipe.test.lengths"
    ours = re.compile(r"^(part-\d+-[0-9a-f]{8}\.json|lengths\.json)$")

    def __init__(self, prepared: str, output: str, nproc: int) -> None:
        root, doc = read_prepared(prepared)
        self.job = LengthsJob(root, output, fail_after=FAIL_AFTER[0])
        self.output, self.nproc = output, nproc
        self.fingerprint = manifest.fingerprint({"prepared": doc["fingerprint"], "bins": 4})

    def manifest(self, files: list[dict[str, Any]], stats: dict[str, Any] | None) -> dict:
        return {"stats": "lengths.json", "files": files}

    def figures(self, outcome: Any) -> str:
        return f"{outcome.stats['pairs']:,} pairs in {len(outcome.stats['histogram'])} bins"


STAGE = Stage(
    "lengths", lambda config: [lambda: LengthsStep(config.prepare.output, config.url("lengths"), 2)]
)
