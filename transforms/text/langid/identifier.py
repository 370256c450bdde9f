"""Is each line in the language its side declares? Script evidence first, a model after.

A model alone is both slow and rash on short lines ("I'll do it." is Italian to it,
"Cheers!" Dutch), so a line goes through three stages, each cheaper than the next:

1. Scripts (`scripts.py`, vectorised). Letters are counted per script and weighted the
   way the length-ratio filter weighs them (a Han character carries about as much as
   three Latin letters). A line with no letters has nothing to judge and is kept.
2. Positive evidence, per declared language. Chinese: Han and no kana or Hangul;
   Japanese: kana; Korean: Hangul; a Latin-script language: one of its function words
   and none that only a confusable language uses (`function_words.py`). Such a line is
   accepted without a model: almost every line of a clean corpus is. Chinese with two
   or more different characters only colloquial Cantonese writes (嘅, 咗, 喺, 佢, ...)
   is Cantonese, a rule no model here knows.
3. The rest are suspects, judged by lingua (offline, its models in the wheel) among the
   candidates of the line's dominant script: English, German, French, Spanish, Italian,
   Dutch and Portuguese for Latin; Chinese, Japanese and Korean for Han, kana and
   Hangul; Russian and Ukrainian for Cyrillic. A suspect is wrong-language only if the
   model names another language with at least `threshold` confidence and the line has
   the evidence for a verdict: `min_letters` letters when it is written in Latin letters
   (names, numbers, "OK." and two-word exclamations are kept for want of evidence), two
   letters in any other script (the script itself is evidence). A line dominated by a
   script no candidate writes (Greek, Arabic, Thai, ... on a side declared otherwise) is
   `und` with its share of letters as confidence. Where function words speak for the
   model's choice (two or more German words and no English one), the model need only
   prefer it; where they speak against its English (two or more German words, at most
   one English one: a German line full of English names), they overrule it; where the
   model cannot tell a line with kana or Hangul, the script does.
   lingua's fast mode (trigrams) judges first; only a line it would reject is judged
   again by its accurate mode, whose models take 20 times longer to load (2.1 CPU
   seconds and 234 MB for the Latin candidates). An identifier built with
   `confirm=False` never loads them: such a line is returned as `PENDING`, for one
   that may (in `prepare`, a stage of its own, so that one worker loads the models
   instead of every worker).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from nmtpipe.transforms.text.langid import function_words, scripts

# Declared language → (lingua's name for it, its script group). Codes are matched by
# their first subtag, lower-cased: zh-TW, zh_Hant, cmn and zho are all Chinese.
_LINGUA = {
    "en": "ENGLISH", "de": "GERMAN", "fr": "FRENCH", "es": "SPANISH", "it": "ITALIAN",
    "nl": "DUTCH", "pt": "PORTUGUESE", "zh": "CHINESE", "ja": "JAPANESE", "ko": "KOREAN",
    "ru": "RUSSIAN", "uk": "UKRAINIAN",
}  # fmt: skip
_ALIASES = {
    "eng": "en", "deu": "de", "ger": "de", "fra": "fr", "fre": "fr", "spa": "es",
    "ita": "it", "nld": "nl", "dut": "nl", "por": "pt", "zho": "zh", "chi": "zh",
    "cmn": "zh", "jpn": "ja", "kor": "ko", "rus": "ru", "ukr": "uk",
}  # fmt: skip
LATIN_GROUP, CJK_GROUP, CYRILLIC_GROUP, OTHER_GROUP = range(4)
_GROUP_NAMES = ("Latin", "CJK", "Cyrillic", "other")
_GROUP_OF = {
    **dict.fromkeys(function_words.LANGUAGES, LATIN_GROUP),
    "zh": CJK_GROUP, "yue": CJK_GROUP, "ja": CJK_GROUP, "ko": CJK_GROUP,
    "ru": CYRILLIC_GROUP, "uk": CYRILLIC_GROUP,
}  # fmt: skip
CANDIDATES = {
    LATIN_GROUP: function_words.LANGUAGES,
    CJK_GROUP: ("zh", "ja", "ko"),
    CYRILLIC_GROUP: ("ru", "uk"),
}
KNOWN = tuple(sorted(_GROUP_OF))
_CODE = {name: code for code, name in _LINGUA.items()}
CANTONESE_MIN = 2  # distinct characters only colloquial Cantonese writes
_CANTONESE = frozenset(scripts.CANTONESE_CHARS)
# What a model may name for a declared language without making it wrong: written
# Cantonese shares most of its text with standard Chinese, which no model here tells apart.
_SAME = {"yue": {"zh"}}
_SUBTAG = re.compile(r"[-_]")


def canonical(code: str) -> str | None:
    """The language `code` names, as this module knows it, or None if it does not."""
    head = _SUBTAG.split(code.lower(), maxsplit=1)[0]
    head = _ALIASES.get(head, head)
    return head if head in _GROUP_OF else None


@dataclass(frozen=True)
class LangIdConfig:
    """Which sides are checked (their languages, canonical; None: not checked) and how
    sure the model must be."""

    src: str | None = None
    tgt: str | None = None
    threshold: float = 0.9
    min_letters: int = 16

    def __post_init__(self) -> None:
        if not 0.5 <= self.threshold <= 1:
            raise ValueError("the language identification threshold must be in [0.5, 1]")
        if self.min_letters < 1:
            raise ValueError("the minimum number of letters must be at least 1")
        for code in (self.src, self.tgt):
            if code is not None and code not in _GROUP_OF:
                raise ValueError(f"language identification does not know {code!r}")

    @property
    def enabled(self) -> bool:
        return self.src is not None or self.tgt is not None


class Detection(NamedTuple):
    """What a line was found to be instead: a language code, how sure, and why."""

    language: str
    confidence: float
    evidence: str


def uses_words(lang: str) -> bool:
    """Whether `lang`'s lines are judged by their function words too."""
    return _GROUP_OF[lang] == LATIN_GROUP


def _groups(counts: np.ndarray) -> np.ndarray:
    """Weighted letters per script group: (n, 4), columns as the *_GROUP constants."""
    cjk = sum(counts[:, s] * w for s, w in scripts.WEIGHTS.items())
    return np.stack(
        [counts[:, scripts.LATIN], cjk, counts[:, scripts.CYRILLIC], counts[:, scripts.OTHER]],
        axis=1,
    ).astype(np.float64)


def _accepted(lang: str, counts: np.ndarray, hits: np.ndarray | None) -> np.ndarray:
    """Lines with positive evidence of `lang` (stage 2), as a boolean mask (`hits`: the
    lines' function words, for a Latin-script `lang`)."""
    kana, hangul, han = (counts[:, s] for s in (scripts.KANA, scripts.HANGUL, scripts.HAN))
    if lang in ("zh", "yue"):
        return (han > 0) & (kana == 0) & (hangul == 0)
    if lang == "ja":
        return (kana > 0) & (hangul == 0)
    if lang == "ko":
        return (hangul > 0) & (kana == 0)
    if lang in ("ru", "uk"):
        return np.ones(len(counts), dtype=bool)  # no confusable Cyrillic language is weighed
    assert hits is not None
    own = function_words.LANGUAGES.index(lang)
    others = np.delete(hits, own, axis=1).sum(axis=1)
    return (hits[:, own] > 0) & (others == 0)


def _backed(lang: str, hits: np.ndarray) -> frozenset[str]:
    """The languages the function words of a line (`hits`) speak for, against `lang`."""
    if lang not in function_words.LANGUAGES or hits[function_words.LANGUAGES.index(lang)]:
        return frozenset()
    return frozenset(c for c, n in zip(function_words.LANGUAGES, hits, strict=True) if n >= 2)


def _outvoted(lang: str, found: str, hits: np.ndarray) -> bool:
    """Whether the line's function words overrule the model, which found English in a
    line declared `lang` (another Latin-script language): two or more of `lang`'s and at
    most one English one. The model reads letters, and a German news sentence full of
    English names ("... ist Leiter des Scottish Council of Independent Schools.") looks
    English to it at 0.94-1.00; its grammar words say German, and a name brings one
    "of" or "the" at most. Between two other languages the lists are too thin to
    overrule it: a Spanish line holds French's "la" and "que" as often as its own "por"
    (tried on NTREX-128: 11 of 300 Spanish lines would pass as French)."""
    if found != "en" or lang not in function_words.LANGUAGES:
        return False
    own = int(hits[function_words.LANGUAGES.index(lang)])
    return own >= 2 and int(hits[function_words.LANGUAGES.index("en")]) <= 1


def _by_script(lang: str, counts: np.ndarray) -> Detection | None:
    """Japanese or Korean by their own letters, where the model cannot tell (lingua
    gives up on some lines mixing kana with much Latin)."""
    cjk = counts[scripts.HAN] + counts[scripts.KANA] + counts[scripts.HANGUL]
    for code, script in (("ja", scripts.KANA), ("ko", scripts.HANGUL)):
        if code != lang and counts[script] >= 2:
            share = round(float(counts[script] / cjk), 3)
            return Detection(code, share, f"{counts[script]} {scripts.NAMES[script]} letters")
    return None


# What `wrong` says of a line only the accurate model can judge, when it may not load it.
PENDING = Detection("", 0.0, "for the accurate model to confirm")


class _Suspect(NamedTuple):
    """A line the cheap stages did not clear, with what they found: the script group
    it is judged in, its letters per script, per script group weighted, their sum, and
    its function words per language (Latin-script languages only)."""

    text: str
    group: int
    counts: np.ndarray
    weighted: np.ndarray
    letters: float
    hits: np.ndarray | None


class LanguageIdentifier:
    """Finds the lines that are not in their declared language; build once per worker
    (lingua's models load on first use, per script group; the accurate ones only with
    `confirm`)."""

    def __init__(self, threshold: float = 0.9, min_letters: int = 16, confirm: bool = True) -> None:
        self.threshold, self.min_letters, self.confirm = threshold, min_letters, confirm
        self._detectors: dict[tuple[int, bool], Any] = {}

    def wrong(
        self,
        lines: list[str],
        lang: str,
        counts: np.ndarray | None = None,
        hits: np.ndarray | None = None,
    ) -> dict[int, Detection]:
        """Detections for the lines of `lines` that are not in `lang`, by index
        (`counts`: their `scripts.count`, `hits`: their `function_words.hits` where
        `uses_words(lang)`, if already made)."""
        counts = scripts.count(lines) if counts is None else counts
        weighted = _groups(counts)
        letters = weighted.sum(axis=1)
        dominant = weighted.argmax(axis=1)
        own = _GROUP_OF[lang]
        if own == LATIN_GROUP and hits is None:
            hits = function_words.hits(lines)
        suspect = (letters > 0) & ~((dominant == own) & _accepted(lang, counts, hits))
        found: dict[int, Detection] = {}
        if lang == "zh":
            markers = counts[:, scripts.CANTONESE]
            for i in np.flatnonzero(~suspect & (markers >= CANTONESE_MIN)).tolist():
                # Distinct ones: a Mandarin line may repeat the interjection 唔.
                chars = sorted(set(lines[i]) & _CANTONESE)
                if len(chars) >= CANTONESE_MIN:
                    found[i] = Detection("yue", 1.0, f"Cantonese-only {''.join(chars)}")
        # A suspect is judged in its own script where it has a fair share of it (is the
        # Han of this line Chinese? Chinese lines hold long Latin names), else in its
        # dominant script (is this English?).
        share = weighted[:, own] / np.maximum(letters, 1)
        cjk = counts[:, scripts.HAN] + counts[:, scripts.KANA] + counts[:, scripts.HANGUL]
        own_part = (share >= 0.2) | ((own == CJK_GROUP) & (cjk >= 2))  # names in Latin
        group = np.where(own_part, own, dominant)
        in_group = np.stack(
            [counts[:, scripts.LATIN], counts[:, scripts.HAN] + counts[:, scripts.KANA]
             + counts[:, scripts.HANGUL], counts[:, scripts.CYRILLIC], counts[:, scripts.OTHER]],
            axis=1,
        )[np.arange(len(lines)), group]  # fmt: skip
        need = np.where(group == LATIN_GROUP, self.min_letters, 2)
        for i in np.flatnonzero(suspect & (in_group >= need)).tolist():
            row = hits[i] if hits is not None else None
            line = _Suspect(lines[i], int(group[i]), counts[i], weighted[i], letters[i], row)
            detection = self._judge(line, lang)
            if detection is not None:
                found[i] = detection
        return found

    def _judge(self, line: _Suspect, lang: str) -> Detection | None:
        """The verdict on one suspect line: a detection if it is not in `lang`.

        Where two or more of another language's function words and none of `lang`'s
        speak for the model's choice, the model need only prefer it (two signals
        agree); where `lang`'s outnumber the chosen language's, they overrule the model
        (`_outvoted`).
        """
        group, counts, hits = line.group, line.counts, line.hits
        if group == OTHER_GROUP:
            share = round(float(line.weighted[OTHER_GROUP] / line.letters), 3)
            if share < self.threshold:
                return None
            return Detection("und", share, "letters of a script no candidate writes")
        scores = self._scores(line.text, group, accurate=False)
        top = max(scores, key=lambda c: (scores[c], c), default=None)
        if top is None or scores[top] == 0:
            return _by_script(lang, counts) if group == CJK_GROUP else None
        accepted = {lang, *_SAME.get(lang, ())}
        if not accepted & set(CANDIDATES[group]):
            # Written in a script `lang` does not use: wrong whatever the model says;
            # the model only names the language.
            return Detection(top, round(scores[top], 3), f"{_GROUP_NAMES[group]} script")
        # The model weighs `lang` itself: its fast mode clears a line, its accurate
        # mode must confirm a rejection (fast mode alone takes 0.2% of clean Tatoeba
        # lines for another language).
        backed = _backed(lang, hits) if hits is not None else frozenset()
        if self._by_model(scores, lang, backed) is None:
            return None
        if not self.confirm:
            return PENDING
        found = self._by_model(self._scores(line.text, group, accurate=True), lang, backed)
        if found is not None and hits is not None and _outvoted(lang, found.language, hits):
            return None
        return found

    def _by_model(
        self, scores: dict[str, float], lang: str, backed: frozenset[str]
    ) -> Detection | None:
        """The model's verdict from its `scores`: a detection if it is sure enough that
        the line is not in `lang` (nor in a language `lang` is taken for)."""
        top = max(scores, key=lambda c: (scores[c], c), default=None)
        accepted = {lang, *_SAME.get(lang, ())}
        if top is None or top in accepted:
            return None
        own = sum(scores.get(c, 0.0) for c in accepted)
        if 1 - own < (0.5 if top in backed else self.threshold):
            return None
        return Detection(top, round(scores[top], 3), f"model, {lang} {own:.3f}")

    def _scores(self, line: str, group: int, accurate: bool) -> dict[str, float]:
        """lingua's confidence per candidate of `group` for `line`."""
        values = self._detector(group, accurate).compute_language_confidence_values(line)
        return {_CODE[v.language.name]: float(v.value) for v in values}

    def _detector(self, group: int, accurate: bool) -> Any:
        """lingua's detector for the candidates of `group`: its low-accuracy mode (trigram
        models, 0.1 s to load and twice as fast) or its high-accuracy one (models of one
        to five letters, 1.7 CPU seconds to load), built only when first needed.

        Its models are preloaded: lingua then reads them on all cores at once (0.84 s
        instead of 1.66 s on two), where loading on first use reads one at a time,
        holding the GIL. The models and so the scores are the same."""
        if (group, accurate) not in self._detectors:
            from lingua import Language, LanguageDetectorBuilder  # loads a native library

            langs = [getattr(Language, _LINGUA[c]) for c in CANDIDATES[group]]
            builder = LanguageDetectorBuilder.from_languages(*langs)
            builder = builder if accurate else builder.with_low_accuracy_mode()
            self._detectors[group, accurate] = builder.with_preloaded_language_models().build()
        return self._detectors[group, accurate]
