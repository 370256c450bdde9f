"""The pair scorers by `--scorers` name: a new scorer is its module in this folder and its
`register` line here, which also gives `nmtpipe prepare` its config's options
(`QualityConfig`) and the reference pages their rows."""

from __future__ import annotations

import dataclasses

from nmtpipe.transforms.options import (
    comma_list,
    nested,
    non_negative_int,
    option,
    with_configs,
)
from nmtpipe.transforms.quality.base import DuplicateKeys, LearnedScorer, PairScorer, Scorer
from nmtpipe.transforms.quality.kinds.fluency import FluencyScorer
from nmtpipe.transforms.quality.kinds.length import LengthScorer
from nmtpipe.transforms.quality.kinds.lexical import LexicalScorer
from nmtpipe.transforms.quality.kinds.neardup import NearDupScorer
from nmtpipe.transforms.quality.kinds.rules import RulesScorer

KINDS: dict[str, type[Scorer]] = {}  # in registration order: the help's and the passes'


def register(cls: type[Scorer]) -> None:
    """Serve `cls` under its NAME. The driver's module makes its config of the kinds
    registered when it is imported (`prepare_plan.QualityConfig`): register before that."""
    if cls.NAME in KINDS:
        raise ValueError(f"{cls.__name__}: {cls.NAME} already registered")
    KINDS[cls.NAME] = cls


register(RulesScorer)
register(LexicalScorer)
register(LengthScorer)
register(FluencyScorer)
register(NearDupScorer)

# On unless --scorers says otherwise: the rules, the learned translation score and the
# near-duplicates, as the issue asks, and length, each safe on clean corpora (>= 99% of
# the bundled Tatoeba and NTREX-128 pairs kept); fluency and MinHash cost more than
# they catch there (benchmarks/RESULTS.md).
DEFAULT = ("rules", "lexical", "length", "neardup")
# About the most pairs the learned scorers learn from: past it learning costs no more,
# and only scoring grows with the corpus. Fifteen times the bundled Tatoeba, whose clean
# pairs the scores learned from all of it keep at 99.5%; how much a sample of this size
# loses against millions of real pairs is not measured (benchmarks/RESULTS.md,
# "Learning from a sample").
LEARN_PAIRS = 500_000


def _scorers(text: str) -> tuple[str, ...]:
    names = comma_list(text)
    if names == ("none",):
        return ()
    if names == ("all",):
        return tuple(KINDS)
    unknown = [name for name in names if name not in KINDS]
    if unknown:
        raise ValueError(f"unknown scorer {', '.join(unknown)}; the scorers: {', '.join(KINDS)}")
    return names


@dataclasses.dataclass(frozen=True)
class _Shared:
    """Which scorers judge the pairs, and how many pairs those that learn learn from;
    each one's options are the fields after this."""

    scorers: tuple[str, ...] = option(
        DEFAULT,
        parse=_scorers,
        metavar="NAME,...",
        help="the pair scorers that add their scores beside the pairs and reject by their "
        f"thresholds, of {', '.join(KINDS)} ('all': every one; 'none': no scores)",
    )
    learn_pairs: int = option(
        LEARN_PAIRS,
        parse=non_negative_int,
        metavar="N",
        help="the learned scorers learn from about N of the pairs where there are more (a "
        "sample picked by each pair's id, the same on every runner; trusted pairs all), and "
        "score every pair: learning costs the same beyond N pairs (0: learn from all)",
    )

    def kinds(self) -> list[Scorer]:
        """The chosen scorers, each with its options, in registration order."""
        return [KINDS[name](getattr(self, name)) for name in KINDS if name in self.scorers]

    def pair_scorers(self) -> list[PairScorer]:
        return [k for k in self.kinds() if isinstance(k, PairScorer)]

    def learned_scorers(self) -> list[LearnedScorer]:
        """The chosen scorers that learn from the train pairs first."""
        return [k for k in self.kinds() if isinstance(k, LearnedScorer)]

    def duplicate_keys(self) -> list[DuplicateKeys]:
        return [k for k in self.kinds() if isinstance(k, DuplicateKeys)]


def quality_config(module: str = __name__, group: str | None = None) -> type:
    """The config class of the scorers registered now: `scorers` and a field per kind,
    named as the kind, holding its options. `module` is where it will be found as
    `QualityConfig`: Beam's pickler then sends it by name (by value, unpickling it in the
    same process would write the copy's fields over the class's own)."""
    fields = ((name, cls.Config, nested(cls.Config, group=group)) for name, cls in KINDS.items())
    doc = "The pair scorers and their options."
    return with_configs(_Shared, fields, name="QualityConfig", module=module, doc=doc)
