"""Function words of Latin-script languages: the cheap positive evidence of `identifier.py`.

A line of English with "the", "you" or "with" in it and no word that only German,
French, Spanish, Italian, Dutch or Portuguese use is English; no model needs to look
at it. Each list holds frequent words of its language that the other listed languages
do not use as words of their own: ambiguous ones ("a", "in", "die", "was", "is", "so",
"me", "no", "de", "over") are left out, since they would only blur the evidence, and so
are foreign words that are English words too ("come", "met", "hat", "van", "per",
"pour", "los", "um": English lines hold them, and each sends a line to the model); a word
listed for two of the others ("como", "en") counts for both. Words are
lower-case alphanumeric runs, as T2T's tokenizer cuts them ("don't" gives "don" and
"t", neither of which is listed).

Counting is vectorised: numpy finds the words, Arrow looks them up, `bincount` adds
them up by line. In `prepare` the words are the side's T2T tokens, already cut for the
token counts (`side_hits`), and only the distinct ones are lower-cased.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from nmtpipe.transforms.text import t2t_tokenizer
from nmtpipe.transforms.text.langid import scripts

if TYPE_CHECKING:  # side_text imports this package: at run time that would be a cycle
    from nmtpipe.transforms.text.side_text import SideText

WORDS: dict[str, str] = {
    "en": "the you your are were this that with what they them their she his him of and to "
    "for it be been does did not my there which who how why would could should about from "
    "by if when just very know like get going want one out up has have isn doesn didn "
    "can couldn wouldn shouldn these those our us its than then only after into "
    "because never always something nothing anything everything think tell said ll some "
    "need maybe time nobody often make made heard thought bought yesterday tomorrow "
    "tonight many much every really please sorry go went",
    "de": "der das und ist nicht ein eine einen einem ich sie auf für dem den des sich "
    "auch wird werden von zu im noch nach wie aber oder bei aus wir ihr sind haben "
    "kann können dass über nur schon sehr jetzt hier wenn dann mir mich dich uns",
    "fr": "le la les est des une du pas que qui dans sur avec ce il elle nous vous "
    "je sont au aux ne ses en mais cette été être avoir fait très tout tous ont leur "
    "comme où aussi bien",
    "es": "el las y es en por con una del su lo como más pero para está esta este "
    "sus muy también hay ser fue han cuando sobre yo tiene puede",
    "it": "il di che è sono della del nel gli questo questa anche più ma alla delle "
    "dei degli hanno essere stato molto sua suo loro cosa",
    "nl": "het een en ik niet op dat zijn voor maar ook wat bij wordt werd heeft "
    "hebben deze naar uit kan worden hun nog zij wij jullie geen",
    "pt": "os uma não em com por mais foi são ele ela está esta muito também já dos "
    "das seu sua pelo pela isso como mas ao você tem",
}
LANGUAGES = tuple(WORDS)


@functools.cache
def _lexicon() -> tuple[pa.Array, np.ndarray]:
    """Every listed word once, and which languages list it (a word × language matrix)."""
    words = sorted({w for text in WORDS.values() for w in text.split()})
    member = np.array([[w in WORDS[lang].split() for lang in LANGUAGES] for w in words])
    return pa.array(words), member


def _words(text: str) -> tuple[pa.StringArray, np.ndarray]:
    """The alphanumeric runs (T2T's word tokens) of `\n`-joined lower-case lines, and
    the line of each: numpy over the code points, no Python string per word."""
    cps = t2t_tokenizer.code_points(text, text.isascii())
    alnum = t2t_tokenizer.alnum_of(cps)
    cut = np.empty(alnum.size, dtype=bool)
    cut[:1] = True
    np.not_equal(alnum[1:], alnum[:-1], out=cut[1:])
    runs, first = t2t_tokenizer.runs(text, cps, cut)
    words = np.flatnonzero(alnum[first])
    line = np.searchsorted(np.flatnonzero(cps == ord("\n")), first[words])
    return runs.take(pa.array(words)), line


def _lexicon_rows(words: pa.Array) -> np.ndarray:
    """Each word's row in the lexicon, -1 where it is not listed."""
    return pc.index_in(words, value_set=_lexicon()[0]).fill_null(-1).to_numpy()


def _per_line(rows: np.ndarray, line: np.ndarray, n: int) -> np.ndarray:
    """Hits per line and language from each word's lexicon `rows` (-1: not listed) and
    its `line`."""
    found = np.flatnonzero(rows >= 0)
    lines = line[found]
    listed = _lexicon()[1][rows[found]]
    return np.stack(
        [np.bincount(lines[listed[:, j]], minlength=n) for j in range(len(LANGUAGES))], axis=1
    )


def _hits(text: str, n: int) -> np.ndarray:
    words, line = _words(text.lower())
    return _per_line(_lexicon_rows(words), line, n)


def hits(lines: list[str]) -> np.ndarray:
    """Function words of each language per line: an (n, len(LANGUAGES)) int array.

    ASCII lines are looked at one byte per character, the others four."""
    return scripts.ascii_apart(lines, len(LANGUAGES), _hits)


# The one character whose lower case is two characters, the second not alphanumeric
# (İ → i + U+0307): lower-casing a whole line then cuts words where lower-casing its
# tokens does not. Every other code point lowers to one character of the same kind
# (the tests check them all), so a word is the same either way.
_SPLITS_WHEN_LOWERED = "\u0130"


def side_hits(side: SideText) -> np.ndarray:
    """`hits(side.lines)`, from the side's T2T tokens: its alphanumeric tokens are the
    words `hits` cuts, and lower-casing the distinct ones is lower-casing the lines,
    except in lines with İ, which are counted as `hits` counts them."""
    n = len(side.lines)
    encoded = pc.dictionary_encode(side.tokens)
    distinct = encoded.dictionary
    lowered = pc.ascii_lower(distinct)
    other = pc.invert(pc.string_is_ascii(distinct))
    if pc.any(other).as_py():
        rest = [word.lower() for word in distinct.filter(other).to_pylist()]
        lowered = pc.replace_with_mask(lowered, other, pa.array(rest, pa.string()))
    which = encoded.indices.to_numpy()  # each token's distinct word
    out = _per_line(_lexicon_rows(lowered)[which], side.owner, n)
    odd = pc.match_substring(distinct, _SPLITS_WHEN_LOWERED).to_numpy(zero_copy_only=False)
    if odd.any():
        rows = np.unique(side.owner[odd[which]])
        out[rows] = hits([side.lines[i] for i in rows.tolist()])
    return out
