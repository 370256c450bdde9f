"""The registry of vocabulary kinds: every `--model` name has one, in `--model`'s order."""

from __future__ import annotations

import re

import pytest

from nmtpipe.transforms.vocab.counts import JOINED
from nmtpipe.transforms.vocab.id_layout import FAIRSEQ, T2T
from nmtpipe.transforms.vocab.kinds.registry import FILE_PATTERNS, MODELS, kind_of


def test_every_model_has_a_kind():
    assert MODELS == ("t2t", "unigram", "bpe", "wordpiece", "bpe-hf", "unigram-hf")
    assert [kind_of(m).model for m in MODELS] == list(MODELS)
    assert kind_of("t2t").layout == T2T and not kind_of("t2t").encodes_outside_gil
    assert all(kind_of(m).layout == FAIRSEQ and kind_of(m).encodes_outside_gil for m in MODELS[1:])
    with pytest.raises(ValueError, match="unknown vocabulary model 'bpe2'"):
        kind_of("bpe2")


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("side", [JOINED, "en"])
def test_a_kinds_files_are_the_drivers(model, side):
    ours = re.compile("^(" + "|".join(FILE_PATTERNS) + ")$")
    assert all(ours.match(name) for name in kind_of(model).files(side))
    assert all((side == JOINED) != (".en." in name) for name in kind_of(model).files(side))


def test_only_t2t_is_refused_by_export():
    assert [m for m in MODELS if kind_of(m).export_refusal] == ["t2t"]
