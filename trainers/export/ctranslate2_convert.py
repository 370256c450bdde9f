"""A Hugging Face export made into a CTranslate2 model by CTranslate2's own converter.

CTranslate2's Transformers converter maps MarianMT weights (`MarianMTLoader`) with two
assumptions of Marian-NMT's own models that nmtpipe's do not share, so the loader here
keeps the rest of it and changes only those: the decoder starts from the embedding of
EOS (nmtpipe's, fairseq's `prev_output_tokens`), not from a zero vector; and no
vocabulary entry is dropped (Marian's converted models carry an extra `<pad>` last,
nmtpipe's pad has its own id). Offline: it reads only the export's folder.
"""

from __future__ import annotations

from typing import Any

import torch
import transformers
from ctranslate2.converters.converter import Converter
from ctranslate2.converters.transformers import BartLoader, MarianMTLoader


class _Loader(MarianMTLoader):
    def get_model_spec(self, model: Any) -> Any:
        model.config.normalize_before = False
        model.config.normalize_embedding = False
        return BartLoader.get_model_spec(self, model)  # every row kept

    def set_decoder(self, spec: Any, decoder: Any) -> None:
        BartLoader.set_decoder(self, spec, decoder)  # starts from the start token's embedding

    def get_vocabulary(self, model: Any, tokenizer: Any) -> list[str]:
        return BartLoader.get_vocabulary(self, model, tokenizer)


class ExportConverter(Converter):
    """Converts the MarianMT folder `nmtpipe export --format hf` writes."""

    def __init__(self, hf_folder: str) -> None:
        self.hf_folder = hf_folder

    def _load(self) -> Any:
        with torch.no_grad():
            model = transformers.MarianMTModel.from_pretrained(self.hf_folder).eval()
            tokenizer = transformers.AutoTokenizer.from_pretrained(self.hf_folder)
            return _Loader()(model, tokenizer)


def convert(hf_folder: str, output: str, quantization: str | None) -> None:
    """Write the CTranslate2 model of `hf_folder` into the local folder `output`."""
    ExportConverter(hf_folder).convert(output, quantization=quantization, force=True)
