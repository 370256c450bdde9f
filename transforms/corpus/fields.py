"""Which two fields of a record hold the source and the target.

A table names its fields by dotted paths into structs (`translation.en`, as Hugging Face
`datasets` writes translation data); a TMX names its languages in `xml:lang`, in any
case and with or without a region (`zh-CN`, `zh_TW`, `ZH` are all Chinese). Without
fields given, a table's are the `translation` struct's fields named as the two languages,
or columns so named.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from nmtpipe.transforms.errors import ConfigError, InputError

# A schema as far as it matters here: field name → its fields if it is a struct, its
# type's name (`string`, `int64`) otherwise.
Tree = Mapping[str, "Tree | str"]
TEXT_TYPES = ("string", "large_string", "utf8", "large_utf8", "str")
DEFAULT_STRUCT = "translation"


def parse_fields(text: str) -> tuple[str, str]:
    """`"translation.en,translation.zh"` → the two fields (source, target)."""
    found = tuple(f.strip() for f in text.split(","))
    if len(found) != 2 or not all(found) or found[0] == found[1]:
        raise ConfigError(
            f"--table-columns wants two different fields like translation.en,translation.zh "
            f"or en,zh, not {text!r}"
        )
    return found  # type: ignore[return-value]


def language_key(code: str) -> tuple[str, str]:
    """(language, region) of a code as TMX and column names write it: `zh_TW` →
    ("zh", "tw"), `ZH` → ("zh", "")."""
    parts = re.split(r"[-_]", code.strip().lower(), maxsplit=1)
    return parts[0], parts[1] if len(parts) > 1 else ""


def matches(code: str, wanted: str) -> bool:
    """Whether `code` names language `wanted`: the same code in any case and spelling
    of the separator, or a code of that language with a region when `wanted` has none."""
    have, want = language_key(code), language_key(wanted)
    return have == want or (not want[1] and have[0] == want[0])


def pick_language(codes: list[str], wanted: str) -> str | None:
    """The one code of `codes` that names `wanted` (an exact match first); None when
    none does; InputError-worthy ambiguity is the caller's to report, so several
    matches give None too."""
    exact = [c for c in codes if language_key(c) == language_key(wanted)]
    if len(exact) == 1:
        return exact[0]
    close = [c for c in codes if matches(c, wanted)]
    return close[0] if len(close) == 1 else None


def resolve(tree: Tree, path: str) -> Tree | str | None:
    """What a dotted path reaches in `tree`: a column named with the dots first, then
    struct fields; None where it reaches nothing."""
    if path in tree:
        return tree[path]
    head, dot, rest = path.partition(".")
    node = tree.get(head)
    if not dot or not isinstance(node, Mapping):
        return None
    return resolve(node, rest)


def default_fields(tree: Tree, langs: tuple[str, str]) -> tuple[str, str] | None:
    """The `translation` struct's fields named as the languages, or top-level columns
    so named, or those of the only struct that has both; None if none has both."""
    structs = [name for name, node in tree.items() if isinstance(node, Mapping)]
    ordered = [DEFAULT_STRUCT] if DEFAULT_STRUCT in structs else []
    candidates: list[tuple[str, Tree]] = [(f"{s}.", tree[s]) for s in ordered]  # type: ignore[misc]
    candidates.append(("", tree))
    others = [s for s in structs if s != DEFAULT_STRUCT]
    if len(others) == 1:
        candidates.append((f"{others[0]}.", tree[others[0]]))  # type: ignore[arg-type]
    for prefix, node in candidates:
        names = [n for n, v in node.items() if not isinstance(v, Mapping)]
        found = [pick_language(names, lang) for lang in langs]
        if found[0] and found[1]:
            return f"{prefix}{found[0]}", f"{prefix}{found[1]}"
    return None


def describe(tree: Tree, prefix: str = "") -> str:
    """The fields of `tree`, for messages: `id, translation.{de,en}`."""
    parts = []
    for name, node in tree.items():
        if isinstance(node, Mapping):
            parts.append(f"{prefix}{name}.{{{','.join(node)}}}")
        else:
            parts.append(f"{prefix}{name}")
    return ", ".join(parts) or "none"


def checked_fields(
    tree: Tree, given: tuple[str, str] | None, langs: tuple[str, str], url: str
) -> tuple[str, str]:
    """The two text fields of a table at `url` with schema `tree`: `given`, or the
    default; InputError naming the file, what it has and what to say instead."""
    fields = given or default_fields(tree, langs)
    if fields is None:
        raise InputError(
            f"{url}: no fields for {langs[0]} and {langs[1]} (it has {describe(tree)}); "
            "name them with --table-columns SRC,TGT"
        )
    for path in fields:
        node = resolve(tree, path)
        if node is None:
            raise InputError(f"{url}: no field {path} (it has {describe(tree)})")
        if isinstance(node, Mapping) or node not in TEXT_TYPES:
            kind = "a struct" if isinstance(node, Mapping) else node
            raise InputError(f"{url}: field {path} is {kind}, not text")
    return fields
