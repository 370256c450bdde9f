"""`nmtpipe translate --engine ctranslate2`: a CTranslate2 export as the translator.

The export's `tokenizer.json` normalises and encodes raw text as nmtpipe does; its
tokens go to `ctranslate2.Translator.translate_batch` with the search options of
`nmtpipe decode --lenpen` (CTranslate2 scores by score / length ** lenpen and stops a
sentence when `beam` hypotheses finished, as fairseq does). Imported only by that engine.
"""

from __future__ import annotations

import os

import ctranslate2
import numpy as np
import torch
from tokenizers import Tokenizer

from nmtpipe.trainers.export.export_config import KIND
from nmtpipe.trainers.model.search_config import SearchConfig
from nmtpipe.transforms.errors import InputError
from nmtpipe.transforms.storage import manifest
from nmtpipe.transforms.vocab.tokenizer_json import TOKENIZER_FILE


class CTranslate2Engine:
    """The export in folder `model`, searching as `search` says; inputs longer than
    `max_source_positions` are truncated (EOS kept); `threads` 0: every core.

    The folder is checked against its manifest first, every file's size and sha256, as
    every reader of a committed output checks it: a missing, truncated or altered file
    is one line naming it, never CTranslate2's own error from deep in its loader."""

    def __init__(
        self, model: str, search: SearchConfig, max_source_positions: int, threads: int
    ) -> None:
        _, doc = manifest.open_committed(model, KIND, "export", checksums=True)
        if doc.get("format") != "ctranslate2":
            raise InputError(f"{model} holds a {doc.get('format')} export; --engine "
                             "ctranslate2 reads one made with --format ctranslate2")  # fmt: skip
        path = os.path.join(model, TOKENIZER_FILE)
        self.tokenizer = Tokenizer.from_file(path)
        self.tokenizer.encode_special_tokens = True
        unk = self.tokenizer.token_to_id("<unk>")
        self._control = {i for i in self.tokenizer.get_added_tokens_decoder() if i != unk}
        threads = threads or os.cpu_count() or 1
        self.translator = ctranslate2.Translator(model, device="cpu", inter_threads=1,
                                                 intra_threads=threads)  # fmt: skip
        self.search, self.limit = search, max_source_positions

    def encode(self, lines: list[str]) -> list[np.ndarray]:
        limit = self.limit
        out = []
        for encoding in self.tokenizer.encode_batch(lines):
            tokens = encoding.tokens
            out.append(np.array(tokens if len(tokens) <= limit else
                                [*tokens[: limit - 1], tokens[-1]], dtype=object))  # fmt: skip
        return out

    def translate(self, sources: list[np.ndarray]) -> list[list[tuple[str, float]]]:
        c = self.search
        lengths = [s.size for s in sources]
        results = self.translator.translate_batch(
            [s.tolist() for s in sources], beam_size=c.beam, num_hypotheses=c.nbest,
            length_penalty=c.lenpen,
            # fairseq's limit, tokens before the forced EOS, for the batch's longest source
            # (CTranslate2 takes one per batch); CTranslate2's counts the EOS.
            max_decoding_length=int(c.max_lengths(torch.tensor(lengths)).max()) + 1,
            min_decoding_length=c.min_len, no_repeat_ngram_size=c.no_repeat_ngram_size,
            return_scores=True,
        )  # fmt: skip
        return [
            [(self._text(hyp), float(score))
             for hyp, score in zip(r.hypotheses, r.scores, strict=True)]
            for r in results
        ]  # fmt: skip

    def _text(self, tokens: list[str]) -> str:
        """Detokenised as SentencePiece does: unknown pieces as " ⁇ ", control symbols dropped."""
        ids = [self.tokenizer.token_to_id(t) for t in tokens]
        ids = [i for i in ids if i not in self._control]
        # SentencePiece drops every whitespace-only piece at the start, Metaspace only
        # the first one's space.
        start = 0
        while start < len(ids) and not self.tokenizer.id_to_token(ids[start]).strip("▁"):
            start += 1
        return self.tokenizer.decode(ids[start:], skip_special_tokens=False)
