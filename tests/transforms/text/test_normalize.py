"""Normalisation against SentencePiece's own `nmt_nfkc`, and its invariants."""

from __future__ import annotations

import pytest
import sentencepiece as spm
from hypothesis import given, settings
from hypothesis import strategies as st

from nmtpipe.transforms.text import normalize
from nmtpipe.transforms.text.normalize import NormalizeConfig, Normalizer
from tests.helpers import example_lines


def reference(rule: str, collapse: bool = True) -> spm.SentencePieceNormalizer:
    return spm.SentencePieceNormalizer(
        rule_name=rule,
        add_dummy_prefix=False,
        escape_whitespaces=False,
        remove_extra_whitespaces=collapse,
    )


def without_extras(text: str) -> str:
    """What nmtpipe removes before SentencePiece sees the text: NUL and C1 controls."""
    return "".join(
        " " if c == "\x85" else c
        for c in text
        if c == "\x85" or (c != "\x00" and not "\x80" <= c <= "\x9f")
    )


line_text = st.text(
    alphabet=st.characters(blacklist_characters="\n", blacklist_categories=("Cs",)), max_size=30
)


@pytest.mark.parametrize("rule", ["nmt_nfkc", "nmt_nfkc_cf"])
@pytest.mark.parametrize("collapse", [True, False])
def test_every_ascii_character_matches_sentencepiece(rule, collapse):
    # ASCII lines take a pure-Python path; it must be SentencePiece's rules exactly.
    ref = reference(rule, collapse)
    normalizer = Normalizer(NormalizeConfig(rule, collapse_whitespace=collapse))
    chars = [chr(c) for c in range(128) if c != 10]
    lines = [f"a{c}b" for c in chars] + [f"{c} {c}  {c}" for c in chars] + chars
    assert normalizer.batch(lines) == [ref.normalize(without_extras(x)) for x in lines]


@settings(max_examples=300, deadline=None)
@given(st.lists(line_text, max_size=10))
def test_default_is_sentencepiece_nmt_nfkc_minus_nul_and_c1(lines):
    ref = reference("nmt_nfkc")
    assert Normalizer(NormalizeConfig()).batch(lines) == [
        ref.normalize(without_extras(x)) for x in lines
    ]


@settings(max_examples=200, deadline=None)
@given(st.lists(line_text, max_size=10), st.sampled_from(["nmt_nfkc", "nfkc", "nfc", "none"]))
def test_batch_equals_line_by_line_and_is_idempotent(lines, form):
    normalizer = Normalizer(NormalizeConfig(form))
    once = normalizer.batch(lines)
    assert once == [normalizer(x) for x in lines]
    assert normalizer.batch(once) == once


@settings(max_examples=200, deadline=None)
@given(line_text, st.sampled_from(["nmt_nfkc", "nfkc", "nfc", "none"]))
def test_output_has_no_controls_and_single_inner_spaces(text, form):
    out = Normalizer(NormalizeConfig(form))(text)
    assert out == out.strip(" ")
    assert "  " not in out
    assert not any(c in out for c in "\x00\t\r\x0b\x0c\x7f\x85\u2028")


@pytest.mark.parametrize("name", ["tatoeba-cmn", "ntrex128-enzh"])
@pytest.mark.parametrize("lang", ["en", "zh"])
def test_python_nfkc_agrees_with_sentencepiece_on_real_data(name, lang):
    lines = [line.removesuffix("\r") for line in example_lines(name, lang)]
    assert Normalizer(NormalizeConfig("nfkc")).batch(lines) == Normalizer(NormalizeConfig()).batch(
        lines
    )


def test_examples_from_the_data():
    n = Normalizer(NormalizeConfig())
    assert n("請\u200b\u200b借我你的書。") == "請 借我你的書。"  # zero-width spaces
    assert n("“谢谢你的帮助。”\u3000“不用谢。”") == "“谢谢你的帮助。” “不用谢。”"
    assert n("ＡＢＣ１２３！") == "ABC123!"
    assert n("品牌  Truly。") == "品牌 Truly。"
    assert n("a\x00b\x85c\x93") == "ab c"


def test_q2b_and_case_folding():
    assert Normalizer(NormalizeConfig("none", q2b=True))("ＡＢ\u3000！") == "AB !"
    assert Normalizer(NormalizeConfig("none"))("ＡＢ") == "ＡＢ"
    assert Normalizer(NormalizeConfig("nmt_nfkc_cf"))("Hello ＷＯＲＬＤ") == "hello world"


def test_keep_whitespace():
    n = Normalizer(NormalizeConfig("nfkc", collapse_whitespace=False))
    assert n("  a \t b  ") == "  a   b  "


def test_unknown_form_is_refused():
    with pytest.raises(ValueError, match="unknown normalisation"):
        NormalizeConfig("nfkd")  # type: ignore[arg-type]


def test_chinese_full_width_punctuation_is_kept_on_request_in_every_form():
    line = "你好，世界！（１２３）％ ＡＢ"
    for form in ("nmt_nfkc", "nfkc", "nfc"):
        kept = Normalizer(NormalizeConfig(form, keep_fullwidth_punct=True))(line)
        assert kept.startswith("你好，世界！（"), form
    assert (
        Normalizer(NormalizeConfig(keep_fullwidth_punct=True))(line) == "你好，世界！（123）％ AB"
    )
    assert Normalizer(NormalizeConfig())(line) == "你好,世界!(123)% AB"
    # The noncharacters the punctuation hides as never come back from the input.
    assert Normalizer(NormalizeConfig(keep_fullwidth_punct=True))("\ufdd0好，") == "好，"
    with pytest.raises(ValueError, match="q2b"):
        NormalizeConfig(q2b=True, keep_fullwidth_punct=True)


TABLES = ["_PRE", "_NMT_RULES_BATCH", "_Q2B", "_HIDE", "_SHOW", "_NONCHARACTERS"]


@pytest.mark.parametrize("name", TABLES)
def test_no_table_maps_a_character_to_another_of_its_keys(name):
    # What lets `_translate` replace one character at a time and equal `str.translate`.
    table = getattr(normalize, name)
    assert not {ord(c) for new in table.values() if new for c in new} & set(table)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(TABLES), st.data())
def test_translate_by_replacing_equals_str_translate(name, data):
    table = getattr(normalize, name)
    mapped = [chr(cp) for cp in table] + [new for new in table.values() if new]
    text = data.draw(st.text(st.sampled_from([*mapped, "a", "你", "\n", " "]), max_size=40))
    assert normalize._translate(text, table) == text.translate(table)


# Characters around which SentencePiece's whitespace rule and NFKC act: spaces and what
# becomes one, NFKC forms that begin with a space, combining marks, controls, and the
# separator the batch path joins lines with.
tricky_line = st.text(
    alphabet=st.sampled_from(
        list(" \t\r\x0b\x85\u3000\u200b\u2028\ufeff\xa0\xa8\xb4\u0301\u0308\ufe49")
        + list("a中，！ＡＢ１\ufdef\ufdd0\x00\x01")
    ),
    max_size=8,
)


@settings(max_examples=400, deadline=None)
@given(
    st.lists(tricky_line, min_size=1, max_size=8),
    st.sampled_from(["nmt_nfkc", "nmt_nfkc_cf"]),
    st.booleans(),
)
def test_one_sentencepiece_call_per_batch_equals_one_per_line(lines, rule, collapse):
    ref = reference(rule, collapse)
    normalizer = Normalizer(NormalizeConfig(rule, collapse_whitespace=collapse))
    assert normalizer._spm_batch(lines) == [ref.normalize(without_extras(x)) for x in lines]
