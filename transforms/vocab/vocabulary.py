"""A committed vocabulary, loaded for encoding: text in, ids with EOS out, in batches.

`nmtpipe vocab` commits Tensor2Tensor subword files, SentencePiece models or `tokenizers`
`tokenizer.json` files, one joined or one per language, with fairseq `dict.{lang}.txt`
files beside them. This
module opens such an output by its manifest and gives one `SideEncoder` per language.
Ids stay in the vocabulary's own space (`transforms/id_layout.py` maps them to
fairseq's); the integer type that holds them is chosen here, once.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import sentencepiece as spm

from nmtpipe.transforms.storage import fsio, manifest
from nmtpipe.transforms.vocab import hf_vocab
from nmtpipe.transforms.vocab.counts import JOINED
from nmtpipe.transforms.vocab.fairseq_dict import SPECIALS, read_dict
from nmtpipe.transforms.vocab.id_layout import IdLayout, layout_of
from nmtpipe.transforms.vocab.subword import SubwordTextEncoder

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


def encodes_outside_gil(model: str) -> bool:
    """Whether this kind of vocabulary encodes in native code that releases the GIL
    (SentencePiece, `tokenizers`), so that threads of one process encode on several
    cores; Tensor2Tensor's encoder is Python."""
    return model != "t2t"


class SideEncoder:
    """One language's vocabulary: `encode_batch` turns lines into ids ending in EOS,
    `decode` ids back into text."""

    def __init__(self, model: str, data: bytes, dictionary_size: int) -> None:
        self.model = model
        self.layout: IdLayout = layout_of(model)
        self.dictionary_size = dictionary_size
        if model == "t2t":
            self._t2t = SubwordTextEncoder.from_text(data.decode("utf-8"))
            self.vocab_size = self._t2t.vocab_size
        elif model in hf_vocab.KINDS:
            self._hf = hf_vocab.for_encoding(data)
            self.vocab_size = self._hf.get_vocab_size(with_added_tokens=False)
        else:
            self._spm = spm.SentencePieceProcessor(model_proto=data)
            self.vocab_size = self._spm.get_piece_size()

    def encode_batch(self, lines: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """The ids of every line, EOS appended, concatenated (int32), and each line's
        length including EOS (int64)."""
        if self.model == "t2t":
            return _with_eos(*self._t2t.encode_lines(list(lines)), self.layout.eos)
        if self.model in hf_vocab.KINDS:  # its post-processor appends the layout's EOS
            encoded = [e.ids for e in self._hf.encode_batch_fast(list(lines))]
        else:  # the model's eos_id is the layout's (spm_vocab trains it so)
            encoded = self._spm.encode(list(lines), add_eos=True, num_threads=1)
        lengths = np.fromiter(map(len, encoded), np.int64, len(encoded))
        flat = np.fromiter(itertools.chain.from_iterable(encoded), np.int32, int(lengths.sum()))
        return flat, lengths

    def decode(self, ids: Sequence[int]) -> str:
        """The text of ids in this vocabulary's own space (without EOS): T2T's `decode`
        or SentencePiece's or the `tokenizer.json`'s."""
        if self.model == "t2t":
            return self._t2t.decode(ids)
        if self.model in hf_vocab.KINDS:  # `<unk>` shown, as SentencePiece shows it
            control = {self.layout.bos, self.layout.pad, self.layout.eos}
            kept = [i for i in map(int, ids) if i not in control]
            return self._hf.decode(kept, skip_special_tokens=False)
        return self._spm.decode([int(i) for i in ids])

    def piece(self, i: int) -> str:
        """Id `i`'s piece as the vocabulary writes it (`▁the` for SentencePiece, `the_`
        for T2T), in this vocabulary's own id space: unlike `decode`, it shows where
        words start or end."""
        if self.model == "t2t":
            return self._t2t.subtokens[i]
        if self.model in hf_vocab.KINDS:
            return self._hf.id_to_token(i)
        return self._spm.id_to_piece(i)

    def outside(self, tokens: Sequence[str]) -> np.ndarray:
        """Which tokens this vocabulary cannot spell with its own pieces: those with
        characters outside a T2T alphabet (escaped as `\\NNN;`), or that SentencePiece
        or `tokenizers` encodes with `<unk>`."""
        if self.model == "t2t":
            alphabet = self._t2t.alphabet
            return np.fromiter(
                (any(c not in alphabet or c == "\n" for c in t) for t in tokens), bool, len(tokens)
            )
        unk = self.layout.unk
        if self.model in hf_vocab.KINDS:
            batch = self._hf.encode_batch_fast(list(tokens), add_special_tokens=False)
            encoded = [e.ids for e in batch]
        else:
            encoded = self._spm.encode(list(tokens), num_threads=1)
        return np.fromiter((unk in ids for ids in encoded), bool, len(tokens))

    def unknowns(self, ids: np.ndarray) -> int:
        """How many ids are `<unk>` (a T2T vocabulary escapes instead: never any)."""
        return 0 if self.layout.unk is None else int(np.count_nonzero(ids == self.layout.unk))


def _with_eos(flat: np.ndarray, lengths: np.ndarray, eos: int) -> tuple[np.ndarray, np.ndarray]:
    """Concatenated lines' ids with `eos` after each line."""
    ends = np.cumsum(lengths + 1) - 1
    out = np.full(flat.size + lengths.size, eos, dtype=np.int32)
    body = np.ones(out.size, dtype=bool)
    body[ends] = False
    out[body] = flat
    return out, lengths + 1


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
            _BUILT[key] = SideEncoder(self.model, data, len(SPECIALS) + len(entries))
        return _BUILT[key]


def open_vocabulary(url: str) -> Vocabulary:
    """The committed vocabulary at `url` (its files' sha256s are checked as they are
    read)."""
    return Vocabulary(*manifest.open_committed(url, KIND, "vocab"))
