"""The scoring job of one rank: a prepared dataset's train pairs scored by dual
conditional cross-entropy (`transforms/quality/models/dcce.py`) with a forward and a
backward model, each trained by `nmtpipe train` with its own vocabulary.

Rank r scores train shards r, r + world, ...: each side of a shard's pairs encoded by
each model's vocabulary, batched by tokens (`length_sorted_batches`, as decoding
batches), and each model's teacher-forced cross-entropy of its target given its source,
per token, EOS included, without gradients (bf16 autocast on CUDA). A shard's score
file (`dcce.SCHEMA`, row for row with the shard) is written atomically when the shard
is done, with what it was scored from in its metadata; a re-run skips a shard whose
file holds the same, so a killed job goes on where it stopped. Batches depend only on
the shard, so the scores do not depend on the ranks. The first rank writes
`score_summary.json` last, once every rank is done.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import torch
import torch.nn.functional as F

from nmtpipe.trainers.data.batching import length_sorted_batches
from nmtpipe.trainers.data.collate import collate
from nmtpipe.trainers.data.decode_inputs import TextCodec
from nmtpipe.trainers.generate.decode import Shown
from nmtpipe.trainers.model.build import Seq2Seq
from nmtpipe.trainers.runtime import checkpoint
from nmtpipe.trainers.runtime.distributed import Ranks
from nmtpipe.trainers.runtime.run_files import SCORE_SUMMARY
from nmtpipe.transforms.errors import ConfigError
from nmtpipe.transforms.formats.encoded_dataset import committed_doc
from nmtpipe.transforms.formats.prepared import read_prepared
from nmtpipe.transforms.quality.models import dcce
from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.vocab.id_layout import IdLayout
from nmtpipe.transforms.vocab.vocabulary import open_vocabulary

if TYPE_CHECKING:  # DcceConfig.run imports this module: importing it back would be a cycle
    from nmtpipe.trainers.generate.dcce_config import DcceConfig

_SCORED_FROM = b"nmtpipe.scored_from"  # a score file's metadata: what it was scored from


class Direction:
    """One of the two models on this rank's device, with its vocabulary's text → ids."""

    def __init__(self, url: str, option: str, langs: tuple[str, str], ranks: Ranks) -> None:
        state = checkpoint.load(url)
        train_config = state.get("train_config", {})
        data_url = train_config.get("data")
        if not data_url:
            raise ConfigError(f"{option} {url} does not say the data it was trained on")
        doc = committed_doc(data_url)
        trained = (doc["languages"]["src"], doc["languages"]["tgt"])
        if trained != langs:
            raise ConfigError(
                f"{option} {url} translates {'→'.join(trained)}; {option} wants a model "
                f"of {'→'.join(langs)}"
            )
        fmt = train_config.get("format") or doc["formats"][0]
        checkpoint.check_match(state, url, doc, data_url, fmt)
        self.url, self.langs = url, langs
        self.sha256 = checkpoint.sha256(url)
        self.layout = IdLayout(**doc["id_layouts"][fmt])
        self.codec = TextCodec(open_vocabulary(doc["vocab"]["url"]), doc["languages"], fmt)
        self.model = checkpoint.inference_model(state, ranks.device)

    def identity(self) -> dict[str, str]:
        """What the scores were computed with: the checkpoint and its digest."""
        return {"url": self.url, "sha256": self.sha256}

    def cross_entropies(
        self, src: list[str], tgt: list[str], max_tokens: int, ranks: Ranks
    ) -> np.ndarray:
        """H(tgt | src) of each pair, in nats per target token."""
        sources = self.codec.encode(self.langs[0], src)
        targets = self.codec.encode(self.langs[1], tgt)
        return cross_entropies(self.model, sources, targets, self.layout, max_tokens, ranks)


@torch.no_grad()
def cross_entropies(
    model: Seq2Seq,
    sources: list[np.ndarray],
    targets: list[np.ndarray],
    layout: IdLayout,
    max_tokens: int,
    ranks: Ranks,
) -> np.ndarray:
    """Each pair's teacher-forced cross-entropy of its target (EOS included) given its
    source, per target token, batched by padded tokens of the longer side."""
    lengths = np.array([max(s.size, t.size) for s, t in zip(sources, targets, strict=True)])
    found = np.empty(len(sources), dtype=np.float64)
    for positions in length_sorted_batches(lengths, max_tokens):
        pairs = [(sources[i], targets[i]) for i in positions.tolist()]
        batch = collate(pairs, layout.pad, layout.eos).to(ranks.device)
        keep = batch.tgt != layout.pad
        with ranks.autocast():
            logits = model(batch.src, batch.prev_tgt, keep)
        nll = F.cross_entropy(logits.float(), batch.tgt[keep], reduction="none")
        rows = keep.nonzero()[:, 0]
        summed = torch.zeros(len(pairs), dtype=torch.float64, device=nll.device)
        summed.index_add_(0, rows, nll.double())
        found[positions] = (summed / keep.sum(dim=1)).cpu().numpy()
    return found


@dataclass(frozen=True)
class Shard:
    """A train shard of the prepared dataset: its manifest entry and its score file."""

    entry: dict[str, Any]
    output: str

    @property
    def path(self) -> str:
        return self.entry["path"]


class Scorer:
    """One rank's share of a scoring job."""

    def __init__(self, config: DcceConfig, ranks: Ranks, shown: Shown) -> None:
        self.config, self.ranks, self.shown = config, ranks, shown
        self.root, doc = read_prepared(config.prepared, "--prepared")
        self.prepared = {"url": self.root, "fingerprint": doc["fingerprint"]}
        src, tgt = doc["options"]["languages"]["src"], doc["options"]["languages"]["tgt"]
        entries = {f["path"]: f for f in doc["files"]}
        paths = doc["splits"]["train"]["files"]
        self.shards = [Shard(entries[p], fsio.join(config.output, p)) for p in paths]
        self.pairs = doc["splits"]["train"]["pairs"]
        shown.say(f"loading the forward model {config.forward}")
        self.forward = Direction(config.forward, "--forward", (src, tgt), ranks)
        shown.say(f"loading the backward model {config.backward}")
        self.backward = Direction(config.backward, "--backward", (tgt, src), ranks)
        self.scored_from = json.dumps(
            {
                "prepared": doc["fingerprint"],
                "forward": self.forward.sha256,
                "backward": self.backward.sha256,
            },
            sort_keys=True,
        ).encode()

    def done(self, shard: Shard) -> bool:
        """Whether the shard's score file is there, scored from the same."""
        if not fsio.exists(shard.output):
            return False
        table = fsio.read_parquet(shard.output, columns=["id"])
        return (table.schema.metadata or {}).get(_SCORED_FROM) == self.scored_from

    def score_shard(self, shard: Shard) -> pa.Table:
        """The shard's score file: its pairs' cross-entropies both ways, and their DCCE."""
        table = manifest.read_parquet_entry(self.root, shard.entry, ["id", "src", "tgt"])
        src, tgt = table["src"].to_pylist(), table["tgt"].to_pylist()
        h_fwd = h_bwd = np.zeros(0)
        if table.num_rows:  # (a shard may hold no pair)
            c = self.config
            h_fwd = self.forward.cross_entropies(src, tgt, c.max_tokens, self.ranks)
            h_bwd = self.backward.cross_entropies(tgt, src, c.max_tokens, self.ranks)
        values = (h_fwd, h_bwd, dcce.dcce(h_fwd, h_bwd))
        scores = pa.Table.from_arrays(
            [table["id"], *(pa.array(v, pa.float32()) for v in values)], schema=dcce.SCHEMA
        )
        return scores.replace_schema_metadata({_SCORED_FROM: self.scored_from})

    def run(self) -> dict[str, Any]:
        started = time.perf_counter()
        summary_url = fsio.join(self.config.output, SCORE_SUMMARY)
        if self.ranks.main and fsio.exists(summary_url):
            fsio.remove(summary_url)  # the commit mark of an earlier run's scores
        self.shown.start(self.pairs)
        scored = reused = 0
        mine = self.shards[self.ranks.rank :: self.ranks.world]
        for shard in mine:
            if self.done(shard):
                reused += 1
            else:
                table = self.score_shard(shard)
                fsio.write_parquet(shard.output, table)
                scored += table.num_rows
            # (the other ranks' shards counted as this one: shards are of about one size)
            self.shown.update(shard.entry["rows"] * self.ranks.world)
        scored, reused = self.ranks.sum(scored, reused)  # also: every rank done
        seconds = time.perf_counter() - started
        summary = {
            "prepared": self.prepared,
            "forward": self.forward.identity(),
            "backward": self.backward.identity(),
            "shards": [s.path for s in self.shards],
            "pairs": self.pairs,
            "scored": int(scored),
            "shards_reused": int(reused),
            "world": self.ranks.world,
            "seconds": round(seconds, 2),
            "pairs_per_s": round(scored / seconds, 1) if seconds else 0.0,
        }
        if self.ranks.main:
            text = json.dumps(summary, indent=2, ensure_ascii=False) + "\n"
            fsio.write_bytes(summary_url, text.encode("utf-8"))
        return summary


def score(config: DcceConfig) -> dict[str, Any]:
    """Score on this process's rank; returns the summary."""
    ranks = Ranks()
    shown = Shown(ranks.main, "score", "pair")
    try:
        summary = Scorer(config, ranks, shown).run()
        shown.close(finished=True)
        return summary
    finally:
        shown.close(finished=False)
        ranks.close()
