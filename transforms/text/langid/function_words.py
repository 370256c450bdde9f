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


@functools.cache
def _ascii_alnum() -> bytes:
    """`bytes.translate` table: 1 for T2T's alphanumeric ASCII characters, else 0."""
    return bytes(int(t2t_tokenizer.is_alnum(chr(b))) for b in range(256))


def _words(text: str) -> tuple[pa.StringArray, np.ndarray]:
    """The alphanumeric runs (T2T's word tokens) of `\n`-joined lower-case lines, and
    the line of each: numpy over the code points, no Python string per word."""
    if text.isascii():
        raw = text.encode("ascii")
        cps: np.ndarray = np.frombuffer(raw, dtype=np.uint8)
        alnum = np.frombuffer(raw.translate(_ascii_alnum()), dtype=bool)
    else:
        cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
        alnum = t2t_tokenizer.alnum_table()[cps]
    starts = np.empty(alnum.size, dtype=bool)
    starts[:1] = alnum[:1]
    np.greater(alnum[1:], alnum[:-1], out=starts[1:])
    line = np.searchsorted(np.flatnonzero(cps == ord("\n")), np.flatnonzero(starts))
    chars, starts = cps[alnum], starts[alnum]
    if chars.size == 0:
        return pa.array([], pa.string()), line
    return t2t_tokenizer.string_array(chars, starts, cps.dtype == np.uint8), line


def _per_line(index: pa.Array, line: np.ndarray, n: int) -> np.ndarray:
    """Hits per line and language from each word's `index` in the lexicon (null: not
    listed) and its `line`."""
    found = index.is_valid().to_numpy(zero_copy_only=False)
    rows = line[found]
    listed = _lexicon()[1][index.drop_null().to_numpy()]
    return np.stack(
        [np.bincount(rows[listed[:, j]], minlength=n) for j in range(len(LANGUAGES))], axis=1
    )


def _hits(text: str, n: int) -> np.ndarray:
    words, line = _words(text.lower())
    return _per_line(pc.index_in(words, value_set=_lexicon()[0]), line, n)


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
    index = pc.index_in(lowered, value_set=_lexicon()[0]).take(encoded.indices)
    out = _per_line(index, side.owner, n)
    odd = pc.match_substring(distinct, _SPLITS_WHEN_LOWERED).take(encoded.indices)
    if pc.any(odd).as_py():
        rows = np.unique(side.owner[odd.to_numpy(zero_copy_only=False)])
        out[rows] = hits([side.lines[i] for i in rows.tolist()])
    return out
