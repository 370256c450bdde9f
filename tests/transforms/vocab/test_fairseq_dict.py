"""fairseq dict.txt files, checked against what fairseq's own Dictionary.load reads."""

from __future__ import annotations

import hashlib
import json

import pytest

from nmtpipe.transforms.vocab.fairseq_dict import SPECIALS, dict_text, read_dict
from tests.helpers import DATA

GOLDEN = DATA / "golden"
TRICKY = ["._", " ", "a b", "'", '"', "#", "#fairseq", "\u3000_", "\\u_", "\\92;", "😀", "x" * 50,
          "trailing ", " leading", "<s>x", "madeupword"]  # fmt: skip


def test_fairseq_reads_what_we_write():
    text = dict_text(TRICKY, list(range(len(TRICKY), 0, -1)))
    assert text == (GOLDEN / "fairseq-dict-tricky.txt").read_text(encoding="utf-8")
    fairseq = json.loads((GOLDEN / "fairseq-dict-tricky.json").read_text())
    symbols = [*SPECIALS, *(s for s, _ in read_dict(text))]
    assert fairseq["ok"] and fairseq["len"] == len(symbols) == 24  # padded to a multiple of 8
    assert hashlib.sha256("\n".join(symbols).encode()).hexdigest() == fairseq["symbols_sha256"]
    assert fairseq["first_symbols"] == symbols[:10]


@pytest.mark.parametrize("bad", ["", "a\nb", "a\rb", "<unk>", "dup"])
def test_symbols_fairseq_cannot_hold(bad):
    symbols = ["dup", bad] if bad == "dup" else [bad]
    with pytest.raises(ValueError, match="fairseq cannot store"):
        dict_text(symbols, [1] * len(symbols))


def test_padding():
    assert dict_text(["a", "b", "c", "d"], [1, 1, 1, 1]).count("\n") == 4  # 8 with the specials
    assert dict_text(["a"], [1], padding_factor=1) == "a 1\n"
    assert dict_text(["a"], [1]).endswith("madeupword0002 0\n")
