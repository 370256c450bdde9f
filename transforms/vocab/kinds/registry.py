"""The vocabulary kinds by `--model` name, fairseq's `register_bpe` table made explicit:
a new kind is its module in this folder and its class in `_CLASSES`."""

from __future__ import annotations

from nmtpipe.transforms.vocab.kinds.base import VocabKind
from nmtpipe.transforms.vocab.kinds.hf import HfKind
from nmtpipe.transforms.vocab.kinds.spm import SpmKind
from nmtpipe.transforms.vocab.kinds.t2t import T2tKind

_CLASSES: tuple[type[VocabKind], ...] = (T2tKind, SpmKind, HfKind)
KINDS: dict[str, VocabKind] = {model: cls(model) for cls in _CLASSES for model in cls.MODELS}
MODELS = tuple(KINDS)  # `--model`'s choices, in this order
# what each kind may write, for the driver's pattern of the files it owns
FILE_PATTERNS = tuple(dict.fromkeys(cls.FILE_PATTERN for cls in _CLASSES))


def kind_of(model: str) -> VocabKind:
    """The kind of a vocabulary's `model` (a manifest's, or `--model`)."""
    try:
        return KINDS[model]
    except KeyError:
        raise ValueError(
            f"unknown vocabulary model {model!r}; choose from {', '.join(MODELS)}"
        ) from None
