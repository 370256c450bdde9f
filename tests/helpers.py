"""What the tests share besides fixtures: the example corpus, runner options, goldens."""

from __future__ import annotations

import gzip
import json
import re
from collections import Counter
from pathlib import Path

# Through the checkout, not the package: tests/airflow runs where nmtpipe is not installed.
EXAMPLE = Path(__file__).resolve().parents[1] / "pipelines" / "example"
DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "golden"

# The FnApiRunner in one process: fast, and what the in-memory DirectRunner runs on.
IN_MEMORY = ["--runner=FnApiRunner", "--direct_num_workers=1", "--direct_running_mode=in_memory"]
# Worker processes: proves that every DoFn pickles and that nothing leans on shared state.
MULTI_PROCESS = [
    "--runner=FnApiRunner",
    "--direct_num_workers=2",
    "--direct_running_mode=multi_processing",
]


def command_result(stdout: str) -> dict:
    """The result a command printed: stdout is its one JSON document."""
    return json.loads(stdout)["result"]


def train_records(save_dir: Path | str) -> list[dict]:
    """The records a training run kept beside its checkpoints (train_log.jsonl)."""
    lines = (Path(save_dir) / "train_log.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines]


def example_lines(name: str, lang: str, limit: int | None = None) -> list[str]:
    """Lines of a bundled example file, undecoded line ends (CRLF) kept."""
    with gzip.open(EXAMPLE / f"{name}.{lang}.gz", "rt", encoding="utf-8", newline="") as f:
        lines = f.read().split("\n")[:-1]
    return lines[:limit]


def write_pair(prefix: Path, src: list[str] | bytes, tgt: list[str] | bytes, langs=("en", "zh")):
    """Write PREFIX.en and PREFIX.zh; lists of lines get a final newline, bytes go as they are."""
    for lang, side in zip(langs, (src, tgt), strict=True):
        data = side if isinstance(side, bytes) else ("\n".join(side) + "\n").encode()
        Path(f"{prefix}.{lang}").write_bytes(data)
    return prefix


def prepare_example(folder: Path, every: int, **options) -> str:
    """Every `every`-th pair of the bundled example corpus, prepared in-process into
    `folder/prepared` (PrepareConfig `options` as given); the output's path."""
    from nmtpipe.pipelines.workflow.prepare import run_prepare
    from nmtpipe.pipelines.workflow.prepare_plan import PrepareConfig

    corpus = write_pair(
        folder / "train",
        example_lines("tatoeba-cmn", "en")[::every],
        example_lines("tatoeba-cmn", "zh")[::every],
    )
    out = str(folder / "prepared")
    run_prepare(PrepareConfig("en", "zh", out, trainpref=(str(corpus),), **options), IN_MEMORY)
    return out


def encode_example(folder: Path) -> str:
    """A tiny training set: 1 in 12 example pairs prepared, a joined 1,000-entry
    vocabulary, encoded in-process under `folder`; the encoded output's path."""
    from nmtpipe.pipelines.workflow.encode import EncodeConfig, run_encode
    from nmtpipe.pipelines.workflow.vocab import VocabConfig, run_vocab

    prepared = prepare_example(folder, 12, valid_fraction=0.03)
    vocab, out = str(folder / "vocab"), str(folder / "encoded")
    run_vocab(VocabConfig(prepared, vocab, vocab_size=1000, joined=True), IN_MEMORY)
    run_encode(EncodeConfig(prepared, vocab, out), IN_MEMORY)
    return out


def golden_counts(name: str) -> Counter[str]:
    """A counts file written by shared/tools/t2t_vocab.py (T2T's own counting)."""
    unescape = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}
    counts: Counter[str] = Counter()
    with gzip.open(GOLDEN / name, "rt", encoding="utf-8", newline="\n") as f:
        for row in f.read().split("\n"):
            if row:
                token, count = row.rsplit("\t", 1)
                counts[re.sub(r"\\(.)", lambda m: unescape[m.group(1)], token)] += int(count)
    return counts


def split_ids(flat, lengths) -> list[list[int]]:
    """Concatenated lines' ids (an encoder's `encode_batch`) back into lines."""
    ends = lengths.cumsum()
    return [flat[end - n : end].tolist() for end, n in zip(ends, lengths, strict=True)]


class NotWeights:
    """A class of a user's own, which loading only weights refuses to unpickle."""


def write_foreign_checkpoint(path: Path) -> str:
    """A checkpoint nmtpipe did not write, pickling a `NotWeights`; the name torch gives
    that class."""
    import torch  # here: tests/airflow import this module without torch

    torch.save({"model": {"w": torch.ones(2)}, "args": NotWeights()}, path)
    return f"{NotWeights.__module__}.{NotWeights.__qualname__}"
