"""TSV files (Tatoeba's, `--tsv`): lines of one file, read as the lines of a pair are, and
split into the pair's two columns where they are loaded, once decoded (a tab byte may be
part of a character in UTF-16, and a line that does not decode is rejected whole)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from nmtpipe.transforms.corpus.raw_corpus import BAD_COLUMNS, RawChunk, Unread, decode_lines
from nmtpipe.transforms.corpus.readers.lines import LinesReader
from nmtpipe.transforms.storage.encodings import UTF8


def split_columns(chunk: RawChunk) -> RawChunk:
    """A chunk of TSV lines as a chunk of pairs, decoded: each line's `chunk.columns`;
    a line that does not decode, or has too few columns, is unread with why (a line the
    lines reader did not read whole stays its `too-long`)."""
    lines, bad = decode_lines(chunk.src, "line", chunk.encodings[0])
    want = max(chunk.columns) + 1
    unread = {u.index: u for u in chunk.unread}
    sides: tuple[list[str], list[str]] = ([], [])
    for i, line in enumerate(lines):
        fields = line.split("\t")
        if i in bad and i not in unread:
            reason, detail, raw = bad[i]
            raw_fields = raw.split(b"\t")
            taken = [raw_fields[c] for c in chunk.columns] if len(raw_fields) >= want else None
            unread[i] = Unread(i, reason, detail, *(taken or (raw, None)))
        elif len(fields) < want and i not in unread:
            detail = f"{len(fields)} tab-separated columns, need at least {want}"
            unread[i] = Unread(i, BAD_COLUMNS, detail, line.encode(), None)
        for side, column in zip(sides, chunk.columns, strict=True):
            side.append("" if i in unread else fields[column])
    src, tgt = ("\n".join(side).encode(UTF8) for side in sides)
    return chunk._replace(
        src=src,
        tgt=tgt,
        encodings=(chunk.encodings[0],) * 2,  # both sides the file's, as a table's are
        unread=tuple(unread[i] for i in sorted(unread)),
        decoded=True,
    )


class TsvReader(LinesReader):
    """One file of tab-separated lines, two of whose columns are the pair."""

    NAME = "tsv"
    PAIRED = False

    def load(self, piece: Any) -> Iterator[RawChunk]:
        return map(split_columns, super().load(piece))
