"""A committed vocabulary, loaded for encoding: text in, ids with EOS out, in batches.

`nmtpipe vocab` commits Tensor2Tensor subword files, SentencePiece models or `tokenizers`
`tokenizer.json` files, one joined or one per language, with fairseq `dict.{lang}.txt`
files beside them. This
module opens such an output by its manifest and gives one `SideEncoder` per language,
made by the vocabulary's kind (`kinds/`).
Ids stay in the vocabulary's own space (`id_layout.py` maps them to
fairseq's); the integer type that holds them is chosen here, once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.vocab.counts import JOINED
from nmtpipe.transforms.vocab.fairseq_dict import SPECIALS, read_dict
from nmtpipe.transforms.vocab.kinds.base import SideEncoder, VocabKind
from nmtpipe.transforms.vocab.kinds.registry import kind_of

KIND = "nmtpipe.vocab"
# fairseq's `best_fitting_int_dtype`: below 65500 symbols uint16, else uint32.
_UINT16_LIMIT = 65500


def fairseq_dtype(dictionary_size: int) -> np.dtype:
    """The dtype `fairseq-preprocess` gives a `.bin` for a dictionary of this size."""
    if dictionary_size < _UINT16_LIMIT:
        return np.dtype(np.uint16)
    return np.dtype(np.uint32) if dictionary_size < 2**32 - 1 else np.dtype(np.int64)


def arrow_dtype(vocab_size: int) -> np.dtype:
    """uint16 while every id fits (the same limit as fairseq's), else int32."""
    return np.dtype(np.uint16) if vocab_size < _UINT16_LIMIT else np.dtype(np.int32)


# Encoders built in this process, by their kind and their two files' sha256s (checked
# as the files are read: equal sums, equal files). A refresh asks for the same
# vocabulary's encoders in its drift check, its encode and its report, and parsing a
# vocabulary costs more than reading and checking it.
_BUILT: dict[tuple[str, str, str], SideEncoder] = {}
_BUILT_LIMIT = 4


@dataclass(frozen=True)
class Vocabulary:
    """A committed `nmtpipe vocab` output: where it is, what it says, its files."""

    root: str
    doc: dict[str, Any]

    @property
    def model(self) -> str:
        return self.doc["model"]

    @property
    def kind(self) -> VocabKind:
        return kind_of(self.model)

    @property
    def fingerprint(self) -> str:
        return self.doc["fingerprint"]

    def side_of(self, lang: str) -> str:
        return JOINED if self.doc["options"]["joined"] else lang

    def dict_url(self, lang: str) -> str:
        return fsio.join(self.root, f"dict.{lang}.txt")

    def read(self, url: str) -> bytes:
        """A file of this vocabulary, checked against its sha256 as it is read."""
        return manifest.read_entry(self.root, manifest.entry_of(self.root, self.doc, url))

    def encoder(self, lang: str) -> SideEncoder:
        """The encoder of `lang`: its files are read and checked at every call, but
        parsed once per process (the encoder is shared: the caller must not change it)."""
        model_file = self.doc["vocabularies"][self.side_of(lang)]["files"][0]
        model = manifest.entry_of(self.root, self.doc, fsio.join(self.root, model_file))
        dictionary = manifest.entry_of(self.root, self.doc, self.dict_url(lang))
        data = manifest.read_entry(self.root, model)
        listed = manifest.read_entry(self.root, dictionary)
        key = (self.model, model["sha256"], dictionary["sha256"])  # both just checked
        if key not in _BUILT:
            if len(_BUILT) >= _BUILT_LIMIT:
                _BUILT.pop(next(iter(_BUILT)))
            entries = read_dict(listed.decode("utf-8"))
            _BUILT[key] = self.kind.encoder(data, len(SPECIALS) + len(entries))
        return _BUILT[key]


def open_vocabulary(url: str, option: str | None = None) -> Vocabulary:
    """The committed vocabulary at `url` (its files' sha256s are checked as they are
    read), named by the user's `option`, when it was."""
    return Vocabulary(*manifest.open_committed(url, KIND, "vocab", option=option))
