"""Beam search on a model's incremental decoder, batched over sentences and beams.

Every step runs the decoder once over one new position of all live hypotheses of all
sentences (`decode_step` of the Transformer or the GRU seq2seq); survivors' cached
decoder states (keys and values, or GRU states) are reordered by beam index
(`reorder`), never recomputed, and a source's encoder outputs are kept once for all its
beams. A sentence leaves the batch as soon as its search is over, so long sentences do
not keep short ones' beams busy.

Two conventions, each as its anchor does it:

- `t2t` (default; Tensor2Tensor's `beam_search.py`): an alive set and a finished set of
  `beam` hypotheses each. A step ranks the top 2 x beam expansions by log-probability;
  the best `beam` that do not end in EOS stay alive, and those that end in EOS compete
  with the finished set on the GNMT score `log_prob / ((5 + length) / 6) ** alpha`
  (length counts the EOS). A sentence stops (T2T's `stop_early`) when its best finished
  score (its n-th best, for an n-best list) beats what its best alive hypothesis could
  still reach at the maximum length, or after `max_len` tokens, EOS included. If nothing
  finished, the alive hypotheses are returned with their log-probabilities as scores,
  as T2T does (they also fill an n-best list that has too few finished hypotheses).
- `fairseq` (`lenpen` given; fairseq's `SequenceGenerator`): the same 2 x beam
  expansions, but only those among the top `beam` that end in EOS are finished, with
  the score `log_prob / length ** lenpen` (EOS counted); a sentence stops once `beam`
  hypotheses finished, and EOS is forced after `max_len` tokens. Hugging Face's
  `generate(num_beams=...)` scores the same way, but by default stops when no alive
  hypothesis can beat the worst finished one (`early_stopping=True` is fairseq's rule),
  and lets hypotheses cut at the maximum length compete without an EOS.

Where the anchors decide per batch, this search decides per sentence, so a sentence's
result does not depend on the batch it is in: the maximum length is `a * src_len + b`
of its own source (T2T and fairseq take the batch's longest), and a sentence stops on
its own bound (T2T waits for the whole batch, which can only add finished hypotheses
below the best one). Padding and `<s>` are never generated. Greedy decoding is beam 1
through the same code.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from nmtpipe.trainers.model.build import Seq2Seq
from nmtpipe.trainers.model.gru import GruCache
from nmtpipe.trainers.model.search_config import SearchConfig
from nmtpipe.trainers.model.transformer import DecoderCache, hypothesis_rows
from nmtpipe.transforms.vocab.id_layout import IdLayout

_NEG_INF = -math.inf


@dataclass(frozen=True)
class Hypothesis:
    tokens: list[int]  # without the EOS
    score: float  # the length-normalised score it was ranked by
    log_prob: float  # the sum of its tokens' log-probabilities, EOS included if finished
    finished: bool  # ended in EOS (False only when a T2T search finished nothing)


_NOTHING = Hypothesis(tokens=[], score=0.0, log_prob=0.0, finished=True)  # of a blank line


class _Beams:
    """The state of the sentences still searching: alive and finished hypotheses."""

    def __init__(self, n: int, k: int, width: int, max_len: Tensor, start: int) -> None:
        device = max_len.device
        self.index = torch.arange(n, device=device)  # the sentence each row is
        self.max_len = max_len
        self.tokens = torch.full((n * k, 1), start, dtype=torch.long, device=device)
        self.alive = torch.full((n, k), _NEG_INF, device=device)
        self.alive[:, 0] = 0.0  # one live hypothesis at first, so no duplicates
        self.fin_tokens = torch.zeros((n, k, width), dtype=torch.long, device=device)
        self.fin_score = torch.full((n, k), _NEG_INF, device=device)
        self.fin_logp = torch.full((n, k), _NEG_INF, device=device)
        self.fin_len = torch.zeros((n, k), dtype=torch.long, device=device)

    def keep(self, rows: Tensor, k: int) -> None:
        """Keep the sentences `rows` (and their hypotheses)."""
        for name in ("index", "max_len", "alive", "fin_tokens", "fin_score", "fin_logp", "fin_len"):
            setattr(self, name, getattr(self, name).index_select(0, rows))
        self.tokens = self.tokens.index_select(0, hypothesis_rows(rows, k))


def _ban_repeats(lprobs: Tensor, tokens: Tensor, n: int) -> None:
    """fairseq's `--no-repeat-ngram-size`: no token that would complete an n-gram the
    hypothesis (`tokens`, without the start symbol) already has."""
    if tokens.shape[1] < n:
        return
    windows = tokens.unfold(1, n, 1)  # [rows, count, n]
    prefix = tokens[:, tokens.shape[1] - (n - 1) :]
    seen = (windows[:, :, : n - 1] == prefix[:, None, :]).all(dim=2)
    banned = torch.zeros_like(lprobs).scatter_reduce_(1, windows[:, :, -1], seen.float(), "amax")
    lprobs.masked_fill_(banned > 0, _NEG_INF)


def top_k(x: Tensor, k: int, chunk: int = 64) -> tuple[Tensor, Tensor]:
    """`x.topk(k, dim=1)` of a [rows, vocabulary] table, through the maxima of its
    `chunk`-wide column blocks: the k best values lie in the k blocks with the largest
    maxima, so only those k x chunk columns are ranked. A reduction without indices runs
    vectorised where `topk` ranks column by column (2-3x faster at 128 x 8,000). Equal
    values may come in another order than `topk`'s (which promises none)."""
    rows, n = x.shape
    if -(-n // chunk) <= k:
        return x.topk(k, dim=1)
    whole = n - n % chunk
    maxima = x[:, :whole].view(rows, -1, chunk).amax(dim=2)
    if whole < n:
        maxima = torch.cat([maxima, x[:, whole:].amax(dim=1, keepdim=True)], dim=1)
    blocks = maxima.topk(k, dim=1, sorted=False).indices.sort(dim=1).values
    columns = (blocks[:, :, None] * chunk + torch.arange(chunk, device=x.device)).view(rows, -1)
    outside = columns >= n  # the last block's columns past the vocabulary
    values = x.gather(1, columns.clamp(max=n - 1)).masked_fill_(outside, _NEG_INF)
    top, where = values.topk(k, dim=1)
    return top, columns.gather(1, where)


def _in_parents_slots(parents: Tensor) -> Tensor:
    """Where each of a sentence's `k` survivors goes (`parents` [rows, k]: the slots they
    grew from, in rank order): the best child of each parent stays in its parent's slot,
    the others fill the free slots in rank order. Returned as, per slot, the survivor it
    holds. A hypothesis that stays in its row costs no copy of its cached keys and values."""
    rows, k = parents.shape
    slots = torch.arange(k, device=parents.device)
    earlier = torch.ones(k, k, dtype=torch.bool, device=parents.device).tril(-1)
    first = ~((parents[:, :, None] == parents[:, None, :]) & earlier).any(dim=2)
    claimed = ((parents[:, :, None] == slots) & first[:, :, None]).any(dim=1)
    free = claimed.to(torch.int8).argsort(dim=1, stable=True)  # unclaimed slots first
    nth_other = ((~first).cumsum(dim=1) - 1).clamp(min=0)
    slot = torch.where(first, parents, free.gather(1, nth_other))
    return torch.empty_like(slot).scatter_(1, slot, slots.expand(rows, k))


class BeamSearch:
    """Searches translations of padded source batches with one model and vocabulary layout."""

    def __init__(self, model: Seq2Seq, layout: IdLayout, config: SearchConfig) -> None:
        self.model, self.layout, self.config = model, layout, config
        self.never = [i for i in (layout.pad, layout.bos) if i is not None and i != layout.eos]
        # Greedy (beam 1) finishes only on an EOS that is the best expansion, as T2T's
        # and fairseq's greedy decoders do; T2T's beam rules would let a runner-up EOS in.
        self._fairseq_finishing = config.convention == "fairseq" or config.beam == 1

    def _expansions(
        self,
        beams: _Beams,
        step: int,
        cache: DecoderCache | GruCache,
        autocast: AbstractContextManager,
    ) -> tuple[Tensor, Tensor]:
        """The best `2 x beam` next tokens of every live hypothesis, constrained, and their
        log-probabilities ([hypotheses, 2 x beam] each, best first).

        The constraints are applied after the normalisation, as fairseq applies them to
        its `log_softmax`; each hypothesis ranks its own tokens, so no table of beam x
        vocabulary scores is added up or ranked per sentence. `log_softmax` is one pass
        over the logits, where a separate log-sum-exp is several (2.4x slower at 128 x
        8,008 on the CPU)."""
        c, eos = self.config, self.layout.eos
        with autocast:
            if cache.group < c.beam:  # the first step: a source's hypotheses are one yet
                first = self.model.decode_step(beams.tokens[:: c.beam, -1], cache)
                logits = first.repeat_interleave(c.beam, dim=0)
                cache.widen(c.beam)
            else:
                logits = self.model.decode_step(beams.tokens[:, -1], cache)
        lprobs = F.log_softmax(logits.float(), dim=-1)
        raw_eos = lprobs[:, eos].clone()
        lprobs[:, self.never] = _NEG_INF
        if c.unk_penalty and self.layout.unk is not None:
            lprobs[:, self.layout.unk] -= c.unk_penalty
        if step < c.min_len:
            lprobs[:, eos] = _NEG_INF
        if c.no_repeat_ngram_size:
            _ban_repeats(lprobs, beams.tokens[:, 1:], c.no_repeat_ngram_size)
        if c.convention == "fairseq":  # EOS after max_len tokens, nothing else
            at_end = torch.nonzero((beams.max_len == step).repeat_interleave(c.beam)).view(-1)
            if at_end.numel():
                lprobs.index_fill_(0, at_end, _NEG_INF)
                lprobs[at_end, eos] = raw_eos[at_end]
        return top_k(lprobs, min(2 * c.beam, lprobs.shape[1]))

    @torch.inference_mode()
    def __call__(
        self, src: Tensor, autocast: AbstractContextManager | None = None
    ) -> list[list[Hypothesis]]:
        """The `nbest` hypotheses of each row of `src` ([batch, src_len], right-padded,
        each row ending in EOS), best first. `autocast`: e.g. bf16 on CUDA."""
        autocast = autocast or nullcontext()
        c, k, eos = self.config, self.config.beam, self.layout.eos
        n = src.shape[0]
        max_len = c.max_lengths((src != self.layout.pad).sum(dim=1))
        steps = int(max_len.max()) + (1 if c.convention == "fairseq" else 0)
        with autocast:
            memory, mask = self.model.encode(src)
            # One hypothesis per source until the first step has run: the search starts
            # from one, so the decoder runs the first step once per source, not k times.
            cache = self.model.start_decoding(memory, mask, group=1, steps=steps)
        beams = _Beams(n, k, steps, max_len, start=eos)
        results: list[list[Hypothesis]] = [[] for _ in range(n)]
        for step in range(steps):
            rows = beams.alive.shape[0]
            top_logp, top_tok = self._expansions(beams, step, cache, autocast)
            width = top_logp.shape[1]
            expanded = (beams.alive[:, :, None] + top_logp.view(rows, k, width)).view(rows, -1)
            cand_logp, flat = expanded.topk(min(2 * k, k * width), dim=1)
            cand_beam, cand_tok = flat // width, top_tok.view(rows, -1).gather(1, flat)
            source_rows = torch.arange(rows, device=src.device)[:, None] * k + cand_beam
            self._finish(beams, step + 1, cand_logp, cand_tok == eos, source_rows)
            alive_logp, pos = cand_logp.masked_fill(cand_tok == eos, _NEG_INF).topk(k, dim=1)
            placed = _in_parents_slots(cand_beam.gather(1, pos))
            pos, alive_logp = pos.gather(1, placed), alive_logp.gather(1, placed)
            survivors = source_rows.gather(1, pos).view(-1)
            beams.tokens = torch.cat(
                [beams.tokens.index_select(0, survivors), cand_tok.gather(1, pos).view(-1, 1)], 1
            )
            beams.alive = alive_logp
            cache.reorder(survivors)
            done = self._done(beams, step + 1)
            if bool(done.any()):
                for r in torch.nonzero(done).view(-1).tolist():
                    results[int(beams.index[r])] = self._best(beams, r)
                keep = torch.nonzero(~done).view(-1)
                if keep.numel() == 0:
                    break
                beams.keep(keep, k)
                cache.keep_sources(keep)
        return results

    def translate(
        self,
        sources: Sequence[np.ndarray],
        device: torch.device,
        autocast: AbstractContextManager | None = None,
    ) -> list[list[Hypothesis]]:
        """The n-best of each source (id arrays ending in EOS, of any lengths), searched
        as one right-padded batch on `device`.

        A source of nothing but EOS (a blank line) has nothing to translate: its n-best
        is `nbest` empty hypotheses of score 0, found without a search, as CTranslate2
        answers it. `prepare` keeps no empty pair, so no model has learnt what to say
        to one, and a translation of a blank line would be noise."""
        results = [[_NOTHING] * self.config.nbest for _ in sources]
        live = [i for i, ids in enumerate(sources) if ids.size > 1]
        if not live:
            return results
        src = torch.full((len(live), max(sources[i].size for i in live)), self.layout.pad)
        for row, i in enumerate(live):
            src[row, : sources[i].size] = torch.from_numpy(sources[i].astype(np.int64, copy=False))
        for i, hyps in zip(live, self(src.to(device), autocast), strict=True):
            results[i] = hyps
        return results

    def _finish(self, beams: _Beams, length: int, cand_logp: Tensor, is_eos: Tensor,
                source_rows: Tensor) -> None:  # fmt: skip
        """Move the expansions that end in EOS into the finished set (as the convention says)."""
        k = self.config.beam
        eligible = is_eos & torch.isfinite(cand_logp)
        if self._fairseq_finishing:  # the top `beam` only, until `beam` finished
            eligible[:, k:] = False
            room = k - torch.isfinite(beams.fin_score).sum(dim=1, keepdim=True)
            eligible &= eligible.cumsum(dim=1) <= room
        if not bool(eligible.any()):
            return
        width = beams.fin_tokens.shape[2]
        prefix = beams.tokens[source_rows.view(-1), 1:].view(*source_rows.shape, length - 1)
        # EOS after the prefix; the rest of the row is never read (fin_len says where to stop).
        new_tokens = F.pad(prefix, (0, width - length + 1), value=self.layout.eos)
        new_score = self.config.score(cand_logp, length).masked_fill(~eligible, _NEG_INF)
        scores = torch.cat([beams.fin_score, new_score], dim=1)
        beams.fin_score, pick = scores.topk(k, dim=1)
        pick3 = pick[:, :, None].expand(-1, -1, width)
        beams.fin_tokens = torch.cat([beams.fin_tokens, new_tokens], 1).gather(1, pick3)
        new_len = torch.full_like(cand_logp, length, dtype=torch.long)
        beams.fin_logp = torch.cat([beams.fin_logp, cand_logp], 1).gather(1, pick)
        beams.fin_len = torch.cat([beams.fin_len, new_len], 1).gather(1, pick)

    def _done(self, beams: _Beams, length: int) -> Tensor:
        """Per sentence: is its search over after `length` tokens?"""
        c = self.config
        if c.convention == "fairseq":
            out_of_room = length > beams.max_len
        else:
            out_of_room = length >= beams.max_len
        if self._fairseq_finishing:
            return out_of_room | (torch.isfinite(beams.fin_score).sum(dim=1) >= c.beam)
        best_possible = beams.alive.max(dim=1).values / c.gnmt_penalty(beams.max_len, beams.alive)
        # T2T's bound, on the n-th best finished: n = 1 is its `stop_early`, n = beam its
        # exhaustive variant (the finished set is sorted, unfilled slots are -inf).
        return out_of_room | (beams.fin_score[:, c.nbest - 1] > best_possible)

    def _best(self, beams: _Beams, r: int) -> list[Hypothesis]:
        """Sentence row `r`'s n-best: its finished hypotheses by score, then, if fewer
        finished, its alive ones by log-probability (their score, as in T2T)."""
        nbest, k = self.config.nbest, self.config.beam
        out = [
            Hypothesis(
                tokens=beams.fin_tokens[r, j, : int(beams.fin_len[r, j]) - 1].tolist(),
                score=float(beams.fin_score[r, j]),
                log_prob=float(beams.fin_logp[r, j]),
                finished=True,
            )
            for j in range(nbest)
            if math.isfinite(float(beams.fin_score[r, j]))
        ]
        alive = beams.tokens[r * k : (r + 1) * k, 1:].tolist()
        logps = beams.alive[r].tolist()  # slots are not in rank order
        for j in sorted(range(k), key=lambda j: -logps[j])[: nbest - len(out)]:
            if math.isfinite(logps[j]):
                out.append(Hypothesis(alive[j], logps[j], logps[j], finished=False))
        return out
