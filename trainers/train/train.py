"""The training loop of one rank: DDP over token batches, exact resume, validation, checkpoints.

Run once per process by `torchrun` (or alone, as a single process). Every rank reads its
own batches through the memory-mapped reader; a step is `update_freq` micro-batches per
rank, gradients synchronised only on the last (`no_sync`), and the loss is averaged per
target token over the whole global batch (the token count is all-reduced before the
backward pass, and DDP's averaging over ranks is undone by the world size). The position
in the data (epoch, batches done) is saved with the model, so a resumed job continues
with the next batch, rebuilding the epoch's batch order from the seed instead of reading
anything it skips.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch.nn.parallel import DistributedDataParallel

from nmtpipe.trainers.data.batching import epoch_batches
from nmtpipe.trainers.data.collate import Batch, collate
from nmtpipe.trainers.model.build import build_model
from nmtpipe.trainers.model.config import ModelConfig, preset
from nmtpipe.trainers.runtime import checkpoint, run_files
from nmtpipe.trainers.runtime.distributed import Ranks, open_on_ranks
from nmtpipe.trainers.runtime.run_files import SUMMARY
from nmtpipe.trainers.train import learning_curve
from nmtpipe.trainers.train.average import write_average
from nmtpipe.trainers.train.objective import label_smoothed_nll
from nmtpipe.trainers.train.progress import Progress
from nmtpipe.trainers.train.schedule import learning_rate, peak_learning_rate
from nmtpipe.trainers.train.valid_bleu import ValidBleu
from nmtpipe.transforms.errors import ConfigError, InputError, Interrupted
from nmtpipe.transforms.formats.encoded_dataset import EncodedDataset, SplitData
from nmtpipe.transforms.storage import fsio

if TYPE_CHECKING:  # TrainConfig.run imports this module: importing it back would be a cycle
    from nmtpipe.trainers.train.train_config import TrainConfig


@dataclass
class Position:
    """Where training is: updates done, and the epoch and batches done in it (this rank's)."""

    update: int = 0
    epoch: int = 1
    batches_done: int = 0


def _model_config(config: TrainConfig, data: EncodedDataset) -> dict[str, Any]:
    langs = data.languages
    sizes = data.vocab_sizes
    overrides = dict(config.model_overrides)
    if config.dropout is not None:
        overrides["dropout"] = config.dropout
    mc = preset(
        config.arch,
        src_vocab=sizes[langs["src"]],
        tgt_vocab=sizes[langs["tgt"]],
        pad=data.layout.pad,
        share_all_embeddings=data.joined,
        pre_norm=config.pre_norm,
        **overrides,
    )
    return mc.as_dict()


class Trainer:
    def __init__(self, config: TrainConfig, ranks: Ranks) -> None:
        self.config, self.ranks = config, ranks
        self.data = open_on_ranks(ranks, config.data, config.format, config.cache_dir)
        self.train_split, self.valid_split = self.data["train"], self.data["valid"]
        self.pad, self.eos = self.data.layout.pad, self.data.layout.eos
        torch.manual_seed(config.seed)
        self.model_config = _model_config(config, self.data)
        self.model = build_model(ModelConfig(**self.model_config)).to(ranks.device)
        self.ddp: torch.nn.Module = (
            DistributedDataParallel(self.model) if ranks.world > 1 else self.model
        )
        if config.compile:
            self.ddp = torch.compile(self.ddp)
        self.optimizer = torch.optim.Adam(
            self.model.parameters(),
            lr=0.0,
            betas=config.adam_betas,
            eps=config.adam_eps,
            weight_decay=config.weight_decay,
        )
        self.peak_lr = peak_learning_rate(
            config.lr, config.lr_scheduler, config.warmup_updates, self.model.config.d_model
        )
        self.position = Position()
        self.kept: int | None = None  # the update of the checkpoint a rerun resumes from
        self.best: float | None = None  # of the --best-checkpoint-metric
        self.bad_validations = 0
        self.history: list[dict[str, float]] = []  # the learning curves' points
        self.valid_bleu = (
            ValidBleu(self.data, "valid", ranks, config.eval_bleu_beam, config.max_tokens)
            if config.evaluates_bleu
            else None
        )
        self.skipped = 0
        self.data_seconds = 0.0  # spent fetching and collating batches
        self.progress: Progress | None = None
        self._warnings: list[str] = []
        self.autocast = ranks.autocast()
        # Widths in multiples of 8 suit GPU tensor cores; on a CPU they are only padding.
        self.pad_to = 8 if ranks.device.type == "cuda" else 1

    # --- checkpoints ----------------------------------------------------------------

    def _url(self, name: str) -> str:
        return fsio.join(self.config.save_dir, name)

    def resume(self) -> bool:
        url = self._url(run_files.LAST)
        if not fsio.exists(url):
            return False
        state = checkpoint.load(url)
        checkpoint.check_compatible(state, url, self.model_config, self.data.vocab_fingerprint)
        self.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.position = Position(**state["position"])
        if self._other_data(state, url):  # --reset-data: the new data from its start
            self.position = Position(update=self.position.update)
        self.best, self.bad_validations = state["best"], state["bad_validations"]
        if state.get("best_metric", "loss") != self.config.best_checkpoint_metric:
            self.best, self.bad_validations = None, 0  # another metric: start afresh
        self.history = state.get("history", [])
        self.kept = self.position.update
        rng = state["rng"]
        checkpoint.set_rng_state(rng[self.ranks.rank] if len(rng) == self.ranks.world else rng[0])
        if state["world"] != self.ranks.world:
            self._warnings.append(
                f"{url} was written by {state['world']} rank(s), this job has "
                f"{self.ranks.world}: batches are cut anew, so the resume is not exact"
            )
        return True

    def _other_data(self, state: dict[str, Any], url: str) -> bool:
        """Whether the checkpoint at `url` was trained on other data than this job's;
        refused unless --reset-data says to go on with the new data."""
        theirs, ours = state.get("data_fingerprint"), self.data.data_fingerprint
        if theirs is None or theirs == ours:  # the same data, or an older checkpoint
            return False
        if not self.config.reset_data:
            raise InputError(
                f"{url} was trained on other data (fingerprint {theirs[:12]}) than "
                f"{self.config.data} (fingerprint {ours[:12]}); pass --reset-data to "
                "continue training it on this data, or use another --save-dir"
            )
        self._warnings.append(
            f"{url} was trained on other data ({theirs[:12]}); --reset-data: continuing "
            f"from update {state['position']['update']} at the start of {self.config.data}"
        )
        return True

    def save(self, names: list[str]) -> None:
        rng = self.ranks.gather(checkpoint.rng_state())
        if not self.ranks.main:
            self.kept = self.position.update if run_files.LAST in names else self.kept
            return
        state = {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "position": asdict(self.position),
            "best": self.best,
            "best_metric": self.config.best_checkpoint_metric,
            "bad_validations": self.bad_validations,
            "history": self.history,
            "rng": rng,
            "model_config": self.model_config,
            "train_config": {
                k: v for k, v in asdict(self.config).items() if k != "model_overrides"
            },
            "vocab_fingerprint": self.data.vocab_fingerprint,
            "data_fingerprint": self.data.data_fingerprint,
            "world": self.ranks.world,
        }
        for name in names:
            checkpoint.save(self._url(name), state)
            if name == run_files.LAST:
                self.kept = self.position.update
        if self.progress is not None:
            self.progress.keep()
        checkpoint.prune(self.config.save_dir, self.config.keep_interval_updates)

    # --- steps ----------------------------------------------------------------------

    def _batches(self, split: SplitData, epoch: int) -> tuple[list[np.ndarray], int]:
        plan = epoch_batches(
            split.src_sizes, split.tgt_sizes, self.config.max_tokens, self.config.seed, epoch,
            world=self.ranks.world,
        )  # fmt: skip
        return plan.for_rank(self.ranks.rank, self.ranks.world), plan.skipped

    def _collate(self, split: SplitData, indices: np.ndarray) -> Batch:
        started = time.perf_counter()
        pairs = [split[int(i)] for i in indices]
        batch = collate(pairs, self.pad, self.eos, self.pad_to).to(self.ranks.device)
        self.data_seconds += time.perf_counter() - started
        return batch

    def log(self, record: dict[str, Any]) -> None:
        assert self.progress is not None
        self.progress.record(record)
        kept = learning_curve.point(record)
        if kept is not None:
            self.history.append(kept)

    def _losses(self, model: torch.nn.Module, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """The batch's summed smoothed loss and NLL, logits computed at real tokens only."""
        keep = batch.tgt != self.pad
        logits = model(batch.src, batch.prev_tgt, keep)
        return label_smoothed_nll(logits, batch.tgt[keep], self.config.label_smoothing, self.pad)

    def step(self, micro: list[np.ndarray]) -> dict[str, float]:
        """One update over this rank's micro-batches; the global loss per target token."""
        batches = [self._collate(self.train_split, idx) for idx in micro]
        local_tokens = sum(b.target_tokens for b in batches)
        (global_tokens,) = self.ranks.sum(local_tokens)
        self.ddp.train()
        self.optimizer.zero_grad(set_to_none=True)
        loss_sum = nll_sum = torch.zeros((), device=self.ranks.device)
        for k, batch in enumerate(batches):
            last = k == len(batches) - 1
            sync = contextlib.nullcontext() if last or self.ranks.world == 1 else self.ddp.no_sync()
            with sync, self.autocast:
                loss, nll = self._losses(self.ddp, batch)
                (loss * self.ranks.world / global_tokens).backward()
            loss_sum, nll_sum = loss_sum + loss.detach(), nll_sum + nll.detach()
        if self.config.clip_norm > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.config.clip_norm)
        lr = learning_rate(self.position.update + 1, self.peak_lr, self.config.warmup_updates)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        # One device-to-host copy per update, not one per micro-batch.
        loss_total, nll_total = self.ranks.sum(*torch.stack([loss_sum, nll_sum]).tolist())
        return {
            "loss": loss_total / global_tokens,
            "nll_loss": nll_total / global_tokens,
            "lr": lr,
            "target_tokens": global_tokens,
        }

    @torch.no_grad()
    def validate(self) -> dict[str, float]:
        self.ddp.eval()
        loss_sum = nll_sum = tokens = 0.0
        batches, _ = self._batches(self.valid_split, epoch=0)
        for indices in batches:
            batch = self._collate(self.valid_split, indices)
            with self.autocast:
                loss, nll = self._losses(self.model, batch)
            loss_sum, nll_sum, tokens = (
                loss_sum + loss.item(),
                nll_sum + nll.item(),
                tokens + batch.target_tokens,
            )
        loss_total, nll_total, token_total = self.ranks.sum(loss_sum, nll_sum, tokens)
        token_total = max(token_total, 1.0)
        result = {
            "valid_loss": loss_total / token_total,
            "valid_nll_loss": nll_total / token_total,
            "valid_ppl": float(np.exp(nll_total / token_total)),
        }
        if self.valid_bleu is not None:
            result |= self.valid_bleu(self.model, self.autocast)
        return result

    # --- the loop -------------------------------------------------------------------

    def _micro_batches(self) -> Iterator[list[np.ndarray]]:
        """This rank's micro-batches, step by step, from the current position on."""
        uf = self.config.update_freq
        while self.config.max_epoch == 0 or self.position.epoch <= self.config.max_epoch:
            mine, skipped = self._batches(self.train_split, self.position.epoch)
            if self.position.batches_done == 0:
                self.skipped += skipped
            steps = len(mine) // uf
            if steps == 0:
                raise ConfigError(
                    f"--max-tokens {self.config.max_tokens} leaves no full step of "
                    f"{uf} batch(es) per rank in the training split"
                )
            for s in range(self.position.batches_done // uf, steps):
                self.position.batches_done = (s + 1) * uf  # where a checkpoint after it resumes
                yield mine[s * uf : (s + 1) * uf]
            self._end_of_epoch()
            self.position.epoch += 1
            self.position.batches_done = 0

    def _end_of_epoch(self) -> None:
        if not self.config.validate_interval_updates:
            self._validate_and_track()
        if not self.config.save_interval_updates:
            self.save(
                [run_files.numbered(self.position.epoch, self.position.update), run_files.LAST]
            )

    def _validate_and_track(self) -> bool:
        """Validate, keep the best checkpoint; True when patience has run out."""
        result = self.validate()
        self.log({"update": self.position.update, "epoch": self.position.epoch, **result})
        metric = self.config.best_checkpoint_metric
        value = result[f"valid_{metric}"]
        better = self.best is None or (value > self.best if metric == "bleu" else value < self.best)
        if better:
            self.best, self.bad_validations = value, 0
            self.save([run_files.BEST])
        else:
            self.bad_validations += 1
        return self._out_of_patience()

    def _out_of_patience(self) -> bool:
        return 0 < self.config.patience <= self.bad_validations

    def run(self) -> dict[str, Any]:
        resumed = self.resume()
        self.progress = Progress(
            self.ranks.main, self.config.max_update, self.position.update,
            self.config.tensorboard_logdir, self._url(run_files.LOG),
        )  # fmt: skip
        if resumed and self.position.update < self.config.max_update:
            self.progress.say(
                f"resuming from the checkpoint at update {self.position.update} "
                f"({self._url(run_files.LAST)})"
            )
        for warning in self._warnings:
            self.log({"warning": warning})
        finished = False
        try:
            summary = self._loop(resumed)
            finished = True
            return summary
        except KeyboardInterrupt:
            raise Interrupted(self._interrupted()) from None
        finally:
            self.progress.close(finished)

    def _interrupted(self) -> str:
        """What an interrupted run says: where it was, and what a rerun starts from."""
        at = f"interrupted at update {self.position.update}"
        if self.kept is None:
            return (
                f"{at}, before its first checkpoint; nothing was kept in "
                f"{self.config.save_dir}; rerun to start over"
            )
        return (
            f"{at}; checkpoint at update {self.kept} kept in {self.config.save_dir}; "
            "rerun to resume"
        )

    def _loop(self, resumed: bool) -> dict[str, Any]:
        started = time.perf_counter()
        seen_tokens = 0
        window, window_tokens, window_data = time.perf_counter(), 0, 0.0
        done_before = self.position.update >= self.config.max_update
        idle = stop = done_before or self._out_of_patience()  # nothing left to train
        for micro in [] if stop else self._micro_batches():
            result = self.step(micro)
            self.position.update += 1
            self.progress.advance(result["loss"])
            seen_tokens += int(result["target_tokens"])
            window_tokens += int(result["target_tokens"])
            if self.position.update % self.config.log_interval == 0:
                now = time.perf_counter()
                self.log({
                    "update": self.position.update, "epoch": self.position.epoch,
                    **result, "tokens_per_s": round(window_tokens / (now - window), 1),
                    "data_share": round((self.data_seconds - window_data) / (now - window), 4),
                    **_memory(self.ranks.device),
                })  # fmt: skip
                window, window_tokens, window_data = now, 0, self.data_seconds
            interval = self.config.validate_interval_updates
            if interval and self.position.update % interval == 0 and self._validate_and_track():
                stop = True
            interval = self.config.save_interval_updates
            if interval and self.position.update % interval == 0:
                names = [
                    run_files.numbered(self.position.epoch, self.position.update),
                    run_files.LAST,
                ]
                self.save(names)
            if stop or self.position.update >= self.config.max_update:
                break
        final = self.validate()
        if not idle:  # a finished run's checkpoint and files stay as they are
            self.save([run_files.LAST])
            self._finish_files(final)
        seconds = time.perf_counter() - started
        return {
            "already_done": done_before,  # the checkpoint was at --max-update already
            "max_update": self.config.max_update,
            "updates": self.position.update,
            "epoch": self.position.epoch,
            "resumed": resumed,
            "data_fingerprint": self.data.data_fingerprint,  # what it trained on last
            "seconds": round(seconds, 1),
            "target_tokens_per_s": round(seen_tokens / seconds, 1) if seconds else 0.0,
            "data_share": round(self.data_seconds / seconds, 4) if seconds else 0.0,
            "skipped_too_long": self.skipped,
            f"best_valid_{self.config.best_checkpoint_metric}": self.best,
            **final,
        }

    def _finish_files(self, final: dict[str, float]) -> None:
        """Beside the checkpoints, on the first rank: the learning curves (SVG and their
        points as JSON) and, with --average-last, the averaged checkpoint."""
        last = learning_curve.point({"update": self.position.update, **final})
        if last is not None and (not self.history or self.history[-1] != last):
            self.history.append(last)
        if not self.ranks.main:
            return
        title = f"{self.config.arch} on {self.config.data}"
        fsio.write_bytes(
            self._url(run_files.CURVES_SVG), learning_curve.plot_svg(self.history, title)
        )
        fsio.write_bytes(self._url(run_files.CURVES_JSON), json.dumps(self.history).encode())
        if self.config.average_last:
            out, averaged = write_average(self.config.save_dir, self.config.average_last)
            self.log({"averaged": [url.rsplit("/", 1)[-1] for url in averaged], "into": out})
        assert self.progress is not None
        self.progress.keep()


def _memory(device: torch.device) -> dict[str, float]:
    if device.type != "cuda":
        return {}
    return {"gpu_memory_gb": round(torch.cuda.max_memory_allocated(device) / 2**30, 2)}


def train(config: TrainConfig) -> dict[str, Any]:
    """Train on this process's rank; returns the summary (the same on every rank)."""
    ranks = Ranks()
    try:
        summary = Trainer(config, ranks).run()
        if ranks.main:  # what the run ended with, beside its checkpoints
            text = json.dumps(summary, indent=2) + "\n"
            fsio.write_bytes(fsio.join(config.save_dir, SUMMARY), text.encode("utf-8"))
        # Every rank done (rank 0 may still be writing the last checkpoint) before the
        # group is torn down: a rank leaving early can abort the others' gloo threads.
        ranks.sum(0)
        return summary
    finally:
        ranks.close()
