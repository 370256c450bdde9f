"""BLEU on the validation split while training (`--eval-bleu`, `--best-checkpoint-metric
bleu`), as fairseq's `--eval-bleu` does it: beam search as `nmtpipe decode` runs it, each
rank translating its share of the sentences, the sacreBLEU statistics summed over ranks.
"""

from __future__ import annotations

from contextlib import AbstractContextManager

import numpy as np

from nmtpipe.trainers.data.batching import length_sorted_batches
from nmtpipe.trainers.data.decode_inputs import TextCodec, split_sentences
from nmtpipe.trainers.generate.scoring import CorpusScores, default_tokenize
from nmtpipe.trainers.model.beam_search import BeamSearch
from nmtpipe.trainers.model.build import Seq2Seq
from nmtpipe.trainers.model.search_config import SearchConfig
from nmtpipe.trainers.runtime.distributed import Ranks
from nmtpipe.transforms.formats.encoded_dataset import EncodedDataset
from nmtpipe.transforms.vocab.vocabulary import open_vocabulary


class ValidBleu:
    """This rank's share of a split, ready to translate and score at every validation."""

    def __init__(
        self, data: EncodedDataset, split: str, ranks: Ranks, beam: int, max_tokens: int
    ) -> None:
        self.ranks, self.layout = ranks, data.layout
        vocab = open_vocabulary(data.manifest["vocab"]["url"])
        self.codec = TextCodec(vocab, data.languages, data.format)
        sentences = split_sentences(data[split], split, data.manifest, self.codec)
        mine = [s for s in sentences if s.index % ranks.world == ranks.rank]
        self.sources = [s.ids for s in mine]
        self.references = [s.reference or "" for s in mine]
        lengths = np.array([ids.size for ids in self.sources], dtype=np.int64)
        self.batches = length_sorted_batches(lengths, max_tokens)
        self.search = SearchConfig(beam=beam)
        self.tokenize = default_tokenize(data.languages["tgt"])

    def __call__(self, model: Seq2Seq, autocast: AbstractContextManager) -> dict[str, float]:
        """`valid_bleu` and `valid_chrf` of the model's best translations."""
        search = BeamSearch(model, self.layout, self.search)
        hypotheses = [""] * len(self.sources)
        for batch in self.batches:
            found = search.translate([self.sources[i] for i in batch], self.ranks.device, autocast)
            for i, nbest in zip(batch, found, strict=True):
                tokens = nbest[0].tokens if nbest else []
                hypotheses[i] = self.codec.decode(self.codec.tgt_lang, tokens)
        scores = CorpusScores(self.tokenize)
        scores.add(hypotheses, self.references)
        result = scores.summed(self.ranks.sum).result()
        return {"valid_bleu": result.get("bleu", 0.0), "valid_chrf": result.get("chrf", 0.0)}
