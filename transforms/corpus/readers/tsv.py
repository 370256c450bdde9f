"""TSV files (Tatoeba's, `--tsv`): lines of one file, read as the lines of a pair are; the
cleaner splits each line into its columns (`text/clean.py`), since a line is split only
once it is decoded."""

from __future__ import annotations

from nmtpipe.transforms.corpus.readers.lines import LinesReader


class TsvReader(LinesReader):
    """One file of tab-separated lines, two of whose columns are the pair."""

    NAME = "tsv"
    PAIRED = False
