"""The rules: what both sides must share or neither may have, each its own reason."""

from __future__ import annotations

import pytest

from nmtpipe.transforms.quality.base import Pairs
from nmtpipe.transforms.quality.kinds.rules import RulesConfig, RulesScorer

CASES = [
    ("It costs 1,500 dollars.", "它要1500美元。", None),
    ("Dundee Stars 5-3 Belfast Giants", "邓迪队以105-3战胜贝尔法斯特巨人队", "numbers"),
    ("I have three cats.", "我有3只猫。", None),  # one side spells it: not compared
    ("See https://example.com/a for more.", "详见 https://example.com/a。", None),
    ("See https://example.com/a for more.", "详见网站。", "urls"),
    ("Write to tom@example.com.", "写信给 ann@example.com。", "emails"),
    ("The A380 landed.", "A380着陆了。", None),
    ("The A380 landed.", "A350着陆了。", "numbers"),  # numbers come first
    ("The MP3 player broke.", "CD播放器坏了。", "codes"),
    ("The A380 landed.", "空中客车着陆了。", None),  # no Latin letters there to compare
    ("!!! ??? ### ***", "！！！", "punctuation"),
    ("12345 67890 = 4", "12345 67890 = 4", "letters"),
    ("no no no no no no", "不不", "repetition"),
    ("Hahahahaha!!!!!!!!!!", "哈哈", "repetition"),
    ("Are you sure?", "你确定吗？", None),
    ("Are you sure?", "我确定。", "terminal"),
    ("How rude of you!", "你真粗鲁。", None),
    ("The market is worth £2.8bn.", "市场价值28亿英镑。", None),  # significant digits
    ("We met at 7.55am.", "我们早上7:55见面。", None),  # the same digits
    ("I was born on April 3, 1950.", "我出生于1950年4月3日。", None),  # 4: a word there
    ("Christmas is December 25th.", "圣诞节是12月25日。", None),  # 12: a month, a word there
    ("She wrote 5 novels in 5 years.", "她在8年里写了5本小说。", "numbers"),  # 5 twice: one 8
    ("51 Republicans and 49 Democrats", "51名共和党人和51名民主党人", "numbers"),  # 49: no word
    ("About 40,000 new cases in 2018.", "2018年新增40,2个病例。", "numbers"),  # 402, not 40 and 2
    ("Sie wuchs um 2,5 Prozent.", "It grew by 2.5 percent.", None),  # a decimal comma
    ("It was built in the 19th century.", "它建于19世纪。", None),  # 19th: no code
]


@pytest.mark.parametrize(("src", "tgt", "reason"), CASES)
def test_each_rule_rejects_what_it_names_and_keeps_translations(src, tgt, reason):
    scorer = RulesScorer(RulesConfig())
    pairs = Pairs([src], [tgt], ("en", "zh"))
    found = [v.reason for v in scorer.judge(scorer.score([], pairs), pairs, []) if v.rows.size]
    assert found[:1] == ([reason] if reason else [])


def test_a_rule_turned_off_rejects_nothing():
    scorer = RulesScorer(RulesConfig(rules_off=("numbers", "terminal")))
    pairs = Pairs(["It is 5.", "Are you sure?"], ["现在是6。", "我确定。"], ("en", "zh"))
    assert all(v.rows.size == 0 for v in scorer.judge({}, pairs, []))
    with pytest.raises(ValueError, match="unknown rule number; the rules: numbers, urls"):
        RulesConfig.__dataclass_fields__["rules_off"].metadata["nmtpipe.option"].parse("number")
