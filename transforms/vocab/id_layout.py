"""Where the special symbols sit in each id space, and how vocabulary ids become fairseq's.

This is the one place that defines them. A Tensor2Tensor vocabulary has `<pad>`=0 and
`<EOS>`=1 and then its subtokens; fairseq's dictionaries have `<s>`=0, `<pad>`=1,
`</s>`=2, `<unk>`=3 and then their symbols. nmtpipe's SentencePiece models are trained
with fairseq's layout, so their ids need no mapping. A T2T vocabulary's fairseq
dictionary lists the subtokens from id 2 on in order (reserved tokens beyond the first
two included), so subtoken k ≥ 2 is fairseq symbol k + 2, `<EOS>` is `</s>` and
`<pad>` is `<pad>`. Each vocabulary kind (`kinds/`) says which layout its ids have.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np


@dataclass(frozen=True)
class IdLayout:
    """The ids of the special symbols of one id space (None: the space has none)."""

    pad: int
    eos: int
    bos: int | None = None
    unk: int | None = None
    first_symbol: int = 0  # the first id of an ordinary symbol

    def as_dict(self) -> dict[str, int | None]:
        return asdict(self)


T2T = IdLayout(pad=0, eos=1, first_symbol=2)
FAIRSEQ = IdLayout(bos=0, pad=1, eos=2, unk=3, first_symbol=4)


def to_fairseq(layout: IdLayout, ids: np.ndarray) -> np.ndarray:
    """Ids of a vocabulary with this layout → fairseq dictionary ids (a new array for
    T2T's; `ids` itself for fairseq's)."""
    if layout == FAIRSEQ:
        return ids
    shift = FAIRSEQ.first_symbol - layout.first_symbol
    return np.where(ids >= layout.first_symbol, ids + shift, ids + (FAIRSEQ.pad - layout.pad))


def from_fairseq(layout: IdLayout, ids: np.ndarray) -> np.ndarray:
    """fairseq dictionary ids → ids of a vocabulary with this layout; for T2T's, `<s>`
    and `<unk>` (which a T2T vocabulary lacks) become -1, which its decoder skips."""
    if layout == FAIRSEQ:
        return ids
    shift = FAIRSEQ.first_symbol - layout.first_symbol
    shifted = np.where(ids >= FAIRSEQ.first_symbol, ids - shift, -1)
    shifted[ids == FAIRSEQ.pad] = layout.pad
    shifted[ids == FAIRSEQ.eos] = layout.eos
    return shifted
