"""One Chinese script with OpenCC, counted."""

from __future__ import annotations

import pytest

from nmtpipe.transforms.text.zh_script import ScriptConverter


def test_conversion_goes_phrase_by_phrase_and_counts_changed_lines():
    lines, changed = ScriptConverter("simplified")(["他的頭髮很長。", "我喜欢体育。", ""])
    assert lines == ["他的头发很长。", "我喜欢体育。", ""] and changed == 1
    lines, changed = ScriptConverter("traditional")(["我喜欢体育。"])
    assert lines == ["我喜歡體育。"] and changed == 1


def test_keep_is_not_a_conversion():
    with pytest.raises(ValueError, match="no conversion"):
        ScriptConverter("keep")
