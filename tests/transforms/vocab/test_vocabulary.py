"""A vocabulary loaded for encoding: its ids in fairseq's space, the dtype that holds them."""

from __future__ import annotations

import numpy as np
import pytest

from nmtpipe.transforms.vocab import id_layout
from nmtpipe.transforms.vocab.kinds.registry import kind_of
from nmtpipe.transforms.vocab.vocabulary import arrow_dtype


def test_t2t_ids_map_to_fairseq_dictionary_ids():
    ids = np.array([0, 1, 2, 3, 8191], dtype=np.int64)
    assert id_layout.to_fairseq(kind_of("t2t").layout, ids).tolist() == [1, 2, 4, 5, 8193]
    assert id_layout.to_fairseq(kind_of("bpe").layout, ids) is ids
    back = id_layout.from_fairseq(id_layout.T2T, np.array([0, 1, 2, 3, 4, 8193]))
    assert back.tolist() == [-1, 0, 1, -1, 2, 8191]
    assert id_layout.from_fairseq(kind_of("bpe").layout, ids) is ids


@pytest.mark.parametrize(
    ("size", "dtype"), [(8192, np.uint16), (65499, np.uint16), (65500, np.int32)]
)
def test_arrow_dtype(size, dtype):
    assert arrow_dtype(size) == dtype
