"""Chinese in one script: OpenCC's conversion of a chunk of lines, counted.

Tatoeba and most crawls mix Simplified and Traditional Chinese; a model trained on both
learns two spellings of one language and writes them mixed. Converting the Chinese side
before deduplication and vocabulary building gives one spelling (and lets two copies of
a pair that differ only in script deduplicate). OpenCC converts phrase by phrase
(頭髮 → 头发, 體育 → 体育), not character by character.
"""

from __future__ import annotations

import operator
from typing import Literal

import opencc

Script = Literal["simplified", "traditional", "keep"]
SCRIPTS: tuple[str, ...] = ("simplified", "traditional", "keep")
_CONFIGS = {"simplified": "t2s", "traditional": "s2t"}


class ScriptConverter:
    """Converts lines to one Chinese script; build once per worker."""

    def __init__(self, script: Script) -> None:
        if script not in _CONFIGS:
            raise ValueError(f"no conversion to {script!r}; choose from {', '.join(_CONFIGS)}")
        self._cc = opencc.OpenCC(_CONFIGS[script])

    def __call__(self, lines: list[str]) -> tuple[list[str], int]:
        """The converted lines (one call for the chunk) and how many changed."""
        if not lines:
            return lines, 0
        converted = self._cc.convert("\n".join(lines)).split("\n")
        return converted, sum(map(operator.ne, lines, converted))
